"""Tests of :mod:`squeezenic_hw.build.params`: the build parameters resolved once."""

import pytest

import squeezenic_hw.build.params as params_module
from squeezenic_hw.build.codec_choice import gen_lanes_trusted, loopback_lanes
from squeezenic_hw.build.params import PluginParams, check_param
from squeezenic_hw.spec.generator import narrow_lane_settings
from squeezenic_hw.spec.scaling import lanes_for


@pytest.mark.parametrize("kwargs", [
    dict(), dict(host_bw=400), dict(host_bw=6400, loopback=True),
    dict(host_bw=800, gen_codecs=["fixed:8", "sign"], loopback=True),
    dict(host_bw=200, gen_codecs=["sign", "threshold"], loopback=True),
    dict(host_bw=300, gen_codecs=5, loopback=True),
])
def test_resolved_attributes_are_what_the_rules_give(kwargs):
    p = PluginParams(**kwargs)
    n = lanes_for(p.host_bw)
    assert p.gen_lanes == (0 if n == 1 else n)
    assert p.rx_lanes == (loopback_lanes(p.host_bw, p.gen_codecs)
                          if p.loopback and p.gen_lanes else 0)
    assert p.gen_held == (narrow_lane_settings(p.gen_codecs) if p.gen_lanes else None)
    assert p.gen_trusted == gen_lanes_trusted(p.gen_codecs)
    assert p.gen_codec_mask == sum(1 << c for c in p.gen_codec_ids)


def test_generator_codecs_resolved_to_ids_and_settings():
    p = PluginParams(host_bw=800, gen_codecs=[" sign", "fixed:8", "sign", 5])
    assert p.gen_codecs == ("sign", "fixed:8", 5)
    assert p.gen_codec_ids == (3, 5) and p.gen_held is None and p.gen_trusted
    assert p.gen_codec_names == ("fixed", "sign")
    assert p.codec_names == ("raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural")
    assert PluginParams(codecs=["sign", 0, "raw"]).codec_names == ("raw", "sign")
    narrow = PluginParams(host_bw=400)
    assert narrow.gen_held == {"codec": 3, "param": 8, "deterministic": True,
                               "pow2_scale": True}
    assert not PluginParams(host_bw=200, gen_codecs=["threshold"]).gen_trusted


def test_host_bandwidth_resolved_once(monkeypatch):
    calls = []

    def counting(host_bw):
        calls.append(host_bw)
        return lanes_for(host_bw)

    monkeypatch.setattr(params_module, "lanes_for", counting)
    p = PluginParams(host_bw=6400, loopback=True)
    assert (p.gen_lanes, p.rx_lanes, p.gen_lanes, p.rx_lanes) == (64, 32, 64, 32)
    assert calls == [6400]


def test_resolved_attributes_are_no_parameters():
    """They stay out of the constructor, the repr (a compiled model's cache key), equality
    and the manifest's ``params``."""
    p = PluginParams(host_bw=400, loopback=True)
    with pytest.raises(TypeError):
        PluginParams(gen_lanes=4)
    assert not any(name in repr(p) for name in ("gen_held", "gen_lanes", "codec_names"))
    assert p == PluginParams(host_bw=400, loopback=True)
    assert hash(p) == hash(PluginParams(host_bw=400, loopback=True))
    assert list(p.as_dict()) == ["num_intf", "host_bw", "codecs", "gen_codecs", "loopback",
                                 "mtu", "port", "max_host_elements", "idle_timeout",
                                 "src_port_base", "reduce", "gen_lanes", "rx_lanes"]
    assert p.as_dict()["gen_codecs"] == ["fixed:8"] and p.as_dict()["rx_lanes"] == 4


@pytest.mark.parametrize("name,good,bad", [
    ("num_intf", 2, 3), ("mtu", 68, 67), ("port", 1, 0), ("max_host_elements", 2384, 2385),
    ("idle_timeout", 0, -1),
])
def test_check_param_is_the_constructors_check(name, good, bad):
    check_param(name, good)
    with pytest.raises(ValueError, match=name) as shared:
        check_param(name, bad)
    with pytest.raises(ValueError, match=name) as built:
        PluginParams(**{name: bad})
    assert str(shared.value) == str(built.value)
    with pytest.raises(ValueError, match=name):
        check_param(name, True)


def test_reduce_builds_the_integer_codecs_named():
    p = PluginParams(reduce=["sign", "fixed:8"])
    assert (p.reduce_codecs, p.reduce_params) == (("fixed", "sign"), (8,))
    assert PluginParams(reduce="qsgd").reduce_params == tuple(range(2, 17))
    assert PluginParams().reduce_codecs == () and PluginParams().as_dict()["reduce"] == []
    with pytest.raises(ValueError, match="^reduce: .*not raw"):
        PluginParams(reduce=["raw"])
    with pytest.raises(ValueError, match="^reduce: "):
        PluginParams(reduce=["fixed:40"])
