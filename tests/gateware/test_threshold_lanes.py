# amaranth: UnusedElaboratable=no
"""Codec 7 ``threshold`` through the TX and RX lanes, against the numpy reference lanes.

Densities 0 %, 0.1 %, 1 %, 10 %, 50 % and 100 % of kept elements, NaN and ±inf
present (``sim.vectors.sparse_gradient``), mixed with another codec and with
bypassed frames, under random idle cycles and backpressure; frame for frame
and byte for byte, counters included. Frames whose beats end before their
``tuser_size`` are judged on what the lanes read of them (``sim.traffic``).
"""

import struct
from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.threshold import keep_mask
from squeezenic_hw.sim import traffic
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.vectors import sparse_gradient
from squeezenic_hw.spec.frames import Header, build_wire_frame, parse
from squeezenic_hw.spec.header import FLAG_ENCODED, HDR, HEADER_LEN

from support.lane_scenarios import (
    check_against_reference,
    host_stream,
    interleave,
    lane_simulation,
    patch,
)
from support.param_sweep import rotated, slow_except
from support.unused import rejected

DENSITIES = [0.0, 0.001, 0.01, 0.1, 0.5, 1.0]
CODECS = ["threshold", "sign"]


def sparse_traffic(rng, density, *, n_streams=2, elements=(600, 1500), max_k=363,
                   bypass_rate=0.1, other_codec="sign", flush_rate=0.05):
    """Interleaved threshold tensors (one other-codec stream, bypassed frames too)."""
    streams = []
    for s in range(n_streams):
        n = int(rng.integers(*elements))
        scale = float(rng.uniform(0.5, 4))
        hdr = Header(src_ip=bytes([10, 0, 0, 1 + s]))
        streams.append(host_stream(rng, "threshold", n_total=n, max_k=max_k,
                                   offset=int(rng.integers(0, 2**32)), header=hdr,
                                   flush_rate=flush_rate, scale=scale,
                                   values=sparse_gradient(rng, n, density, scale=scale)))
    if other_codec:
        streams.append(host_stream(rng, other_codec, n_total=200, max_k=max_k,
                                   header=Header(src_ip=bytes([10, 0, 0, 9]))))
    return interleave(rng, streams, bypass_rate=bypass_rate)


# ---- TX --------------------------------------------------------------------------

@pytest.mark.parametrize("density,idle,backpressure",
                         rotated(DENSITIES, [(0.3, 0.3), (0.1, 0.7)]))
def test_tx_threshold_matches_reference(density, idle, backpressure):
    rng = np.random.default_rng([int(density * 1000), int(idle * 10)])
    frames = sparse_traffic(rng, density)
    run = lane_simulation("tx", codecs=CODECS).run(frames, idle=idle,
                                                   backpressure=backpressure,
                                                   seed=int(density * 1000))
    expected = check_against_reference(run, frames, "tx", codecs=CODECS)
    heads = [parse(f) for f in expected]
    assert any(h is not None and h.codec == 7 and h.encoded for h in heads), \
        "no threshold wire frame made"


@pytest.mark.parametrize("mtu", [130, 200, 9600])
def test_tx_threshold_small_and_jumbo_mtu(mtu):
    """Small MTUs close threshold frames in the middle of beats (and at beat starts)."""
    rng = np.random.default_rng(mtu)
    frames = []
    for density in (0.3, 1.0, 0.02):
        frames += sparse_traffic(rng, density, n_streams=1, elements=(300, 700),
                                 bypass_rate=0.05, other_codec=None)
    run = lane_simulation("tx", codecs=CODECS, mtu=mtu).run(frames, idle=0.2,
                                                            backpressure=0.2, seed=mtu)
    check_against_reference(run, frames, "tx", codecs=CODECS, mtu=mtu)
    if mtu < 9600:
        assert run.counters["close_full"] > 5


