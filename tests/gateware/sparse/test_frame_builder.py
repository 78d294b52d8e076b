"""Bit-exact tests of :class:`squeezenic_hw.gateware.sparse.frame_builder.SparseFrameBuilder`.

Wire frames are drawn the way the TX controller builds them: per frame a keep
density (0 %, 0.1 %, 1 %, 10 %, 50 %, 100 %) and a target length (1 to a few
thousand elements); elements are admitted while
:func:`squeezenic_hw.reference.threshold.fits` holds, and the layout is
:func:`~squeezenic_hw.reference.threshold.choose_layout`'s (a few frames take the
other one when it is within capacity). The element stream is cut into jobs of
0…16 elements with ``close_end``, ``close_mid`` and close-only (``count = 0``)
closes, each job carrying its kept values compacted and garbage in the unused
slots. The model builds each frame's payload with numpy (bitmap
``packbits(bitorder="little")``, ``<u2`` indices, ``<u4`` values; equal to
:func:`~squeezenic_hw.reference.threshold.encode_payload` when the layout is the
natural one), zero-padded to whole beats, one ``RingWrite`` per beat with
``commit`` on the last; a ``P = 0`` frame gives one item with ``count = 0`` and
``commit = 1``. The DUT's output items
must equal that list bit for bit.
"""

import random

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, RingWrite
from squeezenic_hw.gateware.sparse.frame_builder import (
    SparseFrameBuilder,
    region_beats,
    sparse_builder_input_layout,
)
from squeezenic_hw.reference import threshold
from squeezenic_hw.sim.streams import run_stream, unpack_fields
from squeezenic_hw.spec import threshold as sizing

from support.param_sweep import rotated
from support.shared_duts import shared
from support.unused import rejected

MODES = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
DENSITIES = [0.0, 0.001, 0.01, 0.1, 0.5, 1.0]
LANES = 16


# ----------------------------------------------------------------------------- frames

class Frame:
    """One wire frame: keep flags, element bit patterns (uint32) and its layout."""

    def __init__(self, keep, values, layout):
        self.keep = np.asarray(keep, dtype=bool)
        self.values = np.asarray(values, dtype=np.uint32)
        self.layout = layout
        self.kept_idx = np.flatnonzero(self.keep)

    @property
    def n(self):
        return self.keep.size

    @property
    def k(self):
        return self.kept_idx.size

    def payload(self):
        """Layout bytes then the kept values (numpy, from the spec)."""
        if self.layout == sizing.BITMAP:
            head = np.packbits(self.keep, bitorder="little").tobytes()
        else:
            head = self.kept_idx.astype("<u2").tobytes()
        payload = head + self.values[self.keep].astype("<u4").tobytes()
        if self.layout == sizing.choose_layout(self.n, self.k):
            assert (self.layout, payload) == threshold.encode_payload(
                self.values.view(np.float32), self.keep)
        return payload


def _target_length(rng):
    r = rng.random()
    if r < 0.3:
        return int(rng.integers(1, 20))
    if r < 0.6:
        return int(rng.integers(20, 400))
    if r < 0.9:
        return int(rng.integers(400, 3000))
    return 6000


def make_frame(rng, mtu, density, length, *, other=0.0):
    """A frame as the controller closes it: elements admitted while they fit (at most
    ``length``); the shorter layout, or with probability ``other`` the other one when
    it is within capacity."""
    keep = rng.random(length) < density
    k = np.cumsum(keep)
    ok = sizing.fits(np.arange(1, length + 1), k, mtu)
    n = length if ok.all() else int(np.argmin(ok))
    assert n >= 1
    keep = keep[:n]
    k = int(keep.sum())
    b = mtu - 64
    layout = sizing.choose_layout(n, k)
    flip = 1 - layout
    size = sizing.layout_bytes(n, k, flip)
    if rng.random() < other and size <= b // 3 and size + 4 * k <= b:
        layout = flip
    values = rng.integers(0, 2**32, n, dtype=np.uint32)
    return Frame(keep, values, layout)


def random_frames(rng, mtu, n_frames, *, densities=DENSITIES, other=0.15, lengths=None):
    lengths = lengths or _target_length
    return [make_frame(rng, mtu, float(rng.choice(densities)), lengths(rng), other=other)
            for _ in range(n_frames)]


# ----------------------------------------------------------------------------- jobs

_IN = sparse_builder_input_layout()
_RW = data.Layout.cast(RingWrite)


