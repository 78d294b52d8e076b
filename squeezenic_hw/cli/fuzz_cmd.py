"""``squeezenic-hw fuzz``: random traffic through the TX lane, then the RX lane, in the
hardware's simulation, compared frame for frame with the numpy reference
(``docs/fuzz.md``)."""

import json
import sys
import time
from pathlib import Path

import numpy as np

from squeezenic_hw.pcap import write_frames
from squeezenic_hw.spec.codecs import resolve_codecs
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import CliError
from .backend import add_backend_option, add_cache_dir_option, probability, simulation_backend
from .options import OptionType, codec_list
from .output import add_format_option, render
from .reference_cmd import add_build_options, check_lane_port

NAME = "fuzz"
HELP = ("random traffic (hypothesis strategies) through the TX then the RX lane's "
        "simulation, compared with the reference frame for frame")

DEFAULT_FAILURE_DIR = "build/fuzz"


def add_arguments(parser):
    parser.add_argument("--codecs", type=OptionType("--codecs", codec_list),
                        help="comma-separated codec names or ids built into both lanes and "
                             "drawn (default: all of 0-6)")
    parser.add_argument("--frames", type=int, default=100_000, metavar="N",
                        help="host frames into the TX lane, rounded up to whole batches "
                             "(default 100000)")
    parser.add_argument("--batch", type=int, default=1000, metavar="B",
                        help="host frames per batch: one TX and one RX model run each "
                             "(default 1000)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the traffic and of the idle/backpressure draws")
    parser.add_argument("--idle", type=float, default=0.1, metavar="P",
                        help="probability of an idle input cycle before each beat (default 0.1)")
    parser.add_argument("--backpressure", type=float, default=0.2, metavar="P",
                        help="probability that the output is not ready in a cycle "
                             "(default 0.2)")
    parser.add_argument("--timed", action="store_true",
                        help="make one batch in four timed: frames at set cycles, gaps on "
                             "every side of an idle timeout set in the TX lane; half of them "
                             "with --idle and --backpressure (docs/fuzz.md)")
    add_build_options(parser)
    parser.add_argument("--trusted", action="store_true",
                        help="build the TX lane trusted, as the generator lanes are, and draw "
                             "only the frames it takes: tensor streams, no malformed frame, no "
                             "wrong tuser_size (docs/lanes.md)")
    parser.add_argument("--code-bits", type=int, metavar="B",
                        help="with --trusted: the TX lane's one code width (2-16), which fixed "
                             "and qsgd frames then carry")
    parser.add_argument("--narrow", action="store_true",
                        help="build the TX lane narrow, as the generator lanes of sign and "
                             "fixed:2/4/8 are (--codecs sign, or --codecs fixed --code-bits "
                             "2|4|8), and draw only the frames it takes: --trusted's, and "
                             "fixed at scales that are powers of two, zeros, infinities or "
                             "NaNs, rounded to nearest (docs/lanes.md)")
    add_backend_option(parser)
    add_cache_dir_option(parser)
    parser.add_argument("--only-batch", type=int, metavar="K",
                        help="run batch K alone (0-based; the same traffic as in the whole "
                             "campaign of this seed and the same --batch, --codecs, --timed, "
                             "--port, --trusted, --code-bits and --narrow)")
    parser.add_argument("-o", "--output", default=DEFAULT_FAILURE_DIR, metavar="DIR",
                        help="where the first mismatching batch's pcaps and description go "
                             f"(default {DEFAULT_FAILURE_DIR}; written only on a mismatch)")
    parser.add_argument("--progress", action="store_true",
                        help="print progress on stderr (default: when stderr is a terminal)")
    add_format_option(parser)


