# amaranth: UnusedElaboratable=no
"""The per-lane data generator: numpy reference (values, frames) and gateware against it."""

import zlib
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Module, ResetInserter, Signal
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.generator import GradientGenerator
from squeezenic_hw.reference.codecs import encode
from squeezenic_hw.reference.generator import (
    CLASS_TAPS,
    EXPONENT_TABLE,
    FEEDBACK_TAP,
    INITIAL_STATE,
    SEED_TAPS,
    STATE_BITS,
    STEP_BITS,
    VALUE_TAPS,
    WARMUP_STEPS,
    WARMUP_TAP,
    beat_values,
    bit_sequence,
    cut_mantissa,
    frame_header,
    generate_frame,
    generate_frames,
    run_values,
    window_values,
)
from squeezenic_hw.sim.axis import FrameSink
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.sim.vectors import EDGE_F32_BITS
from squeezenic_hw.spec.codecs import CODECS, validate_param
from squeezenic_hw.spec.frames import Header, classify_host_frame, parse
from squeezenic_hw.spec.generator import (
    MAX_ELEMENTS,
    VALUE_EXPONENT_HIGH,
    GeneratorConfig,
    config_values,
    rate_to_q8_8,
)
from squeezenic_hw.spec.header import FLAG_FLUSH, FLAG_STOCHASTIC

from support.shared_duts import shared
from support.unused import rejected

# ---- reference: values ---------------------------------------------------------------


def test_value_check_values():
    # The check values of docs/generator.md.
    assert [hex(v) for v in beat_values(0, 1)[0][:4]] == [
        "0xbcb4bd08", "0x3c6f6d8c", "0x3940018f", "0x39410ea5"]
    assert [hex(v) for v in beat_values(1, 1)[0][:4]] == [
        "0xb83a5e1f", "0xbc9a8249", "0x39a68e40", "0xbc0d4a85"]
    assert [hex(v) for v in beat_values(0xDEADBEEF, 3)[2][13:]] == [
        "0xbc79a6b1", "0xbccd15e4", "0x3bf5cfbf"]
    window = bit_sequence(0, WARMUP_STEPS)[-STATE_BITS:]
    assert sum(int(b) << j for j, b in enumerate(window[:32])) == 0x4F08B742


def test_initial_state_is_xorshift32():
    # Marsaglia's xorshift32 (13, 17, 5) from 2463534242: 723471715 first.
    words = [sum(int(b) << j for j, b in enumerate(INITIAL_STATE[32 * w:32 * w + 32]))
             for w in range(16)]
    x = 2463534242
    for w in words:
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        assert w == x
    assert words[0] == 723471715
    assert INITIAL_STATE.shape == (STATE_BITS,)


def test_bit_sequence_follows_the_recurrence():
    seed = 0x5EED1234
    s = bit_sequence(seed, WARMUP_STEPS + 50).astype(int)
    assert len(s) == STATE_BITS + (WARMUP_STEPS + 50) * STEP_BITS
    assert np.array_equal(s[:STATE_BITS], INITIAL_STATE)
    # After the warm-up: the trinomial x^521 + x^32 + 1, bit by bit.
    n = np.arange(STATE_BITS + WARMUP_STEPS * STEP_BITS, len(s))
    assert np.array_equal(s[n], s[n - STATE_BITS] ^ s[n - STATE_BITS + FEEDBACK_TAP])
    # The warm-up, written out one bit at a time.
    for step in range(WARMUP_STEPS):
        for i in range(STEP_BITS):
            old = step * STEP_BITS                   # the window's first bit
            want = (s[old + i] ^ s[old + i + FEEDBACK_TAP] ^ s[old + i + WARMUP_TAP]
                    ^ (seed >> int(SEED_TAPS[i][0])) & 1 ^ (seed >> int(SEED_TAPS[i][1])) & 1)
            assert s[STATE_BITS + old + i] == want, (step, i)


