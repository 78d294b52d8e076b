# amaranth: UnusedElaboratable=no
"""``squeezenic-hw simulate-plugin``: run the OpenNIC plugin's core (host lanes, generator
and checker arrays, registers) on pcaps and a register script, compiled or on Amaranth
(``sim/core_model.py``, ``docs/fastsim.md``)."""

import sys
from pathlib import Path

from squeezenic_hw.pcap import write_frames

from . import CliError
from .backend import (
    BuildProgress,
    add_backend_option,
    add_cache_dir_option,
    probability,
    simulation_backend,
)
from .input_files import read_pcap, read_text
from .output import add_format_option, render
from .plugin_options import add_plugin_options, plugin_params

NAME = "simulate-plugin"
HELP = ("simulate the OpenNIC plugin's core on pcaps and a register script: every output "
        "stream to a pcap, the register reads, the host streams against the reference")
#: AXI-Lite response codes
_RESPONSES = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}


def add_arguments(parser):
    parser.epilog = ("The script has one step per line: write REG VALUE, read REG, wait "
                     "CYCLES, poll REG VALUE [EVERY], inputs-done, frames STREAM COUNT "
                     "(REG a register name of `generate --registers`, or an address; "
                     "docs/cli.md).")
    add_plugin_options(parser, host_bw_default="100")
    parser.add_argument("--looped", action="store_true",
                        help="loop interface 0's wire output into its wire input, as a "
                             "cable would (tx0 and rx0 are then no streams of the run)")
    parser.add_argument("--input", action="append", default=[], metavar="STREAM=IN.pcap",
                        help="frames of an input stream (h2c0, rx0, h2c1, rx1), sent back "
                             "to back in file order; repeat for more streams")
    parser.add_argument("--script", metavar="FILE",
                        help="register script, run from the first cycle (default: none)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="directory for STREAM.pcap of every output stream "
                             "(timestamps: the cycle of each frame's first beat)")
    parser.add_argument("--backpressure", type=float, default=0.0, metavar="P",
                        help="probability that an output is not ready in a cycle")
    parser.add_argument("--idle", type=float, default=0.0, metavar="P",
                        help="probability of an idle input cycle before each beat")
    parser.add_argument("--seed", type=int, default=0, help="seed of the idle/backpressure draws")
    parser.add_argument("--timeout", type=int, default=2_000_000, metavar="CYCLES",
                        help="give up after this many cycles (default 2,000,000)")
    add_backend_option(parser)
    add_cache_dir_option(parser)
    parser.add_argument("--no-check", action="store_true",
                        help="do not compare the host streams with the numpy reference")
    parser.add_argument("--progress", action="store_true",
                        help="say on stderr when the model is being built (default: when "
                             "stderr is a terminal)")
    add_format_option(parser)


def _inputs(specs, names):
    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--input must be STREAM=IN.pcap, got {spec!r}")
        if name not in names:
            raise CliError(f"--input: no input stream {name!r} in this run (it has "
                           f"{', '.join(names)})")
        if name in inputs:
            raise CliError(f"--input: {name} given twice")
        inputs[name] = read_pcap(path)[0]
    return inputs


def _script(path, params, looped):
    from squeezenic_hw.sim.core_script import parse_register_script

    if path is None:
        return []
    text = read_text(path)
    try:
        return parse_register_script(text, params, looped=looped)
    except ValueError as exc:
        raise CliError(f"{path}: {exc}") from None


