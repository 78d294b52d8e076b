"""The numpy reference codecs against the spec and against independent references."""

import numpy as np
import pytest

from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, gradient_like, random_f32_bits
from squeezenic_hw.spec.codecs import CODECS, PRESETS, code_width, codec_info, preset_params

RNG = np.random.default_rng(20261121)


def _mixed_bits(n=200_000):
    return np.concatenate([EDGE_F32_BITS, random_f32_bits(RNG, n),
                           ref.to_bits(gradient_like(RNG, n))])


# ---- registry -----------------------------------------------------------------

def test_registry_ids_and_widths_follow_the_spec():
    assert [(c.name, c.id) for c in CODECS.values()] == [
        ("raw", 0), ("fp16", 1), ("bf16", 2), ("fixed", 3), ("qsgd", 4), ("sign", 5),
        ("natural", 6)]
    assert [code_width(n, 8) for n in CODECS] == [32, 16, 16, 8, 8, 1, 9]
    assert codec_info(3).name == "fixed"
    assert codec_info("sign").ratio() == 32


@pytest.mark.parametrize("codec,param", [("fixed", 1), ("fixed", 17), ("qsgd", 0),
                                         ("qsgd", None), ("raw", 3), ("fixed", 2.5)])
def test_bad_params_are_rejected_naming_the_parameter(codec, param):
    with pytest.raises(ValueError, match="param"):
        ref.encode(np.zeros(3, np.float32), codec, param=param)


def test_unknown_codec_is_rejected():
    with pytest.raises(ValueError, match="codec"):
        ref.encode(np.zeros(3, np.float32), "zip")
    with pytest.raises(ValueError, match="codec"):
        codec_info(9)


# ---- bit codecs -----------------------------------------------------------------

def test_raw_round_trips_every_bit_pattern():
    bits = _mixed_bits()
    codes = ref.encode(ref.from_bits(bits), "raw")
    assert np.array_equal(codes, bits)
    assert np.array_equal(ref.to_bits(ref.decode(codes, "raw")), bits)


def test_fp16_equals_numpy_astype():
    bits = np.concatenate([_mixed_bits(2_000_000),
                           RNG.integers(0x32000000, 0x48000000, 2_000_000, dtype=np.uint32)])
    bits = np.concatenate([bits, bits ^ np.uint32(0x80000000)])
    x = ref.from_bits(bits)
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(ref.encode(x, "fp16"), expected)
    codes = np.arange(1 << 16, dtype=np.uint32)
    widened = codes.astype(np.uint16).view(np.float16).astype(np.float32)
    assert np.array_equal(ref.to_bits(ref.decode(codes, "fp16")), ref.to_bits(widened))


def test_bf16_equals_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")  # a test dependency: always installed
    bits = _mixed_bits(2_000_000)
    bits = np.concatenate([bits, bits ^ np.uint32(0x80000000)])
    x = ref.from_bits(bits)
    with np.errstate(all="ignore"):
        expected = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert np.array_equal(ref.encode(x, "bf16"), expected)
    codes = np.arange(1 << 16, dtype=np.uint32)
    widened = codes.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(ref.to_bits(ref.decode(codes, "bf16")), ref.to_bits(widened))


def test_sign_codes_and_decodes_to_scale_and_aux_bits():
    bits = _mixed_bits()
    codes = ref.encode(ref.from_bits(bits), "sign")
    assert np.array_equal(codes, bits >> np.uint32(31))
    assert ref.encode(np.array([-0.0], np.float32), "sign")[0] == 1
    scale = ref.from_bits([0x7FA00001])[0]  # a NaN payload survives the bit copy
    aux = np.float32(-0.0)
    out = ref.to_bits(ref.decode(codes, "sign", scale=scale, aux=aux))
    assert np.array_equal(out, np.where(codes == 1, 0x80000000, 0x7FA00001))


def test_natural_deterministic_rounds_to_nearest_power_of_two_by_mantissa():
    x = gradient_like(RNG, 100_000)
    x = x[np.isfinite(x) & (np.abs(x) >= np.float32(2.0**-126))]
    dec = ref.decode(ref.encode(x, "natural"), "natural")
    mant, exp = np.frexp(np.abs(x).astype(np.float64))  # |x| = mant·2^exp, mant in [0.5, 1)
    expected = np.where(mant >= 0.75, 2.0 ** exp, 2.0 ** (exp - 1)) * np.where(
        np.signbit(x), -1, 1)
    assert np.array_equal(dec.astype(np.float64), expected)


def test_natural_specials():
    bits = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001,
                     0x7F7FFFFF, 0x00400000, 0x003FFFFF], np.uint32)
    dec = ref.to_bits(ref.decode(ref.encode(ref.from_bits(bits), "natural"), "natural"))
    assert [hex(v) for v in dec] == [
        "0x0", "0x80000000", "0x7f800000", "0xff800000", "0x7f800000",
        "0x7f800000", "0x800000", "0x0"]


# ---- fixed and qsgd ---------------------------------------------------------------

