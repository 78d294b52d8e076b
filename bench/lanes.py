"""Measure the TX and RX lanes: first-beat latency per path, sustained beats per cycle,
simulation speed and (optionally) yosys resources.

Usage::

    python bench/lanes.py [--codecs raw,fp16,...] [--synth] [--format table|csv|json]

Latency paths (cycles from the first input beat accepted to the first output
beat leaving, nothing else in flight, no backpressure):

* ``tx_encode_1`` / ``tx_encode_363``: one host frame of 1 / 363 elements with
  ``flush`` set, to its wire frame (store and forward: the wire header needs
  the frame's length, so this grows with the frame);
* ``tx_bypass``: a non-SqueezeNIC frame through the TX lane;
* ``rx_decode``: one wire frame to its first host frame (cut through);
* ``rx_bypass``: a frame the RX lane passes through.

Throughput: host frames of 363 and 64 elements back to back, no
backpressure: TX input beats per cycle (1.0 = never stalled) and RX output
beats per cycle from its first to its last output beat.
"""

import argparse
import sys
import time

import numpy as np

sys.path.insert(0, "tests")

from squeezenic_hw.cli.output import render  # noqa: E402
from squeezenic_hw.gateware.rx.lane import RxLane  # noqa: E402
from squeezenic_hw.gateware.tx.lane import TxLane  # noqa: E402
from squeezenic_hw.sim.lane import simulate_lane  # noqa: E402
from squeezenic_hw.spec.codecs import CODECS  # noqa: E402

from support.lane_scenarios import host_stream, wire_of  # noqa: E402

BYPASS = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(200)


def _latency(lane, frames):
    return simulate_lane(lane, frames, quiet=60).first_beat_latency


def measure(codec):
    rng = np.random.default_rng(0)
    row = {"codec": codec}
    one = host_stream(rng, codec, n_total=1, flush_last=True)
    full = host_stream(rng, codec, n_total=363, lengths=[363], flush_last=True)
    row["tx_encode_1"] = _latency(TxLane(codecs=[codec]), one)
    row["tx_encode_363"] = _latency(TxLane(codecs=[codec]), full)
    row["tx_bypass"] = _latency(TxLane(codecs=[codec]), [BYPASS])
    row["rx_decode"] = _latency(RxLane(codecs=[codec]), wire_of(full, codecs=[codec]))
    row["rx_bypass"] = _latency(RxLane(codecs=[codec]), [BYPASS])
    for k in (363, 64):
        frames = host_stream(rng, codec, n_total=k * 12, lengths=[k])
        start = time.perf_counter()
        tx = simulate_lane(TxLane(codecs=[codec]), frames, quiet=60)
        row[f"tx_in_bpc_{k}"] = round(tx.beats_per_cycle_in, 4)
        wire = [f.data for f in tx.frames]
        rx = simulate_lane(RxLane(codecs=[codec], max_host_elements=k), wire, quiet=60)
        span = rx.frames[-1].last_cycle - rx.frames[0].first_cycle + 1
        row[f"rx_out_bpc_{k}"] = round(rx.beats_out / span, 4)
        if k == 363:
            cycles = tx.extra["sim_cycles"] + rx.extra["sim_cycles"]
            row["sim_cycles_per_s"] = round(cycles / (time.perf_counter() - start))
    return row


def synth_rows(codecs):
    from squeezenic_hw.flows.synth import synthesize
    rows = []
    for name, make in [("TxLane", lambda: TxLane(codecs=codecs)),
                       ("RxLane", lambda: RxLane(codecs=codecs))]:
        r = synthesize(make(), name=name.lower(), timing=True)
        rows.append({"block": name, "codecs": ",".join(map(str, codecs)), **r.summary(),
                     "log": str(r.log_path)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--codecs", default=",".join(CODECS),
                    help="codecs to measure, one lane per codec (default: all)")
    ap.add_argument("--synth", action="store_true",
                    help="also synthesise a TX and an RX lane with all the codecs (slow)")
    ap.add_argument("--format", choices=("table", "csv", "json"), default="table")
    args = ap.parse_args(argv)
    codecs = [c for c in args.codecs.split(",") if c]
    rows = []
    for c in codecs:
        print(f"measuring {c} ...", file=sys.stderr, flush=True)
        rows.append(measure(c))
    columns = list(rows[0])
    print(render(rows, columns, args.format, title="lane latency (cycles) and throughput"),
          end="")
    if args.synth:
        print("synthesising ...", file=sys.stderr, flush=True)
        srows = synth_rows(codecs)
        print(render(srows, list(srows[0]), args.format, title="lane resources (yosys)"),
              end="")


if __name__ == "__main__":
    main()
