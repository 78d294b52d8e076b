"""SparseCompactor against a pure-Python model written from its specification.

The model (:func:`model`) follows the layout docstrings of
``squeezenic_hw/gateware/sparse_compactor.py``: kept values in element order in
slots ``0 … kept - 1`` with their frame-relative indices (``(base + e) mod
2**16``, or ``e - split`` after a mid-job close), zeros above, ``kept``,
``kept_split`` and the pass-through fields. Jobs are random (keep masks
including 0 and all-ones, counts 0…16 with ``keep`` below ``count``, bases near
the 16-bit wrap, mid-job closes with ``1 <= split < count``) plus a few edge
jobs; ``meta`` carries a sequence number so order is checked too.
"""

import random

import pytest
from amaranth import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.gateware.sparse.compactor import (
    ELEMENTS,
    SparseCompactor,
    sparse_compactor_input_layout,
    sparse_compactor_output_layout,
)
from squeezenic_hw.sim.streams import pack_payload, run_stream, unpack_fields

from support.param_sweep import slow_except
from support.shared_duts import shared
from support.unused import rejected

META = unsigned(16)


def model(job):
    """The output beat (a dict for ``layout.const``) for one input job (a dict)."""
    keep, split, close_mid = job["keep"], job["split"], job["close_mid"]
    kept = [e for e in range(ELEMENTS) if (keep >> e) & 1]

    def index(e):
        if close_mid and e >= split:
            return e - split
        return (job["base"] + e) % (1 << 16)

    pad = [0] * (ELEMENTS - len(kept))
    return {
        "values": [job["values"][e] for e in kept] + pad,
        "indices": [index(e) for e in kept] + pad,
        "kept": len(kept),
        "kept_split": sum(e < split for e in kept) if close_mid else len(kept),
        "keep": keep,
        "count": job["count"],
        "split": split,
        "close_mid": close_mid,
        "meta": job["meta"],
    }


def _keep_mask(rng, count):
    full = (1 << count) - 1
    kind = rng.random()
    if kind < 0.15:
        return 0
    if kind < 0.3:
        return full
    if kind < 0.45:     # sparse: one or two elements
        return sum(1 << rng.randrange(count) for _ in range(rng.randint(1, 2))) & full \
            if count else 0
    if kind < 0.6:      # dense: all but one or two
        return full & ~sum(1 << rng.randrange(16) for _ in range(rng.randint(1, 2)))
    return rng.getrandbits(16) & full


def random_job(rng, seq):
    count = rng.choice([0, 16, 16]) if rng.random() < 0.2 else rng.randint(0, 16)
    base = 0xFFFF - rng.randint(0, 20) if rng.random() < 0.3 else rng.getrandbits(16)
    u = rng.random()
    if count >= 2 and u < 0.4:
        close_mid, split = 1, rng.randint(1, count - 1)
    elif u < 0.45:
        # outside the callers' contract, but the outputs are still defined
        close_mid, split = 1, rng.randint(0, 31)
    else:
        close_mid, split = 0, rng.randint(0, 31)    # split is then ignored
    return {
        "values": [rng.getrandbits(32) for _ in range(ELEMENTS)],
        "keep": _keep_mask(rng, count),
        "count": count,
        "base": base,
        "split": split,
        "close_mid": close_mid,
        "meta": seq,
    }


def edge_jobs(rng):
    """All kept / none kept / a close-only job / wrap / every split of a full job, and
    splits outside the callers' range."""
    jobs = [
        {"keep": 0xFFFF, "count": 16, "base": 0xFFF8, "split": 0, "close_mid": 0},
        {"keep": 0, "count": 16, "base": 0, "split": 0, "close_mid": 0},
        {"keep": 0, "count": 0, "base": 1234, "split": 0, "close_mid": 0},
        {"keep": 0x8001, "count": 16, "base": 0xFFFF, "split": 0, "close_mid": 0},
        {"keep": 0x8000, "count": 16, "base": 7, "split": 15, "close_mid": 1},
        # split outside 1 <= split < count (not sent by callers, still defined)
        {"keep": 0xFFFF, "count": 16, "base": 0xFFF3, "split": 0, "close_mid": 1},
        {"keep": 0xFFFF, "count": 16, "base": 0xFFF3, "split": 16, "close_mid": 1},
        {"keep": 0xFFFF, "count": 16, "base": 0xFFF3, "split": 31, "close_mid": 1},
    ]
    jobs += [{"keep": 0xFFFF, "count": 16, "base": 0xFFF0 + s, "split": s, "close_mid": 1}
             for s in range(1, 16)]
    for job in jobs:
        job["values"] = [rng.getrandbits(32) for _ in range(ELEMENTS)]
    return jobs


def make_jobs(seed, n):
    """The edge jobs, then random ones up to ``n`` in all; ``meta`` = position."""
    rng = random.Random(seed)
    jobs = edge_jobs(rng)
    jobs += [random_job(rng, 0) for _ in range(n - len(jobs))]
    for seq, job in enumerate(jobs):
        job["meta"] = seq
    return jobs


