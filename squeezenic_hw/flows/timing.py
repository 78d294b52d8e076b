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

Yosys 0.70 packs flip-flops into DSP slices only for 7-series (``xilinx_dsp`` runs its
register packer for ``xc7`` alone), so an UltraScale+ netlist has every DSP48E2 with its
registers left in fabric. Vivado folds them (UG579, UG901); the estimate does the same
(:func:`estimate_json` ``fold_dsp_registers``): a DSP48E2 with no register of its own whose
data inputs all come straight from flip-flops takes those as its input registers; a
flip-flop stage fed only by its ``P`` becomes ``PREG``, or with a second stage behind it
``MREG`` and ``PREG``. A path then crosses the multiplier in parts (input register to
``MREG``, ``MREG`` to ``PREG``), as in the placed design.

Setup time and clock uncertainty are not included: the budget (:data:`BUDGET_NS`, 3.2 ns
against the 4 ns clock) leaves room for them and for the routing a full chip adds.
"""

import gzip
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DelayModel", "TimingPath", "BlockTiming", "TimingEstimate", "Net", "estimate",
           "estimate_json", "estimator_digest", "BUDGET_NS", "CLOCK_NS", "LUT_LEVELS_BUDGET",
           "FANOUT_LIMIT"]

#: The clock period of the 250 MHz lanes.
CLOCK_NS = 4.0
#: The most a block's estimated path may take (the rest of the 4 ns is for clock-to-out
#: uncertainty, setup and the routing a full chip adds).
BUDGET_NS = 3.2
#: The most LUTs any path may cross between registers.
LUT_LEVELS_BUDGET = 6
#: The most loads a net other than a clock may drive, counted as Vivado will see it: a net
#: whose signal carries a ``max_fanout`` attribute counts at most that many (Vivado
#: replicates its driver to keep each copy within it).
FANOUT_LIMIT = 2048


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
    fanout_free: int = 16        # loads a net drives within ``lut``'s typical routing
    fanout_doubling: float = 0.10  # added per doubling of a net's loads beyond that

    def fanout(self, loads):
        """The routing a net of ``loads`` loads adds to every path through it:
        ``fanout_doubling`` for each doubling of the loads beyond ``fanout_free``."""
        if loads <= self.fanout_free:
            return 0.0
        return self.fanout_doubling * math.log2(loads / self.fanout_free)


@dataclass(frozen=True)
class TimingPath:
    """One path: its delay, where it starts and ends (signal names), and what it crosses."""
    ns: float
    start: str
    end: str
    cells: tuple = ()            # cell types along the path, start to end
    nets: tuple = ()             # the nets it crosses, start to end (names as in ``start``)
    lut_levels: int = 0          # LUTs (and INVs) on it
    carry_cells: int = 0         # carry cells on it


@dataclass(frozen=True)
class Net:
    """A net's loads (clock pins not counted), and what Vivado will see of them: at most
    its signal's ``max_fanout`` attribute, when it has one."""
    name: str
    loads: int
    max_fanout: int | None = None

    @property
    def effective(self):
        return self.loads if self.max_fanout is None else min(self.loads, self.max_fanout)