def test_taps():
    triples = VALUE_TAPS.reshape(-1, 3)
    assert triples.min() >= 0 and triples.max() < STATE_BITS
    assert all(len(set(t)) == 3 for t in triples)
    # No triple is another one moved along the register: no value bit is another one
    # some beats later.
    shapes = {tuple(np.diff(sorted(t))) for t in triples}
    assert len(shapes) == len(triples)
    # The class bits are the newest bits of the window, each used once.
    assert sorted(CLASS_TAPS.ravel()) == list(range(STATE_BITS - STEP_BITS, STATE_BITS))


def test_exponent_table_follows_the_definition():
    for x in range(32):
        for c in (0, 1):
            z = 5 - x.bit_length()
            want = 126 + c if x == 0 else 112 + 2 * (4 - z) + c
            assert EXPONENT_TABLE[2 * x + c] == want, (x, c)


def test_exponents_share_the_high_nibble_consumers_may_assume():
    assert set(EXPONENT_TABLE >> 4) == {VALUE_EXPONENT_HIGH}


def test_cut_mantissa_by_hand():
    assert cut_mantissa(np.uint32(0x3F8000FF), 9) == 0x3F804000   # sticky: bit 14
    assert cut_mantissa(np.uint32(0x3F804000), 9) == 0x3F804000
    assert cut_mantissa(np.uint32(0xBFFFFFFF), 1) == 0xBFC00000
    assert cut_mantissa(np.uint32(0x7F800001), 3) == 0x7F900000   # a NaN stays one
    assert cut_mantissa(np.uint32(0x00000001), 23) == 1
    for bad in (0, 24, True):
        with pytest.raises(ValueError, match="bits"):
            cut_mantissa(np.uint32(0), bad)


def _values_near_levels(rng, exponent, n=4000):
    """fp32 words of exponents ``exponent - 3 … exponent + 12`` with random mantissas, half
    of them with their low bits cleared (ties, and values just above and below them)."""
    e = rng.integers(exponent - 3, exponent + 13, n).clip(0, 254).astype(np.uint32)
    mant = rng.integers(0, 2**23, n, dtype=np.uint32)
    low = rng.integers(0, 24, n).astype(np.uint32)
    mant = np.where(np.arange(n) % 2 == 0, mant & ~((np.uint32(1) << low) - np.uint32(1)), mant)
    sign = rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    return (sign | e << np.uint32(23) | mant).astype(np.uint32)


@pytest.mark.parametrize("q", [2, 4, 8])
def test_cut_mantissa_keeps_the_fixed_codes_of_power_of_two_scales(q):
    """``fixed:q`` codes (nearest rounding) at a power-of-two scale read only the sign, the
    exponent and the mantissa's top q bits, the lowest sticky (a level has q - 1 bits,
    and the half and sticky bits follow its q - 2 below the hidden one): the codes of the
    cut values are those of the whole ones, edge values and every level's ties included.
    One bit fewer is not enough (but for q = 2, whose levels 0 and 1 need one bit)."""
    rng = np.random.default_rng(q)
    short = 0
    for k in list(range(-140, 131, 9)) + [0, 1, -1]:
        scale = np.float32(2.0 ** k) if -149 <= k <= 127 else (np.float32(0) if k < 0
                                                                else np.float32(np.inf))
        words = np.concatenate([EDGE_F32_BITS, _values_near_levels(rng, 127 - k)])
        x = words.view(np.float32)
        for s in (scale, -scale):
            want = encode(x, "fixed", param=q, scale=s)
            got = encode(cut_mantissa(words, q).view(np.float32), "fixed", param=q,
                         scale=s)
            np.testing.assert_array_equal(got, want, err_msg=f"scale {s}")
            short += int(np.any(encode(cut_mantissa(words, q - 1).view(np.float32),
                                       "fixed", param=q, scale=s) != want))
    for s in (np.float32(np.nan), np.float32(-0.0)):
        words = _values_near_levels(rng, 127)
        np.testing.assert_array_equal(
            encode(cut_mantissa(words, q).view(np.float32), "fixed", param=q, scale=s),
            encode(words.view(np.float32), "fixed", param=q, scale=s))
    assert short > 10 if q > 2 else short == 0


