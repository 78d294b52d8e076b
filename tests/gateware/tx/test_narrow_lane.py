# amaranth: UnusedElaboratable=no
"""NarrowTxLane: the trusted TX lane of one narrow codec (``sign``, ``fixed:2|4|8``),
against the numpy reference TX lane."""

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import data, wiring

from squeezenic_hw.gateware.arrays.frame_bus import FrameBusArbiter
from squeezenic_hw.gateware.arrays.header_finisher import HeaderFinisher
from squeezenic_hw.gateware.tx.narrow import NarrowTxLane
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.generator import cut_mantissa
from squeezenic_hw.sim.lane import simulate_lane
from squeezenic_hw.sim.vectors import EDGE_F32_BITS
from squeezenic_hw.spec.frames import Header, build_host_frame
from squeezenic_hw.spec.generator import VALUE_EXPONENT_HIGH

from support.lane_scenarios import (
    check_against_reference,
    check_tuser,
    host_stream,
    lane_simulation,
)
from support.unused import rejected

STALLS = [(0.0, 0.0), (0.3, 0.5)]
FIXED = ["fixed:2", "fixed:4", "fixed:8"]


def _stream(rng, codec, **kw):
    """Host frames of ``codec`` (a narrow spec); ``fixed``: its width, deterministic,
    a power-of-two scale."""
    name, _, q = codec.partition(":")
    if q:
        kw.setdefault("scale", float(2.0 ** int(rng.integers(-3, 9))))
        return host_stream(rng, name, param=int(q), stochastic=False, **kw)
    return host_stream(rng, name, **kw)


def _two_tensors(rng, codec, max_k, flush_rate=0.1):
    """Two tensors' frames interleaved (a key change at every frame), then the rest."""
    a = _stream(rng, codec, n_total=900, max_k=max_k, flush_rate=flush_rate)
    b = _stream(rng, codec, n_total=700, max_k=200, offset=5000)
    return [f for pair in zip(a, b, strict=False) for f in pair] + a[len(b):] + b[len(a):]


