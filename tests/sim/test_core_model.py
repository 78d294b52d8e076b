# amaranth: UnusedElaboratable=no
"""The OpenNIC plugin's core on whole frames and a register script (``sim/core_model.py``):
its compiled model (Verilator, ``core_harness.cpp``) and Amaranth's simulation against the
numpy reference and each other."""

import numpy as np
import pytest

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.reference.checker import CHECKER_KEYS
from squeezenic_hw.regmap.plugin import generator_settings, plugin_register_map
from squeezenic_hw.sim import core_model as cm
from squeezenic_hw.sim.compiled import compiled_available
from squeezenic_hw.sim.core_model import (
    GEN_LANE_MODULE,
    LoopedCore,
    RegisterStep,
    core_streams,
    ports_header,
    simulate_core,
    simulate_core_compiled,
)
from squeezenic_hw.spec.generator import GeneratorConfig

from support.lane_scenarios import host_stream

LOOPED = PluginParams(codecs=["sign"], gen_codecs=["sign"], host_bw=200, loopback=True)
GENERATORS = GeneratorConfig(codec=5, elements=64, flush_every=2, value_seed=11, seed=3,
                             rate_bytes_per_cycle=32.0)
N_FRAMES = 3


def _checker_registers(rm, lane):
    """``{checker key: (lo name, hi name or None)}`` of generator lane ``lane``."""
    out = {}
    for name in CHECKER_KEYS:
        lo = f"lane{lane}_chk_{name}_lo"
        out[name] = (lo, f"lane{lane}_chk_{name}_hi") if lo in rm else (
            f"lane{lane}_chk_{name}", None)
    return out


def _generators_and_host_traffic():
    """Start both generators over AXI-Lite and send host frames meanwhile; once every
    generator frame is sent and the host frames are in, close, wait for every checker and
    the host frames back at C2H, and read every checker register."""
    rm = plugin_register_map(LOOPED)
    expected = array_reference(2, GENERATORS, N_FRAMES, codecs=["sign"], port=LOOPED.port,
                               src_port_base=LOOPED.src_port_base)
    host = host_stream(np.random.default_rng(2), "sign", n_total=300, max_k=90,
                       flush_rate=0.0)
    back = lr.rx(lr.tx(host, codecs=["sign"])[0], codecs=["sign"])[0]
    script = [cm.write(rm[name].offset, value)
              for name, value in generator_settings(GENERATORS, N_FRAMES).items()]
    script.append(cm.write(rm["gen_start"].offset, 1))
    script += [cm.poll(rm[f"lane{k}_frames_sent"].offset, N_FRAMES) for k in range(2)]
    script += [cm.inputs_done(), cm.write(rm["gen_close"].offset, 1),
               cm.write(rm["tx_close"].offset, 1)]
    script += [cm.poll(rm[f"lane{k}_chk_frames_lo"].offset, expected[k]["checker"]["frames"])
               for k in range(2)]
    script += [cm.output_frames(0, len(back)), cm.wait(50)]
    for k in range(2):
        for lo, hi in _checker_registers(rm, k).values():
            script += [cm.read(rm[lo].offset)] + ([cm.read(rm[hi].offset)] if hi else [])
        script.append(cm.read(rm[f"lane{k}_tx_wire_frames"].offset))
    return rm, script, {"h2c0": host}, expected, back


def _check_against_reference(run, rm, expected, back):
    reads = run.reads()
    assert all(resp == 0 for *_, resp in run.responses), run.responses
    for k in range(2):
        got = {}
        for name, (lo, hi) in _checker_registers(rm, k).items():
            got[name] = reads[rm[lo].offset] | (reads[rm[hi].offset] << 32 if hi else 0)
        assert got == expected[k]["checker"], k
        assert got["elements"] == N_FRAMES * 64
        assert reads[rm[f"lane{k}_tx_wire_frames"].offset] == expected[k]["tx"]["wire_frames"]
    assert [f.data for f in run.outputs["c2h0"]] == back
    assert all(f.dst == 1 for f in run.outputs["c2h0"])      # PCIe function 0


@pytest.mark.skipif(not compiled_available(),
                    reason="this machine has no Verilator or C++ compiler")