@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 1.0])
def test_tx_threshold_full_rate(density):
    """One host beat per cycle at every density, when the wire is not backpressured; at
    100 % a wire frame (bitmap + values) is 3 % larger than its host data, so there the
    wire is the limit: it is kept busy, one beat per cycle without a gap."""
    rng = np.random.default_rng(11)
    n = 363 * 12
    frames = host_stream(rng, "threshold", n_total=n, max_k=363, scale=1.0,
                         lengths=[363], flush_last=True,
                         values=sparse_gradient(rng, n, density))
    run = lane_simulation("tx", codecs=["threshold"]).run(frames, quiet=200)
    check_against_reference(run, frames, "tx", codecs=["threshold"])
    if density == 1.0:
        assert run.max_out_streak == run.beats_out, "the wire idled"
    else:
        assert run.input_cycles == run.beats_in, "the lane stalled its input"
    assert run.gaps_in_frames == 0


@pytest.mark.parametrize("other", ["threshold", "sign"])
def test_tx_threshold_frame_closed_idle_then_another(other):
    """A threshold frame that the idle timeout closes, then a frame of another key, its
    own codec or another: the close carries no kept elements into the next frame. Timed
    exactly, then under random idle cycles and backpressure (a gap of 40 T, so that the
    timeout closes the frame with no beat waiting)."""
    rng = np.random.default_rng(11)
    first = host_stream(rng, "threshold", n_total=255, lengths=[255],
                        values=sparse_gradient(rng, 255, 0.5),
                        header=Header(src_ip=bytes([10, 0, 0, 1])))
    second = host_stream(rng, other, n_total=31, lengths=[31], flush_last=True,
                         header=Header(src_ip=bytes([10, 0, 0, 2])))
    frames = first + second
    T = 5
    beats = lr.frame_beats(frames[0])
    for gap in (T - 1, T, T + 4):       # a mismatch close, then idle closes
        times = [0, beats + gap]
        run = lane_simulation("tx", codecs=CODECS).run(frames, times=times, idle_timeout=T)
        check_against_reference(run, frames, "tx", codecs=CODECS, idle_timeout=T,
                                times=times)
        assert run.counters["close_idle"] == (gap >= T)
    # under random idle cycles and backpressure, when the timeout falls is the lane's to
    # say; every byte and counter else is the reference's
    for seed in range(3):
        run = lane_simulation("tx", codecs=CODECS).run(
            frames, times=[0, beats + 40 * T], idle_timeout=T, idle=0.3, backpressure=0.3,
            seed=seed, close_at_end=False)
        expected, _ = traffic.expected_tx_stalled(frames, run.frames, run.counters,
                                                  codecs=CODECS, idle_timeout=T)
        assert traffic.differences_stalled("tx", run.frames, run.counters, expected, frames,
                                           codecs=CODECS) == []
        assert run.counters["close_idle"] >= 1


#: Scales as fp32 bits: negative (keeps +0.0), −0.0, +0.0, NaN of both signs, the
#: smallest subnormals of both signs, normal, ±inf.
TRUNCATION_SCALES = [0xBF800000, 0x80000000, 0x00000000, 0x7FC00000, 0xFFC00001,
                     0x00000001, 0x80000001, 0x3F800000, 0xFF800000, 0x7F800000]