class _FinishedLane(wiring.Component):
    """A bare lane on a frame bus of its own and the HeaderFinisher that completes its
    frames, as ``TxArray`` puts them."""

    def __init__(self, codec, **kw):
        self.lane = NarrowTxLane(codec, bare=True, **kw)
        self.bus = FrameBusArbiter(1)
        self.finisher = HeaderFinisher(self.lane.code_bits)
        members = {k: v for k, v in self.lane.signature.members.items() if k != "bus"}
        members["o"] = self.finisher.signature.members["o"]
        super().__init__(wiring.Signature(members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.lane, m.submodules.bus = self.lane, self.bus
        m.submodules.finisher = self.finisher
        for name in ("close", "cfg_port", "cfg_enable", "cfg_idle_timeout"):
            m.d.comb += getattr(self.lane, name).eq(getattr(self, name))
        m.d.comb += [self.close_done.eq(self.lane.close_done),
                     self.counters.eq(self.lane.counters)]
        wiring.connect(m, wiring.flipped(self.i), self.lane.i)
        wiring.connect(m, self.lane.bus, self.bus.lanes[0])
        wiring.connect(m, self.bus.o, self.finisher.i)
        wiring.connect(m, self.finisher.o, wiring.flipped(self.o))
        return m


def _check_mixed(codec, mtu, idle, backpressure, bare=False, **kw):
    rng = np.random.default_rng([mtu, int(idle * 10), len(codec)])
    frames = _two_tensors(rng, codec, int(rng.choice([16, 100, 363])))
    # a gap in the offsets of one tensor: a mismatch close with the key unchanged
    frames += _stream(rng, codec, n_total=300, max_k=50, offset=123_456)
    if bare:
        run = simulate_lane(_FinishedLane(codec, mtu=mtu, **kw), frames, idle=idle,
                            backpressure=backpressure, seed=mtu)
    else:
        run = lane_simulation("narrow", codec, mtu=mtu, **kw).run(
            frames, idle=idle, backpressure=backpressure, seed=mtu)
    check_against_reference(run, frames, "tx", mtu=mtu, codecs=[codec.partition(":")[0]])
    check_tuser(run, frames, "tx")
    assert run.counters["close_mismatch"] > 0


@pytest.mark.parametrize("mtu", [68, 200, 1518, 9600])
@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_sign_lane_matches_reference(mtu, idle, backpressure):
    """Key changes, offset gaps, flushes, splits across wire frames (MTU 68 holds 32
    elements), random lengths, random idle cycles and backpressure."""
    _check_mixed("sign", mtu, idle, backpressure)


@pytest.mark.parametrize("codec", FIXED)
@pytest.mark.parametrize("mtu,idle,backpressure", [(0, 0.3, 0.5), (1518, 0.0, 0.0),
                                                   (1518, 0.3, 0.5), (9600, 0.3, 0.5)])
def test_fixed_lane_matches_reference(codec, mtu, idle, backpressure):
    """As for ``sign``, at each width: the encoder's stages under idle and backpressure,
    headers in flight behind it; MTU 0 stands for the smallest, 64 + 4q bytes (32
    elements per wire frame)."""
    _check_mixed(codec, mtu or 64 + 4 * int(codec.partition(":")[2]), idle, backpressure)


@pytest.mark.parametrize("codec,mtu", [("sign", 68), ("sign", 1518), ("fixed:2", 9600),
                                       ("fixed:4", 1518), ("fixed:8", 96)])
def test_bare_lane_behind_finisher_matches_reference(codec, mtu):
    """``bare=True``: the lane's bare beats, completed by a HeaderFinisher (lengths,
    checksum, tkeep, tuser), are the reference's frames, under idle and backpressure."""
    _check_mixed(codec, mtu, 0.3, 0.5, bare=True)


_TEMPLATE_FIELDS = {"ip_tos": Header().ip_tos, "ip_frag": Header().ip_frag,
                    "ttl": Header().ttl, "tuser_dst": 0,
                    "dst_mac": Header().dst_mac, "src_mac": Header().src_mac,
                    "src_ip": Header().src_ip, "dst_ip": Header().dst_ip,
                    "dst_port": Header().dst_port}


@pytest.mark.parametrize("codec,bare", [("sign", True), ("fixed:8", True), ("sign", False)])
def test_lane_with_constant_fields_matches_reference(codec, bare):
    """Fields the source holds constant (a generator's template) are not carried in the
    token FIFO and come out as given: the frames are still the reference's."""
    _check_mixed(codec, 1518, 0.3, 0.5, bare=bare, constant_fields=_TEMPLATE_FIELDS)


def test_constant_fields_are_not_carried():
    """A held field is the value given, not the source's (the contract is the source's):
    a source sending TTL 64 to a lane holding 7 gives the reference's frames with TTL 7
    (and their checksums), under idle cycles and backpressure."""
    from dataclasses import replace

    from squeezenic_hw.spec.frames import build_wire_frame, parse

    rng = np.random.default_rng(9)
    frames = _stream(rng, "sign", n_total=3000, max_k=100, flush_rate=0.2)
    assert {parse(f).ttl for f in frames} == {64}
    run = lane_simulation("narrow", constant_fields={"ttl": 7}).run(frames, idle=0.3,
                        backpressure=0.5, seed=9)
    expected, _ = lr.tx(frames, codecs=["sign"])
    assert len(expected) > 2
    assert [f.data for f in run.frames] == [
        build_wire_frame(replace(parse(e), ttl=7), e[64:]) for e in expected]


def test_constant_key_fields_are_not_compared():
    """Held key fields are the values given and take no part in the key: a source whose
    frames alternate between two destination MACs (which would close a wire frame at
    every host frame) gives the reference's frames of the stream with the held MAC and
    source IP, under idle cycles and backpressure."""
    from dataclasses import replace

    from squeezenic_hw.spec.frames import build_wire_frame, parse

    rng = np.random.default_rng(11)
    frames = _stream(rng, "fixed:4", n_total=3000, max_k=100, flush_rate=0.1)
    macs = [b"\x02\x00\x00\x00\x00\x07", b"\x02\x00\x00\x00\x00\x08"]
    sent = [build_host_frame(replace(parse(f), dst_mac=macs[i % 2]),
                             np.frombuffer(f[64:], dtype="<f4"))
            for i, f in enumerate(frames)]
    held = {"dst_mac": b"\x0a\x0b\x0c\x0d\x0e\x0f", "src_ip": bytes([192, 168, 0, 9])}
    run = lane_simulation("narrow", "fixed:4", constant_fields=held).run(sent, idle=0.3,
                        backpressure=0.5, seed=11)
    expected, _ = lr.tx(frames, codecs=["fixed"])
    assert len(expected) > 2
    assert [f.data for f in run.frames] == [
        build_wire_frame(replace(parse(e), **held), e[64:]) for e in expected]
    assert run.counters["close_mismatch"] < len(sent) // 2


def test_constant_fields_checked():
    for bad in ({"ip_id": 1}, {"ttl": 256}, {"ip_tos": True}, [("ttl", 64)],
                {"dst_mac": b"\x02"}, {"src_ip": 0x0A000001}, {"dst_port": 1 << 16},
                {"dst_port": b"\x12\x34"}):
        rejected(NarrowTxLane, constant_fields=bad, match="constant_fields")


def test_bare_lane_shows_bare_beats_on_a_bus():
    """A bare lane has a frame bus in place of ``o``, of tdata and tlast only; ``bare``
    is checked."""
    lane = NarrowTxLane(bare=True)
    assert not hasattr(lane, "o")
    assert set(data.Layout.cast(lane.bus.beat.shape()).members) == {"data", "last"}
    rejected(NarrowTxLane, bare=1, match="bare")


def test_shared_ring_lane_has_a_ring_port():
    """``shared_ring``: the ring is a cluster's (``ring`` port, no memory of the lane's);
    only with ``bare``; half a row's words bound the cluster (16 for ``sign``, 2 for
    ``fixed:8``)."""
    lane = NarrowTxLane(bare=True, shared_ring=True)
    assert lane.shared_ring and not NarrowTxLane(bare=True).shared_ring
    assert len(lane.ring.w_data) == 512 and lane.ring_rows == 32
    assert (lane.max_cluster, NarrowTxLane("fixed:8", bare=True).max_cluster) == (16, 2)
    assert not hasattr(NarrowTxLane(bare=True), "ring")
    for bad in ({"shared_ring": True}, {"bare": True, "shared_ring": 1}):
        rejected(NarrowTxLane, **bad, match="shared_ring")


def _generator_like(rng, n):
    """fp32 words of the generator's kind: biased exponents 0x70-0x7F, random signs and
    mantissas, half of them with their low bits cleared (ties, and values beside them)."""
    e = (VALUE_EXPONENT_HIGH << 4) + rng.integers(0, 16, n).astype(np.uint32)
    mant = rng.integers(0, 2**23, n, dtype=np.uint32)
    low = rng.integers(0, 24, n).astype(np.uint32)
    mant = np.where(np.arange(n) % 2 == 0, mant & ~((np.uint32(1) << low) - np.uint32(1)), mant)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    return (sign | e << np.uint32(23) | mant).astype(np.uint32)


@pytest.mark.parametrize("codec", FIXED)
def test_lane_of_generated_values_reads_their_cut_mantissas(codec):
    """``generated_values=True``: fed values of the generator's exponents cut to q
    mantissa bits (what ``GradientGenerator(mantissa_bits=q)`` sends), the lane's frames
    are the reference's of the whole values, at scales from 2**0 to 2**21 (every level
    taken), under idle and backpressure."""
    q = int(codec.partition(":")[2])
    rng = np.random.default_rng(q)
    whole, cut = [], []
    for k, scale in enumerate([2.0**0, 2.0**5, 2.0**10, 2.0**14, 2.0**21]):
        words = _generator_like(rng, 500)
        seed = int(rng.integers(0, 2**32))
        for out, w in ((whole, words), (cut, cut_mantissa(words, q))):
            out += _stream(np.random.default_rng(seed), codec, n_total=w.size, max_k=150,
                           values=w.view(np.float32), scale=scale, offset=1000 * k)
    assert any(a != b for a, b in zip(whole, cut, strict=True))
    run = lane_simulation("narrow", codec, generated_values=True).run(cut, idle=0.3,
                        backpressure=0.5)
    check_against_reference(run, whole, "tx", codecs=["fixed"])


@pytest.mark.parametrize("codec", FIXED)
def test_fixed_lane_full_rate_every_host_frame_length(codec):
    """Host frames of 1…199 elements, back to back."""
    rng = np.random.default_rng(len(codec))
    lengths = list(range(1, 200))
    frames = _stream(rng, codec, n_total=sum(lengths), lengths=lengths)
    run = lane_simulation("narrow", codec).run(frames, quiet=80)
    check_against_reference(run, frames, "tx", codecs=["fixed"])
    # one host beat per cycle but for a few cycles (at most one per wire frame and the
    # start), and no gap inside an output frame
    assert run.beats_in / run.input_cycles >= 0.99
    assert run.gaps_in_frames == 0


@pytest.mark.parametrize("codec", FIXED)
def test_fixed_lane_edge_values_and_scales(codec):
    """±0, subnormals, ±inf, NaNs, ties; scales 0, -0, 2**-126, 2**127, inf, NaN, -1:
    the codes of the reference's exact product."""
    rng = np.random.default_rng(7)
    bits = np.concatenate([EDGE_F32_BITS, np.float32([0.5, 1.5, 2.5, 3.5, 63.5, 64.5, 127.5,
                                                      -0.5, -1.5, -2.5, 200.0]).view(np.uint32)])
    x = bits.view(np.float32)
    q = int(codec.partition(":")[2])
    frames = []
    for k, scale in enumerate([1.0, 0.0, -0.0, 2.0**-126, 2.0**127, np.inf, np.nan, -1.0, 4.0,
                               2.0**-20]):
        frames += host_stream(rng, "fixed", param=q, stochastic=False, n_total=x.size,
                              values=x, scale=scale, offset=k * 1000, flush_last=True)
    run = lane_simulation("narrow", codec).run(frames, idle=0.2, backpressure=0.3)
    check_against_reference(run, frames, "tx", codecs=["fixed"])


def test_fixed_lane_latency():
    """10 cycles from the closing beat: the encoder's three stages before the gearbox."""
    rng = np.random.default_rng(1)
    frames = _stream(rng, "fixed:8", n_total=100, lengths=[100], flush_rate=1.0)
    run = lane_simulation("narrow", "fixed:8").run(frames, quiet=60)
    check_against_reference(run, frames, "tx", codecs=["fixed"])
    assert run.first_beat_latency - -(-100 // 16) == 10


@pytest.mark.parametrize("mtu", [68, 1518])
def test_sign_lane_full_rate_every_host_frame_length(mtu):
    """One tensor of host frames of 1…363 elements: one host beat per cycle in, apart
    from the documented cycle after a frame that closes with two words to write, and
    no gap inside an output frame."""
    rng = np.random.default_rng(mtu)
    lengths = list(range(1, 364))
    frames = host_stream(rng, "sign", n_total=sum(lengths), lengths=lengths)
    run = lane_simulation("narrow", mtu=mtu).run(frames, quiet=80)
    check_against_reference(run, frames, "tx", mtu=mtu, codecs=["sign"])
    closes = run.counters["wire_frames"]
    assert run.input_cycles <= run.beats_in + closes, "more stalls than closes"
    assert run.gaps_in_frames == 0
    if mtu == 1518:   # 11 632-element frames: a stall at most once per frame
        assert closes <= 7


@pytest.mark.parametrize("codec", ["sign", "fixed:4"])
def test_narrow_lane_flush_every_frame_keeps_the_input_rate(codec):
    """A flush on every host frame: a wire frame per host frame, down to one element
    (``fixed``: headers queue in the field FIFO behind the encoder)."""
    rng = np.random.default_rng(3)
    lengths = [int(k) for k in rng.integers(1, 40, 120)]
    frames = _stream(rng, codec, n_total=sum(lengths), lengths=lengths, flush_rate=1.0)
    run = lane_simulation("narrow", codec).run(frames, quiet=80)
    check_against_reference(run, frames, "tx", codecs=[codec.partition(":")[0]])
    assert run.counters["close_flush"] == len(frames)
    assert run.input_cycles <= run.beats_in + len(frames) // 4


@pytest.mark.parametrize("n", [1, 16, 100])
def test_sign_lane_latency(n):
    """A flush frame's header leaves 7 cycles after its last beat comes in."""
    rng = np.random.default_rng(n)
    frames = host_stream(rng, "sign", n_total=n, lengths=[n], flush_rate=1.0)
    run = lane_simulation("narrow").run(frames, quiet=60)
    check_against_reference(run, frames, "tx", codecs=["sign"])
    assert run.first_beat_latency - -(-n // 16) == 7


@pytest.mark.parametrize("codec,T", [("sign", 40), ("fixed:8", 40), ("fixed:2", 20)])
def test_narrow_lane_idle_timeout_exact_boundaries(codec, T):
    """Gaps of T-2, T-1, T, T+1 cycles between host frames: closes as the reference
    The reference counts gaps on the offered schedule, so the lane must not stall the
    input: the first header's key change is sent before the second frame comes (a gap
    of 200). (T stays above the 16 cycles after which the harness raises ``close``:
    the reference counts the last frame's close as ``end``.)"""
    rng = np.random.default_rng(5)
    frames = _stream(rng, codec, n_total=2000, max_k=60)
    times, t = [], 5
    for k, f in enumerate(frames):
        times.append(t)
        gap = int(rng.choice([0, 3, T - 2, T - 1, T, T + 1, 200]))
        t += lr.frame_beats(f) + (200 if k == 0 else gap)
    run = lane_simulation("narrow", codec, idle_timeout=T).run(frames, times=times, seed=1)
    check_against_reference(run, frames, "tx", codecs=[codec.partition(":")[0]],
                            idle_timeout=T, times=times)
    assert run.counters["close_idle"] >= 5


def test_sign_lane_split_at_the_largest_frame():
    """At MTU 9600 a sign frame holds 65535 elements (``n``'s limit), which end inside a
    byte: a split there leaves the rest of the beat out of the frame's last byte (every
    value negative, so a code that leaked in would be a one)."""
    rng = np.random.default_rng(1)
    frames = host_stream(rng, "sign", n_total=66000, lengths=[363],
                         values=-np.ones(66000, np.float32))
    sim = lane_simulation("narrow", mtu=9600)
    assert sim.lane.capacity == 65535
    run = sim.run(frames, quiet=80)
    check_against_reference(run, frames, "tx", mtu=9600, codecs=["sign"])
    assert run.counters["close_full"] == 1


def test_sign_lane_edge_values():
    """Signs of ±0, ±inf, NaNs of either sign and subnormals (sign bit, nothing else)."""
    bits = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFC00000,
                     0x00000001, 0x80000001, 0x3F800000, 0xBF800000] * 10, dtype=np.uint32)
    x = bits.view(np.float32)
    frames = [build_host_frame(Header(codec=5, offset=0), x[:37]),
              build_host_frame(Header(codec=5, offset=37), x[37:])]
    run = lane_simulation("narrow").run(frames)
    check_against_reference(run, frames, "tx", codecs=["sign"])


def test_narrow_lane_parameters_checked():
    rejected(NarrowTxLane, mtu=67, match="mtu")
    rejected(NarrowTxLane, "fixed:8", mtu=95, match="mtu")        # 32 elements of 8 bits need 96
    assert NarrowTxLane("fixed:8", mtu=96).capacity == 32
    rejected(NarrowTxLane, port=0, match="port")
    rejected(NarrowTxLane, idle_timeout=-1, match="idle_timeout")
    rejected(NarrowTxLane, token_depth=7, match="token_depth")
    rejected(NarrowTxLane, "fixed:8", generated_values=1, match="generated_values")
    for bad in ("fixed", "fixed:3", "fixed:16", "qsgd:4", 5):
        rejected(NarrowTxLane, bad, match="codec")


@pytest.mark.parametrize("codec", ["sign", "fixed:8"])
def test_narrow_lane_converts_to_verilog(codec):
    from amaranth.back import verilog

    text = verilog.convert(NarrowTxLane(codec), name="narrow_lane")
    assert "module narrow_lane" in text
