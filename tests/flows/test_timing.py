"""The timing estimate on circuits whose answer is known: hand-built netlists (exact), and
small Amaranth circuits through Yosys (a LUT chain, a 32-bit adder, a DSP multiply with
and without registers)."""

import math

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.flows import synth
from squeezenic_hw.flows.timing import BUDGET_NS, DelayModel, estimate, estimate_json

M = DelayModel()
_FF_DIRS = {"C": "input", "CE": "input", "D": "input", "R": "input", "Q": "output"}


def _ff(d, q, clk=2):
    return {"type": "FDRE", "port_directions": _FF_DIRS,
            "connections": {"C": [clk], "CE": ["1"], "D": [d], "R": ["0"], "Q": [q]}}


def _lut(inputs, out):
    pins = {f"I{k}": [b] for k, b in enumerate(inputs)}
    return {"type": f"LUT{len(inputs)}",
            "port_directions": {**dict.fromkeys(pins, "input"), "O": "output"},
            "connections": {**pins, "O": [out]}}


def _netlist(cells, netnames, ports=None):
    ports = ports or {"clk": {"direction": "input", "bits": [2]}}
    return {"modules": {"top": {
        "attributes": {"top": "00000000000000000000000000000001"},
        "ports": ports,
        "cells": {f"c{k}": c for k, c in enumerate(cells)},
        "netnames": {n: {"bits": b, "hide_name": 0} for n, b in netnames.items()},
    }}}


@pytest.mark.parametrize("k", [0, 1, 3, 7])
def test_chain_of_k_luts_between_registers(k):
    # launch FF: q = bit 10; LUT j drives bit 11 + j; capture FF takes the last one
    cells = [_ff(50, 10)] + [_lut([10 + j], 11 + j) for j in range(k)] + [_ff(10 + k, 60)]
    est = estimate_json(_netlist(cells, {"launch": [10], "capture": [60],
                                          "last": [10 + k]}))
    assert est.est_ns == pytest.approx(M.ff_clk_to_q + k * M.lut)
    assert est.lut_levels == k and est.worst.carry_cells == 0
    # named by the registers: the end by what the capture register holds
    assert est.worst.start == "launch" and est.worst.end == "capture"
    assert est.worst.cells == ("FDRE",) + ("LUT1",) * k
    assert est.over_budget == (est.est_ns > BUDGET_NS)


def test_the_longest_of_two_paths_and_endpoints_over_budget():
    # a 2-LUT path and an 8-LUT path (0.15 + 8·0.45 = 3.75 ns > 3.2) into two registers
    cells = [_ff(50, 10), _lut([10], 11), _lut([11], 12), _ff(12, 70)]
    cells += [_lut([19 + j if j else 10], 20 + j) for j in range(8)] + [_ff(27, 71)]
    est = estimate_json(_netlist(cells, {"q": [10], "short": [12], "long": [27],
                                          "short_reg": [70], "long_reg": [71]}))
    assert est.est_ns == pytest.approx(M.ff_clk_to_q + 8 * M.lut)
    assert est.worst.end == "long_reg" and est.lut_levels == 8
    assert est.over_budget == 1 and est.est_ns > BUDGET_NS
    assert est.fmax_mhz_est == pytest.approx(1000 / est.est_ns)


def test_fanout_and_a_loop_is_cut_and_counted():
    # bit 10 drives four LUTs; two LUTs feed each other (a loop)
    cells = [_ff(50, 10)] + [_lut([10], 20 + j) for j in range(4)]
    cells += [_lut([10, 31], 30), _lut([30], 31), _ff(31, 60)]
    est = estimate_json(_netlist(cells, {"fan": [10]}))
    assert est.max_fanout == 5 and est.max_fanout_net == "fan"
    assert est.loops >= 1


def test_port_to_register_and_model_constants():
    cells = [_lut([5], 11), _ff(11, 60)]
    ports = {"clk": {"direction": "input", "bits": [2]},
             "x": {"direction": "input", "bits": [5]}}
    slow = DelayModel(lut=1.0)
    est = estimate_json(_netlist(cells, {"x": [5]}, ports), model=slow)
    assert est.est_ns == pytest.approx(1.0) and est.worst.start == "x"