def pack(layout, fields):
    """Packed integer of a struct of ints and lists of ints (``layout.const`` is slow)."""
    value = 0
    for name, member in layout:
        v = fields[name]
        if isinstance(v, list):
            width = member.shape.elem_shape.width
            v = sum(x << (width * e) for e, x in enumerate(v))
        value |= v << member.offset
    return value


def _job(parts, *, close_mid=False, close_end=False, layout=0, junk):
    """One input job from ``parts``: [(frame, start, stop)] (one part, or two with
    ``close_mid``: the closing frame's tail and the next frame's head)."""
    keep_bits, values, indices, count, kept_split, split = [], [], [], 0, 0, 0
    for p, (frame, start, stop) in enumerate(parts):
        keep_bits += list(frame.keep[start:stop])
        sel = frame.kept_idx[(frame.kept_idx >= start) & (frame.kept_idx < stop)]
        values += [int(frame.values[i]) for i in sel]
        indices += [int(i) for i in sel]
        count += stop - start
        if p == 0:
            kept_split, split = len(values), stop - start
    assert count <= LANES
    kept = len(values)
    pad = LANES - kept
    return pack(_IN, {
        "values": values + [junk.getrandbits(32) for _ in range(pad)],
        "indices": indices + [junk.getrandbits(16) for _ in range(pad)],
        "kept": kept,
        "kept_split": kept_split if close_mid else junk.randrange(17),
        "keep": sum(int(b) << e for e, b in enumerate(keep_bits)),
        "count": count,
        "split": split if close_mid else junk.randrange(16),
        "close_mid": int(close_mid),
        "close_end": int(close_end),
        "layout": layout if (close_mid or close_end) else junk.randrange(2),
    })


def cut_jobs(frames, seed, *, full=0.6, close_only=0.15, mid=0.5):
    """Cut the frames' elements into jobs, every frame closed by exactly one job."""
    rng = random.Random(seed)
    jobs = []
    pos = 0                  # elements of frame f already sent (by a close_mid job)
    for f, frame in enumerate(frames):
        nxt = frames[f + 1] if f + 1 < len(frames) else None
        while True:
            remaining = frame.n - pos
            if remaining == 0:
                if nxt is not None and rng.random() < 0.5:
                    # split = 0: the frame closes with none of the job's elements and the
                    # next one opens with up to all 16 (the controller does this when a
                    # beat's first element does not fit)
                    extra = min(nxt.n, LANES if rng.random() < 0.5 else rng.randint(1, LANES))
                    jobs.append(_job([(frame, pos, pos), (nxt, 0, extra)], close_mid=True,
                                     layout=frame.layout, junk=rng))
                    pos = extra
                    break
                jobs.append(_job([], close_end=True, layout=frame.layout, junk=rng))
                pos = 0
                break
            if remaining > LANES or rng.random() < close_only:
                c = min(remaining, LANES if rng.random() < full else rng.randint(1, LANES))
                jobs.append(_job([(frame, pos, pos + c)], junk=rng))
                pos += c
                continue
            if nxt is not None and remaining < LANES and rng.random() < mid:
                extra = rng.randint(1, min(LANES - remaining, nxt.n))
                jobs.append(_job([(frame, pos, frame.n), (nxt, 0, extra)], close_mid=True,
                                 layout=frame.layout, junk=rng))
                pos = extra
                break
            jobs.append(_job([(frame, pos, frame.n)], close_end=True, layout=frame.layout,
                             junk=rng))
            pos = 0
            break
    return jobs


# ----------------------------------------------------------------------------- model

def model_items(frames):
    """Expected ``RingWrite`` items (packed ints) and per frame its number of beats."""
    items, beats_per_frame = [], []
    for frame in frames:
        payload = frame.payload()
        payload += bytes(-len(payload) % DATA_BYTES)
        nb = len(payload) // DATA_BYTES
        if nb == 0:   # P = 0: one commit with no beat
            items.append(pack(_RW, {"beats": [0, 0], "count": 0, "commit": 1}))
            beats_per_frame.append(1)
            continue
        beats_per_frame.append(nb)
        for b in range(nb):
            beat = int.from_bytes(payload[b * DATA_BYTES:(b + 1) * DATA_BYTES], "little")
            items.append(pack(_RW, {"beats": [beat, 0], "count": 1, "commit": int(b == nb - 1)}))
    return items, beats_per_frame


