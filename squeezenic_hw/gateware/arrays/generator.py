"""The per-lane data generator, in gateware.

Emits exactly the frames of :func:`squeezenic_hw.reference.generator.generate_frames`
(``docs/generator.md``): SqueezeNIC host frames of gradient-like fp32 values, paced
by a token bucket in bytes of frame per cycle.

Structure: a sequencer issues one beat descriptor per enabled cycle (the header
beat of a frame, then its payload beats). The values come from a 521-bit linear
feedback shift register that moves 80 bits per payload beat (80 LUTs: each new
bit is the XOR of two old ones); the output stage, one cycle after the issue,
reads each sign or mantissa bit as the XOR of three register bits, inside the
LUT that also picks header or payload and masks the last beat, and each
exponent from five of the new bits. The whole pipeline shares one enable,
``~o.valid | o.ready``, as the codec units do.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    axis_signature,
)
from squeezenic_hw.gateware.common.lut_tree import or_tree
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, Stager, stage_enable
from squeezenic_hw.spec.frames import Header
from squeezenic_hw.spec.generator import (
    DEFAULT_RATE,
    MAX_ELEMENTS,
    VALUE_EXPONENT_HIGH,
    rate_to_q8_8,
)
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_PORT, HDR, HEADER_LEN

__all__ = ["GradientGenerator"]

_RATE_Q88_DEFAULT = rate_to_q8_8(DEFAULT_RATE)

# ---- the value source (docs/generator.md, "Values"; the reference builds the same
# constants from the same recipes, and the tests compare the frames bit for bit) ----
_STATE_BITS = 521          # s[n] = s[n − 521] ^ s[n − 489]: x^521 + x^32 + 1
_FEEDBACK_TAP = 32
_STEP_BITS = 80            # new bits per step (one step per payload beat)
_WARMUP_STEPS = 32         # steps with the seed injected, before the first beat
_WARMUP_TAP = 300          # the warm-up's third tap
_XOR_BITS = 25             # per element: 23 mantissa bits, the sign, the exponent's c
_CLASS_BITS = 5            # per element: the leading-zero class x


def _initial_state():
    """The window every run starts from: bits of xorshift32 (13, 17, 5) words."""
    x, value, n = 2463534242, 0, 0
    while n < _STATE_BITS:
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        value |= x << n
        n += 32
    return value & ((1 << _STATE_BITS) - 1)


def _seed_taps(i):
    """The two ``value_seed`` bits new bit ``i`` takes during the warm-up."""
    return i % 32, (i + 11) % 32


def _value_taps(e, j):
    """The three window bits XOR-ed into bit ``j`` of element ``e`` (23 = sign, 24 = c)."""
    i = _XOR_BITS * e + j
    return i % _STATE_BITS, (11 * i + 160) % _STATE_BITS, (17 * i + 341) % _STATE_BITS


def _class_taps(e):
    """Window bits of element ``e``'s class ``x`` (bit 0 first): among the newest 80."""
    first = _STATE_BITS - _STEP_BITS + _CLASS_BITS * e
    return range(first, first + _CLASS_BITS)


class _Beat(data.Struct):
    """One issued beat, registered for the output stage (its valid bit apart)."""
    header: 1                # the frame's header beat (else a payload beat)
    last: 1
    mask: ELEMENTS_PER_BEAT  # valid elements of a payload beat (a prefix; all for a header)
    ip_id: 16                # header only: frame counter mod 2**16
    offset: 32               # header only: tensor index of the frame's element 0
    flush: 1                 # header only
    folded: 16               # header only: the IPv4 header checksum's complement