def _values_one_by_one(t):
    """window_values written out element by element and bit by bit."""
    out = []
    for e in range(16):
        xor = [int(t[p0]) ^ int(t[p1]) ^ int(t[p2]) for p0, p1, p2 in VALUE_TAPS[e]]
        x = sum(int(t[p]) << j for j, p in enumerate(CLASS_TAPS[e]))
        c = xor[24]
        exponent = 126 + c if x == 0 else 112 + 2 * (4 - (5 - x.bit_length())) + c
        out.append(xor[23] << 31 | exponent << 23 | sum(b << j for j, b in enumerate(xor[:23])))
    return out


def test_window_values_by_hand():
    t = np.zeros(STATE_BITS, dtype=np.uint8)
    assert list(window_values(t)) == [0x3F000000] * 16            # x = 0, c = 0: +0.5
    t[CLASS_TAPS[1, 0]] = 1                                        # x = 1: z = 4
    assert window_values(t)[1] & 0x7F800000 == 112 << 23            # 2**-15 … 2**-14
    rng = np.random.default_rng(1)
    for _ in range(20):
        t = rng.integers(0, 2, STATE_BITS, dtype=np.uint8)
        assert list(window_values(t)) == _values_one_by_one(t)
    for p in range(STATE_BITS):                                    # one bit at a time
        t = np.zeros(STATE_BITS, dtype=np.uint8)
        t[p] = 1
        assert list(window_values(t)) == _values_one_by_one(t), p


def test_value_statistics():
    v = beat_values(12345, 62_500).view(np.float32).ravel()
    n = v.size
    bits = v.view(np.uint32)
    assert np.isfinite(v).all() and (v != 0).all()
    exponent = (bits >> 23) & 0xFF
    assert set(np.unique(exponent)) == set(range(112, 122)) | {126, 127}

    def near(count, p):   # within 5 binomial standard deviations
        return abs(count - n * p) < 5 * np.sqrt(n * p * (1 - p))

    # Large: x = 0 (1/32), then c. Small: z leading zeros (probability 2**-(z+1)), then c.
    for e in (126, 127):
        assert near((exponent == e).sum(), 1 / 64), e
    for z in range(5):
        for c in (0, 1):
            assert near((exponent == 112 + 2 * (4 - z) + c).sum(), 2.0 ** -(z + 2)), (z, c)
    assert near((bits >> 31).sum(), 0.5)
    for j in range(23):
        assert near(((bits >> j) & 1).sum(), 0.5), j
    small = np.abs(v) < 0.5
    assert np.abs(v[small]).min() >= 2.0**-15 and np.abs(v[small]).max() < 2.0**-5
    assert np.abs(v[~small]).max() < 2.0
    assert abs(np.mean(v[small]) / np.std(v[small])) < 0.01      # symmetric about zero
    assert abs(np.mean(v[~small]) / np.std(v[~small])) < 0.05
    # Neighbours are uncorrelated: in a beat, across beats, in sign and in magnitude.
    m = np.log2(np.abs(v)).reshape(-1, 16)
    s = np.sign(v).reshape(-1, 16)
    for a, b in [(m[:, :-1], m[:, 1:]), (m[:-1], m[1:]), (s[:, :-1], s[:, 1:]),
                 (s[:-1], s[1:])]:
        assert abs(np.corrcoef(a.ravel(), b.ravel())[0, 1]) < 0.01


def test_no_bit_repeats_a_nearby_one():
    # Every raw bit (the 25 XORs and 5 class bits of each element) over 4000 beats:
    # no two are equal or complementary, in one beat or up to 6 beats apart.
    beats, lags = 4000, 6
    s = bit_sequence(77, WARMUP_STEPS + beats + lags + 1)
    starts = (WARMUP_STEPS + 1 + np.arange(beats + lags)) * STEP_BITS
    windows = s[starts[:, None] + np.arange(STATE_BITS)]
    raw = np.concatenate([np.bitwise_xor.reduce(windows[:, VALUE_TAPS.reshape(-1, 3)], axis=-1),
                          windows[:, CLASS_TAPS.ravel()]], axis=1)      # (beats + lags, 480)
    seen = {}
    for lag in range(lags + 1):
        cols = np.packbits(raw[lag:lag + beats], axis=0).T
        for i, col in enumerate(cols):
            for key in (col.tobytes(), (~col).tobytes()):
                assert key not in seen, (lag, i, seen.get(key))
            if lag == 0:
                seen[col.tobytes()] = (0, i)
                seen[(~col).tobytes()] = (0, i)


