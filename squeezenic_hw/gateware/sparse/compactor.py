"""Sparse compactor: the kept elements of a beat packed into a dense prefix (codec 7, TX).

The TX side of codec 7 ``threshold`` sparsification (wire format section 4)
decides per element whether it is kept; this block takes one job of up to 16 fp32
elements with its keep mask and moves the kept values, in element order, to
slots ``0 … kept - 1``, together with each kept element's index relative to its
wire frame (what the index-list layout sends). A job may straddle a wire-frame
boundary (``close_mid``): elements before ``split`` belong to the frame that
closes in this job, the others start the next frame at index 0.
"""

from amaranth import Cat, Const, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.sparse.bits import (
    add_bits,
    const_bits,
    count_onehot,
    or_all,
    popcount16,
)

__all__ = ["SparseCompactor", "sparse_compactor_input_layout",
           "sparse_compactor_output_layout", "ELEMENTS"]

#: Elements per job (one 512-bit beat of fp32).
ELEMENTS = 16
_HALF = 8       # elements per half: each half is compacted on its own in stage 1
_ENTRY = 38     # bits per element in the crossbar: value, index low bits, two flags


def _check_meta_shape(meta_shape):
    try:
        Shape.cast(meta_shape)
    except (TypeError, ValueError) as e:
        raise ValueError(f"meta_shape must be a shape-castable, got {meta_shape!r} ({e})") \
            from None


def sparse_compactor_input_layout(meta_shape=unsigned(1)):
    """One job into :class:`SparseCompactor`.

    ``values``: element ``e`` of the job; ``keep``: bit ``e`` set = element
    ``e`` kept (callers set only bits ``e < count``; the block does not mask
    the others); ``count``: elements in the
    job, 0…16 (0: a job that only carries a close); ``base``: frame-relative
    index of element 0; ``close_mid``/``split``: when ``close_mid`` = 1,
    elements ``e < split`` belong to the wire frame that closes in this job and
    elements ``e >= split`` start the next one; ``meta`` rides along unchanged.
    """
    _check_meta_shape(meta_shape)
    return data.StructLayout({
        "values": data.ArrayLayout(unsigned(32), ELEMENTS),
        "keep": unsigned(ELEMENTS),
        "count": unsigned(5),
        "base": unsigned(16),
        "split": unsigned(5),
        "close_mid": unsigned(1),
        "meta": meta_shape,
    })


def sparse_compactor_output_layout(meta_shape=unsigned(1)):
    """One compacted job out of :class:`SparseCompactor`.

    ``values[j]``/``indices[j]``: the value and frame-relative index of the
    ``j``-th kept element (element order), zero for ``j >= kept``. The index of
    element ``e`` is ``e - split`` when ``close_mid`` and ``e >= split``, else
    ``(base + e) mod 2**16``. ``kept`` = popcount(``keep``); ``kept_split``:
    kept elements ``e < split`` when ``close_mid``, else ``kept``. ``keep``,
    ``count``, ``split``, ``close_mid`` and ``meta`` are the input's.
    """
    _check_meta_shape(meta_shape)
    return data.StructLayout({
        "values": data.ArrayLayout(unsigned(32), ELEMENTS),
        "indices": data.ArrayLayout(unsigned(16), ELEMENTS),
        "kept": unsigned(5),
        "kept_split": unsigned(5),
        "keep": unsigned(ELEMENTS),
        "count": unsigned(5),
        "split": unsigned(5),
        "close_mid": unsigned(1),
        "meta": meta_shape,
    })