def _values(m, state, signs_only=False, mantissa_bits=None):
    """The 16 fp32 bit patterns of the window ``state`` (docs/generator.md); with
    ``signs_only``, each pattern's sign bit and zeros below it; with ``mantissa_bits``,
    each mantissa cut to that many bits, the lowest sticky (``cut_mantissa``).

    A sign or mantissa bit, and the exponent's lowest bit ``c``, is the XOR of three
    window bits; the exponent is ``0b0111`` over ``g``, ``g = 14 + c`` when the class
    ``x`` is 0 and ``2·(4 − z) + c`` otherwise (``z`` leading zeros of ``x``), so its
    bits 3…1 are a function of the five class bits alone (``7`` or ``4 − z``).
    """
    if signs_only:
        signs = [_value_taps(e, 23) for e in range(ELEMENTS_PER_BEAT)]
        return [Cat(Const(0, 31), state[a] ^ state[b] ^ state[c]) for a, b, c in signs]
    # The first taps are bits 0…399 in order: one slice. Whole vectors XOR-ed at once
    # are also what keeps the Python simulator fast.
    n = ELEMENTS_PER_BEAT * _XOR_BITS
    taps = [_value_taps(e, j) for e in range(ELEMENTS_PER_BEAT) for j in range(_XOR_BITS)]
    assert [t[0] for t in taps] == list(range(n))
    xor = Signal(n)
    m.d.comb += xor.eq(state[:n] ^ Cat(*[state[t[1]] for t in taps])
                       ^ Cat(*[state[t[2]] for t in taps]))
    words = []
    for e in range(ELEMENTS_PER_BEAT):
        bits = xor[_XOR_BITS * e:_XOR_BITS * (e + 1)]
        x = Cat(*[state[p] for p in _class_taps(e)])
        g_high = Const(7, 3)
        for z in reversed(range(_CLASS_BITS)):     # leading one at bit 4 − z
            g_high = Mux(x[_CLASS_BITS - 1 - z], 4 - z, g_high)
        mantissa = bits[:23]
        if mantissa_bits is not None:
            p = 23 - mantissa_bits                 # the sticky bit: an OR of XORs
            mantissa = Cat(Const(0, p), bits[:p + 1].any(), bits[p + 1:23])
        words.append(Cat(mantissa, bits[24], g_high, Const(VALUE_EXPONENT_HIGH, 4), bits[23]))
    return words


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
    (``docs/generator.md``) for a run: frame ``k`` holds the next ``elements``
    values of the run's value stream (a shift register seeded by ``value_seed``
    when the run begins), header offset ``offset + k·elements``, IP
    identification ``k`` mod 2**16, ``flush`` on every ``flush_every``-th frame.

    Parameters
    ----------
    max_elements : int
        Largest ``elements`` accepted, 1 … 2384 (2384 gives 9600-byte frames).
        Default 363 (1516-byte frames).
    template : squeezenic_hw.spec.frames.Header
        The header fields that are not control inputs: MACs, EtherType, IPv4
        addresses, TOS, flags/fragment word, TTL, protocol, UDP destination
        port, version (elaboration-time constants). Default ``Header()``.
    signs_only : bool
        Send each value's sign bit and zeros in its other 31 bits: for a consumer that
        reads nothing else (a ``sign`` TX lane, whose wire frames are then those of the
        full values bit for bit), without the logic of the other bits.
    mantissa_bits : int or None
        Send each value with its mantissa cut to its top ``mantissa_bits`` bits (1…23),
        the lowest of them the OR of itself and those below, which are zero
        (:func:`~squeezenic_hw.reference.generator.cut_mantissa`): for a consumer that
        reads no more (a ``fixed:q`` TX lane of power-of-two scales needs q, and its
        wire frames are then those of the full values). None: the whole mantissa.

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
        The run's :class:`~squeezenic_hw.spec.generator.GeneratorConfig` fields (widths 16, 8,
        8, 1, 32, 32, 32, 32, 32, 16, 16, 16, 16); see
        :func:`~.spec.generator.config_values`. They must stay constant while ``busy``.
        Reset values match ``GeneratorConfig()``.
    rate_bytes_per_cycle : In(16)
        Token-bucket rate, unsigned Q8.8 bytes of frame per cycle (reset value
        50.0 = 100 Gb/s at 250 MHz; 64.0 or more = one beat per cycle back to back).
    frames_sent : Out(32)
        Frames whose last beat was transferred in the current (or last) run.
    busy : Out(1)
        A run is under way or its beats are still in the pipeline.

    Notes
    -----
    Rate: a credit (signed, 1/256 byte) is 0 at the end of a run's warm-up, then
    gains ``rate_bytes_per_cycle`` every cycle and is capped at one frame length L;
    a frame's header is issued only when the credit is ≥ 0, and issuing it
    subtracts L. The first frame of a run therefore starts at once; over any
    window of T cycles at most ``rate·T + 2L`` bytes are issued, so after a stall
    at most one frame of credit is made up at bus rate.

    Latency: ``LATENCY`` = 36 cycles from ``start`` rising (idle generator,
    inputs set in the same cycle) to the first beat valid on ``o``: 2 to begin
    the run (the inputs are registered once before use), 32 of warm-up (the
    value register takes the seed), then the header's issue and the output stage.
    Throughput: one beat per cycle when the rate allows (1 + ⌈elements/16⌉ beats
    per frame, frames back to back at rate ≥ 64).
    Backpressure: when ``o.valid & ~o.ready`` the whole pipeline and the
    sequencer hold (the credit keeps accruing up to its cap); nothing is
    skipped or reordered, and bubbles inside the pipeline are squeezed out.
    Reset: the sequencer (run state, counters, the token bucket) and the valid bits
    of the pipeline; the value register, the descriptor, the checksum and the output
    beat take none (the value register is held at its initial constant while no run is
    under way and no beat waits for the output stage, through the flip-flops'
    synchronous set/reset).
    Resources (Yosys ``synth_xilinx``, UltraScale+): see ``docs/generator.md``.
    """

    LATENCY = 2 + _WARMUP_STEPS + 2

    def __init__(self, max_elements=DEFAULT_HOST_ELEMENTS, *, template=None, signs_only=False,
                 mantissa_bits=None):
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
        if not isinstance(signs_only, bool):
            raise ValueError(f"signs_only must be a bool, got {signs_only!r}")
        if mantissa_bits is not None and (isinstance(mantissa_bits, bool)
                                          or not isinstance(mantissa_bits, int)
                                          or not 1 <= mantissa_bits <= 23):
            raise ValueError(f"mantissa_bits must be None or an int from 1 to 23, "
                             f"got {mantissa_bits!r}")
        self.max_elements = max_elements
        self.template = template
        self.signs_only = signs_only
        self.mantissa_bits = mantissa_bits
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
        en = stage_enable("en")
        m.d.comb += en.eq(~self.o.valid | self.o.ready)
        st = Stager(m, en, reset_less=True)     # data; the valid bits are reset

        # ---- per-run constants, registered from the (constant) inputs ----
        run = self._run_constants(m)

        # ---- sequencer ----
        running = Signal()          # the run may still issue beats
        warming = Signal()          # the run's first cycles: the value register takes the seed
        warm_left = Signal(range(_WARMUP_STEPS))
        need_low = Signal()         # the last run ended with start high: wait for it to drop
        in_payload = Signal()       # issuing the payload beats of a frame
        beat = Signal.like(run.n_beats_m1)  # payload beat being issued, 1…n_beats
        k = Signal(32)              # frames issued in this run
        frame_offset = Signal(32)   # tensor index of the next frame's element 0
        flush_count = Signal(16)    # frames since the last flush
        flush_due = Signal()        # registered flush_count + 1 == flush_every
        flush_limit = Signal(17, reset_less=True)   # flush_every - 1 (-1: never)
        credit = Signal(run.bucket)      # token bucket, 1/256 byte
        pipe_busy = Signal()

        quota_ok = Signal()         # registered (n_frames == 0) | (k != n_frames)
        more = Signal()             # the run may start another frame
        can_start = Signal()
        issue_header = stage_enable("issue_header")   # loads the next frame's counters
        issue_payload = Signal()
        is_last = Signal()          # registered beat == n_beats (while in_payload)
        m.d.comb += [
            more.eq(self.start & quota_ok),
            can_start.eq(running & ~warming & ~in_payload & more & (credit >= 0)),
            issue_header.eq(en & can_start),
            issue_payload.eq(en & running & in_payload),
        ]

        total_length, udp_length, folded = self._checksum(m, frame_len=run.frame_len,
                                                          warming=warming,
                                                          issue_header=issue_header, k=k)

        issued = Signal(_Beat)
        issued_valid = Signal()
        m.d.comb += [
            issued_valid.eq(issue_header | issue_payload),
            issued.header.eq(issue_header),
            issued.last.eq(issue_payload & is_last),
            issued.mask.eq(Mux(issue_payload & is_last, run.last_mask,
                               (1 << ELEMENTS_PER_BEAT) - 1)),
            issued.ip_id.eq(k[:16]),
            issued.offset.eq(frame_offset),
            issued.flush.eq(flush_due),
            issued.folded.eq(folded),
        ]

        with m.If(issue_header):
            m.d.sync += [
                k.eq(k + 1),
                frame_offset.eq(frame_offset + self.elements),
                flush_count.eq(Mux(flush_due, 0, flush_count + 1)),
                in_payload.eq(1),
                beat.eq(1),
            ]
        with m.If(issue_payload):
            m.d.sync += beat.eq(beat + 1)
            with m.If(is_last):
                m.d.sync += in_payload.eq(0)
        # Whether the next payload beat is the frame's last, kept a beat ahead so the late
        # ``en`` reaches it only as the enable: a header starts beat 1 (the last when the
        # frame has one payload beat), a payload beat moves on to ``beat + 1``.
        with m.If(issue_header | issue_payload):
            m.d.sync += is_last.eq(Mux(in_payload, beat == run.n_beats_m1, run.one_beat))

        # Token bucket: accrue every cycle after the warm-up, pay a frame's length when
        # its header issues, never above L'.
        with m.If(running & ~warming):
            m.d.sync += credit.eq(Mux(
                issue_header,
                Mux(credit > run.limit_pay, run.length_q, credit + run.pay_step),
                Mux(credit > run.limit_idle, run.length_q, credit + run.rate)))

        # k changes only with a header, and the next header is at least two cycles
        # later (a frame has a payload beat), so a registered quota check is never stale
        # when it matters; it keeps the 32-bit compare off the issue path.
        # ``n_frames == 0`` is registered apart (n_frames is constant while busy) and the
        # compare is a tree of kept pieces, with room for it and ``begin`` at the root.
        unlimited = Signal(reset_less=True)
        m.d.sync += unlimited.eq(self.n_frames == 0)
        k_differs = or_tree(m, list(k ^ self.n_frames), inputs=2, name="quota_differs",
                            room=2)
        m.d.sync += quota_ok.eq(unlimited | k_differs)
        # Likewise the flush check: flush_count changes only with a header, so the compare
        # is registered (stale only in the cycle after a header, which issues none).
        # ``flush_every == 1`` registered too: a run's first flush_due loads from it, one
        # LUT after ``begin``. The compare is a tree of kept pieces (three bit pairs a
        # LUT), which no LUT mapper can chain.
        flush_every_one = Signal(reset_less=True)
        count_differs = or_tree(m, list(flush_count ^ flush_limit), inputs=2,
                                name="flush_differs", room=2)
        m.d.sync += [flush_limit.eq(self.flush_every - 1),
                     flush_every_one.eq(self.flush_every == 1),
                     flush_due.eq(~count_differs)]

        # ``settled``: ``start`` and ``elements`` valid a cycle ago, as the run's registered
        # constants have them (not ``elements`` compared now: 16 bits shared by every lane of
        # an array, a compare and a fanout away from every counter's reset)
        begin = Signal(attrs={"max_fanout": MAX_FANOUT})    # every run counter's reset
        m.d.comb += begin.eq(~running & ~pipe_busy & self.start & ~need_low & run.settled)
        with m.If(begin):
            m.d.sync += [
                running.eq(1),
                warming.eq(1),
                warm_left.eq(_WARMUP_STEPS - 1),
                quota_ok.eq(1),
                k.eq(0),
                frame_offset.eq(self.offset),
                flush_count.eq(0),
                flush_due.eq(flush_every_one),
                credit.eq(0),
                in_payload.eq(0),
                self.frames_sent.eq(0),
            ]
        with m.Elif(running & ~warming & ~in_payload & ~more):
            m.d.sync += [running.eq(0), need_low.eq(self.start)]
        with m.Elif(~running & ~self.start):
            m.d.sync += need_low.eq(0)
        with m.If(warming):
            m.d.sync += warm_left.eq(warm_left - 1)
            with m.If(warm_left == 0):
                m.d.sync += warming.eq(0)

        # ---- the value register: 521 bits, 80 new ones per step ----
        state, load = self._value_register(m, issue_payload=issue_payload, warming=warming)

        # ---- output stage, one cycle after the issue: header or values ----
        # The register then holds the window of the payload beat registered in ``d``
        # (a payload issue steps it; a header does not), whatever is issued meanwhile.
        d = st.reg(issued, name="beat_d1")
        d_valid = st.reg(issued_valid, name="valid_d1", reset_less=False)
        m.d.comb += load.eq(~running & ~d_valid)

        header = self._header(total_length=total_length, d=d, udp_length=udp_length)

        values = Cat(*[Mux(d.mask[e], word, 0)
                       for e, word in enumerate(_values(m, state, self.signs_only,
                                                               self.mantissa_bits))])
        out_valid = st.reg(d_valid, name="out_valid", reset_less=False)
        out_data = st.reg(Mux(d.header, header, values), name="out_data")
        out_mask = st.reg(d.mask, name="out_mask")
        out_last = st.reg(d.last, name="out_last")

        m.d.comb += [
            self.o.valid.eq(out_valid),
            self.o.payload.data.eq(out_data),
            self.o.payload.keep.eq(Cat(*[out_mask[e].replicate(4)
                                         for e in range(ELEMENTS_PER_BEAT)])),
            self.o.payload.last.eq(out_last),
            self.o.payload.size.eq(run.frame_len),
            self.o.payload.src.eq(self.tuser_src),
            self.o.payload.dst.eq(self.tuser_dst),
            pipe_busy.eq(d_valid | out_valid),
            self.busy.eq(running | pipe_busy),
        ]
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            m.d.sync += self.frames_sent.eq(self.frames_sent + 1)
        return m

    def _run_constants(self, m):
        """Per-run constants, registered from the (constant) inputs: the frame's length and beats,
        whether a run may begin, and the token bucket's constants."""
        max_len = HEADER_LEN + 4 * self.max_elements
        frame_len = Signal(range(max_len + 1), reset_less=True)      # 64 + 4·elements
        last_mask = Signal(ELEMENTS_PER_BEAT, reset_less=True)  # of the last payload beat
        # payload beats, less one
        n_beats_m1 = Signal(range(MAX_ELEMENTS // ELEMENTS_PER_BEAT + 2), reset_less=True)
        one_beat = Signal(reset_less=True)                       # n_beats == 1
        m.d.sync += [
            frame_len.eq(HEADER_LEN + (self.elements << 2)),
            n_beats_m1.eq(((self.elements + ELEMENTS_PER_BEAT - 1) >> 4) - 1),
            one_beat.eq(((self.elements + ELEMENTS_PER_BEAT - 1) >> 4) == 1),
            # 1…16 elements: a mask of ((elements - 1) mod 16) + 1 ones
            last_mask.eq(Const((1 << ELEMENTS_PER_BEAT) - 1, ELEMENTS_PER_BEAT)
                         >> ~(self.elements - 1)[:4]),
        ]
        elements_ok = Signal()
        m.d.comb += elements_ok.eq((self.elements != 0) & (self.elements <= self.max_elements))
        # A run begins only after start and a valid ``elements`` have been seen for a
        # cycle, so the registers above (and the bucket's and checksum's below, one more
        # cycle) are fresh when first used.
        settled = Signal()
        m.d.sync += settled.eq(self.start & elements_ok)

        # Token bucket constants (1/256 byte), so that the per-cycle update is one adder
        # and one comparator side by side, with the late ``issue_header`` only choosing.
        rate = self.rate_bytes_per_cycle
        # Wide enough for 2L' and for L' + rate (rate < 2**16), signed.
        bucket = signed(max((max_len << 8).bit_length() + 1, 17) + 1)
        length_q = Signal(bucket)     # L' = frame length · 256: the cap and the price
        pay_step = Signal(bucket, reset_less=True)     # rate − L'
        # credit above L' − rate saturates when not paying, above 2L' − rate when paying
        limit_idle = Signal(bucket, reset_less=True)
        limit_pay = Signal(bucket, reset_less=True)
        m.d.comb += length_q.eq(frame_len << 8)
        m.d.sync += [
            pay_step.eq(rate - length_q),
            limit_idle.eq(length_q - rate),
            limit_pay.eq((length_q << 1) - rate),
        ]
        return SimpleNamespace(frame_len=frame_len, n_beats_m1=n_beats_m1,
                               one_beat=one_beat, last_mask=last_mask,
                               settled=settled, rate=rate, bucket=bucket,
                               length_q=length_q, pay_step=pay_step, limit_idle=limit_idle,
                               limit_pay=limit_pay)

    def _checksum(self, m, *, frame_len, warming, issue_header, k):
        """The IPv4 checksum of the next frame, and the lengths it sums."""
        # IPv4 checksum (RFC 791) of the next frame: the template words and the total
        # length (a per-run sum) plus the identification, summed when the previous header
        # issues (or during the warm-up, for frame 0), folded the cycle after; a frame
        # with one payload beat leaves those two cycles before the next header.
        total_length = Signal(16)
        udp_length = Signal(16)
        m.d.comb += [total_length.eq(frame_len - 14), udp_length.eq(frame_len - 34)]
        csum_base = Signal(19, reset_less=True)
        csum_sum = Signal(20, reset_less=True)
        csum_fold = Signal(17)
        folded = Signal(16, reset_less=True)      # the checksum's complement
        m.d.sync += csum_base.eq(_ip_constant_sum(self.template) + total_length)
        with m.If(warming):
            m.d.sync += csum_sum.eq(csum_base)
        with m.Elif(issue_header):
            m.d.sync += csum_sum.eq(csum_base + (k + 1)[:16])
        m.d.comb += csum_fold.eq(csum_sum[:16] + csum_sum[16:])
        m.d.sync += folded.eq(csum_fold[:16] + csum_fold[16])    # end-around carry
        return total_length, udp_length, folded

    def _value_register(self, m, *, issue_payload, warming):
        """The value register: 521 bits, 80 new ones per step; returns it and its load (to the
        initial constant)."""
        # A step per payload beat issued, and per warm-up cycle (the seed goes in with
        # a third tap). Held at the initial constant while no run is under way and the
        # output stage reads no window (so it is loaded when a run begins): a
        # synchronous set/reset of its flip-flops, driven by two flip-flops.
        state = Signal(_STATE_BITS, reset_less=True)
        step = Signal()
        m.d.comb += step.eq(issue_payload | warming)
        seed_a = Cat(*[self.value_seed[_seed_taps(i)[0]] for i in range(_STEP_BITS)])
        seed_b = Cat(*[self.value_seed[_seed_taps(i)[1]] for i in range(_STEP_BITS)])
        new = Signal(_STEP_BITS)
        m.d.comb += new.eq(state[:_STEP_BITS] ^ state[_FEEDBACK_TAP:_FEEDBACK_TAP + _STEP_BITS]
                           ^ (warming.replicate(_STEP_BITS)
                              & (state[_WARMUP_TAP:_WARMUP_TAP + _STEP_BITS] ^ seed_a ^ seed_b)))
        load = Signal()
        with m.If(load):
            m.d.sync += state.eq(_initial_state())
        with m.Elif(step):
            m.d.sync += state.eq(Cat(state[_STEP_BITS:], new))
        return state, load

    def _header(self, *, total_length, d, udp_length):
        """The header beat: the template's constant bytes and the frame's own fields (d, registered
        at the issue)."""
        t = self.template
        hdr = [None] * HEADER_LEN

        def put(fld, byte_values):
            start, length = fld
            assert len(byte_values) == length
            hdr[start:start + length] = byte_values

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
        put(HDR.IP_CHECKSUM, _be(~d.folded, 2))   # inverted in the output stage's LUTs
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
        return header
