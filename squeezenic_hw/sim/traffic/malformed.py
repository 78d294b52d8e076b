"""Malformed frames: the frames a lane must pass unchanged, one kind per bypass
reason."""

import struct

import numpy as np

from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.spec.codecs import codec_info, f32_bits, resolve_codecs
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    classify_host_frame,
    classify_wire_frame,
    ipv4_checksum,
    parse,
)
from squeezenic_hw.spec.header import DEFAULT_PORT, FLAG_ENCODED, FLAG_STOCHASTIC, HDR, HEADER_LEN

from .recipes import MALFORMED_KINDS, MALFORMED_MARK, NOT_IPV4_KINDS, U32
from .strategies import check_lane

__all__ = ["malformed_frame"]


def _patch(frame, pos, data, *, fix_checksum=True):
    """``frame`` with bytes at ``pos`` replaced, its IPv4 checksum rewritten unless told
    not to."""
    b = bytearray(frame)
    b[pos:pos + len(data)] = data
    if fix_checksum and len(b) >= 34:
        b[24:26] = struct.pack("!H", ipv4_checksum(bytes(b[14:34])))
    return bytes(b)


def _at(name):
    return getattr(HDR, name)[0]


def _other_than(rng, avoid, lo, hi):
    """A random int of [lo, hi) not in ``avoid``."""
    while True:
        v = int(rng.integers(lo, hi))
        if v not in avoid:
            return v


def _good_frame(lane, codec, rng, built, port):
    """A frame ``lane`` processes, of ``codec`` (a TX host frame, or the wire frame the
    reference TX makes of one), marked as the base of a malformed frame."""
    info = codec_info(codec)
    param = int(rng.integers(2, 17)) if info.param_range and not info.variable else 0
    h = Header(codec=codec, param=param, dst_port=port,
               ip_id=MALFORMED_MARK | int(rng.integers(0, MALFORMED_MARK)),
               seed=int(rng.integers(0, U32)), offset=int(rng.integers(0, U32)),
               flags=FLAG_STOCHASTIC if rng.random() < 0.5 else 0,
               scale_bits=f32_bits(np.float32(rng.uniform(0.1, 10))),
               aux_bits=f32_bits(np.float32(rng.uniform(-1, 1))))
    host = build_host_frame(h, (rng.standard_normal(int(rng.integers(1, 40))) * 3).astype(
        np.float32))
    if lane == "tx":
        return host
    return lane_reference.tx([host], port=port, codecs=built)[0][0]


def _ipv6_frame(good, rng, port):
    payload = good[42:]
    udp = struct.pack("!HHHH", int(rng.integers(1024, 65536)), port, 8 + len(payload), 0)
    ip6 = struct.pack("!IHBB", 6 << 28, len(udp) + len(payload), 17, 64) + rng.bytes(32)
    return good[:12] + b"\x86\xdd" + ip6 + udp + payload


def _arp_frame(rng):
    mac, ip = b"\x02" + rng.bytes(5), bytes([10]) + rng.bytes(3)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + bytes(6) + (
        bytes([10]) + rng.bytes(3))
    # padded to the 60 bytes of a minimal Ethernet frame (short: no complete header) or
    # longer (not IPv4)
    return (b"\xff" * 6 + mac + b"\x08\x06" + arp).ljust(int(rng.integers(60, 128)), b"\0")


def _length_mismatch(good, lane, rng, port, built):
    """``good`` with an ``n`` its length does not fit, or a payload 1–3 bytes shorter or
    longer (a threshold index list's length does not depend on ``n``)."""
    h = parse(good)
    if rng.random() < 0.5:
        for _ in range(8):
            n = _other_than(rng, {0, h.n}, 1, 65536)
            frame = _patch(good, _at("N"), struct.pack("<H", n))
            if bypass_reason(frame, lane, port, built) is BypassReason.LENGTH:
                return frame
    payload, change = good[HEADER_LEN:], int(rng.integers(1, 4))
    if len(payload) > change and rng.random() < 0.5:
        return build_wire_frame(h, payload[:-change])
    return build_wire_frame(h, payload + rng.bytes(change))


def _bad_param(codec, lane, rng):
    info = codec_info(codec)
    if info.variable:
        return int(rng.integers(1 if lane == "tx" else 2, 256))
    if info.param_range:
        lo, hi = info.param_range
        return int(rng.choice([*range(lo), *range(hi + 1, 256)]))
    return int(rng.integers(1, 256))


