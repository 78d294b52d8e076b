"""A static timing estimate of a synthesised netlist under an UltraScale+ (-2) delay model.

:func:`estimate` reads the JSON netlist Yosys writes after ``synth_xilinx`` (``write_json``)
and finds the longest register-to-register (and port-to-register, register-to-port) path,
bit by bit, with a delay per cell and per pin from :class:`DelayModel`. It is a pass over
the netlist in Python rather than Yosys's ``sta``: Yosys's stock Xilinx ``specify`` delays
are Artix-7's and know neither ``CARRY8`` nor ``DSP48E2``, and the estimate needs to say
which input of a DSP or a carry chain a path enters.

The model (``docs/timing.md`` gives the sources and what it cannot see):

* a path starts at a flip-flop's ``Q`` (``ff_clk_to_q``), a register or memory output of a
  DSP, LUTRAM, shift register, block or ultra RAM (their clock-to-out), or a top-level input
  (time 0);
* it ends at any input of a flip-flop (``D``, ``CE``, ``R``/``S``/``CLR``/``PRE``), the
  write side of a memory, a registered DSP input, or a top-level output;
* in between, a LUT (or ``INV``) costs ``lut`` (the LUT and the routing to it: routing is
  folded into this figure), a carry cell ``carry_in`` from ``S``/``DI`` and ``carry_chain``
  from ``CI``, a ``MUXF7/8/9`` ``muxf_data`` from ``I0``/``I1`` and ``muxf_select`` from
  ``S``, a LUTRAM or SRL read ``lutram_read`` from its address, a DSP48E2 without input,
  multiplier or output registers ``dsp_comb``.

Setup time and clock uncertainty are not included: the budget (:data:`BUDGET_NS`, 3.2 ns
against the 4 ns clock) leaves room for them and for the routing a full chip adds.
"""

import json
import re
from dataclasses import dataclass, field

__all__ = ["DelayModel", "TimingPath", "TimingEstimate", "estimate", "estimate_json",
           "BUDGET_NS", "CLOCK_NS"]

#: The clock period of the 250 MHz lanes.
CLOCK_NS = 4.0
#: The most a block's estimated path may take (the rest of the 4 ns is for clock-to-out
#: uncertainty, setup and the routing a full chip adds).
BUDGET_NS = 3.2


@dataclass(frozen=True)
class DelayModel:
    """Cell and pin delays in ns, UltraScale+ speed grade -2 (``docs/timing.md``)."""
    lut: float = 0.45            # a LUT and the local routing into it
    carry_in: float = 0.25       # CARRY4/CARRY8: S or DI to O/CO
    carry_chain: float = 0.05    # CARRY4/CARRY8: CI to O/CO (the cascade)
    muxf_data: float = 0.10      # MUXF7/8/9: I0/I1 to O
    muxf_select: float = 0.40    # MUXF7/8/9: S to O
    ff_clk_to_q: float = 0.15
    lutram_read: float = 0.70    # LUTRAM/SRL: read address (or clock) to output
    dsp_comb: float = 3.00       # DSP48E2 with no register: input to output
    dsp_to_mreg: float = 1.60    # DSP48E2: unregistered input to its multiplier register
    dsp_clk_to_out: float = 0.35  # DSP48E2 output register (PREG) clock to P
    dsp_mreg_to_out: float = 1.40  # DSP48E2: multiplier register to an unregistered P
    bram_clk_to_out: float = 0.90  # RAMB18/36, URAM288: clock to data out


@dataclass(frozen=True)
class TimingPath:
    """One path: its delay, where it starts and ends (signal names), and what it crosses."""
    ns: float
    start: str
    end: str
    cells: tuple = ()            # cell types along the path, start to end
    lut_levels: int = 0          # LUTs (and INVs) on it
    carry_cells: int = 0         # carry cells on it


