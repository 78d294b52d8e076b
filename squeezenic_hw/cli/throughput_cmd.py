"""``squeezenic-hw throughput``: cycle-accurate host/wire Gb/s (the paper's Table 5) and the
host_bw sweep, from Amaranth simulation."""

import sys

from squeezenic_hw.flows.throughput import by_frame_length, by_host_bw, codec_setting
from squeezenic_hw.spec.scaling import lanes_for

from . import CliError
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
                             "6400; the simulation slows with the lane count: 8 lanes run "
                             "~100 cycles/s, 64 lanes ~9, so 6400 at 12000 cycles takes "
                             "~25 min); 'none' to skip")
    parser.add_argument("--sweep-codec", default="sign", help="codec of the host_bw sweep")
    parser.add_argument("--sweep-frame-length", type=int, default=1516, metavar="L")
    parser.add_argument("--cycles", type=int, default=3000,
                        help="measured cycles per host_bw point (after 300 of warm-up)")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the tables")
    add_format_option(parser)


def run(args):
    lengths = _ints(args.frame_lengths, "frame-lengths")
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for c in codecs + [args.sweep_codec]:
        try:
            codec_setting(c)
        except ValueError as exc:
            raise CliError(f"--codecs: {exc}") from None
    sweep = [] if args.host_bw == "none" else _ints(args.host_bw, "host-bw")
    if args.cycles < 100:
        raise CliError(f"--cycles must be at least 100, got {args.cycles}")
    for bw in sweep:   # every point checked before the first simulation starts
        try:
            lanes_for(bw)
        except ValueError as exc:
            raise CliError(f"--host-bw: {exc}") from None
    rows = []
    total = len(lengths) * len(codecs) + len(sweep)
    done = 0
    for length in lengths:
        for c in codecs:
            done += 1
            print(f"[{done}/{total}] {c} at {length} B ...", file=sys.stderr, flush=True)
            try:
                r = by_frame_length(c, length)
            except ValueError as exc:
                raise CliError(str(exc)) from None
            rows.append({"codec": r.codec, "frame_bytes": r.frame_bytes,
                         "host_gbps": round(r.host_gbps, 2), "wire_gbps": round(r.wire_gbps, 2),
                         "bus_ceiling_gbps": round(r.ceiling_gbps, 2),
                         "ratio": round(r.ratio, 3)})
    sweep_rows = []
    for bw in sweep:
        done += 1
        print(f"[{done}/{total}] host_bw {bw} Gb/s ...", file=sys.stderr, flush=True)
        try:
            r = by_host_bw(bw, args.sweep_codec, args.sweep_frame_length, cycles=args.cycles)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        sweep_rows.append({"host_bw": r.host_bw, "lanes": r.lanes, "codec": r.codec,
                           "frame_bytes": r.frame_bytes,
                           "generator_gbps_min": round(r.generator_gbps_min, 2),
                           "all_full_rate": r.all_full_rate,
                           "wire_utilisation": round(r.wire_utilisation, 4),
                           "wire_gbps": round(r.wire_gbps, 2),
                           "ratio_needed": round(r.ratio_needed, 3),
                           "ratio_codec": round(r.ratio_codec, 3),
                           "sim_cycles_per_s": round(r.sim_cycles_per_s, 1)})
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