@dataclass(frozen=True)
class BlockTiming:
    """The endpoints of one submodule (the first part of their dotted names)."""
    name: str
    endpoints: int
    over_budget: int
    worst: TimingPath | None

    @property
    def est_ns(self):
        return self.worst.ns if self.worst else 0.0


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
    blocks: tuple = field(default=(), repr=False)   # BlockTiming per submodule, worst first
    dsp_folded: int = 0          # DSP48E2s whose flip-flops were folded into them
    max_lut_levels: int = 0      # the most LUTs on any path (not only the slowest)
    deepest: TimingPath | None = None   # a path with ``max_lut_levels`` LUTs
    largest_nets: tuple = field(default=())     # Net, the largest first (a few)
    nets_over_limit: tuple = field(default=())  # Net whose effective loads exceed the limit
    fanout_limit: int = 0
    bram_reads_into_logic: tuple = field(default=())   # RAM cells whose read data is not
    #                                                  # taken straight by flip-flops
    ram_output_ffs: int = 0      # flip-flops that are RAMs' output registers (in Vivado)

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
        """The stable JSON keys of the reports: ``est_ns``, ``fmax_mhz_est``, ``lut_levels``
        (of the slowest path), ``carry_cells``, ``worst_path`` (start → end),
        ``over_budget``, ``max_lut_levels`` (of any path) and ``deepest_path``,
        ``max_fanout`` and ``max_fanout_net`` (loads of the largest net, clocks not
        counted), ``largest_nets`` (``"name:loads"``, or ``"name:loads>max_fanout"`` for a
        net with the attribute), ``nets_over_fanout_limit`` (names) and
        ``bram_reads_into_logic`` (RAM cells whose read data feeds logic)."""
        w, d = self.worst, self.deepest
        return {
            "est_ns": round(self.est_ns, 3),
            "fmax_mhz_est": round(self.fmax_mhz_est, 1) if w else None,
            "lut_levels": self.lut_levels,
            "carry_cells": w.carry_cells if w else 0,
            "worst_path": f"{w.start} -> {w.end}" if w else "",
            "over_budget": self.over_budget,
            "max_lut_levels": self.max_lut_levels,
            "deepest_path": f"{d.start} -> {d.end}" if d else "",
            "max_fanout": self.max_fanout,
            "max_fanout_net": self.max_fanout_net,
            "largest_nets": [_net_text(n) for n in self.largest_nets],
            "nets_over_fanout_limit": [_net_text(n) for n in self.nets_over_limit],
            "bram_reads_into_logic": list(self.bram_reads_into_logic),
        }


