"""Bit-exact tests of :class:`squeezenic_hw.gateware.tx.packer.WirePacker`.

Jobs (beats of codes with their ``PackMeta``) are drawn at random: per wire
frame a width from the supported set and a length of 1 to several hundred
codes, cut into jobs of 0…16 codes with random ``close_end``/``close_mid``
closes (``close_mid`` hands the rest of its codes to the next frame, at the
same width). The model splits the job stream into wire frames and packs each
with :func:`squeezenic_hw.reference.codecs.pack`, zero-padded to whole 64-byte
beats; the DUT's output beats, grouped by ``commit``, must equal them frame by
frame, bit for bit. The item sequence (``count``, ``commit``) is checked against
the documented emission rule (a beat as soon as it is full, the rest at the
close). With no idle and no backpressure a monitor asserts one job accepted per
cycle and every output item ``LATENCY`` cycles after its job.
"""

import random

import numpy as np
import pytest
from amaranth.hdl import Fragment

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, ELEMENTS_PER_BEAT, RingWrite
from squeezenic_hw.gateware.tx.packer import WirePacker
from squeezenic_hw.reference.codecs import pack
from squeezenic_hw.sim.streams import run_stream, unpack_fields

from support.shared_duts import shared
from support.unused import inspected, rejected

MODES = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
#: The TX lane's widths: raw 32, fp16/bf16 16, sign 1, natural 9, fixed/qsgd 2…16.
LANE_WIDTHS = frozenset({1, 9, 32, *range(2, 17)})
SWEEP_WIDTHS = [1, 2, 3, 7, 8, 9, 15, 16, 32]
BEAT_BYTES = BEAT_BITS // 8


# ----------------------------------------------------------------------------- jobs

def job(width, codes=(), *, split=0, close_mid=False, close_end=False, valid=0, junk=None):
    """One input job: ``codes`` (at most 16) at ``width`` bits; unused lanes are zero.

    ``junk`` (a ``random.Random``): random bits above ``width`` and in the unused
    lanes instead of zeros (the packer ignores them, although the encoders send zeros).
    """
    count = len(codes)
    assert count <= ELEMENTS_PER_BEAT
    assert all(0 <= c < (1 << width) for c in codes)
    lanes = list(codes) + [0] * (ELEMENTS_PER_BEAT - count)
    if junk is not None:
        lanes = [c | (junk.getrandbits(32 - width) << width) if e < count
                 else junk.getrandbits(32) for e, c in enumerate(lanes)]
    return {
        "codes": lanes,
        "valid": valid,   # ignored by the packer: garbage on purpose
        "meta": {"width": width, "count": count, "split": split,
                 "close_mid": int(close_mid), "close_end": int(close_end)},
    }


def _frame_length(rng, max_len):
    r = rng.random()
    if r < 0.35:
        return rng.randint(1, 20)
    if r < 0.7:
        return rng.randint(20, min(100, max_len))
    return rng.randint(1, max_len)


def random_jobs(rng, width_choices, n_frames, *, max_len=600, junk=False):
    """Jobs for ``n_frames`` wire frames, every frame closed at the end."""
    junk = rng if junk else None
    jobs = []
    width = rng.choice(width_choices)
    carry = []          # codes of the frame already sent by a close_mid job
    for f in range(n_frames):
        last = f == n_frames - 1
        n = max(_frame_length(rng, max_len), len(carry))
        pos = len(carry)
        carry = []

        def codes(k, w=width):
            return [rng.getrandbits(w) for _ in range(k)]

        while True:
            remaining = n - pos
            mask = rng.getrandbits(ELEMENTS_PER_BEAT)
            if remaining == 0:
                # The frame's codes all went in with plain jobs: a close-only job.
                jobs.append(job(width, close_end=True, valid=mask, junk=junk))
                break
            if remaining > ELEMENTS_PER_BEAT or rng.random() < 0.15:
                k = min(remaining, ELEMENTS_PER_BEAT if rng.random() < 0.5
                        else rng.randint(1, ELEMENTS_PER_BEAT))
                jobs.append(job(width, codes(k), valid=mask, junk=junk))
                pos += k
                continue
            if not last and remaining < ELEMENTS_PER_BEAT and rng.random() < 0.5:
                count = rng.randint(remaining + 1, ELEMENTS_PER_BEAT)
                carry = codes(count)
                jobs.append(job(width, carry, split=remaining, close_mid=True, valid=mask,
                                junk=junk))
                carry = carry[remaining:]
                break
            jobs.append(job(width, codes(remaining), close_end=True, valid=mask, junk=junk))
            break
        if not carry:
            width = rng.choice(width_choices)
    return jobs


