"""Tests of :class:`squeezenic_hw.gateware.sparse.index_to_bitmap.IndexToBitmap`.

Each frame is ``(n, indices)``. Its input is one ``desc`` and the index byte
string (``k`` uint16 LE) padded to whole 512-bit beats with random garbage (the
values that follow on the wire, which the block must ignore). The expected
bitmap beats come from the reference decoder
(:func:`squeezenic_hw.reference.threshold.decode_payload`) of the index-layout
payload ``indices + k distinct non-zero values``: an element is kept iff it
decodes to a non-zero value, and ``error`` is the reference's
``layout_error``. A second model written straight from the rule is checked
against the reference. Outputs are compared bit for bit under random idle
cycles on both inputs and random backpressure on ``o``; the testbench also
checks that no index beat is taken before its frame's ``desc`` and that a
stalled output beat holds.
"""

import random

import numpy as np
import pytest

from squeezenic_hw.gateware.sparse.index_to_bitmap import (
    BITMAP_BEAT_BITS,
    IndexToBitmap,
    bitmap_beat_layout,
    index_desc_layout,
)
from squeezenic_hw.reference.threshold import decode_payload
from squeezenic_hw.sim.streams import BeatSender, pack_payload, simulation_of
from squeezenic_hw.spec.threshold import INDEX_LIST

from support.checked_sink import CheckedSink
from support.shared_duts import shared
from support.unused import rejected

SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
BEAT_BYTES = BITMAP_BEAT_BITS // 8
_MASK = (1 << BITMAP_BEAT_BITS) - 1


def n_beats(n):
    return -(-n // BITMAP_BEAT_BITS)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


def reference_bitmap(n, indices):
    """(bitmap int, error) from the reference decoder of the index-layout payload."""
    idx = np.asarray(indices, dtype="<u2")
    values = np.arange(1, idx.size + 1, dtype="<u4")     # non-zero fp32 bit patterns
    decoded = decode_payload(idx.tobytes() + values.tobytes(), n, INDEX_LIST)
    keep = decoded.values.view(np.uint32) != 0
    bitmap = int.from_bytes(np.packbits(keep, bitorder="little").tobytes(), "little")
    return bitmap, decoded.layout_error


def rule_bitmap(n, indices):
    """The same, straight from the rule: used = below n and above the last used."""
    bitmap, last, error = 0, -1, False
    for e in indices:
        if last < e < n:
            bitmap |= 1 << e
            last = e
        else:
            error = True
    return bitmap, error


def expected_beats(n, indices):
    bitmap, error = reference_bitmap(n, indices)
    nb = n_beats(n)
    return [pack_payload(bitmap_beat_layout, {
        "data": (bitmap >> (BITMAP_BEAT_BITS * b)) & _MASK,
        "last": int(b == nb - 1),
        "error": int(error and b == nb - 1),
    }) for b in range(nb)]


def index_beats(rng, indices):
    """Input beats of one frame: the index bytes, then garbage to the end of the beat."""
    raw = np.asarray(indices, dtype="<u2").tobytes()
    pad = -len(raw) % BEAT_BYTES
    raw += bytes(rng.getrandbits(8) for _ in range(pad))
    return [int.from_bytes(raw[o:o + BEAT_BYTES], "little")
            for o in range(0, len(raw), BEAT_BYTES)]


# --------------------------------------------------------------------------
# Stimulus
# --------------------------------------------------------------------------


def kept_set(rng, n, density):
    """Sorted distinct indices < n, each element kept with probability ``density``."""
    return [i for i in range(n) if rng.random() < density]


def clustered(rng, n, clusters, size=16):
    """``clusters`` runs of ``size`` consecutive indices (sorted, merged, below n)."""
    starts = [rng.randrange(0, max(1, n - size)) for _ in range(clusters)]
    return sorted({min(s + d, n - 1) for s in starts for d in range(size)})


# --------------------------------------------------------------------------
# Testbench: two input streams, one output stream
# --------------------------------------------------------------------------


class Run:
    def __init__(self):
        self.outputs = []
        self.out_cycles = []
        self.desc_cycles = []
        self.i_cycles = []       # (frame, cycle) of each accepted index beat


def run_frames(dut, frames, *, idle=0.0, backpressure=0.0, seed=0, timeout=None):
    """Feed ``frames`` [(n, indices)], collect every output beat; returns a :class:`Run`."""
    rng = random.Random(seed)
    descs = [pack_payload(index_desc_layout, {"n": n, "k": len(idx)}) for n, idx in frames]
    beats = [(f, beat) for f, (_, idx) in enumerate(frames) for beat in index_beats(rng, idx)]
    expected = sum(n_beats(n) for n, _ in frames)
    if timeout is None:
        timeout = int((sum(len(idx) for _, idx in frames) + expected + 10 * len(frames))
                      * (2 + 10 * (idle + backpressure))) + 500
    rng_desc, rng_i, rng_o = (random.Random(seed * 3 + s) for s in (1, 2, 3))
    run = Run()

    # Each testbench counts its own clock edges from time zero (as in sim.streams).
    def source(stream, items, rng, record):
        async def bench(ctx):
            sender = BeatSender(ctx, stream, idle=idle, rng=rng)
            for item in items:
                record(item, await sender.send(item[1] if isinstance(item, tuple) else item))
            await sender.close()
        return bench

    async def sink(ctx):
        out = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=rng_o)
        while len(run.outputs) < expected:
            beat, _ = await out.cycle()
            if out.t > timeout:
                raise TimeoutError(f"{len(run.outputs)} of {expected} beats after {out.t} cycles")
            if beat is not None:
                run.outputs.append(beat)
                run.out_cycles.append(out.t)
        await out.close()

    simulation_of(dut).run([
        (source(dut.desc, descs, rng_desc, lambda item, t: run.desc_cycles.append(t)), True),
        (source(dut.i, beats, rng_i, lambda item, t: run.i_cycles.append((item[0], t))), True),
        (sink, False)])

    # Protocol: a frame's index beats only after its desc, all before the next desc.
    assert len(run.desc_cycles) == len(frames) and len(run.i_cycles) == len(beats)
    for f, t in run.i_cycles:
        assert t > run.desc_cycles[f], f"frame {f}: index beat taken before its desc"
        if f + 1 < len(frames):
            assert t < run.desc_cycles[f + 1], f"frame {f}: index beat after the next desc"
    return run