# ---- through Yosys ---------------------------------------------------------------------

class _Registered(wiring.Component):
    """``o`` = f(``a``, ``b``) between registers (datapath registers: no reset)."""

    def __init__(self, width, out_width, function, *, reset_less=True, stages=1):
        self._function = function
        self._reset_less = reset_less
        self._stages = stages
        super().__init__({"a": In(width), "b": In(width), "o": Out(out_width)})

    def elaborate(self, platform):
        m = Module()
        a = Signal.like(self.a, reset_less=self._reset_less)
        b = Signal.like(self.b, reset_less=self._reset_less)
        m.d.sync += [a.eq(self.a), b.eq(self.b)]
        value = self._function(a, b)
        for k in range(self._stages):
            o = Signal.like(self.o, reset_less=self._reset_less, name=f"o{k}")
            m.d.sync += o.eq(value)
            value = o
        m.d.comb += self.o.eq(value)
        return m


class _Combinational(wiring.Component):
    a: In(16)
    b: In(16)
    o: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.o.eq(self.a * self.b)
        return m


def _estimate(component, tmp_path):
    result = synth.synthesize(component, workdir=tmp_path, netlist=True)
    return result, estimate(result.netlist_path)


def test_adder_32_bits_is_one_lut_and_a_carry_chain(tmp_path):
    result, est = _estimate(_Registered(32, 32, lambda a, b: a + b), tmp_path)
    # the propagate LUT, then 8 CARRY4 (Yosys maps to CARRY4; Vivado packs CARRY8)
    assert est.worst.carry_cells == result.carry == 8 and est.lut_levels == 1
    assert est.est_ns == pytest.approx(M.ff_clk_to_q + M.lut + M.carry_in
                                       + 7 * M.carry_chain)
    assert est.over_budget == 0 and not est.unknown_cells


def _dsp(params, a, b, p):
    """A DSP48E2 with A, B (one bit each here) and P, and ``params`` (e.g. AREG=1)."""
    return {"type": "DSP48E2",
            "parameters": {k: format(v, "032b") for k, v in params.items()},
            "port_directions": {"CLK": "input", "A": "input", "B": "input", "CEP": "input",
                                "P": "output"},
            "connections": {"CLK": [2], "A": [a], "B": [b], "CEP": ["1"], "P": [p]}}


@pytest.mark.parametrize("regs,expected", [
    ({}, M.ff_clk_to_q + M.dsp_comb),                                # FF → DSP → FF
    ({"AREG": 1, "BREG": 1}, M.dsp_comb),                            # DSP(in regs) → FF
    ({"AREG": 1, "BREG": 1, "MREG": 1}, M.dsp_mreg_to_out),
    ({"AREG": 1, "BREG": 1, "MREG": 1, "PREG": 1}, M.dsp_clk_to_out),
])
def test_dsp_registers_decide_the_path(regs, expected):
    cells = [_ff(50, 10), _ff(51, 11), _dsp(regs, 10, 11, 12), _ff(12, 60)]
    est = estimate_json(_netlist(cells, {"a": [10], "p": [12]}), fold_dsp_registers=False)
    assert est.est_ns == pytest.approx(expected)
    assert "DSP48E2" in est.worst.cells and est.dsp_folded == 0


def test_dsp_fold_one_stage_is_input_registers_and_preg():
    # FF → DSP → FF: Vivado folds the flip-flops as AREG/BREG and PREG; the whole multiply
    # is the path from the input registers, and PREG's clock-to-out starts the next one
    cells = [_ff(50, 10), _ff(51, 11), _dsp({}, 10, 11, 12), _ff(12, 60), _lut([60], 61),
             _ff(61, 62)]
    est = estimate_json(_netlist(cells, {"a": [10], "p": [12], "q": [60]}))
    assert est.dsp_folded == 1
    assert est.est_ns == pytest.approx(M.dsp_comb)
    assert est.worst.cells == ("DSP48E2",) and est.worst.end == "q"
    by_end = {b.name: b for b in est.blocks}
    assert by_end["(top)"].endpoints == len([c for c in cells if c["type"] == "FDRE"]) + 2


