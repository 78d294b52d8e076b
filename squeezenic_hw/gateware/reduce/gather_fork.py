"""The gather phase (``docs/wire-format.md`` section 8.1): each gather frame a node takes,
and each one it makes (the chunk it finishes), goes to its host's result frames and, unless
the successor finished the chunk, on to the successor unchanged."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import AxisBeat, axis_signature
from squeezenic_hw.gateware.common.stream import BlockRamFifo, LutramFifo
from squeezenic_hw.spec.header import DEFAULT_MTU

from .layouts import CheckedBeat, ReduceConfig

__all__ = ["GatherFork"]

#: Beats of a queue beyond its whole frames: what the one-cycle-old level misses.
_SLACK = 4


def _frame_beats(mtu):
    """Beats of the longest frame of ``mtu`` bytes."""
    return -(-mtu // 64)


class GatherFork(wiring.Component):
    """Sends each gather frame, whole and unchanged, to the host's result frames and, when
    the successor is not the chunk's finisher, to the successor: those the checker takes
    (``i``, in transit) and those the node makes (``made``, which start a chunk's gather).

    The successor r + 1 finished chunk ``origin`` when r + 1 ≡ ``origin`` − 1 (mod N),
    that is ``origin`` ≡ r + 2: the gather has then gone round, and the frame is not
    forwarded. A frame the node makes is always forwarded.

    The gathers round the ring wait only in these queues, so the forward queue is the
    ring's buffer at this node, and the fork admits frames to it as bubble flow control
    does: a frame in transit when the queue has room for it, a frame the node makes only
    when the queue has room for two. Then the queues round the ring are never all full,
    and the gathers always move: a ring of nodes forwarding to each other, each waiting
    for its successor's room, would never move again. Each output offers a frame once it
    is whole in its queue (store and forward), so a reader of it never waits on the other
    output or on the inputs.

    Parameters
    ----------
    mtu : int
        The longest gather frame, 144 … 9600 bytes (default 1518), L = ⌈mtu/64⌉ beats:
        the forward queue holds three such frames, the host's two (:attr:`forward_depth`,
        :attr:`host_depth`; block RAM from 64 beats).

    Attributes
    ----------
    i : In(stream.Signature(CheckedBeat))
        The gather-phase frames the checker takes.
    made : In(axis_signature())
        The gather frames the node makes.
    forward : Out(axis_signature())
        The frames for the successor.
    host : Out(axis_signature())
        Every frame, for the host's result frames.
    cfg : In(ReduceConfig)
        ``nodes`` and ``rank`` are read (into a register, a cycle later).

    Notes
    -----
    Latency: 2 cycles from a frame's header offered to its first beat taken (the
    admission, then the input register), then the queues' two, and a frame leaves once
    its last beat is in. Throughput: one beat per cycle within a frame, a cycle between
    frames. Backpressure: ``i.ready`` and ``made.ready`` are registers, set for the
    admitted input while its frame lasts; a frame is admitted at its header when both its
    queues have the room above (transit first when both wait and the last admitted was
    made, else the other). Nothing is dropped or reordered. Only valid bits, pointers,
    frame counts and the admission state are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.gather_fork import GatherFork;
    print(synth.synthesize(GatherFork(), timing=True).summary())"``: 759 LUT, 90 LUTRAM
    (the host queue), 1 965 FF, 9 BRAM36 (the forward queue, 76 beats of 625 bits), 0
    DSP; estimated 2.75 ns, at most 5 LUT levels.
    """

    def __init__(self, *, mtu=DEFAULT_MTU):
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 144 <= mtu <= 9600:
            raise ValueError(f"mtu must be an int from 144 to 9600, got {mtu!r}")
        self.mtu = mtu
        self.frame_beats = _frame_beats(mtu)
        self.forward_depth = 3 * self.frame_beats + _SLACK
        self.host_depth = 2 * self.frame_beats + _SLACK
        super().__init__({
            "i": In(stream.Signature(CheckedBeat)),
            "made": In(axis_signature()),
            "forward": Out(axis_signature()),
            "host": Out(axis_signature()),
            "cfg": In(ReduceConfig),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        frame = self.frame_beats
        # the chunk the successor finished: rank + 2 (mod N)
        finished_by_next = Signal(4)
        plus2 = c.rank + 2
        m.d.sync += finished_by_next.eq(Mux(plus2 >= c.nodes, plus2 - c.nodes, plus2))

        # the queues; each output offers a frame once its last beat is in
        width = data.Layout.cast(AxisBeat).size
        queues, counts = {}, {}
        for name, depth in (("forward", self.forward_depth), ("host", self.host_depth)):
            kind = BlockRamFifo if depth >= 64 else LutramFifo
            q = queues[name] = m.submodules[f"{name}_queue"] = kind(width=width, depth=depth)
            out = getattr(self, name)
            count = Signal(range(depth + 1), name=f"{name}_frames")
            # a whole frame is queued: a register of its own, for the reader's valid
            complete = Signal(name=f"{name}_complete")
            head = Signal(AxisBeat, name=f"{name}_head")
            m.d.comb += [head.eq(q.r_data), out.payload.eq(head),
                         out.valid.eq(q.r_rdy & complete), q.r_en.eq(out.ready & complete)]
            counts[name] = (count, complete, out.valid & out.ready & head.last)

        # the room, from the levels of a cycle ago: a frame in transit, two frames made
        fwd_level, host_level = queues["forward"].level, queues["host"].level
        room_one = Signal(name="forward_room_one")
        room_two = Signal(name="forward_room_two")
        host_room = Signal(name="host_room")
        m.d.sync += [
            room_one.eq(fwd_level <= self.forward_depth - _SLACK - frame),
            room_two.eq(fwd_level <= self.forward_depth - _SLACK - 2 * frame),
            host_room.eq(host_level <= self.host_depth - _SLACK - frame),
        ]

        # the admission: a frame at a time, from its header
        active = Signal(name="admitted")                 # a frame is admitted and passing
        from_made = Signal(name="admitted_made")         # ... from ``made``
        forwarding = Signal(name="admitted_forwarded")   # ... and it goes on
        last_made = Signal(name="last_admitted_made")
        transit_fwd = self.i.payload.info.origin != finished_by_next
        transit_ok = self.i.valid & host_room & (room_one | ~transit_fwd)
        made_ok = self.made.valid & host_room & room_two
        take_made = made_ok & (~transit_ok | ~last_made)
        done = Signal()
        with m.If(~active):
            with m.If(transit_ok | made_ok):
                m.d.sync += [active.eq(1), from_made.eq(take_made), last_made.eq(take_made),
                             forwarding.eq(take_made | transit_fwd)]
        with m.Elif(done):
            m.d.sync += active.eq(0)

        ready_i = Signal(name="i_ready")
        ready_made = Signal(name="made_ready")
        m.d.comb += [ready_i.eq(active & ~from_made), ready_made.eq(active & from_made),
                     self.i.ready.eq(ready_i), self.made.ready.eq(ready_made)]
        beat = Signal(AxisBeat, name="admitted_beat")
        m.d.comb += beat.eq(Mux(from_made, self.made.payload, self.i.payload.beat))
        moved = Mux(from_made, self.made.valid, self.i.valid) & active
        m.d.comb += done.eq(moved & beat.last)

        # the input register, then the queues
        valid = Signal(name="beat_valid")
        to_forward = Signal(name="beat_to_forward")
        held = Signal(AxisBeat, reset_less=True)
        m.d.sync += [valid.eq(moved), to_forward.eq(moved & forwarding), held.eq(beat)]
        m.d.comb += [
            queues["forward"].w_en.eq(to_forward),
            queues["forward"].w_data.eq(held),
            queues["host"].w_en.eq(valid),
            queues["host"].w_data.eq(held),
        ]
        for name, (count, complete, read_last) in counts.items():
            count_next = count + (queues[name].w_en & held.last) - read_last
            m.d.sync += [count.eq(count_next), complete.eq(count_next != 0)]
        return m
