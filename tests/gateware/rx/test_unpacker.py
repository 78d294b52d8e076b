"""Tests of :class:`squeezenic_hw.gateware.rx.unpacker.WireUnpacker`.

Frames of random codes are packed with the reference
(:func:`squeezenic_hw.reference.codecs.pack`), padded to whole beats with
random garbage bits (which the unpacker must drop), cut into 512-bit beats and
fed back to back, their descriptors on a stream of their own (random idle cycles
on both); the expected jobs come from
:func:`squeezenic_hw.reference.codecs.unpack` of the same bytes, cut into host
frames of ``M`` codes and jobs of 16. Outputs are compared bit for bit (all
fields, packed), under random idle cycles and backpressure.
"""

import random

import numpy as np
import pytest
from amaranth import Fragment, unsigned
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, CODES_PER_JOB
from squeezenic_hw.gateware.rx.unpacker import (
    UNPACKER_BEAT_LAYOUT,
    WireUnpacker,
    unpacker_frame_layout,
    unpacker_output_layout,
)
from squeezenic_hw.reference.codecs import pack, unpack
from squeezenic_hw.sim.streams import BeatSender, run_stream

from support.param_sweep import rotated
from support.shared_duts import shared
from support.unused import rejected

SWEEP_WIDTHS = (1, 2, 3, 8, 9, 15, 16, 32)
TAG_BITS = 5
SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


def make_frame(rng, n, width, tag=None):
    """(codes, width, tag) with random codes of ``width`` bits."""
    codes = rng.integers(0, 1 << width, size=n, dtype=np.uint64).astype(np.uint32)
    if tag is None:
        tag = int(rng.integers(0, 1 << TAG_BITS))
    return codes, width, tag


