"""``squeezenic-hw throughput``: cycle-accurate host/wire Gb/s (the paper's Table 5) and the
host_bw sweep, simulated compiled (Verilator, ``docs/fastsim.md``) or on Amaranth."""

import sys
import time

from squeezenic_hw.flows.throughput import (
    by_frame_length,
    by_host_bw,
    codec_setting,
    frame_elements,
)
from squeezenic_hw.spec.scaling import lanes_for

from . import CliError
from .backend import (
    add_backend_option,
    add_cache_dir_option,
    simulation_backend,
    task_build_progress,
)
from .cluster_options import add_cluster_options, cluster_choice, scheduler_errors
from .output import add_format_option, render

NAME = "throughput"
HELP = "simulate generators and TX lanes: host and wire Gb/s by frame length, codec, host_bw"


def _ints(text, name):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--{name}: expected comma-separated integers, got {text!r}") from None


def add_arguments(parser):
    parser.add_argument("--frame-lengths", default="308,1076,1516", metavar="L,...",
                        help="host frame lengths in bytes, each 64 + 4n (default 308,1076,1516)")
    parser.add_argument("--codecs", default="raw,fp16,fixed:4,sign", metavar="C,...",
                        help="codecs, with the parameter after a colon where needed "
                             "(default raw,fp16,fixed:4,sign)")
    parser.add_argument("--host-bw", default="400,800", metavar="GBPS,...",
                        help="host bandwidths for the array sweep (multiples of 100 up to "
                             "6400); 'none' to skip. Compiled, 64 lanes run ~2,000 "
                             "cycles/s after a build of ~3 min (then cached); on Amaranth "
                             "the simulation slows with the lane count: 8 lanes ~100 "
                             "cycles/s, 64 lanes ~9, so 6400 at 12000 cycles takes ~25 min")
    parser.add_argument("--sweep-codec", default="sign", help="codec of the host_bw sweep")
    parser.add_argument("--sweep-frame-length", type=int, default=1516, metavar="L")
    parser.add_argument("--cycles", type=int, default=3000,
                        help="measured cycles per host_bw point (after 300 of warm-up)")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the tables")
    add_backend_option(parser)
    add_cache_dir_option(parser)
    add_cluster_options(parser, unit="simulation")
    parser.add_argument("--progress", action="store_true",
                        help="print each run's cycle on stderr as it runs, one run at a time "
                             "(default: when stderr is a terminal)")
    add_format_option(parser)


def progress_printer(enabled, total=None):
    """A ``progress(cycle)`` that shows a run's cycle and speed on stderr: rewritten in
    place on a terminal, else a line every 10 s."""
    if not enabled:
        return None
    tty = sys.stderr.isatty()
    first = shown = None

    def show(cycle):
        nonlocal first, shown
        now = time.perf_counter()
        if first is None:          # the run's first report: the build is behind it
            first = shown = (cycle, now)
        if not tty and now - shown[1] < 10:
            return
        shown = (cycle, now)
        of = f" of {total:,}" if total else ""
        rate = (cycle - first[0]) / (now - first[1]) if now > first[1] else 0
        text = f"  cycle {cycle:,}{of} ({rate:,.0f} cycles/s)"
        print(f"\r{text}" if tty else text, end="" if tty else "\n", file=sys.stderr,
              flush=True)
    return show


def _measured(measure, *args, **kwargs):
    """``measure(*args, **kwargs)``, a compiled model that did not build reported as one
    line."""
    from squeezenic_hw.sim.compiled import CompiledBuildError

    try:
        return measure(*args, **kwargs)
    except CompiledBuildError as exc:
        raise CliError(str(exc).splitlines()[0]) from None


def _build_columns(r):
    return {"backend": r.backend, "build_seconds": r.build_seconds,
            "build_cached": r.build_cached,
            "sim_cycles_per_s": round(r.sim_cycles_per_s, 1)}


def _frame_length_row(codec, length, backend, cache_dir, cycles_shown, builds_shown):
    """One lane at one frame length (a task, :mod:`squeezenic_hw.cluster`): its row and
    result."""
    steps = task_build_progress(NAME, f"{codec} at {length} B", cache_dir, builds_shown,
                                cycles_shown)
    r = _measured(by_frame_length, codec, length, backend=backend, cache_dir=cache_dir,
                  progress=progress_printer(cycles_shown), build_progress=steps)
    if steps is not None:
        steps.done()
    return {"codec": r.codec, "frame_bytes": r.frame_bytes,
            "host_gbps": round(r.host_gbps, 2), "wire_gbps": round(r.wire_gbps, 2),
            "bus_ceiling_gbps": round(r.ceiling_gbps, 2),
            "ratio": round(r.ratio, 3), **_build_columns(r)}, r


