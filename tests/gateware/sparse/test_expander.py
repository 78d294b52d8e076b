"""Tests of :class:`squeezenic_hw.gateware.sparse.expander.SparseExpander`.

Each threshold (sparse) wire frame is a random keep mask and ``k`` random fp32
bit patterns (NaN/inf patterns among them). The expected output comes from the
reference decoder :func:`squeezenic_hw.reference.threshold.decode_payload` of the
frame's bitmap payload (``⌈n/8⌉`` bitmap bytes, then the ``k`` values), cut
into host frames of ``M`` elements and jobs of 16, as the lane's unpacker cuts
the bitmap; ``count_error`` is the reference's ``count_error``. The input jobs
carry the keep bits in bit 0 of each code with random garbage above it and in
the codes past ``count``; the value beats carry random garbage before ``start``
and after the last value. Non-sparse jobs (random codes) sit between the
frames. Three seeded sources with random idle cycles (jobs, descriptors, value
beats) and a sink with random backpressure drive the block; every output job
is compared bit for bit and must hold while not taken.
"""

import random
from dataclasses import dataclass

import numpy as np
import pytest
from amaranth import Fragment, unsigned
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import CODES_PER_JOB
from squeezenic_hw.gateware.sparse.expander import (
    VALUE_DESC_LAYOUT,
    SparseExpander,
    sparse_expander_job_layout,
)
from squeezenic_hw.reference.threshold import decode_payload
from squeezenic_hw.sim.streams import BeatSender, pack_payload, simulation_of
from squeezenic_hw.spec.threshold import BITMAP

from support.checked_sink import CheckedSink
from support.param_sweep import rotated, slow_except
from support.shared_duts import shared
from support.unused import rejected

TAG_BITS = 3
SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
BEAT_BYTES = 64
#: fp32 NaN (quiet/signalling, both signs, payloads), ±inf, −0, a subnormal.
SPECIALS = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF,
                     0x7F800000, 0xFF800000, 0x80000000, 0x00000001], dtype=np.uint32)


@dataclass
class SparseFrame:
    keep: np.ndarray      # n keep flags
    values: np.ndarray    # k uint32 fp32 bit patterns
    start: int            # byte of value 0 in the frame's first value beat
    tag: int
    M: int                # host frame size (the unpacker's cut)


@dataclass
class DenseFrame:
    counts: list          # codes in each job (the codes themselves are random)
    tag: int


def make_sparse(rng, n, density, *, k_delta=0, start=None, M=363):
    """A frame of ``n`` keep flags at ``density``, ``set bits + k_delta`` values."""
    keep = rng.random(n) < density
    k = max(0, int(keep.sum()) + k_delta)
    values = rng.integers(0, 1 << 32, size=k, dtype=np.uint64).astype(np.uint32)
    if k:
        spots = rng.random(k) < 0.1
        values[spots] = rng.choice(SPECIALS, size=int(spots.sum()))
    if start is None:
        start = int(rng.integers(0, BEAT_BYTES))
    return SparseFrame(keep, values, start, int(rng.integers(0, 1 << TAG_BITS)), M)


def explicit_frame(rng, keep, k, start):
    """A frame with the given keep flags and ``k`` random values."""
    values = rng.integers(0, 1 << 32, size=k, dtype=np.uint64).astype(np.uint32)
    return SparseFrame(np.asarray(keep, dtype=bool), values, start,
                       int(rng.integers(0, 1 << TAG_BITS)), 363)


def make_dense(rng, n_jobs):
    counts = [int(rng.integers(1, CODES_PER_JOB + 1)) for _ in range(n_jobs)]
    return DenseFrame(counts, int(rng.integers(0, 1 << TAG_BITS)))


def garbage(rng, n_bytes):
    return rng.bytes(n_bytes)


