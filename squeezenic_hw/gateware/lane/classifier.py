"""Frame classifier: tags every beat of a lane's input with its frame's bypass reason.

The first beat of a frame is its whole 64-byte header (wire format section 2),
so every check of :func:`squeezenic_hw.spec.frames.classify_host_frame` (TX) and
:func:`~squeezenic_hw.spec.frames.classify_wire_frame` (RX) can be made from that
beat and OpenNIC's ``tuser_size``, before the payload arrives. The classifier
does exactly that and marks every beat of the frame with the result, so the
lane downstream decides at the header whether to process or bypass the frame.
"""

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    AxisBeat,
    Reason,
    axis_signature,
    field_be,
    field_le,
)
from squeezenic_hw.gateware.common.stream import (
    LutramFifo,
    Stager,
    lutram_delay,
    split_like,
    stage_enable,
)
from squeezenic_hw.spec.codecs import (
    DEFAULT_CODECS,
    KNOWN_CODECS,
    THRESHOLD_ID,
    codec_info,
    resolve_codecs,
)
from squeezenic_hw.spec.header import (
    DEFAULT_PORT,
    ETHERTYPE_IPV4,
    HDR,
    HEADER_LEN,
    IPV4_VIHL,
    PROTO_UDP,
    VERSION,
    check_port,
)

__all__ = ["ClassifiedBeat", "FrameClassifier", "INPUT_QUEUE", "RxFrameInfo"]


class RxFrameInfo(data.Struct):
    """What an RX wire frame's header implies, computed by the classifier so that the RX
    controller does no arithmetic: valid on the first beat of a frame whose reason is
    ``NONE`` (other beats and frames: don't care); zero on TX."""
    width: unsigned(6)          # bits per code into the unpacker (1: threshold's bitmap)
    beats: unsigned(16)         # payload beats: ⌈n·width/512⌉; threshold ⌈(size − 64)/64⌉
    bits: unsigned(21)          # payload bits of the n codes: n·width
    sparse: unsigned(1)         # codec 7 (threshold)
    index: unsigned(1)          # threshold, index-list layout (param 1)
    k: unsigned(16)             # threshold: values kept
    layout_beats: unsigned(11)  # threshold: beats holding layout bytes, ⌈L/64⌉
    value_beat: unsigned(10)    # threshold: beat of the first value byte, ⌊L/64⌋
    start: unsigned(6)          # threshold: L mod 64 (L: layout bytes, ⌈n/8⌉ or 2k)
    last_byte: unsigned(6)      # threshold: (L − 1) mod 64, the last layout byte in its beat



class ClassifiedBeat(data.Struct):
    """One input beat with its frame's classification."""
    beat: AxisBeat        # the input beat, unchanged
    first: unsigned(1)    # first beat of a frame (the header beat)
    reason: Reason        # the frame's bypass reason, on every beat; NONE = processed
    bypass: unsigned(1)   # reason != NONE (a flag, so a controller need not compare)
    keep: unsigned(16)    # TX with threshold built in: element e of this payload beat has
                          # abs(x) > the frame's scale (NaN never); 0 on header beats and
                          # without threshold; bits past the frame's end: don't care
    zero_kept: unsigned(1)  # TX with threshold built in, on a header beat: abs(+0.0) > its
                            # scale, the keep bit of every element of a beat that stands in
                            # for one the frame lacks; other beats: don't care
    rx: RxFrameInfo       # RX: the frame's header-derived quantities (first beat only)


def _byte(value, index):
    return field_le(value, index, 1)


def _codec_ids(codecs):
    if isinstance(codecs, (str, bytes)):
        raise ValueError(f"codecs: expected an iterable of codec names or ids, "
                         f"got the single value {codecs!r}")
    try:
        ids = resolve_codecs(list(codecs))
    except TypeError:
        raise ValueError(f"codecs: expected an iterable of codec names or ids, "
                         f"got {codecs!r}") from None
    except ValueError as e:
        raise ValueError(f"codecs: {e}") from None
    return frozenset(ids) & KNOWN_CODECS


def _check_parameters(lane, port, codecs):
    if lane not in ("tx", "rx"):
        raise ValueError(f"lane must be 'tx' or 'rx', got {lane!r}")
    return lane, check_port(port), _codec_ids(codecs)


