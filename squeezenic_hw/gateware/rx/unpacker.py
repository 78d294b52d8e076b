"""The RX lane's bit unpacker and host-frame splitter.

The input is the payload beats of consecutive wire frames, back to back (no
headers, no ``tlast``): a frame of ``n`` codes of ``width`` bits is exactly
``⌈n·width/512⌉`` beats, element ``i`` taking bits ``[i·width, (i+1)·width)``
of the payload bit string (wire format section 3: LSB-first, byte 0 of a beat
in bits 7:0). The output is *jobs* of up to 16 codes: each wire frame is cut
into host frames of at most ``max_host_elements`` codes, and each host frame
into jobs of 16 codes, its last job holding the remainder.
"""

from amaranth import Array, Cat, Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import BEAT_BITS, CODES_PER_JOB

__all__ = [
    "MAX_HOST_ELEMENTS_LIMIT",
    "unpacker_input_layout", "unpacker_output_layout", "WireUnpacker",
]

#: Largest ``max_host_elements``: a host frame of 64 + 4·2384 bytes fits 9600 bytes.
MAX_HOST_ELEMENTS_LIMIT = 2384

_BEAT_SHIFT = BEAT_BITS.bit_length() - 1
_BUFFER_BITS = 2 * BEAT_BITS
_DESC_DEPTH = 4


