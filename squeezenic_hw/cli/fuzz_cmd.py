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
from .backend import (
    add_backend_option,
    add_cache_dir_option,
    probability,
    simulation_backend,
    task_build_progress,
)
from .cluster_options import add_cluster_options, cluster_choice, scheduler_errors
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
    add_cluster_options(parser, unit="batch")
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
    """Runs a batch's lanes on the chosen backend; remembers the compiled builds."""

    def __init__(self, backend, builders, args, builds_shown=False, alone=False):
        self.backend, self.args = backend, args
        self.builds_shown, self.alone = builds_shown, alone
        self.builders = builders
        self.builds = {}
        self.batch = 0
        self.timed = 0
        self.stalled = 0
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

            steps = task_build_progress(NAME, f"{lane} lane", self.args.cache_dir,
                                        self.builds_shown, self.alone)
            try:
                run = simulate_lane_compiled(build, frames, key=key,
                                             cache_dir=self.args.cache_dir, progress=steps,
                                             **kw)
            except CompiledBuildError as exc:
                raise CliError(str(exc).splitlines()[0]) from None
            if steps is not None:
                steps.done()
            self.builds.setdefault(lane, run.extra["build"])
        else:
            from squeezenic_hw.sim.lane import simulate_lane

            run = simulate_lane(build(), frames, **kw)
        self.cycles += run.extra.get("sim_cycles", 0)
        self.loop_seconds += run.wall_seconds
        return run


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


def _run_batch(args, ids, backend, batch, builds_shown=False, alone=False):
    """One batch of the campaign (a task, :mod:`squeezenic_hw.cluster`): its traffic drawn
    from the seed and the batch number alone, through the TX and the RX lane; what the
    summary sums, and the batch's first mismatching check with its recipe (to write).
    ``builds_shown``: a compiled model built meanwhile shows its steps (counted up in
    place when the batch runs ``alone``)."""
    from squeezenic_hw.sim.traffic import draw_example, lane_builders, round_trip

    builders = lane_builders(ids, mtu=args.mtu, port=args.port,
                             max_host_elements=args.max_host_elements, trusted=args.trusted,
                             code_bits=args.code_bits, narrow=args.narrow)
    runner = _LaneRunner(backend, builders, args, builds_shown, alone)
    runner.batch = batch
    start = time.perf_counter()
    recipe = draw_example(_strategy(args, ids), _derived_seed(args.seed, batch, 0))
    out = {"generate_s": time.perf_counter() - start, "reference_s": 0.0, "model_s": 0.0,
           "frames": {"tx": 0, "rx": 0}, "counters": {"tx": {}, "rx": {}},
           "mismatches": [], "failure": None}
    checks = round_trip(recipe, runner, codecs=ids, port=args.port, mtu=args.mtu,
                        max_host_elements=args.max_host_elements,
                        stalled=_stalled(args, batch), exact_idle=not args.narrow)
    for check in checks.values():
        out["frames"][check.lane] += len(check.inputs)
        out["reference_s"] += check.reference_seconds
        out["model_s"] += check.model_seconds
        if check.run is not None:
            _add_counters(out["counters"][check.lane], check.run.counters)
        if check.differences:
            d = check.differences[0]
            out["mismatches"].append({"batch": batch, "lane": d.lane, "frame": d.frame,
                                      "what": d.what})
            if out["failure"] is None:
                out["failure"] = (recipe, check)
    out.update(timed=runner.timed, stalled=runner.stalled, held=int(checks["tx"].held),
               cycles=runner.cycles, loop_s=runner.loop_seconds, builds=runner.builds)
    return out


def _strategy(args, ids):
    from squeezenic_hw.sim.traffic import traffic_recipes

    return traffic_recipes(ids, frames=args.batch, timed=args.timed, trusted=args.trusted,
                           code_bits=args.code_bits, narrow=args.narrow)


def run(args):
    from squeezenic_hw.cluster import Task, run_tasks

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
    jobs, scheduler = cluster_choice(args)
    _lane_builders(args, ids)
    backend = simulation_backend(NAME, args.backend)
    tty = sys.stderr.isatty()
    progress = args.progress or tty
    carriage, end = ("\r", "") if tty else ("", "\n")

    def say(line):
        if progress and not line.startswith("[start]"):
            print(f"{carriage}{line}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    results = [None] * len(todo)
    frames, mismatches = 0, 0
    alone = jobs == 1 and scheduler is None
    tasks = [Task(f"batch {batch}", _run_batch, (args, ids, backend, batch, progress, alone))
             for batch in todo]
    with scheduler_errors():
        for done, (index, result) in enumerate(run_tasks(
                tasks, scheduler=scheduler, jobs=jobs, expected=(CliError,), progress=say,
                name="fuzz")):
            results[index] = result
            frames += result["frames"]["tx"]
            mismatches += len(result["mismatches"])
            if progress:
                elapsed = time.perf_counter() - start
                # rewritten in place on a terminal, a line each elsewhere (a log)
                print(f"{carriage}batch {done + 1}/{len(todo)}  frames {frames:,}  "
                      f"mismatches {mismatches}  {elapsed:.0f} s", end=end, file=sys.stderr,
                      flush=True)
    if progress and tty:
        print(file=sys.stderr)

    # the batches' figures in batch order, as a run of one batch after another adds them
    generate_s = reference_s = model_s = loop_s = 0.0
    frames_in = {"tx": 0, "rx": 0}
    counters = {"tx": {}, "rx": {}}
    mismatched, first, builds = [], None, {}
    timed = stalled = held = cycles = 0
    for batch, result in zip(todo, results, strict=True):
        generate_s += result["generate_s"]
        reference_s += result["reference_s"]
        model_s += result["model_s"]
        loop_s += result["loop_s"]
        timed, stalled = timed + result["timed"], stalled + result["stalled"]
        held, cycles = held + result["held"], cycles + result["cycles"]
        for lane in ("tx", "rx"):
            frames_in[lane] += result["frames"][lane]
            _add_counters(counters[lane], result["counters"][lane])
        for lane, build in result["builds"].items():
            builds.setdefault(lane, build)
        mismatched += result["mismatches"]
        if first is None and result["failure"] is not None:
            recipe, check = result["failure"]
            first = {**result["mismatches"][0],
                     "files": _write_failure(args.output, batch, recipe, check, args, ids)}
    wall = time.perf_counter() - start
    build_seconds = round(sum(b["build_s"] for b in builds.values()), 2) if builds else None
    build_cached = all(b["cached"] for b in builds.values()) if builds else None
    build_s = build_seconds or 0.0
    summary = {
        "backend": backend, "codecs": ids, "mtu": args.mtu, "port": args.port,
        "max_host_elements": args.max_host_elements, "trusted": args.trusted,
        "narrow": args.narrow,
        "code_bits": args.code_bits, "seed": args.seed, "batch": args.batch,
        "idle": args.idle, "backpressure": args.backpressure, "timed": args.timed,
        "frames": frames_in["tx"], "rx_frames": frames_in["rx"], "batches": len(todo),
        "timed_batches": timed, "stalled_timed_batches": stalled,
        "held_timed_batches": held,
        "mismatches": len(mismatched), "first_mismatch": first,
        "cycles": cycles,
        "sim_cycles_per_second": round(cycles / loop_s, 1) if loop_s else None,
        "wall_seconds": round(wall, 2),
        "generate_seconds": round(generate_s, 2),
        "reference_seconds": round(reference_s, 2),
        "model_seconds": round(model_s - build_s, 2),
        "build_seconds": build_seconds, "build_cached": build_cached,
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
