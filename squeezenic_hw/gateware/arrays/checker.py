"""Counters and running CRC-32 of the host frames one RX lane delivers.

Each RX lane of the RX array ends in a :class:`FrameChecker`; its counters and
CRC are compared with :func:`squeezenic_hw.reference.checker.check_frames` of
the frames the lane should deliver.

The CRC is the CRC-32 of IEEE 802.3 (``zlib.crc32``: reflected polynomial
0xEDB88320, initial value and final XOR 0xFFFFFFFF) of the concatenated
payloads, computed 64 bytes per cycle. In register form (``R``, the CRC before
the final XOR) one beat of 64 bytes ``D`` does ``R ← A₆₄·R ⊕ B·D`` over GF(2),
``Aⱼ`` being ``j`` zero bytes and ``B`` the 512 → 32 data matrix. A last beat of
``k < 64`` bytes is done as a full beat with its tail zeroed, which leaves ``R``
``z = 64 − k`` zero bytes too far on; ``A₋z`` (``A`` run backwards, which
exists as the polynomial has an ``x⁰`` term) takes it back. With
``z = 8h + l``: the beat's own cycle does ``R ← A₆₄₋ₗ·R ⊕ A₋ₗ·B·D`` (the data
term ``A₋ₗ·B·D`` is computed in the pipeline before the loop), and the next
cycle ``R ← A₋₈ₕ·R``. The next payload byte can never arrive in that cycle:
after a frame's last beat comes at best the next frame's header beat, which
has no payload. So the loop of ``R`` has 15 constant 32 × 32 matrices and
keeps one beat per cycle.

A product by a matrix chosen per beat (``A₋ₗ`` on the data term, the 15 of the
loop) is an AND-XOR of the operand with the chosen matrix's entries, which are
registers loaded from the choice a cycle ahead (one per distinct column of
entries): the loop is then the CRC register's bits and those registers through
an XOR tree, with no decode of the choice in it.
"""

import functools

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.frame_arbiter import thermometer_count
from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    AxisBeat,
    axis_signature,
    field_be,
    field_le,
    header_bytes,
)
from squeezenic_hw.spec.header import DEFAULT_PORT, FLAG_ENCODED, HDR

__all__ = ["FrameChecker", "CRC_POLY", "crc_advance", "crc_bytes", "advance_rows", "data_rows"]

#: Reflected CRC-32 polynomial (IEEE 802.3, zlib).
CRC_POLY = 0xEDB88320
_MASK32 = 0xFFFFFFFF
_BEAT_BITS = 8 * DATA_BYTES
_GROUPS = 16                       # the data XOR tree is cut in 16 slices of 32 bits


# ---- CRC-32 as GF(2) matrices (constants of the hardware) --------------------------

def _bit_forward(r):
    return (r >> 1) ^ (CRC_POLY if r & 1 else 0)


def _bit_backward(r):
    # the bit shifted out is the top bit after the step (the polynomial has bit 31 set)
    b = r >> 31
    return (((r ^ (CRC_POLY if b else 0)) << 1) | b) & _MASK32


def crc_advance(r, nbytes):
    """CRC register ``r`` after ``nbytes`` zero bytes (backwards when negative)."""
    step = _bit_forward if nbytes >= 0 else _bit_backward
    for _ in range(8 * abs(nbytes)):
        r = step(r)
    return r


def crc_bytes(r, data):
    """CRC register ``r`` after ``data`` (bytes); ``zlib.crc32(data, c)`` is
    ``crc_bytes(c ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF``."""
    for byte in data:
        r ^= byte
        for _ in range(8):
            r = _bit_forward(r)
    return r


def _rows(columns):
    """Row masks (output bit i = parity of ``input & rows[i]``) of a matrix given by columns."""
    return [sum(((c >> i) & 1) << j for j, c in enumerate(columns)) for i in range(32)]


@functools.cache
def advance_rows(nbytes):
    """Rows of ``A_nbytes`` (32 × 32), ``nbytes`` zero bytes (negative: backwards)."""
    return tuple(_rows([crc_advance(1 << j, nbytes) for j in range(32)]))


