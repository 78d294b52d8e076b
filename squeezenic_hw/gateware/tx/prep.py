"""The TX controller's front: classified beats in, prepared beats out.

Everything the coalescing decision needs that does not depend on the open wire frame is
computed here, ahead of it, so that the decision itself reads registers only
(:class:`~.coalescer.TxCoalescer`):

* a SqueezeNIC host frame's header: its code width and wire-frame capacity, its flush
  flag, and whether it continues the previous SqueezeNIC host frame (same coalescing key,
  contiguous offset: wire format section 6);
* each payload beat: how many of the frame's elements it holds (1…16), whether it holds
  the last one, the tensor index of its first element, and for ``threshold`` its keep
  bits with their prefix and suffix counts. Where a wire frame holds fewer than 16 codes
  (tiny MTUs), a beat is cut into pieces of at most that many elements, each prepared
  as a beat of its own (its elements moved to lane 0), so that no prepared beat closes
  more than one full wire frame;
* frames whose beats disagree with ``tuser_size``: a frame that ends early is completed
  with zero beats (for ``threshold``, each of their elements kept when the frame's scale
  keeps +0.0, the classifier's ``zero_kept``), beats past its end are discarded, and
  ``size_errors`` counts each such frame (OpenNIC's ``tuser_size`` is always right; this
  guards against broken producers).
"""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    AxisBeat,
    Reason,
    field_le,
    header_bytes,
)
from squeezenic_hw.gateware.common.lut_tree import or_tree
from squeezenic_hw.gateware.common.stream import Stager, stage_enable
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat
from squeezenic_hw.gateware.lane.control import code_width_of
from squeezenic_hw.spec.codecs import THRESHOLD_ID
from squeezenic_hw.spec.header import FLAG_FLUSH, FLAG_STOCHASTIC, HDR

__all__ = ["PrepKind", "prepared_beat_layout", "TxBeatPrep", "coalescing_key", "popcount"]

_COUNT = unsigned(5)     # 0…16


class PrepKind(enum.Enum, shape=2):
    """What a prepared beat is."""
    HEADER = 0           # the header of a SqueezeNIC host frame (to be encoded)
    PAYLOAD = 1          # a payload beat of one (real, or a zero beat completing it)
    BYPASS_FIRST = 2     # the first beat of a frame that bypasses
    BYPASS = 3           # a further beat of it


def prepared_beat_layout():
    """One prepared beat (fields not listed for a kind are don't-care)."""
    return data.StructLayout({
        "kind": PrepKind,
        "beat": AxisBeat,            # HEADER, BYPASS*: the input beat; PAYLOAD: its data
        "reason": Reason,            # BYPASS_FIRST
        # HEADER
        "matches": unsigned(1),      # continues the previous SqueezeNIC host frame
        "width": unsigned(6),        # bits per code
        "cap": unsigned(16),         # elements per wire frame at that width
        "sparse": unsigned(1),       # HEADER, PAYLOAD: a threshold frame (size from the data)
        "flush": unsigned(1),
        # PAYLOAD
        "v": _COUNT,                 # the frame's elements in this beat, 1…16 (from lane 0)
        "last": unsigned(1),         # it holds the frame's last element
        "offset": unsigned(32),      # tensor index of its element 0
        "keep": unsigned(ELEMENTS_PER_BEAT),   # threshold: element e kept (e < v)
        "prefix": data.ArrayLayout(_COUNT, ELEMENTS_PER_BEAT + 1),  # kept among 0…j-1
        "suffix": data.ArrayLayout(_COUNT, ELEMENTS_PER_BEAT + 1),  # kept among j…v-1
        "after": data.ArrayLayout(_COUNT, ELEMENTS_PER_BEAT + 1),   # v − j (0 past v)
        "upto_v": unsigned(ELEMENTS_PER_BEAT),                      # bit j−1: j ≤ v
        # bitmap bytes the beat adds to a frame of n elements, by n mod 8: ⌈(n+v)/8⌉ − ⌈n/8⌉
        "ceil8": data.ArrayLayout(unsigned(2), 8),
    })


def coalescing_key(hdr):
    """The coalescing key of a header (section 6): addresses, ports, codec, param,
    ``stochastic``, scale, aux and seed."""
    fields = [HDR.DST_MAC, HDR.SRC_MAC, HDR.SRC_IP, HDR.DST_IP, HDR.UDP_SRC, HDR.UDP_DST,
              HDR.CODEC, HDR.PARAM]
    stochastic = field_le(hdr, *HDR.FLAGS)[FLAG_STOCHASTIC.bit_length() - 1]
    return Cat(*[header_bytes(hdr, *f) for f in fields], stochastic,
               *[header_bytes(hdr, *f) for f in (HDR.SCALE, HDR.AUX, HDR.SEED)])


