# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`.

Frames come from :mod:`squeezenic_hw.spec.frames` (valid host/wire frames of every
codec and parameter, then mutated to hit every bypass reason of each lane, plus
ARP/IPv6/VLAN frames, frames shorter than 64 bytes and random garbage). They
go through the classifier as AXI-Stream beats (``sim.axis.frame_beats``) under
random idle and backpressure; every output beat must be the input beat
unchanged, ``first`` must mark the header beats, and ``reason`` must be, on
every beat of a frame, what ``classify_host_frame`` (TX) /
``classify_wire_frame`` (RX) return with ``tuser_size = len(frame)``
(``bypass`` = it is not ``NONE``).
"""

import random
import struct
from dataclasses import replace

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat, Reason, reason_of
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat, FrameClassifier
from squeezenic_hw.sim.axis import AxisFrame, frame_beats
from squeezenic_hw.sim.streams import run_stream
from squeezenic_hw.spec import frames as F
from squeezenic_hw.spec.codecs import CODECS, codec_info, payload_bytes, resolve_codecs

from support.shared_duts import shared
from support.unused import rejected

STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
_BEAT_BITS = data.Layout.cast(AxisBeat).size
_LANE_REASONS = {"tx": F.TX_REASONS, "rx": F.RX_REASONS}


# --------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------

def _params(info):
    if info.param_range is None:
        return [0]
    lo, hi = info.param_range
    return list(range(lo, hi + 1))


def _random_header(rng, **fields):
    """A header with random addresses, IP fields and SqueezeNIC fields."""
    h = F.Header(
        dst_mac=rng.randbytes(6), src_mac=rng.randbytes(6), ip_tos=rng.randrange(256),
        ip_id=rng.randrange(2**16), ip_frag=rng.choice([0, 0x4000]),
        ttl=rng.randrange(256), src_ip=rng.randbytes(4), dst_ip=rng.randbytes(4),
        src_port=rng.randrange(2**16), scale_bits=rng.randrange(2**32),
        aux_bits=rng.randrange(2**32), seed=rng.randrange(2**32),
        offset=rng.randrange(2**32), flags=rng.randrange(8) & ~F.FLAG_ENCODED)
    return replace(h, **fields)


def _frame(lane, h, rng, n=None):
    """A valid frame of ``lane`` (host frame for TX, wire frame for RX) with ``h``'s fields."""
    n = rng.randrange(1, 40) if n is None else n
    if lane == "tx":
        values = np.frombuffer(rng.randbytes(4 * n), dtype=np.float32)
        return F.build_host_frame(replace(h, flags=h.flags & ~F.FLAG_ENCODED), values)
    h = replace(h, flags=h.flags | F.FLAG_ENCODED, n=n)
    return F.build_wire_frame(h, rng.randbytes(payload_bytes(h.codec, h.param, n)))


def valid_frames(lane, rng, port=F.DEFAULT_PORT):
    """Valid frames of every codec and every parameter, random fields and lengths."""
    out = []
    for info in CODECS.values():
        for param in _params(info):
            h = _random_header(rng, codec=info.id, param=param, dst_port=port)
            out.append(_frame(lane, h, rng))
    return out


def _fix_checksum(frame):
    b = bytearray(frame)
    b[24:26] = struct.pack("!H", F.ipv4_checksum(b[14:34]))
    return bytes(b)


def _poke(frame, at, value, fix=True):
    """``frame`` with bytes ``value`` written at ``at`` (IPv4 checksum recomputed if ``fix``)."""
    b = bytearray(frame)
    b[at:at + len(value)] = value
    return _fix_checksum(b) if fix else bytes(b)


def _ip_words_sum(header):
    """Integer sum of the IPv4 header words of ``header`` (bytes 14-33), checksum excluded."""
    words = struct.unpack("!10H", header[14:34])
    return sum(words) - words[5]