def _net_text(net):
    return f"{net.name}:{net.loads}" + (f">{net.max_fanout}" if net.max_fanout else "")


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

    def __init__(self, module, model, fold_dsp_registers=True):
        self.model = model
        self.fold = fold_dsp_registers
        self.names = {}                 # bit -> a signal name for reports
        self.max_fanout = {}            # bit -> its signal's ``max_fanout`` attribute
        for name, net in module.get("netnames", {}).items():
            hidden = net.get("hide_name", 0) or name.startswith("$")
            cap = _param(net.get("attributes", {}), "max_fanout")
            for k, bit in enumerate(net["bits"]):
                if isinstance(bit, str):
                    continue
                label = name if len(net["bits"]) == 1 else f"{name}[{k}]"
                if bit not in self.names or (not hidden and self.names[bit][1]):
                    self.names[bit] = (label, hidden)
                if cap > 0:
                    self.max_fanout[bit] = min(cap, self.max_fanout.get(bit, cap))
        self.arcs = {}                  # output bit -> [(input bit, delay, cell, routed)]
        self.rams = []                  # (label, read data bits) of block and ultra RAMs
        self.starts = {}                # bit -> (delay at the bit, description)
        self.ends = []                  # (bit, the bit that names the endpoint)
        self.loads = {}                 # bit -> load count
        self.unknown = set()
        self.input_bits = set()         # the top-level inputs' bits
        for port in module.get("ports", {}).values():
            for bit in port["bits"]:
                if isinstance(bit, str):
                    continue
                if port["direction"] == "input":
                    self.starts.setdefault(bit, (0.0, "input"))
                    self.input_bits.add(bit)
                else:
                    self.ends.append((bit, bit))
        cells = [dict(c, name=n) for n, c in module.get("cells", {}).items()
                 if c["type"] not in _IGNORED]
        # who reads each bit, and which flip-flop drives it: what the DSP fold looks at
        self.readers = {}               # bit -> [(cell, pin)]
        self.ff_of_q = {}               # Q bit -> flip-flop cell
        drivers = {}                    # bit -> the cell driving it
        for cell in cells:
            dirs = cell.get("port_directions", {})
            for pin, bits in cell.get("connections", {}).items():
                if dirs.get(pin) == "input":
                    for b in bits:
                        if not isinstance(b, str):
                            self.readers.setdefault(b, []).append((cell, pin))
                elif dirs.get(pin) == "output":
                    for b in bits:
                        if not isinstance(b, str):
                            drivers[b] = cell
            if _FF.match(cell["type"]):
                for b in self._bits(cell.get("connections", {}), "Q"):
                    self.ff_of_q[b] = cell
        for port in module.get("ports", {}).values():
            if port["direction"] != "input":
                for b in port["bits"]:
                    if not isinstance(b, str):
                        self.readers.setdefault(b, []).append((None, "port"))
        self.q_start = {}               # Q bit of a folded flip-flop -> its clock-to-out
        self.folded = 0                 # DSP48E2s whose registers were folded
        for cell in cells:
            self._add_cell(cell)
        for bit, delay in self.q_start.items():
            self.starts[bit] = (delay, "DSP48E2")
        self._replicate(drivers)

    def _replicate(self, drivers):
        """Vivado keeps a net with a ``max_fanout`` attribute within it by copies of its
        driver (UG901): each copy is one more load on each of the driver's inputs.
        ``drivers``: bit -> the cell driving it."""
        extra = {}
        for bit, cap in self.max_fanout.items():
            loads = self.loads.get(bit, 0)
            cell = drivers.get(bit)
            if loads <= cap or cell is None:
                continue
            copies = math.ceil(loads / cap)
            dirs = cell.get("port_directions", {})
            for pin, bits in cell.get("connections", {}).items():
                if dirs.get(pin) == "input" and pin not in _CLOCK_PINS:
                    for b in bits:
                        if not isinstance(b, str):
                            extra[b] = extra.get(b, 0) + copies - 1
        for b, n in extra.items():
            self.loads[b] = self.loads.get(b, 0) + n

    def name(self, bit):
        """A report name: a net's, or (a string) the label of the cell a path ends in."""
        if isinstance(bit, str):
            return bit
        return self.names.get(bit, (f"bit{bit}", True))[0]

    def end_label(self, bit, cell):
        """How an endpoint on an input of ``cell`` is named: by its net when that has a
        name of the design, else by the cell (Yosys's flattened cell names keep the
        submodule path)."""
        label, hidden = self.names.get(bit, (None, True))
        if not hidden:
            return bit
        return _cell_label(cell)

    def _bits(self, conns, pin):
        return [b for b in conns.get(pin, []) if not isinstance(b, str)]

    def _arc(self, out_bit, in_bit, delay, cell_type, routed=True):
        """A cell's arc; ``routed``: its input comes over general routing, whose delay
        grows with the input net's loads (not a carry cascade or a slice's own mux)."""
        self.arcs.setdefault(out_bit, []).append((in_bit, delay, cell_type, routed))

    def effective_loads(self, bit):
        loads = self.loads.get(bit, 0)
        cap = self.max_fanout.get(bit)
        return loads if cap is None else min(loads, cap)

    def net_delay(self, bit):
        """What the net of ``bit`` adds to a path through it beyond ``lut``'s routing."""
        return self.model.fanout(self.effective_loads(bit))

    def _add_cell(self, cell):
        self._cell = cell
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

        def comb(delay_of, routed=lambda pin: True):
            for o in outputs:
                for ob in self._bits(conns, o):
                    for i in inputs:
                        d = delay_of(i)
                        if d is None:
                            continue
                        for ib in self._bits(conns, i):
                            self._arc(ob, ib, d, kind, routed(i))

        def state(clock_to_out, end_pins):
            out_bits = [ob for o in outputs for ob in self._bits(conns, o)]
            for ob in out_bits:
                self.starts[ob] = (clock_to_out, kind)
            # a register's endpoint is named by what it holds (its output), not by the
            # internal net that drives it
            label = out_bits[0] if len(out_bits) == 1 else None
            if label is not None and self.names.get(label, (None, True))[1]:
                label = _cell_label(cell)
            for i in end_pins:
                for ib in self._bits(conns, i):
                    end = label if label is not None else self.end_label(ib, cell)
                    self.ends.append((ib, end))

        if kind in _IGNORED:
            return
        if _FF.match(kind):
            state(m.ff_clk_to_q, [p for p in inputs if p not in ("C", "G")])
        elif _LUT.match(kind):
            comb(lambda pin: m.lut)
        elif _CARRY.match(kind):
            comb(lambda pin: m.carry_chain if pin.startswith(("CI", "CYINIT")) else m.carry_in,
                 lambda pin: not pin.startswith(("CI", "CYINIT")))
        elif _MUXF.match(kind):
            comb(lambda pin: m.muxf_select if pin == "S" else m.muxf_data,
                 lambda pin: pin == "S")
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
                    self.ends.append((ib, self.end_label(ib, self._cell)))
        elif _BRAM.match(kind):
            state(m.bram_clk_to_out, [p for p in inputs if not p.startswith("CLK")])
            data = [b for o in outputs if not o.startswith(("CAS", "DBITERR", "SBITERR", "ECC",
                                                            "RDADDRECC"))
                    for b in self._bits(conns, o)]
            self.rams.append((_cell_label(cell), data))
        elif kind == "DSP48E2":
            self._add_dsp(conns, inputs, outputs, params)
        else:
            # unknown: a register on every pin (never hides a path through it as a shorter one)
            self.unknown.add(kind)
            state(m.lut, inputs)

    def _ff_stage(self, bits):
        """The flip-flops whose ``D`` pins are all that read ``bits`` (every bit read at
        least once), or None."""
        ffs = []
        read = False
        for b in bits:
            for cell, pin in self.readers.get(b, []):
                if cell is None or not _FF.match(cell["type"]) or pin != "D":
                    return None
                ffs.append(cell)
                read = True
        return ffs if read else None

    def _fold_dsp(self, conns, params):
        """Vivado's register fold of an unregistered DSP48E2 (see the module docstring):
        ``(registered inputs, MREG, PREG)`` as they would be, and the absorbed flip-flops'
        ``Q`` bits get the DSP's clock-to-out."""
        if any(_param(params, r) > 0 for regs in _DSP_INPUT_REGS.values() for r in regs) or \
                _param(params, "MREG") > 0 or _param(params, "PREG") > 0:
            return set(), False, False
        data = [b for pin in ("A", "B", "C", "D") for b in self._bits(conns, pin)]
        cascaded = any(self._bits(conns, pin) for pin in ("ACIN", "BCIN", "PCIN"))
        if cascaded or not data or any(b not in self.ff_of_q for b in data):
            return set(), False, False
        registered = {pin for pin in ("A", "B", "C", "D") if self._bits(conns, pin)}
        p_bits = self._bits(conns, "P")
        if any(self.readers.get(b) for b in self._bits(conns, "PCOUT")):
            return registered, False, False
        first = self._ff_stage(p_bits)
        if first is None:
            return registered, False, False
        q1 = [b for ff in first for b in self._bits(ff["connections"], "Q")]
        second = self._ff_stage(q1)
        m = self.model
        if second is None:
            for b in q1:
                self.q_start[b] = m.dsp_clk_to_out
            return registered, False, True
        for b in q1:
            self.q_start[b] = m.dsp_mreg_to_out     # MREG, through the ALU to PREG's D
        for ff in second:
            for b in self._bits(ff["connections"], "Q"):
                self.q_start[b] = m.dsp_clk_to_out
        return registered, True, True

    def _add_dsp(self, conns, inputs, outputs, params):
        m = self.model
        if self.fold:
            folded_inputs, folded_m, folded_p = self._fold_dsp(conns, params)
            if folded_inputs:
                self.folded += 1
                self._add_folded_dsp(conns, inputs, outputs, folded_m, folded_p)
                return
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
                self.ends.append((ib, self.end_label(ib, self._cell)))
        comb_in = []
        for i in data_in:
            base = {"ACIN": "A", "BCIN": "B"}.get(i, i)   # cascades share A's/B's registers
            if base in registered:
                for ib in self._bits(conns, i):
                    self.ends.append((ib, self.end_label(ib, self._cell)))
            elif mreg and base in ("A", "B", "D"):
                for ib in self._bits(conns, i):
                    self.ends.append((ib, self.end_label(ib, self._cell)))   # into the M register
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
                            self._arc(ob, ib, m.dsp_comb, "DSP48E2",
                                      not i.endswith("CIN"))

    def _add_folded_dsp(self, conns, inputs, outputs, mreg, preg):
        """A DSP48E2 whose input flip-flops (and output stages, ``mreg``/``preg``) fold into it:
        its data pins end paths (the flip-flops before them are its input registers); its
        outputs start at the time the absorbed registers give them."""
        m = self.model
        for i in inputs:
            if i == "CLK":
                continue
            for ib in self._bits(conns, i):
                self.ends.append((ib, self.end_label(ib, self._cell)))
        # P reaches the first flip-flop stage: MREG's D (input register to M), or PREG's D
        # (the whole multiply-add from the input registers)
        start = m.dsp_to_mreg if mreg else m.dsp_comb
        for o in outputs:
            for ob in self._bits(conns, o):
                self.starts[ob] = (start, "DSP48E2")


    def ram_output_registers(self):
        """Flip-flops that take a RAM's read data and nothing else, as its only reader:
        the RAM's output register (``DOA_REG``/``DOB_REG``), where Vivado places them."""
        count = 0
        for _, bits in self.rams:
            for b in bits:
                readers = self.readers.get(b, [])
                if len(readers) == 1 and readers[0][0] is not None \
                        and _FF.match(readers[0][0]["type"]) and readers[0][1] == "D":
                    count += 1
        return count

    def rams_into_logic(self):
        """Labels of the RAMs some of whose read data goes elsewhere than straight into a
        flip-flop's ``D`` (a cell's other pin, logic, a port)."""
        out = []
        for label, bits in self.rams:
            for b in bits:
                if any(cell is None or not _FF.match(cell["type"]) or pin != "D"
                       for cell, pin in self.readers.get(b, [])):
                    out.append(label)
                    break
        return tuple(sorted(set(out)))


