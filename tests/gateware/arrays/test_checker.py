"""Tests of :class:`~squeezenic_hw.gateware.arrays.checker.FrameChecker` and its reference.

Host frames come from :func:`squeezenic_hw.spec.frames.build_host_frame` (n 1…363,
offsets contiguous or with gaps, some wrapping round 2³²), mixed with frames
the checker must not count: wire frames (``encoded`` set), other UDP ports,
ARP/IPv6, IP options, TCP, runts, and garbage. They go in as AXI-Stream beats
with random idle cycles and random bytes past ``tkeep`` on the last beats
(which the checker must ignore). In every cycle the outputs must equal
:func:`~squeezenic_hw.reference.checker.check_frames` of the frames whose last
beat is at least ``latency`` cycles old: this checks the values, the CRC, and
the latency at once. Payload lengths of every remainder mod 64 (1…64 bytes in
the last beat) are covered, back to back at one beat per cycle.
"""

import random
import struct
import zlib
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Module, ResetInserter, Signal
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays import checker as fc
from squeezenic_hw.gateware.arrays.checker import FrameChecker
from squeezenic_hw.gateware.common.frame_arbiter import thermometer_count
from squeezenic_hw.gateware.common.layouts import DATA_BYTES
from squeezenic_hw.reference.checker import CHECKER_KEYS, check_frames, is_host_frame
from squeezenic_hw.sim.axis import AxisFrame, frame_beats
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.spec import frames as F

from support.shared_duts import shared
from support.unused import rejected

IDLES = [0.0, 0.3, 0.7]


# --------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------


def _values(rng, n):
    return np.frombuffer(rng.randbytes(4 * n), dtype=np.float32)


class Stream:
    """Host frames of one tensor stream: contiguous offsets unless told to jump."""

    def __init__(self, rng, port=F.DEFAULT_PORT):
        self.rng = rng
        self.header = F.Header(src_mac=rng.randbytes(6), dst_mac=rng.randbytes(6),
                               src_port=rng.randrange(2**16), dst_port=port,
                               codec=rng.randrange(7), seed=rng.randrange(2**32),
                               flags=rng.choice([0, F.FLAG_FLUSH, F.FLAG_STOCHASTIC]))
        # start near 2^32 now and then, so that offset + n wraps
        self.offset = rng.choice([0, rng.randrange(2**32), 2**32 - rng.randint(1, 500)])

    def frame(self, n, *, gap=False):
        if gap:
            self.offset = (self.offset + self.rng.choice([1, -1, 4, 1000, 2**31])) % 2**32
        h = replace(self.header, offset=self.offset)
        self.offset = (self.offset + n) % 2**32
        return F.build_host_frame(h, _values(self.rng, n))


def other_frame(rng, stream):
    """A frame the checker must not count."""
    r = rng.random()
    host = bytearray(stream.frame(rng.randint(1, 40)))
    stream.offset = (stream.offset - struct.unpack_from("<H", host, 46)[0]) % 2**32
    if r < 0.2:
        return F.build_wire_frame(replace(F.parse(bytes(host)), flags=F.FLAG_ENCODED),
                                  rng.randbytes(rng.randint(1, 300)))
    if r < 0.35:
        host[36:38] = rng.choice([b"\x00\x35", b"\x53\x52", b"\x12\xb7"])
    elif r < 0.45:
        host[12:14] = rng.choice([b"\x08\x06", b"\x86\xdd", b"\x81\x00"])
    elif r < 0.55:
        host[14] = rng.choice([0x46, 0x65])
    elif r < 0.65:
        host[23] = 6
    elif r < 0.8:
        host = host[:rng.randint(1, 63)]
    else:
        host = bytearray(rng.randbytes(rng.randint(1, 1518)))
    return bytes(host)


def random_frames(rng, count, *, port=F.DEFAULT_PORT, small=False):
    streams = [Stream(rng, port) for _ in range(2)]
    frames = []
    for _ in range(count):
        s = rng.choice(streams)
        r = rng.random()
        if r < 0.2:
            frames.append(other_frame(rng, s))
        else:
            n = rng.randint(1, 16) if small or r < 0.5 else rng.randint(1, 363)
            frames.append(s.frame(n, gap=rng.random() < 0.15))
    return frames


# --------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------


