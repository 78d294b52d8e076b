"""The gather phase at a node that does not finish the chunk (``docs/wire-format.md``
section 8.1): each gather frame taken goes to the host's result frames and, unless the
successor finished the chunk, on to the successor unchanged."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import AxisBeat, axis_signature
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, BlockRamFifo, LutramFifo
from squeezenic_hw.spec.header import DEFAULT_MTU

from .layouts import CheckedBeat, ReduceConfig

__all__ = ["GatherFork"]

#: Fewest entries of an output's queue; the input moves while every queue has room for
#: the beat in the input register and the one behind it.
_DEPTH = 16


class GatherFork(wiring.Component):
    """Sends each gather frame taken, whole and unchanged, to the host's result frames and,
    when the successor is not the chunk's finisher, to the successor.

    The successor r + 1 finished chunk ``origin`` when r + 1 ≡ ``origin`` − 1 (mod N),
    that is ``origin`` ≡ r + 2: the gather has then gone round, and the frame is not
    forwarded.

    Parameters
    ----------
    mtu : int
        The longest gather frame, 144 … 9600 bytes (default 1518): each output's queue
        holds three (:attr:`depth` beats; block RAM from 64), so that nodes forwarding to
        each other round the ring never all wait on one another with frames half sent.

    Attributes
    ----------
    i : In(stream.Signature(CheckedBeat))
        The gather-phase frames the checker takes.
    forward : Out(axis_signature())
        The frames for the successor.
    host : Out(axis_signature())
        Every frame, for the host's result frames.

    Both outputs offer a frame once it is whole in their queue (store and forward).
    cfg : In(ReduceConfig)
        ``nodes`` and ``rank`` are read (into a register, a cycle later).

    Notes
    -----
    Latency: 1 cycle (the input register), then each output queue's two.
    Throughput: one beat per cycle. Backpressure: ``i.ready`` is a register, set while
    every output queue had room for two beats in the cycle before; an output not ready
    fills its queue and then stops the input. Nothing is dropped or reordered. Only valid
    bits, pointers and the frame's forward flag are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.gather_fork import GatherFork;
    print(synth.synthesize(GatherFork(), timing=True).summary())"``: 78 LUT, 87 LUTRAM
    (the queues), 1 946 FF, 0 BRAM, 0 DSP; estimated 2.45 ns, at most 4 LUT levels.
    """

    def __init__(self, *, mtu=DEFAULT_MTU):
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 144 <= mtu <= 9600:
            raise ValueError(f"mtu must be an int from 144 to 9600, got {mtu!r}")
        self.mtu = mtu
        #: Beats each output's queue holds: three of the longest frames.
        self.depth = max(_DEPTH, 3 * -(-mtu // 64))
        super().__init__({
            "i": In(stream.Signature(CheckedBeat)),
            "forward": Out(axis_signature()),
            "host": Out(axis_signature()),
            "cfg": In(ReduceConfig),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        # the chunk the successor finished: rank + 2 (mod N)
        finished_by_next = Signal(4)
        plus2 = c.rank + 2
        m.d.sync += finished_by_next.eq(Mux(plus2 >= c.nodes, plus2 - c.nodes, plus2))

        # each output's frames leave whole: one is offered once its last beat is queued, so
        # a reader granted it never waits on the other output, nor on the input
        width = data.Layout.cast(AxisBeat).size
        kind = BlockRamFifo if self.depth >= 64 else LutramFifo
        queues, frames = {}, {}
        for name in ("forward", "host"):
            q = queues[name] = m.submodules[f"{name}_queue"] = kind(width=width,
                                                                   depth=self.depth)
            out = getattr(self, name)
            count = frames[name] = Signal(range(self.depth + 1), name=f"{name}_frames")
            head = Signal(AxisBeat, name=f"{name}_head")
            complete = count != 0
            m.d.comb += [head.eq(q.r_data), out.payload.eq(head),
                         out.valid.eq(q.r_rdy & complete), q.r_en.eq(out.ready & complete)]
            frames[name] = (count, out.valid & out.ready & head.last)

        advance = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})
        m.d.sync += advance.eq((queues["forward"].level <= self.depth - 3)
                               & (queues["host"].level <= self.depth - 3))
        m.d.comb += self.i.ready.eq(advance)
        valid = Signal()
        beat = Signal(CheckedBeat, reset_less=True)
        with m.If(advance):
            m.d.sync += [valid.eq(self.i.valid), beat.eq(self.i.payload)]
        moves = valid & advance
        # the frame's choice, from its header beat
        forwarding = Signal()
        forward_now = Mux(beat.first, beat.info.origin != finished_by_next, forwarding)
        with m.If(moves & beat.first):
            m.d.sync += forwarding.eq(forward_now)
        m.d.comb += [
            queues["forward"].w_en.eq(moves & forward_now),
            queues["forward"].w_data.eq(beat.beat),
            queues["host"].w_en.eq(moves),
            queues["host"].w_data.eq(beat.beat),
        ]
        for name, (count, read_last) in frames.items():
            m.d.sync += count.eq(count + (queues[name].w_en & beat.beat.last) - read_last)
        return m
