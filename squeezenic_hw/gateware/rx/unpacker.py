"""The RX lane's bit unpacker: codes out of back-to-back wire-frame payloads, cut into host
frames and jobs.

The input is two streams: one descriptor per wire frame (``n`` codes of ``width`` bits, the
padding bits after them in the frame's last beat, a ``tag``), and the payload beats of the
frames, back to back (no headers, no ``tlast``): a frame of ``n`` codes of ``width`` bits is
exactly ``⌈n·width/512⌉`` beats, element ``i`` taking bits ``[i·width, (i+1)·width)`` of
the payload bit string (wire format section 3: LSB-first, byte 0 of a beat in bits 7:0).
The output is *jobs* of up to 16 codes: each wire frame is cut into host frames of at
most ``max_host_elements`` codes, and each host frame into jobs of 16 codes, its last job
holding the remainder.
"""

from functools import reduce
from operator import or_

from amaranth import Cat, Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, CODES_PER_JOB, narrow_span
from squeezenic_hw.gateware.common.lut_tree import kept
from squeezenic_hw.gateware.common.stream import SkidBuffer, Stager, load_or_clear, stage_enable

__all__ = [
    "MAX_HOST_ELEMENTS_LIMIT",
    "UNPACKER_BEAT_LAYOUT", "unpacker_frame_layout", "unpacker_output_layout", "WireUnpacker",
]

#: Largest ``max_host_elements``: a host frame of 64 + 4·2384 bytes fits 9600 bytes.
MAX_HOST_ELEMENTS_LIMIT = 2384

_BEAT_SHIFT = BEAT_BITS.bit_length() - 1
_SLOTS = 4                       # beat-sized slots of the ring
_FIRST_LO = 5                    # the first read stage aligns to 32 bits, the second to 1
_NEED_BITS = 10                  # a job's bits, its frame's padding included: < 1024
_FRAME_BITS = 21                 # n·width < 2**16 · 32


def unpacker_frame_layout(tag_shape=unsigned(1)):
    """One wire frame into the unpacker: ``n`` codes (≥ 1) of ``width`` bits, ``bits`` =
    ``n·width`` (the RX classifier has that product), and the ``tag`` its jobs carry."""
    return data.StructLayout({
        "n": unsigned(16),
        "width": unsigned(6),
        "bits": unsigned(_FRAME_BITS),
        "tag": tag_shape,
    })


#: One payload beat into the unpacker: ``data``, or 512 zero bits when ``zero`` is set (a
#: beat that stands in for a missing one; the ring's slot register clears, where a 512-bit
#: AND gate would stand in front of it).
UNPACKER_BEAT_LAYOUT = data.StructLayout({"data": unsigned(BEAT_BITS), "zero": unsigned(1)})


def unpacker_output_layout(tag_shape=unsigned(1)):
    """One job of up to 16 codes out of the unpacker.

    Code ``e`` is in the low ``width`` bits of ``codes[e]``, zero above; codes
    ``e ≥ count`` are zero. ``host_first``/``host_last`` mark the first/last
    job of a host frame, ``frame_last`` the last job of the wire frame.
    """
    return data.StructLayout({
        "codes": data.ArrayLayout(unsigned(32), CODES_PER_JOB),
        "count": unsigned(5),
        "host_first": unsigned(1),
        "host_last": unsigned(1),
        "frame_last": unsigned(1),
        "tag": tag_shape,
    })


_BLOCK = 4                       # widths per block of the "width ≥ w" flags (see below)