def test_generators_over_axil_with_host_traffic_looped_back(cache):
    """host_bw 200 with loopback, the wire looped: both backends against the reference
    and each other, under idle cycles and backpressure."""
    rm, script, inputs, expected, back = _generators_and_host_traffic()
    kw = dict(looped=True, idle=0.2, backpressure=0.2, seed=5)
    compiled = simulate_core_compiled(LOOPED, inputs, script, cache_dir=cache, **kw)
    _check_against_reference(compiled, rm, expected, back)
    assert compiled.extra["backend"] == "compiled" and compiled.extra["sim_cycles_per_s"] > 0
    amaranth = simulate_core(LOOPED, inputs, script, **kw)
    _check_against_reference(amaranth, rm, expected, back)
    assert amaranth.reads() == compiled.reads()
    assert [f.data for f in amaranth.outputs["c2h0"]] == \
        [f.data for f in compiled.outputs["c2h0"]]
    # the generator lanes are one library, instantiated twice (the model may come from
    # the cache, built by another test: its Verilog says so either way)
    top = (cache / compiled.extra["build"]["key"] / "top.v").read_text()
    assert top.count(f"  {GEN_LANE_MODULE} ") == 2 and f"module {GEN_LANE_MODULE}" not in top
    # the model is found again by its parameters, without elaborating the core
    again = simulate_core_compiled(LOOPED, inputs, script[:1], cache_dir=cache, **kw)
    assert again.extra["build"]["cached"] and again.extra["build"]["build_s"] < 1
    assert again.responses[0][2:] == (script[0].a, script[0].b, 0)
    # a poll that never reads its value ends in a TimeoutError naming the step
    never = [cm.poll(rm["lane0_frames_sent"].offset, 7, every=10)]
    with pytest.raises(TimeoutError, match="register step 0 of 1"):
        simulate_core_compiled(LOOPED, {}, never, looped=True, timeout=3000, cache_dir=cache)


def test_streams_and_port_header():
    """The streams of a run and the bench's names for them: interface 0's wire is inside
    a looped core; the other streams are ports."""
    two = PluginParams(num_intf=2, codecs=["raw"])
    assert core_streams(two) == (["h2c0", "h2c1", "rx0", "rx1"], ["c2h0", "c2h1", "tx0", "tx1"])
    assert core_streams(two, looped=True) == (["h2c0", "h2c1", "rx1"], ["c2h0", "c2h1", "tx1"])
    header = ports_header(two, looped=True)
    assert "#define N_IN 3" in header and "#define N_OUT 3" in header
    assert "top.rx1___05Fvalid = valid" in header and "top.tx1___05Fready = ready" in header
    assert "top.h2c___05F1___05Fpayload[j]" in header and "rx___05F0" not in header
    assert "#define AXIL(member) axil___05F##member" in header
    plain = ports_header(two)
    assert "#define N_IN 4" in plain and "case 3: return top.rx___05F1___05Fready;" in plain
    # the looped core's ports are the names the header uses
    looped = LoopedCore(two)
    names = {"__".join(map(str, path)) for path, _, _ in looped.signature.flatten(looped)}
    assert {"rx1__valid", "tx1__payload", "h2c__1__ready", "axil__awvalid"} <= names


@pytest.mark.parametrize("call,message", [
    (lambda: simulate_core("params", {}), "params must be a PluginParams"),
    (lambda: simulate_core(LOOPED, {"rx0": []}, looped=True), "no input stream 'rx0'"),
    (lambda: simulate_core(LOOPED, {}, idle=1.0), "idle must be in"),
    (lambda: simulate_core(LOOPED, {}, [("write", 0, 1)]), "is not a RegisterStep"),
    (lambda: RegisterStep("jump"), "kind must be one of"),
    (lambda: cm.write(-4, 1), "a of a write step"),
    (lambda: cm.write(0, 2**32), r"b of a write step must be an int in 0..2\*\*32-1"),
    (lambda: cm.wait(True), "a of a wait step"),
    (lambda: simulate_core(LOOPED, {}, [cm.output_frames(1, 1)], looped=True),
     r"output_frames\(1, ...\): this run has 1 outputs \(c2h0\)"),
])
def test_bad_runs_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()