def frame_beats(rng, codes, width, tag):
    """Input beats (ints) and the descriptor (dict) of one frame: reference-packed bytes,
    garbage after the codes."""
    n = len(codes)
    payload = pack(codes, width).tobytes()
    assert len(payload) == -(-n * width // 8)
    n_beats = -(-n * width // BEAT_BITS)
    word = int.from_bytes(payload, "little")
    pad_bits = n_beats * BEAT_BITS - n * width
    garbage = int.from_bytes(rng.bytes(-(-pad_bits // 8) + 1), "little") & ((1 << pad_bits) - 1)
    word |= garbage << (n * width)
    mask = (1 << BEAT_BITS) - 1
    desc = {"n": n, "width": width, "bits": n * width, "tag": tag}
    return [{"data": (word >> (BEAT_BITS * k)) & mask} for k in range(n_beats)], desc, payload


def expected_jobs(payload, n, width, tag, M):
    """The frame's jobs (dicts) from the reference unpack of its payload bytes."""
    codes = [int(c) for c in unpack(payload, width, n)]
    jobs = []
    for h in range(0, n, M):
        host = codes[h:h + M]
        for k in range(0, len(host), CODES_PER_JOB):
            chunk = host[k:k + CODES_PER_JOB]
            last = k + CODES_PER_JOB >= len(host)
            jobs.append({
                "codes": chunk + [0] * (CODES_PER_JOB - len(chunk)),
                "count": len(chunk),
                "host_first": int(k == 0),
                "host_last": int(last),
                "frame_last": int(last and h + M >= n),
                "tag": tag,
            })
    return jobs


def hold_monitor(stream, violations):
    """Testbench: a job offered and not taken stays, unchanged, until taken."""
    async def monitor(ctx):
        held = None
        async for _, _, valid, ready, payload in ctx.tick().sample(
                stream.valid, stream.ready, stream.payload.as_value()):
            payload = int(payload)
            if held is not None and (not valid or payload != held):
                violations.append((valid, payload, held))
            held = payload if valid and not ready else None
    return monitor


def input_monitor(stream, cycles):
    """Testbench: record the cycle of every accepted input beat."""
    async def monitor(ctx):
        t = 0
        async for _, _, valid, ready in ctx.tick().sample(stream.valid, stream.ready):
            t += 1
            if valid and ready:
                cycles.append(t)
    return monitor


def desc_source(stream, descs, idle, seed):
    """Testbench: offer the frame descriptors in order, with random idle cycles."""
    layout = stream.payload.shape()
    rng = random.Random(seed)

    async def source(ctx):
        sender = BeatSender(ctx, stream, idle=idle, rng=rng)
        for desc in descs:
            await sender.send(layout.const(desc).as_value().value)
        await sender.close()
    return source


def zero_some(rng, beats, payload, rate):
    """Mark about ``rate`` of ``beats`` ``zero`` (their data stay random): the payload
    bytes the unpacker must then read, those beats' bytes zero."""
    payload = bytearray(payload)
    for k, beat in enumerate(beats):
        if rng.random() < rate:
            beat["zero"] = 1
            beat["data"] = int.from_bytes(rng.bytes(BEAT_BITS // 8), "little")
            lo = k * BEAT_BITS // 8
            payload[lo:lo + BEAT_BITS // 8] = bytes(len(payload[lo:lo + BEAT_BITS // 8]))
    return bytes(payload)


def run_frames(dut, frames, *, idle=0.0, backpressure=0.0, seed=0, zero_rate=0.0):
    """Feed ``frames`` [(codes, width, tag)], check every job bit for bit; return the run.
    ``zero_rate``: that share of the beats come with ``zero`` set and random data."""
    rng = np.random.default_rng([seed, 0xB17])
    beats, descs, want = [], [], []
    for codes, width, tag in frames:
        fb, desc, payload = frame_beats(rng, codes, width, tag)
        if zero_rate:
            payload = zero_some(rng, fb, payload, zero_rate)
        beats += fb
        descs.append(desc)
        want += expected_jobs(payload, len(codes), width, tag, dut.max_host_elements)
    out_layout = dut.o.payload.shape()
    violations, in_cycles = [], []
    run = run_stream(dut, beats, n_outputs=len(want), idle=idle, backpressure=backpressure,
                     seed=seed, extra_testbenches=[hold_monitor(dut.o, violations),
                                                   input_monitor(dut.i, in_cycles),
                                                   desc_source(dut.desc, descs, idle, seed)])
    want_ints = [out_layout.const(j).as_value().value for j in want]
    bad = [k for k, (g, w) in enumerate(zip(run.outputs, want_ints, strict=True)) if g != w]
    if bad:
        k = bad[0]
        got = data.Const(out_layout, run.outputs[k])
        fields = {f: int(got[f]) for f in ("count", "host_first", "host_last", "frame_last",
                                           "tag")}
        raise AssertionError(
            f"{len(bad)} of {len(want)} jobs differ; first: job {k}, got {fields} "
            f"codes {[int(got.codes[e]) for e in range(CODES_PER_JOB)]}, expected {want[k]}")
    assert not violations, f"output changed while held: {violations[:3]}"
    assert len(in_cycles) == len(beats)
    run.input_cycles = in_cycles
    run.n_beats = len(beats)
    return run


def sweep_frames(rng, n_max):
    """Every sweep width with n = 1, 15, 16, 17 and a random n, in random order."""
    frames = []
    for w in SWEEP_WIDTHS:
        for n in (1, 15, 16, 17, int(rng.integers(18, n_max + 1))):
            frames.append(make_frame(rng, n, w))
    order = rng.permutation(len(frames))
    return [frames[k] for k in order]


# Random n up to this per M, so that M = 1 (one job per code) stays quick.
_N_MAX = {1: 300, 5: 800, 16: 1500, 17: 1500, 363: 1500}


@pytest.mark.parametrize("M,idle,backpressure", rotated([1, 5, 16, 17, 363], SETTINGS))
def test_sweep(M, idle, backpressure):
    seed = M * 10 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    dut = shared(WireUnpacker, SWEEP_WIDTHS, max_host_elements=M, tag_shape=unsigned(TAG_BITS))
    run_frames(dut, sweep_frames(rng, _N_MAX[M]), idle=idle, backpressure=backpressure,
               seed=seed)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_zero_beats_read_as_zero(idle, backpressure):
    """A beat with ``zero`` set (one that stands in for a missing beat) is read as 512 zero
    bits, whatever its data: random beats of every sweep width, at M = 363."""
    seed = 90 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    dut = shared(WireUnpacker, SWEEP_WIDTHS, max_host_elements=363, tag_shape=unsigned(TAG_BITS))
    run_frames(dut, sweep_frames(rng, 1200), idle=idle, backpressure=backpressure,
               seed=seed, zero_rate=0.3)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_tiny_frames_back_to_back(idle, backpressure):
    """Many 1..3-code frames of alternating widths: several frames in the buffer at once."""
    rng = np.random.default_rng(7)
    dut = shared(WireUnpacker, (1, 9, 32), max_host_elements=2, tag_shape=unsigned(TAG_BITS))
    frames = [make_frame(rng, int(rng.integers(1, 4)), int(rng.choice([1, 9, 32])))
              for _ in range(120)]
    run = run_frames(dut, frames, idle=idle, backpressure=backpressure, seed=11)
    if idle == backpressure == 0:
        assert run.max_ready_streak == len(run.outputs)


@pytest.mark.parametrize("width,M", [(32, 368), (32, 363), (16, 363), (9, 363)])
def test_full_rate(width, M):
    """No idle, no backpressure: one job every cycle, back to back over frame boundaries."""
    rng = np.random.default_rng(width * 1000 + M)
    dut = shared(WireUnpacker, (width,), max_host_elements=M)
    frames = [make_frame(rng, n, width, tag=k % 2)
              for k, n in enumerate((1500, 1472, 737, 1500))]
    run = run_frames(dut, frames, seed=1)
    n_jobs = len(run.outputs)
    assert run.latency == dut.latency == 6
    assert run.max_ready_streak == n_jobs          # every cycle a job, first to last
    assert run.cycles == n_jobs + dut.latency
    # Input beats per cycle over the run: what the bits demand, no more.
    span = run.input_cycles[-1] - run.input_cycles[0] + 1
    if width == 32 and M % 16 == 0:
        assert span == run.n_beats                 # one beat per cycle
        assert n_jobs == run.n_beats
    if width == 16:
        # One beat every second cycle (a little less: the short jobs of M = 363; a
        # little more: the partial last beats of the frames).
        assert 0.45 < run.n_beats / span < 0.55


@pytest.mark.parametrize("M", [363, 16, 1])
def test_full_rate_mixed_widths(M):
    """Back-to-back frames of changing widths and sizes (1-code frames included): still
    one job every cycle with no idle and no backpressure."""
    rng = np.random.default_rng(M)
    widths = (1, 3, 9, 16, 32)
    dut = shared(WireUnpacker, widths, max_host_elements=M, tag_shape=unsigned(TAG_BITS))
    sizes = [1, 1, 300, 1, 17, 1, 700, 5, 1, 16] if M > 1 else [1, 1, 40, 1, 17, 3, 1, 16]
    frames = [make_frame(rng, n, int(rng.choice(widths))) for n in sizes]
    frames += [make_frame(rng, 1, 32) for _ in range(6)]
    run = run_frames(dut, frames, seed=2)
    assert run.max_ready_streak == len(run.outputs)
    assert run.cycles == len(run.outputs) + dut.latency


def test_largest_frame_and_host_frames():
    """n = 65535 (the largest) and M = 2384 (the largest), full rate."""
    rng = np.random.default_rng(9)
    dut = WireUnpacker((1, 32), max_host_elements=2384, tag_shape=unsigned(TAG_BITS))
    frames = [make_frame(rng, 65535, 1), make_frame(rng, 2384 + 17, 32)]
    run = run_frames(dut, frames, seed=3)
    assert run.max_ready_streak == len(run.outputs)


def test_latency_single_job():
    rng = np.random.default_rng(0)
    dut = WireUnpacker((3,), max_host_elements=363)
    run = run_frames(dut, [make_frame(rng, 5, 3)])
    assert run.latency == dut.latency == 6


def test_layouts():
    tag = unsigned(7)
    d, o = unpacker_frame_layout(tag), unpacker_output_layout(tag)
    assert {k: f.shape for k, f in d} == {
        "n": unsigned(16), "width": unsigned(6), "bits": unsigned(21), "tag": tag}
    assert {k: f.shape for k, f in o} == {
        "codes": data.ArrayLayout(unsigned(32), 16), "count": unsigned(5),
        "host_first": unsigned(1), "host_last": unsigned(1), "frame_last": unsigned(1),
        "tag": tag}
    dut = WireUnpacker([16, 8, 16], tag_shape=tag)
    Fragment.get(dut, None)
    assert dut.widths == (8, 16)
    assert dut.desc.payload.shape() == d == dut.frame_layout
    assert dut.i.payload.shape() == UNPACKER_BEAT_LAYOUT
    assert dut.o.payload.shape() == o == dut.output_layout


@pytest.mark.parametrize("kwargs,name", [
    ({"widths": []}, "widths"),
    ({"widths": [0]}, "widths"),
    ({"widths": [33]}, "widths"),
    ({"widths": [8, 2.5]}, "widths"),
    ({"widths": [True]}, "widths"),
    ({"widths": 8}, "widths"),
    ({"widths": None}, "widths"),
    ({"widths": ["8"]}, "widths"),
    ({"widths": [1, -1]}, "widths"),
    ({"widths": [8, "x"]}, "widths"),
    ({"widths": [8], "max_host_elements": 0}, "max_host_elements"),
    ({"widths": [8], "max_host_elements": 2385}, "max_host_elements"),
    ({"widths": [8], "max_host_elements": 16.0}, "max_host_elements"),
    ({"widths": [8], "tag_shape": "x"}, "tag_shape"),
])
def test_value_errors(kwargs, name):
    rejected(WireUnpacker, **kwargs, match=name)


def test_limits_accepted():
    dut = WireUnpacker(range(1, 33), max_host_elements=2384)
    Fragment.get(dut, None)
    assert dut.widths == tuple(range(1, 33))
    dut = WireUnpacker([1], max_host_elements=1)
    Fragment.get(dut, None)
    assert dut.max_host_elements == 1