def test_lanes_are_decorrelated():
    # Lane k runs with value_seed + k: already from the first beat, the values of two
    # lanes agree no more than independent ones do.
    lane = [beat_values(1000 + k, 400).view(np.float32) for k in range(4)]
    exponent = [(v.view(np.uint32) >> 23) & 0xFF for v in lane]
    p = np.bincount(exponent[0].ravel(), minlength=256) / exponent[0].size
    chance = (p**2).sum()
    for a, b in [(0, 1), (1, 2), (0, 3)]:
        for first in (slice(0, 4), slice(0, 400)):
            same = (exponent[a][first] == exponent[b][first]).mean()
            sign = (np.sign(lane[a][first]) == np.sign(lane[b][first])).mean()
            n = exponent[a][first].size
            assert abs(same - chance) < 5 * np.sqrt(chance * (1 - chance) / n), (a, b, same)
            assert abs(sign - 0.5) < 5 * np.sqrt(0.25 / n), (a, b, sign)


def test_run_values_cut_beats_into_frames():
    beats = beat_values(5, 6).reshape(3, 32)
    v = run_values(5, 17, 3)
    assert v.shape == (3, 17) and v.dtype == np.float32
    assert np.array_equal(v.view(np.uint32), beats[:, :17])
    # The values follow the run, not the header offset.
    cfg = GeneratorConfig(value_seed=5, elements=17)
    assert generate_frames(cfg, 2) == [
        f[:60] + (17 * k).to_bytes(4, "little") + f[64:]
        for k, f in enumerate(generate_frames(replace(cfg, offset=0), 2))]
    assert generate_frames(replace(cfg, offset=1000), 2)[1][64:] == generate_frames(cfg, 2)[1][64:]
    assert generate_frame(cfg, 2) == generate_frames(cfg, 3)[2]


# ---- reference: frames ----------------------------------------------------------------


def test_frames_follow_the_config():
    cfg = GeneratorConfig(codec=3, param=4, stochastic=True, scale_bits=0x41000000,
                          aux_bits=0x3E000000, seed=99, value_seed=5, offset=2**32 - 20,
                          elements=17, flush_every=3, udp_src_port=40001)
    frames = generate_frames(cfg, 7)
    values = run_values(5, 17, 7)
    for k, f in enumerate(frames):
        h, reason = classify_host_frame(f)
        assert reason is None and len(f) == 64 + 4 * 17
        assert h.ip_id == k and h.src_port == 40001 and h.seed == 99
        assert h.offset == (2**32 - 20 + 17 * k) % 2**32
        assert h.flags == FLAG_STOCHASTIC | (FLAG_FLUSH if k in (2, 5) else 0)
        assert f[64:] == values[k].tobytes()
    assert frame_header(cfg, 2**16 + 1).ip_id == 1
    assert frame_header(replace(cfg, flush_every=1), 0).flags & FLAG_FLUSH


def test_frame_check_values():
    # The frame check values of docs/generator.md.
    frames = generate_frames(GeneratorConfig(), 10)
    assert zlib.crc32(b"".join(frames)) == 0x06BCDC96
    assert [parse(f).ip_checksum for f in frames[:2]] == [0x210D, 0x210C]
    cfg = GeneratorConfig(codec=3, param=4, stochastic=True, seed=7, value_seed=7,
                          offset=2**32 - 100, elements=100, flush_every=2, udp_src_port=1000)
    frames = generate_frames(cfg, 4)
    assert zlib.crc32(b"".join(frames)) == 0x5B901D8A
    assert [parse(f).flags for f in frames] == [2, 6, 2, 6]


