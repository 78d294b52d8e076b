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
from squeezenic_hw.spec.header import HDR

__all__ = ["HeaderFinisher"]

_IP_START = HDR.IP_VIHL[0]            # the IPv4 header: 10 big-endian words from here
_IP_WORDS = 10


def _be_word(data, byte):
    """The big-endian 16-bit word at ``byte`` of a beat's data."""
    return Cat(data[8 * (byte + 1):8 * (byte + 2)], data[8 * byte:8 * (byte + 1)])


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
    Stages: the lengths and three partial sums of the header's words (carry-save, one
    carry chain each); their sum; the one's-complement fold and the fields written.
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

        # stage 1: the lengths; the nine other header words in three sums of three
        size = beat.size
        ip_length = (size - 14)[:16]
        udp_length = (size - 34)[:16]
        words = [_be_word(beat.data, _IP_START + 2 * w) for w in range(_IP_WORDS)
                 if _IP_START + 2 * w not in (HDR.IP_TOTAL_LENGTH[0], HDR.IP_CHECKSUM[0])]
        words.append(ip_length)
        assert len(words) == 9
        sums = [st.reg(_add3(*words[3 * j:3 * j + 3]), name=f"sum{j}") for j in range(3)]
        v1 = st.reg(self.i.valid, name="v1", reset_less=False)
        b1 = st.reg(beat, name="b1")
        f1 = st.reg(first, name="f1")
        lengths1 = st.reg(Cat(ip_length, udp_length), name="lengths1")
        # stage 2: the header's sum
        total = st.reg(_add3(*sums), name="total")
        v2 = st.reg(v1, name="v2", reset_less=False)
        b2 = st.reg(b1, name="b2")
        f2 = st.reg(f1, name="f2")
        lengths2 = st.reg(lengths1, name="lengths2")
        # stage 3: the fold and the fields written
        once = Signal(17)
        m.d.comb += once.eq(total[:16] + total[16:])
        checksum = ~(once[:16] + once[16])[:16]
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


def _add3(a, b, c):
    """``a + b + c`` (16-bit words) with one carry chain: a carry-save step, then one add."""
    a, b, c = (x.as_unsigned() if hasattr(x, "as_unsigned") else x for x in (a, b, c))
    width = max(len(a), len(b), len(c)) + 2
    majority = (a & b) | (a & c) | (b & c)
    return ((a ^ b ^ c) + (majority << 1))[:width]
