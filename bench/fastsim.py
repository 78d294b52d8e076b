"""Compiled against Amaranth simulation of the all-codec lanes: build time and cycles/s.

Run from the repository root (the package must be installed, ``pip install -e .``)::

    python bench/fastsim.py                              # TX and RX, table
    python bench/fastsim.py --lanes tx --frames 2000 --format json
    python bench/fastsim.py --amaranth-frames 0          # compiled only

For each lane (``TxLane()`` / ``RxLane()``, codecs 0–6) it builds the compiled model
twice in a fresh cache, with a key (cold, then cached: ``build_cold_s``,
``build_cached_s``; the cold one includes the Verilog export), runs
``--frames`` frames of every codec and every bypass reason under 10 % idle cycles and
20 % backpressure on it (``cycles``, ``sim_cycles_per_s``: the bench's own loop), checks
the frames and counters against the numpy reference (``matches_reference``), and runs
the first ``--amaranth-frames`` of them on Amaranth's simulator for its speed
(``amaranth_cycles_per_s``; ``speedup`` is the ratio).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from squeezenic_hw.gateware.rx.lane import RxLane  # noqa: E402
from squeezenic_hw.gateware.tx.lane import TxLane  # noqa: E402
from squeezenic_hw.reference import lane as lr  # noqa: E402
from squeezenic_hw.sim.axis import AxisFrame  # noqa: E402
from squeezenic_hw.sim.compiled import build_lane_model, simulate_lane_compiled  # noqa: E402
from squeezenic_hw.sim.lane import simulate_lane  # noqa: E402
from squeezenic_hw.spec.frames import Header  # noqa: E402

from support.lane_scenarios import bad_frames, host_stream, interleave, wire_of  # noqa: E402

CODECS = ["raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural"]
COLUMNS = ["lane", "frames", "build_cold_s", "build_cached_s", "cycles", "sim_cycles_per_s",
           "matches_reference", "amaranth_frames", "amaranth_cycles_per_s", "speedup"]


def traffic(lane, n_frames, seed=1):
    rng = np.random.default_rng(seed)
    frames = []
    while len(frames) < n_frames:
        streams = [host_stream(rng, c, n_total=int(rng.integers(300, 3000)), flush_rate=0.05,
                               offset=int(rng.integers(0, 2**32)),
                               header=Header(src_ip=bytes([10, 0, 4, k])))
                   for k, c in enumerate(CODECS)]
        batch = interleave(rng, streams, lane="tx", bypass_rate=0.0)
        if lane == "rx":
            batch = [AxisFrame(f) for f in wire_of(batch)]
        batch += [AxisFrame(b) for b in bad_frames(lane).values()]
        frames += batch
    return frames[:n_frames]


def measure(lane, n_frames, amaranth_frames):
    build = TxLane if lane == "tx" else RxLane
    frames = traffic(lane, n_frames)
    with tempfile.TemporaryDirectory(prefix="fastsim.") as cache:
        key = f"{build.__name__}()"
        _, cold = build_lane_model(build, cache_dir=cache, key=key)
        _, cached = build_lane_model(build, cache_dir=cache, key=key)
        run = simulate_lane_compiled(build, frames, idle=0.1, backpressure=0.2, seed=1,
                                     cache_dir=cache, key=key)
    expected, counters = (lr.tx if lane == "tx" else lr.rx)([f.data for f in frames])
    ok = [f.data for f in run.frames] == expected and all(
        run.counters[k] == v for k, v in counters.items())
    row = {"lane": lane, "frames": n_frames, "build_cold_s": cold["build_s"],
           "build_cached_s": cached["build_s"], "cycles": run.extra["sim_cycles"],
           "sim_cycles_per_s": round(run.sim_cycles_per_second),
           "matches_reference": ok, "amaranth_frames": amaranth_frames,
           "amaranth_cycles_per_s": None, "speedup": None}
    if amaranth_frames:
        start = time.perf_counter()
        slow = simulate_lane(build(), frames[:amaranth_frames], idle=0.1, backpressure=0.2)
        row["amaranth_cycles_per_s"] = round(slow.extra["sim_cycles"]
                                             / (time.perf_counter() - start), 1)
        row["speedup"] = round(row["sim_cycles_per_s"] / row["amaranth_cycles_per_s"])
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lanes", default="tx,rx", help="tx, rx or both (default tx,rx)")
    p.add_argument("--frames", type=int, default=3000, help="frames per lane (default 3000)")
    p.add_argument("--amaranth-frames", type=int, default=40,
                   help="frames for the Amaranth speed (default 40; 0: skip)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    a = p.parse_args(argv)
    lanes = [x.strip() for x in a.lanes.split(",") if x.strip()]
    if not lanes or any(x not in ("tx", "rx") for x in lanes):
        p.error(f"--lanes: tx and/or rx, got {a.lanes!r}")
    rows = []
    for lane in lanes:
        print(f"measuring {lane} ...", file=sys.stderr)
        rows.append(measure(lane, a.frames, a.amaranth_frames))
    if a.format == "json":
        print(json.dumps(rows, indent=2))
    elif a.format == "csv":
        print(",".join(COLUMNS))
        for r in rows:
            print(",".join("" if r[c] is None else str(r[c]) for c in COLUMNS))
    else:
        widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS]
        print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)))
        for r in rows:
            print("  ".join(str(r[c]).ljust(w) for c, w in zip(COLUMNS, widths, strict=True)))
    return 0 if all(r["matches_reference"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