@pytest.mark.parametrize("bad", [
    {"elements": 0}, {"elements": MAX_ELEMENTS + 1}, {"codec": 256}, {"seed": -1},
    {"flush_every": 2**16}, {"udp_src_port": 70000}, {"rate_bytes_per_cycle": 256},
    {"template": "x"}, {"stochastic": 2}, {"offset": 2**32},
])
def test_config_rejects_bad_fields(bad):
    name = next(iter(bad))
    rejected(GeneratorConfig, **bad, match=name)


def test_rate_q8_8():
    assert rate_to_q8_8(50) == 0x3200 and rate_to_q8_8(64) == 0x4000
    assert rate_to_q8_8(255.996) == 0xFFFF


# ---- gateware harness -------------------------------------------------------------------

def _set_config(ctx, dut, cfg, n_frames):
    for name, value in config_values(cfg).items():
        ctx.set(getattr(dut, name), value)
    ctx.set(dut.n_frames, n_frames)


async def _wait(ctx, dut, cond, limit=100_000):
    for _ in range(limit):
        if cond():
            return
        await ctx.tick()
    raise TimeoutError("condition not reached")


def _simulate(dut, control, sink):
    simulation_of(dut).run([(control, True), (sink.run, False)])


def _run_configs(runs, *, backpressure, seed, max_elements=363, template=None,
                 signs_only=False, mantissa_bits=None):
    """Runs ``[(config, n_frames)]`` one after the other on one generator; its frames."""
    dut = shared(GradientGenerator, max_elements, template=template, signs_only=signs_only,
                 mantissa_bits=mantissa_bits)
    total = sum(n for _, n in runs)
    sink = FrameSink(dut.o, n_frames=total, backpressure=backpressure, seed=seed)
    sent = []

    async def control(ctx):
        for cfg, n in runs:
            _set_config(ctx, dut, cfg, n)
            ctx.set(dut.start, 1)
            await ctx.tick()
            await _wait(ctx, dut, lambda: ctx.get(dut.busy))
            await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
            sent.append(ctx.get(dut.frames_sent))
            ctx.set(dut.start, 0)
            await ctx.tick()

    _simulate(dut, control, sink)
    assert sent == [n for _, n in runs][:len(sent)]
    return sink.frames


# Every codec id's header, lengths around the beat size, flush, offsets across the
# 2**32 wrap, side-band, and a mix of rates (>= 64: back to back; 50: paced).
_RUNS = [
    (GeneratorConfig(codec=0, elements=1, rate_bytes_per_cycle=255.99), 4),
    (GeneratorConfig(codec=1, elements=15, value_seed=1, offset=2**32 - 7,
                     tuser_src=0x1234, tuser_dst=0xBEEF, rate_bytes_per_cycle=64), 4),
    (GeneratorConfig(codec=2, elements=16, udp_src_port=1, rate_bytes_per_cycle=10.5), 3),
    (GeneratorConfig(codec=3, param=4, stochastic=True, elements=17, seed=0xDEADBEEF,
                     value_seed=0xDEADBEEF, flush_every=2, scale_bits=0x41000000,
                     rate_bytes_per_cycle=100), 4),
    (GeneratorConfig(codec=4, param=8, stochastic=True, elements=33, flush_every=1,
                     aux_bits=0x3A83126F, offset=2**32 - 40, rate_bytes_per_cycle=200), 3),
    (GeneratorConfig(codec=5, elements=363, value_seed=77, scale_bits=0x3C23D70A,
                     aux_bits=0xBC23D70A), 2),
    (GeneratorConfig(codec=6, stochastic=True, elements=31, offset=2**32 - 31 * 2 - 5,
                     flush_every=3, seed=1, rate_bytes_per_cycle=255.99), 5),
]


