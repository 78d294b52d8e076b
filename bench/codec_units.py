"""Latency, throughput and synthesis figures of every codec encoder/decoder unit.

Run from the repository root (the package must be installed, ``pip install -e .``)::

    python bench/codec_units.py                                # every unit, text table
    python bench/codec_units.py --units RawEncoder,RawDecoder  # a few units
    python bench/codec_units.py --format csv --jobs 2 > units.csv
    python bench/codec_units.py --no-synth                     # simulation only (fast)
    python bench/codec_units.py --banks --units EncoderBank,DecoderBank --no-sim

For each unit of :data:`UNITS` (and, with ``--banks``, each bank of :data:`BANKS`,
built with every codec it has hardware for) it measures

* in Amaranth simulation (stream units only), with ``--beats`` random input
  beats offered back to back and the output always ready
  (``squeezenic_hw.sim.streams.run_stream(dut, beats, idle=0, backpressure=0)``):
  ``latency``, cycles from the first input beat accepted to the first output
  beat transferred; ``beats_per_cycle``, the steady-state throughput: output
  beats over the cycles between the first and the last output beat plus one
  (1.0 when no bubble ever appears); and ``max_run``, the longest run of
  back-to-back output beats (equal to ``--beats`` at full rate).
  ``declared`` is the unit's ``LATENCY``.
  Input beats are random integers of the payload's width, so the ``params``
  field is random too: good for timing, not for checking results;
* with :func:`squeezenic_hw.flows.synth.synthesize` (Yosys ``synth_xilinx -family
  xcup``, out of context): ``LUT``, ``FF``, ``CARRY``, ``DSP``, ``depth`` (cells
  on the longest path between registers/ports, see ``squeezenic_hw/flows/synth.py``),
  ``est_ns`` and ``lut_levels`` (the timing estimate, ``docs/timing.md``),
  ``synth_s`` (Yosys wall time) and ``peak_mib`` (Yosys peak memory). Logs are
  kept in ``--workdir`` (default ``build/synth/<unit>/yosys.log``).

Units whose module or class does not exist yet are reported as ``missing`` on
stderr and left out of the table. A unit that fails (exception in simulation or
synthesis) is reported as ``error`` and left out too; the exit status is then 1.
A progress line per unit goes to stderr; the table goes to stdout.
"""

import argparse
import concurrent.futures
import importlib
import random
import sys
import time
import traceback
from pathlib import Path

from amaranth import Shape
from amaranth.hdl import Fragment

from squeezenic_hw.cli.output import add_format_option, render

#: ``(module path, class name)`` of every unit measured, in table order.
UNITS = [
    ("squeezenic_hw.gateware.codecs.raw", "RawEncoder"),
    ("squeezenic_hw.gateware.codecs.raw", "RawDecoder"),
    ("squeezenic_hw.gateware.codecs.fp16", "Fp16Encoder"),
    ("squeezenic_hw.gateware.codecs.fp16", "Fp16Decoder"),
    ("squeezenic_hw.gateware.codecs.bf16", "Bf16Encoder"),
    ("squeezenic_hw.gateware.codecs.bf16", "Bf16Decoder"),
    ("squeezenic_hw.gateware.codecs.sign", "SignEncoder"),
    ("squeezenic_hw.gateware.codecs.sign", "SignDecoder"),
    ("squeezenic_hw.gateware.codecs.natural", "NaturalEncoder"),
    ("squeezenic_hw.gateware.codecs.natural", "NaturalDecoder"),
    ("squeezenic_hw.gateware.codecs.fixed", "FixedEncoder"),
    ("squeezenic_hw.gateware.codecs.fixed", "FixedDecoder"),
    ("squeezenic_hw.gateware.codecs.qsgd", "QsgdEncoder"),
    ("squeezenic_hw.gateware.codecs.qsgd", "QsgdDecoder"),
    ("squeezenic_hw.gateware.codecs.fp32_mul", "Fp32Multiplier"),   # not a stream: synthesis only
    ("squeezenic_hw.gateware.codecs.counter_rng", "CounterRng"),     # not a stream: synthesis only
]

#: ``(module path, class name)`` of the banks measured with ``--banks``; each is built with
#: every codec of its table (:data:`BANK_TABLES`, in the same module).
BANKS = [
    ("squeezenic_hw.gateware.codecs.bank", "EncoderBank"),
    ("squeezenic_hw.gateware.codecs.bank", "DecoderBank"),
]
BANK_TABLES = {"EncoderBank": "ENCODERS", "DecoderBank": "DECODERS"}

COLUMNS = ["unit", "latency", "declared", "beats_per_cycle", "max_run",
           "LUT", "FF", "CARRY", "DSP", "depth", "est_ns", "lut_levels", "synth_s", "peak_mib"]

DEFAULT_WORKDIR = Path(__file__).resolve().parents[1] / "build" / "synth"


class MissingUnit(Exception):
    """The unit's module or class does not exist (yet)."""


def load_unit(module_path, class_name):
    """Return the unit class, or raise :class:`MissingUnit` if it cannot be imported."""
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise MissingUnit(str(exc)) from exc
    try:
        return getattr(module, class_name)
    except AttributeError as exc:
        raise MissingUnit(f"{module_path} has no {class_name}") from exc


def build_unit(cls):
    """An instance of unit class ``cls``; a bank gets every codec of its table."""
    if cls.__name__ in BANK_TABLES:
        table = getattr(importlib.import_module(cls.__module__), BANK_TABLES[cls.__name__])
        return cls(list(table))
    return cls()


def is_stream_unit(dut):
    """Whether ``dut`` has the ``i``/``o`` streams of a codec unit."""
    return all(hasattr(getattr(dut, name, None), "payload") for name in ("i", "o"))