def _cuts(size):
    """Where to end the beats of a frame of ``size`` bytes: at the start of each payload
    beat (every number of missing beats) and inside it, mid-element too (a partial last
    beat); for a long frame, with no payload, half of it and all but its last beat."""
    starts = range(HEADER_LEN, size, 64)
    if len(starts) > 3:
        return [starts[0], starts[len(starts) // 2] + 2, starts[-1]]
    return sorted(c for start in starts for c in (start, start + 2, start + 36) if c < size)


def _truncated_stream(rng, scale_bits, lengths, codec="threshold"):
    """One tensor's host frames at ``scale_bits``, each of ``lengths`` cut at every
    :func:`_cuts`, whole frames between them; the last with ``flush``."""
    n = sum(lengths) * 2
    x = sparse_gradient(rng, n, 0.3)
    base = host_stream(rng, codec, n_total=n, lengths=[k for k in lengths for _ in (0, 1)],
                       values=x, offset=int(rng.integers(0, 2**32)), flush_last=True,
                       header=Header(src_ip=bytes([10, 0, 1, scale_bits & 0xFF])))
    base = [patch(f, HDR.SCALE[0], struct.pack("<I", scale_bits)) for f in base]
    frames = []
    for k, f in enumerate(base):
        if k % 2:
            frames.append(AxisFrame(f))          # whole, coalesced behind the cut ones
        else:
            frames += [AxisFrame(f[:c], size=len(f)) for c in _cuts(len(f))]
    return frames


@pytest.mark.parametrize("idle,backpressure", slow_except([(0.3, 0.3), (0.1, 0.7)], 0))
def test_tx_threshold_truncated_frames_keep_stand_in_zeros_as_the_reference(idle,
                                                                            backpressure):
    """Host frames whose beats end before ``tuser_size`` (every number of missing beats,
    partial last beats, frames that close full in their stand-in beats): each missing
    element is a +0.0, kept exactly when the reference keeps a +0.0 (``abs(+0.0) > scale``:
    negative scales and −inf keep it; ±0, NaN, subnormals, normal and +inf scales do not).
    Frame for frame against the reference on what the lane reads (``traffic.lane_view``),
    ``size_errors`` included; a ``sign`` stream cut the same way rides along."""
    rng = np.random.default_rng([int(idle * 10), int(backpressure * 10), 77])
    frames = []
    for scale_bits in TRUNCATION_SCALES:
        # 363 elements: stand-in beats close a frame full when every element is kept
        long = [363] if scale_bits in (0xBF800000, 0xFF800000, 0x00000000) else []
        frames += _truncated_stream(rng, scale_bits, [17, 40, *long])
    frames += _truncated_stream(rng, 0xBF800000, [17, 40], codec="sign")
    run = lane_simulation("tx", codecs=CODECS).run(frames, idle=idle,
                                                   backpressure=backpressure,
                                                   seed=int(backpressure * 10))
    expected = traffic.expected_tx(frames, codecs=CODECS)
    assert traffic.differences("tx", run.frames, run.counters, expected) == []
    assert expected.counters["size_errors"] > 100 and expected.counters["close_full"] > 0


def test_tx_threshold_rejects_small_mtu():
    rejected(TxLane, codecs=["threshold"], mtu=129, match="mtu")


# ---- RX --------------------------------------------------------------------------

def _wire(rng, density, **kw):
    host = [f.data for f in sparse_traffic(rng, density, **kw)]
    wire, _ = lr.tx(host, codecs=CODECS)
    return [AxisFrame(f, src=int(rng.integers(0, 2**16)), dst=int(rng.integers(0, 2**16)))
            for f in wire]


@pytest.mark.parametrize("density,idle,backpressure",
                         rotated(DENSITIES, [(0.3, 0.3), (0.1, 0.7)]))
def test_rx_threshold_matches_reference(density, idle, backpressure):
    rng = np.random.default_rng([int(density * 1000), int(backpressure * 10), 2])
    frames = _wire(rng, density, elements=(400, 900))
    run = lane_simulation("rx", codecs=CODECS).run(frames, idle=idle,
                                                   backpressure=backpressure,
                                                   seed=int(density * 1000) + 1)
    check_against_reference(run, frames, "rx", codecs=CODECS)


def _bad_wire_frames():
    """Threshold wire frames whose payload disagrees with itself, and bad lengths."""
    rng = np.random.default_rng(5)
    h = Header(codec=7, flags=FLAG_ENCODED, n=40, offset=1000)
    vals = rng.standard_normal(8).astype(np.float32)

    def bitmap_frame(n, bits, values, param=0):
        keep = np.zeros(-(-n // 8) * 8, dtype=bool)
        keep[list(bits)] = True
        payload = np.packbits(keep, bitorder="little").tobytes() + values.astype("<f4").tobytes()
        return build_wire_frame(replace(h, n=n, param=param), payload)

    def index_frame(n, idx, values):
        payload = struct.pack(f"<{len(idx)}H", *idx) + values.astype("<f4").tobytes()
        return build_wire_frame(replace(h, n=n, param=1), payload)

    frames = {
        "bitmap ok": bitmap_frame(40, [1, 5, 39], vals[:3]),
        "bitmap padding bit": bitmap_frame(37, [1, 38], vals[:1]),
        "bitmap more bits than values": bitmap_frame(40, [0, 3, 7, 20], vals[:2]),
        "bitmap fewer bits than values": bitmap_frame(40, [9], vals[:4]),
        "bitmap n = 1": bitmap_frame(1, [0], vals[:1]),
        "index ok": index_frame(600, [3, 100, 599], vals[:3]),
        "index k = 0": index_frame(600, [], vals[:0]),
        "index duplicate": index_frame(600, [3, 3, 100], vals[:3]),
        "index decreasing": index_frame(600, [50, 10, 60], vals[:3]),
        "index past n": index_frame(600, [5, 600, 7], vals[:3]),
        "index huge first": index_frame(2000, [65535, 1, 2], vals[:3]),
        "index 16 in one beat": index_frame(1000, list(range(16, 32)), vals.repeat(2)[:16]),
    }
    ok = bitmap_frame(40, [1, 5, 39], vals[:3])
    frames["length not 4k after bitmap"] = build_wire_frame(parse(ok), ok[HEADER_LEN:-1])
    short = index_frame(600, [3, 100], vals[:2])
    frames["index length not 6k"] = build_wire_frame(parse(short), short[HEADER_LEN:-2])
    frames["layout 2"] = bitmap_frame(40, [1], vals[:1], param=2)
    return frames


def test_rx_threshold_truncated_frames_as_the_reference():
    """Threshold wire frames whose beats end before ``tuser_size`` (bitmap and index-list
    layouts, k = 0 among them; every number of missing beats, partial last beats, in the
    layout and in the values): the lane reads zeros where they are missing, as the reference
    does (``traffic.lane_view``), ``size_errors`` included."""
    rng = np.random.default_rng(31)
    host = []
    for scale, density in ((-1.0, 1.0), (1.0, 0.5), (1.0, 0.035), (1.0, 0.0)):
        n = 317
        host += host_stream(rng, "threshold", n_total=n, lengths=[17, 300], scale=scale,
                            flush_rate=1.0, values=sparse_gradient(rng, n, density),
                            header=Header(src_ip=bytes([10, 0, 2, int(density * 100)])))
    frames = []
    for w in lr.tx(host, codecs=["threshold"])[0]:
        frames += [AxisFrame(w[:c], size=len(w)) for c in _cuts(len(w))] + [AxisFrame(w)]
    assert {parse(f.data).param for f in frames} == {0, 1}
    run = lane_simulation("rx", codecs=["threshold"]).run(frames, idle=0.3,
                                                          backpressure=0.4, seed=31)
    expected = traffic.expected_rx(frames, codecs=["threshold"])
    assert traffic.differences("rx", run.frames, run.counters, expected) == []
    assert expected.counters["size_errors"] > 10


def test_rx_threshold_malformed_frames_counted_not_dropped():
    frames = list(_bad_wire_frames().values())
    frames = [AxisFrame(f, src=k, dst=k) for k, f in enumerate(frames)]
    run = lane_simulation("rx", codecs=CODECS).run(frames, idle=0.2, backpressure=0.2)
    check_against_reference(run, frames, "rx", codecs=CODECS)
    assert run.counters["sparse_count_errors"] >= 4
    assert run.counters["sparse_layout_errors"] >= 5
    assert run.counters["bypass_length"] == 2 and run.counters["bypass_param"] == 1


def test_rx_threshold_lane_keeps_the_parameters_of_odd_width_codes():
    """An RX lane with ``threshold`` built in decodes ``fixed`` and ``qsgd`` frames of odd
    widths: their parameter's bit 0 is not the index-list layout of a threshold frame."""
    rng = np.random.default_rng(8)
    codecs = ["fixed", "qsgd", "threshold"]
    frames = [build_wire_frame(
        Header(codec=codec, param=param, flags=FLAG_ENCODED, n=20, aux_bits=0xBF800000),
        rng.integers(0, 256, -(-20 * param // 8), dtype=np.uint8))
        for codec in (3, 4) for param in (2, 3, 5, 16)]
    frames += list(_bad_wire_frames().values())[5:7]        # threshold index-list frames
    run = lane_simulation("rx", codecs=codecs).run(frames)
    check_against_reference(run, frames, "rx", codecs=codecs)


@pytest.mark.parametrize("density", [1.0, 0.1, 0.05, 0.01])
def test_rx_threshold_full_rate(density):
    """Bitmap (≥ 6.25 %) and index-list frames: the host side gets one beat per cycle, except
    at 100 %, where a wire frame is larger than its host data and the lane instead reads the
    wire at one beat per cycle."""
    rng = np.random.default_rng(3)
    n = 363 * 16
    host = host_stream(rng, "threshold", n_total=n, lengths=[363], scale=1.0,
                       values=sparse_gradient(rng, n, density, specials=False))
    wire, _ = lr.tx(host, codecs=["threshold"])
    run = lane_simulation("rx", codecs=["threshold"]).run(wire)
    check_against_reference(run, wire, "rx", codecs=["threshold"])
    if density == 1.0:
        assert run.input_cycles == run.beats_in, "the lane stalled the wire"
    else:
        # after the first beat, the output is one unbroken run of beats
        assert run.max_out_streak >= run.beats_out - 2, (run.max_out_streak, run.beats_out)


def test_threshold_round_trip_through_both_lanes():
    """TX hardware → RX hardware gives back the kept values exactly and +0.0 elsewhere."""
    rng = np.random.default_rng(21)
    n = 2000
    x = sparse_gradient(rng, n, 0.05, scale=2.0)
    host = host_stream(rng, "threshold", n_total=n, max_k=363, scale=2.0, values=x,
                       flush_last=True)
    tx = lane_simulation("tx", codecs=["threshold"]).run(host, idle=0.2, backpressure=0.2)
    rx = lane_simulation("rx", codecs=["threshold"]).run(tx.frames, idle=0.2, backpressure=0.2)
    got = np.concatenate([np.frombuffer(f.data[HEADER_LEN:], dtype="<u4") for f in rx.frames])
    expected = np.where(keep_mask(x, 2.0), x.view(np.uint32), 0).astype(np.uint32)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("lengths", [
    [*range(1, 81), *range(340, 364)],                                 # every last beat
    pytest.param(list(range(1, 364)), marks=pytest.mark.slow),        # every length
], ids=["sample", "all"])
def test_tx_threshold_every_host_frame_length(lengths):
    """Host frames of 1…80 and 340…363 elements (every partial last beat; all of 1…363
    under ``-m slow``), back to back at 10 %: one host beat per cycle, the reference's
    frames."""
    rng = np.random.default_rng(17)
    n = sum(lengths)
    frames = host_stream(rng, "threshold", n_total=n, lengths=lengths, scale=1.0,
                         values=sparse_gradient(rng, n, 0.1), flush_last=True)
    run = lane_simulation("tx", codecs=["threshold"]).run(frames, quiet=200)
    check_against_reference(run, frames, "tx", codecs=["threshold"])
    assert run.input_cycles == run.beats_in, "the lane stalled its input"


@pytest.mark.parametrize("max_host", [1, 17, 100])
def test_rx_threshold_host_frame_cuts(max_host):
    """Small host frames cut wire frames mid-beat: the expander's jobs start anywhere."""
    rng = np.random.default_rng(max_host)
    frames = []
    for density in (0.02, 0.4):
        frames += _wire(rng, density, n_streams=1, elements=(150, 300), other_codec=None,
                        bypass_rate=0.0)
    sim = lane_simulation("rx", codecs=["threshold"], max_host_elements=max_host)
    run = sim.run(frames, idle=0.2, backpressure=0.3, seed=max_host)
    check_against_reference(run, frames, "rx", codecs=["threshold"],
                            max_host_elements=max_host)