def test_signs_only_sends_the_reference_signs():
    """``signs_only``: every payload word is the reference value's sign bit, zeros below;
    the headers are the reference's."""
    runs = [(GeneratorConfig(codec=5, elements=37, value_seed=9, flush_every=2), 3),
            (GeneratorConfig(codec=5, elements=363, value_seed=77, offset=2**32 - 5), 2)]
    frames = _run_configs(runs, backpressure=0.3, seed=4, signs_only=True)
    expected = [f for cfg, n in runs for f in generate_frames(cfg, n)]
    assert len(frames) == len(expected)
    for got, want in zip(frames, expected, strict=True):
        assert got.data[:64] == want[:64]
        words = np.frombuffer(want[64:], dtype="<u4") & np.uint32(0x80000000)
        assert got.data[64:] == words.tobytes()
        assert np.any(words) and not np.all(words)


def test_signs_only_checked():
    rejected(GradientGenerator, signs_only=1, match="signs_only")


@pytest.mark.parametrize("bits", [2, 8])
def test_mantissa_bits_sends_the_cut_reference_values(bits):
    """``mantissa_bits``: every payload word is the reference value cut to that many
    mantissa bits, the lowest sticky; the headers are the reference's."""
    runs = [(GeneratorConfig(codec=3, param=8, elements=37, value_seed=bits, flush_every=2), 3),
            (GeneratorConfig(codec=3, param=8, elements=363, value_seed=77), 2)]
    frames = _run_configs(runs, backpressure=0.3, seed=bits, mantissa_bits=bits)
    expected = [f for cfg, n in runs for f in generate_frames(cfg, n)]
    assert len(frames) == len(expected)
    for got, want in zip(frames, expected, strict=True):
        assert got.data[:64] == want[:64]
        words = np.frombuffer(want[64:], dtype="<u4")
        assert got.data[64:] == cut_mantissa(words, bits).tobytes()
        assert got.data[64:] != want[64:]


def test_mantissa_bits_checked():
    for bad in (0, 24, True, 8.0):
        rejected(GradientGenerator, mantissa_bits=bad, match="mantissa_bits")


@pytest.mark.parametrize("backpressure", [0.0, 0.3, 0.7])
def test_gateware_equals_reference(backpressure):
    frames = _run_configs(_RUNS, backpressure=backpressure, seed=int(backpressure * 10))
    expected = [(f, cfg) for cfg, n in _RUNS for f in generate_frames(cfg, n)]
    assert len(frames) == len(expected)
    for k, (got, (want, cfg)) in enumerate(zip(frames, expected, strict=True)):
        assert got.data == want, k
        assert (got.src, got.dst) == (cfg.tuser_src, cfg.tuser_dst)


def test_gateware_with_another_template_and_long_frames():
    template = Header(dst_mac=bytes.fromhex("a0b1c2d3e4f5"), src_mac=bytes.fromhex("0123456789ab"),
                      ip_tos=0xB8, ttl=17, src_ip=bytes([192, 168, 7, 200]),
                      dst_ip=bytes([172, 31, 255, 254]), dst_port=4791, ip_frag=0)
    runs = [(GeneratorConfig(template=template, elements=1000, value_seed=9,
                             udp_src_port=50000 + k, rate_bytes_per_cycle=64), 1)
            for k in range(2)]
    frames = _run_configs(runs, backpressure=0.3, seed=4, max_elements=1000,
                          template=template)
    assert [f.data for f in frames] == [generate_frames(c, n)[0] for c, n in runs]
    assert parse(frames[0].data).dst_port == 4791