def _host_bw_row(bw, codec, length, cycles, backend, cache_dir, cycles_shown, builds_shown):
    """The generators of one host bandwidth onto the wire (a task): its row and result."""
    steps = task_build_progress(NAME, f"host_bw {bw} Gb/s", cache_dir, builds_shown,
                                cycles_shown)
    r = _measured(by_host_bw, bw, codec, length, cycles=cycles, backend=backend,
                  cache_dir=cache_dir, progress=progress_printer(cycles_shown, 300 + cycles),
                  build_progress=steps)
    if steps is not None:
        steps.done()
    return {"host_bw": r.host_bw, "lanes": r.lanes, "codec": r.codec,
            "frame_bytes": r.frame_bytes,
            "generator_gbps_min": round(r.generator_gbps_min, 2),
            "all_full_rate": r.all_full_rate,
            "wire_utilisation": round(r.wire_utilisation, 4),
            "wire_gbps": round(r.wire_gbps, 2),
            "ratio_needed": round(r.ratio_needed, 3),
            "ratio_codec": round(r.ratio_codec, 3), **_build_columns(r)}, r


def run(args):
    from squeezenic_hw.cluster import Task, run_tasks

    lengths = _ints(args.frame_lengths, "frame-lengths")
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for option, c in [*(("--codecs", c) for c in codecs), ("--sweep-codec", args.sweep_codec)]:
        try:
            codec_setting(c)
        except ValueError as exc:
            raise CliError(f"{option}: {exc}") from None
    sweep = [] if args.host_bw == "none" else _ints(args.host_bw, "host-bw")
    if args.cycles < 100:
        raise CliError(f"--cycles must be at least 100, got {args.cycles}")
    # every point checked before the first simulation starts
    for option, check, values in (("--frame-lengths", frame_elements, lengths),
                                  ("--host-bw", lanes_for, sweep),
                                  ("--sweep-frame-length", frame_elements,
                                   [args.sweep_frame_length] if sweep else [])):
        for value in values:
            try:
                check(value)
            except ValueError as exc:
                raise CliError(f"{option}: {exc}") from None
    jobs, scheduler = cluster_choice(args)
    backend = simulation_backend(NAME, args.backend)
    progress = args.progress or sys.stderr.isatty()
    # a run's cycles are shown as it runs only when the runs go one at a time, here
    cycles_shown = progress and jobs == 1 and scheduler is None
    tasks = [Task(f"{c} at {length} B ({backend})", _frame_length_row,
                  (c, length, backend, args.cache_dir, cycles_shown, progress))
             for length in lengths for c in codecs]
    tasks += [Task(f"host_bw {bw} Gb/s ({backend})", _host_bw_row,
                   (bw, args.sweep_codec, args.sweep_frame_length, args.cycles, backend,
                    args.cache_dir, cycles_shown, progress))
              for bw in sweep]

    def say(line):
        print(line, file=sys.stderr, flush=True)

    results = [None] * len(tasks)
    with scheduler_errors():
        for done, (index, (row, r)) in enumerate(run_tasks(
                tasks, scheduler=scheduler, jobs=jobs, expected=(CliError,), progress=say,
                name="throughput")):
            results[index] = row
            if cycles_shown and sys.stderr.isatty():
                print(file=sys.stderr)
            model = ""
            if progress and r.build_seconds is not None:
                model = (f": model {'found in the cache' if r.build_cached else 'built'} in "
                         f"{r.build_seconds} s; {r.sim_cycles_per_s:,.0f} cycles/s")
            say(f"[{done + 1}/{len(tasks)}] {tasks[index].label}{model}")
    rows, sweep_rows = results[:len(tasks) - len(sweep)], results[len(tasks) - len(sweep):]
    if args.format == "json":
        import json
        print(json.dumps({"by_frame_length": rows, "by_host_bw": sweep_rows}, indent=2))
    else:
        if rows:
            print(render(rows, list(rows[0]), args.format, title="one lane at full bus rate"),
                  end="")
        if sweep_rows:
            print(render(sweep_rows, list(sweep_rows[0]), args.format,
                         title="generators at 100 Gb/s each onto one wire"), end="")
    if args.plot:
        _plot(args.plot, rows, sweep_rows)
    return 0


def _plot(path, rows, sweep_rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if sweep_rows else 1, figsize=(11, 4), squeeze=False)
    ax = axes[0][0]
    for codec in dict.fromkeys(r["codec"] for r in rows):
        pts = [r for r in rows if r["codec"] == codec]
        ax.plot([r["frame_bytes"] for r in pts], [r["host_gbps"] for r in pts], "o-",
                label=f"{codec} host")
    ceil = sorted({(r["frame_bytes"], r["bus_ceiling_gbps"]) for r in rows})
    ax.plot([c[0] for c in ceil], [c[1] for c in ceil], "k--", label="bus ceiling")
    ax.set_xlabel("host frame bytes")
    ax.set_ylabel("Gb/s at 250 MHz")
    ax.set_title("one TX lane (measured in simulation)")
    ax.legend(fontsize=8)
    if sweep_rows:
        ax = axes[0][1]
        ax.plot([r["host_bw"] for r in sweep_rows], [r["wire_utilisation"] for r in sweep_rows],
                "o-", label="wire beats/cycle")
        ax.set_xlabel("host_bw (Gb/s)")
        ax.set_ylabel("wire utilisation")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
