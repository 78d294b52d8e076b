"""The RX lane's threshold expander: kept values into the keep bits of a bitmap.

Codec 7 (``threshold``) sends, per wire frame, a bitmap of keep bits and then
the ``k`` kept fp32 values. The lane's :class:`~.wire_unpacker.WireUnpacker`
turns the bitmap into jobs of up to 16 one-bit codes (width 1); this block
swaps each keep bit for its value by the RX decode rule of
:mod:`squeezenic_hw.reference.threshold` (``decode_payload``): the element with the
``r``-th set bit of the wire frame (rank over the whole frame, counted in job
order) takes value ``r`` when ``r < k``, else +0.0; clear bits give +0.0;
values past the set bits are dropped. Jobs of other codecs pass unchanged.
"""

from amaranth import Array, Cat, Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, CODES_PER_JOB

__all__ = [
    "VALUE_DESC_LAYOUT", "sparse_expander_job_layout", "SparseExpander",
]

#: One per sparse wire frame: ``k`` values, the first at byte ``start`` of the first beat.
VALUE_DESC_LAYOUT = data.StructLayout({"k": unsigned(16), "start": unsigned(6)})

_BEAT_BYTES = BEAT_BITS // 8
# Four beats: at a frame boundary R can jump up to 64 + 63 + 63 bytes (the last job's
# values, the frame's last beat, the next frame's start) and the next job then reads 64
# bytes, so three beats must be held ahead for one job per cycle, and four is a power of 2.
_RING_BEATS = 4
_RING_BYTES = _RING_BEATS * _BEAT_BYTES
_RANK_BITS = (CODES_PER_JOB - 1).bit_length()       # rank of a keep bit inside a job
# Bytes of a frame's value beats after `start`: ≤ 64·⌈(63 + 4·65535)/64⌉ < 2**19.
_FREM_BITS = 19
# Unread bytes in the ring (W − R): ≤ 256, or negative when bytes of frames already
# finished are still to come and will be dropped. A frame's last job only leaves while
# D ≥ −2**19 and takes < 2**19 bytes, so D > −2**20: 21 signed bits never wrap.
_D_BITS = 21
_D_FLOOR = -(1 << 19)
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
    Structure: an input register (a job with its keep bits, their ranks inside
    the job and their number, ranks from a 4-level prefix sum); a 256-byte ring
    of four beat slots holding the value stream, read as the two slots holding
    the read position rotated by its byte offset (0…63); a window register
    (the next 64 value bytes, or the codes of a non-sparse job); the output
    register (per element a word mux, ``e + 1`` inputs for element ``e``). A
    4-entry queue holds the frame descriptors, each with its skip (``start``,
    or 0 when ``k = 0``) and the bytes of its beats after the skip, computed
    on the way in.

    The value stream is followed as a byte stream with a read position ``R``
    and a written position ``W`` (whole beats). A frame's descriptor is loaded
    as soon as the previous frame's last job leaves (or when there is none),
    moving ``R`` past ``start``; a job with ``p`` set bits takes
    ``u = min(p, k_left)`` values (``4u`` bytes); a frame's last job moves
    ``R`` to the end of the frame's beats. ``D = W − R`` goes negative when a
    frame ends before its beats are in: those beats are then taken and dropped
    as they come, while the jobs that need no values (the rest of a
    ``k = 0`` frame, non-sparse jobs) go on. A beat is taken whenever at most
    192 bytes are unread after this cycle's job.

    Latency: 3 cycles from an accepted job to its job on ``o`` when its values
    and its frame's descriptor are in (input register; window register;
    output register). A taken beat or descriptor is usable the next cycle
    (a descriptor: once the frame before has left).

    Throughput: one job per cycle whenever the values it needs are in. A job
    reads up to 64 value bytes (two beats), and at a frame boundary the read
    position also skips the rest of the frame's last beat and the next frame's
    ``start`` (up to 190 bytes in all); the ring keeps up to three beats ahead
    and takes one per cycle, so with value beats offered every cycle a job
    waits only for beats that one beat per cycle could not have brought
    earlier (the tests check this cycle for cycle). At full density that is
    one job per cycle while a stretch of frames has no more value beats than
    jobs, across frame boundaries, ``start`` offsets and short jobs. Jobs that
    need no values (non-sparse, no set bits, values used up, ``k = 0``) never
    wait for beats. Exceptions: the unused beats of a frame (``k`` above its
    set bits) are known only at its last job and are then dropped at one per
    cycle before the next frame's values; and a frame's last job waits while
    more than 2**19 bytes of finished frames are still owed (so ``D`` cannot
    wrap).

    Backpressure: ``o`` holds its job while ``o.valid & ~o.ready``; the
    window and input registers then fill, ``i.ready`` drops, the ring stops
    taking beats once full and the descriptor queue once 4 are waiting.
    Nothing is dropped or reordered. ``i.ready`` and ``values.ready`` depend
    combinationally on ``o.ready``; ``vdesc.ready`` does not.
    """

    LATENCY = 3

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
        ip, op = self.i.payload, self.o.payload
        words = data.ArrayLayout(unsigned(32), N)

        # --- frame descriptors ------------------------------------------------------------
        # Skip and beat bytes are computed on the way in, so loading a frame is a plain move.
        desc_layout = data.StructLayout({
            "k": unsigned(16), "skip": unsigned(6), "frem": unsigned(_FREM_BITS)})
        m.submodules.desc = desc_q = fifo.SyncFIFO(width=desc_layout.size, depth=_DESC_DEPTH)
        desc_in = data.View(desc_layout, desc_q.w_data)
        desc_out = data.View(desc_layout, desc_q.r_data)
        vk, vstart = self.vdesc.payload.k, self.vdesc.payload.start
        vend = Signal(_FREM_BITS + 1)           # start + 4k + 63
        has_values = Signal()
        m.d.comb += [
            vend.eq(vstart + (vk << 2) + (_BEAT_BYTES - 1)),
            has_values.eq(vk != 0),
            desc_in.k.eq(vk),
            # k = 0: no beats at all, so nothing to skip either.
            desc_in.skip.eq(Mux(has_values, vstart, 0)),
            desc_in.frem.eq(Mux(has_values, Cat(Const(0, 6), vend[6:]) - vstart, 0)),
            desc_q.w_en.eq(self.vdesc.valid),
            self.vdesc.ready.eq(desc_q.w_rdy),
        ]

        # --- input register: keep bits, their ranks in the job, their number -------------
        a_valid = Signal()
        a_job = Signal(self.job_layout)
        a_keep = Signal(N)
        a_rank = Signal(data.ArrayLayout(unsigned(_RANK_BITS), N))
        a_pop = Signal(range(N + 1))
        keep = Signal(N)
        m.d.comb += keep.eq(Cat(ip.sparse & (ip.count > e) & ip.codes[e][0] for e in range(N)))
        # Inclusive prefix sums in log2(16) levels instead of a 16-long chain.
        incl = [keep[e] for e in range(N)]
        step = 1
        while step < N:
            incl = [incl[e] + incl[e - step] if e >= step else incl[e] for e in range(N)]
            step *= 2

        # --- state of the value stream and of the current sparse frame --------------------
        ring = Array(Signal(BEAT_BITS, name=f"ring{j}") for j in range(_RING_BEATS))
        wslot = Signal(range(_RING_BEATS))      # slot of the next beat: beat j in slot j mod 4
        rptr = Signal(range(_RING_BYTES))       # R mod 256
        dlvl = Signal(signed(_D_BITS))          # W − R
        cur_valid = Signal()                    # a sparse frame's descriptor is loaded
        krem = Signal(16)                       # values not yet given to set bits
        krem_job = Signal(range(CODES_PER_JOB + 1))   # min(krem, 16), kept beside krem
        frem = Signal(_FREM_BITS)               # bytes from R to the end of the frame's beats
        over = Signal()                         # a job of the frame had more set bits than krem

        # --- window register and output register -------------------------------------------
        b_valid = Signal()
        b_data = Signal(words)                  # value window, or a non-sparse job's codes
        b_sel = Signal(data.ArrayLayout(unsigned(_RANK_BITS), N))
        b_mask = Signal(N)
        b_job = Signal(self.job_layout)
        b_err = Signal()
        o_err = Signal()

        c_free = Signal()
        b_free = Signal()
        m.d.comb += [
            c_free.eq(~self.o.valid | self.o.ready),
            b_free.eq(~b_valid | c_free),
        ]

        # --- the job in the input register: values it takes, may it go -------------------
        a_sparse, a_last = a_job.sparse, a_job.frame_last
        use = Signal(range(N + 1))              # values this job takes
        use_bytes = Signal(range(4 * N + 1))
        m.d.comb += [
            use.eq(Mux(a_pop < krem_job, a_pop, krem_job)),
            use_bytes.eq(use << 2),
        ]
        # D ≥ 4u without a 21-bit compare: D ≥ 128, or D ≥ 0 and its low 7 bits ≥ 4u.
        vals_in = Signal()
        m.d.comb += vals_in.eq((use == 0) | ~dlvl[-1] & ((dlvl[7:-1] != 0)
                                                           | (dlvl[:7] >= use_bytes)))
        a_ok = Signal()
        fire = Signal()
        m.d.comb += [
            # A frame's last job keeps D from wrapping (it only waits if a frame's worth
            # of value bytes is already owed).
            a_ok.eq(~a_sparse | (cur_valid & vals_in & (~a_last | (dlvl >= _D_FLOOR)))),
            fire.eq(a_valid & a_ok & b_free),
            self.i.ready.eq(~a_valid | fire),
        ]
        sfire = Signal()
        lfire = Signal()
        load = Signal()
        m.d.comb += [
            sfire.eq(fire & a_sparse),
            lfire.eq(sfire & a_last),
            # The next frame is loaded as this one's last job leaves: no bubble between frames.
            load.eq(desc_q.r_rdy & (~cur_valid | lfire)),
            desc_q.r_en.eq(load),
        ]

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                a_valid.eq(1),
                a_job.eq(ip),
                a_keep.eq(keep),
                a_pop.eq(incl[N - 1]),
            ]
            for e in range(N):
                m.d.sync += a_rank[e].eq(incl[e] - keep[e])
        with m.Elif(fire):
            m.d.sync += a_valid.eq(0)

        # --- value stream bookkeeping -------------------------------------------------------
        # Bytes R moves on by this cycle: the job's values (or, on a frame's last job,
        # the rest of the frame's beats), then the next frame's skip if it is loaded.
        # Every candidate next D is computed from registers in parallel (a sparse job
        # leaves or not, a beat comes or not); fire and the beat only pick one.
        last_bytes = Signal(_FREM_BITS + 1)     # last job: rest of the frame + next skip
        fire_bytes = Signal(_FREM_BITS + 1)
        skip_idle = Signal(6)                   # no sparse job leaves: load iff none loaded
        m.d.comb += [
            last_bytes.eq(frem + Mux(desc_q.r_rdy, desc_out.skip, 0)),
            fire_bytes.eq(Mux(a_last, last_bytes, use_bytes)),
            skip_idle.eq(Mux(desc_q.r_rdy & ~cur_valid, desc_out.skip, 0)),
        ]
        dlvl_beat = Signal.like(dlvl)
        d_fire, d_fire_beat, d_idle, d_idle_beat = (
            Signal(signed(_D_BITS + 1), name=n)
            for n in ("d_fire", "d_fire_beat", "d_idle", "d_idle_beat"))
        m.d.comb += [
            dlvl_beat.eq(dlvl + _BEAT_BYTES),
            d_fire.eq(dlvl - fire_bytes),
            d_fire_beat.eq(dlvl_beat - fire_bytes),
            d_idle.eq(dlvl - skip_idle),
            d_idle_beat.eq(dlvl_beat - skip_idle),
        ]
        # A beat goes into the free slot once at most 192 bytes are unread after this
        # cycle; o.ready only drives the last mux.
        room = _RING_BYTES - _BEAT_BYTES
        m.d.comb += self.values.ready.eq(Mux(sfire, d_fire <= room, d_idle <= room))
        beat = Signal()
        m.d.comb += beat.eq(self.values.valid & self.values.ready)
        with m.If(beat):
            # A beat taken while D ≤ −64 lies wholly before R: written, never read.
            m.d.sync += [
                ring[wslot].eq(self.values.payload),
                wslot.eq(wslot + 1),
            ]
        m.d.sync += [
            # R mod 256 wraps around the ring.
            rptr.eq(Mux(sfire, rptr + fire_bytes, rptr + skip_idle)),
            dlvl.eq(Mux(sfire, Mux(beat, d_fire_beat, d_fire), Mux(beat, d_idle_beat, d_idle))),
        ]

        krem_next = Signal.like(krem)
        m.d.comb += krem_next.eq(krem - use)
        with m.If(load):
            m.d.sync += [
                cur_valid.eq(1),
                krem.eq(desc_out.k),
                krem_job.eq(Mux(desc_out.k >= N, N, desc_out.k)),
                frem.eq(desc_out.frem),
                over.eq(0),
            ]
        with m.Elif(lfire):
            m.d.sync += cur_valid.eq(0)
        with m.Elif(sfire):
            m.d.sync += [
                krem.eq(krem_next),
                krem_job.eq(Mux(krem_next >= N, N, krem_next)),
                frem.eq(frem - use_bytes),
                over.eq(over | (a_pop > krem)),
            ]

        # --- window register ----------------------------------------------------------------
        # The next 64 value bytes from R: the two slots holding them, rotated by R mod 64.
        # Registered: their slots may take new beats in this very cycle.
        rslot = rptr[6:]
        pair = Signal(2 * BEAT_BITS)
        window = Signal(BEAT_BITS)
        m.d.comb += [
            pair.eq(Cat(ring[rslot], ring[(rslot + 1)[:2]])),
            window.eq(pair >> Cat(Const(0, 3), rptr[:6])),
        ]
        with m.If(fire):
            m.d.sync += [
                b_valid.eq(1),
                b_job.eq(a_job),
                b_data.eq(Mux(a_sparse, window, a_job.codes)),
                b_sel.eq(a_rank),
                # Kept and within k: rank in the job < values left (rank < 16).
                b_mask.eq(Cat(a_keep[e] & (a_rank[e] < krem_job) for e in range(N))),
                b_err.eq(a_sparse & a_last & (over | (a_pop != krem))),
            ]
        with m.Elif(c_free):
            m.d.sync += b_valid.eq(0)

        # --- output register ----------------------------------------------------------------
        with m.If(c_free):
            m.d.sync += [
                self.o.valid.eq(b_valid),
                op.count.eq(b_job.count),
                op.frame_last.eq(b_job.frame_last),
                op.sparse.eq(b_job.sparse),
                op.tag.eq(b_job.tag),
                o_err.eq(b_valid & b_err),
            ]
            for e in range(N):
                # Element e's rank in its job is at most e: an (e + 1)-input mux.
                picked = Array(b_data[w] for w in range(e + 1))[b_sel[e]]
                m.d.sync += op.codes[e].eq(
                    Mux(b_job.sparse, Mux(b_mask[e], picked, 0), b_data[e]))
        m.d.comb += self.count_error.eq(self.o.valid & self.o.ready & o_err)
        return m