def _describe(got, want):
    g, w = unpack_fields(RingWrite, got), unpack_fields(RingWrite, want)
    gb = int(g.beats[0]).to_bytes(DATA_BYTES, "little")
    wb = int(w.beats[0]).to_bytes(DATA_BYTES, "little")
    diff = [i for i in range(DATA_BYTES) if gb[i] != wb[i]]
    return (f"count {int(g.count)}/{int(w.count)}, commit {int(g.commit)}/{int(w.commit)}, "
            f"beats[1] {int(g.beats[1]):#x}, differing bytes {diff[:8]}")


def check(mtu, frames, jobs, *, idle, backpressure, seed):
    """Run the DUT on ``jobs``; compare its items with the model. Returns the trace."""
    dut = shared(SparseFrameBuilder, mtu)
    expected, beats_per_frame = model_items(frames)
    trace = {"accept": [], "out": []}

    async def monitor(ctx):
        t = 0
        async for _, _, iv, ir, ov, orr in ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready):
            t += 1
            if iv and ir:
                trace["accept"].append(t)
            if ov and orr:
                trace["out"].append(t)

    run = run_stream(dut, jobs, n_outputs=len(expected), idle=idle,
                     backpressure=backpressure, seed=seed, extra_testbenches=[monitor])
    got = run.outputs
    assert len(got) == len(expected)
    for k, (g, w) in enumerate(zip(got, expected, strict=True)):
        if g != w:
            frame = np.searchsorted(np.cumsum(beats_per_frame), k, side="right")
            raise AssertionError(f"item {k} (frame {frame}): {_describe(g, w)}")
    trace["beats_per_frame"] = beats_per_frame
    trace["run"] = run
    return trace


def frame_outputs(trace):
    """Output cycles grouped per frame with output (P > 0)."""
    out = iter(trace["out"])
    return [[next(out) for _ in range(nb)] for nb in trace["beats_per_frame"] if nb]


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("mtu,idle,backpressure", rotated([1518, 200], MODES))
def test_random_frames(mtu, idle, backpressure):
    seed = mtu * 7 + int(idle * 10) + int(backpressure * 100)
    rng = np.random.default_rng(seed)
    frames = random_frames(rng, mtu, 24 if mtu > 1000 else 40)
    jobs = cut_jobs(frames, seed)
    trace = check(mtu, frames, jobs, idle=idle, backpressure=backpressure, seed=seed)
    if idle == backpressure == 0:
        for cycles in frame_outputs(trace):
            assert cycles == list(range(cycles[0], cycles[0] + len(cycles)))


@pytest.mark.slow
@pytest.mark.parametrize("mtu", [1518, 9600])
def test_longest_frames(mtu):
    """Frames of the most elements (n = 65535): the bitmap 16× past its region."""
    rng = np.random.default_rng(mtu + 1)
    frames = [make_frame(rng, mtu, 0.0, 65535), make_frame(rng, mtu, 0.0002, 65535),
              *random_frames(rng, mtu, 20)]
    jobs = cut_jobs(frames, mtu + 1)
    for idle, bp in MODES:
        check(mtu, frames, jobs, idle=idle, backpressure=bp, seed=mtu + 2)


@pytest.mark.parametrize("mtu", [130, 9600])
def test_mtu_extremes(mtu):
    """Full frames at high density (the chosen layout at its largest, values up to B)."""
    rng = np.random.default_rng(mtu)
    frames = random_frames(rng, mtu, 6 if mtu > 1000 else 16, densities=[0.1, 0.5, 1.0],
                           lengths=lambda r: 6000)
    jobs = cut_jobs(frames, mtu)
    check(mtu, frames, jobs, idle=0.1, backpressure=0.3, seed=mtu)