@dataclass(frozen=True)
class TimingEstimate:
    """The estimate of one netlist."""
    worst: TimingPath | None     # None: no timed path (no cell between endpoints)
    endpoints: int               # timed endpoint bits
    over_budget: int             # endpoint bits whose arrival exceeds ``budget_ns``
    budget_ns: float
    max_fanout: int
    max_fanout_net: str
    loops: int = 0               # combinational loops found (each cut once)
    unknown_cells: tuple = field(default=())   # cell types the model does not know

    @property
    def est_ns(self):
        return self.worst.ns if self.worst else 0.0

    @property
    def fmax_mhz_est(self):
        return 1000.0 / self.est_ns if self.est_ns else float("inf")

    @property
    def lut_levels(self):
        return self.worst.lut_levels if self.worst else 0

    def as_dict(self):
        """The stable JSON keys of the reports: ``est_ns``, ``fmax_mhz_est``, ``lut_levels``,
        ``carry_cells``, ``worst_path`` (start → end), ``over_budget``, ``max_fanout``."""
        w = self.worst
        return {
            "est_ns": round(self.est_ns, 3),
            "fmax_mhz_est": round(self.fmax_mhz_est, 1) if w else None,
            "lut_levels": self.lut_levels,
            "carry_cells": w.carry_cells if w else 0,
            "worst_path": f"{w.start} -> {w.end}" if w else "",
            "over_budget": self.over_budget,
            "max_fanout": self.max_fanout,
            "max_fanout_net": self.max_fanout_net,
        }


_FF = re.compile(r"FD[A-Z]*\Z|LD[A-Z]*\Z")
_LUT = re.compile(r"LUT[1-6](_2)?\Z|INV\Z")
_CARRY = re.compile(r"CARRY(4|8)\Z")
_MUXF = re.compile(r"MUXF[789]\Z")
_LUTRAM = re.compile(r"RAM(32|64|128|256|512)[A-Z0-9]*\Z")
_SRL = re.compile(r"SRLC?(16|32)E?\Z")
_BRAM = re.compile(r"RAMB(18|36)E[0-9]\Z|URAM288\Z|FIFO(18|36)E[0-9]\Z")
_CLOCK_PINS = {"C", "G", "CLK", "WCLK", "CLKARDCLK", "CLKBWRCLK"}
_IGNORED = {"$scopeinfo", "BUFG", "BUFGCE", "IBUF", "OBUF", "IBUFDS", "GND", "VCC"}
_DSP_INPUT_REGS = {"A": ("AREG", "ACASCREG"), "B": ("BREG", "BCASCREG"), "C": ("CREG",),
                   "D": ("DREG",), "CARRYIN": ("CARRYINREG",), "ALUMODE": ("ALUMODEREG",),
                   "OPMODE": ("OPMODEREG",), "INMODE": ("INMODEREG",),
                   "CARRYINSEL": ("CARRYINSELREG",)}


def _param(params, name):
    value = params.get(name, "0")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text, 2) if set(text) <= {"0", "1"} and len(text) > 1 else int(text)
    except ValueError:
        return 0