def test_dsp_fold_two_stages_are_mreg_and_preg():
    # FF → DSP → FF → FF: the stages become MREG and PREG; no path crosses the DSP whole
    cells = [_ff(50, 10), _ff(51, 11), _dsp({}, 10, 11, 12), _ff(12, 60), _ff(60, 61),
             _lut([61], 62), _ff(62, 63)]
    est = estimate_json(_netlist(cells, {"a": [10], "p": [12], "m": [60], "q": [61]}))
    assert est.dsp_folded == 1
    assert est.est_ns == pytest.approx(max(M.dsp_to_mreg, M.dsp_mreg_to_out,
                                           M.dsp_clk_to_out + M.lut))
    assert est.worst.ns < M.dsp_comb


def test_dsp_fold_needs_flip_flops_on_every_input():
    # A from a LUT: Vivado cannot fold A's register; the multiply stays combinational
    cells = [_ff(50, 9), _lut([9], 10), _ff(51, 11), _dsp({}, 10, 11, 12), _ff(12, 60)]
    est = estimate_json(_netlist(cells, {"a": [10], "p": [12]}))
    assert est.dsp_folded == 0
    assert est.est_ns == pytest.approx(M.ff_clk_to_q + M.lut + M.dsp_comb)


def test_blocks_group_endpoints_by_submodule():
    cells = [_ff(50, 10), _lut([10], 11), _lut([11], 12), _ff(12, 13), _ff(13, 14),
             _lut([14], 15), _ff(15, 16)]
    names = {"u.a": [10], "u.b": [13], "v.c": [14], "v.d": [16]}
    est = estimate_json(_netlist(cells, names), budget_ns=0.5)
    blocks = {b.name: b for b in est.blocks}
    assert est.blocks[0].name == "u" and blocks["u"].est_ns == pytest.approx(
        M.ff_clk_to_q + 2 * M.lut)
    assert blocks["v"].est_ns == pytest.approx(M.ff_clk_to_q + M.lut)
    assert blocks["u"].over_budget == 1 and blocks["v"].over_budget == 1
    # grouped by another rule (here the name after the submodule's)
    est = estimate_json(_netlist(cells, names), budget_ns=0.5, group_by=lambda n: n[-1])
    assert sorted(b.name for b in est.blocks) == ["a", "b", "c", "d"]
    assert est.blocks[0].name == "b" and est.blocks[0].est_ns == blocks["u"].est_ns
    assert sum(b.over_budget for b in est.blocks) == 2


def test_dsp_multiply_through_yosys(tmp_path):
    result, registered = _estimate(_Registered(16, 32, lambda a, b: a * b), tmp_path / "reg")
    assert result.dsp == 1
    # Yosys leaves the flip-flops in fabric for UltraScale+; folded as Vivado does, the
    # path is the multiply from the input registers into PREG
    assert result.ff >= 64 and registered.dsp_folded == 1
    assert registered.est_ns == pytest.approx(M.dsp_comb)
    assert registered.worst.cells == ("DSP48E2",)
    unfolded = estimate(result.netlist_path, fold_dsp_registers=False)
    assert unfolded.est_ns == pytest.approx(M.ff_clk_to_q + M.dsp_comb)
    # a second register stage after the product: MREG and PREG, no path crosses it whole
    result, piped = _estimate(_Registered(16, 32, lambda a, b: a * b, stages=2),
                              tmp_path / "piped")
    assert result.dsp == 1 and piped.dsp_folded == 1
    assert piped.est_ns == pytest.approx(M.dsp_to_mreg)
    # port to port through an unregistered DSP: the whole combinational delay
    _, comb = _estimate(_Combinational(), tmp_path / "comb")
    assert comb.est_ns == pytest.approx(M.dsp_comb)
    assert comb.worst.cells == ("input", "DSP48E2")


# ---- fanout, LUT levels, block RAM reads -----------------------------------------------

def _fan(n, *, cap=None):
    """A flip-flop whose Q drives ``n`` LUTs, each into a flip-flop of its own."""
    cells = [_ff(50, 10)]
    for j in range(n):
        cells += [_lut([10], 1000 + j), _ff(1000 + j, 5000 + j)]
    netlist = _netlist(cells, {"fan": [10]})
    if cap is not None:
        netlist["modules"]["top"]["netnames"]["fan"]["attributes"] = {"max_fanout": cap}
    return netlist