def check(frames, *, idle=0.0, backpressure=0.0, seed=0, entries_per_cycle=2):
    run = run_frames(shared(IndexToBitmap, entries_per_cycle=entries_per_cycle), frames, idle=idle,
                     backpressure=backpressure, seed=seed)
    expected = [beat for n, idx in frames for beat in expected_beats(n, idx)]
    assert len(run.outputs) == len(expected)
    for b, (got, want) in enumerate(zip(run.outputs, expected, strict=True)):
        assert got == want, f"beat {b}: got {got:#x}, want {want:#x}"
    return run


# --------------------------------------------------------------------------
# Models and parameters
# --------------------------------------------------------------------------


def test_rule_model_matches_reference():
    rng = random.Random(1)
    for _ in range(300):
        n = rng.choice([1, 2, 15, 16, 17, 511, 512, 513, 2000])
        k = rng.randrange(0, 40)
        if rng.random() < 0.5:
            idx = sorted(rng.sample(range(n), min(k, n)))
        else:
            idx = [rng.randrange(0, min(65536, 2 * n + 2)) for _ in range(k)]
        assert rule_bitmap(n, idx) == reference_bitmap(n, idx)


@pytest.mark.parametrize("bad", [0, 3, True, 2.0, None])
def test_rejects_bad_entries_per_cycle(bad):
    rejected(IndexToBitmap, entries_per_cycle=bad, match="entries_per_cycle")


# --------------------------------------------------------------------------
# Bit-exact runs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_small_n_and_empty_lists(idle, backpressure):
    rng = random.Random(10)
    frames = []
    for n in (1, 15, 16, 17, 511, 512, 513):
        frames.append((n, []))                                  # k = 0: header-only frame
        frames.append((n, kept_set(rng, n, 0.06) or [n - 1]))
        frames.append((n, [0] if n == 1 else sorted(rng.sample(range(n), min(n, 3)))))
    frames += [(1, [0, 0]), (16, list(range(16))), (513, [0, 511, 512])]
    check(frames, idle=idle, backpressure=backpressure, seed=11)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_densities(idle, backpressure):
    rng = random.Random(20)
    frames = [(4096, kept_set(rng, 4096, d)) for d in (0.001, 0.01, 0.03, 0.06)]
    frames += [(3001, kept_set(rng, 3001, 0.04)), (700, kept_set(rng, 700, 0.06))]
    check(frames, idle=idle, backpressure=backpressure, seed=21)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_clusters(idle, backpressure):
    rng = random.Random(30)
    frames = [
        (2048, list(range(504, 520))),                          # straddles a beat boundary
        (2048, list(range(0, 16)) + list(range(2032, 2048))),   # first and last elements
        (1500, clustered(rng, 1500, 4)),
        (5000, clustered(rng, 5000, 6)),
        (1024, list(range(511, 527)) + list(range(1008, 1024))),
    ]
    check(frames, idle=idle, backpressure=backpressure, seed=31)


