"""What a narrow generator lane holds fixed: spec.generator.lane_run_config."""

from squeezenic_hw.spec.generator import (
    GeneratorConfig,
    lane_run_config,
    narrow_lane_settings,
    pow2_scale_bits,
)


def test_pow2_scale_bits():
    assert pow2_scale_bits(0x406CCCCD) == 0x40000000          # 3.7 → 2
    assert pow2_scale_bits(0xC06CCCCD) == 0xC0000000          # -3.7 → -2
    assert pow2_scale_bits(0x00400000) == 0                   # subnormal → +0
    assert pow2_scale_bits(0x7F800000) == 0x7F800000          # inf stays
    assert pow2_scale_bits(0x7FC00001) == 0x7FC00001          # NaN stays
    assert pow2_scale_bits(0x3F800000) == 0x3F800000


def test_lane_run_config():
    cfg = GeneratorConfig(codec=1, param=4, stochastic=True, scale_bits=0x406CCCCD)
    fixed = lane_run_config(cfg, ["fixed:4"])
    assert (fixed.codec, fixed.param, fixed.stochastic, fixed.scale_bits) == (
        3, 4, False, 0x40000000)
    sign = lane_run_config(cfg, "sign")
    assert (sign.codec, sign.param, sign.stochastic, sign.scale_bits) == (
        5, 4, True, 0x406CCCCD)
    for other in (["fixed:8", "sign"], ["fixed:16"], ["fixed"], ["fp16"], None):
        assert lane_run_config(cfg, other) is cfg
        assert narrow_lane_settings(other) is None
