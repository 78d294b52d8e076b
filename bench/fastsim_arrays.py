"""Compiled simulation of the generator arrays (``squeezenic-hw throughput``'s host_bw
sweep): build time, cycles per second, and a long run at 6400 Gb/s.

Run from the repository root (the package must be installed, ``pip install -e .``)::

    python bench/fastsim_arrays.py                          # 400…6400, then 10**6 cycles at 6400
    python bench/fastsim_arrays.py --host-bw 400,6400 --long-cycles 0 --format json
    python bench/fastsim_arrays.py --host-bw 400 --flat 4,8 --long-cycles 0

Every run is the sweep's: ``sign`` at 1516-byte frames, generators at 100 Gb/s, the wire
always ready (``flows.throughput.by_host_bw``, compiled).

* **Sweep** (``route`` ``lane_module``): each ``--host-bw`` point in one fresh cache, in
  order, so the first point also builds the lane's library and the others find it.
  ``export_s`` is the Verilog export, ``lane_lib_s`` the lane library's build (0 when found),
  ``build_cold_s`` the whole build, ``build_cached_s`` a second build with the key;
  ``--cycles`` cycles after 300 of warm-up give ``sim_cycles_per_s`` (the bench's own loop)
  and ``wire_utilisation``.
* **Flat** (``route`` ``flat``, ``--flat N,...``): the other build route at N lanes, the
  whole ``TxArray`` exported and compiled, every lane elaborated.
* **Long** (``--long-cycles``, default 10**6, 0 to skip): 6400 Gb/s in a fresh cache;
  ``total_s`` is the wall time of the whole call, the cold build included.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

from squeezenic_hw.cli.output import render
from squeezenic_hw.cli.throughput_cmd import progress_printer
from squeezenic_hw.flows.throughput import by_host_bw
from squeezenic_hw.spec.scaling import lanes_for

COLUMNS = ["route", "host_bw", "lanes", "export_s", "lane_lib_s", "build_cold_s",
           "build_cached_s", "cycles", "sim_cycles_per_s", "wire_utilisation", "total_s"]


def measure(host_bw, cycles, cache, *, lane_module=True):
    """One point: a cold build in ``cache``, a cached one, and a run of ``cycles``."""
    start = time.perf_counter()
    run = by_host_bw(host_bw, "sign", 1516, cycles=cycles, backend="compiled",
                     cache_dir=cache, lane_module=lane_module,
                     progress=progress_printer(True, 300 + cycles))
    total = time.perf_counter() - start
    build = run.build
    again = by_host_bw(host_bw, "sign", 1516, cycles=100, warmup=0, backend="compiled",
                       cache_dir=cache, lane_module=lane_module)
    blocks = build.get("blocks") or {}
    return {"route": "lane_module" if lane_module else "flat", "host_bw": host_bw,
            "lanes": lanes_for(host_bw), "export_s": build.get("source_s"),
            "lane_lib_s": sum(b["build_s"] for b in blocks.values()) if lane_module else None,
            "build_cold_s": build["build_s"], "build_cached_s": again.build_seconds,
            "cycles": 300 + cycles, "sim_cycles_per_s": round(run.sim_cycles_per_s),
            "wire_utilisation": round(run.wire_utilisation, 4), "total_s": round(total, 1)}


def _ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host-bw", default="400,800,1600,3200,6400",
                   help="sweep points (default 400,800,1600,3200,6400)")
    p.add_argument("--cycles", type=int, default=5000,
                   help="measured cycles per sweep point (default 5000)")
    p.add_argument("--flat", default="", metavar="N,...",
                   help="also build N-lane arrays whole (the other route; minutes each)")
    p.add_argument("--long-cycles", type=int, default=10**6,
                   help="cycles of the long 6400 run, cold build included (0: skip)")
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fastsim_arrays.") as tmp:
        sweep = Path(tmp, "sweep")
        for bw in _ints(a.host_bw):
            print(f"sweep: host_bw {bw} ...", file=sys.stderr, flush=True)
            rows.append(measure(bw, a.cycles, sweep))
        for n in _ints(a.flat):
            print(f"flat: {n} lanes ...", file=sys.stderr, flush=True)
            rows.append(measure(100 * n, a.cycles, Path(tmp, f"flat{n}"), lane_module=False))
        if a.long_cycles:
            print(f"long: host_bw 6400, {a.long_cycles:,} cycles, cold build ...",
                  file=sys.stderr, flush=True)
            rows.append(measure(6400, a.long_cycles, Path(tmp, "long")))
    print(render(rows, COLUMNS, a.format), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
