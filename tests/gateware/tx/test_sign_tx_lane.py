# amaranth: UnusedElaboratable=no
"""SignTxLane: the trusted ``sign`` TX lane, against the numpy reference TX lane."""

import numpy as np
import pytest
from lane_scenarios import check_against_reference, check_tuser, host_stream

from squeezenic_hw.gateware.tx.sign_lane import SignTxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.lane import simulate_lane
from squeezenic_hw.spec.frames import Header, build_host_frame

STALLS = [(0.0, 0.0), (0.3, 0.5)]


def _two_tensors(rng, max_k, flush_rate=0.1):
    """Two tensors' frames interleaved (a key change at every frame), then the rest."""
    a = host_stream(rng, "sign", n_total=900, max_k=max_k, flush_rate=flush_rate)
    b = host_stream(rng, "sign", n_total=700, max_k=200, offset=5000)
    return [f for pair in zip(a, b, strict=False) for f in pair] + a[len(b):] + b[len(a):]


@pytest.mark.parametrize("mtu", [68, 200, 1518, 9600])
@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_sign_lane_matches_reference(mtu, idle, backpressure):
    """Key changes, offset gaps, flushes, splits across wire frames (MTU 68 holds 32
    elements), random lengths, random idle cycles and backpressure."""
    rng = np.random.default_rng([mtu, int(idle * 10)])
    frames = _two_tensors(rng, int(rng.choice([16, 100, 363])))
    # a gap in the offsets of one tensor: a mismatch close with the key unchanged
    frames += host_stream(rng, "sign", n_total=300, max_k=50, offset=123_456)
    run = simulate_lane(SignTxLane(mtu=mtu), frames, idle=idle, backpressure=backpressure,
                        seed=mtu)
    check_against_reference(run, frames, "tx", mtu=mtu, codecs=["sign"])
    check_tuser(run, frames, "tx")
    assert run.counters["close_mismatch"] > 0


@pytest.mark.parametrize("mtu", [68, 1518])
def test_sign_lane_full_rate_every_host_frame_length(mtu):
    """One tensor of host frames of 1…363 elements: one host beat per cycle in, apart
    from the documented cycle after a frame that closes with two words to write, and
    no gap inside an output frame."""
    rng = np.random.default_rng(mtu)
    lengths = list(range(1, 364))
    frames = host_stream(rng, "sign", n_total=sum(lengths), lengths=lengths)
    lane = SignTxLane(mtu=mtu)
    run = simulate_lane(lane, frames, quiet=80)
    check_against_reference(run, frames, "tx", mtu=mtu, codecs=["sign"])
    closes = run.counters["wire_frames"]
    assert run.input_cycles <= run.beats_in + closes, "more stalls than closes"
    assert run.gaps_in_frames == 0
    if mtu == 1518:   # 11 632-element frames: a stall at most once per frame
        assert closes <= 7


def test_sign_lane_flush_every_frame_keeps_the_input_rate():
    """A flush on every host frame: a wire frame per host frame, down to one element."""
    rng = np.random.default_rng(3)
    lengths = [int(k) for k in rng.integers(1, 40, 120)]
    frames = host_stream(rng, "sign", n_total=sum(lengths), lengths=lengths, flush_rate=1.0)
    run = simulate_lane(SignTxLane(), frames, quiet=80)
    check_against_reference(run, frames, "tx", codecs=["sign"])
    assert run.counters["close_flush"] == len(frames)
    assert run.input_cycles <= run.beats_in + len(frames) // 4


@pytest.mark.parametrize("n", [1, 16, 100])
def test_sign_lane_latency(n):
    """A flush frame's header leaves 8 cycles after its last beat comes in."""
    rng = np.random.default_rng(n)
    frames = host_stream(rng, "sign", n_total=n, lengths=[n], flush_rate=1.0)
    run = simulate_lane(SignTxLane(), frames, quiet=60)
    check_against_reference(run, frames, "tx", codecs=["sign"])
    assert run.first_beat_latency - -(-n // 16) == 8


def test_sign_lane_idle_timeout_exact_boundaries():
    """Gaps of T-2, T-1, T, T+1 cycles between host frames: closes as the reference."""
    T = 40
    rng = np.random.default_rng(5)
    frames = host_stream(rng, "sign", n_total=2000, max_k=60)
    times, t = [], 5
    for f in frames:
        times.append(t)
        t += lr.frame_beats(f) + int(rng.choice([0, 3, T - 2, T - 1, T, T + 1, 200]))
    run = simulate_lane(SignTxLane(idle_timeout=T), frames, times=times, seed=1)
    check_against_reference(run, frames, "tx", codecs=["sign"], idle_timeout=T, times=times)
    assert run.counters["close_idle"] >= 5


def test_sign_lane_edge_values():
    """Signs of ±0, ±inf, NaNs of either sign and subnormals (sign bit, nothing else)."""
    bits = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFC00000,
                     0x00000001, 0x80000001, 0x3F800000, 0xBF800000] * 10, dtype=np.uint32)
    x = bits.view(np.float32)
    frames = [build_host_frame(Header(codec=5, offset=0), x[:37]),
              build_host_frame(Header(codec=5, offset=37), x[37:])]
    run = simulate_lane(SignTxLane(), frames)
    check_against_reference(run, frames, "tx", codecs=["sign"])


def test_sign_lane_parameters_checked():
    with pytest.raises(ValueError, match="mtu"):
        SignTxLane(mtu=67)
    with pytest.raises(ValueError, match="port"):
        SignTxLane(port=0)
    with pytest.raises(ValueError, match="idle_timeout"):
        SignTxLane(idle_timeout=-1)
    with pytest.raises(ValueError, match="token_depth"):
        SignTxLane(token_depth=7)


def test_sign_lane_converts_to_verilog():
    from amaranth.back import verilog

    text = verilog.convert(SignTxLane(), name="sign_lane")
    assert "module sign_lane" in text
