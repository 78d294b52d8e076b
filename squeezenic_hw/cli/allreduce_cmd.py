"""``squeezenic-hw allreduce``: a ring all-reduce of N tensors through N SqueezeNICs
(``docs/wire-format.md`` section 8): what every host receives, every link's frames, and
how far the result is from the exact sum."""

import sys
import time
from pathlib import Path

import numpy as np

from squeezenic_hw.pcap import write_frames
from squeezenic_hw.spec.codecs import PRESETS
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU
from squeezenic_hw.spec.reduce import INTEGER_CODECS, MAX_NODES, MIN_NODES, reduce_family

from . import CliError
from .backend import (
    BuildProgress,
    add_backend_option,
    add_cache_dir_option,
    simulation_backend,
)
from .frames_cmd import resolve_codec
from .input_files import read_tensor
from .options import OptionType, codec_or_preset
from .output import add_format_option, render

NAME = "allreduce"
HELP = ("ring all-reduce of N float32 tensors (.npy) through N NICs: every host's "
        "result, every link's frames, the error against the exact sum")
#: Columns of the summary row (the JSON keys of ``--format json``).
COLUMNS = ["nodes", "elements", "codec", "param", "stochastic", "scale", "aux", "seed",
           "width", "link_frames", "link_bytes", "identical", "max_error", "max_bound",
           "within_bound", "no_bound", "engine", "equals_reference", "cycles",
           "ideal_cycles", "efficiency", "hop_latency", "link_gbps", "bypassed"]
#: The clock of the plugin's lanes (OpenNIC's 250 MHz user clock).
CLOCK_HZ = 250e6


def add_arguments(parser):
    parser.add_argument("tensors", nargs="+", metavar="T.npy",
                        help=f"node r's host tensor (float32, one length), "
                             f"{MIN_NODES} to {MAX_NODES} of them in ring order")
    parser.add_argument("--codec", required=True, type=OptionType("--codec", codec_or_preset),
                        help="raw, fp16, bf16, natural, fixed, qsgd, sign or a preset ("
                             + ", ".join(PRESETS) + "); threshold cannot be reduced")
    parser.add_argument("--param", type=int, help="codec parameter (fixed/qsgd: 2..16)")
    parser.add_argument("--scale", type=float,
                        help="header scale (fixed/qsgd: (2^(b-1)-1)/max|x| over every "
                             "tensor unless given; presets derive it)")
    parser.add_argument("--aux", type=float,
                        help="header aux (fixed/qsgd: 1/scale unless given; presets "
                             "derive it)")
    parser.add_argument("--seed", type=int, default=0,
                        help="base uint32 seed; node r draws with seed + r (default 0)")
    parser.add_argument("--stochastic", action="store_true", help="stochastic rounding")
    parser.add_argument("--mtu", type=int, default=DEFAULT_MTU,
                        help=f"largest reduce frame in bytes (default {DEFAULT_MTU})")
    parser.add_argument("--reference", action="store_true",
                        help="run the numpy reference of the ring alone")
    add_backend_option(parser)
    add_cache_dir_option(parser)
    parser.add_argument("--max-host-elements", type=int, default=DEFAULT_HOST_ELEMENTS,
                        metavar="M", help="values per host frame, in and out (default "
                                          f"{DEFAULT_HOST_ELEMENTS})")
    parser.add_argument("--progress", action="store_true",
                        help="show the simulation's progress on stderr (default: when "
                             "stderr is a terminal)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR",
                        help="writes result{i}.npy (node i's host), link{i}.pcap (node "
                             "i to node i+1) and, simulated, host{i}.pcap (node i's result "
                             "frames)")
    add_format_option(parser)


