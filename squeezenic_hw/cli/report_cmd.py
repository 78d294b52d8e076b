"""``squeezenic-hw report``: what the plugin costs on an Alveo U280 and how it grows with the
host bandwidth (a sum of per-block Yosys syntheses, cached; ``docs/report.md``)."""

import sys

from . import CliError
from .cluster_options import add_cluster_options, cluster_choice, scheduler_errors
from .output import add_format_option, markdown_table, render

NAME = "report"
HELP = ("U280 resources of the plugin by host bandwidth: per-block Yosys synthesis "
        "(cached), beside the paper's Table 6")

_RESOURCE_TABLE = ["host_bw", "lanes", "codec", "ratio", "wire_gbps_at_full_rate", "fits_wire",
                   "codecs", "gen_codecs", "rx_lanes", "LUT", "LUT_mem", "FF", "CARRY", "DSP",
                   "BRAM", "URAM", "CLB_est", "LUT_per_lane", "FF_per_lane", "est_ns",
                   "depth", "blocks", "synth_s", "peak_mib", "cached"]
_PCT_TABLE = ["host_bw", "codec", "LUT_pct", "FF_pct", "CARRY_pct", "DSP_pct", "BRAM_pct",
              "URAM_pct", "CLB_pct", "paper_LUT_pct", "paper_FF_pct", "paper_CLB_pct"]
_ADDED_LANE_TABLE = ["host_bw", "codec", "added_lane_LUT", "added_lane_FF", "added_lane_DSP",
                     "added_lane_BRAM", "lane_budget_LUT", "lane_within_budget"]


def add_arguments(parser):
    from squeezenic_hw.flows.report import DEFAULT_HOST_BWS

    parser.add_argument("--host-bw", default=",".join(map(str, DEFAULT_HOST_BWS)),
                        metavar="GBPS,...",
                        help="host bandwidths in Gb/s, multiples of 100 up to 6400 (default "
                             "%(default)s, the paper's Table 6); each build's lanes get the "
                             "codec whose ratio keeps the wire at 100 Gb/s")
    parser.add_argument("--codecs", default="", metavar="C,...",
                        help="extra codecs built into every lane besides the default one "
                             "(names or ids; a ':param' is accepted and ignored, the parameter "
                             "being a run-time register)")
    parser.add_argument("--loopback", action="store_true",
                        help="also the RX side of the generator lanes (RX lanes and checkers, "
                             "as many as the wire needs); default: TX only, as the paper's "
                             "Table 6")
    parser.add_argument("--num-intf", type=int, default=1, choices=(1, 2),
                        help="host/wire interfaces of the plugin (default 1)")
    add_cluster_options(parser, unit="synthesis",
                        jobs_help=" (each Yosys takes one core and 0.3-4 GiB)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where results and Yosys logs are kept (default: synth/ in the "
                             "user cache directory, ~/.cache/squeezenic-hw unless "
                             "$SQUEEZENIC_HW_CACHE or $XDG_CACHE_HOME says otherwise)")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the cache (logs go to a temporary "
                             "directory)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds before a Yosys run is killed (default: none)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also print one row per block and host bandwidth (with csv: "
                             "only those rows)")
    parser.add_argument("--whole", action="store_true",
                        help="also synthesise the whole core of each host bandwidth to check "
                             "the sum (slow: use small host bandwidths)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw LUT/FF/CLB %% against host bandwidth beside the paper's")
    check = parser.add_argument_group(
        "budget gate", "--check synthesises a fixed set (the Table 6 sweep's blocks, the "
        "host lanes of every default codec, the whole default plugin) and exits 1 naming "
        "every figure over its budget (docs/report.md)")
    check.add_argument("--check", action="store_true",
                       help="check every timing and area budget instead of reporting")
    check.add_argument("--builds", choices=("default", "all"), default="default",
                       help="whole plugins: the default build, or also --host-bw 200 "
                            "--codecs sign, --host-bw 6400 and --host-bw 6400 --loopback "
                            "(slow: hours of Yosys, and with the native Yosys only, "
                            "SQUEEZENIC_HW_YOSYS=native; default %(default)s)")
    check.add_argument("--abc9", action="store_true",
                       help="also synthesise the whole plugins with Yosys's default LUT "
                            "mapping (ABC9) and check their longest paths")
    add_format_option(parser, extra=("markdown",))


def _host_bws(text):
    from squeezenic_hw.spec.scaling import lanes_for

    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--host-bw: expected comma-separated integers, got {text!r}") from None
    if not values:
        raise CliError("--host-bw: give at least one host bandwidth")
    for v in values:
        try:
            lanes_for(v)
        except ValueError as exc:
            raise CliError(f"--host-bw: {exc}") from None
    return values


def _codecs(text):
    from squeezenic_hw.flows.report import codec_name

    items = [s.strip() for s in text.split(",") if s.strip()]
    for item in items:
        try:
            codec_name(item)
        except ValueError as exc:
            raise CliError(f"--codecs: {exc}") from None
    return items


def run(args):
    from squeezenic_hw.cluster import TaskFailed
    from squeezenic_hw.flows.report import BlockSynthesisError, build_report

    if args.check:
        return _run_check(args)
    if args.builds != "default" or args.abc9:
        raise CliError("--builds and --abc9 apply to --check only")
    host_bws = _host_bws(args.host_bw)
    codecs = _codecs(args.codecs)
    jobs, scheduler = _check_jobs(args)

    try:
        with scheduler_errors():
            report = build_report(host_bws, extra_codecs=codecs, num_intf=args.num_intf,
                                  loopback=args.loopback, jobs=jobs, scheduler=scheduler,
                                  cache_dir=args.cache_dir, use_cache=not args.no_cache,
                                  whole=args.whole, timeout=args.timeout, progress=_progress)
    except (BlockSynthesisError, TaskFailed) as exc:
        print(f"squeezenic-hw report: error: {exc}", file=sys.stderr)
        return 1
    print(format_report(report, args.format, breakdown=args.breakdown), end="")
    if args.plot:
        from squeezenic_hw.flows.report import plot_utilisation
        plot_utilisation(report, args.plot)
        _progress(f"wrote {args.plot}")
    return 0