@functools.cache
def data_rows():
    """Rows of ``B`` (32 × 512): the register after one 64-byte beat from ``R = 0``.

    Data bit ``p`` is bit ``p % 8`` of byte ``p // 8`` (byte 0 first on the wire).
    """
    base = [crc_bytes(0, bytes([1 << b])) for b in range(8)]
    return tuple(_rows([crc_advance(base[p % 8], DATA_BYTES - 1 - p // 8)
                        for p in range(_BEAT_BITS)]))


_ZERO = (0,) * 32


def _entries(m, matrices, code, name):
    """Registers holding the entries of ``matrices[code]`` (32 × 32 rows), loaded from
    ``code`` one cycle ahead: ``[[(j, entry), ...] for each row i]`` over the columns
    j where some matrix has a 1. One register per distinct column of entries
    (a function of ``code``); data, no reset."""
    regs = {}
    rows = []
    for i in range(32):
        row = []
        for j in range(32):
            table = sum(((mat[i] >> j) & 1) << c for c, mat in enumerate(matrices))
            if not table:
                continue
            if table not in regs:
                reg = Signal(name=f"{name}_entry{len(regs)}", reset_less=True)
                m.d.sync += reg.eq(Const(table, 1 << len(code)).bit_select(code, 1))
                regs[table] = reg
            row.append((j, regs[table]))
        rows.append(row)
    return rows


def _and_xor(entries, value):
    """The product of the matrix whose entries are ``entries`` (see :func:`_entries`) and
    ``value``: bit i the XOR over j of ``value[j] & entry[i][j]``."""
    return Cat(Cat(*[value[j] & e for j, e in row]).xor() for row in entries)


class FrameChecker(wiring.Component):
    """Counts the host frames of one RX lane and keeps a running CRC-32 of their payloads.

    Parameters
    ----------
    port : int
        SqueezeNIC UDP destination port (default 21329).

    Attributes
    ----------
    i : In(axis_signature())
        Host frames; ``i.ready`` is always 1 (the checker never stalls).
    frames : Out(64)
        Counted frames (see below).
    elements : Out(64)
        Sum of the header ``n`` of counted frames.
    bytes : Out(64)
        Sum of the lengths of counted frames (bytes received, from ``tkeep``).
    gaps : Out(64)
        Counted frames whose header ``offset`` differs from ``last_offset_end``
        (the first counted frame after reset only sets it).
    last_offset_end : Out(32)
        ``offset + n`` (mod 2³²) of the last counted frame; 0 after reset.
    bypass : Out(64)
        Frames not counted.
    crc : Out(32)
        ``zlib.crc32`` of the concatenated payloads (bytes 64… of every counted
        frame, as received); 0 after reset.

    Notes
    -----
    A frame is counted when its first beat holds all 64 header bytes
    (``tkeep[63]``) with EtherType 0x0800, byte 14 = 0x45 (IPv4 without
    options), IP protocol 17 (UDP), UDP destination port ``port`` and the
    ``encoded`` flag (byte 45 bit 0) clear, and only then; nothing else is
    checked (:func:`~squeezenic_hw.reference.checker.is_host_frame` is the same rule).
    ``tkeep`` must be a prefix and all ones except on ``tlast`` beats (AXI-Stream
    as OpenNIC sends it); the bytes past it are ignored, whatever they hold.
    ``tuser`` is not used.

    Latency: all the outputs change together, once per frame: a frame whose
    last beat is taken in cycle ``t`` is in every output from cycle ``t + 8``
    (stages: input register; header check and masking; byte count and the data
    XOR tree in 16 slices; the slices combined (and the entries of ``A₋ₗ``);
    ``A₋ₗ`` (and the entries of the loop's step); the CRC loop; the last
    ``A₋₈ₕ`` step in the CRC register; the commit of the counters and the CRC).

    Throughput: one beat per cycle, any frame lengths, with no idle cycle needed
    between frames.

    Backpressure: none; ``i.ready = 1``.

    Reset: the counters, the CRC register, the valid bits and the step code;
    the beat pipeline and the matrix entries take none (the last stage before the
    commit keeps one, so that it is not part of a shift register).

    Resources: about 1000 register bits of beat pipeline, the 512 → 32 XOR tree
    of the data matrix (cut in sixteen 32-bit slices, 512 registers), 8 + 15
    constant 32 × 32 matrices around the CRC register (``A₋ₗ`` on the data term,
    ``A₆₄₋ₗ`` and ``A₋₈ₕ`` on the loop) as ~600 entry registers, five 64-bit
    counters, the byte count of ``tkeep``. Yosys ``synth_xilinx`` (UltraScale+):
    4.0k LUT, 2.9k FF, 6 LUT levels (the data XOR tree; the loop 5).
    """

    def __init__(self, *, port=DEFAULT_PORT):
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 2**16:
            raise ValueError(f"port must be an int from 0 to 65535, got {port!r}")
        self.port = port
        super().__init__({
            "i": In(axis_signature()),
            "frames": Out(64),
            "elements": Out(64),
            "bytes": Out(64),
            "gaps": Out(64),
            "last_offset_end": Out(32),
            "bypass": Out(64),
            "crc": Out(32),
        })

    @property
    def latency(self):
        """Cycles from a frame's last beat taken to the outputs that include it."""
        return 8

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)

        # ---- stage 1: the input beat, and whether it opens a frame --------------
        in_frame = Signal()
        with m.If(self.i.valid):
            m.d.sync += in_frame.eq(~self.i.payload.last)
        s1_valid = Signal()
        s1_first = Signal(reset_less=True)
        s1_beat = Signal(AxisBeat, reset_less=True)
        m.d.sync += [s1_valid.eq(self.i.valid), s1_first.eq(~in_frame),
                     s1_beat.eq(self.i.payload)]

        # ---- stage 2: header check (first beats), fields held for the frame, mask -
        d1 = s1_beat.data
        match = Signal()
        m.d.comb += match.eq(
            s1_beat.keep[DATA_BYTES - 1]
            & (field_be(d1, *HDR.ETHERTYPE) == 0x0800)
            & (header_bytes(d1, *HDR.IP_VIHL) == 0x45)
            & (header_bytes(d1, *HDR.IP_PROTO) == 17)
            & (field_be(d1, *HDR.UDP_DST) == self.port)
            & ~(header_bytes(d1, *HDR.FLAGS) & FLAG_ENCODED).any())
        # the first beat's fields, held for the frame's other beats
        frame_counted = Signal(reset_less=True)
        frame_n = Signal(16, reset_less=True)
        frame_offset = Signal(32, reset_less=True)
        counted = Mux(s1_first, match, frame_counted)
        n_now = Mux(s1_first, field_le(d1, *HDR.N), frame_n)
        offset_now = Mux(s1_first, field_le(d1, *HDR.OFFSET), frame_offset)
        with m.If(s1_valid & s1_first):
            m.d.sync += [frame_counted.eq(match), frame_n.eq(field_le(d1, *HDR.N)),
                         frame_offset.eq(field_le(d1, *HDR.OFFSET))]
        # bytes past tkeep may hold anything: zero them
        masked = Cat(Mux(s1_beat.keep[b], d1[8 * b:8 * b + 8], 0) for b in range(DATA_BYTES))

        # valid bits (``valid``, ``payload``) reset; the rest is data
        s2_valid, s2_payload = Signal(), Signal()
        s2_first, s2_last, s2_counted = (Signal(reset_less=True) for _ in range(3))
        s2_n = Signal(16, reset_less=True)
        s2_offset = Signal(32, reset_less=True)
        s2_data = Signal(_BEAT_BITS, reset_less=True)
        s2_keep = Signal(DATA_BYTES, reset_less=True)
        m.d.sync += [
            s2_valid.eq(s1_valid), s2_first.eq(s1_first), s2_last.eq(s1_beat.last),
            s2_counted.eq(counted),
            # the header beat carries no payload
            s2_payload.eq(s1_valid & counted & ~s1_first),
            s2_n.eq(n_now), s2_offset.eq(offset_now),
            s2_data.eq(masked), s2_keep.eq(s1_beat.keep),
        ]

        # ---- stage 3: bytes of the beat and of the frame, data XOR tree (slices) --
        k = Signal(range(DATA_BYTES + 1))
        m.d.comb += k.eq(thermometer_count(s2_keep))   # tkeep is a prefix
        frame_bytes_acc = Signal(16, reset_less=True)   # read only after a first beat
        frame_bytes = Signal(16)
        m.d.comb += frame_bytes.eq(Mux(s2_first, 0, frame_bytes_acc) + k)
        with m.If(s2_valid):
            m.d.sync += frame_bytes_acc.eq(frame_bytes)
        b_rows = data_rows()
        slice_bits = _BEAT_BITS // _GROUPS
        slices = []
        for row in b_rows:
            for g in range(_GROUPS):
                part = (row >> (g * slice_bits)) & ((1 << slice_bits) - 1)
                slices.append((s2_data[g * slice_bits:(g + 1) * slice_bits]
                               & Const(part, slice_bits)).xor())

        s3_valid, s3_payload = Signal(), Signal()
        s3_last, s3_counted = Signal(reset_less=True), Signal(reset_less=True)
        s3_n = Signal(16, reset_less=True)
        s3_offset = Signal(32, reset_less=True)
        s3_bytes = Signal(16, reset_less=True)
        s3_z = Signal(6, reset_less=True)           # zero bytes a last beat is short of 64
        s3_slices = Signal(32 * _GROUPS, reset_less=True)
        m.d.sync += [
            s3_valid.eq(s2_valid), s3_last.eq(s2_last), s3_counted.eq(s2_counted),
            # a beat without bytes (tkeep = 0) changes nothing
            s3_payload.eq(s2_payload & (k != 0)),
            s3_n.eq(s2_n), s3_offset.eq(s2_offset), s3_bytes.eq(frame_bytes),
            s3_z.eq(Mux(s2_last, DATA_BYTES - k, 0)),
            s3_slices.eq(Cat(*slices)),
        ]

        # ---- stage 4: data term B·D; the entries of A₋ₗ (l = z mod 8) ------------
        # A product by a matrix chosen per beat is an AND-XOR of the operand with the
        # matrix entries: with the entries in registers (one per distinct column of
        # the matrices, loaded a stage ahead) no decode of the choice is in its path.
        s4_valid, s4_payload = Signal(), Signal()
        s4_last, s4_counted = Signal(reset_less=True), Signal(reset_less=True)
        s4_n = Signal(16, reset_less=True)
        s4_offset = Signal(32, reset_less=True)
        s4_bytes = Signal(16, reset_less=True)
        s4_h = Signal(3, reset_less=True)
        s4_data = Signal(32, reset_less=True)
        m.d.sync += [
            s4_valid.eq(s3_valid), s4_last.eq(s3_last), s4_counted.eq(s3_counted),
            s4_payload.eq(s3_payload), s4_n.eq(s3_n), s4_offset.eq(s3_offset),
            s4_bytes.eq(s3_bytes), s4_h.eq(s3_z[3:]),
            s4_data.eq(Cat(s3_slices[_GROUPS * i:_GROUPS * (i + 1)].xor()
                           for i in range(32))),
        ]
        back = _entries(m, [advance_rows(-j) for j in range(8)], s3_z[:3], "back")

        # ---- stage 5: e = A₋ₗ·B·D; the entries of the CRC register's next step ---
        # The step, by code: 0…7: A₆₄₋ₗ after a payload beat of l zero bytes too many;
        # 8: none; 8 + h: A₋₈ₕ (h = 1…7) in the cycle after a short last beat. A
        # payload beat never comes in that cycle: a header beat (or nothing) follows
        # a frame's last beat.
        s5_valid, s5_payload = Signal(), Signal()
        s5_last, s5_counted = Signal(reset_less=True), Signal(reset_less=True)
        s5_n = Signal(16, reset_less=True)
        s5_offset = Signal(32, reset_less=True)
        s5_bytes = Signal(16, reset_less=True)
        s5_e = Signal(32, reset_less=True)   # 0 unless a payload beat
        m.d.sync += [
            s5_valid.eq(s4_valid), s5_last.eq(s4_last), s5_counted.eq(s4_counted),
            s5_payload.eq(s4_payload), s5_n.eq(s4_n), s5_offset.eq(s4_offset),
            s5_bytes.eq(s4_bytes),
            s5_e.eq(Mux(s4_payload, _and_xor(back, s4_data), 0)),
        ]
        # registered a stage ahead too, from the beat entering the loop next (s3 now)
        # and the one entering it now (s4), so that the entries are a LUT of registers;
        # "none" is the CRC register's enable, off (a register too)
        fix_h = Mux(s4_payload & s4_last, s4_h, 0)
        step_code = Signal(4, init=8)
        hold = Signal(init=1)             # beside the entries of the step
        m.d.sync += [
            step_code.eq(Mux(s3_payload, Cat(s3_z[:3], Const(0, 1)), Cat(fix_h, Const(1, 1)))),
            hold.eq(step_code == 8),
        ]
        steps = _entries(m, [advance_rows(DATA_BYTES - j) for j in range(8)] + [_ZERO]
                         + [advance_rows(-8 * h) for h in range(1, 8)], step_code, "step")

        # ---- stage 6: the CRC register (the only loop) --------------------------
        crc_reg = Signal(32, init=_MASK32)
        with m.If(~hold):
            m.d.sync += crc_reg.eq(_and_xor(steps, crc_reg) ^ s5_e)

        # ---- stages 7 and 8: the frame's last A₋₈ₕ step, then its commit ---------
        self._commit(m, s5_valid=s5_valid, s5_last=s5_last, s5_counted=s5_counted, s5_n=s5_n,
                     s5_offset=s5_offset, s5_bytes=s5_bytes, crc_reg=crc_reg)
        return m

    def _commit(self, m, *, s5_valid, s5_last, s5_counted, s5_n, s5_offset, s5_bytes, crc_reg):
        """Stages 7 and 8: the frame's last A₋₈ₕ step, then its commit to the outputs."""
        # Stage 7 is the cycle the CRC register takes that step, so in stage 8 the
        # frame's CRC is the register itself, one LUT from the output register.
        # The s7 registers keep a reset although they are data: it keeps them out
        # of the shift register (SRL16E) Yosys makes of the reset-less chain before,
        # whose output is 0.7 ns late for the 32-bit compare and adders that follow.
        s6_commit, s7_commit = Signal(), Signal()
        s6_counted, s7_counted = Signal(reset_less=True), Signal()
        s6_n, s7_n = Signal(16, reset_less=True), Signal(16)
        s6_offset, s7_offset = Signal(32, reset_less=True), Signal(32)
        s6_bytes, s7_bytes = Signal(16, reset_less=True), Signal(16)
        m.d.sync += [
            s6_commit.eq(s5_valid & s5_last), s6_counted.eq(s5_counted), s6_n.eq(s5_n),
            s6_offset.eq(s5_offset), s6_bytes.eq(s5_bytes),
            s7_commit.eq(s6_commit), s7_counted.eq(s6_counted), s7_n.eq(s6_n),
            s7_offset.eq(s6_offset), s7_bytes.eq(s6_bytes),
        ]

        have_offset = Signal()
        with m.If(s7_commit):
            with m.If(s7_counted):
                m.d.sync += [
                    self.frames.eq(self.frames + 1),
                    self.elements.eq(self.elements + s7_n),
                    self.bytes.eq(self.bytes + s7_bytes),
                    self.last_offset_end.eq(s7_offset + s7_n),
                    have_offset.eq(1),
                    self.crc.eq(~crc_reg),
                ]
                with m.If(have_offset & (s7_offset != self.last_offset_end)):
                    m.d.sync += self.gaps.eq(self.gaps + 1)
            with m.Else():
                m.d.sync += self.bypass.eq(self.bypass + 1)
