# amaranth: UnusedElaboratable=no
# (a lane that rejects its parameters is never elaborated; the user sees the one-line error)
"""``squeezenic-hw simulate tx|rx``: run a lane's simulation on a pcap of frames, compiled
(Verilator, ``docs/fastsim.md``) or on Amaranth's simulator."""

import sys

from squeezenic_hw.pcap import write_frames
from squeezenic_hw.reference import lane as lane_reference

from . import CliError
from .backend import (
    BuildProgress,
    add_backend_option,
    add_cache_dir_option,
    probability,
    simulation_backend,
)
from .input_files import read_pcap
from .output import add_format_option, render
from .reference_cmd import add_lane_options, check_lane_port

NAME = "simulate"
HELP = "simulate the TX or RX lane hardware on a pcap of frames (compiled or Amaranth)"


def add_arguments(parser):
    parser.add_argument("lane", choices=("tx", "rx"))
    parser.add_argument("input", metavar="IN.pcap")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.pcap",
                        help="output frames; timestamps = cycle of each frame's first beat")
    add_lane_options(parser)
    parser.add_argument("--backpressure", type=float, default=0.0, metavar="P",
                        help="probability that the output is not ready in a cycle")
    parser.add_argument("--idle", type=float, default=0.0, metavar="P",
                        help="probability of an idle input cycle before each beat")
    parser.add_argument("--seed", type=int, default=0, help="seed of the idle/backpressure draws")
    add_backend_option(parser)
    add_cache_dir_option(parser)
    parser.add_argument("--vcd", metavar="FILE",
                        help="write a waveform (large and slow; Amaranth backend only)")
    parser.add_argument("--no-check", action="store_true",
                        help="do not compare the output with the numpy reference")
    parser.add_argument("--progress", action="store_true",
                        help="print progress on stderr (default: when stderr is a terminal)")
    add_format_option(parser)


def _progress_printer(enabled, total_frames):
    if not enabled:
        return None

    def show(cycle, frames_in, frames_out):
        print(f"\rcycle {cycle:>9,}  frames in {frames_in}/{total_frames}  "
              f"out {frames_out}", end="", file=sys.stderr, flush=True)
    return show


def _backend(args):
    """The backend asked for, or the default: compiled where this machine can build it,
    else Amaranth, saying so on stderr. ``--vcd`` needs Amaranth."""
    if args.backend == "compiled" and args.vcd:
        raise CliError("--vcd needs --backend amaranth (the compiled model writes no waveform)")
    if args.backend is None and args.vcd:
        return "amaranth"
    return simulation_backend(NAME, args.backend)


def run(args):
    # Imported here: elaborating gateware is not needed by the other commands.
    from squeezenic_hw.gateware.rx.lane import RxLane
    from squeezenic_hw.gateware.tx.lane import TxLane
    from squeezenic_hw.sim.lane import simulate_lane

    codecs = args.codecs
    idle = probability("idle", args.idle)
    backpressure = probability("backpressure", args.backpressure)
    check_lane_port(args.port)
    frames, cycles = read_pcap(args.input)
    if not frames:
        raise CliError(f"{args.input}: no frames")
    try:
        if args.lane == "tx":
            lane = TxLane(codecs=codecs, mtu=args.mtu, port=args.port,
                          idle_timeout=args.idle_timeout)
        else:
            lane = RxLane(codecs=codecs, max_host_elements=args.max_host_elements,
                          port=args.port)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    # Frames arrive at their pcap times only when an idle timeout makes time matter;
    # otherwise back to back, the fastest the lane takes them.
    times = cycles if args.lane == "tx" and args.idle_timeout is not None else None
    backend = _backend(args)
    progress = args.progress or sys.stderr.isatty()
    build = None
    if backend == "compiled":
        from squeezenic_hw.sim.compiled import CompiledBuildError, simulate_lane_compiled
        from squeezenic_hw.sim.traffic import lane_builders

        # The idle timeout is set at run time (one model serves every timeout), so the
        # model is of the lane without one; the keys are fuzz's, so the two commands find
        # each other's models. (The lane built to check the parameters goes unused when the
        # model is cached: main() silences Amaranth's warning about that.)
        model_lane, key = lane_builders(codecs, mtu=args.mtu, port=args.port,
                                        max_host_elements=args.max_host_elements)[args.lane]
        run_timeout = (args.idle_timeout or 0) if args.lane == "tx" else None
        steps = BuildProgress(NAME, args.cache_dir)
        try:
            result = simulate_lane_compiled(model_lane, frames, times=times, idle=idle,
                                            backpressure=backpressure, seed=args.seed,
                                            idle_timeout=run_timeout, key=key,
                                            cache_dir=args.cache_dir, progress=steps)
        except CompiledBuildError as exc:
            raise CliError(str(exc).splitlines()[0]) from None
        steps.done()
        build = result.extra["build"]
    else:
        show = _progress_printer(progress, len(frames))
        result = simulate_lane(lane, frames, times=times, idle=idle, backpressure=backpressure,
                               seed=args.seed, vcd=args.vcd, progress=show)
        if show:
            print(file=sys.stderr)
    out = [f.data for f in result.frames]
    base = result.frames[0].first_cycle if result.frames else 0
    write_frames(args.output, out, [f.first_cycle - base for f in result.frames])

    stats = result.as_dict()
    summary = {"lane": args.lane, "backend": backend,
               "build_seconds": build["build_s"] if build else None,
               "build_cached": build["cached"] if build else None,
               "frames_in": len(frames), "frames_out": len(out),
               "bytes_in": sum(map(len, frames)), "bytes_out": sum(map(len, out)),
               **{k: stats[k] for k in ("cycles", "beats_in", "beats_out",
                                        "beats_per_cycle_in", "beats_per_cycle_out",
                                        "first_beat_latency", "sim_cycles_per_second")}}
    mismatch = None
    if not args.no_check:
        mismatch = _compare(args, frames, cycles, codecs, out)
        summary["matches_reference"] = mismatch is None
    rows = [{"name": k, "value": v} for k, v in {**summary, **result.counters}.items()]
    print(render(rows, ["name", "value"], args.format,
                 json_obj={**summary, "counters": result.counters}), end="")
    if mismatch:
        print(f"squeezenic-hw simulate: error: output differs from the reference: {mismatch}",
              file=sys.stderr)
        return 1
    return 0


def _compare(args, frames, cycles, codecs, out):
    """``None`` when ``out`` equals the reference lane's output, else what differs."""
    if args.lane == "tx":
        expected, _ = lane_reference.tx(frames, port=args.port, mtu=args.mtu, codecs=codecs,
                                        idle_timeout=args.idle_timeout, times=cycles)
    else:
        expected, _ = lane_reference.rx(frames, port=args.port,
                                        max_host_elements=args.max_host_elements,
                                        codecs=codecs)
    for k, (got, want) in enumerate(zip(out, expected, strict=False)):
        if got != want:
            return f"frame {k} ({len(got)} bytes, reference {len(want)})"
    if len(out) != len(expected):
        return f"{len(out)} frames, reference {len(expected)}"
    return None