def run(args):
    from squeezenic_hw.regmap.plugin import plugin_register_map
    from squeezenic_hw.sim import core_model as cm
    from squeezenic_hw.sim.core_script import register_name

    if args.reduce:
        raise CliError("--reduce: simulate-plugin runs one plugin, and a reduce lane needs a "
                       "ring; squeezenic-hw allreduce simulates one")
    params = plugin_params(args, 100)
    idle = probability("idle", args.idle)
    backpressure = probability("backpressure", args.backpressure)
    if args.timeout < 1:
        raise CliError(f"--timeout must be at least 1 cycle, got {args.timeout}")
    names, outputs = cm.core_streams(params, looped=args.looped)
    inputs = _inputs(args.input, names)
    script = _script(args.script, params, args.looped)
    backend = simulation_backend(NAME, args.backend)
    kw = {"looped": args.looped, "idle": idle, "backpressure": backpressure,
          "seed": args.seed, "timeout": args.timeout}
    build = None
    try:
        if backend == "compiled":
            from squeezenic_hw.sim.compiled import CompiledBuildError

            steps = BuildProgress(NAME, args.cache_dir)
            try:
                result = cm.simulate_core_compiled(params, inputs, script,
                                                   cache_dir=args.cache_dir, progress=steps,
                                                   **kw)
            except CompiledBuildError as exc:
                raise CliError(str(exc).splitlines()[0]) from None
            steps.done()
            build = result.extra["build"]
        else:
            result = cm.simulate_core(params, inputs, script, **kw)
    except TimeoutError as exc:
        print(f"squeezenic-hw {NAME}: error: {exc}", file=sys.stderr)
        return 1

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    streams = {}
    for name in outputs:
        frames = result.outputs[name]
        path = out / f"{name}.pcap"
        write_frames(path, [f.data for f in frames], [f.first_cycle for f in frames])
        streams[name] = {"frames": len(frames), "bytes": sum(len(f.data) for f in frames),
                         "tuser_dst": sorted({f.dst for f in frames}), "file": str(path),
                         "matches_reference": None, "not_checked": None, "difference": None}
    failed = []
    if not args.no_check:
        for name, (matches, detail) in cm.check_outputs(params, inputs, script,
                                                        result.outputs,
                                                        looped=args.looped).items():
            streams[name]["matches_reference"] = matches
            streams[name]["not_checked" if matches is None else "difference"] = detail
            if matches is False:
                failed.append(f"{name} differs from the reference: {detail}")

    regmap = plugin_register_map(params)
    accesses = [{"step": step, "op": script[step].kind, "cycle": cycle,
                 "register": register_name(regmap, address), "address": address, "data": data,
                 "response": _RESPONSES.get(response, str(response))}
                for step, cycle, address, data, response in result.responses]
    failed += [f"step {a['step']} ({a['op']} {a['register']}) answered {a['response']}"
               for a in accesses if a["response"] != "OKAY"]
    cycles = result.cycles
    summary = {"backend": backend,
               "build_seconds": build["build_s"] if build else None,
               "build_cached": build["cached"] if build else None,
               "cycles": cycles,
               "sim_cycles_per_second": round(cycles / result.wall_seconds)
               if result.wall_seconds else None,
               "frames_in": {name: len(inputs.get(name, [])) for name in names}}
    _print(args.format, summary, streams, accesses)
    for line in failed:
        print(f"squeezenic-hw {NAME}: error: {line}", file=sys.stderr)
    return 1 if failed else 0


def _print(fmt, summary, streams, accesses):
    if fmt == "json":
        print(render([], [], "json", json_obj={**summary, "outputs": streams,
                                                 "registers": accesses}), end="")
        return
    rows = [{"name": k, "value": v} for k, v in summary.items() if k != "frames_in"]
    rows += [{"name": f"{name} frames in", "value": n}
             for name, n in summary["frames_in"].items()]
    for name, s in streams.items():
        check = {True: "matches the reference", False: f"DIFFERS: {s['difference']}",
                 None: f"not checked: {s['not_checked']}" if s["not_checked"] else None}
        rows.append({"name": f"{name} frames out", "value": s["frames"]})
        rows.append({"name": f"{name} bytes out", "value": s["bytes"]})
        if check[s["matches_reference"]]:
            rows.append({"name": f"{name} check", "value": check[s["matches_reference"]]})
    for a in accesses:
        value = a["data"] if a["response"] == "OKAY" else f"{a['data']} ({a['response']})"
        rows.append({"name": f"step {a['step']}: {a['op']} {a['register']} "
                             f"(cycle {a['cycle']})", "value": value})
    print(render(rows, ["name", "value"], fmt), end="")
