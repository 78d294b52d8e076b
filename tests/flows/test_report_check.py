# amaranth: UnusedElaboratable=no
"""The budget gate (``squeezenic-hw report --check``): what it synthesises, and that a
design over budget is named and fails it (a tiny design through the real Yosys), while
one within every budget passes."""

import json

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.cli import main
from squeezenic_hw.flows import timing
from squeezenic_hw.flows.report import blocks as report_blocks
from squeezenic_hw.flows.report import check as gate
from squeezenic_hw.flows.report.blocks import Block


class _Deep(wiring.Component):
    """``depth`` 8-bit additions in series between registers: each a LUT level and a carry
    cell (at least 0.70 ns), which no LUT mapping can pack into fewer levels."""
    a: In(8 * 12)
    o: Out(8)

    def __init__(self, depth):
        self.depth = depth
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        regs = Signal(8 * 12, reset_less=True)
        m.d.sync += regs.eq(self.a)
        value = regs[:8]
        for k in range(self.depth):
            # an XOR between the additions: Yosys cannot sum them as one tree
            value = (value + regs.word_select(1 + k % 11, 8))[:8] ^ regs.word_select(k % 12, 8)
        o = Signal(8, reset_less=True)
        m.d.sync += o.eq(value)
        m.d.comb += self.o.eq(o)
        return m


class _DeepBlock(Block):
    """A Block of the tiny designs above (kind ``deep``, parameter ``depth``)."""

    def make(self):
        return _Deep(self.args["depth"])

    @property
    def top(self):
        return "deep"

    @property
    def label(self):
        return f"deep({self.args['depth']})"


def _deep(depth):
    return gate.GateBlock(_DeepBlock.of("deep", depth=depth), "plugin")


def test_gate_synthesises_the_sweep_the_host_lanes_and_the_plugin_both_ways():
    assert [g.block.label for g in gate.gate_blocks() if g.group == "plugin"] == [
        "plugin(100G)"]
    gated = gate.gate_blocks(abc9=True)
    labels = [g.block.label for g in gated]
    assert len(labels) == len(set(labels))
    assert "tx_lane(sign)" in labels and "gen_lane(fixed:8)" in labels
    assert "frame_bus(64)" in labels and "register_file(6400G)" in labels
    assert "tx_lane(raw+fp16+bf16+fixed+qsgd+sign+natural)" in labels
    assert "rx_lane(raw+fp16+bf16+fixed+qsgd+sign+natural)" in labels
    plugins = [g for g in gated if g.group == "plugin"]
    assert [(g.block.label, g.full) for g in plugins] == [
        ("plugin(100G)", True), ("plugin(100G)[abc9]", False)]
    assert plugins[1].block.mapping == "abc9"
    everything = {g.block.label for g in gate.gate_blocks(builds="all", abc9=False)}
    assert {"plugin(200G,sign)", "plugin(6400G)", "plugin(6400G,loopback)"} <= everything


def test_plugin_block_is_the_verilog_generate_writes(tmp_path):
    from squeezenic_hw.build.params import PluginParams
    from squeezenic_hw.flows.opennic import write_opennic_plugin

    params = PluginParams(codecs=["sign"])
    write_opennic_plugin(tmp_path, params)
    block = report_blocks.plugin_block(params)
    assert block.top == "squeezenic_250mhz"
    assert block.make() == (tmp_path / "squeezenic_250mhz.v").read_text()


def test_rows_say_how_far_each_figure_is_from_its_budget():
    record = {"est_ns": 3.45, "worst_path": "a -> b", "max_lut_levels": 7,
              "deepest_path": "c -> d", "nets_over_fanout_limit": ["en:5000"],
              "largest_nets": ["en:5000"], "bram_reads_into_logic": []}
    rows = {r["check"]: r for r in gate.timing_rows("blk", record)}
    assert rows["est_ns"]["margin"] == pytest.approx(timing.BUDGET_NS - 3.45)
    assert not rows["est_ns"]["ok"] and rows["est_ns"]["detail"] == "a -> b"
    assert not rows["lut_levels"]["ok"] and rows["lut_levels"]["margin"] == -1
    assert not rows["nets_over_fanout_limit"]["ok"] and "en:5000" in \
        rows["nets_over_fanout_limit"]["detail"]
    assert rows["bram_reads_into_logic"]["ok"]
    only_ns = gate.timing_rows("blk", {**record, "est_ns": 3.0}, full=False)
    assert [(r["check"], r["ok"]) for r in only_ns] == [("est_ns", True)]


def test_a_design_over_budget_is_named_and_fails_the_gate(tmp_path):
    result = gate.run_gate(gated=[_deep(9), _deep(2)], cache_dir=tmp_path, timeout=600)
    failed = {(r["subject"], r["check"]) for r in result["failed"]}
    # nine additions: at least 9 × 0.70 ns and 9 LUT levels; two pass everything
    assert failed == {("deep(9)", "est_ns"), ("deep(9)", "lut_levels")}
    rows = {(r["subject"], r["check"]): r for r in result["checks"]}
    assert rows[("deep(9)", "lut_levels")]["figure"] >= 9
    assert rows[("deep(2)", "est_ns")]["ok"] and rows[("deep(2)", "lut_levels")]["ok"]


def test_cli_check_exits_1_naming_the_block_and_0_within_budget(tmp_path, monkeypatch,
                                                                capsys):
    def blocks(depth):
        return lambda **kwargs: [_deep(depth)]

    monkeypatch.setattr(gate, "gate_blocks", blocks(8))
    status = main(["report", "--check", "--cache-dir", str(tmp_path), "--format", "json"])
    out, err = capsys.readouterr()
    assert status == 1
    obj = json.loads(out)
    assert obj["ok"] is False and [r["subject"] for r in obj["failed"]] == ["deep(8)"] * 2
    assert set(obj["checks"][0]) == set(gate.CHECK_COLUMNS)
    assert "over budget: deep(8): est_ns" in err and "over budget: deep(8): lut_levels" in err
    monkeypatch.setattr(gate, "gate_blocks", blocks(3))
    assert main(["report", "--check", "--cache-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "deep(3)" in out and "0 over budget" in out and "over budget:" not in err


@pytest.mark.parametrize("argv, message", [
    (["--check", "--host-bw", "400"], "--host-bw"),
    (["--check", "--loopback"], "--loopback"),
    (["--builds", "all"], "--check only"),
])
def test_cli_check_rejects_options_it_does_not_take(argv, message, capsys):
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_builds_all_needs_the_native_yosys(monkeypatch, capsys):
    """YoWASP cannot map the 6400 plugins: the gate says so at once instead of hours in."""
    monkeypatch.setenv("SQUEEZENIC_HW_YOSYS", "yowasp")
    assert main(["report", "--check", "--builds", "all"]) == 2
    err = capsys.readouterr().err
    assert "SQUEEZENIC_HW_YOSYS=native" in err and len(err.strip().splitlines()) == 1