def run_checker(frames, *, idle=0.0, seed=0, port=F.DEFAULT_PORT, garbage=True):
    """Drive ``frames``; return (dut, last-beat edges, per-edge output samples)."""
    dut = shared(FrameChecker, port=port)
    rng = random.Random(seed)
    axis = [AxisFrame(f, src=rng.getrandbits(16), dst=rng.getrandbits(16)) for f in frames]
    last_edges = []
    samples = []
    done = {}

    async def source(ctx):
        t = 0
        for frame in axis:
            beats = frame_beats(frame)
            for b, beat in enumerate(beats):
                while idle and rng.random() < idle:
                    ctx.set(dut.i.valid, 0)
                    await ctx.tick()
                    t += 1
                if garbage and b == len(beats) - 1:
                    k = len(frame.data) - DATA_BYTES * b
                    beat |= (rng.getrandbits(8 * (DATA_BYTES - k))) << (8 * k)
                ctx.set(dut.i.payload.as_value(), beat)
                ctx.set(dut.i.valid, 1)
                _, _, ready = await ctx.tick().sample(dut.i.ready)
                t += 1
                assert ready
            last_edges.append(t)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().repeat(dut.latency + 2)
        done["t"] = t + dut.latency + 2

    outs = [getattr(dut, key) for key in CHECKER_KEYS]

    async def monitor(ctx):
        async for _, _, *values in ctx.tick().sample(*outs):
            samples.append(tuple(int(v) for v in values))

    simulation_of(dut).run([(monitor, True), (source, False)])
    return dut, last_edges, samples


def assert_matches_reference(frames, last_edges, samples, latency, port=F.DEFAULT_PORT):
    """At every edge e the outputs are the reference of the frames ending by e - latency."""
    prefixes = [check_frames(frames[:j], port=port) for j in range(len(frames) + 1)]
    done = 0
    for e, sample in enumerate(samples, start=1):
        while done < len(frames) and last_edges[done] <= e - latency:
            done += 1
        want = tuple(prefixes[done][key] % 2**64 for key in CHECKER_KEYS)
        assert sample == want, f"edge {e}, {done} frames done: {sample} != {want}"
    assert done == len(frames)


# --------------------------------------------------------------------------
# CRC matrices and the reference
# --------------------------------------------------------------------------


def test_crc_matrices_match_zlib():
    rng = random.Random(1)
    b = fc.data_rows()
    for _ in range(20):
        beat = rng.randbytes(DATA_BYTES)
        word = int.from_bytes(beat, "little")
        d = sum((bin(word & row).count("1") & 1) << i for i, row in enumerate(b))
        assert d == fc.crc_bytes(0, beat)
        r = rng.getrandbits(32)
        assert fc.crc_bytes(r, beat) == fc.crc_advance(r, DATA_BYTES) ^ d
        assert zlib.crc32(beat, r) == fc.crc_bytes(r ^ 0xFFFFFFFF, beat) ^ 0xFFFFFFFF
        j = rng.randint(1, 63)
        assert fc.crc_advance(fc.crc_advance(r, j), -j) == r
        a = fc.advance_rows(-j)
        assert sum((bin(r & row).count("1") & 1) << i for i, row in enumerate(a)) == \
            fc.crc_advance(r, -j)


def test_reference_counters():
    rng = random.Random(2)
    s = Stream(rng)
    s.offset = 2**32 - 5
    f1, f2 = s.frame(3), s.frame(4)          # contiguous across the 2^32 wrap
    f3 = s.frame(7, gap=True)
    arp = b"\xff" * 12 + b"\x08\x06" + bytes(50)
    wire = F.build_wire_frame(replace(F.parse(f1), flags=F.FLAG_ENCODED), b"\x01\x02")
    got = check_frames([f1, arp, f2, wire, f3])
    assert not is_host_frame(arp) and not is_host_frame(wire) and is_host_frame(f3)
    payload = f1[64:] + f2[64:] + f3[64:]
    assert got == {"frames": 3, "elements": 14, "bytes": len(f1) + len(f2) + len(f3),
                   "gaps": 1, "last_offset_end": (F.parse(f3).offset + 7) % 2**32,
                   "bypass": 2, "crc": zlib.crc32(payload)}
    assert check_frames([]) == dict.fromkeys(CHECKER_KEYS, 0)
    assert check_frames([f2], port=1) == {**dict.fromkeys(CHECKER_KEYS, 0), "bypass": 1}


# --------------------------------------------------------------------------
# Hardware
# --------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1, 2, 3, 63, 64])
def test_thermometer_count(width):
    prefix = Signal(width)
    count = Signal(8)
    m = Module()
    m.d.comb += count.eq(thermometer_count(prefix))
    sim = Simulator(m)

    async def bench(ctx):
        for k in range(width + 1):
            ctx.set(prefix, (1 << k) - 1)
            assert ctx.get(count) == k

    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("bad", [-1, 65536, 1.0, True, "21329"])
def test_rejects_bad_port(bad):
    rejected(FrameChecker, port=bad, match="port")


