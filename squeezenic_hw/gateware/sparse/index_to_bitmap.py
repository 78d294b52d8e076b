"""Index list → keep bitmap, for RX decoding of codec 7 (``threshold``) wire frames.

A threshold wire frame in the index layout carries ``k`` uint16 LE indices
where a bitmap-layout frame carries ``⌈n/8⌉`` bytes of keep bits. This block
turns the index list into the bitmap the same kept set would have, as 512-bit
beats (bit ``i`` of the bitmap is bit ``i % 512`` of beat ``i // 512``; bits
``≥ n`` zero), so that the RX lane decodes both layouts with one bitmap path.

Decode rule (``docs/threshold.md``, :func:`squeezenic_hw.reference.threshold.decode_payload`):
entry ``j`` is *used* when ``idx_j < n`` and ``idx_j`` is greater than every
earlier used entry of the frame; used entries set their bit, other entries set
nothing and make the frame a layout error.
"""

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.stream import SkidBuffer

__all__ = [
    "BITMAP_BEAT_BITS", "ENTRIES_PER_BEAT", "index_desc_layout", "bitmap_beat_layout",
    "IndexToBitmap",
]

#: Bits per bitmap (output) beat and per index (input) beat.
BITMAP_BEAT_BITS = 512
#: uint16 index entries per 512-bit input beat.
ENTRIES_PER_BEAT = BITMAP_BEAT_BITS // 16

_BEAT_SHIFT = 9                      # log2(BITMAP_BEAT_BITS)
_BEAT_INDEX_BITS = 16 - _BEAT_SHIFT  # output beat number of a 16-bit index (n ≤ 65535: 128 beats)

#: One per frame: elements ``n`` (≥ 1) and index entries ``k``.
index_desc_layout = data.StructLayout({"n": unsigned(16), "k": unsigned(16)})

#: One bitmap beat; ``error`` is meaningful with ``last`` only (zero on other beats).
bitmap_beat_layout = data.StructLayout({
    "data": unsigned(BITMAP_BEAT_BITS),
    "last": unsigned(1),
    "error": unsigned(1),
})


def _datapath(shape, name):
    """A register of data: no reset."""
    return Signal(shape, name=name, reset_less=True)


