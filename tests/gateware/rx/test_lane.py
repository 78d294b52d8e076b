# amaranth: UnusedElaboratable=no
"""The RX lane in simulation against the numpy reference lane, frame for frame, byte for byte."""

import numpy as np
import pytest

from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.spec.frames import RX_REASONS

from support.lane_scenarios import (
    bad_frames,
    check_against_reference,
    check_tuser,
    host_stream,
    lane_simulation,
    wire_of,
    wire_traffic,
)
from support.param_sweep import rotated
from support.unused import rejected

CHEAP = ["raw", "fp16", "bf16", "sign"]
STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


@pytest.mark.parametrize("max_host,idle,backpressure", rotated([1, 17, 363, 2384], STALLS))
def test_rx_matches_reference(max_host, idle, backpressure):
    rng = np.random.default_rng([max_host, int(idle * 10), int(backpressure * 10)])
    mtu = int(rng.choice([200, 1518, 9600]))
    frames = wire_traffic(rng, CHEAP, mtu)
    if max_host == 1:
        frames = frames[:6]   # 1-element host frames: keep the run short
    run = lane_simulation("rx", codecs=CHEAP, max_host_elements=max_host).run(frames, idle=idle,
                        backpressure=backpressure, seed=max_host)
    check_against_reference(run, frames, "rx", max_host_elements=max_host, codecs=CHEAP)
    check_tuser(run, frames, "rx")


def test_rx_every_bypass_reason_counted():
    frames = [AxisFrame(f, src=k, dst=7) for k, f in enumerate(bad_frames("rx").values())]
    run = lane_simulation("rx", codecs=CHEAP).run(frames, idle=0.2, backpressure=0.2)
    check_against_reference(run, frames, "rx", codecs=CHEAP)
    assert [(f.src, f.dst) for f in run.frames] == [(f.src, f.dst) for f in frames]
    for reason in RX_REASONS:
        assert run.counters[f"bypass_{reason.value}"] >= 1, reason


@pytest.mark.parametrize("codec,max_host", [("raw", 363), ("fp16", 363), ("sign", 363),
                                            ("raw", 17), ("fp16", 1), ("fixed", 363)])
def test_rx_full_rate_while_it_has_data(codec, max_host):
    """Once decoding starts, one host beat per cycle: no bubble between host frames."""
    rng = np.random.default_rng(3)
    n = 3000 if max_host > 1 else 150
    wire = wire_of(host_stream(rng, codec, n_total=n, lengths=[363]), codecs=[codec])
    run = lane_simulation("rx", codecs=[codec], max_host_elements=max_host).run(wire, quiet=60)
    check_against_reference(run, wire, "rx", codecs=[codec], max_host_elements=max_host)
    # From the second host frame on (the first may wait for the decoders' latency),
    # the output is one unbroken run of beats.
    rest = run.frames[1:]
    span = rest[-1].last_cycle - rest[0].first_cycle + 1
    assert span == sum(-(-len(f.data) // 64) for f in rest)


def test_rx_wrong_tuser_size_is_counted_never_dropped():
    rng = np.random.default_rng(4)
    wire = wire_of(host_stream(rng, "fp16", n_total=200, lengths=[100]), codecs=["fp16"])
    w = wire[0]
    truncated = AxisFrame(w[:120], size=len(w))
    longer = AxisFrame(w + bytes(200), size=len(w))
    run = lane_simulation("rx", codecs=["fp16"]).run([truncated, longer])
    repaired = [w[:120] + bytes(len(w) - 120), w]
    expected, _ = lr.rx(repaired, codecs=["fp16"])
    assert [f.data for f in run.frames] == expected
    assert run.counters["size_errors"] == 2


def test_rx_lane_parameters_checked():
    rejected(RxLane, max_host_elements=0, match="max_host_elements")
    rejected(RxLane, max_host_elements=2385, match="max_host_elements")
    rejected(RxLane, payload_depth=1, match="payload_depth")