def _submodule(name):
    """The submodule an endpoint belongs to: the first part of its dotted name."""
    head, dot, _ = name.partition(".")
    return head if dot else "(top)"


def estimate_json(netlist, *, top=None, model=DelayModel(), budget_ns=BUDGET_NS,
                  fold_dsp_registers=True, fanout_limit=FANOUT_LIMIT, largest=5,
                  group_by=_submodule):
    """The :class:`TimingEstimate` of a Yosys JSON netlist (a dict, or its text).

    ``group_by`` names the :class:`BlockTiming` an endpoint counts in, from the
    endpoint's name (default: its submodule, the first part of the dotted name)."""
    if isinstance(netlist, str):
        netlist = json.loads(netlist)
    modules = netlist["modules"]
    if top is None:
        tops = [n for n, mod in modules.items()
                if _param(mod.get("attributes", {}), "top") == 1]
        top = tops[0] if tops else next(iter(modules))
    graph = _Graph(modules[top], model, fold_dsp_registers)
    arrival, via = {}, {}
    levels, level_via = {}, {}         # the most LUTs on a path to each bit, and through what
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
                for src, _, _, _ in arcs:
                    if src in visiting:
                        loops += 1          # a combinational loop: this arc is not timed
                    elif src not in arrival:
                        stack.append((src, False))
                continue
            visiting.discard(b)
            best, best_via = (graph.starts[b][0], None) if b in graph.starts else (0.0, None)
            deepest, deepest_via = 0, None
            for src, delay, kind, routed in arcs:
                if src not in arrival:
                    continue                # cut at a loop
                t = arrival[src] + delay + (graph.net_delay(src) if routed else 0.0)
                if t > best:
                    best, best_via = t, (src, kind)
                lv = levels[src] + (1 if _LUT.match(kind) else 0)
                if lv > deepest:
                    deepest, deepest_via = lv, (src, kind)
            arrival[b], via[b] = best, best_via
            levels[b], level_via[b] = deepest, deepest_via
        return arrival[bit]

    def path_to(t, end, end_label, links=via):
        cells, nets, b = [], [graph.name(end)], end
        while links.get(b):
            b, kind = links[b]
            cells.append(kind)
            nets.append(graph.name(b))
        start_kind = graph.starts.get(b, (0.0, "input"))[1]
        cells = tuple([start_kind] + cells[::-1])
        return TimingPath(
            ns=t, start=graph.name(b), end=graph.name(end_label), cells=cells,
            nets=tuple(nets[::-1]),
            lut_levels=sum(1 for c in cells[1:] if _LUT.match(c)),
            carry_cells=sum(1 for c in cells[1:] if _CARRY.match(c)))

    worst = None
    deepest = None
    over = 0
    groups = {}                         # submodule -> [endpoints, over, worst (t, bit, label)]
    for bit, label in graph.ends:
        # the endpoint's pin is reached over the net of ``bit``
        t = time_of(bit) + graph.net_delay(bit)
        group = groups.setdefault(group_by(graph.name(label)), [0, 0, None])
        group[0] += 1
        if t > budget_ns + 1e-9:
            over += 1
            group[1] += 1
        if worst is None or t > worst[0]:
            worst = (t, bit, label)
        if group[2] is None or t > group[2][0]:
            group[2] = (t, bit, label)
        if deepest is None or levels[bit] > deepest[0]:
            deepest = (levels[bit], t, bit, label)
    path = path_to(*worst) if worst is not None and worst[0] > 0 else None
    deep_path = (path_to(*deepest[1:], links=level_via)
                 if deepest is not None and deepest[0] > 0 else None)
    blocks = tuple(sorted(
        (BlockTiming(name, n, n_over, path_to(*w) if w[0] > 0 else None)
         for name, (n, n_over, w) in groups.items()),
        key=lambda b: -(b.worst.ns if b.worst else 0.0)))
    nets = sorted(((Net(graph.name(b), loads, graph.max_fanout.get(b)), b)
                   for b, loads in graph.loads.items()), key=lambda nb: (-nb[0].loads, nb[0].name))
    # a top-level input is driven outside the netlist: its loads are checked where its
    # driver is (a block's inputs in the whole plugin)
    over_limit = tuple(n for n, b in nets
                       if n.effective > fanout_limit and b not in graph.input_bits)
    nets = [n for n, _ in nets]
    fanout_bit, fanout = max(graph.loads.items(), key=lambda kv: kv[1], default=(None, 0))
    return TimingEstimate(
        worst=path, endpoints=len(graph.ends), over_budget=over, budget_ns=budget_ns,
        max_fanout=fanout, max_fanout_net=graph.name(fanout_bit) if fanout_bit else "",
        loops=loops, unknown_cells=tuple(sorted(graph.unknown)), blocks=blocks,
        dsp_folded=graph.folded, max_lut_levels=deepest[0] if deepest else 0,
        deepest=deep_path, largest_nets=tuple(nets[:largest]),
        nets_over_limit=over_limit,
        fanout_limit=fanout_limit, bram_reads_into_logic=graph.rams_into_logic(),
        ram_output_ffs=graph.ram_output_registers())


def _cell_label(cell):
    """A cell's name for reports: ``decoders.fx_mul0.$mul$...`` from Yosys's flattened
    ``$flatten\\decoders.\\fx_mul0.$mul$...``; for a cell Yosys named itself, the
    Python source line that made it (``fp32_mul.py:224``, from its ``src`` attribute)."""
    name = cell["name"]
    if name.startswith("$flatten"):
        return name[len("$flatten"):].replace("\\", "").lstrip(".")
    for src in str(cell.get("attributes", {}).get("src", "")).split("|"):
        path, _, line = src.rpartition(":")
        if path.endswith(".py"):
            return f"{path.rsplit('/', 1)[-1]}:{line.split('.')[0]}"
    return name


def estimate(json_path, **kwargs):
    """:func:`estimate_json` of a netlist file (``.json``, or gzip-compressed ``.json.gz``)."""
    opener = gzip.open if str(json_path).endswith(".gz") else open
    with opener(json_path, "rt") as f:
        return estimate_json(json.load(f), **kwargs)


_DIGEST = None


def estimator_digest():
    """A digest of this module's source: what a cached estimate was computed by (a cache
    estimates again from the kept netlist when it changes)."""
    global _DIGEST
    if _DIGEST is None:
        _DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return _DIGEST