class IndexToBitmap(wiring.Component):
    """Turn each frame's index list into its keep bitmap (threshold RX, index layout).

    Per frame, in order: one ``desc`` (``n ≥ 1`` elements, ``k`` entries), then
    exactly ``⌈2k/64⌉`` beats on ``i`` (none when ``k = 0``): entry ``j`` is bits
    ``[16j, 16j + 16)`` of the frame's index byte string (beat ``j // 32``, LE),
    and the bytes past ``2k`` in the last beat are ignored. The output is exactly
    ``⌈n/512⌉`` beats per frame, ``last`` on the final one, whose ``error`` says
    the frame had an entry that is not used (not strictly increasing among the
    used ones, or ``≥ n``). ``n = 0`` is outside the contract (it gives 128 zero
    beats, every entry an error).

    Parameters
    ----------
    entries_per_cycle : int
        Index entries examined per cycle: 1 or 2 (default 2).

    Attributes
    ----------
    desc : In(stream.Signature(index_desc_layout))
    i : In(stream.Signature(unsigned(512)))
    o : Out(stream.Signature(bitmap_beat_layout))

    Notes
    -----
    Structure: a two-entry descriptor queue; the next index beat waits in a
    register (``i.ready`` is high while it is empty and beats of an accepted
    ``desc`` are still to come); the current beat is a shift register, so that
    each cycle the next ``entries_per_cycle`` entries (an *item*) are compared
    with ``n`` and the last used entry, and the item with its used flags goes
    into a skid buffer. From there, each cycle either sets the bits of the
    item's pending used entries that belong to the bitmap beat being built, or
    gives that beat (when the next used entry lies in a later beat, or after
    the frame's last item up to beat ``⌈n/512⌉ − 1``); the bits are set in the
    cycle after (from one-hot decoded positions) and a given beat goes through
    an output skid buffer. Datapath registers (beats, entries, the bitmap being
    built) take no reset.

    Throughput: ``entries_per_cycle`` entries per cycle, and one cycle per
    output beat (an output beat costs at most one cycle beyond its entries). With
    2, an item takes a second cycle only when its second entry is used and
    starts a later output beat. Back to back, a frame takes (its last output
    beat after the previous frame's) at most ``1 + k + ⌈n/512⌉`` cycles with 1
    entry per cycle, and with 2 at most ``1 + ⌈k/2⌉ + h + ⌈n/512⌉ ≤ 1 + ⌈k/2⌉
    + 2·⌈n/512⌉``, ``h`` being the output beats holding entries; frames with
    ``k = 0`` take one cycle each.

    Latency: ``desc`` with ``k = 0`` accepted in cycle ``t``: its (only) beat
    is on ``o`` in cycle ``t + 5``. An index beat accepted in cycle ``t`` (the
    cycle after its ``desc`` at the earliest): a bitmap beat that holds only
    its first entry is on ``o`` in cycle ``t + 5`` when it is the frame's last,
    two cycles later per further beat.

    Backpressure: ``o.valid & ~o.ready`` holds the beat on ``o``; the block keeps
    examining entries of the current output beat and stalls when it has the
    next one to give. Nothing is lost. ``desc.ready``, ``i.ready`` and the
    output are registers (``o.ready`` reaches only the output buffer). An
    input beat is accepted only for a frame whose ``desc`` was accepted and
    which still expects beats, and the next ``desc`` only once every index beat
    of the previous ones is in: the beats of each frame come between its
    ``desc`` and the next.
    """

    def __init__(self, *, entries_per_cycle=2):
        if (not isinstance(entries_per_cycle, int) or isinstance(entries_per_cycle, bool)
                or entries_per_cycle not in (1, 2)):
            raise ValueError(f"entries_per_cycle must be 1 or 2, got {entries_per_cycle!r}")
        self.entries_per_cycle = entries_per_cycle
        super().__init__({
            "desc": In(stream.Signature(index_desc_layout)),
            "i": In(stream.Signature(unsigned(BITMAP_BEAT_BITS))),
            "o": Out(stream.Signature(bitmap_beat_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        P = self.entries_per_cycle

        # ---- descriptors: a two-entry queue, decoded on the way in -------------------
        frame_layout, desc_q, dp, fetching, desc_in = self._descriptors(m, P=P)

        # ---- index beats: one waits in `next_beat` with its number of entries ---------
        to_fetch = Signal(16)       # entries of the last accepted desc not yet on i
        next_beat = _datapath(BITMAP_BEAT_BITS, "next_beat")
        # items (P entries each) in a beat, as a thermometer code: bit j set = more than j
        slots = ENTRIES_PER_BEAT // P
        next_items = _datapath(slots, "next_items")
        next_valid = Signal()
        m.d.comb += self.i.ready.eq(fetching & ~next_valid)
        beat_in = self.i.valid & self.i.ready
        room = ENTRIES_PER_BEAT
        # the beat's items: ⌈min(to_fetch, 32)/P⌉, as a thermometer code
        beat_items = Cat(to_fetch > P * j for j in range(slots))
        with m.If(desc_in):
            m.d.sync += [to_fetch.eq(dp.k), fetching.eq(dp.k != 0)]
        with m.Elif(beat_in):
            m.d.sync += [
                to_fetch.eq(Mux(to_fetch > room, to_fetch - room, 0)),
                fetching.eq(to_fetch > room),
                next_beat.eq(self.i.payload),
                next_items.eq(beat_items),
            ]

        # ---- feed and filter: the frame's entries, P at a time, with their used flags --
        # The current index beat is a shift register: entry 0 is always in bits 15:0, so
        # the compares see no read mux. An item (P entries, or none for k = 0) goes to a
        # skid buffer with each entry's used flag; `last` on the item with the frame's
        # last entries, `error` then says whether any entry of the frame was not used.
        item_layout = data.StructLayout({
            "entries": data.ArrayLayout(unsigned(16), 2),
            "used": unsigned(2),
            "last": unsigned(1),
            "error": unsigned(1),
            "last_beat": unsigned(_BEAT_INDEX_BITS),
        })
        m.submodules.items = items = SkidBuffer(item_layout)
        frame = _datapath(frame_layout, "frame")
        active = Signal()           # a frame is loaded
        k_left = Signal(16)         # its entries not yet sent
        no_entries = Signal()       # k_left = 0
        last_item = Signal()        # k_left ≤ P
        two_left = Signal()         # k_left ≥ 2
        floor_valid = Signal()      # an entry of the frame has been used
        floor = _datapath(16, "floor")   # the last used entry
        err = Signal()
        buf = _datapath(BITMAP_BEAT_BITS, "buf")
        items_left = Signal(slots)  # items left in buf, a thermometer code

        fire = Signal()
        m.d.comb += fire.eq(active & (no_entries | items_left[0]) & items.i.ready)
        entries = [buf[16 * j:16 * (j + 1)] for j in range(P)]
        valid = [~no_entries, two_left][:P]
        used = []
        for j, e in enumerate(entries):
            # "above every earlier used entry": the other entry of the item if it is
            # used, else the floor
            above = ~floor_valid | (e > floor)
            if j == 1:
                above = Mux(used[0], e > entries[0], above)
            u = Signal(name=f"used{j}")
            m.d.comb += u.eq(valid[j] & (e < frame.n) & above)
            used.append(u)
        bad = Cat(valid[j] & ~used[j] for j in range(P)).any()
        m.d.comb += [
            items.i.valid.eq(fire),
            items.i.payload.entries[0].eq(entries[0]),
            items.i.payload.entries[1].eq(entries[-1]),
            items.i.payload.used.eq(Cat(*used)),
            items.i.payload.last.eq(last_item),
            items.i.payload.error.eq(err | bad),
            items.i.payload.last_beat.eq(frame.last_beat),
        ]

        # The next frame is loaded as this one's last item goes (or while idle).
        load_frame = Signal()
        m.d.comb += [
            load_frame.eq(desc_q.o.valid & (~active | (fire & last_item))),
            desc_q.o.ready.eq(load_frame),
        ]
        with m.If(load_frame):
            m.d.sync += [
                active.eq(1),
                frame.eq(desc_q.o.payload),
                k_left.eq(desc_q.o.payload.k),
                no_entries.eq(desc_q.o.payload.no_entries),
                last_item.eq(desc_q.o.payload.last_item),
                two_left.eq(desc_q.o.payload.two),
                floor_valid.eq(0),
                err.eq(0),
            ]
        with m.Elif(fire):
            m.d.sync += [
                active.eq(~last_item),
                k_left.eq(k_left - P),
                no_entries.eq(last_item),
                last_item.eq(k_left <= 2 * P),
                two_left.eq(k_left >= P + 2),
                floor_valid.eq(floor_valid | Cat(*used).any()),
                err.eq(err | bad),
            ]
            for j in range(P):
                with m.If(used[j]):
                    m.d.sync += floor.eq(entries[j])

        # buf takes the next beat once its own entries are gone: the waiting one, or the
        # one arriving now
        empties = ~items_left[0] | (fire & ~no_entries & ~items_left[1])
        with m.If(empties & next_valid):
            m.d.sync += [buf.eq(next_beat), items_left.eq(next_items), next_valid.eq(0)]
        with m.Elif(empties & beat_in):
            m.d.sync += [buf.eq(self.i.payload), items_left.eq(beat_items)]
        with m.Else():
            with m.If(fire & ~no_entries):
                m.d.sync += [buf.eq(buf >> (16 * P)), items_left.eq(items_left >> 1)]
            with m.If(beat_in):
                m.d.sync += next_valid.eq(1)

        # ---- the bitmap beats: which entries set bits now, and which beat is given ----
        # An item's used entries are increasing; an entry of a later beat than the one
        # being built first gives that beat (one per cycle, empty ones included), and
        # after the frame's last item the beats up to ⌈n/512⌉ − 1 are given.
        ev_valid, ev, out = self._events(m, items=items)

        # ---- the bitmap beat: bits set by the events, given into the output buffer ----
        self._bitmap_beat(m, out=out, ev_valid=ev_valid, ev=ev)
        return m

    def _descriptors(self, m, *, P):
        """Descriptors: a two-entry queue, decoded on the way in."""
        frame_layout = data.StructLayout({
            "n": unsigned(16),
            "k": unsigned(16),
            "last_beat": unsigned(_BEAT_INDEX_BITS),     # ⌈n/512⌉ − 1
            "no_entries": unsigned(1),                   # k = 0
            "last_item": unsigned(1),                    # k ≤ P: one item holds them all
            "two": unsigned(1),                          # k ≥ 2
        })
        m.submodules.desc_queue = desc_q = SkidBuffer(frame_layout)
        dp = self.desc.payload
        fetching = Signal()         # index beats of an accepted desc still to come
        m.d.comb += [
            desc_q.i.payload.n.eq(dp.n),
            desc_q.i.payload.k.eq(dp.k),
            desc_q.i.payload.last_beat.eq((dp.n - 1)[_BEAT_SHIFT:16]),
            desc_q.i.payload.no_entries.eq(dp.k == 0),
            desc_q.i.payload.last_item.eq(dp.k <= P),
            desc_q.i.payload.two.eq(dp.k >= 2),
            # the next desc once every index beat of the previous ones is in
            desc_q.i.valid.eq(self.desc.valid & ~fetching),
            self.desc.ready.eq(desc_q.i.ready & ~fetching),
        ]
        desc_in = self.desc.valid & self.desc.ready
        return frame_layout, desc_q, dp, fetching, desc_in

    def _events(self, m, *, items):
        """The bitmap beats' events: which entries of the item set bits now, and which beat is
        given; returns the event register, its valid bit and the output buffer."""
        it = items.o.payload
        beat = Signal(_BEAT_INDEX_BITS)     # output beat being built
        done0 = Signal()                    # entry 0 of the item has set its bit
        done1 = Signal()
        events = data.StructLayout({
            "give": unsigned(1), "last": unsigned(1), "error": unsigned(1),
            "set": unsigned(2),
            "hi": data.ArrayLayout(unsigned(16), 2),     # bit position // 32, one-hot
            "lo": data.ArrayLayout(unsigned(32), 2),     # bit position % 32, one-hot
        })
        ev_valid = Signal()
        ev = _datapath(events, "event")
        m.submodules.out = out = SkidBuffer(bitmap_beat_layout)
        proceed = Signal()                  # the event register can take a new event
        m.d.comb += proceed.eq(~(ev_valid & ev.give & ~out.i.ready))

        pend0 = it.used[0] & ~done0
        pend1 = it.used[1] & ~done1
        later0 = it.entries[0][_BEAT_SHIFT:] != beat
        later1 = it.entries[1][_BEAT_SHIFT:] != beat
        wait0 = pend0 & later0
        wait1 = pend1 & later1
        give = Signal()
        final = Signal()
        set0 = Signal()
        set1 = Signal()
        finished = Signal()                 # the item leaves
        m.d.comb += [
            give.eq(wait0 | (~pend0 & wait1) | (~pend0 & ~pend1 & it.last)),
            final.eq(~pend0 & ~pend1 & it.last & (beat == it.last_beat)),
            set0.eq(pend0 & ~later0),
            set1.eq(pend1 & ~later1 & ~wait0),
            finished.eq((~it.last & ~wait0 & ~wait1) | final),
        ]
        act = items.o.valid & proceed
        m.d.comb += items.o.ready.eq(act & finished)
        with m.If(proceed):
            m.d.sync += [
                ev_valid.eq(items.o.valid),
                ev.give.eq(give),
                ev.last.eq(final),
                ev.error.eq(final & it.error),
                ev.set.eq(Mux(items.o.valid, Cat(set0, set1), 0)),
            ]
            for j in range(2):
                pos = it.entries[j][:_BEAT_SHIFT]
                m.d.sync += [
                    ev.hi[j].eq(Cat(pos[5:] == h for h in range(16))),
                    ev.lo[j].eq(Cat(pos[:5] == b for b in range(32))),
                ]
        with m.If(act):
            m.d.sync += [
                beat.eq(Mux(final, 0, beat + give)),
                done0.eq(~finished & (done0 | set0)),
                done1.eq(~finished & (done1 | set1)),
            ]
        return ev_valid, ev, out

    def _bitmap_beat(self, m, *, out, ev_valid, ev):
        """The bitmap beat: bits set by the events, given into the output buffer."""
        acc = _datapath(BITMAP_BEAT_BITS, "acc")
        fresh = Signal(init=1)              # acc holds nothing of the beat being built
        m.d.comb += [
            out.i.valid.eq(ev_valid & ev.give),
            out.i.payload.data.eq(Mux(fresh, 0, acc)),
            out.i.payload.last.eq(ev.last),
            out.i.payload.error.eq(ev.error),
        ]
        with m.If(ev_valid & ev.give):
            with m.If(out.i.ready):
                m.d.sync += fresh.eq(1)
        with m.Elif(ev_valid & ev.set.any()):
            m.d.sync += fresh.eq(0)
            for i in range(BITMAP_BEAT_BITS):
                hits = [ev.set[j] & ev.hi[j][i >> 5] & ev.lo[j][i & 31] for j in range(2)]
                m.d.sync += acc[i].eq((acc[i] & ~fresh) | hits[0] | hits[1])
        wiring.connect(m, out.o, wiring.flipped(self.o))