def popcount(m, bits, name="ones"):
    """Sum of one-bit values in few LUT levels: counts of groups of four (a table each),
    pairs of those added by a table of their six bits, then adders."""
    bits = list(bits)
    if not bits:
        return Const(0, 1)

    def table(inputs, function, width, tag):
        out = Signal(width, name=f"{name}_{tag}")
        with m.Switch(Cat(*inputs)):
            for value in range(1 << len(Cat(*inputs))):
                with m.Case(value):
                    m.d.comb += out.eq(function(value))
        return out

    counts = [table(bits[k:k + 4], lambda x: bin(x).count("1"), 3, f"g{k}")
              for k in range(0, len(bits), 4)]
    pairs = []
    for k in range(0, len(counts), 2):
        if k + 1 < len(counts):
            a, b = counts[k], counts[k + 1]
            pairs.append(table([a, b], lambda x: (x & 7) + (x >> 3), 4, f"p{k}"))
        else:
            pairs.append(counts[k])
    while len(pairs) > 1:
        pairs = [pairs[i] + pairs[i + 1] if i + 1 < len(pairs) else pairs[i]
                 for i in range(0, len(pairs), 2)]
    return pairs[0]


class TxBeatPrep(wiring.Component):
    """Prepares the TX lane's classified beats for the coalescing decision.

    Parameters
    ----------
    capacity : callable
        ``capacity(width)``: elements per wire frame for a code width (an int).
    widths : iterable of int
        The code widths built in. With one, every frame's width is taken to be it
        (the header's codec and parameter are not read for it).
    sparse : bool
        ``threshold`` is built in (keep bits and their counts are computed).

    Attributes
    ----------
    i : In(stream.Signature(ClassifiedBeat))
    o : Out(stream.Signature(prepared_beat_layout()))
    size_errors : Out(32)
        Frames whose beats ended before ``tuser_size`` said, or went on past it.

    Notes
    -----
    Latency: 2 cycles (stage 1: frame state, element counts, the coalescing-key compare,
    the code width and capacity; stage 2: keep counts, moving a piece's elements to lane
    0). Throughput: one beat per cycle; a frame that ends early costs a cycle per zero
    beat added, beats past a frame's end a cycle each (discarded); with wire frames of
    ``c < 16`` codes a beat takes ``⌈16/c⌉`` cycles or one more. Backpressure: the
    pipeline advances while ``o.ready`` and holds otherwise, full or not (``i.ready`` is
    one gate from ``o.ready`` and a register); nothing is dropped.
    """

    LATENCY = 2

    def __init__(self, *, capacity, widths, sparse):
        self._capacity = capacity
        self._widths = sorted(set(widths))
        self._sparse = bool(sparse)
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "o": Out(stream.Signature(prepared_beat_layout())),
            "size_errors": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        layout = prepared_beat_layout()
        # the pipeline advances on ``o.ready`` alone (an empty output register waits too):
        # the coalescer's ready is a gate from flip-flops, and so is this enable
        enable = stage_enable()
        m.d.comb += enable.eq(self.o.ready)
        st = Stager(m, enable, reset_less=True)

        beat = self.i.payload.beat
        hdr = beat.data
        n_hdr = field_le(hdr, *HDR.N)
        offset_hdr = field_le(hdr, *HDR.OFFSET)
        key = coalescing_key(hdr)

        # ---- stage 1: the frame being read --------------------------------------------
        left = Signal(16)           # elements of the frame not yet in a prepared beat
        offset = Signal(32)         # tensor index of the next prepared beat's element 0
        pad = Signal()              # the frame's beats ended early: add zero beats
        prev_key = Signal.like(key, reset_less=True)
        prev_end = Signal(32, reset_less=True)  # offset after the previous host frame
        have_prev = Signal()
        size_errors = self.size_errors
        # Pieces: only built when some width gives wire frames of fewer than 16 codes.
        small = [w for w in self._widths if self._capacity(w) < ELEMENTS_PER_BEAT]
        chunk = Signal(range(ELEMENTS_PER_BEAT + 1), init=ELEMENTS_PER_BEAT)
        sub = Signal(4)             # elements of the input beat already prepared
        frame_sparse = Signal()     # the frame being read is a threshold frame

        # Driven whole, by assignments outside any If or Switch: a signal driven partly in
        # a process becomes a Verilog `reg`, and yosys writes each constant part of one
        # as an `always @*` that reads nothing, which simulators never run.
        item = Signal(layout)
        kind = Signal(PrepKind)
        sparse = Signal()           # a threshold frame: the header's codec, then the frame's
        item_valid = Signal()
        zero_data = Signal()        # the item is a stand-in beat: zero elements
        consume = Signal()          # the input beat is used up with this item
        m.d.comb += self.i.ready.eq(enable & consume)
        take = self.i.valid & self.i.ready

        width, cap = self._width_and_cap(m, hdr=hdr)

        v = Signal(range(ELEMENTS_PER_BEAT + 1))
        full = left[4:] != 0                       # at least 16 elements left
        in_beat = Mux(full, ELEMENTS_PER_BEAT, left[:5])
        if small:
            rest_of_beat = Signal(range(ELEMENTS_PER_BEAT + 1))
            capped = Signal(range(ELEMENTS_PER_BEAT + 1))
            m.d.comb += [
                rest_of_beat.eq(ELEMENTS_PER_BEAT - sub),
                capped.eq(Mux(in_beat < rest_of_beat, in_beat, rest_of_beat)),
                v.eq(Mux(capped < chunk, capped, chunk)),
            ]
        else:
            m.d.comb += v.eq(in_beat)
        # the piece holds the frame's last element: left ≤ the most a piece can take here
        if small:
            limit = Mux(rest_of_beat < chunk, rest_of_beat, chunk)
            last = (left[5:] == 0) & (left[:5] <= limit)
        else:
            last = (left[5:] == 0) & ((left[4] == 0) | (left[:4] == 0))
        beat_done = last | ((sub + v) == ELEMENTS_PER_BEAT) if small else Const(1)
        m.d.comb += [
            item.beat.eq(beat),
            item.reason.eq(self.i.payload.reason),
            item.v.eq(v),
            item.last.eq(last),
            item.offset.eq(offset),
            item.flush.eq(field_le(hdr, *HDR.FLAGS)[FLAG_FLUSH.bit_length() - 1]),
            item.sparse.eq(sparse),
            item.kind.eq(kind),
            item.width.eq(width),
            item.cap.eq(cap),
            sparse.eq(field_le(hdr, *HDR.CODEC) == THRESHOLD_ID),
        ]
        # The key and contiguity compare, in parts of 24 bits, combined in stage 2. Each
        # part is a tree of kept pieces (three bits' XORs a LUT): three LUT levels
        # whichever LUT mapper maps it, where an equality left to one maps as a chain.
        ours, theirs = Cat(key, offset_hdr, 1), Cat(prev_key, prev_end, have_prev)
        match_parts = Cat(
            ~or_tree(m, [ours[i] ^ theirs[i] for i in range(k, min(k + 24, len(ours)))],
                     inputs=2, name=f"match_differs{k // 24}")
            for k in range(0, len(ours), 24))
        self._keep(m, small=small, take=take, left=left, pad=pad, item=item)

        def bump_size_errors():
            m.d.sync += size_errors.eq(size_errors + 1)

        with m.FSM(name="prep"):
            with m.State("IDLE"):
                m.d.comb += consume.eq(1)
                with m.If(self.i.payload.reason != Reason.NONE):
                    m.d.comb += [kind.eq(PrepKind.BYPASS_FIRST),
                                 item_valid.eq(self.i.valid)]
                    with m.If(take & ~beat.last):
                        m.next = "BYPASS"
                with m.Else():
                    m.d.comb += [kind.eq(PrepKind.HEADER), item_valid.eq(self.i.valid)]
                    with m.If(take):
                        m.d.sync += [left.eq(n_hdr), offset.eq(offset_hdr), sub.eq(0),
                                     pad.eq(beat.last), prev_key.eq(key),
                                     prev_end.eq(offset_hdr + n_hdr), have_prev.eq(1),
                                     frame_sparse.eq(sparse),
                                     chunk.eq(Mux(cap < ELEMENTS_PER_BEAT, cap[:5],
                                                  ELEMENTS_PER_BEAT))]
                        with m.If(beat.last):
                            bump_size_errors()
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [kind.eq(PrepKind.PAYLOAD), consume.eq(~pad & beat_done),
                             item_valid.eq(self.i.valid | pad), sparse.eq(frame_sparse)]
                with m.If(pad):
                    # the stand-in beat's data: cleared in the stage-1 register (its keep
                    # bits are the frame's ``zero_kept``)
                    m.d.comb += zero_data.eq(1)
                with m.If(enable & (self.i.valid | pad)):
                    # (without pieces, v is 16 on every beat but the last, after which
                    # left no longer matters)
                    step = v if small else ELEMENTS_PER_BEAT
                    m.d.sync += [left.eq(left - step), offset.eq(offset + step),
                                 sub.eq(Mux(beat_done, 0, sub + v))]
                    with m.If(last):
                        m.d.sync += pad.eq(0)
                        with m.If(~pad & ~beat.last):
                            bump_size_errors()      # beats go on past the frame's end
                            m.next = "DRAIN"
                        with m.Else():
                            m.next = "IDLE"
                    with m.Elif(~pad & beat.last & beat_done):
                        bump_size_errors()          # the frame ended early
                        m.d.sync += pad.eq(1)
            with m.State("BYPASS"):
                m.d.comb += [kind.eq(PrepKind.BYPASS), consume.eq(1),
                             item_valid.eq(self.i.valid)]
                with m.If(take & beat.last):
                    m.next = "IDLE"
            with m.State("DRAIN"):
                m.d.comb += consume.eq(1)
                with m.If(take & beat.last):
                    m.next = "IDLE"

        s1_valid = st.reg(item_valid, name="s1_valid", reset_less=False)
        s1 = st.reg(item, name="s1_item")
        # zeroed by the register's synchronous reset, not a 512-bit AND gate before it
        s1_data = st.reg(item.beat.data, name="s1_data", clear=zero_data)
        s1_sub = st.reg(sub, name="s1_sub") if small else None
        s1_match_parts = st.reg(match_parts, name="s1_match_parts")

        # ---- stage 2: keep counts, a piece's elements to lane 0 -------------------------
        self._stage2(m, layout=layout, s1=s1, s1_data=s1_data, s1_match_parts=s1_match_parts,
                     small=small, s1_sub=s1_sub, st=st, s1_valid=s1_valid)
        return m

    def _width_and_cap(self, m, *, hdr):
        """The code width of the frame in the header beat, and the capacity of a wire frame
        of it."""
        width = Signal(6)
        cap = Signal(16)
        if len(self._widths) == 1 and not self._sparse:
            # one code width built in: every frame the lane encodes has it
            m.d.comb += width.eq(self._widths[0])
        else:
            m.d.comb += width.eq(code_width_of(field_le(hdr, *HDR.CODEC),
                                               field_le(hdr, *HDR.PARAM)))
        with m.Switch(width):
            for w in self._widths:
                with m.Case(w):
                    m.d.comb += cap.eq(self._capacity(w))
        return width, cap

    def _keep(self, m, *, small, take, left, pad, item):
        """The item's keep bits: threshold's, masked to its elements (a stand-in beat's those of the
        frame's +0.0)."""
        keep = Signal(ELEMENTS_PER_BEAT)
        if self._sparse:
            assert not small        # threshold needs MTUs where every capacity is ≥ 16
            # the frame's scale keeps +0.0 (the classifier's compare, on its header beat):
            # the keep bit of every element of a stand-in beat
            zero_kept = Signal(reset_less=True)
            with m.If(take & self.i.payload.first):
                m.d.sync += zero_kept.eq(self.i.payload.zero_kept)
            # masked to v: element e is in the beat when at least 16 are left or e < left
            in_beat_mask = Cat((left[4:] != 0) | (left[:4] > e) for e in range(ELEMENTS_PER_BEAT))
            m.d.comb += keep.eq(Mux(pad, zero_kept.replicate(ELEMENTS_PER_BEAT),
                                    self.i.payload.keep) & in_beat_mask)
        m.d.comb += item.keep.eq(keep)

    def _stage2(self, m, *, layout, s1, s1_data, s1_match_parts, small, s1_sub, st, s1_valid):
        """Stage 2: keep counts, a piece's elements to lane 0."""
        out = Signal(layout)
        m.d.comb += [out.eq(s1), out.beat.data.eq(s1_data),
                     out.matches.eq(s1_match_parts.all())]
        if small:
            with m.Switch(s1_sub):
                for k in range(ELEMENTS_PER_BEAT):
                    with m.Case(k):
                        m.d.comb += out.beat.data.eq(s1_data >> (32 * k))
        if self._sparse:
            keep = s1.keep
            for j in range(ELEMENTS_PER_BEAT + 1):
                m.d.comb += [out.prefix[j].eq(popcount(m, keep[:j], f"prefix{j}")),
                             out.suffix[j].eq(popcount(m, keep[j:], f"suffix{j}")),
                             out.after[j].eq(Mux(s1.v >= j, s1.v - j, 0))]
            for r in range(8):
                m.d.comb += out.ceil8[r].eq(((s1.v + r + 7) >> 3) - (r != 0))
            m.d.comb += out.upto_v.eq(Cat(s1.v >= j for j in range(1, ELEMENTS_PER_BEAT + 1)))
        m.d.comb += [
            self.o.valid.eq(st.reg(s1_valid, name="s2_valid", reset_less=False)),
            self.o.payload.eq(st.reg(out, name="s2_item")),
        ]