def random_beats(dut, count, seed):
    """``count`` random payload integers as wide as ``dut.i.payload``."""
    width = Shape.cast(dut.i.payload.shape()).width
    rng = random.Random(seed)
    return [rng.getrandbits(width) for _ in range(count)]


def measure_stream(dut, beats, seed):
    """Latency and throughput of stream unit ``dut`` fed ``beats`` random beats back to back."""
    from squeezenic_hw.sim.streams import run_stream

    run = run_stream(dut, random_beats(dut, beats, seed), idle=0.0, backpressure=0.0)
    # steady state: the fill latency is not a throughput loss
    span = run.cycles - run.latency
    return {"latency": run.latency, "beats_per_cycle": round(len(run.outputs) / span, 4),
            "max_run": run.max_ready_streak}


def measure_synth(dut, workdir, timeout):
    """Synthesis figures of ``dut`` (see :func:`squeezenic_hw.flows.synth.synthesize`)."""
    from squeezenic_hw.flows.synth import synthesize

    summary = synthesize(dut, workdir=workdir, timeout=timeout, timing=True).summary()
    return {key: summary[key] for key in ("LUT", "FF", "CARRY", "DSP", "depth", "est_ns",
                                          "lut_levels",
                                          "synth_s", "peak_mib")}


def measure_unit(module_path, class_name, options):
    """Measure one unit; never raises (runs in a worker process).

    Returns
    -------
    dict
        ``status`` (``ok``, ``missing`` or ``error``), ``row`` (the table row when
        ok), ``message`` and ``elapsed`` (seconds).
    """
    start = time.monotonic()
    outcome = {"unit": class_name, "row": None, "message": ""}
    try:
        cls = load_unit(module_path, class_name)
        dut = build_unit(cls)
        row = {"unit": class_name, "declared": getattr(dut, "LATENCY", None)}
        stream = is_stream_unit(dut)
        if options["synth"]:
            workdir = Path(options["workdir"]) / class_name
            row.update(measure_synth(dut, workdir, options["timeout"]))
        else:
            Fragment.get(dut, None)   # elaborate once: checks it, silences UnusedElaboratable
        if options["sim"] and stream:
            row.update(measure_stream(build_unit(cls), options["beats"], options["seed"]))
        outcome.update(status="ok", row=row)
    except MissingUnit as exc:
        outcome.update(status="missing", message=str(exc))
    except Exception as exc:   # report and go on with the other units
        last = traceback.extract_tb(exc.__traceback__)[-1]
        outcome.update(status="error", message=f"{type(exc).__name__}: {exc} "
                                               f"[{Path(last.filename).name}:{last.lineno}]")
    outcome["elapsed"] = time.monotonic() - start
    return outcome


def progress_line(index, total, outcome):
    """One stderr line describing a finished unit."""
    head = f"[{index}/{total}] {outcome['unit']}: {outcome['status']}"
    if outcome["status"] != "ok":
        return f"{head} ({outcome['message']})"
    row = outcome["row"]
    parts = [f"{key}={row[key]}" for key in COLUMNS[1:] if row.get(key) is not None]
    return f"{head}  {' '.join(parts)}  ({outcome['elapsed']:.1f} s)"


def select_units(names, banks=False):
    """The :data:`UNITS` (and with ``banks`` :data:`BANKS`) entries whose class names are
    in ``names`` (all if ``None``)."""
    candidates = UNITS + (BANKS if banks else [])
    if names is None:
        return list(candidates)
    known = {cls.lower(): (mod, cls) for mod, cls in candidates}
    unknown = [n for n in names if n.lower() not in known]
    if unknown:
        raise ValueError(f"unknown unit(s) {', '.join(unknown)}; known: "
                         f"{', '.join(cls for _, cls in candidates)}")
    return [known[n.lower()] for n in names]


def run_all(units, options, jobs):
    """Measure ``units`` with ``jobs`` processes; print progress; return outcomes in order."""
    outcomes = {}
    total = len(units)

    def report(outcome):
        outcomes[outcome["unit"]] = outcome
        print(progress_line(len(outcomes), total, outcome), file=sys.stderr, flush=True)

    if jobs <= 1:
        for module_path, class_name in units:
            report(measure_unit(module_path, class_name, options))
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(measure_unit, mod, cls, options) for mod, cls in units]
            for future in concurrent.futures.as_completed(futures):
                report(future.result())
    return [outcomes[cls] for _, cls in units]


def build_parser():
    parser = argparse.ArgumentParser(
        description="Latency, throughput and synthesis figures of the codec units.")
    parser.add_argument("--units", help="comma-separated class names (default: all)")
    parser.add_argument("--banks", action="store_true",
                        help="also the EncoderBank and DecoderBank with every codec (slow)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--beats", type=int, default=200,
                        help="random beats per simulation (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--no-sim", dest="sim", action="store_false",
                        help="skip simulation")
    parser.add_argument("--no-synth", dest="synth", action="store_false",
                        help="skip synthesis")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR,
                        help="synthesis work directory, one folder per unit "
                             "(default: build/synth)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="synthesis timeout per unit, seconds")
    add_format_option(parser)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        units = select_units(args.units.split(",") if args.units else None, args.banks)
    except ValueError as exc:
        parser.error(str(exc))
    options = {"sim": args.sim, "synth": args.synth, "beats": args.beats, "seed": args.seed,
               "workdir": str(args.workdir), "timeout": args.timeout}
    outcomes = run_all(units, options, max(1, args.jobs))
    rows = [o["row"] for o in outcomes if o["status"] == "ok"]
    sys.stdout.write(render(rows, COLUMNS, args.format))
    return 1 if any(o["status"] == "error" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