def _derived_seed(*parts):
    """A 32-bit seed of ``parts`` (the campaign's seed, a batch or chunk number, a purpose)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


class _LaneRunner:
    """Runs a batch's lane on the chosen backend; remembers the compiled builds."""

    def __init__(self, backend, builders, args):
        self.backend, self.args = backend, args
        self.builders = builders
        self.builds = {}
        self.batch = 0
        self.timed = 0
        self.stalled = 0
        self.held = 0
        self.cycles = 0
        self.loop_seconds = 0.0

    def _timeout(self, frames):
        beats = sum(max(1, -(-len(f.data) // 64)) for f in frames)
        return 200_000 + int(64 * beats / ((1 - self.args.idle) * (1 - self.args.backpressure)))

    def __call__(self, lane, frames, *, times=None, idle_timeout=None, close_at_end=True,
                 stalled=False):
        build, key = self.builders[lane]
        kw = dict(idle=self.args.idle, backpressure=self.args.backpressure,
                  seed=_derived_seed(self.args.seed, self.batch, 1),
                  timeout=self._timeout(frames))
        if times is not None:
            # a timed batch: the frames' beats at their times, moved only when stalled; the
            # last wire frame waits for the timeout
            kw.update(times=times, idle_timeout=idle_timeout, close_at_end=close_at_end,
                      timeout=kw["timeout"] + times[-1])
            if not stalled:
                kw.update(idle=0.0, backpressure=0.0)
            self.timed += lane == "tx"
            self.stalled += lane == "tx" and stalled
        if self.backend == "compiled":
            from squeezenic_hw.sim.compiled import CompiledBuildError, simulate_lane_compiled

            try:
                run = simulate_lane_compiled(build, frames, key=key,
                                             cache_dir=self.args.cache_dir, **kw)
            except CompiledBuildError as exc:
                raise CliError(str(exc).splitlines()[0]) from None
            self.builds.setdefault(lane, run.extra["build"])
        else:
            from squeezenic_hw.sim.lane import simulate_lane

            run = simulate_lane(build(), frames, **kw)
        self.cycles += run.extra.get("sim_cycles", 0)
        self.loop_seconds += run.wall_seconds
        return run

    @property
    def build_seconds(self):
        return round(sum(b["build_s"] for b in self.builds.values()), 2) if self.builds else None

    @property
    def build_cached(self):
        return all(b["cached"] for b in self.builds.values()) if self.builds else None


def _write_failure(directory, batch, recipe, check, args, codecs):
    """The batch's input, expected and got frames of ``check``'s lane as pcaps, and a JSON
    file with each frame's side-band, the batch's recipe and how to run the batch again.
    Returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"batch{batch}-{check.lane}"
    paths = {"input": directory / f"{stem}-input.pcap",
             "expected": directory / f"{stem}-expected.pcap"}
    write_frames(paths["input"], [f.data for f in check.inputs])
    write_frames(paths["expected"], [f.data for f in check.expected.frames])
    if check.run is not None:
        paths["got"] = directory / f"{stem}-got.pcap"
        write_frames(paths["got"], [f.data for f in check.run.frames])

    def sideband(frames):
        return [{"size": len(f.data) if f.size is None else f.size, "bytes": len(f.data),
                 "src": f.src, "dst": f.dst} for f in frames]

    first = check.differences[0]
    again = (f"squeezenic-hw fuzz --seed {args.seed} --frames {args.frames} --batch {args.batch} "
             f"--only-batch {batch} --idle {args.idle} --backpressure {args.backpressure}"
             + (f" --codecs {','.join(map(str, codecs))}" if args.codecs else "")
             + (" --timed" if args.timed else "")
             + "".join(f" --{name.replace('_', '-')} {getattr(args, name)}"
                       for name, default in (("mtu", DEFAULT_MTU), ("port", DEFAULT_PORT),
                                             ("max_host_elements", DEFAULT_HOST_ELEMENTS))
                       if getattr(args, name) != default)
             + (" --trusted" if args.trusted else "")
             + (" --narrow" if args.narrow else "")
             + (f" --code-bits {args.code_bits}" if args.code_bits is not None else ""))
    info = {"batch": batch, "lane": check.lane, "frame": first.frame, "what": first.what,
            "differences": [{"frame": d.frame, "what": d.what} for d in check.differences],
            "again": again, "recipe": repr(recipe), "files": {k: str(p) for k, p in paths.items()},
            "input": sideband(check.inputs), "expected": sideband(check.expected.frames),
            "got": sideband(check.run.frames) if check.run is not None else None,
            "expected_counters": check.expected.counters,
            "got_counters": check.run.counters if check.run is not None else None}
    paths["description"] = directory / f"{stem}.json"
    paths["description"].write_text(json.dumps(info, indent=1) + "\n")
    return [str(p) for p in paths.values()]


def _stalled(args, batch):
    """Whether batch ``batch``, when timed, keeps the campaign's stalls (one in two, drawn
    apart from the traffic, so a seed's batches stay what they were)."""
    return bool(args.idle or args.backpressure) and _derived_seed(args.seed, batch, 3) % 2 == 1


def _add_counters(total, counters):
    for name, value in counters.items():
        total[name] = total.get(name, 0) + value


def _lane_builders(args, codecs):
    """The lanes' builders (``traffic.lane_builders``) of the options, each lane built once
    to check its parameters as the lane checks them (one line, exit 2)."""
    from squeezenic_hw.sim.traffic import lane_builders

    check_lane_port(args.port)
    if args.code_bits is not None and not (args.trusted or args.narrow):
        raise CliError("--code-bits needs --trusted or --narrow")
    try:
        builders = lane_builders(codecs, mtu=args.mtu, port=args.port,
                                 max_host_elements=args.max_host_elements,
                                 trusted=args.trusted, code_bits=args.code_bits,
                                 narrow=args.narrow)
        for build, _ in builders.values():
            build()
    except ValueError as exc:
        message = str(exc)
        raise CliError(("--" if message.startswith("narrow:") else "") + message) from None
    return builders


def run(args):
    from squeezenic_hw.sim.traffic import draw_example, round_trip, traffic_recipes

    ids = sorted(resolve_codecs(args.codecs))
    probability("idle", args.idle)
    probability("backpressure", args.backpressure)
    if args.seed < 0:
        raise CliError(f"--seed must be 0 or more, got {args.seed}")
    if args.frames < 1:
        raise CliError(f"--frames must be at least 1, got {args.frames}")
    if args.batch < 1:
        raise CliError(f"--batch must be at least 1, got {args.batch}")
    batches = -(-args.frames // args.batch)
    if args.only_batch is not None:
        if not 0 <= args.only_batch < batches:
            raise CliError(f"--only-batch must be from 0 to {batches - 1} (the campaign's "
                           f"batches), got {args.only_batch}")
        todo = [args.only_batch]
    else:
        todo = list(range(batches))
    builders = _lane_builders(args, ids)
    backend = simulation_backend(NAME, args.backend)
    runner = _LaneRunner(backend, builders, args)
    progress = args.progress or sys.stderr.isatty()
    strategy = traffic_recipes(ids, frames=args.batch, timed=args.timed,
                               trusted=args.trusted, code_bits=args.code_bits,
                               narrow=args.narrow)

    start = time.perf_counter()
    generate_s = reference_s = model_s = 0.0
    frames_in = {"tx": 0, "rx": 0}
    counters = {"tx": {}, "rx": {}}
    mismatched, first = [], None
    for done, batch in enumerate(todo):
        t = time.perf_counter()
        recipe = draw_example(strategy, _derived_seed(args.seed, batch, 0))
        generate_s += time.perf_counter() - t
        runner.batch = batch
        checks = round_trip(recipe, runner, codecs=ids, port=args.port, mtu=args.mtu,
                            max_host_elements=args.max_host_elements,
                            stalled=_stalled(args, batch), exact_idle=not args.narrow)
        runner.held += checks["tx"].held
        for check in checks.values():
            frames_in[check.lane] += len(check.inputs)
            reference_s += check.reference_seconds
            model_s += check.model_seconds
            if check.run is not None:
                _add_counters(counters[check.lane], check.run.counters)
            if check.differences:
                d = check.differences[0]
                mismatched.append({"batch": batch, "lane": d.lane, "frame": d.frame,
                                   "what": d.what})
                if first is None:
                    first = {**mismatched[-1],
                             "files": _write_failure(args.output, batch, recipe, check, args,
                                                     ids)}
        if progress:
            elapsed = time.perf_counter() - start
            print(f"\rbatch {done + 1}/{len(todo)}  frames {frames_in['tx']:,}  "
                  f"mismatches {len(mismatched)}  {elapsed:.0f} s", end="", file=sys.stderr,
                  flush=True)
    if progress:
        print(file=sys.stderr)
    wall = time.perf_counter() - start
    build_s = runner.build_seconds or 0.0
    summary = {
        "backend": backend, "codecs": ids, "mtu": args.mtu, "port": args.port,
        "max_host_elements": args.max_host_elements, "trusted": args.trusted,
        "narrow": args.narrow,
        "code_bits": args.code_bits, "seed": args.seed, "batch": args.batch,
        "idle": args.idle, "backpressure": args.backpressure, "timed": args.timed,
        "frames": frames_in["tx"], "rx_frames": frames_in["rx"], "batches": len(todo),
        "timed_batches": runner.timed, "stalled_timed_batches": runner.stalled,
        "held_timed_batches": runner.held,
        "mismatches": len(mismatched), "first_mismatch": first,
        "cycles": runner.cycles,
        "sim_cycles_per_second": round(runner.cycles / runner.loop_seconds, 1)
        if runner.loop_seconds else None,
        "wall_seconds": round(wall, 2),
        "generate_seconds": round(generate_s, 2),
        "reference_seconds": round(reference_s, 2),
        "model_seconds": round(model_s - build_s, 2),
        "build_seconds": runner.build_seconds, "build_cached": runner.build_cached,
    }
    rows = [{"name": k, "value": v} for k, v in summary.items() if k != "first_mismatch"]
    if first is not None:
        rows += [{"name": f"first_mismatch.{k}", "value": v if k != "files" else " ".join(v)}
                 for k, v in first.items()]
    rows += [{"name": f"{lane}.{k}", "value": v}
             for lane in ("tx", "rx") for k, v in counters[lane].items()]
    rows = [{**r, "value": ",".join(map(str, r["value"])) if isinstance(r["value"], list)
             else r["value"]} for r in rows]
    print(render(rows, ["name", "value"], args.format,
                 json_obj={**summary, "counters": counters, "mismatched_runs": mismatched}),
          end="")
    if mismatched:
        print(f"squeezenic-hw {NAME}: error: {len(mismatched)} lane run(s) differ from the "
              f"reference; first: batch {first['batch']}, {first['lane']} "
              f"{'' if first['frame'] is None else 'frame ' + str(first['frame']) + ': '}"
              f"{first['what']} (frames in {args.output})", file=sys.stderr)
        return 1
    return 0
