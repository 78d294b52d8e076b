"""The per-lane data generator, in gateware.

Emits exactly the frames of :func:`squeezenic_hw.reference.generator.generate_frames`
(``docs/generator.md``): SqueezeNIC host frames whose fp32 values are a pure
bit-manipulation of the counter RNG's draws (:class:`CounterRng`, no
multiplier), paced by a token bucket in bytes of frame per cycle.

Structure: a sequencer issues one beat descriptor per enabled cycle (the
header beat of a frame, then its payload beats); the descriptor rides beside
:class:`CounterRng` (8 stages), which draws the 16 values of a payload beat
from its first tensor index; a last stage maps the draws to fp32 bit patterns,
or assembles the header, into the output register. The whole pipeline shares
one enable, ``~o.valid | o.ready``, as the codec units do.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.counter_rng import CounterRng
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    axis_signature,
)
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.frames import Header
from squeezenic_hw.spec.generator import DEFAULT_RATE, MAX_ELEMENTS, VALUE_SALT, rate_to_q8_8
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_PORT, HDR, HEADER_LEN

__all__ = ["GradientGenerator"]

_RATE_Q88_DEFAULT = rate_to_q8_8(DEFAULT_RATE)


class _Beat(data.Struct):
    """One issued beat, riding beside the RNG to the output stage (its valid bit apart)."""
    header: unsigned(1)      # the frame's header beat (else a payload beat)
    last: unsigned(1)
    mask: unsigned(16)       # valid elements of a payload beat (a prefix; all for a header)
    ip_id: unsigned(16)      # header only: frame counter mod 2**16
    offset: unsigned(32)     # header only: tensor index of the frame's element 0
    flush: unsigned(1)       # header only


def _value_bits(u):
    """fp32 bits of the generated value for one 32-bit draw ``u`` (docs/generator.md).

    Small class: biased exponent ``117 − (2z + b)`` = ``Cat(~b, 58 − z)`` (117
    is odd), so it is wiring and a 6-way priority mux, no adder.
    """
    sign, e8, mantissa = u[31], u[23:31], u[0:23]
    exponent = Mux(e8 == 0, 0, Mux(e8[0:2] == 1, 126, Mux(e8[0:2] == 2, 127, 128)))
    for z in reversed(range(6)):              # z leading zeros: leading one at bit 7 − z
        lead = 7 - z
        exponent = Mux(e8[lead], Cat(~e8[lead - 1], Const(58 - z, 7)), exponent)
    mantissa = Mux(e8 == 0, 0, mantissa)
    return Cat(mantissa, exponent[:8], sign)


def _ip_constant_sum(template):
    """Sum of the IPv4 header words the template fixes (all but length, id, checksum)."""
    words = [0x4500 | template.ip_tos, template.ip_frag, (template.ttl << 8) | template.protocol]
    for addr in (template.src_ip, template.dst_ip):
        words += [int.from_bytes(addr[0:2], "big"), int.from_bytes(addr[2:4], "big")]
    return sum(words)


def _be(value, length):
    """``length`` header bytes of ``value`` in network order."""
    return [value[8 * k:8 * k + 8] for k in reversed(range(length))]


def _le(value, length):
    return [value[8 * k:8 * k + 8] for k in range(length)]


def _const_bytes(raw):
    return [Const(b, 8) for b in raw]


class GradientGenerator(wiring.Component):
    """One lane's data generator: gradient-like SqueezeNIC host frames at a set rate.

    Produces exactly :func:`squeezenic_hw.reference.generator.generate_frames`
    (``docs/generator.md``)
    for a run: frame ``k`` holds ``elements`` values from tensor index
    ``offset + k·elements``, IP identification ``k`` mod 2**16, ``flush`` on every
    ``flush_every``-th frame.

    Parameters
    ----------
    max_elements : int
        Largest ``elements`` accepted, 1 … 2384 (2384 gives 9600-byte frames).
        Default 363 (1516-byte frames).
    template : squeezenic_hw.spec.frames.Header
        The header fields that are not control inputs: MACs, EtherType, IPv4
        addresses, TOS, flags/fragment word, TTL, protocol, UDP destination
        port, version (elaboration-time constants). Default ``Header()``.

    Attributes
    ----------
    o : Out(axis_signature())
        The frames. ``tuser_size`` = 64 + 4·elements, ``tuser_src``/``tuser_dst``
        from the ports of those names; bytes beyond ``tkeep`` are zero.
    start : In(1)
        Level. A run begins when ``start`` is 1, the generator is idle and
        ``elements`` is in 1 … max_elements, and both were so the cycle before
        (set the other inputs by the cycle ``start`` rises); frames follow while
        ``start`` stays 1.
        When it drops, the frame being issued is completed, then the run ends.
        After a run ended with ``start`` still 1 (``n_frames`` reached), ``start``
        must drop before the next run.
    n_frames : In(32)
        Frames per run; 0 = unlimited.
    elements, codec, param, stochastic, scale, aux, seed, value_seed, offset, flush_every,
    udp_src_port, tuser_src, tuser_dst : In
        The run's :class:`~squeezenic_hw.reference.generator.GeneratorConfig` fields (widths 16, 8,
        8, 1, 32, 32, 32, 32, 32, 16, 16, 16, 16); see :func:`config_values`. They must
        stay constant while ``busy``. Reset values match ``GeneratorConfig()``.
    rate_bytes_per_cycle : In(16)
        Token-bucket rate, unsigned Q8.8 bytes of frame per cycle (reset value
        50.0 = 100 Gb/s at 250 MHz; 64.0 or more = one beat per cycle back to back).
    frames_sent : Out(32)
        Frames whose last beat was transferred in the current (or last) run.
    busy : Out(1)
        A run is under way or its beats are still in the pipeline.

    Notes
    -----
    Rate: a credit (signed, 1/256 byte) starts at 0 with each run, gains
    ``rate_bytes_per_cycle`` every cycle and is capped at one frame length L; a
    frame's header is issued only when the credit is ≥ 0, and issuing it
    subtracts L. The first frame of a run therefore starts at once; over any
    window of T cycles at most ``rate·T + 2L`` bytes are issued, so after a stall
    at most one frame of credit is made up at bus rate.

    Latency: ``LATENCY`` = 11 cycles from ``start`` rising (idle generator,
    inputs set in the same cycle) to the first beat valid on ``o``: 2 to begin
    the run (the inputs are registered once before use), 9 from the issue of the
    header through the RNG's 8 stages and the output stage.
    Throughput: one beat per cycle when the rate allows (1 + ⌈elements/16⌉ beats
    per frame, frames back to back at rate ≥ 64).
    Backpressure: when ``o.valid & ~o.ready`` the whole pipeline and the
    sequencer hold (the credit keeps accruing up to its cap); nothing is
    skipped or reordered, and bubbles inside the pipeline are squeezed out.
    Reset: the sequencer (run state, counters, the token bucket) and the valid bits
    of the pipeline; the descriptors, the checksum and the output beat take none
    (Yosys makes shift registers of the descriptor's stages).
    Resources (Yosys ``synth_xilinx``, UltraScale+): ~6.6k LUT, 3.6k FF, no DSP or
    RAM, at most 4 LUT levels outside :class:`CounterRng` (which is 5.5k LUT of it);
    the same for ``max_elements`` = 2384.
    """

    LATENCY = 2 + 1 + CounterRng.LATENCY

    def __init__(self, max_elements=DEFAULT_HOST_ELEMENTS, *, template=None):
        if isinstance(max_elements, bool) or not isinstance(max_elements, int) \
                or not 1 <= max_elements <= MAX_ELEMENTS:
            raise ValueError(f"max_elements must be an int in 1…{MAX_ELEMENTS}, "
                             f"got {max_elements!r}")
        template = Header() if template is None else template
        if not isinstance(template, Header):
            raise ValueError(f"template must be a frames.Header, got {template!r}")
        if (len(template.dst_mac), len(template.src_mac), len(template.src_ip),
                len(template.dst_ip)) != (6, 6, 4, 4):
            raise ValueError("template needs 6-byte MAC and 4-byte IPv4 addresses")
        for name, width in [("ethertype", 16), ("ip_tos", 8), ("ip_frag", 16), ("ttl", 8),
                            ("protocol", 8), ("dst_port", 16), ("version", 8)]:
            if not 0 <= getattr(template, name) < 1 << width:
                raise ValueError(f"template.{name} must fit {width} bits")
        self.max_elements = max_elements
        self.template = template
        super().__init__({
            "o": Out(axis_signature()),
            "start": In(1),
            "n_frames": In(32),
            "elements": In(16, init=min(DEFAULT_HOST_ELEMENTS, max_elements)),
            "codec": In(8),
            "param": In(8),
            "stochastic": In(1),
            "scale": In(32, init=0x3F800000),
            "aux": In(32, init=0x3F800000),
            "seed": In(32),
            "value_seed": In(32),
            "offset": In(32),
            "flush_every": In(16),
            "udp_src_port": In(16, init=DEFAULT_PORT),
            "tuser_src": In(16),
            "tuser_dst": In(16),
            "rate_bytes_per_cycle": In(16, init=_RATE_Q88_DEFAULT),
            "frames_sent": Out(32),
            "busy": Out(1),
        })

    @property
    def latency(self):
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.rng = rng = CounterRng()
        en = Signal()
        m.d.comb += en.eq(~self.o.valid | self.o.ready)
        st = Stager(m, en, reset_less=True)     # data; the valid bits are reset

        # ---- per-run constants, registered from the (constant) inputs ----
        frame_len = Signal(18, reset_less=True)      # 64 + 4·elements
        n_beats = Signal(range(MAX_ELEMENTS // ELEMENTS_PER_BEAT + 2),   # payload beats
                         reset_less=True)
        last_mask = Signal(ELEMENTS_PER_BEAT, reset_less=True)  # of the last payload beat
        m.d.sync += [
            frame_len.eq(HEADER_LEN + (self.elements << 2)),
            n_beats.eq((self.elements + ELEMENTS_PER_BEAT - 1) >> 4),
            # 1…16 elements: a mask of ((elements - 1) mod 16) + 1 ones
            last_mask.eq(Const((1 << ELEMENTS_PER_BEAT) - 1, ELEMENTS_PER_BEAT)
                         >> ~(self.elements - 1)[:4]),
        ]
        elements_ok = Signal()
        m.d.comb += elements_ok.eq((self.elements != 0) & (self.elements <= self.max_elements))
        # A run begins only after start and a valid ``elements`` have been seen for a
        # cycle, so the registers above (and the bucket's below, one more cycle) are
        # fresh when first used: frame_len the cycle after the run begins, the bucket
        # constants the cycle after that.
        settled = Signal()
        m.d.sync += settled.eq(self.start & elements_ok)

        # Token bucket constants (1/256 byte), so that the per-cycle update is one adder
        # and one comparator side by side, with the late ``issue_header`` only choosing.
        rate = self.rate_bytes_per_cycle
        length_q = Signal(signed(27))     # L' = frame length · 256: the cap and the price
        pay_step = Signal(signed(27), reset_less=True)     # rate − L'
        # credit above L' − rate saturates when not paying, above 2L' − rate when paying
        limit_idle = Signal(signed(27), reset_less=True)
        limit_pay = Signal(signed(27), reset_less=True)
        m.d.comb += length_q.eq(frame_len << 8)
        m.d.sync += [
            pay_step.eq(rate - length_q),
            limit_idle.eq(length_q - rate),
            limit_pay.eq((length_q << 1) - rate),
        ]

        # ---- sequencer ----
        running = Signal()          # the run may still issue beats
        need_low = Signal()         # the last run ended with start high: wait for it to drop
        in_payload = Signal()       # issuing the payload beats of a frame
        beat = Signal.like(n_beats)  # payload beat being issued, 1…n_beats
        k = Signal(32)              # frames issued in this run
        frame_offset = Signal(32)   # tensor index of the next frame's element 0
        beat_offset = Signal(32)    # tensor index of the next payload beat's element 0
        flush_count = Signal(16)    # frames since the last flush
        flush_due = Signal()        # registered flush_count + 1 == flush_every
        flush_limit = Signal(17, reset_less=True)   # flush_every - 1 (-1: never)
        credit = Signal(signed(26))  # token bucket, 1/256 byte
        pipe_busy = Signal()

        quota_ok = Signal()         # registered (n_frames == 0) | (k != n_frames)
        more = Signal()             # the run may start another frame
        can_start = Signal()
        issue_header = Signal()
        issue_payload = Signal()
        is_last = Signal()
        flush = Signal()
        m.d.comb += [
            more.eq(self.start & quota_ok),
            can_start.eq(running & ~in_payload & more & (credit >= 0)),
            issue_header.eq(en & can_start),
            issue_payload.eq(en & running & in_payload),
            is_last.eq(beat == n_beats),
            flush.eq(flush_due),
        ]

        issued = Signal(_Beat)
        issued_valid = Signal()
        m.d.comb += [
            issued_valid.eq(issue_header | issue_payload),
            issued.header.eq(issue_header),
            issued.last.eq(issue_payload & is_last),
            issued.mask.eq(Mux(issue_payload & is_last, last_mask,
                               (1 << ELEMENTS_PER_BEAT) - 1)),
            issued.ip_id.eq(k[:16]),
            issued.offset.eq(frame_offset),
            issued.flush.eq(flush),
            rng.en.eq(en),
            rng.seed.eq(self.value_seed ^ VALUE_SALT),
            rng.offset.eq(beat_offset),
        ]

        with m.If(issue_header):
            m.d.sync += [
                k.eq(k + 1),
                frame_offset.eq(frame_offset + self.elements),
                beat_offset.eq(frame_offset),
                flush_count.eq(Mux(flush, 0, flush_count + 1)),
                in_payload.eq(1),
                beat.eq(1),
            ]
        with m.If(issue_payload):
            m.d.sync += [
                beat_offset.eq(beat_offset + ELEMENTS_PER_BEAT),
                beat.eq(beat + 1),
            ]
            with m.If(is_last):
                m.d.sync += in_payload.eq(0)

        # Token bucket: accrue every cycle, pay a frame's length when its header issues,
        # never above L'.
        with m.If(running):
            m.d.sync += credit.eq(Mux(
                issue_header,
                Mux(credit > limit_pay, length_q, credit + pay_step),
                Mux(credit > limit_idle, length_q, credit + rate)))

        # k changes only with a header, and the next header is at least two cycles
        # later (a frame has a payload beat), so a registered quota check is never stale
        # when it matters; it keeps the 32-bit compare off the issue path.
        m.d.sync += quota_ok.eq((self.n_frames == 0) | (k != self.n_frames))
        # Likewise the flush check: flush_count changes only with a header, so the compare
        # is registered (stale only in the cycle after a header, which issues none).
        m.d.sync += [flush_limit.eq(self.flush_every - 1),
                     flush_due.eq(flush_count == flush_limit)]

        begin = Signal()
        m.d.comb += begin.eq(~running & ~pipe_busy & self.start & ~need_low & elements_ok
                             & settled)
        with m.If(begin):
            m.d.sync += [
                running.eq(1),
                quota_ok.eq(1),
                k.eq(0),
                frame_offset.eq(self.offset),
                flush_count.eq(0),
                flush_due.eq(self.flush_every == 1),
                credit.eq(0),
                in_payload.eq(0),
                self.frames_sent.eq(0),
            ]
        with m.Elif(running & ~in_payload & ~more):
            m.d.sync += [running.eq(0), need_low.eq(self.start)]
        with m.Elif(~running & ~self.start):
            m.d.sync += need_low.eq(0)

        # ---- pipeline: descriptor beside the RNG, checksum on the way ----
        d = issued
        d_valid = issued_valid
        valids = []
        for stage in range(CounterRng.LATENCY):
            d = st.reg(d, name=f"beat_d{stage + 1}")
            d_valid = st.reg(d_valid, name=f"valid_d{stage + 1}", reset_less=False)
            valids.append(d_valid)
            if stage == 0:
                # IPv4 checksum (RFC 791): template words + total length + identification.
                csum_sum = Signal(20, name="csum_sum")
                m.d.comb += csum_sum.eq(_ip_constant_sum(self.template)
                                        + (frame_len - 14)[:16] + d.ip_id)
                total = st.reg(csum_sum, name="csum_total")
            elif stage == 1:
                fold = Signal(17, name="csum_fold1")
                folded = Signal(16, name="csum_fold2")
                m.d.comb += [
                    fold.eq(total[:16] + total[16:]),
                    folded.eq(fold[:16] + fold[16]),   # end-around carry: fits 16 bits
                ]
                checksum = st.reg(~folded, name="csum")
            elif stage > 2:    # the checksum rides beside the descriptor from stage 3 on
                checksum = st.reg(checksum, name=f"csum_d{stage}")

        # ---- output stage: header or values ----
        t = self.template
        hdr = [None] * HEADER_LEN

        def put(fld, byte_values):
            start, length = fld
            assert len(byte_values) == length
            hdr[start:start + length] = byte_values

        total_length = (frame_len - 14)[:16]
        udp_length = (frame_len - 34)[:16]
        put(HDR.DST_MAC, _const_bytes(t.dst_mac))
        put(HDR.SRC_MAC, _const_bytes(t.src_mac))
        put(HDR.ETHERTYPE, _const_bytes(t.ethertype.to_bytes(2, "big")))
        put(HDR.IP_VIHL, [Const(0x45, 8)])
        put(HDR.IP_TOS, [Const(t.ip_tos, 8)])
        put(HDR.IP_TOTAL_LENGTH, _be(total_length, 2))
        put(HDR.IP_ID, _be(d.ip_id, 2))
        put(HDR.IP_FRAG, _const_bytes(t.ip_frag.to_bytes(2, "big")))
        put(HDR.IP_TTL, [Const(t.ttl, 8)])
        put(HDR.IP_PROTO, [Const(t.protocol, 8)])
        put(HDR.IP_CHECKSUM, _be(checksum, 2))
        put(HDR.SRC_IP, _const_bytes(t.src_ip))
        put(HDR.DST_IP, _const_bytes(t.dst_ip))
        put(HDR.UDP_SRC, _be(self.udp_src_port, 2))
        put(HDR.UDP_DST, _const_bytes(t.dst_port.to_bytes(2, "big")))
        put(HDR.UDP_LENGTH, _be(udp_length, 2))
        put(HDR.UDP_CHECKSUM, _const_bytes(b"\0\0"))
        put(HDR.VERSION, [Const(t.version, 8)])
        put(HDR.CODEC, [self.codec])
        put(HDR.PARAM, [self.param])
        put(HDR.FLAGS, [Cat(Const(0, 1), self.stochastic, d.flush, Const(0, 5))])
        put(HDR.N, _le(self.elements, 2))
        put(HDR.SCALE, _le(self.scale, 4))
        put(HDR.AUX, _le(self.aux, 4))
        put(HDR.SEED, _le(self.seed, 4))
        put(HDR.OFFSET, _le(d.offset, 4))
        header = Cat(*hdr)

        # the mask rides in the descriptor (a shift register, 0.7 ns late): no compare
        # after it
        mask = d.mask
        values = Cat(*[Mux(mask[e], _value_bits(rng.u[e]), 0)
                       for e in range(ELEMENTS_PER_BEAT)])
        out_valid = st.reg(d_valid, name="out_valid", reset_less=False)
        valids.append(out_valid)
        out_data = st.reg(Mux(d.header, header, values), name="out_data")
        out_keep = st.reg(Cat(*[mask[e].replicate(4) for e in range(ELEMENTS_PER_BEAT)]),
                          name="out_keep")
        out_last = st.reg(d.last, name="out_last")

        m.d.comb += [
            self.o.valid.eq(out_valid),
            self.o.payload.data.eq(out_data),
            self.o.payload.keep.eq(out_keep),
            self.o.payload.last.eq(out_last),
            self.o.payload.size.eq(frame_len[:16]),
            self.o.payload.src.eq(self.tuser_src),
            self.o.payload.dst.eq(self.tuser_dst),
            pipe_busy.eq(Cat(*valids).any()),
            self.busy.eq(running | pipe_busy),
        ]
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            m.d.sync += self.frames_sent.eq(self.frames_sent + 1)
        return m
