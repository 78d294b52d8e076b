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

__all__ = ["SparseCompactor", "sparse_compactor_input_layout",
           "sparse_compactor_output_layout", "ELEMENTS"]

#: Elements per job (one 512-bit beat of fp32).
ELEMENTS = 16
_GROUP = 4      # elements per group of the two-level prefix count


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


def _add(a, b, carry=None):
    """Sum of two little-endian bit lists, one bit wider, as plain gates.

    Yosys maps every ``+`` to a ``CARRY4`` chain, however narrow; these adders
    of at most 5 bits are better left to ABC, which maps whole cones into LUTs.
    """
    n = max(len(a), len(b))
    a = list(a) + [Const(0, 1)] * (n - len(a))
    b = list(b) + [Const(0, 1)] * (n - len(b))
    out = []
    for x, y in zip(a, b, strict=True):
        if carry is None:
            out.append(x ^ y)
            carry = x & y
        else:
            out.append(x ^ y ^ carry)
            carry = (x & y) | (carry & (x ^ y))
    return out + [Const(0, 1) if carry is None else carry]


def _const_bits(value, width):
    return [Const((value >> k) & 1, 1) for k in range(width)]


def _named(m, bits, name):
    """A comb signal holding ``bits``: shared logic is then built (and simulated) once."""
    sig = Signal(len(bits), name=name)
    m.d.comb += sig.eq(Cat(*bits))
    return [sig[k] for k in range(len(bits))]


def _prefix_counts(m, bits, name):
    """Ranks (set bits below each position, 4 bits) and the total (5 bits) of 16 bits.

    Two levels: counts within groups of 4, then the counts of the earlier groups.
    """
    groups = [bits[g:g + _GROUP] for g in range(0, ELEMENTS, _GROUP)]
    # within a group: 0, b0, b0+b1, b0+b1+b2 and the group's count b0+b1+b2+b3
    local = []
    for g, (b0, b1, b2, b3) in enumerate(groups):
        s01 = _add([b0], [b1])
        local.append([[], [b0], s01, _add(s01, [b2])[:2],
                      _named(m, _add(s01, _add([b2], [b3])), f"{name}_group{g}")])
    offsets = [[], local[0][4]]
    for g in (1, 2):
        offsets.append(_named(m, _add(offsets[-1], local[g][4]), f"{name}_offset{g + 1}"))
    total = _add(offsets[3], local[3][4])[:5]
    ranks = []
    for e in range(ELEMENTS):
        g, k = divmod(e, _GROUP)
        ranks.append((_add(offsets[g], local[g][k]) + [Const(0, 1)] * 4)[:4])
    return ranks, total