@pytest.mark.parametrize("q", range(2, 17))
def test_fixed_nearest_equals_numpy_rint_and_clip(q):
    x = np.concatenate([gradient_like(RNG, 50_000), ref.from_bits(EDGE_F32_BITS)])
    x = x[~np.isnan(x)]
    scale = np.float32((2 ** (q - 1) - 1) / 0.5)
    aux = np.float32(1 / scale)
    codes = ref.encode(x, "fixed", param=q, scale=scale, aux=aux)
    m = 2 ** (q - 1) - 1
    with np.errstate(all="ignore"):
        expected = np.clip(np.rint(x * scale), -m, m).astype(np.int64)
    assert np.array_equal(codes, (expected & ((1 << q) - 1)).astype(np.uint32))
    dec = ref.decode(codes, "fixed", param=q, aux=aux)
    assert np.array_equal(ref.to_bits(dec), ref.to_bits(expected.astype(np.float32) * aux))


def test_fixed_and_qsgd_edge_rules():
    nan, inf = np.float32(np.nan), np.float32(np.inf)
    x = np.array([nan, -nan, inf, -inf, 0.0, -0.0, 2.5, 3.5, -2.5, 1e-45], np.float32)
    assert list(ref.encode(x, "fixed", param=4, scale=1.0)) == [0, 0, 7, 9, 0, 0, 2, 4, 14, 0]
    assert list(ref.encode(x, "qsgd", param=4, scale=1.0)) == [0, 0, 7, 15, 0, 0, 2, 4, 10, 0]
    # a scale that overflows the product saturates; a NaN or negative scale gives 0
    assert list(ref.encode(np.float32([1e30]), "fixed", param=8, scale=1e30)) == [127]
    assert list(ref.encode(np.float32([1.0, -1.0]), "fixed", param=8, scale=-3.0)) == [0, 0]
    assert list(ref.encode(np.float32([1.0]), "qsgd", param=8, scale=nan)) == [0]
    assert list(ref.encode(np.float32([0.0]), "fixed", param=8, scale=inf)) == [0]
    # decode: the most negative code, 0·inf, NaN aux (canonical NaN), sign of zero
    assert ref.decode([8], "fixed", param=4, aux=1.0)[0] == -8
    assert ref.to_bits(ref.decode([0], "fixed", param=4, aux=inf))[0] == 0x7FC00000
    assert ref.to_bits(ref.decode([1], "fixed", param=4, aux=-nan))[0] == 0x7FC00000
    assert ref.to_bits(ref.decode([0], "fixed", param=4, aux=-2.0))[0] == 0x80000000
    assert ref.to_bits(ref.decode([9], "qsgd", param=4, aux=inf))[0] == 0xFF800000
    assert ref.to_bits(ref.decode([8], "qsgd", param=4, aux=inf))[0] == 0x7FC00000
    assert ref.to_bits(ref.decode([8], "qsgd", param=4, aux=2.0))[0] == 0x80000000


def test_fixed_and_qsgd_subnormal_products_round_like_numpy():
    x = ref.from_bits(RNG.integers(0x00000001, 0x01000000, 100_000, dtype=np.uint32))
    scale = np.float32(0.75)
    y = np.abs(x) * scale  # subnormal results, rounded by the FPU
    codes = ref.encode(x, "qsgd", param=16, scale=scale, aux=1.0)
    assert np.array_equal(codes, np.rint(y).astype(np.uint32))
    # a product that overflows to inf saturates
    assert ref.encode(np.float32([3e38]), "qsgd", param=16, scale=1.5)[0] == 2**15 - 1


@pytest.mark.parametrize("codec,param", [("fixed", 3), ("qsgd", 2), ("qsgd", 5),
                                         ("natural", 0)])
def test_stochastic_rounding_is_unbiased_and_between_neighbours(codec, param):
    x = np.concatenate([gradient_like(RNG, 64) * np.float32(300),
                        np.float32([0.1, -0.37, 1.5, -2.999, 1e-40, 0.0])])
    x = x[np.abs(x) < 1.4]
    # scale maps max|x| inside the top level: saturation is biased by design
    top = 2 ** (max(param, 2) - 1) - 1
    scale = np.float32(top / 1.4 * 0.97)
    aux = np.float32(1 / scale)
    seeds = 4000
    dec = np.stack([ref.decode(ref.encode(x, codec, param=param, scale=scale, aux=aux,
                                          seed=s, stochastic=True),
                               codec, param=param, scale=scale, aux=aux)
                    for s in range(seeds)]).astype(np.float64)
    det_lo = ref.decode(ref.encode(x, codec, param=param, scale=scale, aux=aux),
                        codec, param=param, scale=scale, aux=aux)
    # every draw is one of the two neighbouring levels
    for k in range(x.size):
        values = np.unique(dec[:, k])
        assert values.size <= 2, (x[k], values)
        if values.size == 2:
            lo, hi = values
            assert lo <= x[k] <= hi and (lo == det_lo[k] or hi == det_lo[k])
    # unbiased: the mean over seeds is within 5 standard errors of x
    mean = dec.mean(axis=0)
    se = dec.std(axis=0) / np.sqrt(seeds) + 1e-30
    assert np.all(np.abs(mean - x) <= 5 * se + 1e-7 * np.abs(x)), np.max(np.abs(mean - x) / se)
    # the same seed gives the same codes
    a = ref.encode(x, codec, param=param, scale=scale, seed=99, stochastic=True)
    b = ref.encode(x, codec, param=param, scale=scale, seed=99, stochastic=True)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("codec,param", [("fixed", 4), ("qsgd", 2), ("natural", 0)])
