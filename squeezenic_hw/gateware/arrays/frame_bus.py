"""A frame bus: N narrow lanes ORed onto one stream of bare beats, a whole frame at a
time, in round robin.

Each lane drives its side of the bus to zero but while it shows a beat of a frame
(``frame_bus_signature``), so the merge is an OR of the lanes, not a multiplexer, and
the lanes need no header-or-row select: a narrow lane shows its header from a register
that is zero but then, and its rows from its ring's registered read, which reads a zero
row while the lane shows none.
"""

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    BareBeat,
    bare_signature,
    frame_bus_signature,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer

from .arbiter import any_set, check_n_inputs, lowest_set, thermometer_count, tree_or

__all__ = ["FrameBusArbiter"]


class FrameBusArbiter(wiring.Component):
    """Owner of a frame bus of ``n_inputs`` lanes, in round robin by whole frame.

    Parameters
    ----------
    n_inputs : int
        Number of lanes, 1…64.
    head_mask : int or None
        The header bits the lanes may set (bit ``8·byte + i``; default all): the OR
        takes no others, which the lanes must leave zero
        (:func:`~.lane_arrays.generator_head_mask`).

    Attributes
    ----------
    lanes : In(frame_bus_signature()).array(n_inputs)
        The lanes' sides of the bus.
    o : Out(bare_signature())
        The frames, beats as the lanes showed them.
    grant : Out(range(n_inputs))
        The lane that owns the bus (for monitoring and tests).

    Notes
    -----
    Arbitration: one lane owns the bus (``grant``, a one-hot register). It starts a frame
    when it has one ready and the bus is idle, or as its own frame's last beat is taken.
    When the beat shown is its frame's last but one, the bus passes to the first lane
    after the owner (round robin) with a frame ready, which starts its header as the
    owner's last beat is taken: frames follow each other with no idle cycle. An idle
    bus whose owner has no frame ready passes in the same way (that lane's header is
    shown two cycles later). Frames are never interleaved: a lane shows its frame's
    beats in order, one a cycle while ``en``.

    Latency: 1 cycle (``o`` is a register): a beat shown and taken in cycle ``t`` is
    on ``o`` in cycle ``t + 1``.

    Throughput: one beat per cycle, with no idle cycle between frames when a lane has
    a frame ready as the owner shows its frame's last beat but one. Every frame must
    have at least two beats (a header and a row).

    Backpressure: ``en``, which every lane reads, is the ready of ``o``'s
    :class:`~squeezenic_hw.gateware.common.stream.SkidBuffer`: a register. When ``o``
    stalls, ``en`` falls a cycle later (the beat taken then waits in the skid register)
    and every lane holds. Nothing is dropped.

    Reset: the grant and the two valid bits of the output; the beat registers take
    none.

    Resources: an OR of the n beats and n headers (513 bits; ``show``, ``penult``),
    the output and skid registers, and the round robin of
    :class:`~.arbiter.FrameArbiter`.
    """

    def __init__(self, n_inputs, *, head_mask=None):
        if head_mask is None:
            head_mask = (1 << BEAT_BITS) - 1
        if isinstance(head_mask, bool) or not isinstance(head_mask, int) \
                or not 0 <= head_mask < 1 << BEAT_BITS:
            raise ValueError(f"head_mask must be None or an int of {BEAT_BITS} bits, "
                             f"got {head_mask!r}")
        self.n_inputs = check_n_inputs(n_inputs)
        self.head_mask = head_mask
        super().__init__({
            "lanes": In(frame_bus_signature()).array(n_inputs),
            "o": Out(bare_signature()),
            "grant": Out(range(n_inputs)),
        })

    @property
    def latency(self):
        """Cycles from a beat taken from a lane to the same beat on ``o``."""
        return 1

    def elaborate(self, platform):
        m = Module()
        n = self.n_inputs
        lanes = self.lanes
        m.submodules.out = out = SkidBuffer(BareBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o))
        en = out.i.ready

        show = Signal()
        penult = Signal()
        m.d.comb += [
            show.eq(tree_or([lane.show for lane in lanes])),
            penult.eq(tree_or([lane.penult for lane in lanes])),
            out.i.valid.eq(show),
            out.i.payload.eq(tree_or([lane.beat.as_value() for lane in lanes]
                                     + [_masked(lane.head, self.head_mask) for lane in lanes])),
        ]

        # the grant as a thermometer (bits 0 … grant set) and one-hot, loaded together
        upto = Signal(n, init=1)
        onehot = Signal(n, init=1)
        if n > 1:
            m.d.comb += self.grant.eq(thermometer_count(upto[1:]))
        for k, lane in enumerate(lanes):
            m.d.comb += [lane.grant.eq(onehot[k]), lane.en.eq(en)]
        if n > 1:
            readies = Signal(n)
            m.d.comb += readies.eq(Cat(lane.ready for lane in lanes))
            owner_ready = any_set(readies & onehot, n)
            # round robin after the owner: the first other lane above it with a frame
            # ready, else the first from 0, else the owner stays
            upper = readies & ~upto
            others = readies & ~onehot
            any_upper, thermo_upper, lowest_upper = lowest_set(upper, n)
            any_others, thermo_others, lowest_others = lowest_set(others, n)
            with m.If((en & show & penult) | (~show & ~owner_ready)):
                with m.If(any_upper):
                    m.d.sync += [upto.eq(thermo_upper), onehot.eq(lowest_upper)]
                with m.Elif(any_others):
                    m.d.sync += [upto.eq(thermo_others), onehot.eq(lowest_others)]
        return m


def _masked(head, mask):
    """``head`` with the bits outside ``mask`` constant zero (out of the OR)."""
    return Cat(*[head[i] if mask >> i & 1 else Const(0, 1) for i in range(len(head))])
