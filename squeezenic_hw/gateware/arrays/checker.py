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
"""

import functools

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    AxisBeat,
    axis_signature,
    field_be,
    field_le,
    header_bytes,
)
from squeezenic_hw.spec.header import DEFAULT_PORT, FLAG_ENCODED, HDR

from .arbiter import thermometer_count

__all__ = ["FrameChecker", "CRC_POLY", "crc_advance", "crc_bytes", "advance_rows", "data_rows"]

#: Reflected CRC-32 polynomial (IEEE 802.3, zlib).
CRC_POLY = 0xEDB88320
_MASK32 = 0xFFFFFFFF
_BEAT_BITS = 8 * DATA_BYTES
_GROUPS = 4                        # the data XOR tree is cut in 4 slices of 128 bits


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


def _product(rows, value):
    """``rows · value`` over GF(2) as an Amaranth value (one parity per row)."""
    width = len(value)
    return Cat(*[(value & Const(row, width)).xor() for row in rows])


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
    last beat is taken in cycle ``t`` is in every output from cycle ``t + 6``
    (stages: input register; header check and masking; byte count and the data
    XOR tree in 4 slices; the 4 slices combined and ``A₋ₗ``; the CRC loop; the
    commit of the counters with the last ``A₋₈ₕ`` step).

    Throughput: one beat per cycle, any frame lengths, with no idle cycle needed
    between frames.

    Backpressure: none; ``i.ready = 1``.

    Resources: about 1000 register bits of beat pipeline, the 512 → 32 XOR tree
    of the data matrix (cut in four 128-bit slices), 8 + 15 constant 32 × 32
    matrices around the CRC register (``A₋ₗ`` on the data term, ``A₆₄₋ₗ`` and
    ``A₋₈ₕ`` on the loop), five 64-bit counters, the byte count of ``tkeep``.
    Yosys ``synth_xilinx`` (UltraScale+): 4.3k LUT, 2.1k FF, 94 CARRY4; logic
    depth 17, which is the carry chain of the 64-bit counters (16 CARRY4, i.e. 8
    CARRY8 in Vivado); with narrow counters the deepest path, in the CRC datapath,
    is 7 levels.
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
        return 6

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(1)

        # ---- stage 1: the input beat, and whether it opens a frame --------------
        in_frame = Signal()
        with m.If(self.i.valid):
            m.d.sync += in_frame.eq(~self.i.payload.last)
        s1_valid, s1_first = Signal(), Signal()
        s1_beat = Signal(AxisBeat)
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
        frame_counted = Signal()
        frame_n = Signal(16)
        frame_offset = Signal(32)
        counted = Mux(s1_first, match, frame_counted)
        n_now = Mux(s1_first, field_le(d1, *HDR.N), frame_n)
        offset_now = Mux(s1_first, field_le(d1, *HDR.OFFSET), frame_offset)
        with m.If(s1_valid & s1_first):
            m.d.sync += [frame_counted.eq(match), frame_n.eq(field_le(d1, *HDR.N)),
                         frame_offset.eq(field_le(d1, *HDR.OFFSET))]
        # bytes past tkeep may hold anything: zero them
        masked = Cat(Mux(s1_beat.keep[b], d1[8 * b:8 * b + 8], 0) for b in range(DATA_BYTES))

        s2_valid, s2_first, s2_last, s2_counted, s2_payload = (Signal() for _ in range(5))
        s2_n = Signal(16)
        s2_offset = Signal(32)
        s2_data = Signal(_BEAT_BITS)
        s2_keep = Signal(DATA_BYTES)
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
        frame_bytes_acc = Signal(16)
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

        s3_valid, s3_last, s3_counted, s3_payload = (Signal() for _ in range(4))
        s3_n = Signal(16)
        s3_offset = Signal(32)
        s3_bytes = Signal(16)
        s3_z = Signal(6)            # zero bytes a last beat is short of 64
        s3_slices = Signal(32 * _GROUPS)
        m.d.sync += [
            s3_valid.eq(s2_valid), s3_last.eq(s2_last), s3_counted.eq(s2_counted),
            # a beat without bytes (tkeep = 0) changes nothing
            s3_payload.eq(s2_payload & (k != 0)),
            s3_n.eq(s2_n), s3_offset.eq(s2_offset), s3_bytes.eq(frame_bytes),
            s3_z.eq(Mux(s2_last, DATA_BYTES - k, 0)),
            s3_slices.eq(Cat(*slices)),
        ]

        # ---- stage 4: data term B·D, taken back l = z mod 8 bytes ----------------
        data_term = Signal(32)
        m.d.comb += data_term.eq(Cat(
            s3_slices[_GROUPS * i:_GROUPS * (i + 1)].xor() for i in range(32)))
        l3 = s3_z[:3]
        e = Signal(32)
        with m.Switch(l3):
            for j in range(8):
                with m.Case(j):
                    m.d.comb += e.eq(_product(advance_rows(-j), data_term) if j else data_term)

        s4_valid, s4_last, s4_counted, s4_payload = (Signal() for _ in range(4))
        s4_n = Signal(16)
        s4_offset = Signal(32)
        s4_bytes = Signal(16)
        s4_l = Signal(3)
        s4_h = Signal(3)
        s4_e = Signal(32)
        m.d.sync += [
            s4_valid.eq(s3_valid), s4_last.eq(s3_last), s4_counted.eq(s3_counted),
            s4_payload.eq(s3_payload), s4_n.eq(s3_n), s4_offset.eq(s3_offset),
            s4_bytes.eq(s3_bytes), s4_l.eq(l3), s4_h.eq(s3_z[3:]), s4_e.eq(e),
        ]

        # ---- stage 5: the CRC register (the only loop) --------------------------
        crc_reg = Signal(32, init=_MASK32)
        fix_h = Signal(3)           # A₋₈ₕ still to apply after a short last beat
        crc_next = Signal(32)
        m.d.comb += crc_next.eq(crc_reg)
        with m.If(s4_payload):
            with m.Switch(s4_l):
                for j in range(8):
                    with m.Case(j):
                        m.d.comb += crc_next.eq(
                            _product(advance_rows(DATA_BYTES - j), crc_reg) ^ s4_e)
        with m.Else():
            # never together with a payload beat: a header beat (or nothing) follows
            # a frame's last beat
            with m.Switch(fix_h):
                for h in range(1, 8):
                    with m.Case(h):
                        m.d.comb += crc_next.eq(_product(advance_rows(-8 * h), crc_reg))
        m.d.sync += [crc_reg.eq(crc_next), fix_h.eq(Mux(s4_payload & s4_last, s4_h, 0))]

        s5_commit, s5_counted = Signal(), Signal()
        s5_n = Signal(16)
        s5_offset = Signal(32)
        s5_bytes = Signal(16)
        m.d.sync += [
            s5_commit.eq(s4_valid & s4_last), s5_counted.eq(s4_counted), s5_n.eq(s4_n),
            s5_offset.eq(s4_offset), s5_bytes.eq(s4_bytes),
        ]

        # ---- stage 6: commit the frame (its last A₋₈ₕ step is in crc_next) -------
        have_offset = Signal()
        with m.If(s5_commit):
            with m.If(s5_counted):
                m.d.sync += [
                    self.frames.eq(self.frames + 1),
                    self.elements.eq(self.elements + s5_n),
                    self.bytes.eq(self.bytes + s5_bytes),
                    self.last_offset_end.eq(s5_offset + s5_n),
                    have_offset.eq(1),
                    self.crc.eq(~crc_next),
                ]
                with m.If(have_offset & (s5_offset != self.last_offset_end)):
                    m.d.sync += self.gaps.eq(self.gaps + 1)
            with m.Else():
                m.d.sync += self.bypass.eq(self.bypass + 1)
        return m