def test_stochastic_codes_do_not_depend_on_framing(codec, param):
    x = gradient_like(RNG, 5000) * np.float32(500)
    kw = dict(param=param, scale=np.float32(3.0), seed=0xDEADBEEF, stochastic=True)
    whole = ref.encode(x, codec, offset=1000, **kw)
    cuts = np.sort(RNG.choice(np.arange(1, x.size), size=40, replace=False))
    parts = [ref.encode(p, codec, offset=1000 + start, **kw)
             for p, start in zip(np.split(x, cuts), np.concatenate([[0], cuts]), strict=True)]
    assert np.array_equal(np.concatenate(parts), whole)
    # and offsets wrap modulo 2^32 like the hardware's 32-bit adder
    wrapped = ref.encode(x[:10], codec, offset=2**32 - 3, **kw)
    assert np.array_equal(wrapped[3:], ref.encode(x[3:10], codec, offset=0, **kw))


# ---- presets --------------------------------------------------------------------

def test_presets_fill_scale_and_aux_from_the_tensor():
    g = np.float32([0.5, -2.0, 1.0, np.nan, -1.0])
    t = preset_params("terngrad", g)
    assert (t["codec"], t["param"], t["stochastic"]) == ("qsgd", 2, True)
    assert t["scale"] == np.float32(0.5) and t["aux"] == np.float32(2.0)
    o = preset_params("onebit", g)
    assert o["scale"] == np.float32(0.75) and o["aux"] == np.float32(-1.5)
    s = preset_params("signsgd", g, scale=0.01)
    assert s["aux"] == np.float32(-0.01)
    i = preset_params("int8", g)
    assert (i["codec"], i["param"]) == ("fixed", 8)
    assert i["scale"] == np.float32(127) / np.float32(2)
    z = preset_params("terngrad", np.zeros(4, np.float32))
    assert z["scale"] == 0 and z["aux"] == 0
    assert set(PRESETS) == {"terngrad", "signsgd", "onebit", "int8"}
    with pytest.raises(ValueError, match="preset"):
        preset_params("dgc", g)


def test_terngrad_decodes_to_ternary_multiples_of_max():
    g = gradient_like(RNG, 10_000)
    p = preset_params("terngrad", g)
    codes = ref.encode(g, p["codec"], param=2, scale=p["scale"], seed=1, stochastic=True)
    dec = ref.decode(codes, "qsgd", param=2, aux=p["aux"])
    assert set(np.unique(np.abs(dec))) <= {np.float32(0), p["aux"]}


# ---- packing ----------------------------------------------------------------------

def test_pack_small_examples_by_hand():
    assert list(ref.pack([1, 0, 1], 1)) == [0b101]
    assert list(ref.pack([0x1FF, 0x001], 9)) == [0xFF, 0x03, 0x00]
    assert list(ref.pack([0x3, 0x1, 0x2], 2)) == [0b100111]
    assert list(ref.pack([0xABCD], 16)) == [0xCD, 0xAB]


@pytest.mark.parametrize("bits", range(1, 33))
def test_pack_unpack_round_trip_every_width_and_length(bits):
    for n in list(range(1, 40)) + [363, 1000]:
        codes = RNG.integers(0, 2**bits, n, dtype=np.uint64).astype(np.uint32)
        payload = ref.pack(codes, bits)
        assert payload.size == (n * bits + 7) // 8
        if (n * bits) % 8:  # padding bits of the last byte are zero
            assert payload[-1] >> ((n * bits) % 8) == 0
        assert np.array_equal(ref.unpack(payload, bits, n), codes)
        assert np.array_equal(ref.unpack(payload.tobytes(), bits, n), codes)


def test_unpack_rejects_short_payloads():
    with pytest.raises(ValueError, match="payload"):
        ref.unpack(b"\x00", 9, 1)


def test_encode_10m_elements_quickly():
    import time
    x = gradient_like(RNG, 10_000_000)
    worst = 0.0
    for name, param, stochastic in [("raw", 0, 0), ("fp16", 0, 0), ("bf16", 0, 0),
                                    ("fixed", 8, 1), ("qsgd", 4, 1), ("sign", 0, 0),
                                    ("natural", 0, 1)]:
        t = time.process_time()
        ref.encode(x, name, param=param, scale=100.0, seed=3, stochastic=stochastic)
        worst = max(worst, time.process_time() - t)
    # CPU time, not wall time, so other jobs on the machine do not count: well under a
    # second on an idle core; the bound leaves room for a slower CI box
    assert worst < 2.5, worst