def _job_layout(tag_shape, n_widths):
    """A job between the job counter and the ring. The frame's width comes as flags over
    the built widths (sorted): ``onehot`` (it is width k), ``suffix`` (it is width k or
    a larger one of k's block of 4) and ``beyond`` (it is in a block after block b)."""
    return data.StructLayout({
        "need": unsigned(_NEED_BITS),   # bits it takes: count·width (+ pad on a frame's last)
        "count": unsigned(5),
        "onehot": unsigned(n_widths),
        "suffix": unsigned(n_widths),
        "beyond": unsigned(-(-n_widths // _BLOCK)),
        "host_first": unsigned(1),
        "host_last": unsigned(1),
        "frame_last": unsigned(1),
        "tag": tag_shape,
    })


def _check_params(widths, max_host_elements, tag_shape):
    """The sorted distinct widths; ValueError naming a bad parameter."""
    try:
        widths = sorted(set(widths))
    except TypeError:
        raise ValueError(f"widths must be an iterable of ints 1..32, got {widths!r}") \
            from None
    if not widths or not all(isinstance(w, int) and not isinstance(w, bool)
                             and 1 <= w <= 32 for w in widths):
        raise ValueError(f"widths must be a non-empty set of ints 1..32, got {widths!r}")
    if (not isinstance(max_host_elements, int) or isinstance(max_host_elements, bool)
            or not 1 <= max_host_elements <= MAX_HOST_ELEMENTS_LIMIT):
        raise ValueError(f"max_host_elements must be an int 1..{MAX_HOST_ELEMENTS_LIMIT}, "
                         f"got {max_host_elements!r}")
    try:
        Shape.cast(tag_shape)
    except TypeError as e:
        raise ValueError(f"tag_shape must be shape-castable, got {tag_shape!r}") from e
    return widths


class WireUnpacker(wiring.Component):
    """Unpack the codes of back-to-back wire-frame payloads and cut them into host frames.

    Parameters
    ----------
    widths : iterable of int
        Code widths (bits) to build logic for, each 1…32; frames of other
        widths must not arrive.
    max_host_elements : int
        ``M``, the most codes per host frame, 1…2384.
    tag_shape : shape-castable
        Shape of the ``tag`` passed from a frame's descriptor to its jobs.

    Attributes
    ----------
    desc : In(stream.Signature(unpacker_frame_layout(tag_shape)))
        One descriptor per wire frame, in the order of their payloads. ``n ≥ 1``,
        ``width`` one of ``widths`` and ``bits = n·width`` are required (the RX
        controller has checked the header); anything else is undefined.
    i : In(stream.Signature(UNPACKER_BEAT_LAYOUT))
        The frames' payload beats (``data``; zero bits with ``zero``),
        ``⌈n·width/512⌉`` per frame; the bits after a frame's codes in its last beat
        are dropped.
    o : Out(stream.Signature(unpacker_output_layout(tag_shape)))
        Jobs: for each wire frame, host frame ``j`` has ``m_j = min(M, n − jM)``
        codes in ``⌈m_j/16⌉`` jobs.
    frame_layout, output_layout : data.StructLayout
        The payload layouts of ``desc`` and ``o``.

    Notes
    -----
    Structure: a job counter, a 2048-bit ring of four beat-sized slots with a
    read pointer and a fill level, and three read stages.

    *Job counter*: a frame's descriptor loads the counter, which steps one job
    a cycle: codes and bits left in the host frame and after it (bits from the
    descriptor's ``n·width``, less ``M·width`` per host frame and
    ``16·width`` per job: no product on the way), and whether they are ≤ 16
    and 0 as flags. A register then takes the job's bits (plus the frame's
    padding, ``(−n·width) mod 512``, on its last job), and a skid buffer hands
    the jobs to the ring. Nothing on the way from a descriptor to a job
    depends on the ring in the same cycle.

    *Ring*: a beat goes straight into the free slot while at most 1536 bits are
    unread (``i.ready`` is a flip-flop that says so: it never depends on
    ``o.ready`` or the input in the same cycle; the fourth slot is the slack that lets the
    input run ahead while the first job is still on its way). A job *fires*
    when its bits are in the ring and the read stages can move; it advances
    the read pointer by ``need``: the frame's last job takes the frame's
    padding too, so every frame starts on a slot boundary.

    *Read stages*: the first registers the two slots the job can reach, rotated
    to the read pointer's 32-bit boundary (543 bits); the second the 512-bit
    window from the read pointer (rotated only in the bits the narrow widths reach:
    a width of 32 never has the pointer off a 32-bit boundary); the third wires
    code ``e`` to window bits ``[e·width, (e+1)·width)`` for every built width:
    an AND-OR whose selects
    (the width is one that puts the bit there, and ``count > e``) are
    registered in the first two stages. The width travels with each job as
    flags (one-hot, and "this width or a larger one" in blocks of four), so
    no select is more than an OR of a few flags. The rotations are 4:1 selects, one
    LUT level per two pointer bits.

    Latency: 4 cycles from an accepted beat to its job when the job waits for
    it (the write into the ring, three read stages); 6 cycles from a frame's
    descriptor to its first job (counter, job register, skid buffer, three
    read stages). ``LATENCY`` = 6: a frame's descriptor and first beat offered
    in the same cycle, to its first job.

    Throughput: one job per cycle whenever the frame's bits are in. While beats
    are offered the ring takes one a cycle until three slots are unread, so a
    job waits for bits only when the input is the bottleneck (one beat per
    cycle at most; a frame has at least as many jobs as beats). Width 32 with
    ``M`` a multiple of 16: one beat in and one job out per cycle; width 16:
    one beat every second cycle, one job every cycle. Short jobs (``M`` not a
    multiple of 16, e.g. 363), jobs starting mid-beat and frame boundaries
    cost no cycles, provided the next frame's descriptor is waiting when the
    counter reaches a frame's last job.

    Backpressure: ``o`` holds its job while ``~o.ready``: the read stages move exactly
    when ``o.ready`` is high (the decoders' enable, with no logic of their own behind
    it); while they hold, the ring fills and ``i.ready`` drops; the jobs wait in the
    skid buffer, ``desc.ready`` drops. Nothing is dropped or reordered.
    ``i.ready`` is a flip-flop; ``desc.ready`` depends on the job counter's
    registers and the skid buffer's registered ready only.
    Only valid bits, pointers, the fill level and the counter's ``busy`` flag
    are reset.
    """

    LATENCY = 6

    def __init__(self, widths, *, max_host_elements=363, tag_shape=unsigned(1)):
        widths = _check_params(widths, max_host_elements, tag_shape)
        self.widths = tuple(widths)
        self.max_host_elements = max_host_elements
        self.tag_shape = tag_shape
        self.frame_layout = unpacker_frame_layout(tag_shape)
        self.output_layout = unpacker_output_layout(tag_shape)
        super().__init__({
            "desc": In(stream.Signature(self.frame_layout)),
            "i": In(stream.Signature(UNPACKER_BEAT_LAYOUT)),
            "o": Out(stream.Signature(self.output_layout)),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.jobs = jobs = SkidBuffer(_job_layout(self.tag_shape, len(self.widths)))
        self._job_counter(m, jobs.i)
        self._ring(m, jobs.o)
        return m

    # --- job counter --------------------------------------------------------------------
    def _job_counter(self, m, out):
        """Descriptors in, jobs (``_job_layout``) out on stream ``out``."""
        M = self.max_host_elements
        J = CODES_PER_JOB
        d = self.desc.payload
        job_valid = Signal()             # the job register
        job = Signal.like(out.payload, reset_less=True)
        enable = stage_enable()          # ~job_valid | out.ready (the skid buffer's register)
        m.d.comb += enable.eq(~job_valid | out.ready)

        # Counter state: the job about to be registered. Codes and bits are counted side
        # by side, so a job's bits are a register (no count·width product on the way).
        busy = Signal()                          # a frame is loaded
        hrem = Signal(range(M + 1), reset_less=True)   # codes left in the host frame
        after = Signal(16, reset_less=True)      # codes of the wire frame after it
        hbits = Signal(range(M * 32 + 1), reset_less=True)   # hrem·width
        abits = Signal(_FRAME_BITS, reset_less=True)         # after·width
        hrem_small = Signal(reset_less=True)     # hrem ≤ 16: the host frame's last job
        after_zero = Signal(reset_less=True)     # after = 0: the wire frame's last host frame
        hfirst = Signal(reset_less=True)
        count = Signal(5, reset_less=True)       # min(hrem, 16)
        width = Signal(6, reset_less=True)
        onehot = Signal(len(self.widths), reset_less=True)   # width = widths[k]
        in_block = Signal(-(-len(self.widths) // _BLOCK), reset_less=True)  # in block b
        pad = Signal(_BEAT_SHIFT, reset_less=True)   # (−n·width) mod 512
        host_bits = Signal.like(hbits)           # M·width, the bits of a full host frame
        tag = Signal.like(d.tag, reset_less=True)
        job_bits = Cat(Const(0, 4), width)       # 16·width, a full job

        flast = hrem_small & after_zero
        # kept, so the state registers' next values read them as they are
        load = stage_enable("load", keep=True)   # the counter's state takes a new frame's
        step = stage_enable("step", keep=True)   # ... or the next job's
        # idle or at the frame's last job: one LUT of state registers
        ready_for_frame = kept(m, ~busy | flast, "ready_for_frame")
        m.d.comb += [
            step.eq(enable & busy),
            load.eq(enable & self.desc.valid & ready_for_frame),
            self.desc.ready.eq(enable & ready_for_frame),
        ]

        def host_frame(codes, bits, full_bits):
            """The state (``state`` below) at the first job of a host frame starting with
            ``codes`` (``bits``) to go: compares and subtracts of registers side by side."""
            big = codes > M
            first = min(M, J)          # the most codes the host frame's first job can have
            return [Mux(big, M, codes), Mux(big, codes - M, 0),
                    Mux(big, full_bits, bits), Mux(big, bits - full_bits, 0),
                    (codes <= J) | Const(M <= J), ~big,
                    Mux(codes <= first, codes[:5], first), Const(1)]

        new_host_bits = Signal.like(host_bits)
        with m.Switch(d.width):
            for w in self.widths:
                with m.Case(w):
                    m.d.comb += new_host_bits.eq(M * w)
        loaded = host_frame(d.n, d.bits, new_host_bits)
        next_host = host_frame(after, abits, host_bits)
        # 16 < hrem ≤ 32: the next job is the host frame's last, hrem − 16 = hrem[:5] ^ 16
        stepped = [hrem - J, after, hbits - job_bits, abits, hrem <= 2 * J, after_zero,
                   Mux(hrem <= 2 * J, hrem[:5] ^ J, J), Const(0)]
        state = [hrem, after, hbits, abits, hrem_small, after_zero, count, hfirst]
        # Every state register takes one of three candidates (no hold). After a frame's
        # last job the state is don't care until the next load, so a register may take the
        # new frame's candidate whenever one could load (``ready_for_frame``, from state
        # registers alone): the choice then never waits for ``enable`` or ``desc.valid``,
        # which reach only the registers' enable.
        with m.If(load | step):
            for reg, a, b, c in zip(state, loaded, next_host, stepped, strict=True):
                m.d.sync += reg.eq(Mux(ready_for_frame, a, Mux(hrem_small, b, c)))
        with m.If(load):
            m.d.sync += [busy.eq(1), width.eq(d.width), pad.eq(-d.bits),
                         onehot.eq(Cat(*(d.width == w for w in self.widths))),
                         in_block.eq(Cat(*(
                             Cat(*(d.width == w for w in self.widths[lo:lo + _BLOCK])).any()
                             for lo in range(0, len(self.widths), _BLOCK)))),
                         host_bits.eq(new_host_bits), tag.eq(d.tag)]
        with m.Elif(step & flast):
            m.d.sync += busy.eq(0)

        # The job register.
        with m.If(enable):
            m.d.sync += [
                job_valid.eq(busy),
                job.need.eq(Mux(hrem_small, hbits, job_bits) + Mux(flast, pad, 0)),
                job.count.eq(count),
                job.onehot.eq(onehot),
                *self._width_flags(job, onehot, in_block),
                job.host_first.eq(hfirst),
                job.host_last.eq(hrem_small),
                job.frame_last.eq(flast),
                job.tag.eq(tag),
            ]
        m.d.comb += [out.valid.eq(job_valid), out.payload.eq(job)]

    def _fine_rotate(self, m, coarse, fine):
        """The 512-bit window: ``coarse`` shifted down by ``fine`` (the pointer mod 32),
        rotated only where a code can read it.

        A frame of a width that is a multiple of 32 starts on a slot boundary and takes
        whole words, so its jobs have ``fine = 0``; the other widths' codes read at most the
        low :func:`narrow_span` bits of the window. So above ``span`` the window is
        ``coarse`` itself, and only the low bits need the rotation (256 of 512 with widths
        ≤ 16)."""
        span = narrow_span(self.widths)
        if span >= BEAT_BITS:
            return rotate(m, coarse, fine, 0, _FIRST_LO, "read_fine_by")[:BEAT_BITS]
        low = rotate(m, coarse[:span + 31], fine, 0, _FIRST_LO, "read_fine_by", length=span)
        return Cat(low[:span], coarse[span:BEAT_BITS])

    @staticmethod
    def _width_flags(job, onehot, in_block):
        """The job register's ``suffix`` and ``beyond`` flags, from the one-hot width and
        its block: ORs of at most 4 flags, so no "width ≥ w" can become a long LUT chain."""
        stmts = []
        for k in range(len(onehot)):
            end = min(k - k % _BLOCK + _BLOCK, len(onehot))
            stmts.append(job.suffix[k].eq(onehot[k:end].any()))
        for b in range(len(in_block)):
            stmts.append(job.beyond[b].eq(in_block[b + 1:].any() if b + 1 < len(in_block)
                                          else 0))
        return stmts

    # --- ring and read stages -------------------------------------------------------------
    def _ring(self, m, jobs):
        """Beats in on ``i``, jobs from stream ``jobs``, codes out on ``o``."""
        J = CODES_PER_JOB
        op = self.o.payload
        head = jobs.payload

        slots = [Signal(BEAT_BITS, name=f"slot{k}", reset_less=True) for k in range(_SLOTS)]
        wslot = Signal(range(_SLOTS))            # slot the next beat goes to
        rslot = Signal(range(_SLOTS))            # slot of the first unread bit
        roff = Signal(_BEAT_SHIFT)               # its offset in the slot
        lvl = Signal(range(_SLOTS * BEAT_BITS + 1))   # unread bits

        # A beat fits when at most three slots' worth of bits are unread: the unread bits
        # end at the write slot's start, so they all lie in the slots before it. `room`
        # says so, a flip-flop loaded with the next fill level's compare.
        room = Signal(init=1)
        take = Signal()
        m.d.comb += [
            self.i.ready.eq(room),
            take.eq(self.i.valid & room),
        ]
        with m.If(take):
            m.d.sync += wslot.eq(wslot + 1)
        for k, slot in enumerate(slots):
            # a stand-in beat clears its slot: the flip-flops' synchronous reset
            load_or_clear(m, slot, self.i.payload.data, load=take & (wslot == k),
                          clear=self.i.payload.zero)

        # The read stages: one enable, like a pipeline; a job fires into the first. They
        # move when ``o.ready`` is high (the decoders, which move while their own output
        # is free): no logic of their own between the decoders' enable and theirs.
        enable = stage_enable()
        fire = stage_enable("fire", keep=True)   # the level and pointers read it as it is
        can_fire = Signal()
        m.d.comb += [
            enable.eq(self.o.ready),
            can_fire.eq(jobs.valid & (lvl >= head.need)),
            fire.eq(can_fire & enable),
            jobs.ready.eq(fire),
        ]
        # Pointer and fill level: both candidates come from registers, fire picks one.
        moved = Signal(_BEAT_SHIFT + 2)
        m.d.comb += moved.eq(roff + head.need)
        with m.If(fire):
            m.d.sync += roff.eq(moved[:_BEAT_SHIFT])
            with m.Switch(Cat(moved[_BEAT_SHIFT:], rslot)):
                for s in range(_SLOTS):
                    for carry in range(_SLOTS):
                        with m.Case(carry | (s << 2)):
                            m.d.sync += rslot.eq((s + carry) % _SLOTS)
        consumed = Mux(fire, lvl - head.need, lvl)
        m.d.sync += lvl.eq(consumed + Mux(take, BEAT_BITS, 0))
        # The next level ≤ 1536 in the four cases of fire and take, compared from registers.
        limit = (_SLOTS - 1) * BEAT_BITS
        left_after = lvl - head.need
        m.d.sync += room.eq(Mux(fire, Mux(take, left_after <= limit - BEAT_BITS,
                                          left_after <= limit),
                                Mux(take, lvl <= limit - BEAT_BITS, lvl <= limit)))

        # Stage 1 (at fire): the two slots the job can reach, rotated to the read
        # pointer's 32-bit boundary: 512 + 31 bits. Stage 2: the rest of the rotation, a
        # 512-bit window from the read pointer. Stage 3: the codes.
        st = Stager(m, enable, reset_less=True)
        ring = Cat(*slots, *slots)
        pair = Cat(select(m, ring, rslot, BEAT_BITS, BEAT_BITS, "read_slot"),
                   select(m, ring[BEAT_BITS:], rslot, BEAT_BITS, BEAT_BITS, "read_next_slot"))
        coarse = rotate(m, pair, roff, _FIRST_LO, _BEAT_SHIFT, "read_by")
        valid1 = st.reg(fire, name="read_valid1", reset_less=False)
        coarse1 = st.reg(coarse, name="read_coarse")
        fine1 = st.reg(roff[:_FIRST_LO], name="read_fine")
        mask1 = st.reg(Cat(*(head.count > e for e in range(J))), name="read_mask")
        fields1 = st.reg(Cat(head.count, head.host_first, head.host_last, head.frame_last,
                             head.tag), name="read_fields")

        valid2 = st.reg(valid1, name="read_valid2", reset_less=False)
        window2 = st.reg(self._fine_rotate(m, coarse1, fine1), name="read_window")
        fields2 = st.reg(fields1, name="read_fields2")

        # Stage 3: code e, bit j is window bit e·w + j for the frame's width w, zero past
        # count: an AND-OR over the window bits it can be, each with a select registered
        # in stage 2 (count > e, and the width is one of the widths that put the bit
        # there: registered in stage 1, one flag per such set of widths).
        layout = []                              # (e, [(window bit, set of widths)] per j)
        for e in range(J):
            for j in range(max(self.widths)):
                sources = {}
                for w in self.widths:
                    if j < w:
                        sources.setdefault(e * w + j, []).append(w)
                layout.append((e, [(src, tuple(ws)) for src, ws in sources.items()]))
        groups = sorted({ws for _, bits in layout for _, ws in bits})

        def in_group(ws):
            ks = [self.widths.index(w) for w in ws]
            if len(ks) == 1:
                return head.onehot[ks[0]]
            # all built widths from widths[k] up (code 0's bits): k's block, or a later one
            assert ks == list(range(ks[0], len(self.widths)))
            return head.suffix[ks[0]] | head.beyond[ks[0] // _BLOCK]

        in_group1 = {ws: st.reg(in_group(ws), name=f"read_widths{k}")
                     for k, ws in enumerate(groups)}
        selects = {}

        def select_of(e, ws):
            if (e, ws) not in selects:
                selects[e, ws] = st.reg(in_group1[ws] & mask1[e],
                                        name=f"read_sel{len(selects)}")
            return selects[e, ws]

        valid3 = st.reg(valid2, name="read_valid3", reset_less=False)
        codes = [[] for _ in range(J)]
        for e, bits in layout:
            codes[e].append(Cat(*(window2[src] & select_of(e, ws) for src, ws in bits)).any())
        for e in range(J):
            m.d.comb += op.codes[e].eq(st.reg(Cat(*codes[e]), name=f"code{e}"))
        m.d.comb += [
            Cat(op.count, op.host_first, op.host_last, op.frame_last, op.tag).eq(
                st.reg(fields2, name="out_fields")),
            self.o.valid.eq(valid3),
        ]


def select(m, vec, sel, step, length, name):
    """``vec[sel·step:][:length]``: a one-hot AND-OR of the ``2**len(sel)`` choices, which maps
    to one LUT6 per bit for a 2-bit ``sel`` (a mux or shift operator maps to two levels)."""
    out = Signal(length, name=name)
    m.d.comb += out.eq(reduce(or_, (Mux(sel == q, vec[q * step:q * step + length], 0)
                                    for q in range(2 ** len(sel)))))
    return out


def rotate(m, vec, pointer, lo, hi, name, length=BEAT_BITS):
    """``vec`` shifted down by bits ``[lo, hi)`` of ``pointer``, two bits a LUT level, keeping
    the bits a job can still reach: ``length`` (512) from the pointer, whose bits below
    ``lo`` are left for later."""
    bit = hi
    while bit > lo:
        low = max(bit - 2, lo)
        vec = select(m, vec, pointer[low:bit], 1 << low, length + (1 << low) - 1,
                     f"{name}_{1 << low}")
        bit = low
    return vec

