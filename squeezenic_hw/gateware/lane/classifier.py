"""Frame classifier: tags every beat of a lane's input with its frame's bypass reason.

The first beat of a frame is its whole 64-byte header (wire format section 2),
so every check of :func:`squeezenic_hw.spec.frames.classify_host_frame` (TX) and
:func:`~squeezenic_hw.spec.frames.classify_wire_frame` (RX) can be made from that
beat and OpenNIC's ``tuser_size``, before the payload arrives. The classifier
does exactly that and marks every beat of the frame with the result, so the
lane downstream decides at the header whether to process or bypass the frame.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    AxisBeat,
    Reason,
    axis_signature,
    field_be,
    field_le,
)
from squeezenic_hw.gateware.common.stream import Stager
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
)

__all__ = ["ClassifiedBeat", "FrameClassifier"]



class ClassifiedBeat(data.Struct):
    """One input beat with its frame's classification."""
    beat: AxisBeat        # the input beat, unchanged
    first: unsigned(1)    # first beat of a frame (the header beat)
    reason: Reason        # the frame's bypass reason, on every beat; NONE = processed
    keep: unsigned(16)    # TX with threshold built in: element e of this payload beat has
                          # abs(x) > the frame's scale (NaN never); 0 on header beats and
                          # without threshold; bits past the frame's end: don't care


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
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 0xFFFF:
        raise ValueError(f"port must be an int from 1 to 65535, got {port!r}")
    return lane, port, _codec_ids(codecs)


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

    Attributes
    ----------
    i : In(stream.Signature(AxisBeat))
    o : Out(stream.Signature(ClassifiedBeat))
    cfg_port : In(16), init ``port``
        The SqueezeNIC port compared at run time (a register of the OpenNIC
        plugin); left undriven it is the constant ``port``.
    cfg_enable : In(1), init 1
        0 matches no port: every frame passes through as ``other_port``.

    Notes
    -----
    Latency: ``LATENCY`` = 3 cycles from an accepted input beat to its output
    (stage 1: field compares and three partial sums of the IPv4 header words;
    stage 2: the checksum sum, the n·b product and the reasons before/after the
    checksum check; stage 3: checksum fold and compare, length compare, final
    reason). Throughput: one beat per cycle, back-to-back frames included.
    Backpressure: when ``o.valid & ~o.ready`` the whole pipeline holds
    (``i.ready = o.ready | ~o.valid``); nothing is dropped or reordered and
    bubbles inside the pipeline are squeezed out while the output waits.
    Resources: about three beats of registers (~1.9k flip-flops), one 16×6
    multiplier (RX; a shift on TX), a few hundred LUTs of compares.
    """

    LATENCY = 3

    def __init__(self, lane, *, port=DEFAULT_PORT, codecs=DEFAULT_CODECS):
        self.lane, self.port, self.codecs = _check_parameters(lane, port, codecs)
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(stream.Signature(ClassifiedBeat)),
            "cfg_port": In(16, init=self.port),
            "cfg_enable": In(1, init=1),
        })

    @property
    def latency(self):
        return self.LATENCY

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
                        m.d.comb += param_bad.eq(bad)
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
        enable = Signal()
        m.d.comb += [
            enable.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(enable),
        ]
        st = Stager(m, enable)

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
        valid1 = st.reg(self.i.valid, name="valid_s1")
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
        sparse1, sparse_bad1 = self._sparse_length(m, st, d, size)

        # ---- stage 2: checksum sum, n·b, the reasons either side of ip_checksum -----
        skip = Reason.NOT_ENCODED if self.lane == "tx" else Reason.ALREADY_ENCODED
        head = [Reason.SHORT_FRAME, Reason.NOT_IPV4, Reason.IP_OPTIONS, Reason.FRAGMENTED,
                Reason.NOT_UDP, Reason.OTHER_PORT]
        tail = [r for r in Reason if Reason.IP_CHECKSUM.value < r.value < Reason.LENGTH.value
                and r is not skip]
        valid2 = st.reg(valid1, name="valid_s2")
        first2 = st.reg(first1, name="first_s2")
        beat2 = st.reg(beat1, name="beat_s2")
        head2 = st.reg(self._first_failing(m, f1, head, "head"), name="head_s2")
        tail2 = st.reg(self._first_failing(m, f1, tail, "tail"), name="tail_s2")
        total2 = st.reg(psum1[0] + psum1[1] + psum1[2], name="csum_total")  # < 2**20
        nb2 = st.reg(n1 * bits1, name="nb")                                   # < 2**21
        sparse2 = st.reg(sparse1, name="sparse_s2")
        sparse_bad2 = st.reg(sparse_bad1, name="sparse_bad_s2")

        # ---- stage 3: fold and compare the checksum, length, final reason ------------
        b2 = AxisBeat(beat2)
        fold = Signal(17, name="csum_fold1")
        folded = Signal(16, name="csum_fold2")
        m.d.comb += [
            fold.eq(total2[:16] + total2[16:]),
            folded.eq(fold[:16] + fold[16]),   # end-around carry: fits 16 bits
        ]
        csum_bad = ~folded != field_be(b2.data, *HDR.IP_CHECKSUM)
        length_bad = Mux(sparse2, sparse_bad2, b2.size != HEADER_LEN + ((nb2 + 7) >> 3))
        reason = Signal(Reason, name="reason_s2")
        with m.If(head2 != Reason.NONE):
            m.d.comb += reason.eq(head2)
        with m.Elif(csum_bad):
            m.d.comb += reason.eq(Reason.IP_CHECKSUM)
        with m.Elif(tail2 != Reason.NONE):
            m.d.comb += reason.eq(tail2)
        with m.Elif(length_bad):
            m.d.comb += reason.eq(Reason.LENGTH)

        valid3 = st.reg(valid2, name="valid_s3")
        first3 = st.reg(first2, name="first_s3")
        beat3 = st.reg(beat2, name="beat_s3")
        # Loaded on a frame's first beat, held for the rest of the frame.
        reason3 = Signal(Reason, name="reason_s3")
        with m.If(enable & valid2 & first2):
            m.d.sync += reason3.eq(reason)

        m.d.comb += [
            self.o.valid.eq(valid3),
            self.o.payload.beat.eq(beat3),
            self.o.payload.first.eq(first3),
            self.o.payload.reason.eq(reason3),
        ]
        if self.lane == "tx" and THRESHOLD_ID in self.codecs:
            m.d.comb += self.o.payload.keep.eq(self._keep_mask(m, st, valid2, first2, b2))
        return m

    def _keep_mask(self, m, st, valid2, first2, b2):
        """Stage-3 register: which elements of a payload beat ``threshold`` keeps.

        ``abs(x) > scale`` in IEEE terms, on the bits: NaN x or NaN scale never
        keeps; a negative scale keeps every x but a zero when the scale is −0;
        otherwise the 31-bit magnitudes compare as unsigned integers.
        """
        scale = Signal(32, name="keep_scale")   # the frame's scale, from its header beat
        with m.If(st.enable & valid2 & first2):
            m.d.sync += scale.eq(field_le(b2.data, *HDR.SCALE))
        s_abs = scale[:31]
        s_nan = s_abs > 0x7F800000
        s_neg = scale[31]
        bits = []
        for e in range(16):
            x_abs = b2.data[32 * e:32 * e + 31]
            x_nan = x_abs > 0x7F800000
            above = Mux(s_neg, (x_abs != 0) | (s_abs != 0), x_abs > s_abs)
            bits.append(~s_nan & ~x_nan & above)
        return st.reg(Mux(first2, 0, Cat(*bits)), name="keep_s3")   # 0 on header beats

    def _sparse_length(self, m, st, d, size):
        """Stage-1 registers ``(sparse, length_bad)`` of an RX ``threshold`` frame, whose
        length depends on its layout: bitmap ``64 + ⌈n/8⌉ + 4k``, index list ``64 + 6k``."""
        if self.lane == "tx" or THRESHOLD_ID not in self.codecs:
            return Const(0, 1), Const(0, 1)
        x = Signal(17, name="sparse_payload")           # size − 64 (size ≥ 64 if it matters)
        rest = Signal(signed(18), name="sparse_rest")   # bytes left for values (bitmap)
        n = field_le(d, *HDR.N)
        m.d.comb += [x.eq(size - HEADER_LEN), rest.eq(x - ((n + 7) >> 3))]
        # x mod 3 from its base-4 digits (4 ≡ 1 mod 3): no divider
        digits = Signal(6, name="sparse_digits")
        m.d.comb += digits.eq(sum(x[2 * j:2 * j + 2] for j in range(9)))
        mod3 = Signal(2, name="sparse_mod3")
        with m.Switch(digits):
            for v in range(2**6):
                with m.Case(v):
                    m.d.comb += mod3.eq(v % 3)
        bitmap_ok = (rest >= 0) & (rest[:2] == 0)
        index_ok = (x[0] == 0) & (mod3 == 0)
        sparse = _byte(d, HDR.CODEC[0]) == THRESHOLD_ID
        bad = Mux(_byte(d, HDR.PARAM[0])[0], ~index_ok, ~bitmap_ok)
        return st.reg(sparse, name="sparse_s1"), st.reg(bad, name="sparse_bad_s1")

    @staticmethod
    def _first_failing(m, flags, order, name):
        """The first reason of ``order`` whose flag is set (``Reason.NONE`` if none)."""
        r = Signal(Reason, name=f"{name}_reason")
        for k, reason in enumerate(order):
            with (m.If if k == 0 else m.Elif)(flags[reason]):
                m.d.comb += r.eq(reason)
        return r