def test_overflowing_layouts():
    """The layout not chosen far past its region (bitmap of thousands of bits at low
    density, index list of a dense frame); also capacity-edge other-layout frames,
    P = 0 frames and frames of one element."""
    mtu = 200
    b = mtu - 64
    rng = np.random.default_rng(5)
    frames = [
        make_frame(rng, mtu, 0.001, 9000),      # bitmap 1125 bytes: far past 2 beats
        make_frame(rng, mtu, 0.0, 3000),        # P = 0
        make_frame(rng, mtu, 1.0, 100),         # index list past its region
        make_frame(rng, mtu, 0.0, 1),           # n = 1, P = 0
        make_frame(rng, mtu, 1.0, 1),           # n = 1, k = 1
        make_frame(rng, mtu, 0.0, 8 * (b // 3), other=1.0),   # bitmap of exactly ⌊B/3⌋
        make_frame(rng, mtu, 0.5, 16),
        make_frame(rng, mtu, 0.01, 7000),
    ]
    assert frames[5].layout == sizing.BITMAP and frames[5].payload() != b""
    assert len(frames[5].payload()) == b // 3
    jobs = cut_jobs(frames, 5)
    for idle, bp in MODES[:2]:
        check(mtu, frames, jobs, idle=idle, backpressure=bp, seed=6)


def test_input_rate():
    """One job per cycle while the output is not the bottleneck, including a close in
    every job (1-beat frames) as long as the job after a close is not a close_mid."""
    mtu = 1518
    rng = np.random.default_rng(11)
    frames = random_frames(rng, mtu, 20, densities=[0.0, 0.001, 0.01],
                           lengths=lambda r: int(r.integers(40, 600)))
    frames += [make_frame(rng, mtu, 0.3, int(rng.integers(1, 9))) for _ in range(30)]
    jobs = cut_jobs(frames, 11, mid=0.0, close_only=0.0, full=1.0)
    trace = check(mtu, frames, jobs, idle=0, backpressure=0, seed=11)
    accept = trace["accept"]
    assert len(accept) == len(jobs)
    assert accept == list(range(accept[0], accept[0] + len(jobs))), "input stalled"


def closing_jobs(jobs):
    """Indices of the jobs that close a frame."""
    bits = (1 << _IN["close_mid"].offset) | (1 << _IN["close_end"].offset)
    return [i for i, j in enumerate(jobs) if j & bits]


def test_output_rate_and_latency():
    """A frame's beats leave one per cycle; its first beat ``LATENCY`` cycles after its
    closing job, or right after the previous frame's last beat when it had to queue."""
    mtu = 1518
    rng = np.random.default_rng(3)
    frames = []
    for _ in range(5):    # a long frame, then short ones that close while it drains
        frames.append(make_frame(rng, mtu, float(rng.choice([0.5, 1.0])), 6000))
        frames += [make_frame(rng, mtu, 0.5, int(rng.integers(2, 40))) for _ in range(2)]
    jobs = cut_jobs(frames, 3)
    trace = check(mtu, frames, jobs, idle=0, backpressure=0, seed=3)
    per_frame = frame_outputs(trace)
    assert len(per_frame) == len(frames)
    closes = [trace["accept"][i] for i in closing_jobs(jobs)]
    queued = 0
    prev_end = -1
    for cycles, close in zip(per_frame, closes, strict=True):
        assert cycles == list(range(cycles[0], cycles[0] + len(cycles)))
        assert cycles[0] == max(close + SparseFrameBuilder.LATENCY, prev_end + 1)
        queued += close + SparseFrameBuilder.LATENCY <= prev_end
        prev_end = cycles[-1]
    assert queued >= 3     # the back-to-back case did occur


def test_close_mid_after_close():
    """Every job closes a frame with close_mid: correct output (at a reduced rate)."""
    mtu = 200
    rng = np.random.default_rng(21)
    frames = [make_frame(rng, mtu, 0.4, int(rng.integers(1, 9))) for _ in range(40)]
    jobs = cut_jobs(frames, 21, mid=1.0, close_only=0.0)
    for idle, bp in MODES:
        check(mtu, frames, jobs, idle=idle, backpressure=bp, seed=22)


def test_layout_and_regions():
    assert region_beats(1518) == (8, 24)
    assert region_beats(9600) == (50, 150)
    assert region_beats(130) == (2, 2)
    fields = sparse_builder_input_layout().members
    assert list(fields) == ["values", "indices", "kept", "kept_split", "keep", "count",
                            "split", "close_mid", "close_end", "layout"]
    # the tests' fast packer agrees with Amaranth's
    job = {"values": list(range(1, 17)), "indices": list(range(100, 116)), "kept": 3,
           "kept_split": 2, "keep": 0xA5A5, "count": 16, "split": 9, "close_mid": 1,
           "close_end": 0, "layout": 1}
    assert pack(_IN, job) == _IN.const(job).as_value().value
    item = {"beats": [2**511 + 5, 7], "count": 1, "commit": 1}
    assert pack(_RW, item) == _RW.const(item).as_value().value


@pytest.mark.parametrize("mtu", [129, 9601, 0, 1518.0, True, "1518"])
def test_mtu_rejected(mtu):
    rejected(SparseFrameBuilder, mtu, match="mtu")