def _mutate(kind, good, lane, rng, port, built):
    h = parse(good)
    R = BypassReason
    if kind == "arp":
        return _arp_frame(rng)
    if kind == "ipv6":
        return _ipv6_frame(good, rng, port)
    if kind == "vlan":
        return good[:12] + b"\x81\x00" + struct.pack("!H", int(rng.integers(0, 4096))) + good[12:]
    reason = R(kind)
    if reason is R.SHORT_FRAME:
        return good[:int(rng.integers(1, HEADER_LEN))]
    if reason is R.NOT_IPV4:
        return _patch(good, 12, struct.pack("!H", _other_than(rng, {0x0800}, 0, 65536)))
    if reason is R.IP_OPTIONS:
        return _patch(good, 14, bytes([_other_than(rng, {0x45}, 0, 256)]))
    if reason is R.FRAGMENTED:
        frag = int(rng.choice([0, 0x4000])) | int(rng.integers(1, 0x4000))
        return _patch(good, _at("IP_FRAG"), struct.pack("!H", frag))
    if reason is R.NOT_UDP:
        return _patch(good, _at("IP_PROTO"), bytes([_other_than(rng, {17}, 0, 256)]))
    if reason is R.OTHER_PORT:
        return _patch(good, _at("UDP_DST"), struct.pack("!H", _other_than(rng, {port}, 0,
                                                                          65536)))
    if reason is R.IP_CHECKSUM:
        wrong = h.ip_checksum ^ int(rng.integers(1, 65536))
        return _patch(good, _at("IP_CHECKSUM"), struct.pack("!H", wrong), fix_checksum=False)
    if reason is R.IP_LENGTH:
        return _patch(good, _at("IP_TOTAL_LENGTH"), struct.pack(
            "!H", _other_than(rng, {len(good) - 14}, 0, 65536)))
    if reason is R.UDP_LENGTH:
        return _patch(good, _at("UDP_LENGTH"), struct.pack(
            "!H", _other_than(rng, {len(good) - 34}, 0, 65536)))
    if reason is R.VERSION:
        return _patch(good, _at("VERSION"), bytes([_other_than(rng, {1}, 0, 256)]))
    if reason is R.RESERVED_FLAGS:
        return _patch(good, _at("FLAGS"), bytes([h.flags | int(rng.integers(1, 32)) << 3]))
    if reason is R.ALREADY_ENCODED:
        return _patch(good, _at("FLAGS"), bytes([h.flags | FLAG_ENCODED]))
    if reason is R.NOT_ENCODED:
        return _patch(good, _at("FLAGS"), bytes([h.flags & ~FLAG_ENCODED]))
    if reason is R.CODEC:
        return _patch(good, _at("CODEC"), bytes([_other_than(rng, set(built), 0, 256)]))
    if reason is R.PARAM:
        return _patch(good, _at("PARAM"), bytes([_bad_param(h.codec, lane, rng)]))
    if reason is R.ZERO_N:
        return _patch(good, _at("N"), b"\0\0")
    return _length_mismatch(good, lane, rng, port, built)


def bypass_reason(frame, lane, port, built, tuser_size=None):
    classify = classify_host_frame if lane == "tx" else classify_wire_frame
    return classify(frame, port=port, codecs_built_in=built, tuser_size=tuser_size)[1]


def malformed_frame(recipe, lane, *, codecs=None, port=DEFAULT_PORT):
    """The frame of a :class:`~.recipes.MalformedRecipe`: one that ``lane`` (``"tx"`` or ``"rx"``),
    built with ``codecs`` and ``port``, passes unchanged, for the reason its kind names.

    Raises ``ValueError`` naming ``recipe`` when the kind is not one of ``lane``'s or its
    codec is not built in."""
    check_lane(lane)
    built = resolve_codecs(codecs)
    if recipe.kind not in MALFORMED_KINDS[lane]:
        raise ValueError(f"recipe: kind {recipe.kind!r} is not one of the {lane} lane's "
                         f"({', '.join(MALFORMED_KINDS[lane])})")
    if recipe.codec not in built:
        raise ValueError(f"recipe: codec {recipe.codec} is not built in")
    rng = np.random.default_rng(recipe.data_seed)
    good = _good_frame(lane, recipe.codec, rng, built, port)
    frame = _mutate(recipe.kind, good, lane, rng, port, built)
    if len(frame) < HEADER_LEN:
        want = BypassReason.SHORT_FRAME
    elif recipe.kind in NOT_IPV4_KINDS:
        want = BypassReason.NOT_IPV4
    else:
        want = BypassReason(recipe.kind)
    got = bypass_reason(frame, lane, port, built)
    if got is not want:
        raise RuntimeError(f"malformed frame of kind {recipe.kind!r} classifies as {got}")
    return frame
