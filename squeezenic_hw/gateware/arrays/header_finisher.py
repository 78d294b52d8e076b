"""Completes the wire frames of narrow lanes, once for all lanes.

The narrow generator lanes send bare beats (``NarrowTxLane(bare=True)``,
:class:`~squeezenic_hw.gateware.common.layouts.BareBeat`): ``tdata`` and ``tlast``, with
the header's IPv4 total length and checksum zero and ``tuser_src``/``tuser_dst`` in its
UDP length and checksum fields. Everything left out follows from the header's ``n``
and the build's code width, so one finisher behind the arbiter works it out for every
lane, and the arbiter carries 513 bits a beat instead of 625.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    AxisBeat,
    axis_signature,
    bare_signature,
    field_be,
    field_le,
    keep_through,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer, Stager, stage_enable
from squeezenic_hw.gateware.lane.header_builder import ipv4_checksum_stages
from squeezenic_hw.spec.header import HDR, HEADER_LEN

__all__ = ["HeaderFinisher", "FINISHER_CODE_BITS"]

#: Code widths of the lanes a finisher completes (``sign`` and ``fixed:2|4|8``).
FINISHER_CODE_BITS = (1, 2, 4, 8)


def _put_be(value, byte):
    """``(start bit, bits)`` pairs that put a 16-bit value big-endian at ``byte``."""
    return [(8 * byte, value[8:16]), (8 * (byte + 1), value[:8])]


class HeaderFinisher(wiring.Component):
    """Turns the bare beats of narrow lanes into whole AXI-Stream frames.

    For a frame whose header says ``n`` codes of ``code_bits`` bits, the payload is
    p = ⌈n·b/8⌉ bytes, so ``tuser_size`` = 64 + p, the IPv4 total length 50 + p and the
    UDP length 30 + p; the finisher writes those two fields and the IPv4 header
    checksum into the header, moves ``tuser_src``/``tuser_dst`` from the UDP length and
    checksum fields to ``tuser`` (the UDP checksum becomes 0), and sets ``tkeep`` (all
    bytes, but the last beat's p mod 64, or 64).

    Parameters
    ----------
    code_bits : int
        Bits per code of the lanes in front: 1 (``sign``), 2, 4 or 8 (``fixed``).

    Attributes
    ----------
    i : In(bare_signature())
    o : Out(axis_signature())

    Notes
    -----
    Latency: 3 cycles (two pipeline stages and the output register). Throughput: one
    beat per cycle. Backpressure: the stages hold together while the output's skid
    buffer is full; ``i.ready`` is made of two registers. Only valid bits are reset.
    Stages: the lengths and two partial sums of the header's words; their sum (the
    checksum stages of :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`);
    the one's-complement fold and the fields written. A frame's ``tuser`` and last
    ``tkeep`` are held from its header beat on.
    """

    LATENCY = 3

    def __init__(self, code_bits):
        if code_bits not in FINISHER_CODE_BITS or isinstance(code_bits, bool):
            raise ValueError(f"code_bits must be one of {FINISHER_CODE_BITS}, "
                             f"got {code_bits!r}")
        self.code_bits = code_bits
        super().__init__({"i": In(bare_signature()), "o": Out(axis_signature())})

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.out = out = SkidBuffer(AxisBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o))
        last_valid = Signal()
        enable = stage_enable()
        m.d.comb += [enable.eq(~last_valid | out.i.ready), self.i.ready.eq(enable)]
        st = Stager(m, enable, reset_less=True)

        beat = self.i.payload
        first = Signal(init=1)            # the next beat starts a frame
        with m.If(self.i.valid & enable):
            m.d.sync += first.eq(beat.last)

        # n·b code bits; with p = ⌈n·b/8⌉ the lengths are (n·b + 7 + 8·k) >> 3 for k
        # = 50 (IPv4), 30 (UDP), 64 (tuser_size): one adder each
        shift = self.code_bits.bit_length() - 1
        bits = Signal(16 + shift)
        m.d.comb += bits.eq(field_le(beat.data, HDR.N[0], 2) << shift)
        ip_length = ((bits + 7 + 8 * (HEADER_LEN - 14)) >> 3)[:16]
        lengths = Cat(((bits + 7 + 8 * (HEADER_LEN - 34)) >> 3)[:16],
                      ((bits + 7 + 8 * HEADER_LEN) >> 3)[:16],
                      ((bits - 1) >> 3)[:6])          # the last beat's bytes, minus one

        # stages 1 and 2: the checksum's sums (HeaderBuilder's); stage 3: its fold, and
        # the fields written
        checksum = ipv4_checksum_stages(m, st, beat.data, ip_length)
        v1 = st.reg(self.i.valid, name="valid_s1", reset_less=False)
        v2 = st.reg(v1, name="valid_s2", reset_less=False)
        b2 = st.delay(beat, 2, name="beat")
        f2 = st.delay(first, 2, name="first")
        ip_length2 = st.delay(ip_length, 2, name="ip_length")
        lengths2 = st.delay(lengths, 2, name="lengths")
        udp_length2, size2, last_m1_2 = lengths2[:16], lengths2[16:32], lengths2[32:]
        pieces = (_put_be(ip_length2, HDR.IP_TOTAL_LENGTH[0])
                  + _put_be(checksum, HDR.IP_CHECKSUM[0])
                  + _put_be(udp_length2, HDR.UDP_LENGTH[0])
                  + _put_be(Const(0, 16), HDR.UDP_CHECKSUM[0]))
        filled = b2.data
        for start, value in pieces:
            filled = Cat(filled[:start], value, filled[start + 8:])

        # the frame's tuser and last tkeep, from its header on
        src2 = field_be(b2.data, HDR.UDP_LENGTH[0], 2)
        dst2 = field_be(b2.data, HDR.UDP_CHECKSUM[0], 2)
        frame_size = Signal(16, reset_less=True)
        frame_src = Signal(16, reset_less=True)
        frame_dst = Signal(16, reset_less=True)
        last_keep = Signal(DATA_BYTES, reset_less=True)
        with m.If(enable & v2 & f2):
            m.d.sync += [
                frame_size.eq(size2), frame_src.eq(src2), frame_dst.eq(dst2),
                last_keep.eq(keep_through(last_m1_2)),
            ]
        b3 = Signal(AxisBeat)
        m.d.comb += [
            b3.data.eq(Mux(f2, filled, b2.data)),
            b3.last.eq(b2.last),
            b3.keep.eq(Mux(b2.last & ~f2, last_keep, Const(2**DATA_BYTES - 1, DATA_BYTES))),
            b3.size.eq(Mux(f2, size2, frame_size)),
            b3.src.eq(Mux(f2, src2, frame_src)),
            b3.dst.eq(Mux(f2, dst2, frame_dst)),
            last_valid.eq(v2),
            out.i.valid.eq(v2),
            out.i.payload.eq(b3),
        ]
        return m