def frame_streams(rng, frame):
    """(input jobs, expected jobs, expected count_error per job, vdescs, value beats)."""
    jobs, want, errs = [], [], []
    if isinstance(frame, DenseFrame):
        for j, count in enumerate(frame.counts):
            codes = [int(c) for c in rng.integers(0, 1 << 32, size=CODES_PER_JOB,
                                                  dtype=np.uint64)]
            job = {"codes": codes, "count": count, "tag": frame.tag, "sparse": 0,
                   "frame_last": int(j == len(frame.counts) - 1)}
            jobs.append(job)
            want.append(job)
            errs.append(0)
        return jobs, want, errs, [], []
    keep, vals, n = frame.keep, frame.values, len(frame.keep)
    k = len(vals)
    # The reference decoder, on the frame's bitmap payload.
    payload = np.packbits(keep, bitorder="little").tobytes() + vals.astype("<u4").tobytes()
    decoded = decode_payload(payload, n, BITMAP)
    out = decoded.values.view(np.uint32)
    for h in range(0, n, frame.M):
        host_end = min(h + frame.M, n)
        for s in range(h, host_end, CODES_PER_JOB):
            e_end = min(s + CODES_PER_JOB, host_end)
            count = e_end - s
            noise = rng.integers(0, 1 << 32, size=CODES_PER_JOB, dtype=np.uint64)
            codes = [int(noise[e]) & ~1 | int(keep[s + e]) if e < count else int(noise[e])
                     for e in range(CODES_PER_JOB)]
            last = int(e_end == n)
            jobs.append({"codes": codes, "count": count, "frame_last": last, "sparse": 1,
                         "tag": frame.tag})
            want.append({"codes": [int(v) for v in out[s:e_end]] + [0] * (CODES_PER_JOB - count),
                         "count": count, "frame_last": last, "sparse": 1, "tag": frame.tag})
            errs.append(int(last and decoded.count_error))
    vdesc = [{"k": k, "start": frame.start}]
    beats = []
    if k:
        body = garbage(rng, frame.start) + vals.astype("<u4").tobytes()
        body += garbage(rng, -len(body) % BEAT_BYTES)
        assert len(body) == -(-(frame.start + 4 * k) // BEAT_BYTES) * BEAT_BYTES
        beats = [int.from_bytes(body[b:b + BEAT_BYTES], "little")
                 for b in range(0, len(body), BEAT_BYTES)]
    return jobs, want, errs, vdesc, beats


@dataclass
class Run:
    outputs: list
    errors: list          # count_error in each output job's transfer cycle
    out_cycles: list
    in_cycles: list       # cycles of accepted input jobs
    stray_errors: int     # count_error high with no transfer


def run_frames(frames, *, idle=0.0, backpressure=0.0, seed=0, timeout=None,
               check_ideal=True):
    """Drive ``frames`` through the expander from reset; check every job and count_error."""
    rng = np.random.default_rng([seed, 0x5BA])
    dut = shared(SparseExpander, tag_shape=unsigned(TAG_BITS))
    jobs, want, want_err, vdescs, beats = [], [], [], [], []
    for frame in frames:
        for acc, part in zip((jobs, want, want_err, vdescs, beats),
                             frame_streams(rng, frame), strict=True):
            acc += part
    layout = dut.job_layout
    run = Run([], [], [], [], 0)
    if timeout is None:
        slow = 1 / (1 - max(idle, backpressure))
        timeout = int((len(jobs) + len(beats) + len(vdescs)) * slow * 3) + 500
    pyrng = random.Random(seed)
    seeds = [pyrng.random() for _ in range(4)]

    def source(stream, payloads, s, record=None):
        shape = stream.payload.shape()
        packed = [pack_payload(shape, p) for p in payloads]
        r = random.Random(s)

        async def bench(ctx):
            sender = BeatSender(ctx, stream, idle=idle, rng=r)
            for value in packed:
                t = await sender.send(value)
                if record is not None:
                    record.append(t)
            await sender.close()
        return bench

    async def sink(ctx):
        out = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(seeds[3]),
                           also=[dut.count_error])
        while len(run.outputs) < len(want):
            job, (err,) = await out.cycle()
            if out.t > timeout:
                raise TimeoutError(f"{len(run.outputs)} of {len(want)} jobs after {out.t} cycles")
            if job is not None:
                run.outputs.append(job)
                run.errors.append(int(err))
                run.out_cycles.append(out.t)
            elif err:
                run.stray_errors += 1
        await out.close()

    simulation_of(dut).run([(source(dut.i, jobs, seeds[0], run.in_cycles), True),
                            (source(dut.vdesc, vdescs, seeds[1]), True),
                            (source(dut.values, beats, seeds[2]), True),
                            (sink, False)])

    want_ints = [pack_payload(layout, j) for j in want]
    bad = [k for k, (g, w) in enumerate(zip(run.outputs, want_ints, strict=True)) if g != w]
    if bad:
        k = bad[0]
        got = data.Const(layout, run.outputs[k])
        raise AssertionError(
            f"{len(bad)} of {len(want)} jobs differ; first: job {k}, got codes "
            f"{[hex(int(got.codes[e])) for e in range(CODES_PER_JOB)]} count {int(got.count)} "
            f"last {int(got.frame_last)} sparse {int(got.sparse)} tag {int(got.tag)}; "
            f"expected {want[k]}")
    assert run.errors == want_err, \
        f"count_error at jobs {np.flatnonzero(run.errors)}, expected {np.flatnonzero(want_err)}"
    assert run.stray_errors == 0
    assert len(run.in_cycles) == len(jobs)
    if idle == backpressure == 0 and check_ideal:
        assert_ideal(frames, run)
    return run


