"""The TX lane's bit packer: beats of codes in, 512-bit wire-frame payload beats out.

Wire format section 3: element ``i`` of a wire frame takes bits
``[i·b, (i+1)·b)`` of the payload bit string, LSB-first. The packer keeps the
partial beat of the open wire frame and appends each job's codes to it; every
wire frame's payload starts at bit 0 of a fresh beat and its last beat is
zero-padded, so a frame of ``n`` codes of ``b`` bits gives exactly
``⌈n·b/512⌉`` beats.
"""

import functools

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.unit import encoder_output_layout
from squeezenic_hw.gateware.common.layouts import (
    BEAT_BITS,
    ELEMENTS_PER_BEAT,
    PackMeta,
    RingWrite,
    narrow_span,
)
from squeezenic_hw.gateware.common.lut_tree import balanced_or, kept, mux_tree, or_tree
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, Stager, stage_enable

__all__ = ["WirePacker"]



def _check_widths(widths):
    try:
        widths = sorted(set(widths), key=lambda w: (type(w).__name__, w))
    except TypeError:
        raise ValueError(f"widths must be an iterable of ints 1..32, got {widths!r}") from None
    if not widths:
        raise ValueError("widths must name at least one code width (1..32)")
    for w in widths:
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 32:
            raise ValueError(f"widths must be ints 1..32, got {w!r}")
    return tuple(widths)