def _fold(total):
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def checksum_edge_frames(lane, rng, port):
    """Valid frames at the edges of the checksum fold, and the same with near-miss checksums.

    * the words fold to 0xFFFF: checksum 0x0000 (and 0xFFFF, its other
      one's-complement spelling, is wrong);
    * the sum is (k+1)·2**16 − 1, k ≥ 1: the first fold gives 0xFFFF + k and
      carries out again, checksum ~k (and ~(k−1), a single fold, is wrong).
    """
    while True:
        frame = _frame(lane, _random_header(rng, codec=0, ip_id=0, dst_port=port), rng, n=3)
        rest = _ip_words_sum(frame)
        if rest >= 2**16:
            break
    zero = _poke(frame, 18, struct.pack("!H", 0xFFFF - _fold(rest)))
    target = -(-(rest + 1) // 2**16) * 2**16 - 1
    carry = _poke(frame, 18, struct.pack("!H", target - rest))
    k = target >> 16
    assert F.ipv4_checksum(zero[14:34]) == 0 and F.ipv4_checksum(carry[14:34]) == ~k & 0xFFFF
    return [zero, _poke(zero, 24, b"\xff\xff", fix=False),
            carry, _poke(carry, 24, struct.pack("!H", ~(k - 1) & 0xFFFF), fix=False)]


def bypass_frames(lane, rng, port=F.DEFAULT_PORT):
    """Frames that hit every bypass reason of ``lane`` (and some that just pass)."""
    other = "rx" if lane == "tx" else "tx"

    def base(**fields):
        fields.setdefault("codec", rng.choice([0, 1, 2, 5, 6]))
        fields.setdefault("dst_port", port)
        return _frame(lane, _random_header(rng, **fields), rng)

    out = []
    # short_frame: truncated headers, tiny garbage, a header with nothing after 63 bytes
    out += [base()[:k] for k in (1, 14, 42, 60, 63)]
    out += [rng.randbytes(rng.randrange(1, 64)) for _ in range(4)]
    # not_ipv4: ARP (60 bytes is short; padded to 64 it is not_ipv4), IPv6, VLAN
    arp = bytes(6 * [0xFF]) + rng.randbytes(6) + b"\x08\x06" + rng.randbytes(28)
    out += [arp, arp + bytes(18), arp + bytes(22)]
    ipv6 = rng.randbytes(12) + b"\x86\xdd" + rng.randbytes(86)
    out += [ipv6, _poke(base(), 12, b"\x81\x00", fix=False), _poke(base(), 12, b"\x08\x01")]
    # ip_options: IHL 6, version 6
    out += [_poke(base(), 14, b"\x46"), _poke(base(), 14, b"\x65")]
    # fragmented: MF, offset; DF alone and no flags are fine
    out += [base(ip_frag=0x2000), base(ip_frag=0x0001), base(ip_frag=0x5FFF),
            base(ip_frag=0x8000), base(ip_frag=0x4000), base(ip_frag=0)]
    # not_udp
    out += [base(protocol=6), base(protocol=1), base(protocol=0x91)]
    # other_port: destination differs (source port is not checked)
    out += [base(dst_port=port ^ 1), base(dst_port=port ^ 0x8000), base(src_port=port ^ 7)]
    # ip_checksum: wrong by one, and the 0x0000 / 0xFFFF pair
    bad = base()
    out += [_poke(bad, 25, bytes([bad[25] ^ 1]), fix=False),
            _poke(bad, 22, bytes([bad[22] ^ 0x80]), fix=False)]
    out += checksum_edge_frames(lane, rng, port)
    # ip_length / udp_length
    f = base()
    out += [_poke(f, 16, struct.pack("!H", len(f) - 13)),
            _poke(f, 16, struct.pack("!H", len(f) - 14 + 0x100)),
            _poke(f, 38, struct.pack("!H", len(f) - 35)),
            _poke(f, 38, struct.pack("!H", 0))]
    # version, reserved flags, encoded flag of the other lane
    out += [base(version=0), base(version=2), base(version=0x81)]
    f = base()
    out += [_poke(f, 45, bytes([(f[45] & 7) | (1 << k)])) for k in range(3, 8)]
    out += [_frame(other, _random_header(rng, dst_port=port), rng)]
    # codec: threshold (7) and unknown ids
    out += [_poke(base(codec=0), 43, bytes([c])) for c in (7, 8, 0x80, 0xFF)]
    # param: out of range for fixed/qsgd, non-zero for the others
    for codec, param in ((3, 0), (3, 1), (4, 17), (4, 0xFF), (0, 1), (5, 2), (6, 16)):
        out.append(_poke(base(codec=0), 43, bytes([codec, param])))
    # zero_n
    if lane == "tx":
        out.append(F.build_host_frame(_random_header(rng, dst_port=port), []))
    else:
        out.append(F.build_wire_frame(_random_header(
            rng, dst_port=port, flags=F.FLAG_ENCODED, n=0), b""))
    out.append(_poke(base(), 46, b"\0\0"))
    # length: n one off, a byte more or less, and n that wraps 64 + ⌈n·b/8⌉ past 2**16
    f = base(codec=0)
    n = struct.unpack("<H", f[46:48])[0]
    out += [_poke(f, 46, struct.pack("<H", n + 1)), _poke(f, 46, struct.pack("<H", n - 1))
            if n > 1 else f, _poke(f, 46, struct.pack("<H", n + 16384))]
    out += [F.build_wire_frame(F.parse(f), f[64:] + b"\0") if lane == "tx" else
            F.build_wire_frame(replace(F.parse(f), n=n), f[64:-1])]
    f16 = base(codec=1)
    n16 = struct.unpack("<H", f16[46:48])[0]
    if lane == "rx":
        out.append(_poke(f16, 46, struct.pack("<H", n16 + 32768)))
        # fixed with b = 5: ⌈n·5/8⌉ rounds up, a byte too many or too few is wrong
        h = _random_header(rng, dst_port=port, codec=3, param=5, flags=F.FLAG_ENCODED, n=9)
        out += [F.build_wire_frame(h, rng.randbytes(k)) for k in (5, 6, 7)]
    # a single-beat 64-byte frame with n = 1 (length)
    out.append(F.build_wire_frame(replace(F.parse(base()), n=1), b""))
    return out


def garbage_frames(lane, rng, count, port=F.DEFAULT_PORT):
    """Random bytes, and valid frames with random header bytes changed."""
    out = [rng.randbytes(rng.randrange(1, 200)) for _ in range(count)]
    for _ in range(count):
        codec = rng.randrange(7)
        param = rng.randrange(2, 17) if codec in (3, 4) else 0
        f = bytearray(_frame(lane, _random_header(rng, codec=codec, param=param,
                                                  dst_port=port), rng))
        for _ in range(rng.randrange(1, 4)):
            f[rng.randrange(64)] = rng.randrange(256)
        out.append(_fix_checksum(f) if rng.random() < 0.7 else bytes(f))
    return out


# --------------------------------------------------------------------------
# Driving the classifier
# --------------------------------------------------------------------------

def _expected_reason(lane, frame, port, codecs):
    classify = F.classify_host_frame if lane == "tx" else F.classify_wire_frame
    _, reason = classify(frame, port=port, codecs_built_in=resolve_codecs(codecs),
                         tuser_size=len(frame))
    return reason


def check_classifier(lane, frames, *, port=F.DEFAULT_PORT, codecs=F.DEFAULT_CODECS,
                     idle=0.0, backpressure=0.0, seed=0, depth=None):
    """Run the classifier on ``frames`` and compare beat for beat with the reference.

    ``frames``: ``bytes`` (``tuser_size`` = their length) or ``AxisFrame`` with
    ``size`` set to a ``tuser_size`` that the bytes do not agree with; the
    classifier trusts ``tuser_size``, so the reference for those is the frame of
    ``size`` bytes with the same header.
    """
    rng = random.Random(seed)
    dut = shared(FrameClassifier, lane, port=port, codecs=codecs, depth=depth)
    beats, expected, reasons = [], [], []
    for k, frame in enumerate(frames):
        if isinstance(frame, AxisFrame):
            assert len(frame.data) >= F.HEADER_LEN
            trusted = (frame.data + bytes(frame.size))[:frame.size]
            reason = _expected_reason(lane, trusted, port, codecs)
        else:
            frame = AxisFrame(frame)
            reason = _expected_reason(lane, frame.data, port, codecs)
        reasons.append(reason)
        frame.src, frame.dst = rng.randrange(2**16), rng.randrange(2**16)
        for b, word in enumerate(frame_beats(frame)):
            beats.append(word)
            expected.append((word, int(b == 0), reason_of(reason), k))
    run = run_stream(dut, beats, idle=idle, backpressure=backpressure, seed=seed)
    assert len(run.outputs) == len(beats)
    problems = []
    for out, (word, first, reason, k) in zip(run.outputs, expected, strict=True):
        got = data.Const(ClassifiedBeat, out)
        if out & ((1 << _BEAT_BITS) - 1) != word:
            problems.append(f"frame {k}: beat changed")
        if int(got.bypass) != (reason != Reason.NONE):
            problems.append(f"frame {k}: bypass {int(got.bypass)} with reason {reason}")
        if int(got.first) != first or got.reason != reason:
            head = frames[k].data if isinstance(frames[k], AxisFrame) else frames[k]
            problems.append(f"frame {k} ({len(head)} bytes, header "
                            f"{head[:64].hex()}): first/reason {int(got.first)}/"
                            f"{got.reason}, expected {first}/{reason}")
    assert not problems, f"{len(problems)} mismatches; first:\n  " + "\n  ".join(problems[:8])
    return run, dut, len(beats), reasons


def _covered(lane, reasons):
    missing = set(_LANE_REASONS[lane]) - set(reasons)
    assert not missing, f"no test frame for {sorted(r.value for r in missing)}"
    assert None in reasons


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [None, 8])
@pytest.mark.parametrize("lane", ["tx", "rx"])
@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_all_reasons_random_stalls(lane, idle, backpressure, depth):
    """Every reason, under random stalls; with ``depth``, as the queue the lanes build."""
    seed = int(idle * 10) * 7 + int(backpressure * 10) + (100 if lane == "rx" else 0)
    rng = random.Random(seed)
    frames = valid_frames(lane, rng) + bypass_frames(lane, rng) + garbage_frames(lane, rng, 12)
    rng.shuffle(frames)
    _, _, _, reasons = check_classifier(lane, frames, idle=idle, backpressure=backpressure,
                                        seed=seed, depth=depth)
    _covered(lane, reasons)


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_header_fuzz(lane):
    """Valid frames with random header bytes changed (checksum mostly fixed up)."""
    seed = 41 if lane == "tx" else 42
    rng = random.Random(seed)
    frames = garbage_frames(lane, rng, 80)
    check_classifier(lane, frames, idle=0.3, backpressure=0.3, seed=seed)


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_trusts_tuser_size(lane):
    """With ``tuser_size`` ≠ the bytes, the reason is that of a frame of ``tuser_size`` bytes
    with the same header (the bytes after the header are not counted)."""
    seed = 7 if lane == "tx" else 8
    rng = random.Random(seed)
    frames = []
    for f in valid_frames(lane, rng)[::2]:
        true_size = len(f)
        for size in (true_size + 1, true_size - 1, true_size + 64, 63, 64, true_size + 2**15):
            frames.append(AxisFrame(f, size=size & 0xFFFF))
        frames.append(AxisFrame(f[:64], size=true_size))   # header only, announced in full
    rng.shuffle(frames)
    _, _, _, reasons = check_classifier(lane, frames, idle=0.1, backpressure=0.5, seed=seed)
    assert None in reasons and F.BypassReason.SHORT_FRAME in reasons


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_full_rate(lane):
    """Back-to-back frames (1-beat ones included): latency 5, one beat per cycle."""
    rng = random.Random(5)
    frames = valid_frames(lane, rng)[:12] + bypass_frames(lane, rng)[:20]
    rng.shuffle(frames)
    run, dut, n_beats, _ = check_classifier(lane, frames, seed=5)
    assert run.latency == dut.LATENCY == 5
    assert run.max_ready_streak == n_beats
    assert run.cycles == n_beats + dut.LATENCY
    # as a queue (the lanes): two cycles more (a registered read), still one beat per cycle
    run, dut, n_beats, _ = check_classifier(lane, frames, seed=5, depth=8)
    assert run.latency == dut.latency == 7
    assert run.max_ready_streak == n_beats


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_subset_codecs_and_port(lane):
    """A lane built with some codecs and another port: the rest bypass as codec / other_port."""
    rng = random.Random(17)
    port = 4791
    codecs = ["fixed", 5, "bf16"]
    frames = valid_frames(lane, rng, port=port) + valid_frames(lane, rng)[::3]
    rng.shuffle(frames)
    _, _, _, reasons = check_classifier(lane, frames, port=port, codecs=codecs,
                                        idle=0.2, backpressure=0.4, seed=17)
    assert {F.BypassReason.CODEC, F.BypassReason.OTHER_PORT, None} <= set(reasons)


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_no_codecs_built_in(lane):
    rng = random.Random(3)
    frames = valid_frames(lane, rng)[::2]
    _, _, _, reasons = check_classifier(lane, frames, codecs=[], idle=0.3,
                                        backpressure=0.3, seed=3)
    assert set(reasons) == {F.BypassReason.CODEC}