class _Graph:
    """Bits and the cell arcs between them, built from one module of a Yosys JSON netlist."""

    def __init__(self, module, model):
        self.model = model
        self.names = {}                 # bit -> a signal name for reports
        for name, net in module.get("netnames", {}).items():
            hidden = net.get("hide_name", 0) or name.startswith("$")
            for k, bit in enumerate(net["bits"]):
                if isinstance(bit, str):
                    continue
                label = name if len(net["bits"]) == 1 else f"{name}[{k}]"
                if bit not in self.names or (not hidden and self.names[bit][1]):
                    self.names[bit] = (label, hidden)
        self.arcs = {}                  # output bit -> [(input bit, delay, cell, kind)]
        self.starts = {}                # bit -> (delay at the bit, description)
        self.ends = []                  # (bit, the bit that names the endpoint)
        self.loads = {}                 # bit -> load count
        self.unknown = set()
        for port in module.get("ports", {}).values():
            for bit in port["bits"]:
                if isinstance(bit, str):
                    continue
                if port["direction"] == "input":
                    self.starts.setdefault(bit, (0.0, "input"))
                else:
                    self.ends.append((bit, bit))
        for cell in module.get("cells", {}).values():
            self._add_cell(cell)

    def name(self, bit):
        return self.names.get(bit, (f"bit{bit}", True))[0]

    def _bits(self, conns, pin):
        return [b for b in conns.get(pin, []) if not isinstance(b, str)]

    def _arc(self, out_bit, in_bit, delay, cell_type):
        self.arcs.setdefault(out_bit, []).append((in_bit, delay, cell_type))

    def _add_cell(self, cell):
        kind = cell["type"]
        conns = cell.get("connections", {})
        dirs = cell.get("port_directions", {})
        params = cell.get("parameters", {})
        m = self.model
        for pin, bits in conns.items():
            # clocks run on the global network: not a fanout the design has to drive
            if dirs.get(pin) == "input" and pin not in _CLOCK_PINS:
                for b in bits:
                    if not isinstance(b, str):
                        self.loads[b] = self.loads.get(b, 0) + 1
        inputs = [p for p in conns if dirs.get(p) == "input"]
        outputs = [p for p in conns if dirs.get(p) == "output"]

        def comb(delay_of):
            for o in outputs:
                for ob in self._bits(conns, o):
                    for i in inputs:
                        d = delay_of(i)
                        if d is None:
                            continue
                        for ib in self._bits(conns, i):
                            self._arc(ob, ib, d, kind)

        def state(clock_to_out, end_pins):
            out_bits = [ob for o in outputs for ob in self._bits(conns, o)]
            for ob in out_bits:
                self.starts[ob] = (clock_to_out, kind)
            # a register's endpoint is named by what it holds (its output), not by the
            # internal net that drives it
            label = out_bits[0] if len(out_bits) == 1 else None
            for i in end_pins:
                for ib in self._bits(conns, i):
                    self.ends.append((ib, label if label is not None else ib))

        if kind in _IGNORED:
            return
        if _FF.match(kind):
            state(m.ff_clk_to_q, [p for p in inputs if p not in ("C", "G")])
        elif _LUT.match(kind):
            comb(lambda pin: m.lut)
        elif _CARRY.match(kind):
            comb(lambda pin: m.carry_chain if pin.startswith(("CI", "CYINIT")) else m.carry_in)
        elif _MUXF.match(kind):
            comb(lambda pin: m.muxf_select if pin == "S" else m.muxf_data)
        elif _LUTRAM.match(kind) or _SRL.match(kind):
            # outputs: from the clock (the stored data) and from the read address; every
            # other input, and an address that also writes, is the write side
            read_address = {p for p in inputs if re.fullmatch(r"ADDR[A-H]|DPRA\d*|A\d*", p)}
            for o in outputs:
                for ob in self._bits(conns, o):
                    self.starts[ob] = (m.lutram_read, kind)
            comb(lambda pin: m.lutram_read if pin in read_address else None)
            for i in inputs:
                if i.startswith(("WCLK", "CLK")) or re.fullmatch(r"ADDR[A-G]|DPRA\d*", i):
                    continue
                for ib in self._bits(conns, i):
                    self.ends.append((ib, ib))
        elif _BRAM.match(kind):
            state(m.bram_clk_to_out, [p for p in inputs if not p.startswith("CLK")])
        elif kind == "DSP48E2":
            self._add_dsp(conns, inputs, outputs, params)
        else:
            # unknown: a register on every pin (never hides a path through it as a shorter one)
            self.unknown.add(kind)
            state(m.lut, inputs)

    def _add_dsp(self, conns, inputs, outputs, params):
        m = self.model
        mreg = _param(params, "MREG") > 0
        preg = _param(params, "PREG") > 0
        registered = set()
        for base, regs in _DSP_INPUT_REGS.items():
            if any(_param(params, r) > 0 for r in regs):
                registered.add(base)
        data_in = [p for p in inputs if p != "CLK" and not p.startswith(("CE", "RST"))]
        ctrl_in = [p for p in inputs if p.startswith(("CE", "RST"))]
        for i in ctrl_in:
            for ib in self._bits(conns, i):
                self.ends.append((ib, ib))
        comb_in = []
        for i in data_in:
            base = {"ACIN": "A", "BCIN": "B"}.get(i, i)   # cascades share A's/B's registers
            if base in registered:
                for ib in self._bits(conns, i):
                    self.ends.append((ib, ib))
            elif mreg and base in ("A", "B", "D"):
                for ib in self._bits(conns, i):
                    self.ends.append((ib, ib))   # into the multiplier register
            else:
                comb_in.append(i)
        out_start = (m.dsp_clk_to_out if preg else m.dsp_mreg_to_out if mreg
                     else None)
        for o in outputs:
            for ob in self._bits(conns, o):
                if out_start is not None:
                    self.starts[ob] = (out_start, "DSP48E2")
                elif registered:
                    # input registers only: the multiply and add from them, combinational
                    self.starts[ob] = (m.dsp_comb, "DSP48E2")
                if not preg:
                    for i in comb_in:
                        for ib in self._bits(conns, i):
                            self._arc(ob, ib, m.dsp_comb, "DSP48E2")


