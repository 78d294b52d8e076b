"""The RX lane's threshold expander: kept values into the keep bits of a bitmap.

Codec 7 (``threshold``) sends, per wire frame, a bitmap of keep bits and then
the ``k`` kept fp32 values. The lane's :class:`~.rx.unpacker.WireUnpacker`
turns the bitmap into jobs of up to 16 one-bit codes (width 1); this block
swaps each keep bit for its value by the RX decode rule of
:mod:`squeezenic_hw.reference.threshold` (``decode_payload``): the element with the
``r``-th set bit of the wire frame (rank over the whole frame, counted in job
order) takes value ``r`` when ``r < k``, else +0.0; clear bits give +0.0;
values past the set bits are dropped. Jobs of other codecs pass unchanged.
"""

from amaranth import Array, Cat, Const, Module, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, CODES_PER_JOB
from squeezenic_hw.gateware.common.stream import LutramFifo, SkidBuffer
from squeezenic_hw.gateware.sparse.bits import (
    combine_onehot,
    count_onehot,
    or_all,
    popcount16,
    shift_right_by4,
)

__all__ = [
    "VALUE_DESC_LAYOUT", "sparse_expander_job_layout", "SparseExpander",
]

#: One per sparse wire frame: ``k`` values, the first at byte ``start`` of the first beat.
VALUE_DESC_LAYOUT = data.StructLayout({"k": unsigned(16), "start": unsigned(6)})

_BEAT_BYTES = BEAT_BITS // 8
# Eight beats: the next job reads at most the two beats from R, and a beat is taken while
# fewer than eight are unread after the jobs counted so far. Four would do for the job
# waiting now; the rest covers i.ready being a register (a cycle late) at one job and one
# value beat per cycle.
_SLOT_BITS = 3
_RING_BEATS = 1 << _SLOT_BITS
_RANK_BITS = (CODES_PER_JOB - 1).bit_length()       # rank of a keep bit inside a job
# Byte positions in the value stream, modulo 2**22 (beats modulo 2**16): a frame's last
# job only leaves while at most 8192 beats of finished frames are still to come, and a
# frame has at most 4097 beats, so positions never get 2**15 beats apart.
_POS_BITS = 22
_OWED_BEATS = 8192
_BEATS_BITS = 13                                    # a frame's value beats: ≤ 4097
_DESC_DEPTH = 4


def sparse_expander_job_layout(tag_shape=unsigned(1)):
    """One job into and out of :class:`SparseExpander`.

    ``count`` (1…16) codes are valid (a prefix of ``codes``); ``frame_last``
    marks the wire frame's last job; ``sparse`` marks a job of a threshold
    frame (bit 0 of each code is a keep bit on the way in, a fp32 value on the
    way out).
    """
    return data.StructLayout({
        "codes": data.ArrayLayout(unsigned(32), CODES_PER_JOB),
        "count": unsigned(5),
        "frame_last": unsigned(1),
        "sparse": unsigned(1),
        "tag": tag_shape,
    })


def _datapath(shape, name):
    """A register of data: no reset."""
    return Signal(shape, name=name, reset_less=True)


def _fields_of(job):
    """The fields that ride along with a job's data, as one value."""
    return Cat(job.count, job.frame_last, job.sparse, Value.cast(job.tag))