@pytest.mark.parametrize("kwargs,name", [
    ({"lane": "both"}, "lane"),
    ({"lane": "tx", "port": 0}, "port"),
    ({"lane": "tx", "port": 65536}, "port"),
    ({"lane": "rx", "port": True}, "port"),
    ({"lane": "rx", "port": "21329"}, "port"),
    ({"lane": "tx", "codecs": [9]}, "codecs"),
    ({"lane": "tx", "codecs": "raw"}, "codecs"),
    ({"lane": "tx", "codecs": 3}, "codecs"),
    ({"lane": "tx", "depth": 4}, "depth"),
    ({"lane": "rx", "depth": True}, "depth"),
])
def test_parameter_validation(kwargs, name):
    lane = kwargs.pop("lane")
    rejected(FrameClassifier, lane, **kwargs, match=name)


def test_codec_names_and_ids():
    for dut, want in ((FrameClassifier("rx", codecs=["raw", 1, "qsgd"]), {0, 1, 4}),
                      (FrameClassifier("tx"), F.DEFAULT_CODECS)):
        assert dut.codecs == frozenset(want)


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_verilog(lane):
    text = verilog.convert(FrameClassifier(lane, codecs=["raw", "fixed"]), name="classifier")
    assert "module classifier" in text


def test_reason_layout():
    assert {r.name for r in Reason} - {"NONE"} == {r.name for r in F.BypassReason}
    assert data.Layout.cast(ClassifiedBeat)["reason"].shape is Reason