def run(args):
    from squeezenic_hw.reference.allreduce import allreduce

    if not MIN_NODES <= len(args.tensors) <= MAX_NODES:
        raise CliError(f"give {MIN_NODES} to {MAX_NODES} tensors (one per node), "
                       f"got {len(args.tensors)}")
    if not 0 <= args.seed < 2**32:
        raise CliError(f"--seed must be a uint32, got {args.seed}")
    if not args.reference:
        args.backend = simulation_backend(NAME, args.backend)
    tensors = [read_tensor(p) for p in args.tensors]
    if len({t.size for t in tensors}) != 1:
        raise CliError("the tensors must have one length, got "
                       + ", ".join(str(t.size) for t in tensors))
    c = resolve_codec(args, np.concatenate(tensors))
    try:
        reduce_family(c["codec"])
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not args.reference and c["codec"].name not in INTEGER_CODECS:
        raise CliError(f"the NICs' reduce lane reduces {', '.join(INTEGER_CODECS)} so far: "
                       f"--reference runs the numpy model of {c['codec'].name}")
    scale, aux = c["scale"], c["aux"]
    result = allreduce(tensors, c["codec"].name, param=c["param"], scale=scale, aux=aux,
                       seed=args.seed, stochastic=c["stochastic"], mtu=args.mtu)
    try:
        hardware = None if args.reference else _simulate(args, tensors, c)
    except RuntimeError as exc:        # the ring stopped: a failed run, not a user error
        print(f"\nsqueezenic-hw allreduce: {exc}", file=sys.stderr)
        return 1
    results = result.results if hardware is None else hardware.results
    links = result.links if hardware is None else hardware.links

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for r, values in enumerate(results):
        np.save(out / f"result{r}.npy", values)
    for r, frames in enumerate(links):
        write_frames(out / f"link{r}.pcap", frames)
    if hardware is not None:
        for r, frames in enumerate(hardware.result_frames):
            write_frames(out / f"host{r}.pcap", frames)

    error = np.abs(results[0].astype(np.float64) - result.exact)
    has_bound = ~np.isnan(result.bound)
    finite = np.isfinite(error)
    row = {
        "nodes": len(tensors), "elements": int(tensors[0].size), "codec": c["codec"].name,
        "param": c["param"], "stochastic": bool(c["stochastic"]), "scale": float(scale),
        "aux": float(aux), "seed": args.seed, "width": result.width,
        "link_frames": sum(len(f) for f in links),
        "link_bytes": sum(len(x) for f in links for x in f),
        "identical": all(np.array_equal(results[0].view(np.uint32), v.view(np.uint32))
                         for v in results),
        "max_error": float(error[finite].max()) if finite.any() else None,
        "max_bound": float(result.bound[has_bound].max()) if has_bound.any() else None,
        "within_bound": bool((error[has_bound] <= result.bound[has_bound]).all()),
        "no_bound": int((~has_bound).sum()),
        "engine": "reference" if hardware is None else args.backend,
    }
    row |= _hardware_figures(hardware, result, len(tensors))
    if c["codec"].name == "sign" and np.float32(scale) == np.float32(aux):
        print(f"squeezenic-hw allreduce: warning: sign with scale = aux = {float(scale):g} "
              "decodes every sum to the same value; give --scale and --aux (or the signsgd "
              "or onebit preset)", file=sys.stderr)
    for note in c["notes"]:
        print(f"squeezenic-hw allreduce: {note}", file=sys.stderr)
    print(render([row], COLUMNS, args.format, json_obj=row), end="")
    ok = row["identical"] and row["within_bound"]
    if hardware is not None:
        ok = ok and row["equals_reference"] and not row["bypassed"]
    return 0 if ok else 1


def _simulate(args, tensors, c):
    """The ring of simulated NICs (:func:`~squeezenic_hw.sim.reduce_ring.run_ring`)."""
    from squeezenic_hw.sim.reduce_ring import run_ring

    show = args.progress or sys.stderr.isatty()
    started = time.monotonic()

    def progress(done, total):
        if show:
            print(f"\rsqueezenic-hw allreduce: {done}/{total} result beats "
                  f"({100 * done / max(total, 1):.0f} %), {time.monotonic() - started:.0f} s",
                  end="", file=sys.stderr, flush=True)
    try:
        run = run_ring(tensors, c["codec"].name, param=c["param"], scale=c["scale"],
                       aux=c["aux"], seed=args.seed, stochastic=c["stochastic"],
                       mtu=args.mtu, max_host_elements=args.max_host_elements,
                       progress=progress, backend=args.backend, cache_dir=args.cache_dir,
                       build_progress=BuildProgress(NAME, args.cache_dir))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if show:
        print(file=sys.stderr)
    return run


def _hardware_figures(run, result, nodes):
    """The simulated ring's figures beside the reference (``None``: no simulation)."""
    if run is None:
        return dict.fromkeys(["equals_reference", "cycles", "ideal_cycles", "efficiency",
                              "hop_latency", "link_gbps", "bypassed"])
    ideal = max(run.stream_beats.values()) + 2 * (nodes - 1) * run.hop_latency
    busiest = max(sum(len(f) for f in frames) for frames in run.links)
    return {
        "equals_reference": all(
            np.array_equal(v.view(np.uint32), result.results[0].view(np.uint32))
            for v in run.results) and all(run.complete),
        "cycles": run.cycles, "ideal_cycles": ideal,
        "efficiency": ideal / run.cycles if run.cycles else None,
        "hop_latency": run.hop_latency,
        "link_gbps": busiest * 8 * CLOCK_HZ / run.cycles / 1e9 if run.cycles else None,
        "bypassed": sum(len(f) for f in run.bypass) + sum(len(f) for f in run.host_other),
    }