def estimate_json(netlist, *, top=None, model=DelayModel(), budget_ns=BUDGET_NS):
    """The :class:`TimingEstimate` of a Yosys JSON netlist (a dict, or its text)."""
    if isinstance(netlist, str):
        netlist = json.loads(netlist)
    modules = netlist["modules"]
    if top is None:
        tops = [n for n, mod in modules.items()
                if _param(mod.get("attributes", {}), "top") == 1]
        top = tops[0] if tops else next(iter(modules))
    graph = _Graph(modules[top], model)
    arrival, via = {}, {}
    loops = 0
    visiting = set()

    def time_of(bit):
        # Iterative depth-first search: netlists have paths thousands of cells long.
        nonlocal loops
        stack = [(bit, False)]
        while stack:
            b, expanded = stack.pop()
            if b in arrival:
                continue
            arcs = graph.arcs.get(b, [])
            if not expanded:
                visiting.add(b)
                stack.append((b, True))
                for src, _, _ in arcs:
                    if src in visiting:
                        loops += 1          # a combinational loop: this arc is not timed
                    elif src not in arrival:
                        stack.append((src, False))
                continue
            visiting.discard(b)
            best, best_via = (graph.starts[b][0], None) if b in graph.starts else (0.0, None)
            for src, delay, kind in arcs:
                if src not in arrival:
                    continue                # cut at a loop
                t = arrival[src] + delay
                if t > best:
                    best, best_via = t, (src, kind)
            arrival[b], via[b] = best, best_via
        return arrival[bit]

    worst = None
    over = 0
    for bit, label in graph.ends:
        t = time_of(bit)
        if t > budget_ns + 1e-9:
            over += 1
        if worst is None or t > worst[0]:
            worst = (t, bit, label)
    path = None
    if worst is not None and worst[0] > 0:
        t, end, end_label = worst
        cells, b = [], end
        while via.get(b):
            b, kind = via[b]
            cells.append(kind)
        start_kind = graph.starts.get(b, (0.0, "input"))[1]
        cells = tuple([start_kind] + cells[::-1])
        path = TimingPath(
            ns=t, start=graph.name(b), end=graph.name(end_label), cells=cells,
            lut_levels=sum(1 for c in cells[1:] if _LUT.match(c)),
            carry_cells=sum(1 for c in cells[1:] if _CARRY.match(c)))
    fanout_bit, fanout = max(graph.loads.items(), key=lambda kv: kv[1], default=(None, 0))
    return TimingEstimate(
        worst=path, endpoints=len(graph.ends), over_budget=over, budget_ns=budget_ns,
        max_fanout=fanout, max_fanout_net=graph.name(fanout_bit) if fanout_bit else "",
        loops=loops, unknown_cells=tuple(sorted(graph.unknown)))


def estimate(json_path, **kwargs):
    """:func:`estimate_json` of a netlist file."""
    with open(json_path) as f:
        return estimate_json(json.load(f), **kwargs)