@pytest.mark.parametrize("scale_bits", [0x3F800000, 0x00000000, 0x80000000, 0x00000001,
                                        0xBF800000, 0x7F800000, 0x7FC00123, 0x7F7FFFFF,
                                        0x80000001, 0xFF800000, 0xFFC00001])
def test_threshold_keep_mask(scale_bits):
    """TX with threshold: the keep bits of every payload beat equal ``keep_mask`` (edge values:
    ±0, subnormals, ±inf, NaN payloads of both signs, max finite, ±scale and its neighbours);
    every header beat's keep bits are 0 and its ``zero_kept`` is ``keep_mask`` of +0.0
    against that header's scale (the frames alternate between a scale that keeps +0.0 and
    one that does not)."""
    from squeezenic_hw.reference.threshold import keep_mask
    from squeezenic_hw.sim.vectors import EDGE_F32_BITS

    def keeps_zero(bits):
        return bool(keep_mask([0.0], np.uint32(bits).view(np.float32))[0])

    near = [scale_bits, scale_bits ^ 0x80000000, (scale_bits + 1) & 0xFFFFFFFF,
            (scale_bits - 1) & 0xFFFFFFFF]
    x = np.concatenate([EDGE_F32_BITS, EDGE_F32_BITS ^ np.uint32(0x80000000),
                        np.array(near, dtype=np.uint32)]).view(np.float32)
    other = 0x3F800000 if keeps_zero(scale_bits) else 0xBF800000
    frames = [(F.build_host_frame(F.Header(codec=7, scale_bits=s), x[:k]), s)
              for k, s in ((len(x), scale_bits), (1, other), (17, scale_bits), (3, other))]
    beats, keeps, masks, zeros = [], [], [], []
    for f, s in frames:
        words = frame_beats(AxisFrame(f))
        vals = np.frombuffer(f[F.HEADER_LEN:], dtype="<u4").view(np.float32)
        want = keep_mask(vals, np.uint32(s).view(np.float32))
        zeros.append(int(keeps_zero(s)))
        for b, word in enumerate(words):
            beats.append(word)
            chunk = want[16 * (b - 1):16 * b] if b else []
            keeps.append(sum(1 << e for e, kept in enumerate(chunk) if kept))
            masks.append((1 << len(chunk)) - 1 if b else 0xFFFF)   # past the end: don't care
    dut = shared(FrameClassifier, "tx", codecs=["raw", "threshold"])
    run = run_stream(dut, beats, idle=0.3, backpressure=0.3, seed=scale_bits & 0xFF)
    got = [data.Const(ClassifiedBeat, out) for out in run.outputs]
    assert [int(g.keep) & m for g, m in zip(got, masks, strict=True)] == keeps
    assert [int(g.zero_kept) for g in got if g.first] == zeros


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_threshold_reasons(lane):
    """threshold built in: parameter (0 on host frames, 0/1 on wire frames) and the RX
    length rules (bitmap ⌈n/8⌉ + 4k, index list 6k) as the reference decides."""
    rng = np.random.default_rng(4)
    frames = []
    for n in (1, 7, 8, 9, 100, 513):
        for param in (0, 1, 2):
            flags = F.FLAG_ENCODED if lane == "rx" else 0
            h = F.Header(codec=7, param=param, flags=flags, n=n)
            if lane == "tx":
                frames.append(F.build_host_frame(h, rng.standard_normal(n).astype(np.float32)))
                continue
            for extra in range(0, 14):
                frames.append(F.build_wire_frame(h, bytes(-(-n // 8) * (param == 0) + extra)))
    reasons = check_classifier(lane, frames, codecs=["sign", "threshold"], idle=0.2,
                               backpressure=0.2)[3]
    assert None in reasons and F.BypassReason.PARAM in reasons
    if lane == "rx":
        assert F.BypassReason.LENGTH in reasons


def _rx_info_expected(frame):
    """The :class:`RxFrameInfo` fields of a processed wire frame, from its header."""
    h = F.parse(frame)
    x = len(frame) - F.HEADER_LEN
    if h.codec == 7:
        layout = 2 * (x // 6) if h.param else -(-h.n // 8)
        k = x // 6 if h.param else (x - layout) // 4
        return {"width": 1, "beats": -(-x // 64), "bits": h.n, "sparse": 1,
                "index": h.param, "k": k, "layout_beats": -(-layout // 64),
                "value_beat": layout // 64, "start": layout % 64,
                "last_byte": (layout - 1) % 64}
    b = codec_info(h.codec).bits_per_element(h.param)
    return {"width": b, "beats": -(-h.n * b // 512), "bits": h.n * b}


@pytest.mark.parametrize("idle,backpressure,depth", [(0.0, 0.0, None), (0.3, 0.3, None),
                                                     (0.3, 0.3, 8)])
def test_rx_frame_info(idle, backpressure, depth):
    """RX: on the first beat of every processed frame, ``rx`` holds the frame's code width,
    payload bits and beats and, for ``threshold`` (both layouts, k = 0 included),
    k and where its layout bytes end; TX leaves ``rx`` zero."""
    rng = random.Random(23)
    codecs = sorted(F.DEFAULT_CODECS) + [7]
    frames = valid_frames("rx", rng)
    for n in (1, 8, 9, 100, 511, 512, 513, 4000, 65535):
        for param in (0, 1):
            for k in sorted({0, 1, 17, n // 3, n}):
                h = F.Header(codec=7, param=param, flags=F.FLAG_ENCODED, n=n,
                             dst_port=F.DEFAULT_PORT)
                layout = 2 * k if param else -(-n // 8)
                if F.HEADER_LEN + layout + 4 * k <= 0xFFFF - 14:
                    frames.append(F.build_wire_frame(h, rng.randbytes(layout + 4 * k)))
    for n in (1, 16, 17, 2047, 50000):
        h = F.Header(codec=3, param=9, flags=F.FLAG_ENCODED, n=n, dst_port=F.DEFAULT_PORT)
        frames.append(F.build_wire_frame(h, rng.randbytes(-(-n * 9 // 8))))
    rng.shuffle(frames)
    run, _, _, reasons = check_classifier("rx", frames, codecs=codecs, idle=idle,
                                          backpressure=backpressure, seed=23, depth=depth)
    firsts = [data.Const(ClassifiedBeat, out) for out in run.outputs]
    firsts = [got for got in firsts if got.first]
    checked = 0
    for frame, reason, got in zip(frames, reasons, firsts, strict=True):
        if reason is not None:
            continue
        for name, value in _rx_info_expected(frame).items():
            assert int(got.rx[name]) == value, (name, F.parse(frame), len(frame))
        checked += 1
    assert checked > 60
    run, _, _, _ = check_classifier("tx", valid_frames("tx", rng), codecs=codecs, seed=24)
    assert all(data.Const(ClassifiedBeat, out).rx.as_value().value == 0 for out in run.outputs)