@pytest.mark.parametrize("loads", [1, 16, 64, 1024])
def test_fanout_adds_a_delay_per_doubling_beyond_the_free_loads(loads):
    est = estimate_json(_fan(loads))
    extra = M.fanout_doubling * max(0.0, math.log2(loads / M.fanout_free))
    assert est.est_ns == pytest.approx(M.ff_clk_to_q + extra + M.lut)
    assert est.max_fanout == loads and M.fanout(loads) == pytest.approx(extra)
    if loads > 1:
        assert est.largest_nets[0].name == "fan" and est.max_fanout_net == "fan"


def test_max_fanout_caps_a_net_and_its_copies_load_the_driver():
    # 4,096 loads over the limit: flagged; with max_fanout 64, Vivado's 64 copies of the
    # driver each drive 64 loads, and the driver's D net drives the 64 copies
    loads = 4096
    plain = estimate_json(_fan(loads), fanout_limit=2048)
    assert [n.name for n in plain.nets_over_limit] == ["fan"]
    capped = estimate_json(_fan(loads, cap=64), fanout_limit=2048)
    assert capped.nets_over_limit == ()
    assert capped.largest_nets[0].max_fanout == 64 and capped.largest_nets[0].effective == 64
    assert capped.est_ns == pytest.approx(M.ff_clk_to_q + M.fanout(64) + M.lut)
    assert capped.est_ns < plain.est_ns
    # the 64 copies are loads of the driver's input (bit 50, the flip-flop's D)
    assert {n.name: n.loads for n in capped.largest_nets}["bit50"] == 64
    assert "fan:4096>64" in capped.as_dict()["largest_nets"]


def test_a_top_level_input_is_not_checked_against_the_limit():
    cells = [c for j in range(40) for c in (_lut([5], 1000 + j), _ff(1000 + j, 5000 + j))]
    ports = {"clk": {"direction": "input", "bits": [2]},
             "x": {"direction": "input", "bits": [5]}}
    est = estimate_json(_netlist(cells, {"x": [5]}, ports), fanout_limit=16)
    assert est.max_fanout == 40 and est.nets_over_limit == ()


def test_most_lut_levels_of_any_path_not_only_the_slowest():
    # a 4-LUT path (1.95 ns) and a slower path of one LUT into an unregistered DSP
    cells = [_ff(50, 10)] + [_lut([10 + j], 11 + j) for j in range(4)] + [_ff(14, 60)]
    cells += [_ff(51, 20), _lut([20], 21), _ff(52, 22), _dsp({}, 21, 22, 23), _ff(23, 61)]
    est = estimate_json(_netlist(cells, {"deep": [60], "slow": [61]}),
                        fold_dsp_registers=False)
    assert est.worst.end == "slow" and est.lut_levels == 1
    assert est.max_lut_levels == 4 and est.deepest.end == "deep"
    assert est.as_dict()["max_lut_levels"] == 4


def _bram(addr, dout):
    return {"type": "RAMB36E2", "parameters": {},
            "port_directions": {"CLKARDCLK": "input", "ADDRARDADDR": "input",
                                "DOUTADOUT": "output", "CASDOUTA": "output"},
            "connections": {"CLKARDCLK": [2], "ADDRARDADDR": [addr], "DOUTADOUT": [dout],
                            "CASDOUTA": [dout + 1]}}


def test_block_ram_read_into_logic_is_found_and_a_register_after_it_is_not():
    into_logic = [_ff(50, 10), _bram(10, 20), _lut([20], 21), _ff(21, 60)]
    est = estimate_json(_netlist(into_logic, {"q": [60]}))
    assert est.bram_reads_into_logic == ("c1",)
    assert est.est_ns == pytest.approx(M.bram_clk_to_out + M.lut)
    assert est.ram_output_ffs == 0
    registered = [_ff(50, 10), _bram(10, 20), _ff(20, 30), _lut([30], 31), _ff(31, 60)]
    est = estimate_json(_netlist(registered, {"q": [60], "r": [30]}))
    assert est.bram_reads_into_logic == () and est.ram_output_ffs == 1
    assert est.est_ns == pytest.approx(M.bram_clk_to_out)