# ----------------------------------------------------------------------------- model

def model_frames(jobs):
    """Expected wire frames: per frame its payload bytes padded to whole beats."""
    frames = []
    width, codes = None, []
    for j in jobs:
        meta = j["meta"]
        count, width = meta["count"], meta["width"]
        new = j["codes"][:count]
        take = meta["split"] if meta["close_mid"] else count
        codes += new[:take]
        if meta["close_mid"] or meta["close_end"]:
            frames.append(_padded(pack(np.array(codes, dtype=np.uint32), width)))
            codes = new[take:] if meta["close_mid"] else []
    assert not codes, "job sequence must end with a close"
    return frames


def _padded(payload):
    payload = bytes(payload)
    return payload + bytes(-len(payload) % BEAT_BYTES)


def model_items(jobs):
    """(job index, beats, commit) of every output item, by the emission rule."""
    items = []
    fill = 0
    for k, j in enumerate(jobs):
        meta = j["meta"]
        take = meta["split"] if meta["close_mid"] else meta["count"]
        total = fill + take * meta["width"]
        if meta["close_mid"] or meta["close_end"]:
            items.append((k, -(-total // BEAT_BITS), 1))
            fill = (meta["count"] - take) * meta["width"] if meta["close_mid"] else 0
        elif total >= BEAT_BITS:
            items.append((k, 1, 0))
            fill = total - BEAT_BITS
        else:
            fill = total
    return items


def dut_frames(outputs):
    """Group the DUT's output beats into frames by ``commit``; also its (count, commit)."""
    frames, shape, beats = [], [], []
    for value in outputs:
        item = unpack_fields(RingWrite, value)
        count, commit = int(item.count), int(item.commit)
        shape.append((count, commit))
        assert count <= 2, f"RingWrite.count = {count}"
        beats += [int(item.beats[b]) for b in range(count)]
        if commit:
            frames.append(b"".join(x.to_bytes(BEAT_BYTES, "little") for x in beats))
            beats = []
    assert not beats, "beats after the last commit"
    return frames, shape


# ----------------------------------------------------------------------------- driver

def check(widths, jobs, *, idle, backpressure, seed, registered_ready=False):
    dut = shared(WirePacker, widths, registered_ready=registered_ready)
    items = model_items(jobs)
    expected = model_frames(jobs)
    trace = {"accept": [], "out": []}

    async def monitor(ctx):
        t = 0
        while True:
            _, _, iv, ir, ov, orr = await ctx.tick().sample(
                dut.i.valid, dut.i.ready, dut.o.valid, dut.o.ready)
            if registered_ready:
                assert ir == orr, "i.ready is not o.ready"
            t += 1
            if iv and ir:
                trace["accept"].append(t)
            if ov and orr:
                trace["out"].append(t)

    run = run_stream(dut, jobs, n_outputs=len(items), idle=idle, backpressure=backpressure,
                     seed=seed, extra_testbenches=[monitor])
    got, shape = dut_frames(run.outputs)
    assert len(got) == len(expected), f"{len(got)} frames, expected {len(expected)}"
    for f, (g, e) in enumerate(zip(got, expected, strict=True)):
        if g != e:
            first = next(i for i in range(min(len(g), len(e))) if g[i] != e[i]) \
                if len(g) == len(e) else None
            raise AssertionError(
                f"frame {f}: {len(g)} bytes, expected {len(e)}; first differing byte {first}")
    assert shape == [(n, c) for _, n, c in items]
    if idle == 0 and backpressure == 0:
        accept = trace["accept"]
        assert len(accept) == len(jobs)
        assert accept == list(range(accept[0], accept[0] + len(jobs))), \
            "a job was not accepted in some cycle"
        assert trace["out"] == [accept[k] + dut.LATENCY for k, _, _ in items]
    return run


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("width", SWEEP_WIDTHS)
@pytest.mark.parametrize("mode", range(len(MODES)))
def test_width_sweep(width, mode):
    idle, backpressure = MODES[mode]
    seed = 100 * width + mode
    jobs = random_jobs(random.Random(seed), [width], n_frames=12, max_len=400)
    check(LANE_WIDTHS, jobs, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("mode", range(len(MODES)))
def test_one_width_word_gearbox(width, mode):
    """Built for one power-of-two width: the word gearbox, same frames, items and
    latency as the general packer; junk above the width and past the count ignored."""
    idle, backpressure = MODES[mode]
    seed = 1000 + 100 * width + mode
    rng = random.Random(seed)
    assert inspected(WirePacker, [width]).word_gearbox
    jobs = random_jobs(rng, [width], n_frames=30, max_len=1200, junk=True)
    check([width], jobs, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("width", [1, 8, 16])
def test_word_gearbox_full_rate_beat_boundaries(width):
    """Frames of about whole beats in jobs of 1…16 codes, closing inside a job: closes at
    every residual near the last slot, two-beat items included; one job per cycle."""
    rng = random.Random(width)
    beat_codes = BEAT_BITS // width
    lengths = [beat_codes * rng.randint(1, 2) + rng.randint(-20, 20) for _ in range(40)]
    jobs, carried = [], 0           # codes of the next frame already sent by a close_mid
    for length in lengths:
        left = max(length, 17) - carried   # codes of this frame still to send
        carried = 0
        while True:
            n = rng.randint(1, 16)
            codes = [rng.getrandbits(width) for _ in range(n)]
            if left > n:
                jobs.append(job(width, codes))
                left -= n
            elif left == n:
                jobs.append(job(width, codes, close_end=True))
                break
            else:
                jobs.append(job(width, codes, split=left, close_mid=True))
                carried = n - left
                break
    if carried:
        jobs.append(job(width, [], close_end=True))
    # check() asserts one job accepted per cycle and every item LATENCY cycles later
    run = check([width], jobs, idle=0, backpressure=0, seed=width)
    assert any(unpack_fields(RingWrite, v)["count"] == 2 for v in run.outputs), \
        "no two-beat item was exercised"
    assert not inspected(WirePacker, [3]).word_gearbox
    assert not inspected(WirePacker, [1, 2]).word_gearbox


@pytest.mark.parametrize("mode", range(len(MODES)))
def test_mixed_widths(mode):
    idle, backpressure = MODES[mode]
    seed = 7 + mode
    jobs = random_jobs(random.Random(seed), sorted(LANE_WIDTHS), n_frames=100, max_len=600)
    check(LANE_WIDTHS, jobs, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("mode", range(len(MODES)))
def test_junk_ignored(mode):
    """Bits above ``width`` and codes at or past ``count`` do not reach the wire."""
    idle, backpressure = MODES[mode]
    seed = 17 + mode
    jobs = random_jobs(random.Random(seed), sorted(LANE_WIDTHS), n_frames=40, max_len=400,
                       junk=True)
    check(LANE_WIDTHS, jobs, idle=idle, backpressure=backpressure, seed=seed)


@pytest.mark.parametrize("mode", range(len(MODES)))
def test_only_built_widths(mode):
    """A packer built for a few widths packs them (fewer compaction cases)."""
    idle, backpressure = MODES[mode]
    seed = 31 + mode
    widths = [1, 9, 32]
    jobs = random_jobs(random.Random(seed), widths, n_frames=8, max_len=300)
    check(widths, jobs, idle=idle, backpressure=backpressure, seed=seed)


def _edge_jobs(rng):
    def codes(w, k):
        return [rng.getrandbits(w) for _ in range(k)]

    jobs = []
    # Close exactly at a beat boundary: 2 full beats sent, then a close-only job
    # with fill = 0 gives count = 0, commit = 1.
    jobs += [job(32, codes(32, 16)) for _ in range(2)] + [job(32, close_end=True)]
    jobs += [job(8, codes(8, 16)) for _ in range(4)] + [job(8, close_end=True)]
    # A close of an empty frame (right after another close): count = 0, commit = 1.
    jobs += [job(5, close_end=True)]
    # close_mid giving 2 beats: fill 480 + 15 codes of 32 bits, 1 code to the next frame.
    jobs += [job(32, codes(32, 15)),
             job(32, codes(32, 16), split=15, close_mid=True),
             job(32, codes(32, 3), close_end=True)]
    # close_end giving 2 beats (fill 480 + 512 bits), then a frame ending exactly at 512.
    jobs += [job(32, codes(32, 15)), job(32, codes(32, 16), close_end=True)]
    jobs += [job(16, codes(16, 16)), job(16, codes(16, 16), close_end=True)]
    # close_mid with split 1 and with the next frame filling a beat by itself.
    jobs += [job(9, codes(9, 16), split=1, close_mid=True),
             job(9, codes(9, 16), split=15, close_mid=True),
             job(9, codes(9, 2), close_end=True)]
    # One-code frames of width 1 and 2, a close_mid chain of tiny frames.
    jobs += [job(1, [1], close_end=True), job(2, [3], close_end=True)]
    jobs += [job(3, codes(3, 16), split=s, close_mid=True) for s in (1, 2, 3, 4)]
    jobs += [job(3, codes(3, 1), close_end=True)]
    # Unaligned odd width filling several beats, closed by a plain count = 0 close.
    jobs += [job(7, codes(7, 16)) for _ in range(9)] + [job(7, close_end=True)]
    return jobs


@pytest.mark.parametrize("mode", range(len(MODES)))
def test_edge_cases(mode):
    idle, backpressure = MODES[mode]
    jobs = _edge_jobs(random.Random(5))
    items = model_items(jobs)
    # The cases above really occur (the model counts as the spec says).
    assert sum(1 for _, n, c in items if n == 0 and c == 1) == 3
    assert sum(1 for _, n, c in items if n == 2 and c == 1) >= 2
    check({3, 5, 7, 8, 9, 16, 32, 1, 2}, jobs, idle=idle, backpressure=backpressure,
          seed=50 + mode)


def test_full_rate_with_closes_every_job():
    """Every job closes (close_mid chains and 1-code frames): still one job per cycle."""
    rng = random.Random(3)
    jobs = [job(32, [rng.getrandbits(32) for _ in range(16)], split=rng.randint(1, 15),
                close_mid=True) for _ in range(40)]
    jobs.append(job(32, [1], close_end=True))
    jobs += [job(w, [rng.getrandbits(w)], close_end=True) for w in (1, 9, 16, 32) * 5]
    run = check(LANE_WIDTHS, jobs, idle=0, backpressure=0, seed=3)
    assert run.max_ready_streak == len(run.outputs)


@pytest.mark.parametrize("widths", [LANE_WIDTHS, [4]], ids=["general", "gearbox"])
@pytest.mark.parametrize("mode", range(len(MODES)))
def test_registered_ready_advances_on_o_ready_alone(widths, mode):
    """With ``registered_ready`` the stages move exactly when ``o.ready`` is high
    (``i.ready`` is ``o.ready``, every cycle): the same frames and items."""
    idle, backpressure = MODES[mode]
    seed = 71 + mode
    jobs = random_jobs(random.Random(seed), sorted(widths), n_frames=20, max_len=500)
    check(widths, jobs, idle=idle, backpressure=backpressure, seed=seed,
          registered_ready=True)
    rejected(WirePacker, widths, registered_ready=1, match="registered_ready")


def test_unbuilt_width_carries_nothing():
    """A job whose width was not built counts as a job with no codes."""
    dut = shared(WirePacker, [8])
    jobs = [job(8, [1, 2, 3]), job(5, [7, 7, 7, 7]), job(8, [4], close_end=True),
            job(5, [1, 2], close_end=True)]
    run = run_stream(dut, jobs, n_outputs=2)
    got, shape = dut_frames(run.outputs)
    assert got == model_frames([jobs[0], jobs[2], job(8, close_end=True)])
    assert shape == [(1, 1), (0, 1)]


@pytest.mark.parametrize("widths", [[], set(), [0], [33], [1, 40], [-1], ["8"], [1.5], [True],
                                    None, 8])
def test_bad_widths(widths):
    rejected(WirePacker, widths, match="widths")


def test_widths_property():
    dut = WirePacker([16, 1, 9, 16])
    Fragment.get(dut, None)
    assert dut.widths == (1, 9, 16)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_long_mixed(seed):
    idle, backpressure = MODES[seed % len(MODES)]
    jobs = random_jobs(random.Random(1000 + seed), sorted(LANE_WIDTHS), n_frames=300)
    check(LANE_WIDTHS, jobs, idle=idle, backpressure=backpressure, seed=seed)