class WirePacker(wiring.Component):
    """Packs beats of codes into the payload beats of wire frames.

    Each accepted job (one beat of codes with its :class:`PackMeta`) is one
    step: ``W`` = its ``count`` codes concatenated at ``width`` bits each (code 0
    lowest); ``take = split`` with ``close_mid``, else ``count``. The first
    ``take`` codes are appended to the open wire frame at bit ``fill`` of its
    partial beat.

    * No close: when the partial beat fills up (``fill + take·width ≥ 512``)
      one full beat is sent (``count = 1``, ``commit = 0``) and the rest stays.
    * ``close_end`` / ``close_mid``: the frame's unsent bits go out as 0, 1 or 2
      beats, the last zero-padded, with ``commit = 1`` (``count = 0`` when the
      frame has no unsent bits, e.g. a close exactly at a beat boundary). With
      ``close_mid`` the codes ``split … count-1`` become the start of the next
      frame (at its bit 0).
    * A job that sends no beat and does not close gives no output item.

    All codes of one wire frame must have the same width; the next frame may
    change it (only at a ``close_end``, since a ``close_mid`` job carries both
    frames' codes at one width).

    Parameters
    ----------
    widths : iterable of int
        The code widths (1…32) to support. Compaction logic is built only for
        these; a job with another ``width`` counts as a job with no codes.
    registered_ready : bool
        The stages advance on ``o.ready`` alone (``i.ready = o.ready``), for a consumer
        whose ready is a register (the :class:`~.ring.WireRing`'s): the stages' enable
        is then that register, with no logic in front of its thousands of loads.

    Attributes
    ----------
    i : In(stream.Signature(encoder_output_layout(32, PackMeta)))
        Jobs: ``codes[e]`` holds code ``e`` in its low ``meta.width`` bits.
        ``valid``, the bits above ``meta.width`` and the codes ``e ≥ meta.count``
        are ignored (the encoders send them as zero).
    o : Out(stream.Signature(RingWrite))
        ``beats[0 … count-1]`` are the next payload beats of the wire frame
        being assembled; ``commit = 1``: the frame closes after them.

    Latency: 5 cycles (``LATENCY``) from an accepted job to its output item:
    side-band decode; compaction; fill tracking and shift by ``fill mod 32``;
    shift by the rest of ``fill``; merge into the partial beat and the
    registered output. The frame state loops (``fill``, the partial beat) are
    one small adder and one LUT per bit deep.
    Throughput: one job per cycle in every case (with or without closes), so
    at most one output item of up to two beats per cycle; a frame's beats
    come as fast as its codes arrive.
    Backpressure: when ``o.valid & ~o.ready`` the whole pipeline holds
    (``i.ready = ~o.valid | o.ready``; with ``registered_ready`` it holds while
    ``~o.ready``, ``i.ready = o.ready``); nothing is dropped or reordered. Jobs
    that give no output item never hold it.

    Resources and timing (widths 1…16 and 32, as the all-codec TX lane builds it,
    ``registered_ready``; ``synth.synthesize(WirePacker(widths, registered_ready=True),
    timing=True, mapping=...)``): 6.9 k LUT, 6.2 k FF, 2.5 ns, 4 LUT levels with
    ``mapping="abc"``; with ``"abc9"`` beside a long carry chain (as in the whole
    plugin, where ABC9 maps every cone off the deepest path for area) every path of the
    packer is within 3.15 ns. Per supported width, two 512-bit compaction wirings (A and
    the next frame's start B) are OR-ed in, each output bit an AND-OR of its distinct
    source bits, with one select per set of widths that share a source
    (:meth:`shared_selects`); the lane rotation and the bit counts are trees of kept
    LUTs (:mod:`~squeezenic_hw.gateware.common.lut_tree`); the shift by ``fill mod 32``
    covers only the bits the narrow widths reach. The selects of the wide multiplexers
    (the width, the shared selects, the lane rotation, ``fill`` and the coarse shift)
    carry ``max_fanout``, for Vivado to copy them.

    Built for one width that is a power of two (1, 2, 4, 8, 16;
    :attr:`word_gearbox`), the packer is a word gearbox instead: sixteen codes make a
    word of ``16·w`` bits that divides the beat, whole words load their slot of the
    beat (no 1024-bit shifter), and only a word's worth of codes is shifted behind the
    residual. Same ports, latency, throughput and output items.
    """

    LATENCY = 5

    def __init__(self, widths, *, registered_ready=False):
        self._widths = _check_widths(widths)
        if not isinstance(registered_ready, bool):
            raise ValueError(f"registered_ready must be a bool, got {registered_ready!r}")
        self._registered_ready = registered_ready
        super().__init__({
            "i": In(stream.Signature(encoder_output_layout(32, PackMeta))),
            "o": Out(stream.Signature(RingWrite)),
        })

    @property
    def widths(self):
        """The supported code widths, ascending."""
        return self._widths

    @property
    def latency(self):
        return self.LATENCY

    @functools.cached_property
    def _sources(self):
        """For each output bit of a compaction, its sources: ``(lane, bit, widths)`` for
        each distinct bit of the lanes the bit takes, ``widths`` the indices (into
        :attr:`widths`) of the widths that take it there."""
        out = []
        for j in range(BEAT_BITS):
            by_source = {}
            for k, w in enumerate(self._widths):
                if j < ELEMENTS_PER_BEAT * w:
                    by_source.setdefault((j // w, j % w), []).append(k)
            out.append([(lane, bit, tuple(ks)) for (lane, bit), ks in by_source.items()])
        return out

    def shared_selects(self):
        """The sets of widths (indices) that take one lane bit to one output bit: each a
        select of its own, so that the bit is that lane bit AND one select, not AND the
        OR of many (all widths take lane 0's bit 0 to bit 0)."""
        return sorted({ks for bit in self._sources for _, _, ks in bit if len(ks) > 1})

    def _in_set(self, width, indices):
        """Whether ``width`` is one of the widths at ``indices``: a table of ``width``."""
        members = {self._widths[k] for k in indices}
        return Array(Const(int(w in members), 1) for w in range(1 << len(width)))[width]

    def _compact(self, m, lanes, width_sel, shared_sel, name):
        """``lanes`` (16 x 32-bit) concatenated at the selected width, as 512 bits.

        ``width_sel``: one-hot over :attr:`widths`; ``shared_sel``: for each set of
        :meth:`shared_selects`, whether the width is in it. Each output bit is an AND-OR
        of its distinct sources (:meth:`_sources`), OR-ed as a balanced tree: only the
        selected width's source reaches it."""
        shared = dict(zip(self.shared_selects(), shared_sel, strict=True))
        bits = []
        for sources in self._sources:
            bits.append(balanced_or(
                Mux(width_sel[ks[0]] if len(ks) == 1 else shared[ks], lanes[lane][bit], 0)
                for lane, bit, ks in sources))
        out = Signal(BEAT_BITS, name=name)
        m.d.comb += out.eq(Cat(bits))
        return out

    def _enable(self, m):
        """The stages' one enable, and ``i.ready``: ``o.ready`` itself with
        ``registered_ready`` (a register when the ring's is), else ``~o.valid | o.ready``."""
        enable = stage_enable()
        m.d.comb += [
            enable.eq(self.o.ready if self._registered_ready
                      else ~self.o.valid | self.o.ready),
            self.i.ready.eq(enable),
        ]
        return enable

    @property
    def word_gearbox(self):
        """Whether the packer is built as a word gearbox: one width, a power of two 1…16."""
        return len(self._widths) == 1 and self._widths[0] in _GEARBOX_WIDTHS

    def elaborate(self, platform):
        if self.word_gearbox:
            return self._elaborate_gearbox()
        m = Module()
        enable = self._enable(m)
        # datapath registers take no reset: only the valid bits, the fill count and the
        # partial beat (state the next job reads) do
        stager = Stager(m, enable, reset_less=True)
        n_lanes = ELEMENTS_PER_BEAT

        # --- Stage 0: decode the job's side-band; the codes wait a cycle. ---
        meta = self.i.payload.meta
        take = Signal(5)            # codes for the open frame
        rest = Signal(5)            # codes for the next frame (close_mid only)
        m.d.comb += [
            take.eq(Mux(meta.close_mid, meta.split, meta.count)),
            rest.eq(Mux(meta.close_mid, meta.count - meta.split, 0)),
        ]
        s0_valid = stager.reg(self.i.valid, name="s0_valid", reset_less=False)
        # Each code twice: masked to the open frame's codes (e < take) for A, and to the
        # job's codes (e < count) of a close_mid job, for the next frame's start (none
        # without close_mid). The masks are the registers' synchronous resets: no AND gate
        # in front of the compaction or the lane rotation.
        # ``take <= e`` from kept compares of the two counts it chooses between (a LUT
        # each), so that the reset is one LUT of them, ``close_mid`` and the enable
        split_le = [kept(m, meta.split <= e, f"split_le{e}") for e in range(n_lanes)]
        count_le = [kept(m, meta.count <= e, f"count_le{e}") for e in range(n_lanes)]
        s0_codes_a = [stager.reg(self.i.payload.codes[e], name=f"s0_code_a{e}",
                                 clear=Mux(meta.close_mid, split_le[e], count_le[e]))
                      for e in range(n_lanes)]
        s0_codes = [stager.reg(self.i.payload.codes[e], name=f"s0_code{e}",
                               clear=count_le[e] | ~meta.close_mid)
                    for e in range(n_lanes)]
        s0_sel = stager.reg(Cat(meta.width == w for w in self._widths), name="s0_width_sel",
                            fanout=True)
        # each a table of the width (one LUT), not an OR of its compares
        s0_shared = stager.reg(Cat(self._in_set(meta.width, ks) for ks in self.shared_selects()),
                               name="s0_shared_sel", fanout=True)
        s0_take = stager.reg(take, name="s0_take")
        s0_rest = stager.reg(rest, name="s0_rest")
        # the next frame's first code (0 … 15 with close_mid; without it the codes are 0)
        s0_split = stager.reg(meta.split[:4], name="s0_split", fanout=True)
        s0_close = stager.reg(meta.close_mid | meta.close_end, name="s0_close")

        # --- Stage 1: compaction; bit counts. Nothing depends on the open frame. ---
        # A: codes 0 … take-1, packed.
        a = self._compact(m, s0_codes_a, s0_sel, s0_shared, "a_bits")
        # Codes split … count-1 rotated to lane 0 (a 16:1 lane mux, as a tree of kept
        # 4:1 pieces, is cheaper than a 512-bit shift right by split·width).
        r_lanes = [mux_tree(m, s0_split, s0_codes[e:], name=f"r_lane{e}")
                   for e in range(n_lanes)]
        s1_valid = stager.reg(s0_valid, name="s1_valid", reset_less=False)
        s1_a = stager.reg(a, name="s1_a")
        s1_r = [stager.reg(lane, name=f"s1_r{e}") for e, lane in enumerate(r_lanes)]
        s1_sel = stager.reg(s0_sel, name="s1_width_sel", fanout=True)
        s1_shared = stager.reg(s0_shared, name="s1_shared_sel", fanout=True)
        s1_take_bits = stager.reg(self._times(m, s0_take, s0_sel, 10, "take_bits"),
                                    name="s1_take_bits")
        s1_rest_bits = stager.reg(self._times(m, s0_rest, s0_sel, 9, "rest_bits"),
                                    name="s1_rest_bits")
        s1_close = stager.reg(s0_close, name="s1_close")

        # --- Stage 2: the open frame's fill; A shifted by fill mod 32. ---
        # `fill` depends only on widths and counts, so it is tracked here, ahead
        # of the data: the feedback loops stay short (fill: one add; the partial
        # beat: one LUT per bit in stage 4) and the 1024-bit shift is feed-forward,
        # split over stages 2 and 3.
        # bits of the open frame in its partial beat; its low bits select the fine shift
        fill = Signal(9, attrs={"max_fanout": MAX_FANOUT})
        total = Signal(11)          # fill + take_bits, 0…1023
        m.d.comb += total.eq(fill + s1_take_bits)
        full = total[9]             # total ≥ 512
        with m.If(enable & s1_valid):
            # total mod 512 is also right when no beat is sent (total < 512).
            m.d.sync += fill.eq(Mux(s1_close, s1_rest_bits, total[:9]))
        n_beats = Signal(2)
        with m.If(s1_close):
            m.d.comb += n_beats.eq(Mux(total == 0, 0, Mux(total > BEAT_BITS, 2, 1)))
        with m.Else():
            m.d.comb += n_beats.eq(full)
        s2_valid = stager.reg(s1_valid, name="s2_valid", reset_less=False)
        s2_fine = stager.reg(self._fine_shift(m, s1_a, fill[:5]), name="s2_fine")
        s2_coarse = stager.reg(fill[5:], name="s2_coarse", fanout=True)
        # The next frame's start (zero without close_mid), packed from bit 0.
        s2_b = stager.reg(self._compact(m, s1_r, s1_sel, s1_shared, "b_bits"), name="s2_b")
        s2_close = stager.reg(s1_close, name="s2_close")
        s2_full = stager.reg(full, name="s2_full")
        s2_n_beats = stager.reg(n_beats, name="s2_n_beats")

        # --- Stage 3: A shifted by the rest of fill (a multiple of 32). ---
        s3_valid = stager.reg(s2_valid, name="s3_valid", reset_less=False)
        s3_shifted = stager.reg(_shift_left(m, s2_fine, s2_coarse, 2 * BEAT_BITS, unit=32),
                                name="s3_shifted")
        s3_b = stager.reg(s2_b, name="s3_b")
        s3_close = stager.reg(s2_close, name="s3_close")
        s3_full = stager.reg(s2_full, name="s3_full")
        s3_n_beats = stager.reg(s2_n_beats, name="s3_n_beats")

        # --- Stage 4: merge into the partial beat; registered output. ---
        acc = Signal(BEAT_BITS)     # the open frame's unsent bits, zero from `fill` up
        low = acc | s3_shifted[:BEAT_BITS]
        high = s3_shifted[BEAT_BITS:]
        o_valid = Signal()
        o_payload = Signal(RingWrite, reset_less=True)
        m.d.comb += [
            self.o.valid.eq(o_valid),
            self.o.payload.eq(o_payload),
        ]
        with m.If(enable):
            m.d.sync += o_valid.eq(s3_valid & (s3_close | s3_full))
            with m.If(s3_valid):
                # Both beats always carry the merged bits; `count` says which are real.
                m.d.sync += [
                    o_payload.beats[0].eq(low),
                    o_payload.beats[1].eq(high),
                    o_payload.count.eq(s3_n_beats),
                    o_payload.commit.eq(s3_close),
                    acc.eq(Mux(s3_close, s3_b, Mux(s3_full, high, low))),
                ]
        return m

    def _fine_shift(self, m, a, amount):
        """``a << amount`` (``amount`` = ``fill mod 32``), 543 bits, shifted only where it
        can be non-zero.

        A frame of a width that is a multiple of 32 always has ``fill mod 32 = 0``; the
        other widths' codes take at most the low :func:`narrow_span` bits of ``a``. So
        above ``span + 31`` bits the output is ``a`` itself, and only the low bits need the
        shifter (287 of 543 with widths ≤ 16)."""
        span = narrow_span(self._widths)
        if span + 31 >= BEAT_BITS:
            return _shift_left(m, a, amount, BEAT_BITS + 31)
        low = _shift_left(m, a[:span + 31], amount, span + 31)
        return Cat(low, a[span + 31:], Const(0, 31))

    def _times(self, m, count, width_sel, bits, name):
        """``count · width`` (``count`` 0…16) truncated to ``bits``: a small table per
        supported width (no multiplier, no carry chain; a LUT per bit with its select),
        the widths' tables OR-ed as a tree (:func:`or_tree`)."""
        return or_tree(m, [
            Mux(width_sel[k], Array(Const(c * w, 10) for c in range(17))[count][:bits], 0)
            for k, w in enumerate(self._widths)], inputs=len(count) + 1, name=name)

    def _elaborate_gearbox(self):
        """One code width ``w`` (a power of two ≤ 16): a word gearbox.

        Codes are gathered into words of ``G = 16·w`` bits (a residual of fewer than 16
        codes is kept), and each whole word is written into its slot of the open beat
        (``512 / G`` slots; a slot's registers load a word or clear, no shifter over the
        beat). Stage 0: side-band decode, the codes wait; stage 1: masking and the next
        frame's codes rotated to lane 0, the residual and slot counts (the frame-state
        loops, a 5-bit add); stage 2: the job's codes shifted behind the residual (a
        16:1 lane mux per lane); stage 3: the word(s) merged with the residual and
        written into the beat's slots; stage 4: the registered output. Same latency,
        throughput and emission rule as the general packer.
        """
        m = Module()
        w = self._widths[0]
        n_lanes = ELEMENTS_PER_BEAT
        word_bits = n_lanes * w
        slots = BEAT_BITS // word_bits
        slot_bits = (slots - 1).bit_length()
        enable = self._enable(m)
        stager = Stager(m, enable, reset_less=True)

        # --- Stage 0: side-band; a job of another width carries no codes. ---
        meta = self.i.payload.meta
        ours = meta.width == w
        take = Signal(5)
        rest = Signal(5)
        m.d.comb += [
            take.eq(Mux(ours, Mux(meta.close_mid, meta.split, meta.count), 0)),
            rest.eq(Mux(ours & meta.close_mid, meta.count - meta.split, 0)),
        ]
        s0_valid = stager.reg(self.i.valid, name="s0_valid", reset_less=False)
        s0_codes = [stager.reg(self.i.payload.codes[e][:w], name=f"s0_code{e}")
                    for e in range(n_lanes)]
        s0_take = stager.reg(take, name="s0_take")
        s0_rest = stager.reg(rest, name="s0_rest")
        s0_split = stager.reg(meta.split[:4], name="s0_split")
        s0_keep_a = stager.reg(Cat(e < take for e in range(n_lanes)), name="s0_keep_a")
        s0_keep_b = stager.reg(Cat(e < rest for e in range(n_lanes)), name="s0_keep_b")
        s0_close = stager.reg(meta.close_mid | meta.close_end, name="s0_close")

        # --- Stage 1: masked codes; the next frame's codes at lane 0; the counts. ---
        a_lanes = [Mux(s0_keep_a[e], s0_codes[e], 0) for e in range(n_lanes)]
        # lane e of the next frame's codes is code e + split: a tree of kept 4:1 pieces,
        # which no LUT mapper can chain
        b_lanes = [Mux(s0_keep_b[e], mux_tree(m, s0_split, s0_codes[e:], name=f"b_lane{e}"), 0)
                   for e in range(n_lanes)]
        resid = Signal(4)           # codes of the open frame not yet in a whole word
        slot = Signal(max(slot_bits, 1))   # whole words of the open frame in its beat
        total = Signal(5)           # resid + take: 0…31
        m.d.comb += total.eq(resid + s0_take)
        full = total[4]             # a whole word
        over = full & (total[:4] != 0)      # and codes past it
        last_slot = slot == slots - 1
        with m.If(enable & s0_valid):
            with m.If(s0_close):
                m.d.sync += [resid.eq(s0_rest), slot.eq(0)]
            with m.Else():
                m.d.sync += [resid.eq(total[:4]), slot.eq(slot + full)]
        # words written: word 0 (whole, or at a close the padded rest), word 1 (a close
        # with codes past a whole word); word 1 goes to the next beat after the last slot
        word0 = full | (s0_close & (total != 0))
        word1 = s0_close & over
        wrap = word1 & last_slot
        emit = s0_close | (full & last_slot)
        count = Mux(s0_close, Mux((slot != 0) | (total != 0), 1, 0) + wrap, 1)
        s1_valid = stager.reg(s0_valid, name="s1_valid", reset_less=False)
        s1_a = stager.reg(Cat(a_lanes), name="s1_a")
        s1_b = stager.reg(Cat(b_lanes), name="s1_b")
        s1_resid = stager.reg(resid, name="s1_resid")
        s1 = {name: stager.reg(value, name=f"s1_{name}") for name, value in {
            "slot": slot, "full": full, "close": s0_close, "word0": word0, "word1": word1,
            "wrap": wrap, "emit": emit, "count": count}.items()}

        # --- Stage 2: the job's codes behind the residual's (lanes resid … resid+15). ---
        shifted = Signal(2 * word_bits)
        with m.Switch(s1_resid):
            for r in range(n_lanes):
                with m.Case(r):
                    m.d.comb += shifted.eq(s1_a << (r * w))
        s2_valid = stager.reg(s1_valid, name="s2_valid", reset_less=False)
        s2_lo = stager.reg(shifted[:word_bits], name="s2_lo")
        s2_hi = stager.reg(shifted[word_bits:], name="s2_hi")
        s2_b = stager.reg(s1_b, name="s2_b")
        s2 = {name: stager.reg(value, name=f"s2_{name}") for name, value in s1.items()}
        # which slots the job's words load, decoded a stage ahead; the parity of its
        # first slot (the select of every slot's word) in a register of its own, copied
        # by Vivado for its hundreds of loads
        next_slot = (s1["slot"] + 1)[:slot_bits] if slot_bits else Const(0, 1)
        s2_load0 = stager.reg(Cat(s1["word0"] & (s1["slot"] == k) for k in range(slots)),
                              name="s2_load0")
        s2_load1 = stager.reg(Cat(s1["word1"] & ~s1["wrap"] & (next_slot == k)
                                  for k in range(slots)), name="s2_load1")
        odd = stager.reg(s1["slot"][0], name="s2_odd", fanout=True)

        # --- Stage 3: merge with the residual; words into their slots. ---
        res = Signal(word_bits)     # the open frame's codes not in a whole word, from lane 0
        merged = Signal(word_bits)
        m.d.comb += merged.eq(res | s2_lo)
        with m.If(enable & s2_valid):
            m.d.sync += res.eq(Mux(s2["close"], s2_b, Mux(s2["full"], s2_hi, merged)))
        # Slots of even index load word 0 or 1, whichever goes to an even slot (and odd
        # likewise): each slot register has one data source.
        lane_even = Mux(odd, s2_hi, merged)
        lane_odd = Mux(odd, merged, s2_hi)
        beat = [Signal(word_bits, name=f"slot{k}") for k in range(slots)]
        emit_q = Signal()           # the beat (slots as written last cycle) goes out now
        for k, reg in enumerate(beat):
            we = s2_valid & (s2_load0[k] | s2_load1[k])
            with m.If(enable):
                with m.If(we):
                    m.d.sync += reg.eq(lane_odd if k % 2 else lane_even)
                with m.Elif(emit_q):
                    m.d.sync += reg.eq(0)
        s3_valid = stager.reg(s2_valid & s2["emit"], name="s3_emit", reset_less=False)
        m.d.comb += emit_q.eq(s3_valid)
        s3_spill = stager.reg(s2_hi, name="s3_spill")     # word 1 of a wrap: next beat
        s3_count = stager.reg(s2["count"], name="s3_count")
        s3_commit = stager.reg(s2["close"], name="s3_commit")

        # --- Stage 4: the registered output. ---
        o_valid = Signal()
        o_payload = Signal(RingWrite, reset_less=True)
        m.d.comb += [self.o.valid.eq(o_valid), self.o.payload.eq(o_payload)]
        with m.If(enable):
            m.d.sync += o_valid.eq(s3_valid)
            with m.If(s3_valid):
                m.d.sync += [
                    o_payload.beats[0].eq(Cat(beat)),
                    o_payload.beats[1].eq(s3_spill),
                    o_payload.count.eq(s3_count),
                    o_payload.commit.eq(s3_commit),
                ]
        return m


#: Widths built as a word gearbox (16 codes make a word that divides the beat).
_GEARBOX_WIDTHS = (1, 2, 4, 8, 16)





def _shift_left(m, value, amount, width, *, unit=1):
    """``value << (amount · unit)`` truncated to ``width`` bits, as 4:1 mux levels (two
    bits of ``amount`` per level)."""
    x = value
    for lo in range(0, len(amount), 2):
        digits = amount[lo:lo + 2]
        step = unit << lo
        nxt = Signal(width, name=f"shl{unit}_{lo}")
        with m.Switch(digits):
            for d in range(1 << len(digits)):
                with m.Case(d):
                    m.d.comb += nxt.eq((x << (d * step))[:width])
        x = nxt
    return x