def test_reset_mid_run_leaves_no_stale_beat():
    """Only the sequencer and the valid bits take a reset: a reset with a full pipeline
    (the sink stalled) leaves no beat behind, and the next run's frames are the
    reference's (the descriptor and data registers keep stale values nothing reads)."""
    cfg = GeneratorConfig(codec=1, elements=40, value_seed=6, flush_every=2,
                          rate_bytes_per_cycle=64)
    dut = GradientGenerator(363)
    rst = Signal()
    top = Module()
    top.submodules.gen = ResetInserter(rst)(dut)
    sink = FrameSink(dut.o, n_frames=3)

    async def bench(ctx):
        _set_config(ctx, dut, replace(cfg, value_seed=99, elements=17), 0)
        ctx.set(dut.start, 1)
        ctx.set(dut.o.ready, 0)
        for _ in range(GradientGenerator.LATENCY + 10):   # the pipeline fills, holds
            await ctx.tick()
        assert ctx.get(dut.o.valid) and ctx.get(dut.busy)
        ctx.set(dut.start, 0)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(GradientGenerator.LATENCY + 3):   # nothing from before the reset
            _, _, valid, busy = await ctx.tick().sample(dut.o.valid, dut.busy)
            assert not valid and not busy
        _set_config(ctx, dut, cfg, 3)
        ctx.set(dut.start, 1)
        await sink.run(ctx)

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert [f.data for f in sink.frames] == generate_frames(cfg, 3)


# ---- rate --------------------------------------------------------------------------------

def _paced(cfg, n, *, stall=0, backpressure=0.0):
    """``n`` frames of an unlimited run; the sink is not ready for the first ``stall`` cycles."""
    dut = GradientGenerator(max(cfg.elements, 1))
    sink = FrameSink(dut.o, n_frames=n, backpressure=backpressure, seed=3)

    async def control(ctx):
        _set_config(ctx, dut, cfg, 0)
        ctx.set(dut.start, 1)

    async def late_sink(ctx):
        ctx.set(dut.o.ready, 0)
        for _ in range(stall):
            await ctx.tick()
        await sink.run(ctx)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control, background=True)
    sim.add_testbench(late_sink)
    sim.run()
    assert [f.data for f in sink.frames] == generate_frames(cfg, n)
    return sink


@pytest.mark.parametrize("rate, elements", [(50.0, 363), (25.0, 363), (50.0, 61), (12.5, 1)])
def test_rate_is_held(rate, elements):
    cfg = GeneratorConfig(elements=elements, rate_bytes_per_cycle=rate, value_seed=2)
    n = 31
    sink = _paced(cfg, n)
    starts = [f.first_cycle for f in sink.frames]
    measured = (n - 1) * cfg.frame_length / (starts[-1] - starts[0])
    assert abs(measured / rate - 1) < 0.02, measured


@pytest.mark.parametrize("rate", [64.0, 255.99])
def test_full_rate_is_back_to_back(rate):
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=rate)
    sink = _paced(cfg, 30)
    assert sink.beats == 30 * 24
    assert sink.max_streak == sink.beats
    assert sink.frames[-1].last_cycle - sink.frames[0].first_cycle + 1 == sink.beats


def test_burst_after_a_stall_is_bounded():
    # After 600 stalled cycles the credit is capped at one frame (1516 B). Back to
    # back, a frame of 24 beats earns 24·50 = 1200 B and costs 1516 B, so the
    # credit falls by 316 B a frame: the pending frame and five more go back to
    # back (1516 → 1200 → 884 → 568 → 252 → −64), then frames are paced again.
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=50.0)
    sink = _paced(cfg, 12, stall=600)
    starts = [f.first_cycle for f in sink.frames]   # counted from the release
    gaps = list(np.diff(starts))
    assert gaps[:5] == [24] * 5 and gaps[5] == 26, starts
    assert all(g in (30, 31) for g in gaps[6:]), starts
    # Over any window the bytes sent stay within rate·T + 2 frames.
    for a in range(len(starts)):
        for b in range(a + 1, len(starts)):
            sent = (b - a) * cfg.frame_length
            assert sent <= 50 * (starts[b] - starts[a]) + 2 * cfg.frame_length


def test_rate_under_backpressure_is_caught_up():
    # 20 % backpressure leaves 51 B/cycle of bus: the bucket makes up the stalls.
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=40.0)
    sink = _paced(cfg, 31, backpressure=0.2)
    starts = [f.first_cycle for f in sink.frames]
    measured = 30 * cfg.frame_length / (starts[-1] - starts[0])
    assert abs(measured / 40 - 1) < 0.03, measured


# ---- start / stop ---------------------------------------------------------------------------

