"""AXI-Lite register file generated from a :class:`~squeezenic_hw.regmap.registers.RegisterMap`."""

import copy

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.stream import MAX_FANOUT
from squeezenic_hw.regmap.registers import RegisterMap

from .bus import AxiLiteSignature, AxiResp

__all__ = ["AxiLiteRegisterFile"]

#: Widest word address whose "holds a register" decode is a bitmap (2**16 bits).
_BITMAP_WORD_BITS = 16

#: Multiplexers of one tree level that share a copy of the read address digit (each a
#: 33-bit register of ``read_mux_radix`` inputs): a decode of the digit's bits that the
#: LUT mapper shares among the multiplexers then drives a few hundred LUT inputs at most,
#: where one for a whole level of a 64-lane build drove thousands.
_GROUPS_PER_SELECT = 2


class AxiLiteRegisterFile(wiring.Component):
    """OpenNIC AXI-Lite slave holding the registers of ``regmap``.

    Software sees the map described in :mod:`squeezenic_hw.regmap.registers`. Hardware sees
    three interfaces with one member signal per register, named after it and as wide
    as it (``rf.rw.ctrl``, ``getattr(rf.ro, name)``; member widths in
    :attr:`rw_fields`, :attr:`pulse_fields`, :attr:`ro_fields`):

    ``axil`` : ``In(AxiLiteSignature())``
        The AXI-Lite slave port.
    ``rw`` : ``Out(Signature({name: Out(width, init=reset)}))``
        ``rw`` registers, driven from flip-flops that reset to the register's ``reset``.
    ``pulse`` : ``Out(Signature({name: Out(width)}))``
        ``w1p`` registers: zero except for one cycle after a write, when they carry
        ``wdata[width-1:0]`` (flip-flop outputs).
    ``ro`` : ``In(Signature({name: Out(width)}))``
        ``ro`` registers, and each 64-bit counter as one 64-bit member named after the
        counter (read through its ``_lo``/``_hi`` words). They feed one mux level
        before a flip-flop, so drive them from registers.

    (Per-register signals rather than one struct per kind: Amaranth cannot build a
    signal wider than 65536 bits, which a struct of ~3000 registers would exceed.)

    Address decode: bits ``[1:0]`` of the address are ignored, bits
    ``[log2(size)-1:2]`` select the word, and any set bit above them, or a word with
    no register, gets ``SLVERR`` (reads of it return 0, writes change nothing). Writes
    to ``ro`` registers are answered ``OKAY`` and ignored.

    Read path: a pipelined tree of registered ``read_mux_radix``:1 multiplexers indexed
    by the word address, so that it scales to thousands of registers at 250 MHz
    (3000 registers, radix 16: 3 levels of 16:1 muxes). Subtrees without registers are
    pruned. The tree has ``read_pipeline_depth = max(1, ceil((log2(size) - 2) /
    log2(read_mux_radix)))`` register levels; the last one is the response register.

    Parameters
    ----------
    regmap : RegisterMap
        The register map (validated again here; must not be empty).
    read_mux_radix : int
        Inputs per read-mux level, a power of two >= 2.

    Attributes
    ----------
    read_pipeline_depth : int
        Register levels of the read mux tree (see above).
    read_latency : int
        ``read_pipeline_depth + 1``: cycles from the ``ar`` handshake to the first
        cycle of ``rvalid``.
    write_latency : int
        2: cycles from the later of the ``aw`` and ``w`` handshakes to the first
        cycle of ``bvalid``; the ``rw`` field takes the new value and the ``pulse``
        field is high in that same cycle.

    Notes
    -----
    Latency: read ``read_pipeline_depth + 1`` cycles (``ar`` handshake to ``rvalid``);
    write 2 cycles (last of ``aw``/``w`` to ``bvalid``). ``ro`` values are sampled in
    the cycle after the ``ar`` handshake; reading a counter's ``_lo`` word snapshots
    its upper half in that same cycle and a read of ``_hi`` returns that snapshot.

    Throughput: one transaction in flight per channel; reads and writes proceed
    independently. Back to back, one read per ``read_pipeline_depth + 2`` cycles and
    one write per 3 cycles. ``aw`` and ``w`` are accepted in any order or together
    (each has its own holding register); the write happens once both are in.

    Backpressure: ``bvalid``/``rvalid`` and their payloads are registers held until
    ``bready``/``rready``; meanwhile ``awready``/``wready`` (resp. ``arready``) stay
    low, so no response is lost or duplicated. The ready signals never depend on the
    valid signals. Every accepted request gets exactly one response.
    """

    def __init__(self, regmap, *, read_mux_radix=16):
        if not isinstance(regmap, RegisterMap):
            raise ValueError(f"regmap: expected a RegisterMap, got {type(regmap).__name__}")
        regmap.validate()
        # A private copy: registers added to the caller's map later cannot desynchronise
        # the ports made here from the logic made in elaborate().
        regmap = copy.deepcopy(regmap)
        if (not isinstance(read_mux_radix, int) or isinstance(read_mux_radix, bool)
                or read_mux_radix < 2 or read_mux_radix & (read_mux_radix - 1)):
            raise ValueError(f"read_mux_radix: {read_mux_radix!r} is not a power of two >= 2")
        self._regmap = regmap
        self._radix_bits = read_mux_radix.bit_length() - 1
        self.read_mux_radix = read_mux_radix
        self.word_bits = regmap.address_bits - 2
        self.read_pipeline_depth = max(1, -(-self.word_bits // self._radix_bits))
        self.read_latency = self.read_pipeline_depth + 1
        self.write_latency = 2

        rw_fields, pulse_fields, ro_fields = {}, {}, {}
        for r in regmap:
            if r.access == "rw":
                rw_fields[r.name] = r.width
            elif r.access == "w1p":
                pulse_fields[r.name] = r.width
            elif r.counter64 is not None:
                ro_fields[r.counter64] = 64
            else:
                ro_fields[r.name] = r.width
        for name in (*rw_fields, *pulse_fields, *ro_fields):
            if name == "signature":
                raise ValueError("regmap: a register or counter named 'signature' cannot be a "
                                 "port member (name reserved by amaranth.lib.wiring)")
        #: ``{name: width}`` of the ``rw``, ``pulse`` and ``ro`` port members, in map order.
        self.rw_fields, self.pulse_fields, self.ro_fields = rw_fields, pulse_fields, ro_fields
        resets = {r.name: r.reset for r in regmap if r.access == "rw"}
        super().__init__({
            "axil": In(AxiLiteSignature()),
            "rw": Out(wiring.Signature({n: Out(w, init=resets[n]) for n, w in rw_fields.items()})),
            "pulse": Out(wiring.Signature({n: Out(w) for n, w in pulse_fields.items()})),
            "ro": In(wiring.Signature({n: Out(w) for n, w in ro_fields.items()})),
        })

    @property
    def regmap(self):
        """The (copied) register map this register file was built from."""
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        bus = self.axil
        regmap = self._regmap
        abits = regmap.address_bits
        okay, slverr = AxiResp.OKAY.value, AxiResp.SLVERR.value

        def word_of(addr):
            return addr[2:abits]

        def upper_zero(addr):
            return addr[abits:] == 0 if abits < 32 else Const(1)

        # -- write channel -----------------------------------------------------------
        # The valid flags (full, bvalid) are reset; the address, data and response
        # registers are read only while their flag is set and take no reset.
        aw_full = Signal()
        aw_word = Signal(self.word_bits, reset_less=True, attrs={"max_fanout": MAX_FANOUT})
        aw_ok = Signal(reset_less=True)     # address bits above the map are zero
        w_full = Signal()
        w_data = Signal(32, reset_less=True)
        bvalid = Signal()
        bresp = Signal(2, reset_less=True)

        m.d.comb += [
            bus.awready.eq(~aw_full & ~bvalid),
            bus.wready.eq(~w_full & ~bvalid),
            bus.bvalid.eq(bvalid),
            bus.bresp.eq(bresp),
        ]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_full.eq(1), aw_word.eq(word_of(bus.awaddr)),
                         aw_ok.eq(upper_zero(bus.awaddr))]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bvalid.eq(0)

        # Both halves held: write from registers (no input-to-register-file path).
        commit = Signal()
        m.d.comb += commit.eq(aw_full & w_full)
        with m.If(commit):
            mapped = self._mapped(aw_word)
            m.d.sync += [
                aw_full.eq(0), w_full.eq(0), bvalid.eq(1),
                bresp.eq(Mux(aw_ok & mapped, okay, slverr)),
            ]

        for name in self.pulse_fields:
            m.d.sync += getattr(self.pulse, name).eq(0)
        for r in regmap:
            if r.access not in ("rw", "w1p"):
                continue
            with m.If(commit & aw_ok & (aw_word == r.offset >> 2)):
                target = self.rw if r.access == "rw" else self.pulse
                m.d.sync += getattr(target, r.name).eq(w_data[:r.width])

        # -- read channel ------------------------------------------------------------
        depth = self.read_pipeline_depth
        ar_busy = Signal()
        # the read address selects among every register (thousands of loads at 64 lanes):
        # Vivado copies it for its loads
        ar_word = Signal(self.word_bits, reset_less=True, attrs={"max_fanout": MAX_FANOUT})
        ar_ok = Signal(reset_less=True)
        pipe = Signal(depth)          # one-hot: which tree level the read has reached
        rvalid = Signal()
        # The read tree's registers keep their reset, unlike the other data registers:
        # their muxes have constant-0 inputs (absent words, zero-padded narrow registers),
        # from which Yosys makes a per-bit synchronous reset of a reset-less flip-flop,
        # a LUT each (+16% LUTs); with a reset it keeps those zeros in the mux LUTs.
        top = Signal(33)              # response register: data[31:0], mapped[32]

        m.d.comb += [
            bus.arready.eq(~ar_busy),
            bus.rvalid.eq(rvalid),
            bus.rdata.eq(top[:32]),
            bus.rresp.eq(Cat(Const(0, 1), ~top[32])),   # OKAY or SLVERR
        ]
        m.d.sync += pipe.eq(pipe << 1)
        ar_take = bus.arvalid & bus.arready
        with m.If(ar_take):
            m.d.sync += [ar_busy.eq(1), ar_word.eq(word_of(bus.araddr)),
                         ar_ok.eq(upper_zero(bus.araddr)), pipe.eq(1)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += [rvalid.eq(0), ar_busy.eq(0)]
        with m.If(pipe[depth - 1]):
            m.d.sync += rvalid.eq(1)

        # Leaves: 32 data bits and a "mapped" bit per register word.
        hi_snapshots = {}
        leaves = {}
        for r in regmap:
            if r.access == "rw":
                value = getattr(self.rw, r.name)
            elif r.access == "w1p":
                value = Const(0, 32)
            elif r.counter64 is None:
                value = getattr(self.ro, r.name)
            elif r is regmap.counters[r.counter64][0]:
                value = getattr(self.ro, r.counter64)[:32]
            else:
                snap = Signal(32, name=f"{r.counter64}_hi_snapshot", reset_less=True)
                hi_snapshots[r.counter64] = snap
                value = snap
            leaves[r.offset >> 2] = Cat(value, Const(0, 32 - len(value)), Const(1, 1))

        # The read samples its leaves in the cycle after the ar handshake (pipe[0]); the
        # _hi snapshot is taken in that cycle too, so _lo and _hi come from one value.
        for name, (lo, _hi) in regmap.counters.items():
            with m.If(pipe[0] & ar_ok & (ar_word == lo.offset >> 2)):
                m.d.sync += hi_snapshots[name].eq(getattr(self.ro, name)[32:])

        nodes = leaves
        for level in range(depth):
            lo_bit = level * self._radix_bits
            nbits = max(0, min(self._radix_bits, self.word_bits - lo_bit))
            digit = ar_word[lo_bit:lo_bit + nbits]
            groups = {}
            for index, value in nodes.items():
                groups.setdefault(index >> nbits, {})[index & ((1 << nbits) - 1)] = value
            if level == depth - 1:
                assert list(groups) == [0]
                # The response register loads once per read and then holds.
                with m.If(pipe[depth - 1]):
                    with m.If(ar_ok):
                        self._mux(m, top, digit, nbits, groups[0])
                    with m.Else():
                        m.d.sync += top.eq(0)
            else:
                nodes = {}
                for k, (group, children) in enumerate(sorted(groups.items())):
                    if k % _GROUPS_PER_SELECT == 0 and len(groups) > _GROUPS_PER_SELECT:
                        # a copy of the digit for each block of groups: the decode of one
                        # digit would otherwise drive every multiplexer of the level. Kept,
                        # so that no synthesis merges the copies back into one register
                        # (Vivado and Yosys both merge equal flip-flops otherwise), and
                        # copied again by Vivado past ``MAX_FANOUT`` loads.
                        digit = Signal(nbits, name=f"rd_sel{level}_{k // _GROUPS_PER_SELECT}",
                                       reset_less=True,
                                       attrs={"keep": 1, "max_fanout": MAX_FANOUT})
                        with m.If(ar_take):
                            m.d.sync += digit.eq(word_of(bus.araddr)[lo_bit:lo_bit + nbits])
                    node = Signal(33, name=f"rd_l{level}_{group}")
                    self._mux(m, node, digit, nbits, children)
                    nodes[group] = node
        return m

    @staticmethod
    def _mux(m, target, digit, nbits, children):
        if nbits == 0:
            m.d.sync += target.eq(children[0])
            return
        with m.Switch(digit):
            for index, value in sorted(children.items()):
                with m.Case(index):
                    m.d.sync += target.eq(value)
            if len(children) < (1 << nbits):
                with m.Default():
                    m.d.sync += target.eq(0)

    def _mapped(self, word):
        """1 when ``word`` holds a register.

        Up to :data:`_BITMAP_WORD_BITS` word bits, a bit of a constant bitmap indexed
        by ``word`` (a LUT ROM: three LUT levels for the 64-lane plugin map, where
        the compares of an OR of runs take seven); above, an OR of the map's runs
        of words.
        """
        words = sorted(r.offset >> 2 for r in self._regmap)
        if len(word) <= _BITMAP_WORD_BITS:
            return Const(sum(1 << w for w in words), 1 << len(word)).bit_select(word, 1)
        runs = []
        for w in words:
            if runs and runs[-1][1] == w:
                runs[-1][1] = w + 1
            else:
                runs.append([w, w + 1])
        terms = []
        for start, stop in runs:
            if stop - start == 1:
                terms.append(word == start)
            elif start == 0:
                terms.append(word < stop)
            else:
                terms.append((word >= start) & (word < stop))
        result = terms[0]
        for term in terms[1:]:
            result = result | term
        return result
