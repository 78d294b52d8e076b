"""Fills in the length and checksum fields of wire-frame headers, once for all lanes.

The narrow generator lanes send their headers with the IPv4 total length, the IPv4
header checksum and the UDP length left at zero (``NarrowTxLane(header_sums=False)``):
the three fields follow from ``tuser_size`` and the header's other IPv4 words, so one
finisher behind the arbiter works them out for every lane instead of one adder tree
per lane.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import AxisBeat, axis_signature
from squeezenic_hw.gateware.common.stream import SkidBuffer, Stager
from squeezenic_hw.gateware.lane.header_builder import ipv4_checksum_stages
from squeezenic_hw.spec.header import HDR

__all__ = ["HeaderFinisher"]


def _put_be(value, byte):
    """``(start bit, bits)`` pairs that put a 16-bit value big-endian at ``byte``."""
    return [(8 * byte, value[8:16]), (8 * (byte + 1), value[:8])]


class HeaderFinisher(wiring.Component):
    """Writes the IPv4 total length, IPv4 header checksum and UDP length into the first
    beat of every frame, from ``tuser_size`` and the header's other IPv4 words.

    The input's headers must have the three fields zero; every other beat passes as it
    is. (``tuser_size`` − 14 is the IPv4 total length, − 34 the UDP length.)

    Attributes
    ----------
    i : In(axis_signature())
    o : Out(axis_signature())

    Notes
    -----
    Latency: 3 cycles (two pipeline stages and the output register). Throughput: one
    beat per cycle. Backpressure: the stages hold together while the output's skid
    buffer is full; ``i.ready`` is made of two registers. Only valid bits are reset.
    Stages: the lengths and two partial sums of the header's words; their sum (the
    checksum stages of :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`);
    the one's-complement fold and the fields written.
    """

    LATENCY = 3

    def __init__(self):
        super().__init__({"i": In(axis_signature()), "o": Out(axis_signature())})

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.out = out = SkidBuffer(AxisBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o))
        last_valid = Signal()
        enable = Signal()
        m.d.comb += [enable.eq(~last_valid | out.i.ready), self.i.ready.eq(enable)]
        st = Stager(m, enable, reset_less=True)

        beat = self.i.payload
        first = Signal(init=1)            # the next beat starts a frame
        with m.If(self.i.valid & enable):
            m.d.sync += first.eq(beat.last)

        # stages 1 and 2: the checksum's sums (HeaderBuilder's); stage 3: its fold, and
        # the fields written
        ip_length = (beat.size - 14)[:16]
        udp_length = (beat.size - 34)[:16]
        checksum = ipv4_checksum_stages(m, st, beat.data, ip_length)
        v1 = st.reg(self.i.valid, name="valid_s1", reset_less=False)
        v2 = st.reg(v1, name="valid_s2", reset_less=False)
        b2 = st.delay(beat, 2, name="beat")
        f2 = st.delay(first, 2, name="first")
        lengths2 = st.delay(Cat(ip_length, udp_length), 2, name="lengths")
        data = Signal(len(b2.data))
        pieces = _put_be(lengths2[:16], HDR.IP_TOTAL_LENGTH[0]) + \
            _put_be(checksum, HDR.IP_CHECKSUM[0]) + _put_be(lengths2[16:], HDR.UDP_LENGTH[0])
        filled = b2.data
        for start, value in pieces:
            filled = Cat(filled[:start], value, filled[start + 8:])
        m.d.comb += data.eq(filled)
        b3 = Signal(AxisBeat)
        m.d.comb += [b3.eq(b2)]
        with m.If(f2):
            m.d.comb += b3.data.eq(data)
        m.d.comb += [
            last_valid.eq(v2),
            out.i.valid.eq(v2),
            out.i.payload.eq(b3),
        ]
        return m

