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

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

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
    Throughput: ``entries_per_cycle`` entries per cycle, and one cycle per
    output beat (an output beat costs at most one cycle beyond its entries). With
    2, a cycle takes one entry alone only when the second one is used and starts
    a later output beat, and then at most once more for the odd entry left at the
    end of that input beat. Back to back, a frame takes (its last output beat
    after the previous frame's) ``[k > 0] + k + ⌈n/512⌉`` cycles with 1 entry per
    cycle, and with 2 at most ``[k > 0] + ⌈k/2⌉ + h + ⌈n/512⌉ ≤ [k > 0] + ⌈k/2⌉
    + 2·⌈n/512⌉``, ``h`` being the output beats holding entries; ``[k > 0]`` is
    the cycle that loads the frame's first index beat after its ``desc``.

    Latency: the output is registered. ``desc`` with ``k = 0`` accepted in cycle
    ``t``: its first beat is on ``o`` in cycle ``t + 2``. An input beat accepted
    in cycle ``t`` has its entries examined from ``t + 1``; a bitmap beat is on
    ``o`` two cycles after the cycle its last entry was examined (the next cycle
    notices that the following entry, or the end of the list, lies beyond it).

    Backpressure: ``o.valid & ~o.ready`` holds the beat on ``o``; the block keeps
    examining entries of the current output beat and stalls when it has the next
    one to give. Nothing is lost. ``desc.ready`` depends combinationally on
    ``o.ready``; ``i.ready`` on the block's registers only (through the entry
    compares), never on ``o.ready`` or an input ``valid``. An input beat is
    accepted only for a frame whose ``desc`` was accepted and which still expects
    beats, and the next ``desc`` only in the cycle that gives the current frame's
    last beat (or while idle): frames are strictly sequential.
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

        active = Signal()                              # a frame's desc is loaded
        n = Signal(16)
        last_beat = Signal(_BEAT_INDEX_BITS)           # ⌈n/512⌉ − 1
        floor = Signal(16)                             # last used index + 1 (0: none yet)
        beat = Signal(_BEAT_INDEX_BITS)                # output beat being built
        acc = Signal(BITMAP_BEAT_BITS)                 # its bits so far
        err = Signal()
        # The current input beat is a shift register: entry 0 is always in bits 15:0,
        # so the compares see no read mux.
        buf = Signal(BITMAP_BEAT_BITS)
        count = Signal(range(ENTRIES_PER_BEAT + 1))    # entries left in buf
        pending = Signal(16)                           # entries of the frame not yet on i

        o_data = self.o.payload
        out_free = Signal()
        m.d.comb += out_free.eq(~self.o.valid | self.o.ready)

        # Which entries this cycle takes. Takes are a prefix: a used entry of a later
        # output beat stops the cycle (that beat must be given first).
        entries = [buf[16 * j:16 * (j + 1)] for j in range(P)]
        takes, sets, bads, crosses = [], [], [], []
        new_floor = floor
        for j, e in enumerate(entries):
            # "above every earlier used entry": against the latest used entry of this
            # cycle if any (compared in parallel), else against floor.
            above = e >= floor
            for q in range(j):
                above = Mux(sets[q], e > entries[q], above)
            used = Signal(name=f"used{j}")
            cross = Signal(name=f"cross{j}")
            take = Signal(name=f"take{j}")
            m.d.comb += [
                used.eq(above & (e < n)),
                cross.eq(used & (e[_BEAT_SHIFT:] != beat)),
                take.eq(active & (count > j) & ~cross & (takes[-1] if takes else 1)),
            ]
            takes.append(take)
            crosses.append(cross)
            sets.append(take & used)
            bads.append(take & ~used)
            new_floor = Mux(sets[-1], e + 1, new_floor)

        n_taken = Signal(range(P + 1))
        m.d.comb += n_taken.eq(sum(takes))
        entries_done = Signal()
        m.d.comb += entries_done.eq((count == 0) & (pending == 0))

        emit = Signal()
        final = Signal()
        # give the beat when entry 0 is used and belongs to a later beat, or the list is over
        m.d.comb += emit.eq(active & out_free & ((count > 0) & crosses[0] | entries_done))
        m.d.comb += final.eq(emit & entries_done & (beat == last_beat))

        # Output register.
        with m.If(emit):
            m.d.sync += [
                self.o.valid.eq(1),
                o_data.data.eq(acc),
                o_data.last.eq(final),
                o_data.error.eq(final & err),
                acc.eq(0),
                beat.eq(beat + 1),
            ]
        with m.Else():
            with m.If(self.o.ready):
                m.d.sync += self.o.valid.eq(0)
            bits = acc
            for e, s in zip(entries, sets, strict=True):
                bits = bits | (s << e[:_BEAT_SHIFT])
            m.d.sync += [
                acc.eq(bits),
                floor.eq(new_floor),
                err.eq(err | Cat(*bads).any()),
            ]

        # Input beats: refill buf in the cycle its last entry goes.
        load = Signal()
        m.d.comb += [
            self.i.ready.eq(active & (pending != 0) & (count == n_taken)),
            load.eq(self.i.valid & self.i.ready),
        ]
        with m.If(load):
            room = Const(ENTRIES_PER_BEAT, 16)
            fill = Mux(pending > room, room, pending)
            m.d.sync += [
                buf.eq(self.i.payload),
                count.eq(fill),
                pending.eq(pending - fill),
            ]
        with m.Else():
            shifted = buf
            for j in range(P):
                shifted = Mux(takes[j], buf >> (16 * (j + 1)), shifted)
            m.d.sync += [buf.eq(shifted), count.eq(count - n_taken)]

        # Frames: the next desc is taken as the current frame's last beat is given.
        m.d.comb += self.desc.ready.eq(~active | final)
        with m.If(self.desc.valid & self.desc.ready):
            m.d.sync += [
                active.eq(1),
                n.eq(self.desc.payload.n),
                last_beat.eq((self.desc.payload.n - 1)[_BEAT_SHIFT:16]),
                pending.eq(self.desc.payload.k),
                floor.eq(0),
                beat.eq(0),
                err.eq(0),
            ]
        with m.Elif(final):
            m.d.sync += active.eq(0)
        return m
