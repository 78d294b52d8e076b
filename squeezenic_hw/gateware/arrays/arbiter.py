"""Round-robin merge of N AXI-Streams onto one, a whole frame at a time.

The TX array puts the wire streams of its N lanes onto the one wire port with
this arbiter: frames are never interleaved, every lane gets its turn, and the
wire sees no idle cycle between frames while any lane has a frame ready.
"""

import functools
import operator

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import AxisBeat, axis_signature

__all__ = ["FrameArbiter", "MAX_INPUTS", "thermometer_count"]

#: Largest number of inputs (64 lanes of 100 Gb/s = 6400 Gb/s of host bandwidth).
MAX_INPUTS = 64


class FrameArbiter(wiring.Component):
    """Fair round-robin arbiter of whole AXI-Stream frames.

    Parameters
    ----------
    n_inputs : int
        Number of input streams, 1…64.

    Attributes
    ----------
    i : In(axis_signature()).array(n_inputs)
        The inputs, ``i[0] … i[n-1]`` (a list of stream interfaces; the flattened
        port names are ``i__<k>__valid`` etc.).
    o : Out(axis_signature())
        The merged stream; beats are those of the inputs, unchanged
        (``tdata``/``tkeep``/``tlast``/``tuser``).
    grant : Out(range(n_inputs))
        The input currently granted (the frame in progress, or the next one to be
        served): for monitoring and tests.

    Notes
    -----
    Arbitration: a frame, once its first beat is taken, owns the output up to its
    ``tlast`` (idle cycles of that input inside the frame leave the output idle).
    In the cycle of a frame's last beat from input ``k``, the grant goes to the
    first input after ``k`` (``k+1, k+2, …`` wrapping round) whose ``valid`` is
    high, or stays on ``k`` if there is none; so with every input ready the
    grants rotate ``0, 1, …, n-1, 0, …`` and a frame never waits for more than one
    frame of each other input. While no frame is in progress and the granted input
    has nothing to send, the grant moves in the same way to the next input (after
    the granted one) that has; that input's first beat leaves one cycle later.

    Latency: 1 cycle (``o`` is a register): a beat taken from an input in cycle
    ``t`` is on ``o`` in cycle ``t + 1``. A frame arriving on an input that is not
    granted while the arbiter is idle waits one cycle more (the grant moves).

    Throughput: one beat per cycle, with no idle cycle between frames when the
    next input already has its first beat ready at the last beat of the current
    frame (the next grant is decided in that cycle); the granted input's own next
    frame likewise follows at once.

    Backpressure: ``o`` holds (valid and payload) while ``o.valid & ~o.ready``
    and no input beat is taken. ``i[k].ready = (grant == k) & (o.ready | ~o.valid)``,
    so it depends combinationally on ``o.ready``.

    Resources: the output register (625 bits + valid), an n-to-1 AND-OR
    multiplexer of ``AxisBeat`` (625 bits) driven by the one-hot grant, and the
    round robin: the grant as an n-bit thermometer register and two n-bit prefix
    ORs (log2 n levels of 2-input ORs, no chain across the inputs). Yosys
    ``synth_xilinx`` (UltraScale+): n = 8: 2.7k LUT, 0.6k FF, depth 4;
    n = 64: 23k LUT, 0.7k FF, depth 7.
    """

    def __init__(self, n_inputs):
        if isinstance(n_inputs, bool) or not isinstance(n_inputs, int) \
                or not 1 <= n_inputs <= MAX_INPUTS:
            raise ValueError(f"n_inputs must be an int from 1 to {MAX_INPUTS}, got {n_inputs!r}")
        self.n_inputs = n_inputs
        super().__init__({
            "i": In(axis_signature()).array(n_inputs),
            "o": Out(axis_signature()),
            "grant": Out(range(n_inputs)),
        })

    @property
    def latency(self):
        """Cycles from an input beat taken to the same beat on ``o``."""
        return 1

    def elaborate(self, platform):
        m = Module()
        n = self.n_inputs

        enable = Signal()                # the output register takes a beat this cycle
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)
        busy = Signal()                  # a frame of the granted input is in progress

        # The grant is kept as a thermometer, ``upto`` (bits 0 … grant set), from which
        # the round robin needs only prefix ORs (log-depth, no priority chain across
        # the inputs). Its one-hot form drives valid/ready and an AND-OR multiplexer
        # of the beats (shallower than a binary mux tree at 64 inputs).
        upto = Signal(n, init=1)
        onehot = Signal(n)
        m.d.comb += onehot.eq(upto & ~(upto >> 1))
        if n > 1:
            m.d.comb += self.grant.eq(thermometer_count(upto[1:]))

        valids = Signal(n)
        m.d.comb += valids.eq(Cat(s.valid for s in self.i))
        beat = Signal(AxisBeat)
        beat_valid = Signal()
        m.d.comb += [
            beat.eq(functools.reduce(operator.or_, (
                Mux(onehot[k], s.payload.as_value(), 0) for k, s in enumerate(self.i)))),
            beat_valid.eq((valids & onehot).any()),
        ]
        for k, s in enumerate(self.i):
            m.d.comb += s.ready.eq(enable & onehot[k])

        take = Signal()
        m.d.comb += take.eq(beat_valid & enable)
        with m.If(enable):
            m.d.sync += [self.o.valid.eq(beat_valid), self.o.payload.eq(beat)]
        with m.If(take):
            m.d.sync += busy.eq(~beat.last)

        if n > 1:
            # Round robin after the grant: the first other input above it with a beat
            # ready, else the first one from 0, else the grant stays. The granted
            # input's own valid is left out: at a last beat it belongs to the frame
            # ending. ``~prefix_or(x) << 1`` has ones up to x's lowest set bit.
            upper = valids & ~upto
            others = valids & ~onehot
            p_upper = _prefix_or(upper, n)
            p_others = _prefix_or(others, n)
            nxt = Signal(n)
            m.d.comb += nxt.eq(Mux(p_upper[n - 1], ~(p_upper << 1)[:n], ~(p_others << 1)[:n]))
            # Decide at the last beat (no bubble), or while idle at a frame boundary
            # with nothing on the granted input; stay if no other input is ready.
            with m.If(((take & beat.last) | (~busy & ~beat_valid)) & p_others[n - 1]):
                m.d.sync += upto.eq(nxt)
        return m


def _prefix_or(value, width):
    """Bit i = OR of bits 0 … i of ``value``, in log2(width) shift-OR steps."""
    step = 1
    while step < width:
        value = (value | (value << step))[:width]
        step *= 2
    return value


def thermometer_count(prefix):
    """Number of ones of a prefix mask (bits 0 … k-1 set, the rest clear), in binary.

    Bit ``b`` of ``k`` is set when ``k`` lies in an odd block of ``2^b``:
    OR over m of ``prefix[(2m+1)·2^b − 1] & ~prefix[(2m+2)·2^b − 1]`` — two LUT
    levels a bit, where a popcount adder tree would take several.
    """
    width = len(prefix)
    bits = []
    for b in range(max(1, width.bit_length())):
        block = 1 << b
        terms = []
        for top in range(2 * block - 1, width + block, 2 * block):
            low = prefix[top - block]
            terms.append(low & ~prefix[top] if top < width else low)
        bits.append(Cat(*terms).any())
    return Cat(*bits)