def _check_jobs(args):
    """``(jobs, scheduler)``, and ``--timeout`` checked."""
    if args.timeout is not None and args.timeout <= 0:
        raise CliError(f"--timeout must be positive, got {args.timeout}")
    return cluster_choice(args)


def _progress(line):
    print(line, file=sys.stderr, flush=True)


def _run_check(args):
    from squeezenic_hw.cluster import TaskFailed
    from squeezenic_hw.flows import synth
    from squeezenic_hw.flows.report import DEFAULT_HOST_BWS, BlockSynthesisError
    from squeezenic_hw.flows.report.check import CHECK_COLUMNS, run_gate

    fixed = {"--host-bw": args.host_bw != ",".join(map(str, DEFAULT_HOST_BWS)),
             "--codecs": bool(args.codecs), "--loopback": args.loopback,
             "--num-intf": args.num_intf != 1, "--breakdown": args.breakdown,
             "--whole": args.whole, "--plot": bool(args.plot), "--no-cache": args.no_cache}
    given = [name for name, on in fixed.items() if on]
    if given:
        raise CliError(f"--check synthesises a fixed set of blocks; {', '.join(given)} "
                       "do not apply to it")
    if args.builds == "all" and synth.yosys_backend() != "native":
        raise CliError("--builds all needs the native Yosys (pip install '.[native]' and "
                       "SQUEEZENIC_HW_YOSYS=native): YoWASP's 4 GiB of memory cannot map "
                       "the --host-bw 6400 plugins")
    jobs, scheduler = _check_jobs(args)

    try:
        with scheduler_errors():
            result = run_gate(builds=args.builds, abc9=args.abc9, jobs=jobs,
                              scheduler=scheduler, cache_dir=args.cache_dir,
                              timeout=args.timeout, progress=_progress)
    except (BlockSynthesisError, TaskFailed) as exc:
        print(f"squeezenic-hw report: error: {exc}", file=sys.stderr)
        return 1
    checks, failed = result["checks"], result["failed"]
    title = (f"budget checks: {result['blocks']} syntheses, {len(checks)} checks, "
             f"{len(failed)} over budget (margin = budget - figure)")
    if args.format == "json":
        print(render([], [], "json", json_obj={"ok": not failed, **result}), end="")
    elif args.format == "markdown":
        print(f"**{title}**\n\n" + markdown_table(checks, CHECK_COLUMNS), end="")
    else:
        print(render(checks, CHECK_COLUMNS, args.format, title=title), end="")
    for row in failed:
        print(f"squeezenic-hw report: over budget: {row['subject']}: {row['check']} "
              f"{row['figure']} (budget {row['budget']})"
              + (f" {row['detail']}" if row["detail"] else ""), file=sys.stderr)
    return 1 if failed else 0


def format_report(report, fmt, *, breakdown=False):
    """The report as text in ``fmt`` (table, csv, json, markdown)."""
    from squeezenic_hw.flows.report import (
        BLOCK_COLUMNS,
        GROWTH_COLUMNS,
        SUMMARY_COLUMNS,
        WHOLE_COLUMNS,
        notes,
    )

    if fmt == "json":
        return render([], [], "json", json_obj=report)
    if fmt == "csv":
        if breakdown:
            return render(report["blocks"], BLOCK_COLUMNS, "csv")
        return render(report["rows"], SUMMARY_COLUMNS, "csv")
    block_cols = [c for c in BLOCK_COLUMNS if c != "log"]
    whole_cols = [c for c in WHOLE_COLUMNS if c != "log"]
    sections = [
        ("U280 resources of the SqueezeNIC core by host bandwidth (sum of per-block Yosys "
         "syntheses; " + ("with the loopback RX lanes)" if report.get("loopback")
                          else "TX only, as the paper's Table 6)"),
         report["rows"], _RESOURCE_TABLE),
        ("% of the U280; paper_*: the paper's Table 6, whole design with the OpenNIC shell",
         report["rows"], _PCT_TABLE),
        ("one added generator lane: the lane and its share of the arbiter, frame bus and "
         "shared rings, against its codec's budget", report["rows"], _ADDED_LANE_TABLE),
        ("growth per added 100 Gb/s lane (least squares over the rows with generator lanes; "
         "paper: Table 6 as counts; target: the paper's 1.6 k LUT / 3.3 k FF)",
         report["growth"], GROWTH_COLUMNS),
    ]
    if breakdown:
        sections.append(("per block (count x one instance)", report["blocks"], block_cols))
    if report["whole"]:
        sections.append(("whole core synthesised in one piece, against the sum of its blocks",
                         report["whole"], whole_cols))
    out = []
    for title, rows, cols in sections:
        if fmt == "markdown":
            out.append(f"**{title}**\n\n" + markdown_table(rows, cols))
        else:
            out.append(render(rows, cols, "table", title=title))
    lines = notes(report)
    if fmt == "markdown":
        out.append("".join(f"- {line}\n" for line in lines))
    else:
        out.append("".join(f"Note: {line}\n" for line in lines))
    return "\n".join(out)