@pytest.mark.parametrize("idle", IDLES)
def test_random_frames(idle):
    rng = random.Random(int(idle * 100) + 5)
    frames = random_frames(rng, 70)
    dut, last_edges, samples = run_checker(frames, idle=idle, seed=rng.randrange(1 << 16))
    assert_matches_reference(frames, last_edges, samples, dut.latency)
    ref = check_frames(frames)
    assert ref["gaps"] and ref["bypass"] and ref["frames"] > 20


@pytest.mark.parametrize("idle", [0.0, 0.5])
def test_every_last_beat_length(idle):
    """Payloads of 1…128 bytes (last beats of 1…64 bytes, twice), back to back.

    n = 1…16 gives the remainders of well-formed host frames (4…64 bytes); the
    others are host frames with 1…3 extra or missing payload bytes, which the
    checker counts all the same (the CRC is over the bytes received).
    """
    rng = random.Random(77 + int(idle * 10))
    s = Stream(rng)
    frames = []
    lengths = list(range(1, 2 * DATA_BYTES + 1))
    rng.shuffle(lengths)
    for length in lengths:
        if length % 4 == 0:
            frame = s.frame(length // 4)
        elif length < 4 or rng.random() < 0.5:
            frame = s.frame(-(-length // 4))[:64 + length]           # bytes missing
        else:
            frame = s.frame(length // 4) + rng.randbytes(length % 4)  # bytes extra
        assert len(frame) == 64 + length
        frames.append(frame)
        if rng.random() < 0.2:        # a one-beat bypass frame in between
            frames.append(rng.randbytes(rng.randint(1, 64)))
    dut, last_edges, samples = run_checker(frames, idle=idle, seed=9)
    assert_matches_reference(frames, last_edges, samples, dut.latency)


def test_small_frames_full_rate():
    """Two-beat host frames and one-beat runts back to back, no idle: one beat per cycle."""
    rng = random.Random(3)
    frames = random_frames(rng, 120, small=True)
    dut, last_edges, samples = run_checker(frames, seed=4)
    beats = sum(len(frame_beats(f)) for f in frames)
    assert last_edges[-1] == beats
    assert_matches_reference(frames, last_edges, samples, dut.latency)


def test_other_port():
    rng = random.Random(6)
    frames = random_frames(rng, 20, port=4791) + random_frames(rng, 5)
    dut, last_edges, samples = run_checker(frames, idle=0.2, seed=1, port=4791)
    assert_matches_reference(frames, last_edges, samples, dut.latency, port=4791)
    assert samples[-1][CHECKER_KEYS.index("bypass")] >= 5


@pytest.mark.parametrize("runts", [False, True])
def test_reset_mid_stream(runts):
    """Only counters, valid bits and the CRC register take a reset: a reset with beats in
    every stage leaves nothing behind; the outputs are then those of the frames sent
    after it. The reset comes in the middle of a frame, or after a run of one-beat
    frames (a last beat in every stage)."""
    rng = random.Random(8 + runts)
    before, after = random_frames(rng, 6), random_frames(rng, 25)
    if runts:
        before += [rng.randbytes(rng.randint(1, DATA_BYTES)) for _ in range(10)]
    cut = 0 if runts else 3
    dut = FrameChecker()
    rst = Signal()
    top = Module()
    top.submodules.checker = ResetInserter(rst)(dut)
    outs = [getattr(dut, key) for key in CHECKER_KEYS]
    final = {}

    async def send(ctx, frames, *, stop_after=None):
        sent = 0
        for frame in frames:
            for beat in frame_beats(frame):
                ctx.set(dut.i.payload.as_value(), beat)
                ctx.set(dut.i.valid, 1)
                await ctx.tick()
                sent += 1
                if sent == stop_after:
                    return

    async def bench(ctx):
        beats = sum(len(frame_beats(f)) for f in before)
        await send(ctx, before, stop_after=beats - cut)    # the pipeline is full
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(dut.i.valid, 0)
        for _ in range(dut.latency + 2):
            assert all(ctx.get(o) == 0 for o in outs)
            await ctx.tick()
        await send(ctx, after)
        ctx.set(dut.i.valid, 0)
        await ctx.tick().repeat(dut.latency + 2)
        final.update({key: ctx.get(o) for key, o in zip(CHECKER_KEYS, outs, strict=True)})

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    want = check_frames(after)
    assert final == {key: want[key] % 2**64 for key in CHECKER_KEYS}


def test_ports_and_verilog():
    dut = FrameChecker()
    widths = {key: len(getattr(dut, key)) for key in CHECKER_KEYS}
    assert widths == {"frames": 64, "elements": 64, "bytes": 64, "gaps": 64,
                      "last_offset_end": 32, "bypass": 64, "crc": 32}
    text = verilog.convert(dut, name="frame_checker")
    assert "module frame_checker" in text