def unpacker_input_layout(tag_shape=unsigned(1)):
    """One payload beat of a wire frame into the unpacker.

    ``n`` (codes in the wire frame, ≥ 1), ``width`` (bits per code) and ``tag``
    are the same on every beat of a frame.
    """
    return data.StructLayout({
        "data": unsigned(BEAT_BITS),
        "n": unsigned(16),
        "width": unsigned(6),
        "tag": tag_shape,
    })


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
        Shape of the ``tag`` passed from a frame's beats to its jobs.

    Attributes
    ----------
    i : In(stream.Signature(unpacker_input_layout(tag_shape)))
        Payload beats; the unpacker counts ``⌈n·width/512⌉`` beats per frame
        and drops the padding bits after the ``n`` codes. ``n ≥ 1`` and
        ``width`` one of ``widths`` are required (the RX controller has checked
        the header); anything else is undefined.
    o : Out(stream.Signature(unpacker_output_layout(tag_shape)))
        Jobs: for each wire frame, host frame ``j`` has ``m_j = min(M, n − jM)``
        codes in ``⌈m_j/16⌉`` jobs.
    input_layout, output_layout : data.StructLayout
        The payload layouts of ``i`` and ``o``.

    Notes
    -----
    Structure: an input register (counting each frame's beats), a 1024-bit
    ring of two beat-sized halves with a read pointer and a fill level, and an
    output register. Whole beats go into the free half when at most 512 bits
    are left unread after this cycle's job, so the way in has no shifter and
    does not depend on ``n·width``. A job of ``count`` codes reads the next
    ``count·width`` bits (a rotation of the ring by the read pointer, then
    fixed wiring per built width, muxed by width) and advances the pointer by
    that many bits, plus, on a frame's last job, the frame's padding
    ``(−n·width) mod 512``. A 4-entry queue carries each frame's
    ``n``/``width``/padding/``tag`` from the input register to the job
    counter; the counter's next job (count, bits to take, flags) is computed
    ahead from registers, and products ``count·width`` come from small
    tables, one per built width.

    Latency: 3 cycles from an accepted first input beat to its job on ``o``
    (input register; ring and job counter; output register).

    Throughput: one job per cycle whenever the frame's bits are in. While
    beats are offered the ring keeps ≥ 512 unread bits, so a job waits for
    bits only when the input is the bottleneck (one beat per cycle at most; a
    frame has at least as many jobs as beats), and the input register puts a
    frame's descriptor in the queue a cycle before its bits reach the ring.
    Width 32 with ``M`` a multiple of 16: one beat in and one job out per
    cycle; width 16: one beat every second cycle, one job every cycle.
    Short jobs (``M`` not a multiple of 16, e.g. 363), jobs starting
    mid-beat and frame boundaries cost no cycles.

    Backpressure: ``o`` holds its job while ``o.valid & ~o.ready``; the ring
    then fills, and ``i.ready`` drops once the input register cannot move on
    (the queue never blocks: at most 3 descriptors wait in it). Nothing is
    dropped or reordered. ``i.ready`` depends combinationally on ``o.ready``
    (one mux between them).
    """

    LATENCY = 3

    def __init__(self, widths, *, max_host_elements=363, tag_shape=unsigned(1)):
        widths = _check_params(widths, max_host_elements, tag_shape)
        self.widths = tuple(widths)
        self.max_host_elements = max_host_elements
        self.tag_shape = tag_shape
        self.input_layout = unpacker_input_layout(tag_shape)
        self.output_layout = unpacker_output_layout(tag_shape)
        super().__init__({
            "i": In(stream.Signature(self.input_layout)),
            "o": Out(stream.Signature(self.output_layout)),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        M = self.max_host_elements
        ip, op = self.i.payload, self.o.payload

        # Frame descriptors, from the input register to the job counter. `pad`: bits
        # after the frame's codes in its last beat, dropped with its last job.
        desc_layout = data.StructLayout({
            "n": unsigned(16), "width": unsigned(6), "pad": unsigned(_BEAT_SHIFT),
            "tag": self.tag_shape})
        m.submodules.desc = desc_q = fifo.SyncFIFO(width=desc_layout.size, depth=_DESC_DEPTH)
        desc_in = data.View(desc_layout, desc_q.w_data)
        desc_out = data.View(desc_layout, desc_q.r_data)

        # --- input side: beat counting --------------------------------------------------
        in_beats = Signal(13)           # beats still to come in the current frame; 0: new frame
        r_valid = Signal()              # input register
        r_data = Signal(BEAT_BITS)
        first = Signal()
        total = Signal(22)              # n·width of a frame starting on this beat
        m.d.comb += [
            first.eq(in_beats == 0),
            total.eq(ip.n * ip.width),
            desc_in.n.eq(ip.n),
            desc_in.width.eq(ip.width),
            desc_in.pad.eq(-total),     # (−n·width) mod 512
            desc_in.tag.eq(ip.tag),
        ]

        # --- ring and job counter state -------------------------------------------------
        # A ring of two beat-sized halves. Whole beats (padding included) are written
        # into the free half, so nothing on the way in is shifted or depends on
        # n·width; the unread bits are the `lvl` bits from `rptr` on, and the frame's
        # last job takes the frame's padding with its codes.
        buf = Signal(_BUFFER_BITS)
        wsel = Signal()                 # half that the next beat goes to
        rptr = Signal(_BEAT_SHIFT + 1)  # first unread bit
        lvl = Signal(range(_BUFFER_BITS + 1))   # unread bits
        cur_valid = Signal()
        cur_width = Signal(6)
        cur_pad = Signal(_BEAT_SHIFT)
        cur_tag = Signal.like(desc_out.tag)
        hrem = Signal(range(M + 1))     # codes left in the host frame, this job's included
        after = Signal(16)              # codes of the wire frame after this host frame
        hfirst = Signal()
        # Registered functions of the state above, so the fire condition and the
        # pointer update come straight from flip-flops.
        count = Signal(5)
        need = Signal(range(CODES_PER_JOB * 32 + BEAT_BITS))   # count·width (+ pad if last)
        hlast = Signal()
        flast = Signal()

        o_free = ~self.o.valid | self.o.ready
        fire = Signal()
        m.d.comb += fire.eq(cur_valid & (lvl >= need) & o_free)
        # A beat fits once at most 512 bits are left unread after this cycle's job:
        # they all lie in the half below the write half. Both cases come from
        # registers, so o.ready only drives a mux on the way to i.ready.
        room_fire = Signal()
        room_idle = Signal()
        m.d.comb += [
            room_fire.eq(lvl - need <= BEAT_BITS),
            room_idle.eq(lvl <= BEAT_BITS),
        ]
        take = Signal()                 # the input register's beat goes into the ring
        m.d.comb += take.eq(r_valid & Mux(fire, room_fire, room_idle))
        # The input register keeps each frame's descriptor a cycle ahead of its bits,
        # so the job counter moves on to the next frame without a bubble.
        m.d.comb += self.i.ready.eq((~r_valid | take) & (desc_q.w_rdy | ~first))
        accept = Signal()
        m.d.comb += [
            accept.eq(self.i.valid & self.i.ready),
            desc_q.w_en.eq(accept & first),
        ]
        with m.If(accept):
            m.d.sync += [r_data.eq(ip.data), r_valid.eq(1)]
            with m.If(first):
                # ⌈n·width/512⌉ − 1 beats to come (n ≥ 1, width ≥ 1).
                m.d.sync += in_beats.eq((total - 1) >> _BEAT_SHIFT)
            with m.Else():
                m.d.sync += in_beats.eq(in_beats - 1)
        with m.Elif(take):
            m.d.sync += r_valid.eq(0)
        with m.If(take):
            with m.If(wsel):
                m.d.sync += buf[BEAT_BITS:].eq(r_data)
            with m.Else():
                m.d.sync += buf[:BEAT_BITS].eq(r_data)
            m.d.sync += wsel.eq(~wsel)

        cons = Signal.like(need)
        m.d.comb += cons.eq(Mux(fire, need, 0))
        m.d.sync += [
            rptr.eq(rptr + cons),       # wraps around the ring
            lvl.eq(lvl - cons + Mux(take, BEAT_BITS, 0)),
        ]
        # The next 512 unread bits (a rotation by a register).
        window = Signal(BEAT_BITS)
        m.d.comb += window.eq(Cat(buf, buf[:BEAT_BITS]) >> rptr)

        # --- job extraction -----------------------------------------------------------
        with m.If(fire):
            m.d.sync += [
                self.o.valid.eq(1),
                op.count.eq(count),
                op.host_first.eq(hfirst),
                op.host_last.eq(hlast),
                op.frame_last.eq(flast),
                op.tag.eq(cur_tag),
            ]
            # Fixed wiring per built width.
            codes = Signal(data.ArrayLayout(unsigned(32), CODES_PER_JOB))
            with m.Switch(cur_width):
                for w in self.widths:
                    with m.Case(w):
                        for e in range(CODES_PER_JOB):
                            m.d.comb += codes[e].eq(window[e * w:(e + 1) * w])
            for e in range(CODES_PER_JOB):
                m.d.sync += op.codes[e].eq(Mux(count > e, codes[e], 0))
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        # --- job counter ----------------------------------------------------------------
        # Two candidate next jobs, each computed from registers only: the next job of
        # this wire frame (`adv_*`) and the first job of the frame at the head of the
        # queue (`new_*`). `fire` and `load` only pick one, so the loop through the
        # fire condition stays short.
        def host_frame(codes_left):
            """(size, codes after it) of a host frame starting with `codes_left` to go."""
            big = codes_left > M
            return Mux(big, M, codes_left), Mux(big, codes_left - M, 0)

        def derive(prefix, hrem_v, after_v, width_v, pad_v):
            """count, need, host_last, frame_last of a job with `hrem_v` codes left in
            its host frame and `after_v` after that."""
            j_count = Signal.like(count, name=f"{prefix}_count")
            j_bits = Signal(range(CODES_PER_JOB * 32 + 1), name=f"{prefix}_bits")
            j_need = Signal.like(need, name=f"{prefix}_need")
            j_hlast = Signal(name=f"{prefix}_hlast")
            j_flast = Signal(name=f"{prefix}_flast")
            m.d.comb += [
                j_count.eq(Mux(hrem_v >= CODES_PER_JOB, CODES_PER_JOB, hrem_v)),
                j_hlast.eq(hrem_v <= CODES_PER_JOB),
                j_flast.eq(j_hlast & (after_v == 0)),
            ]
            # A product table per built width instead of a multiplier.
            with m.Switch(width_v):
                for w in self.widths:
                    with m.Case(w):
                        table = Array(Const(c * w, j_bits.shape())
                                      for c in range(CODES_PER_JOB + 1))
                        m.d.comb += j_bits.eq(table[j_count])
            m.d.comb += j_need.eq(j_bits + Mux(j_flast, pad_v, 0))
            return j_count, j_need, j_hlast, j_flast

        adv_hrem = Signal.like(hrem)
        adv_after = Signal.like(after)
        next_size, next_rest = host_frame(after)
        m.d.comb += [
            adv_hrem.eq(Mux(hlast, next_size, hrem - CODES_PER_JOB)),
            adv_after.eq(Mux(hlast, next_rest, after)),
        ]
        adv = derive("adv", adv_hrem, adv_after, cur_width, cur_pad)
        new_hrem = Signal.like(hrem)
        new_after = Signal.like(after)
        new_size, new_rest = host_frame(desc_out.n)
        m.d.comb += [new_hrem.eq(new_size), new_after.eq(new_rest)]
        new = derive("new", new_hrem, new_after, desc_out.width, desc_out.pad)

        load = Signal()
        m.d.comb += [
            load.eq(desc_q.r_rdy & (~cur_valid | (fire & flast))),
            desc_q.r_en.eq(load),
        ]
        with m.If(load):
            m.d.sync += [
                cur_valid.eq(1),
                cur_width.eq(desc_out.width),
                cur_pad.eq(desc_out.pad),
                cur_tag.eq(desc_out.tag),
                hrem.eq(new_hrem),
                after.eq(new_after),
                hfirst.eq(1),
                Cat(count, need, hlast, flast).eq(Cat(*new)),
            ]
        with m.Elif(fire):
            with m.If(flast):
                m.d.sync += cur_valid.eq(0)
            with m.Else():
                m.d.sync += [
                    hrem.eq(adv_hrem),
                    after.eq(adv_after),
                    hfirst.eq(hlast),
                    Cat(count, need, hlast, flast).eq(Cat(*adv)),
                ]
        return m