class SparseExpander(wiring.Component):
    """Replace the keep bits of threshold jobs with the frame's kept fp32 values.

    Parameters
    ----------
    tag_shape : shape-castable
        Shape of the ``tag`` carried through with each job.

    Attributes
    ----------
    i : In(stream.Signature(sparse_expander_job_layout(tag_shape)))
        Jobs. For ``sparse`` jobs bit 0 of ``codes[e]`` (``e < count``) is the
        keep bit; higher bits and codes ``e ≥ count`` are ignored.
    vdesc : In(stream.Signature(VALUE_DESC_LAYOUT))
        One per sparse wire frame, in frame order, ahead of (in stream order)
        the frame's jobs: ``k`` and ``start``.
    values : In(stream.Signature(unsigned(512)))
        The value beats of the sparse frames, frame after frame: exactly
        ``⌈(start + 4k)/64⌉`` beats per frame (none when ``k = 0``); value
        ``r`` is bytes ``[start + 4r, start + 4r + 4)`` of the frame's beats
        (byte 0 in bits 7:0).
    o : Out(stream.Signature(sparse_expander_job_layout(tag_shape)))
        Jobs, in order. Sparse: ``codes[e]`` is the element's value or 0
        (``e < count``), 0 for ``e ≥ count``; non-sparse: unchanged.
        ``count``, ``frame_last``, ``sparse``, ``tag`` pass through.
    count_error : Out(1)
        High, for one cycle, in the cycle a sparse frame's ``frame_last`` job
        is *transferred* on ``o`` (``o.valid & o.ready``) when the frame's set
        bits (``e < count`` over its jobs) are not ``k``.

    Notes
    -----
    Structure, one register stage after another:

    1. an input skid buffer (``i.ready`` a register) with each job's keep bits;
    2. ranks: the number of set bits, and each kept element's slot within its
       half of the job and the low half's count, one-hot;
    3. counting: per sparse job, the values it takes and where they are (from
       the frame's descriptor); the counted jobs wait in a skid buffer for
       their value beats;
    4. pair: the two beats of a 1 KiB ring of eight beat slots holding the
       value stream from the job's first value (or a non-sparse job's codes);
       each element's rank in the job, one-hot;
    5. window: the pair shifted by the first value's byte offset (stages of
       4:1 multiplexers); which elements take a value;
    6. output: element ``e`` takes the word of its rank (an AND-OR of ``e + 1``
       words).

    A 4-entry queue holds the frame descriptors, each with its skip
    (``start``, or 0 when ``k = 0``) and its number of value beats, computed on
    the way in. The value stream is followed as a byte stream with the
    position ``P`` of the next value to count, the read position ``R`` (where
    the next job to leave stage 3 reads) and ``W`` beats written. A frame's
    descriptor is loaded as soon as the previous frame's last job is counted
    (or when there is none): ``P`` goes to its first value; a job with ``p``
    set bits takes ``u = min(p, k_left)`` values (``4u`` bytes); a frame's last
    job moves on to the end of the frame's beats. ``W − R`` goes negative when
    a frame ends before its beats are in: those beats are then taken and
    dropped as they come, while the jobs that need no values (the rest of a
    ``k = 0`` frame, non-sparse jobs) go on. ``values.ready`` is a register:
    a beat is taken while fewer than eight beats from ``R``'s are in, with
    ``R`` and ``W`` as they will be in the cycle it is offered.

    Latency: 6 cycles from an accepted job to its job on ``o`` when its values
    and its frame's descriptor are in (the six registers above). A taken beat
    is usable the next cycle; a descriptor in the cycle after it reaches the
    queue's output register, two cycles after it was taken (once the frame
    before has been counted).

    Throughput: one job per cycle whenever the values it needs are in. A job
    reads up to 64 value bytes (two beats), and at a frame boundary the read
    position also skips the rest of the frame's last beat and the next frame's
    ``start`` (up to 190 bytes in all); the ring takes one beat per cycle up to
    eight ahead of ``R``, so with value beats offered every cycle a job waits
    only for beats that one beat per cycle could not have brought earlier (the
    tests check this cycle for cycle). At full density that is one job per
    cycle while a stretch of frames has no more value beats than jobs, across
    frame boundaries, ``start`` offsets and short jobs. Jobs that need no
    values (non-sparse, no set bits, values used up, ``k = 0``) never wait for
    beats. Exceptions: the unused beats of a frame (``k`` above its set bits)
    are known only at its last job and are then dropped at one per cycle
    before the next frame's values; and a frame's last job waits while more
    than 8192 beats (2**19 bytes) of finished frames are still owed (so the
    16-bit beat counts cannot wrap).

    Backpressure: ``o`` holds its job while ``o.valid & ~o.ready``; the
    stages then fill, ``i.ready`` drops, the ring stops taking beats once
    full and the descriptor queue once 4 are waiting. Nothing is dropped or
    reordered. ``i.ready``, ``values.ready`` and ``vdesc.ready`` are
    registers; ``o.ready`` reaches the last three stages' enables and the
    skid buffer holding the counted jobs. Datapath registers take no reset.
    """

    LATENCY = 6

    def __init__(self, tag_shape=unsigned(1)):
        try:
            Shape.cast(tag_shape)
        except TypeError as e:
            raise ValueError(f"tag_shape must be shape-castable, got {tag_shape!r}") from e
        self.tag_shape = tag_shape
        self.job_layout = sparse_expander_job_layout(tag_shape)
        super().__init__({
            "i": In(stream.Signature(self.job_layout)),
            "vdesc": In(stream.Signature(VALUE_DESC_LAYOUT)),
            "values": In(stream.Signature(unsigned(BEAT_BITS))),
            "o": Out(stream.Signature(self.job_layout)),
            "count_error": Out(1),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        N = CODES_PER_JOB
        H = N // 2                              # elements per half of a job
        ip = self.i.payload

        desc_q, desc_out = self._descriptors(m)

        # --- input: a skid buffer (i.ready a register); keep bits and their number -------
        staged = data.StructLayout({"job": self.job_layout, "keep": unsigned(N)})
        m.submodules.input = inq = SkidBuffer(staged)
        m.d.comb += [
            inq.i.valid.eq(self.i.valid),
            self.i.ready.eq(inq.i.ready),
            inq.i.payload.job.eq(ip),
            inq.i.payload.keep.eq(Cat(ip.sparse & (ip.count > e) & ip.codes[e][0]
                                      for e in range(N))),
        ]

        r_valid, a, acc_fire = self._ranks(m, inq)
        a_job = a.job

        # --- the pipeline's enables (from the output back) --------------------------------
        o_valid = Signal()
        w_valid = Signal()      # window stage
        p_valid = Signal()      # pair stage
        c_valid = Signal()      # counted stage: the job waits there for its value beats
        c_fire = Signal()
        p_free = Signal()
        m.d.comb += [
            self.o.valid.eq(o_valid),
            p_free.eq(~p_valid | ~w_valid | ~o_valid | self.o.ready),
        ]
        out_free = ~o_valid | self.o.ready
        w_free = ~w_valid | out_free

        counted = data.StructLayout({
            "job": self.job_layout,
            "use": range(N + 1),
            "no_values": unsigned(1),           # u = 0, or not sparse
            "first": unsigned(6 + _SLOT_BITS),  # P: ring slot, byte offset
            "need": unsigned(_POS_BITS - 6),    # beats needed: ⌈(P + 4u)/64⌉
            "after": unsigned(_POS_BITS),       # R after the job
            "err": unsigned(1),                 # last job: set bits ≠ k
            # each kept element's slot within its half, one-hot
            "local": data.ArrayLayout(unsigned(H), N),
            "low": unsigned(H + 1),             # kept elements of the low half, one-hot
        })
        # The counted jobs wait for their value beats in a skid buffer: the counting
        # sees a registered ready.
        m.submodules.counted = cq = SkidBuffer(counted)
        # --- counting: the values each job takes and where they are ----------------------
        # The value stream is a byte stream; P is the position of the frame's next value,
        # `base` the beat where the next frame's values begin. Per sparse job:
        # u = min(set bits, values left), its values at [P, P + 4u); a frame's last job
        # moves on to the frame's end (the next frame's base).
        cur_valid = Signal()                    # a sparse frame's descriptor is loaded
        krem = Signal(16)                       # values of the frame not yet given
        krem16 = Signal(signed(17))             # krem − 16
        pos = Signal(_POS_BITS)                 # P
        pos63 = Signal(_POS_BITS)               # P + 63
        base = Signal(_POS_BITS - 6)            # the next frame's first beat
        over = Signal()                         # a job had more set bits than krem
        a_sparse, a_last = a_job.sparse, a_job.frame_last
        all_in = Signal()                       # every set bit gets a value: u = pop
        m.d.comb += all_in.eq(~krem16[-1] | (a.pop <= krem[:5]))
        use = Mux(all_in, a.pop, krem[:5])
        lfire = Signal()
        load = Signal()
        m.d.comb += [
            acc_fire.eq(r_valid & (~a_sparse | cur_valid) & cq.i.ready),
            lfire.eq(acc_fire & a_sparse & a_last),
            # The next frame is loaded as this one's last job is counted: no bubble.
            load.eq(desc_q.r_rdy & (~cur_valid | lfire)),
            desc_q.r_en.eq(load),
        ]
        end_pop = pos + (a.pop << 2)            # P + 4u for u = pop, and for u = krem
        end_krem = pos + (krem[:5] << 2)
        end63_pop = pos63 + (a.pop << 2)
        end63_krem = pos63 + (krem[:5] << 2)
        with m.If(load):
            m.d.sync += [
                cur_valid.eq(1),
                krem.eq(desc_out.k),
                krem16.eq(desc_out.k - 16),
                pos.eq(Cat(desc_out.skip, base)),
                pos63.eq(Cat(desc_out.skip, base) + 63),
                base.eq(base + desc_out.beats),
                over.eq(0),
            ]
        with m.Elif(lfire):
            m.d.sync += cur_valid.eq(0)
        with m.Elif(acc_fire & a_sparse):
            m.d.sync += [
                krem.eq(Mux(all_in, krem - a.pop, 0)),
                krem16.eq(Mux(all_in, krem16 - a.pop, -16)),
                pos.eq(Mux(all_in, end_pop, end_krem)),
                pos63.eq(Mux(all_in, end63_pop, end63_krem)),
                over.eq(over | ~all_in),
            ]

        # The counted job: what it reads, the beats it needs, where R goes after it, and
        # each kept element's slot within its half (one-hot) with the count of the low
        # half's kept elements (one-hot), from which the next stage has the ranks.
        cn = cq.i.payload
        # pop = krem: the (only) case where set bits = values of the frame left
        pop_is_krem = (krem[5:] == 0) & (a.pop == krem[:5])
        m.d.comb += [
            cq.i.valid.eq(acc_fire),
            cn.job.eq(a_job),
            cn.use.eq(Mux(a_sparse, use, 0)),
            cn.no_values.eq(~a_sparse | (a.pop == 0) | (~all_in & (krem[:5] == 0))),
            cn.first.eq(pos[:6 + _SLOT_BITS]),
            cn.need.eq(Mux(all_in, end63_pop, end63_krem)[6:]),
            cn.after.eq(Mux(a_last, Cat(Const(0, 6), base), Mux(all_in, end_pop, end_krem))),
            cn.err.eq(a_last & (over | ~pop_is_krem)),
            cn.low.eq(a.low),
            cn.local.eq(a.local),
        ]
        c = cq.o.payload
        m.d.comb += [c_valid.eq(cq.o.valid), cq.o.ready.eq(c_fire)]

        ring = self._value_ring(m, c, c_valid, c_fire, p_free)
        p = self._pair_stage(m, c, c_fire, ring, p_free, p_valid)
        w = self._window_stage(m, p, p_valid, w_valid, w_free)
        self._output_stage(m, w, w_valid, out_free, o_valid)
        return m

    def _fields(self):
        """What rides along with a job's data."""
        return data.StructLayout({
            "count": unsigned(5), "frame_last": unsigned(1), "sparse": unsigned(1),
            "tag": self.tag_shape})

    def _descriptors(self, m):
        """Frame descriptors: the skip and the frame's value beats are computed on the way
        in, so loading a frame is a plain move. Returns the FIFO and its read view."""
        desc_layout = data.StructLayout({
            "k": unsigned(16), "skip": unsigned(6), "beats": unsigned(_BEATS_BITS)})
        m.submodules.desc = desc_q = LutramFifo(width=desc_layout.size, depth=_DESC_DEPTH)
        desc_in = data.View(desc_layout, desc_q.w_data)
        desc_out = data.View(desc_layout, desc_q.r_data)
        vk, vstart = self.vdesc.payload.k, self.vdesc.payload.start
        has_values = vk != 0
        m.d.comb += [
            desc_in.k.eq(vk),
            # k = 0: no beats at all, so nothing to skip either.
            desc_in.skip.eq(Mux(has_values, vstart, 0)),
            desc_in.beats.eq(Mux(has_values, (vstart + (vk << 2) + (_BEAT_BYTES - 1)) >> 6, 0)),
            desc_q.w_en.eq(self.vdesc.valid),
            self.vdesc.ready.eq(desc_q.w_rdy),
        ]
        return desc_q, desc_out

    def _ranks(self, m, inq):
        """Ranks: the number of set bits, each kept element's slot within its half
        (one-hot) and the kept elements of the low half (one-hot), registered; returns
        ``(valid, ranked job, the fire of the counting stage)``."""
        N = CODES_PER_JOB
        H = N // 2                              # elements per half of a job
        ranked = data.StructLayout({
            "job": self.job_layout,
            "keep": unsigned(N),
            "pop": range(N + 1),
            "local": data.ArrayLayout(unsigned(H), N),
            "low": unsigned(H + 1),
        })
        r_valid = Signal()
        a = _datapath(ranked, "ranked")
        acc_fire = Signal()
        r_free = Signal()
        m.d.comb += [r_free.eq(~r_valid | acc_fire), inq.o.ready.eq(r_free)]
        kept = [inq.o.payload.keep[e] for e in range(N)]
        with m.If(r_free):
            m.d.sync += r_valid.eq(inq.o.valid)
        with m.If(r_free & inq.o.valid):
            m.d.sync += [
                a.job.eq(inq.o.payload.job),
                a.keep.eq(inq.o.payload.keep),
                a.pop.eq(popcount16(m, kept, "pop")),
                a.low.eq(Cat(*count_onehot(m, kept[:H], "low"))),
            ]
            for e in range(N):
                lo = e - e % H
                before = count_onehot(m, kept[lo:e], f"local{e}")
                m.d.sync += a.local[e].eq(Cat(kept[e] & before[j] for j in range(e - lo + 1)))
        return r_valid, a, acc_fire

    def _value_ring(self, m, c, c_valid, c_fire, p_free):
        """The value ring: eight beat slots; W beats written, R read. The counted job
        ``c`` leaves (``c_fire``) when its value beats are in; R moves past its values."""
        ring = Array(_datapath(BEAT_BITS, f"ring{j}") for j in range(_RING_BEATS))
        written = Signal(_POS_BITS - 6)         # W
        written1 = Signal(_POS_BITS - 6, init=1)    # W + 1
        read = Signal(_POS_BITS)                # R: where the next job's values begin
        values_ready = Signal(init=1)
        owed_ok = Signal(init=1)                # R − W ≤ 8192 beats
        values_in = Signal()                    # the counted job needs no beat that is not in
        m.d.comb += self.values.ready.eq(values_ready)
        took = self.values.valid & values_ready
        with m.If(took):
            # A beat taken while it lies wholly before R: written, never read.
            m.d.sync += [ring[written[:_SLOT_BITS]].eq(self.values.payload),
                         written.eq(written1), written1.eq(written1 + 1)]

        def behind(w, r):
            """w − r ≥ 0, modulo 2**16 (positions never get 2**15 beats apart)."""
            diff = Signal(signed(_POS_BITS - 6))
            m.d.comb += diff.eq(w - r)
            return ~diff[-1]

        def unread_below(r, limit):
            """Fewer than ``limit`` beats from R's beat ``r`` to W (or W behind r)."""
            diff = Signal(signed(_POS_BITS - 6))
            m.d.comb += diff.eq(written - r)
            return diff[-1] | (diff < limit)

        def owed_ok_for(r):
            diff = Signal(signed(_POS_BITS - 6))
            m.d.comb += diff.eq(written - r)
            return diff >= -_OWED_BEATS

        # The counted job leaves when its value beats are in; R moves past its values.
        c_sparse, c_last = c.job.sparse, c.job.frame_last
        m.d.comb += values_in.eq(c.no_values | behind(written, c.need))
        m.d.comb += c_fire.eq(c_valid & p_free & values_in & (~c_sparse | ~c_last | owed_ok))
        moves = c_fire & c_sparse
        with m.If(moves):
            m.d.sync += read.eq(c.after)
        # Next cycle's flags, from this cycle's registers: a beat taken now counts, and
        # for R, both cases (the job leaves now or not) are computed and the job's leaving
        # only picks one.
        m.d.sync += [
            owed_ok.eq(Mux(moves, owed_ok_for(c.after[6:]), owed_ok_for(read[6:]))),
            values_ready.eq(Mux(moves, unread_below(c.after[6:], _RING_BEATS - took),
                                unread_below(read[6:], _RING_BEATS - took))),
        ]
        return ring

    def _pair_stage(self, m, c, c_fire, ring, p_free, p_valid):
        """Pair stage: the two ring slots from P (or a non-sparse job's codes); ranks."""
        N = CODES_PER_JOB
        H = N // 2                              # elements per half of a job
        fields = self._fields()
        c_sparse, c_last = c.job.sparse, c.job.frame_last
        p_pair = _datapath(2 * BEAT_BITS, "p_pair")
        p_offset = _datapath(6, "p_offset")      # bytes to rotate the pair by
        p_rank = [_datapath(e + 1, f"p_rank{e}") for e in range(N)]   # one-hot, with keep
        p_below = _datapath(N, "p_below")        # thermometer: j < u
        p_fields = _datapath(fields, "p_fields")
        p_err = _datapath(1, "p_err")
        rslot = c.first[6:]
        with m.If(p_free):
            m.d.sync += p_valid.eq(c_fire)
        with m.If(c_fire):
            m.d.sync += [
                p_pair.eq(Mux(c_sparse, Cat(ring[rslot], ring[(rslot + 1)[:_SLOT_BITS]]),
                              c.job.codes)),
                p_offset.eq(Mux(c_sparse, c.first[:6], 0)),
                p_below.eq(Cat(c.use > j for j in range(N))),
                p_fields.eq(_fields_of(c.job)),
                p_err.eq(c_sparse & c_last & c.err),
            ]
            low = [c.low[v] for v in range(H + 1)]
            for e in range(N):
                local = [c.local[e][j] for j in range(e % H + 1)]
                rank = local if e < H else combine_onehot(m, low, local, f"rank{e}")
                m.d.sync += p_rank[e].eq(Cat(*rank[:e + 1]))
        return p_pair, p_offset, p_rank, p_below, p_fields, p_err

    def _window_stage(self, m, p, p_valid, w_valid, w_free):
        """Window stage: the 64 bytes from P; which elements take a value."""
        N = CODES_PER_JOB
        words = data.ArrayLayout(unsigned(32), N)
        fields = self._fields()
        p_pair, p_offset, p_rank, p_below, p_fields, p_err = p
        w_data = _datapath(words, "w_data")      # the value window, or a non-sparse job's codes
        w_rank = [_datapath(e + 1, f"w_rank{e}") for e in range(N)]
        w_mask = _datapath(N, "w_mask")          # kept, and among the first u
        w_fields = _datapath(fields, "w_fields")
        w_err = _datapath(1, "w_err")
        with m.If(w_free):
            m.d.sync += w_valid.eq(p_valid)
        with m.If(p_valid & w_free):
            m.d.sync += [
                w_data.eq(shift_right_by4(p_pair, p_offset, 8)[:BEAT_BITS]),
                w_mask.eq(Cat(or_all([p_rank[e][j] & p_below[j] for j in range(e + 1)])
                              for e in range(N))),
                w_fields.eq(p_fields),
                w_err.eq(p_err),
            ]
            for e in range(N):
                m.d.sync += w_rank[e].eq(p_rank[e])
        return w_data, w_rank, w_mask, w_fields, w_err

    def _output_stage(self, m, w, w_valid, out_free, o_valid):
        """The output register."""
        N = CODES_PER_JOB
        op = self.o.payload
        w_data, w_rank, w_mask, w_fields, w_err = w
        o_job = _datapath(self.job_layout, "o_job")
        o_err = Signal()
        m.d.comb += op.eq(o_job)
        w_sparse = w_fields.sparse
        with m.If(out_free):
            m.d.sync += [o_valid.eq(w_valid), o_err.eq(w_valid & w_err)]
            with m.If(w_valid):
                m.d.sync += _fields_of(o_job).eq(w_fields)
                for e in range(N):
                    # Element e's rank in its job is at most e: an AND-OR of e + 1 words.
                    picked = or_all([w_data[j] & w_rank[e][j].replicate(32)
                                     for j in range(e + 1)])
                    m.d.sync += o_job.codes[e].eq(
                        Mux(w_sparse, Mux(w_mask[e], picked, 0), w_data[e]))
        m.d.comb += self.count_error.eq(self.o.valid & self.o.ready & o_err)