def mixed_frames(rng, sparse_frames):
    """The sparse frames with a few short non-sparse frames between some of them."""
    frames = []
    for f in sparse_frames:
        if rng.random() < 0.5:
            frames.append(make_dense(rng, int(rng.integers(1, 4))))
        frames.append(f)
    return frames


# (density, frame sizes): frames big enough that sparse densities set some bits.
_DENSITY_CASES = {
    0.0: (700, 363, 1),
    0.001: (2900, 1500),
    0.01: (1100, 900, 17),
    0.1: (800, 700, 5),
    0.5: (700, 400, 16, 3),
    1.0: (726, 363, 40, 1),
}


@pytest.mark.parametrize("density,idle,backpressure", rotated(list(_DENSITY_CASES), SETTINGS))
def test_density(density, idle, backpressure):
    """Matching k at each density, host frames of 363 (jobs of 16…16, 11), random starts."""
    seed = int(density * 1000) * 10 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    frames = mixed_frames(rng, [make_sparse(rng, n, density) for n in _DENSITY_CASES[density]])
    run_frames(frames, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("idle,backpressure", slow_except(SETTINGS, 2))
def test_start_offsets(idle, backpressure):
    """Every start offset 0…63, small frames (one to a few jobs), odd host cuts."""
    seed = 100 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    sparse = [make_sparse(rng, int(rng.integers(1, 60)), float(rng.choice([0.5, 1.0])),
                          start=s, M=int(rng.choice([363, 23, 7]))) for s in range(64)]
    run_frames(mixed_frames(rng, sparse), idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("idle,backpressure", slow_except(SETTINGS, 1))
def test_count_mismatch(idle, backpressure):
    """k ≠ set bits: extra values (a few, or many beats of them) dropped, missing values
    give 0, k = 0 with set bits, no set bits with k > 0; count_error on each."""
    seed = 200 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    sparse = [
        make_sparse(rng, 300, 0.3, k_delta=5),
        make_sparse(rng, 300, 0.3, k_delta=-7),
        make_sparse(rng, 200, 0.2, k_delta=-1000),        # k = 0, bits set
        make_sparse(rng, 50, 0.0, k_delta=300),           # no bits, 19+ beats to drop
        make_sparse(rng, 40, 0.5, k_delta=40),
        make_sparse(rng, 20, 0.0),                        # k = 0, matching: no beats
        make_sparse(rng, 363, 1.0, k_delta=-1),
        make_sparse(rng, 100, 0.5),                       # matching, after the rest
        make_sparse(rng, 17, 1.0, k_delta=+1),
        make_sparse(rng, 16, 1.0, k_delta=-16),           # k = 0, all set
        make_sparse(rng, 30, 0.0, k_delta=1),
        make_sparse(rng, 30, 0.3),
        # Values run out in the first job, the last job has no set bits (so krem = its
        # set bits = 0 there): the error is in an earlier job.
        explicit_frame(rng, np.arange(40) < 10, 4, 3),
        explicit_frame(rng, np.arange(40) < 10, 10, 60),  # same bits, k right
        explicit_frame(rng, np.arange(33) >= 32, 0, 0),   # only the very last bit, k = 0
    ]
    # Not the ideal schedule: the unused beats of a frame are known only at its last job,
    # so they are dropped then (one per cycle), not buffered ahead without bound.
    run_frames(mixed_frames(rng, sparse), idle=idle, backpressure=backpressure, seed=seed,
               check_ideal=False)


def test_values_owed():
    """Frames that end long before their beats are in (k = 65535, no set bits, start > 4:
    4097 beats each to drop): four of them would put the value position more than 2**20
    bytes behind unless the block held a last job back; the frames after still get their
    own values."""
    rng = np.random.default_rng(600)
    frames = [explicit_frame(rng, np.zeros(16), 65535, int(rng.integers(5, 64)))
              for _ in range(4)]
    frames += [make_dense(rng, 2), make_sparse(rng, 64, 1.0, start=7),
               explicit_frame(rng, np.zeros(20), 0, 0), make_sparse(rng, 40, 0.5)]
    run = run_frames(frames, seed=600, check_ideal=False)
    # After three frames ~786 KB are owed: the fourth frame's job waits for ~4096 beats.
    gaps = np.diff(run.out_cycles[:5])
    assert gaps[0] == 1 and gaps[1] < 10 and 4000 < gaps[2] < 4200


def test_specials_pass_exactly():
    """NaN/inf/−0/subnormal bit patterns come out exactly (every value a special one)."""
    rng = np.random.default_rng(300)
    frame = make_sparse(rng, 90, 0.6, start=13)
    frame.values[:] = np.resize(SPECIALS, len(frame.values))
    run = run_frames([frame], seed=300)
    layout = sparse_expander_job_layout(unsigned(TAG_BITS))
    got = [int(data.Const(layout, o).codes[e]) for o in run.outputs
           for e in range(CODES_PER_JOB)]
    assert set(int(v) for v in SPECIALS) <= set(got)


@pytest.mark.parametrize("idle,backpressure", slow_except(SETTINGS, 1))
def test_random_mix(idle, backpressure):
    """Many frames of random size, density, host cut, start and (sometimes) wrong k, with
    non-sparse jobs between them."""
    seed = 700 + SETTINGS.index((idle, backpressure))
    rng = np.random.default_rng(seed)
    sparse = []
    for _ in range(30):
        k_delta = int(rng.choice([0, 0, 0, 1, -1, 20, -20]))
        sparse.append(make_sparse(rng, int(rng.integers(1, 400)),
                                  float(rng.choice([0.0, 0.01, 0.1, 0.5, 0.9, 1.0])),
                                  k_delta=k_delta, M=int(rng.choice([363, 16, 23, 5, 1]))))
    run_frames(mixed_frames(rng, sparse), idle=idle, backpressure=backpressure, seed=seed,
               check_ideal=False)


def ideal_fire_cycles(frames):
    """Cycle in which each job leaves the stage where it waits for its values if the block
    only ever waits for what it needs, with every source offering from cycle 0 at one item
    per cycle and no backpressure: the job itself (job ``j`` is accepted in cycle ``j`` at
    the earliest, ranked in cycle ``j + 1`` and counted in cycle ``j + 2``), the value
    beats holding its values (beat ``b`` in cycle ``b``, readable from cycle ``b + 1``),
    its frame's descriptor
    (descriptor ``d`` in cycle ``d``, in the descriptor queue's output register in cycle
    ``d + 2``, loaded in cycle ``d + 3``) and the job before it."""
    fires, beat_base, desc = [], 0, 0
    for frame in frames:
        if isinstance(frame, DenseFrame):
            for _ in frame.counts:
                fires.append(max(len(fires) + 3, fires[-1] + 1 if fires else 0))
            continue
        keep, k, n = frame.keep, len(frame.values), len(frame.keep)
        used = 0                                       # values given out so far
        cuts = [(s, min(s + CODES_PER_JOB, h + frame.M, n)) for h in range(0, n, frame.M)
                for s in range(h, min(h + frame.M, n), CODES_PER_JOB)]
        for q, (s, e) in enumerate(cuts):
            u = min(int(keep[s:e].sum()), k - used)
            used += u
            t = max(len(fires) + 3, fires[-1] + 1 if fires else 0)
            if q == 0:
                t = max(t, desc + 4)
            if u:
                t = max(t, beat_base + (frame.start + 4 * used - 1) // BEAT_BYTES + 1)
            fires.append(t)
        desc += 1
        beat_base += -(-(frame.start + 4 * k) // BEAT_BYTES) if k else 0
    return fires


def assert_ideal(frames, run):
    """Every job leaves exactly when :func:`ideal_fire_cycles` says (then 3 more cycles:
    the pair, window and output registers)."""
    fires = ideal_fire_cycles(frames)
    got = [t - run.in_cycles[0] - 3 for t in run.out_cycles]
    late = [(j, g, f) for j, (g, f) in enumerate(zip(got, fires, strict=True)) if g != f]
    assert not late, f"{len(late)} jobs off the ideal schedule; first (job, got, ideal) {late[0]}"


def test_full_rate():
    """100 % density, every input always valid, no backpressure: one job every cycle after
    the fill, across frame boundaries, short jobs (host frames of 363) and start offsets."""
    rng = np.random.default_rng(400)
    # Cumulative value beats ≤ jobs: the value source keeps up with one job per cycle.
    frames = [make_dense(rng, 3)] + [make_sparse(rng, n, 1.0) for n in (1452, 726, 1452, 1089)]
    for f, start in zip(frames[1:], (0, 37, 5, 63), strict=True):
        f.start = start
    run = run_frames(frames, seed=400)
    n = len(run.outputs)
    assert run.out_cycles[-1] - run.out_cycles[0] + 1 == n    # back to back, first to last
    assert run.out_cycles[0] - run.in_cycles[0] == SparseExpander.LATENCY
    assert_ideal(frames, run)


@pytest.mark.parametrize("density", [1.0, 0.5])
def test_values_bound_rate(density):
    """Frames whose value beats outnumber their jobs (start offsets, 16-element host
    frames, short frames): with no idle and no backpressure every job leaves as soon as
    its values, its descriptor and the job before it allow."""
    rng = np.random.default_rng(450 + int(density * 10))
    frames = []
    for _ in range(30):
        if rng.random() < 0.2:
            frames.append(make_dense(rng, int(rng.integers(1, 4))))
        frames.append(make_sparse(rng, int(rng.integers(1, 200)), density,
                                  M=int(rng.choice([16, 363, 5]))))
    assert_ideal(frames, run_frames(frames, seed=1))


def test_tiny_frames_full_rate():
    """Back-to-back one-job frames (k = 0 included) and non-sparse jobs: one per cycle."""
    rng = np.random.default_rng(500)
    frames = [make_dense(rng, 2)]
    for j in range(60):
        if j % 5 == 4:
            frames.append(make_dense(rng, 2))
        else:
            # ≤ 12 values from a start ≤ 15: one value beat, one job.
            frames.append(make_sparse(rng, int(rng.integers(1, 13)), float(rng.choice([0, 1])),
                                      start=int(rng.integers(0, 16))))
    run = run_frames(frames, seed=500)
    assert run.out_cycles[-1] - run.out_cycles[0] + 1 == len(run.outputs)
    assert_ideal(frames, run)


def test_interface():
    dut = SparseExpander(tag_shape=unsigned(TAG_BITS))
    assert dut.i.payload.shape() == dut.o.payload.shape() == sparse_expander_job_layout(
        unsigned(TAG_BITS))
    layout = sparse_expander_job_layout(unsigned(TAG_BITS))
    assert [name for name, _ in layout] == ["codes", "count", "frame_last", "sparse", "tag"]
    assert layout.size == 512 + 5 + 1 + 1 + TAG_BITS
    assert dut.vdesc.payload.shape() == VALUE_DESC_LAYOUT
    assert dut.values.payload.shape() == unsigned(512)
    assert len(dut.count_error) == 1
    default = SparseExpander()
    assert default.job_layout == sparse_expander_job_layout(unsigned(1))
    for d in (dut, default):
        Fragment.get(d, None)           # elaborates


@pytest.mark.parametrize("bad", ["wide", 1.5, None])
def test_bad_tag_shape(bad):
    rejected(SparseExpander, tag_shape=bad, match="tag_shape")