class SparseCompactor(wiring.Component):
    """Compacts the kept elements of a job into a dense prefix, one job per cycle.

    Stage 1 computes each element's rank (kept elements before it) as a
    two-level prefix count (within groups of 4, plus the counts of the earlier
    groups), ``kept`` and ``kept_split``, and each element's index in a
    compact form: its low 4 bits, and whether its high 12 bits are
    ``base[4:]``, ``base[4:] + 1`` (carry out of ``base[:4] + e``) or zero
    (after a mid-job close). Stage 2 is the crossbar: slot ``j`` takes, by a
    one-hot AND-OR, the value and compact index of the kept element of rank
    ``j`` (only elements ``e >= j`` can have rank ``j``), then expands the
    index; slots nobody selects stay zero.

    Parameters
    ----------
    meta_shape : shape-castable
        Shape of ``meta``, which rides along unchanged (default ``unsigned(1)``).

    Attributes
    ----------
    i : In(stream.Signature(sparse_compactor_input_layout(meta_shape)))
    o : Out(stream.Signature(sparse_compactor_output_layout(meta_shape)))
    latency : int
        ``LATENCY`` = 2 cycles from an accepted job to its output beat.

    Raises
    ------
    ValueError
        If ``meta_shape`` is not shape-castable.

    Notes
    -----
    Latency: 2 cycles (two register stages; the output payload comes straight
    from the stage-2 registers). Throughput: one job per cycle. Backpressure:
    each stage advances when the next one is empty or advancing
    (``i.ready`` depends combinationally on ``o.ready``); nothing is dropped,
    duplicated or reordered, and a bubble inside the pipeline is filled while
    the output waits. Resources (Yosys ``synth_xilinx``, UltraScale+, 16-bit
    ``meta``): ~3.6 k LUT, ~1.56 k FF, 3 CARRY4, logic depth 7; mostly the
    crossbar of 16 slots by 38 bits (value, index low bits, two flags),
    triangular since slot ``j`` has ``16 - j`` candidates, and the 512 value
    bits of each stage plus the 256 index bits of the output.
    """

    LATENCY = 2

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
        meta_width = Shape.cast(self.meta_shape).width

        # Per-stage enables: a stage loads when it is empty or its content moves on.
        valid1 = Signal(name="valid_s1")
        en1 = Signal(name="enable_s1")
        en2 = Signal(name="enable_s2")
        m.d.comb += [
            en2.eq(~self.o.valid | self.o.ready),
            en1.eq(~valid1 | en2),
            self.i.ready.eq(en1),
        ]

        # ---- stage 1: ranks, counts, compact indices ----
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
        ranks, kept = _prefix_counts(m, keep, "kept")
        _, kept_split = _prefix_counts(m, [keep[e] & first[e] for e in range(ELEMENTS)],
                                       "kept_split")

        base_lo = [p.base[k] for k in range(4)]
        minus_split = [~p.split[k] for k in range(4)]
        index_lo = []     # low 4 bits of each element's index
        flags = []        # (high bits = base[4:], high bits = base[4:] + 1)
        for e in range(ELEMENTS):
            own = _add(base_lo, _const_bits(e, 4))                    # base[:4] + e
            rel = _add(_const_bits(e, 4), minus_split, Const(1, 1))   # e - split
            index_lo.append(Mux(first[e], Cat(*own[:4]), Cat(*rel[:4])))
            flags.append(Cat(first[e] & ~own[4], first[e] & own[4]))

        r_values = Signal.like(p.values, name="values_s1")
        r_rank = [Signal(4, name=f"rank{e}_s1") for e in range(ELEMENTS)]
        r_index_lo = [Signal(4, name=f"index_lo{e}_s1") for e in range(ELEMENTS)]
        r_flags = [Signal(2, name=f"index_hi_sel{e}_s1") for e in range(ELEMENTS)]
        r_base_hi = Signal(12, name="base_hi_s1")
        r_base_hi_inc = Signal(12, name="base_hi_inc_s1")
        r_keep = Signal(ELEMENTS, name="keep_s1")
        r_count = Signal(5, name="count_s1")
        r_split = Signal(5, name="split_s1")
        r_close = Signal(name="close_mid_s1")
        r_kept = Signal(5, name="kept_s1")
        r_kept_split = Signal(5, name="kept_split_s1")
        r_meta = Signal(meta_width, name="meta_s1")
        with m.If(en1):
            m.d.sync += [
                valid1.eq(self.i.valid),
                r_values.eq(p.values),
                r_base_hi.eq(p.base[4:]),
                r_base_hi_inc.eq(p.base[4:] + 1),
                r_keep.eq(p.keep),
                r_count.eq(p.count),
                r_split.eq(p.split),
                r_close.eq(p.close_mid),
                r_kept.eq(Cat(*kept)),
                r_kept_split.eq(Cat(*kept_split)),
                r_meta.eq(Value.cast(p.meta)),
            ]
            for e in range(ELEMENTS):
                m.d.sync += [
                    r_rank[e].eq(Cat(*ranks[e])),
                    r_index_lo[e].eq(index_lo[e]),
                    r_flags[e].eq(flags[e]),
                ]

        # ---- stage 2: crossbar, index expansion ----
        o = self.o.payload
        with m.If(en2):
            m.d.sync += [
                self.o.valid.eq(valid1),
                o.kept.eq(r_kept),
                o.kept_split.eq(r_kept_split),
                o.keep.eq(r_keep),
                o.count.eq(r_count),
                o.split.eq(r_split),
                o.close_mid.eq(r_close),
                Value.cast(o.meta).eq(r_meta),
            ]
            for j in range(ELEMENTS):
                # Element e has rank <= e, so only e >= j can land in slot j.
                slot = Signal(38, name=f"slot{j}")
                terms = []
                for e in range(j, ELEMENTS):
                    hit = r_keep[e] & (r_rank[e] == j)
                    terms.append(Cat(r_values[e], r_index_lo[e], r_flags[e]) & hit.replicate(38))
                m.d.comb += slot.eq(_or_all(terms))
                # Both flags clear (empty slot, or after a mid-job close): high bits zero.
                hi = (r_base_hi & slot[36].replicate(12)) | (r_base_hi_inc & slot[37].replicate(12))
                m.d.sync += [
                    o.values[j].eq(slot[:32]),
                    o.indices[j].eq(Cat(slot[32:36], hi)),
                ]
        return m


def _or_all(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out