class SparseCompactor(wiring.Component):
    """Compacts the kept elements of a job into a dense prefix, one job per cycle.

    Three register stages, each a few LUT levels deep:

    1. Per element: its slot within its half of the job (elements 0-7 and
       8-15), one-hot (kept, and how many of the half before it are kept), and
       its index in a compact form: its low 4 bits, and whether its high 12
       bits are ``base[4:]``, ``base[4:] + 1`` (carry out of ``base[:4] + e``)
       or zero (after a mid-job close); how many of elements 0-7 are kept,
       one-hot.
    2. Each half compacted on its own: slot ``j`` of a half is the AND-OR of
       its (at most 8) candidates' value and compact index; ``kept`` and
       ``kept_split`` (popcounts).
    3. The merge: slot ``j`` is the low half's slot ``j`` or the high half's
       slot ``j - v``, ``v`` being the kept elements of the low half (slots
       past a half's kept elements are zero); the index expanded to 16 bits.

    Parameters
    ----------
    meta_shape : shape-castable
        Shape of ``meta``, which rides along unchanged (default ``unsigned(1)``).

    Attributes
    ----------
    i : In(stream.Signature(sparse_compactor_input_layout(meta_shape)))
    o : Out(stream.Signature(sparse_compactor_output_layout(meta_shape)))
    latency : int
        ``LATENCY`` = 3 cycles from an accepted job to its output beat.

    Raises
    ------
    ValueError
        If ``meta_shape`` is not shape-castable.

    Notes
    -----
    Latency: 3 cycles (three register stages; the output payload comes straight
    from the stage-3 registers). Throughput: one job per cycle. Backpressure:
    each stage advances when the next one is empty or advancing, so
    ``i.ready`` is one LUT of ``o.ready`` and the three valid bits (give ``o``
    a registered ready); nothing is dropped, duplicated or reordered, and a
    bubble inside the pipeline is filled while the output waits. Only the
    valid bits are reset. Resources (Yosys ``synth_xilinx``, UltraScale+,
    2-bit ``meta``): ~3.3 k LUT, ~2.3 k FF; mostly the two 8-slot crossbars of
    38 bits (value, index low bits, two flags), triangular, the merge (slot
    ``j`` has up to 9 candidates), and the 512 value bits of each stage plus
    the 256 index bits of the output.
    """

    LATENCY = 3

    def __init__(self, meta_shape=unsigned(1)):
        _check_meta_shape(meta_shape)
        self.meta_shape = meta_shape
        super().__init__({
            "i": In(stream.Signature(sparse_compactor_input_layout(meta_shape))),
            "o": Out(stream.Signature(sparse_compactor_output_layout(meta_shape))),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        p = self.i.payload

        # Per-stage enables: a stage loads when it is empty or its content moves on.
        valid = [Signal(name=f"valid_s{k + 1}") for k in range(3)]
        enable = [Signal(name=f"enable_s{k + 1}") for k in range(3)]
        m.d.comb += [
            enable[2].eq(~valid[2] | self.o.ready),
            enable[1].eq(~valid[1] | enable[2]),
            enable[0].eq(~valid[0] | enable[1]),
            self.i.ready.eq(enable[0]),
            self.o.valid.eq(valid[2]),
        ]
        for k in range(3):
            with m.If(enable[k]):
                m.d.sync += valid[k].eq(self.i.valid if k == 0 else valid[k - 1])

        # Datapath registers carry no reset: the valid bits say whether they are meaningful.
        def stage(k, value, name, width=None):
            r = Signal(width or len(value), name=f"{name}_s{k + 1}", reset_less=True)
            with m.If(enable[k]):
                m.d.sync += r.eq(value)
            return r

        # ---- stage 1: slots within the halves (one-hot), compact indices ----
        keep = [p.keep[e] for e in range(ELEMENTS)]
        # Elements of the closing frame: a thermometer code of ``split``, decoded as a
        # table (one LUT per bit) rather than 16 comparators, which map to carry chains.
        below_split = Signal(ELEMENTS, name="below_split")
        with m.Switch(p.split):
            for s in range(32):
                with m.Case(s):
                    m.d.comb += below_split.eq((1 << min(s, ELEMENTS)) - 1)
        first = Signal(ELEMENTS, name="in_first_frame")
        m.d.comb += first.eq(below_split | (~p.close_mid).replicate(ELEMENTS))

        base_lo = [p.base[k] for k in range(4)]
        minus_split = [~p.split[k] for k in range(4)]
        entries = []      # value, low 4 bits of the index, (high = base[4:], base[4:] + 1)
        selects = []      # select[e][j]: element e goes to slot j of its half
        for e in range(ELEMENTS):
            own = add_bits(base_lo, const_bits(e, 4))                    # base[:4] + e
            rel = add_bits(const_bits(e, 4), minus_split, Const(1, 1))   # e - split
            index_lo = Mux(first[e], Cat(*own[:4]), Cat(*rel[:4]))
            flags = Cat(first[e] & ~own[4], first[e] & own[4])
            entries.append(stage(0, Cat(p.values[e], index_lo, flags), f"entry{e}"))
            lo = e - e % _HALF
            before = count_onehot(m, keep[lo:e], f"before{e}")
            selects.append(stage(0, Cat(keep[e] & before[j] for j in range(e - lo + 1)),
                                 f"select{e}"))
        low_count = stage(0, Cat(*count_onehot(m, keep[:_HALF], "low_count")), "low_count")
        base_hi = stage(0, p.base[4:], "base_hi")
        base_hi_inc = stage(0, p.base[4:] + 1, "base_hi_inc")
        keep1 = stage(0, p.keep, "keep")
        keep_first1 = stage(0, p.keep & first, "keep_first")
        tail1 = stage(0, Cat(p.count, p.split, p.close_mid, Value.cast(p.meta)), "tail")

        # ---- stage 2: each half compacted on its own; the counts ----
        halves = []
        for h in range(2):
            slots = []
            for j in range(_HALF):
                terms = [Mux(selects[e][j], entries[e], 0)
                         for e in range(_HALF * h + j, _HALF * (h + 1))]
                slots.append(stage(1, or_all(terms), f"half{h}_slot{j}"))
            halves.append(slots)
        low_count2 = stage(1, low_count, "low_count")
        base_hi2 = stage(1, base_hi, "base_hi")
        base_hi_inc2 = stage(1, base_hi_inc, "base_hi_inc")
        kept2 = stage(1, popcount16(m, [keep1[e] for e in range(ELEMENTS)], "kept"), "kept")
        kept_split2 = stage(1, popcount16(m, [keep_first1[e] for e in range(ELEMENTS)],
                                           "kept_split"), "kept_split")
        keep2 = stage(1, keep1, "keep")
        tail2 = stage(1, tail1, "tail")

        # ---- stage 3: the high half behind the low half's kept elements; indices ----
        out = Signal(sparse_compactor_output_layout(self.meta_shape), reset_less=True)
        m.d.comb += self.o.payload.eq(out)
        tail_out = Cat(out.count, out.split, out.close_mid, Value.cast(out.meta))
        with m.If(enable[2]):
            m.d.sync += [
                out.kept.eq(kept2),
                out.kept_split.eq(kept_split2),
                out.keep.eq(keep2),
                tail_out.eq(tail2),
            ]
            for j in range(ELEMENTS):
                # Slot j: the low half's slot j (zero past its kept elements) or the high
                # half's slot j - v when v elements of the low half are kept.
                terms = [halves[0][j]] if j < _HALF else []
                terms += [Mux(low_count2[v], halves[1][j - v], 0)
                          for v in range(_HALF + 1) if 0 <= j - v < _HALF]
                slot = Signal(_ENTRY, name=f"slot{j}")
                m.d.comb += slot.eq(or_all(terms))
                # Both flags clear (empty slot, or after a mid-job close): high bits zero.
                hi = Mux(slot[36], base_hi2, 0) | Mux(slot[37], base_hi_inc2, 0)
                m.d.sync += [
                    out.values[j].eq(slot[:32]),
                    out.indices[j].eq(Cat(slot[32:36], hi)),
                ]
        return m
