"""The RX lane's bit unpacker and host-frame splitter.

The input is the payload beats of consecutive wire frames, back to back (no
headers, no ``tlast``): a frame of ``n`` codes of ``width`` bits is exactly
``⌈n·width/512⌉`` beats, element ``i`` taking bits ``[i·width, (i+1)·width)``
of the payload bit string (wire format section 3: LSB-first, byte 0 of a beat
in bits 7:0). The output is *jobs* of up to 16 codes: each wire frame is cut
into host frames of at most ``max_host_elements`` codes, and each host frame
into jobs of 16 codes, its last job holding the remainder.
"""

from amaranth import Array, Const, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "CODES_PER_JOB", "BEAT_BITS", "MAX_HOST_ELEMENTS_LIMIT",
    "unpacker_input_layout", "unpacker_output_layout", "WireUnpacker",
]

#: Codes per output job (one decoder beat of 16 fp32 elements).
CODES_PER_JOB = 16
#: Bits per input beat.
BEAT_BITS = 512
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
    Structure: an input register (with the frame's beat count), a 1024-bit
    bit buffer with a fill level, and an output register. Whole beats enter
    the buffer, appended above the bits it holds whenever at most 512 remain
    after this cycle's job. A job of ``count`` codes reads the bottom
    ``count·width`` bits (fixed wiring per built width, muxed by width) and
    the buffer shifts right by that many bits, plus, on a frame's last job,
    the frame's padding ``(−n·width) mod 512``: so the padding goes without a
    mask and ``n·width`` is off the data path. A 4-entry queue carries each
    frame's ``n``/``width``/padding/``tag`` from the input register to the job
    counter, whose derived values (count, bits to take, flags) are registered.

    Latency: 3 cycles from an accepted first input beat to its job on ``o``
    (input register, buffer, output register).

    Throughput: one job per cycle whenever the frame's bits are in: the buffer
    stays at ≥ 512 bits while input beats are offered, so a job never waits
    for bits unless the input is the bottleneck (at most one beat per cycle;
    a frame has at least as many jobs as beats).
    Width 32 with ``M`` a multiple of 16: one beat in and one job out per
    cycle; width 16: one beat every second cycle, one job every cycle.
    Short jobs (``M`` not a multiple of 16, e.g. 363) and frame boundaries
    cost no cycles; a job may start mid-beat.

    Backpressure: ``o`` holds its job while ``o.valid & ~o.ready``; the buffer
    and the input stop (``i.ready`` low once the buffer and input register
    are full, or the frame queue is full on a frame's first beat). Nothing is
    dropped or reordered. ``i.ready`` depends combinationally on ``o.ready``.
    """

    LATENCY = 3

    def __init__(self, widths, *, max_host_elements=363, tag_shape=unsigned(1)):
        try:
            widths = _check_params(widths, max_host_elements, tag_shape)
        except ValueError:
            self._MustUse__silence = True   # no UnusedElaboratable warning for a rejected one
            raise
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
        r_valid = Signal()
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

        # --- buffer and job counter state ---------------------------------------------
        # Whole beats enter the buffer (padding included, so nothing on the way in
        # depends on n·width); the frame's last job takes its padding with its codes.
        buf = Signal(_BUFFER_BITS)
        lvl = Signal(range(_BUFFER_BITS + 1))
        cur_valid = Signal()
        cur_width = Signal(6)
        cur_pad = Signal(_BEAT_SHIFT)
        cur_tag = Signal.like(desc_out.tag)
        hrem = Signal(range(M + 1))     # codes left in the host frame, this job's included
        after = Signal(16)              # codes of the wire frame after this host frame
        hfirst = Signal()
        # Registered functions of the state above, so the buffer's shift amount and
        # the fire condition come straight from flip-flops.
        count = Signal(5)
        need = Signal(range(CODES_PER_JOB * 32 + BEAT_BITS))   # count·width (+ pad if last)
        hlast = Signal()
        flast = Signal()

        o_free = ~self.o.valid | self.o.ready
        fire = Signal()
        m.d.comb += fire.eq(cur_valid & (lvl >= need) & o_free)
        # Room for a beat once this cycle's job has taken its bits. Both cases come
        # from registers, so o.ready only drives a mux on the way to i.ready.
        lvl_after = Signal.like(lvl)
        room_fire = Signal()
        room_idle = Signal()
        m.d.comb += [
            lvl_after.eq(lvl - need),
            room_fire.eq(lvl_after <= BEAT_BITS),
            room_idle.eq(lvl <= BEAT_BITS),
        ]
        take = Signal()
        m.d.comb += take.eq(r_valid & Mux(fire, room_fire, room_idle))

        m.d.comb += self.i.ready.eq((~r_valid | take) & (desc_q.w_rdy | ~first))
        accept = self.i.valid & self.i.ready
        m.d.comb += desc_q.w_en.eq(accept & first)
        with m.If(accept):
            m.d.sync += [r_data.eq(ip.data), r_valid.eq(1)]
            with m.If(first):
                # ⌈n·width/512⌉ − 1 beats to come (n ≥ 1, width ≥ 1).
                m.d.sync += in_beats.eq((total - 1) >> _BEAT_SHIFT)
            with m.Else():
                m.d.sync += in_beats.eq(in_beats - 1)
        with m.Elif(take):
            m.d.sync += r_valid.eq(0)

        # --- buffer update ------------------------------------------------------------
        # Both shifts by amounts from registers; `fire` only picks the result.
        left = Signal.like(lvl)
        shifted = Signal(_BUFFER_BITS)
        m.d.comb += [
            left.eq(Mux(fire, lvl_after, lvl)),
            shifted.eq(Mux(fire, buf >> need, buf)),
        ]
        with m.If(take):
            # The bits above `lvl` are zero, so the new beat is ORed in.
            m.d.sync += [
                buf.eq(shifted | (r_data << left)[:_BUFFER_BITS]),
                lvl.eq(left + BEAT_BITS),
            ]
        with m.Else():
            m.d.sync += [buf.eq(shifted), lvl.eq(left)]

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
                            m.d.comb += codes[e].eq(buf[e * w:(e + 1) * w])
            for e in range(CODES_PER_JOB):
                m.d.sync += op.codes[e].eq(Mux(count > e, codes[e], 0))
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        # --- job counter: next state, then its registered functions ------------------
        nx_valid = Signal()
        nx_width = Signal.like(cur_width)
        nx_pad = Signal.like(cur_pad)
        nx_hrem = Signal.like(hrem)
        nx_after = Signal.like(after)
        nx_hfirst = Signal()
        load = Signal()
        m.d.comb += [
            load.eq(desc_q.r_rdy & (~cur_valid | (fire & flast))),
            desc_q.r_en.eq(load),
            nx_valid.eq(cur_valid),
            nx_width.eq(cur_width),
            nx_pad.eq(cur_pad),
            nx_hrem.eq(hrem),
            nx_after.eq(after),
            nx_hfirst.eq(hfirst),
        ]

        def next_host_frame(codes_left):
            """(size, codes after it) of a host frame starting with `codes_left` to go."""
            big = codes_left > M
            return Mux(big, M, codes_left), Mux(big, codes_left - M, 0)

        with m.If(load):
            size, rest = next_host_frame(desc_out.n)
            m.d.comb += [
                nx_valid.eq(1),
                nx_width.eq(desc_out.width),
                nx_pad.eq(desc_out.pad),
                nx_hrem.eq(size),
                nx_after.eq(rest),
                nx_hfirst.eq(1),
            ]
            m.d.sync += cur_tag.eq(desc_out.tag)
        with m.Elif(fire):
            with m.If(flast):
                m.d.comb += nx_valid.eq(0)
            with m.Elif(hlast):
                size, rest = next_host_frame(after)
                m.d.comb += [nx_hrem.eq(size), nx_after.eq(rest), nx_hfirst.eq(1)]
            with m.Else():
                m.d.comb += [nx_hrem.eq(hrem - CODES_PER_JOB), nx_hfirst.eq(0)]

        nx_count = Signal.like(count)
        nx_hlast = Signal()
        nx_flast = Signal()
        nx_bits = Signal(range(CODES_PER_JOB * 32 + 1))    # nx_count·nx_width
        m.d.comb += [
            nx_count.eq(Mux(nx_hrem >= CODES_PER_JOB, CODES_PER_JOB, nx_hrem)),
            nx_hlast.eq(nx_hrem <= CODES_PER_JOB),
            nx_flast.eq(nx_hlast & (nx_after == 0)),
        ]
        # A table per built width instead of a multiplier.
        with m.Switch(nx_width):
            for w in self.widths:
                with m.Case(w):
                    table = Array(Const(c * w, nx_bits.shape())
                                  for c in range(CODES_PER_JOB + 1))
                    m.d.comb += nx_bits.eq(table[nx_count])
        m.d.sync += [
            cur_valid.eq(nx_valid),
            cur_width.eq(nx_width),
            cur_pad.eq(nx_pad),
            hrem.eq(nx_hrem),
            after.eq(nx_after),
            hfirst.eq(nx_hfirst),
            count.eq(nx_count),
            need.eq(nx_bits),
            hlast.eq(nx_hlast),
            flast.eq(nx_flast),
        ]
        return m