def test_n_frames_stop_and_restart():
    cfg = GeneratorConfig(elements=20, flush_every=2, rate_bytes_per_cycle=64, offset=5)
    dut = GradientGenerator(363)
    sink = FrameSink(dut.o, n_frames=None, quiet=120, backpressure=0.3, seed=8)
    log = {}

    async def control(ctx):
        _set_config(ctx, dut, cfg, 3)
        ctx.set(dut.start, 1)
        await ctx.tick()
        await _wait(ctx, dut, lambda: ctx.get(dut.busy))
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["first"] = ctx.get(dut.frames_sent)
        idle = []
        for _ in range(40):      # start still high: no new run
            await ctx.tick()
            idle.append(ctx.get(dut.busy) or ctx.get(dut.o.valid))
        log["idle"] = any(idle)
        ctx.set(dut.start, 0)
        await ctx.tick()
        ctx.set(dut.start, 1)    # a new run: counter, offset and flush restart
        await ctx.tick()
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["second"] = ctx.get(dut.frames_sent)

    _simulate(dut, control, sink)
    assert log == {"first": 3, "idle": False, "second": 3}
    assert [f.data for f in sink.frames] == generate_frames(cfg, 3) * 2


@pytest.mark.parametrize("backpressure", [0.0, 0.5])
def test_start_dropping_finishes_the_frame(backpressure):
    cfg = GeneratorConfig(elements=100, rate_bytes_per_cycle=64, value_seed=3)
    dut = GradientGenerator(363)
    sink = FrameSink(dut.o, n_frames=None, quiet=100, backpressure=backpressure, seed=5)
    log = {}

    async def control(ctx):
        _set_config(ctx, dut, cfg, 0)
        ctx.set(dut.start, 1)
        for _ in range(GradientGenerator.LATENCY + 26):
            await ctx.tick()
        ctx.set(dut.start, 0)    # mid-frame (8 beats per frame)
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["sent"] = ctx.get(dut.frames_sent)

    _simulate(dut, control, sink)
    n = len(sink.frames)
    assert n >= 2 and log["sent"] == n
    assert [f.data for f in sink.frames] == generate_frames(cfg, n)


@pytest.mark.parametrize("elements", [0, 364])
def test_no_run_with_elements_out_of_range(elements):
    dut = GradientGenerator(363)
    seen = []

    async def control(ctx):
        ctx.set(dut.elements, elements)
        ctx.set(dut.start, 1)
        ctx.set(dut.o.ready, 1)
        for _ in range(30):
            await ctx.tick()
            seen.append(ctx.get(dut.busy) or ctx.get(dut.o.valid))

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control)
    sim.run()
    assert not any(seen)


def test_latency():
    dut = GradientGenerator(363)
    cycles = []

    async def control(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.start, 1)
        for t in range(1, 2 * GradientGenerator.LATENCY):
            await ctx.tick()
            if ctx.get(dut.o.valid):
                cycles.append(t)
                return

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control)
    sim.run()
    assert cycles == [GradientGenerator.LATENCY]


# ---- construction ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    ({"max_elements": 0}, "max_elements"), ({"max_elements": MAX_ELEMENTS + 1}, "max_elements"),
    ({"max_elements": 1.5}, "max_elements"), ({"template": 3}, "template"),
    ({"template": Header(src_ip=b"\1\2\3")}, "template"),
    ({"template": Header(ttl=256)}, "template"),
])
def test_constructor_rejects(kwargs, name):
    rejected(GradientGenerator, **kwargs, match=name)


def test_converts_to_verilog_at_the_largest_size():
    assert "module" in verilog.convert(GradientGenerator(MAX_ELEMENTS), name="gradient_gen")


def test_every_codec_header_is_a_valid_host_frame():
    # The generator's frames are SqueezeNIC host frames for every built-in codec.
    for info in CODECS.values():
        param = 0 if info.param_range is None else info.param_range[0]
        validate_param(info.id, param)
        f = generate_frames(GeneratorConfig(codec=info.id, param=param, elements=5), 1)[0]
        assert classify_host_frame(f)[1] is None, info.name