def check(dut, jobs, **kw):
    run = run_stream(dut, jobs, **kw)
    out_layout = sparse_compactor_output_layout(META)
    assert len(run.outputs) == len(jobs)
    bad = []
    for k, (job, got) in enumerate(zip(jobs, run.outputs, strict=True)):
        want = pack_payload(out_layout, model(job))
        if got != want:
            g, w = unpack_fields(out_layout, got), unpack_fields(out_layout, want)
            diff = [f for f in out_layout.members if _field(g, f) != _field(w, f)]
            bad.append(f"job {k} (meta {g.meta}; keep {job['keep']:#06x} count {job['count']} "
                       f"base {job['base']:#06x} split {job['split']} "
                       f"close_mid {job['close_mid']}): " +
                       "; ".join(f"{f} got {_field(g, f)} want {_field(w, f)}" for f in diff))
    assert not bad, f"{len(bad)} of {len(jobs)} jobs differ ({kw}); first:\n  " + \
        "\n  ".join(bad[:5])
    return run


def _field(view, name):
    v = view[name]
    return [int(x) for x in v] if isinstance(v, data.Const) else int(v)


@pytest.mark.parametrize("idle,backpressure",
                         slow_except([(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)], 2))
def test_matches_model(idle, backpressure):
    seed = int(idle * 10) * 10 + int(backpressure * 10)
    check(SparseCompactor(META), make_jobs(seed, 500), idle=idle, backpressure=backpressure,
          seed=seed)


def test_full_rate_and_latency():
    """No idle, no backpressure: first output ``latency`` cycles after the first
    input, then one job per cycle with no gap."""
    n = 120
    dut = shared(SparseCompactor, META)
    run = check(dut, make_jobs(99, n))
    assert dut.latency == SparseCompactor.LATENCY == 3
    assert run.latency == dut.latency
    assert run.max_ready_streak == n
    assert run.cycles == n + dut.latency


def test_struct_meta_passes_through():
    meta = data.StructLayout({"seq": unsigned(7), "last": unsigned(1), "tag": unsigned(3)})
    dut = SparseCompactor(meta)
    assert dut.i.payload.shape() == sparse_compactor_input_layout(meta)
    assert dut.o.payload.shape() == sparse_compactor_output_layout(meta)
    rng = random.Random(5)
    jobs = [random_job(rng, 0) for _ in range(40)]
    metas = [{"seq": k, "last": k % 2, "tag": k % 7} for k in range(len(jobs))]
    for job, m in zip(jobs, metas, strict=True):
        job["meta"] = m
    run = run_stream(dut, jobs, idle=0.2, backpressure=0.3, seed=5)
    out_layout = sparse_compactor_output_layout(meta)
    assert run.outputs == [pack_payload(out_layout, model(j)) for j in jobs]


def test_layouts():
    i = sparse_compactor_input_layout(META)
    o = sparse_compactor_output_layout(META)
    assert i["values"].shape == o["values"].shape == data.ArrayLayout(unsigned(32), ELEMENTS)
    assert o["indices"].shape == data.ArrayLayout(unsigned(16), ELEMENTS)
    assert i.size == 512 + 16 + 5 + 16 + 5 + 1 + 16
    assert o.size == 512 + 256 + 5 + 5 + 16 + 5 + 5 + 1 + 16


def test_bubble_filled_while_output_stalled():
    """With ``o.ready`` low the pipeline still takes jobs while a stage is empty
    (a stage advances when the next is empty or advancing): job 0, a bubble, then
    jobs 1 and 2 are accepted although job 0 waits at the output (the bubble is
    squeezed out). Then ``i.ready`` drops, and when ``o.ready`` rises the jobs
    leave in order, one per cycle, while new jobs enter in the same cycles."""
    dut = SparseCompactor(META)
    jobs = make_jobs(7, 24)[-4:]
    in_layout = sparse_compactor_input_layout(META)
    out_layout = sparse_compactor_output_layout(META)
    packed = [pack_payload(in_layout, j) for j in jobs]
    want = [pack_payload(out_layout, model(j)) for j in jobs]
    log = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        k = 0
        for cycle in range(10):
            if cycle == 6:
                ctx.set(dut.o.ready, 1)
            offer = k < len(packed) and cycle != 1     # a bubble after job 0
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload.as_value(), packed[k])
            _, _, i_ready, o_valid, o_ready, payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload.as_value())
            took = bool(i_ready) and offer
            gave = bool(o_valid and o_ready)
            log.append((took, gave))
            if gave:
                assert int(payload) == want[len([g for _, g in log if g]) - 1]
            k += took

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    took = [t for t, _ in log]
    gave = [g for _, g in log]
    # job 0 reaches the output (stage 3) at cycle 3; job 1 enters at cycle 2 and job 2
    # at cycle 3 (the bubble moves on to stage 2, then is overwritten); the three
    # stages are then full until cycle 6, when job 0 leaves and job 3 enters.
    assert took == [True, False, True, True, False, False, True, False, False, False]
    assert gave == [False] * 6 + [True] * 4


@pytest.mark.parametrize("bad", ["wide", -1, 3.5, object(), None])
def test_bad_meta_shape(bad):
    rejected(SparseCompactor, bad, match="meta_shape")
    with pytest.raises(ValueError, match="meta_shape"):
        sparse_compactor_input_layout(bad)