def malformed_frames(rng):
    return [
        (1000, [3, 3, 7]),                                      # duplicate
        (1000, [5, 100, 40, 200]),                              # decreasing step
        (1000, [900, 800, 700, 600]),                           # decreasing list
        (1000, [10, 999, 1000, 65535]),                         # idx >= n (and = n)
        (1000, [60000, 1, 2, 3]),                               # early huge entry, then small
        (700, [65535] + sorted(rng.sample(range(700), 40))),
        (1, [0, 0, 1, 65535]),
        (600, [512, 5, 513, 6, 514]),                           # one beat ahead, then back
        (2000, sorted(rng.sample(range(2000), 60)) + [1999, 1998, 0]),
        (2000, [rng.randrange(0, 2200) for _ in range(70)]),    # random junk
        (1000, [1, 2, 3]),                                      # a clean frame after them
    ]


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_malformed(idle, backpressure):
    frames = malformed_frames(random.Random(40))
    assert sum(rule_bitmap(n, idx)[1] for n, idx in frames) == len(frames) - 1
    check(frames, idle=idle, backpressure=backpressure, seed=41)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_largest_n(idle, backpressure):
    rng = random.Random(50)
    frames = [
        (65535, []),
        (65535, [0, 511, 512, 33000, 65534]),
        (65535, sorted(rng.sample(range(65535), 30)) + [65535]),   # last entry = n: error
        (65535, kept_set(rng, 65535, 0.01)),
    ]
    check(frames, idle=idle, backpressure=backpressure, seed=51)


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.3)])
def test_one_entry_per_cycle(idle, backpressure):
    rng = random.Random(60)
    frames = [(1500, kept_set(rng, 1500, 0.05)), (600, list(range(500, 530))), (17, [])]
    frames += malformed_frames(rng)[:6]
    check(frames, idle=idle, backpressure=backpressure, seed=61, entries_per_cycle=1)


@pytest.mark.parametrize("idle,backpressure", SETTINGS)
def test_random_mix(idle, backpressure):
    rng = random.Random(90)
    frames = []
    for _ in range(30):
        n = rng.choice([1, 2, rng.randrange(1, 600), rng.randrange(1, 3000)])
        idx = kept_set(rng, n, rng.choice([0.0, 0.001, 0.02, 0.06, 0.2]))
        if idx and rng.random() < 0.3:                          # break it somewhere
            j = rng.randrange(len(idx))
            idx[j] = rng.choice([idx[j - 1] if j else 0, n, rng.randrange(0, 65536)])
        frames.append((n, idx))
    check(frames, idle=idle, backpressure=backpressure, seed=91)


# --------------------------------------------------------------------------
# Throughput and latency (idle = backpressure = 0)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("entries_per_cycle", [1, 2])
def test_throughput(entries_per_cycle):
    rng = random.Random(70)
    frames = [(8192, kept_set(rng, 8192, 0.05)) for _ in range(3)]
    run = check(frames, seed=71, entries_per_cycle=entries_per_cycle)
    ends = np.cumsum([n_beats(n) for n, _ in frames]) - 1
    last = [run.out_cycles[e] for e in ends]
    for f in range(1, len(frames)):
        n, idx = frames[f]
        k, nb = len(idx), n_beats(n)
        cycles = last[f] - last[f - 1]          # back to back: last beat to last beat
        if entries_per_cycle == 1:
            assert cycles <= 1 + k + nb, (cycles, k, nb)
        else:
            # one entry alone at most once per output beat holding entries (see docstring)
            bitmap, _ = rule_bitmap(n, idx)
            holding = sum(1 for b in range(nb) if (bitmap >> (BITMAP_BEAT_BITS * b)) & _MASK)
            assert cycles <= 1 + -(-k // 2) + holding + nb, (cycles, k, nb, holding)
            assert cycles <= 1 + -(-k // 2) + 2 * nb
    # an empty list: one output beat per cycle
    run = check([(65535, []), (65535, [])], seed=72)
    assert run.out_cycles[-1] - run.out_cycles[0] == 2 * 128 - 1


def test_latency():
    run = check([(1, [])], seed=80)
    # desc queue, frame loaded, its (empty) item, the beat given, output buffer
    assert run.out_cycles[0] - run.desc_cycles[0] == 5
    run = check([(512, [7])], seed=81)
    # index beat into the shift register, its item, the bit set, the beat given,
    # output buffer
    assert run.i_cycles[0][1] - run.desc_cycles[0] == 1
    assert run.out_cycles[0] - run.i_cycles[0][1] == 5
    run = check([(1024, [7, 600])], seed=82)
    # the entry of beat 1 first gives beat 0, then sets its bit: two cycles per beat
    assert [c - run.i_cycles[0][1] for c in run.out_cycles] == [5, 7]