#: The ``depth`` the lanes build the classifier with, as their input queue: its checks'
#: five stages and room to spare at full rate.
INPUT_QUEUE = 16


class FrameClassifier(wiring.Component):
    """Classifies the frames of a TX or RX lane's input and tags each beat.

    Every input beat leaves unchanged in ``o.payload.beat``, in order, with
    ``first`` = 1 on the first beat of each frame and ``reason`` = the frame's
    bypass reason on every beat of the frame (``Reason.NONE`` when the lane
    processes it): exactly what
    :func:`~squeezenic_hw.spec.frames.classify_host_frame` (``lane="tx"``) or
    :func:`~squeezenic_hw.spec.frames.classify_wire_frame` (``lane="rx"``) return
    for the frame with ``tuser_size`` = the first beat's ``size``, checks in
    the same order, first failing one wins.

    The classifier **trusts tuser_size**: the frame length in the length checks
    (``short_frame``, ``ip_length``, ``udp_length``, ``length``) is the first
    beat's ``size``; the bytes that actually follow are not counted. It only
    also calls a frame ``short_frame`` when its first beat lacks byte 63
    (``keep[63]`` = 0, fewer than 64 bytes: no complete header), as the
    reference does for short byte strings. Frame boundaries come from
    ``last``; a frame may be a single beat.

    Parameters
    ----------
    lane : ``"tx"`` or ``"rx"``
        TX checks host frames (``encoded`` = 0, length 64 + 4n); RX checks wire
        frames (``encoded`` = 1, length 64 + ⌈n·b/8⌉).
    port : int
        SqueezeNIC UDP destination port, 1…65535.
    codecs : iterable of str or int
        Codec names/ids built into the lane (default: all, ids 0–6); other
        codecs bypass as ``codec``.
    depth : int or None
        With ``depth`` (8 or more), the classifier is also a queue of ``depth`` beats
        (the lanes' input buffer, :data:`INPUT_QUEUE`): each beat is written into a
        distributed-RAM FIFO as it is accepted, its tags into a narrow FIFO beside it
        when the checks are done, and ``o`` reads both. ``i.ready`` is then the queue's
        room (from its level register) and the checks never stall. ``None``
        (default): the beat rides through the stages in a delay line, as below.

    Attributes
    ----------
    i : In(stream.Signature(AxisBeat))
    o : Out(stream.Signature(ClassifiedBeat))
        On RX, ``o.payload.rx`` carries on each first beat the wire frame's
        :class:`RxFrameInfo` (code width, payload bits and beats, and the
        layout of a ``threshold`` frame), so the RX controller does no
        arithmetic; zero on TX.
    cfg_port : In(16), init ``port``
        The SqueezeNIC port compared at run time (a register of the OpenNIC
        plugin); left undriven it is the constant ``port``.
    cfg_enable : In(1), init 1
        0 matches no port: every frame passes through as ``other_port``.

    Notes
    -----
    Latency: ``LATENCY`` = 5 cycles from an accepted input beat to its output
    (stage 1: field compares and three partial sums of the IPv4 header words;
    stage 2: the checksum sum, the reasons before/after the checksum check and
    the n·b product's M register; stage 3: the checksum fold and n·b's P
    register; stage 4: the checksum and length compares, and on RX the
    :class:`RxFrameInfo` of the frame; stage 5: the final reason and the
    ``bypass`` flag). Each stage is an adder or a compare or a priority pick
    on registers. Throughput: one beat per cycle, back-to-back frames
    included. Backpressure: when ``o.valid & ~o.ready`` the whole pipeline
    holds (``i.ready = o.ready | ~o.valid``, one LUT from ``o.ready``);
    nothing is dropped or reordered and bubbles inside the pipeline are
    squeezed out while the output waits (with ``depth``: latency 7, the beats
    and the tags each in a queue with a registered read (distributed RAM, then a
    register), the tags' between stage 5 and ``o``, so that logic behind ``o``
    starts at flip-flops; backpressure fills the queues, then drops ``i.ready``).
    Only the valid bits and the frame-start flag are reset. Resources: a beat of
    registers, the fields stage 2 reads, and the beat's four further stages in distributed RAM
    (:func:`lutram_delay`), on RX one 16×6 and
    (with ``threshold``) one 16×16 multiplier in DSP slices, each with input,
    M and P registers; a few hundred LUTs of compares.
    """

    LATENCY = 5

    def __init__(self, lane, *, port=DEFAULT_PORT, codecs=DEFAULT_CODECS, depth=None):
        self.lane, self.port, self.codecs = _check_parameters(lane, port, codecs)
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 8):
            raise ValueError(f"depth must be None or an int of at least 8, got {depth!r}")
        self.depth = depth
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(stream.Signature(ClassifiedBeat)),
            "cfg_port": In(16, init=self.port),
            "cfg_enable": In(1, init=1),
        })

    @property
    def latency(self):
        return self.LATENCY if self.depth is None else self.LATENCY + 2

    def _codec_fields(self, m, codec, param):
        """``(codec_bad, param_bad, bits)`` for the header's codec byte and parameter."""
        codec_bad = Signal(name="codec_bad")
        param_bad = Signal(name="param_bad")
        bits = Signal(6, name="bits")
        m.d.comb += codec_bad.eq(1)
        with m.Switch(codec):
            for cid in sorted(self.codecs):
                info = codec_info(cid)
                with m.Case(cid):
                    m.d.comb += codec_bad.eq(0)
                    if info.variable:
                        # threshold: the layout is chosen by the encoder, so host frames
                        # say 0 and wire frames 0 (bitmap) or 1 (index list)
                        bad = param != 0 if self.lane == "tx" else param > 1
                        # RX: its bitmap goes through the unpacker as 1-bit codes
                        m.d.comb += [param_bad.eq(bad), bits.eq(1)]
                    elif info.param_range is None:
                        m.d.comb += [param_bad.eq(param != 0), bits.eq(info.bits)]
                    else:
                        lo, hi = info.param_range
                        # param is only used as a width when it is in range
                        m.d.comb += [param_bad.eq((param < lo) | (param > hi)),
                                     bits.eq(param[:6])]
        if self.lane == "tx":
            # host frames carry fp32 values: 64 + ⌈32n/8⌉ = 64 + 4n
            bits = 32
        return codec_bad, param_bad, bits

    def elaborate(self, platform):
        m = Module()
        enable, queue = self._input(m)
        # Valid bits (and the frame-start flag) are reset; everything else is data.
        st = Stager(m, enable, reset_less=True)

        # The beat after a ``last`` beat starts a frame.
        start = Signal(init=1)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += start.eq(self.i.payload.last)

        beat = self.i.payload
        d, size = beat.data, beat.size
        enc_flag = _byte(d, HDR.FLAGS[0])[0]
        codec_bad, param_bad, bits = self._codec_fields(
            m, _byte(d, HDR.CODEC[0]), _byte(d, HDR.PARAM[0]))
        ip_words = [field_be(d, 14 + 2 * j, 2) for j in range(10)]
        del ip_words[(HDR.IP_CHECKSUM[0] - 14) // 2]

        # ---- stage 1: compares of header fields, partial checksum sums --------------
        valid1 = st.reg(self.i.valid & self.i.ready, name="valid_s1", reset_less=False)
        first1 = st.reg(start, name="first_s1")
        beat1 = st.reg(beat.as_value(), name="beat_s1")
        f = {
            Reason.SHORT_FRAME: (size < HEADER_LEN) | ~beat.keep[HEADER_LEN - 1],
            Reason.NOT_IPV4: field_be(d, *HDR.ETHERTYPE) != ETHERTYPE_IPV4,
            Reason.IP_OPTIONS: _byte(d, HDR.IP_VIHL[0]) != IPV4_VIHL,
            Reason.FRAGMENTED: field_be(d, *HDR.IP_FRAG)[:14] != 0,  # DF (bit 14) is fine
            Reason.NOT_UDP: _byte(d, HDR.IP_PROTO[0]) != PROTO_UDP,
            Reason.OTHER_PORT: (field_be(d, *HDR.UDP_DST) != self.cfg_port) | ~self.cfg_enable,
            Reason.IP_LENGTH: field_be(d, *HDR.IP_TOTAL_LENGTH) != (size - 14)[:16],
            Reason.UDP_LENGTH: field_be(d, *HDR.UDP_LENGTH) != (size - 34)[:16],
            Reason.VERSION: _byte(d, HDR.VERSION[0]) != VERSION,
            Reason.RESERVED_FLAGS: _byte(d, HDR.FLAGS[0])[3:] != 0,
            Reason.ALREADY_ENCODED: enc_flag,
            Reason.NOT_ENCODED: ~enc_flag,
            Reason.CODEC: codec_bad,
            Reason.PARAM: param_bad,
            Reason.ZERO_N: field_le(d, *HDR.N) == 0,
        }
        f1 = {r: st.reg(v, name=f"{r.name.lower()}_s1") for r, v in f.items()}
        # 9 words (checksum field excluded) in three 3-word sums of 18 bits
        psum1 = [st.reg(ip_words[k] + ip_words[k + 1] + ip_words[k + 2], name=f"psum{k // 3}")
                 for k in (0, 3, 6)]
        n1 = st.reg(field_le(d, *HDR.N), name="n_s1")
        bits1 = st.reg(bits, name="bits_s1") if self.lane == "rx" else bits
        # payload bytes, size − 64 (size ≥ 64 wherever it matters: else short_frame)
        x1 = st.reg((size - HEADER_LEN)[:16], name="payload_bytes_s1")

        # ---- stage 2: checksum sum, n·b, the reasons either side of ip_checksum -----
        skip = Reason.NOT_ENCODED if self.lane == "tx" else Reason.ALREADY_ENCODED
        head = [Reason.SHORT_FRAME, Reason.NOT_IPV4, Reason.IP_OPTIONS, Reason.FRAGMENTED,
                Reason.NOT_UDP, Reason.OTHER_PORT]
        tail = [r for r in Reason if Reason.IP_CHECKSUM.value < r.value < Reason.LENGTH.value
                and r is not skip]
        valid2 = st.reg(valid1, name="valid_s2", reset_less=False)
        first2 = st.reg(first1, name="first_s2")
        beat2 = st.reg(beat1, name="beat_s2")
        head2 = st.reg(self._first_failing(m, f1, head, "head"), name="head_s2")
        tail2 = st.reg(self._first_failing(m, f1, tail, "tail"), name="tail_s2")
        total2 = st.reg(psum1[0] + psum1[1] + psum1[2], name="csum_total")  # < 2**20
        # n·b: a registered multiply (input, M and P registers: stages 1, 2, 3)
        nb2 = st.reg(n1 * bits1, name="nb")                                   # < 2**22
        csum_n = ~field_be(AxisBeat(beat1).data, *HDR.IP_CHECKSUM)
        csum_n2 = st.reg(csum_n, name="csum_n")
        csum_n_carry2 = st.reg(csum_n + 0xFFFF, name="csum_n_carry")
        csum_n_nz2 = st.reg(csum_n != 0, name="csum_n_nz")
        x2 = st.reg(x1, name="payload_bytes_s2")

        # ---- stage 3: the checksum's fold; n·b's P register ---------------------------
        valid3 = st.reg(valid2, name="valid_s3", reset_less=False)
        first3 = st.reg(first2, name="first_s3")
        # the beat rides on to the output in distributed RAM, from stage 1 (the bits
        # stage 2's logic reads stay in ``beat2``; the others are not registered again)
        beat5 = lutram_delay(m, st, beat1, 4, name="beat_delay") if queue is None else None
        fold3 = st.reg(total2[:16] + total2[16:], name="csum_fold")    # ≤ 0x1000E
        csum_n3 = st.reg(csum_n2, name="csum_n_s3")
        csum_n_carry3 = st.reg(csum_n_carry2, name="csum_n_carry_s3")
        csum_n_nz3 = st.reg(csum_n_nz2, name="csum_n_nz_s3")
        head3 = st.reg(head2, name="head_s3")
        tail3 = st.reg(tail2, name="tail_s3")
        nb3 = st.reg(nb2, name="nb_s3")
        x3 = st.reg(x2, name="payload_bytes_s3")
        x_m1_3 = st.reg(x2 - 1, name="payload_bytes_m1_s3")   # x = 0: never matches
        x_nz3 = st.reg(x2 != 0, name="payload_bytes_nz_s3")
        sparse = self._sparse_stages(m, st, d, size, x1, x2)

        # ---- stage 4: the checksum and length compares ----------------------------------
        valid4 = st.reg(valid3, name="valid_s4", reset_less=False)
        first4 = st.reg(first3, name="first_s4")
        # The one's-complement sum is fold[:16] + fold[16] (no carry out); it equals
        # N = ~checksum when fold = N, or when fold = N + 0xFFFF (an end-around carry of
        # 1, N ≠ 0): two compares instead of a second adder.
        csum_bad4 = st.reg(~((fold3 == csum_n3) | ((fold3 == csum_n_carry3) & csum_n_nz3)),
                           name="csum_bad_s4")
        # 64 + ⌈n·b/8⌉ = size, i.e. ⌈n·b/8⌉ = x: q = ⌊n·b/8⌋ is x, or x − 1 with a remainder
        q, rem = nb3[3:], nb3[:3] != 0
        dense_bad = ~(((q == x3) & ~rem) | ((q == x_m1_3) & x_nz3 & rem))
        length_bad = Mux(sparse["sparse3"], sparse["bad3"], dense_bad) \
            if sparse else dense_bad
        length_bad4 = st.reg(length_bad, name="length_bad_s4")
        head4 = st.reg(head3, name="head_s4")
        tail4 = st.reg(tail3, name="tail_s4")
        head_any4 = st.reg(head3 != Reason.NONE, name="head_any_s4")
        tail_any4 = st.reg(tail3 != Reason.NONE, name="tail_any_s4")

        # ---- stage 5: the final reason ----------------------------------------------------
        reason = Signal(Reason, name="reason")
        with m.If(head_any4):
            m.d.comb += reason.eq(head4)
        with m.Elif(csum_bad4):
            m.d.comb += reason.eq(Reason.IP_CHECKSUM)
        with m.Elif(tail_any4):
            m.d.comb += reason.eq(tail4)
        with m.Elif(length_bad4):
            m.d.comb += reason.eq(Reason.LENGTH)
        valid5 = st.reg(valid4, name="valid_s5", reset_less=False)
        first5 = st.reg(first4, name="first_s5")
        # Loaded on a frame's first beat, held for the rest of the frame.
        reason5 = Signal(Reason, name="reason_s5", reset_less=True)
        bypass5 = Signal(name="bypass_s5", reset_less=True)
        with m.If(enable & valid4 & first4):
            m.d.sync += [reason5.eq(reason), bypass5.eq(reason != Reason.NONE)]

        tags = {"first": first5, "reason": reason5, "bypass": bypass5}
        if self.lane == "rx":
            info4 = self._rx_info(m, st, nb3, bits1, sparse)
            tags["rx"] = st.reg(info4, name="rx_info_s5")
        if self.lane == "tx" and THRESHOLD_ID in self.codecs:
            keep4, zero_kept4 = self._keep_mask(m, st, valid2, first2, AxisBeat(beat2))
            tags["keep"] = st.reg(keep4, name="keep_s5")
            tags["zero_kept"] = st.reg(zero_kept4, name="zero_kept_s5")
        if queue is None:
            m.d.comb += [self.o.valid.eq(valid5), self.o.payload.beat.eq(beat5)]
            m.d.comb += [getattr(self.o.payload, name).eq(v) for name, v in tags.items()]
            return m
        self._tag_queue(m, tags=tags, valid5=valid5, queue=queue)
        return m

    def _input(self, m):
        """The input: straight into stage 1, or into a queue from which the beats leave as the
        output takes them (the checks never stall); returns stage 1's enable and the queue (or
        None)."""
        enable = stage_enable()
        queue = None
        if self.depth is None:
            m.d.comb += [
                enable.eq(~self.o.valid | self.o.ready),
                self.i.ready.eq(enable),
            ]
        else:
            # the beats wait in a queue from the input on; the checks never stall
            m.submodules.beat_queue = queue = LutramFifo(width=len(self.i.payload.as_value()),
                                                            depth=self.depth)
            m.d.comb += [
                enable.eq(1),
                self.i.ready.eq(queue.w_rdy),
                queue.w_en.eq(self.i.valid),
                queue.w_data.eq(self.i.payload),
            ]
        return enable, queue

    def _tag_queue(self, m, *, tags, valid5, queue):
        """The queued output: the tags into a queue of their own as they come; a beat leaves the
        beat queue with its tags."""
        # The tags into a queue of their own as they come; a beat leaves with its tags
        # (the tag queue never holds more than the beat queue).
        packed = Cat(*tags.values())
        m.submodules.tag_queue = tag_queue = LutramFifo(width=len(packed), depth=self.depth)
        take = self.o.valid & self.o.ready
        m.d.comb += [
            tag_queue.w_en.eq(valid5),
            tag_queue.w_data.eq(packed),
            self.o.valid.eq(tag_queue.r_rdy),
            self.o.payload.beat.eq(queue.r_data),
            queue.r_en.eq(take),
            tag_queue.r_en.eq(take),
        ]
        for name, value in zip(tags, split_like(tag_queue.r_data, list(tags.values())),
                               strict=True):
            m.d.comb += Value.cast(getattr(self.o.payload, name)).eq(value)

    def _rx_info(self, m, st, nb3, bits1, sparse):
        """Stage-4 register: the :class:`RxFrameInfo` of a wire frame, from stage-3
        registers (an adder and a mux each)."""
        info = Signal(RxFrameInfo, name="rx_info")
        width3 = st.delay(bits1, 2, name="width")
        m.d.comb += [
            info.width.eq(width3),
            info.beats.eq((nb3 + 511) >> 9),
            info.bits.eq(nb3),
        ]
        if sparse:
            k_index = sparse["k_index3"]
            layout = Signal(16, name="layout_bytes")
            m.d.comb += layout.eq(Mux(sparse["index3"], k_index << 1, sparse["bitmap3"]))
            with m.If(sparse["sparse3"]):
                m.d.comb += info.beats.eq(sparse["beats3"])
            m.d.comb += [
                info.sparse.eq(sparse["sparse3"]),
                info.index.eq(sparse["index3"]),
                info.k.eq(Mux(sparse["index3"], k_index, sparse["k_bitmap3"])),
                info.layout_beats.eq((layout + 63) >> 6),
                info.value_beat.eq(layout >> 6),
                info.start.eq(layout[:6]),
                info.last_byte.eq((layout - 1)[:6]),
            ]
        return st.reg(info, name="rx_info_s4")

    def _keep_mask(self, m, st, valid2, first2, b2):
        """Stage-4 registers: which elements of a payload beat ``threshold`` keeps, and
        whether the frame's scale keeps +0.0.

        :func:`_keeps` of each element against the frame's scale (held from its header),
        and of +0.0 against the header beat's own scale. Compared on stage 2's beat (a
        flip-flop: the beat's later copies become shift registers, whose clock-to-out is
        slow) into stage 3, then delayed a stage.
        """
        hdr_scale = field_le(b2.data, *HDR.SCALE)
        scale = Signal(32, name="keep_scale", reset_less=True)   # the frame's, from its header
        with m.If(st.enable & valid2 & first2):
            m.d.sync += scale.eq(hdr_scale)
        bits = [_keeps(b2.data[32 * e:32 * e + 31], scale) for e in range(16)]
        keep3 = st.reg(Mux(first2, 0, Cat(*bits)), name="keep_s3")   # 0 on header beats
        zero_kept3 = st.reg(_keeps(Const(0, 31), hdr_scale), name="zero_kept_s3")
        return st.reg(keep3, name="keep_s4"), st.reg(zero_kept3, name="zero_kept_s4")

    def _sparse_stages(self, m, st, d, size, x1, x2):
        """RX with ``threshold``: stage-3 registers of a threshold frame's length check
        and layout (``{}`` otherwise). Its length depends on the layout: bitmap
        ``64 + ⌈n/8⌉ + 4k``, index list ``64 + 6k``."""
        if self.lane == "tx" or THRESHOLD_ID not in self.codecs:
            return {}
        n = field_le(d, *HDR.N)
        threshold = _byte(d, HDR.CODEC[0]) == THRESHOLD_ID
        sparse1 = st.reg(threshold, name="sparse_s1")
        # param bit 0 is the layout of a threshold frame only: the other codecs' odd
        # parameters are code widths
        index1 = st.reg(_byte(d, HDR.PARAM[0])[0] & threshold, name="index_s1")
        bitmap1 = st.reg((n + 7) >> 3, name="bitmap_bytes_s1")     # ⌈n/8⌉
        # x / 6 for x a multiple of 6 below 2**16: x·43691 / 2**18 is exact; a registered
        # multiply (input, M and P registers: stages 1, 2, 3)
        kq2 = st.reg(x1 * 43691, name="k_index_product")

        # stage 2: bytes left for values (bitmap layout), x mod 3 (index layout)
        rest = Signal(signed(18), name="sparse_rest")
        m.d.comb += rest.eq(x1 - bitmap1)
        mod3 = Signal(2, name="sparse_mod3")
        m.d.comb += mod3.eq(_mod3(m, x1))
        bitmap_ok = (rest >= 0) & (rest[:2] == 0)
        index_ok = (x1[0] == 0) & (mod3 == 0)
        bad2 = st.reg(Mux(index1, ~index_ok, ~bitmap_ok), name="sparse_bad_s2")
        sparse2 = st.reg(sparse1, name="sparse_s2")
        index2 = st.reg(index1, name="index_s2")
        bitmap2 = st.reg(bitmap1, name="bitmap_bytes_s2")
        k_bitmap2 = st.reg(rest[2:], name="k_bitmap_s2")               # (x − ⌈n/8⌉) / 4

        return {
            "sparse3": st.reg(sparse2, name="sparse_s3"),
            "index3": st.reg(index2, name="index_s3"),
            "bad3": st.reg(bad2, name="sparse_bad_s3"),
            "bitmap3": st.reg(bitmap2, name="bitmap_bytes_s3"),
            "k_bitmap3": st.reg(k_bitmap2, name="k_bitmap_s3"),
            "k_index3": st.reg(kq2, name="k_index_product_s3")[18:34],
            "beats3": st.reg((x2 + 63) >> 6, name="sparse_beats_s3"),  # ⌈x/64⌉
        }

    @staticmethod
    def _first_failing(m, flags, order, name):
        """The first reason of ``order`` whose flag is set (``Reason.NONE`` if none)."""
        r = Signal(Reason, name=f"{name}_reason")
        for k, reason in enumerate(order):
            with (m.If if k == 0 else m.Elif)(flags[reason]):
                m.d.comb += r.eq(reason)
        return r


def _keeps(x_abs, scale):
    """``abs(x) > scale`` in IEEE terms, on the bits of ``abs(x)`` (31) and ``scale`` (32):
    NaN x or NaN scale never keeps; a negative scale keeps every x but a zero when the
    scale is −0; otherwise the 31-bit magnitudes compare as unsigned integers."""
    s_abs, s_neg = scale[:31], scale[31]
    s_nan = s_abs > 0x7F800000
    x_nan = x_abs > 0x7F800000
    above = Mux(s_neg, (x_abs != 0) | (s_abs != 0), x_abs > s_abs)
    return ~s_nan & ~x_nan & above


def _mod3(m, x):
    """``x mod 3`` in two LUT levels: each 6-bit chunk's residue from a table, then the
    residues' sum mod 3 from another (64 ≡ 1 mod 3)."""
    chunks = [x[k:k + 6] for k in range(0, len(x), 6)]
    residues = []
    for j, c in enumerate(chunks):
        r = Signal(2, name=f"mod3_chunk{j}")
        with m.Switch(c):
            for v in range(2 ** len(c)):
                with m.Case(v):
                    m.d.comb += r.eq(v % 3)
        residues.append(r)
    out = Signal(2, name="mod3")
    joined = Cat(*residues)
    with m.Switch(joined):
        for v in range(2 ** len(joined)):
            with m.Case(v):
                m.d.comb += out.eq(sum((v >> (2 * j)) & 3 for j in range(len(residues))) % 3)
    return out
