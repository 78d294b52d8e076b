"""The SqueezeNIC frame format (``docs/wire-format.md`` sections 2, 6 and 7).

A frame is ``bytes``: the 64-byte header (Ethernet II, IPv4 without options,
UDP, the SqueezeNIC fields) followed by the payload. :class:`Header` holds the
fields, :func:`build_host_frame` and :func:`build_wire_frame` write frames
(lengths, IPv4 header checksum, UDP checksum 0), :func:`parse` reads the header
without judging it, and :func:`classify_host_frame` / :func:`classify_wire_frame`
decide whether the TX / RX lane processes a frame or bypasses it, and why; their first
checks, those every frame version shares, are :func:`check_transport`.

Every decision where the spec is silent is in ``docs/frames.md``.
"""

import enum
import struct
from dataclasses import dataclass, field, replace

import numpy as np

from .codecs import (
    DEFAULT_CODECS,
    KNOWN_CODECS,
    THRESHOLD_ID,
    codec_info,
    payload_bytes,
    validate_param,
)
from .header import (
    DEFAULT_PORT,
    ETHERTYPE_IPV4,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    FLAGS_RESERVED,
    HEADER_LEN,
    IPV4_FRAGMENT_MASK,
    IPV4_VIHL,
    PROTO_UDP,
    VERSION,
)
from .threshold import values_count

__all__ = [
    "Header", "BypassReason", "TX_REASONS", "RX_REASONS", "TRANSPORT_REASONS",
    "ipv4_checksum", "build_host_frame", "build_wire_frame", "parse", "check_transport",
    "classify_host_frame", "classify_wire_frame",
]


@dataclass(frozen=True)
class Header:
    """The 64-byte header of a host or wire frame.

    Addresses are ``bytes`` (MAC 6, IPv4 4); ``scale_bits``/``aux_bits`` are the
    fp32 fields as uint32 bit patterns so that any NaN payload survives.
    ``ip_total_length``, ``ip_checksum``, ``udp_length`` and ``udp_checksum`` are
    what :func:`parse` found; the builders ignore them and write the computed
    values (UDP checksum 0).
    """
    dst_mac: bytes = b"\x02\x00\x00\x00\x00\x02"
    src_mac: bytes = b"\x02\x00\x00\x00\x00\x01"
    ethertype: int = ETHERTYPE_IPV4
    ip_tos: int = 0
    ip_id: int = 0
    ip_frag: int = 0x4000          # flags + fragment offset word (default: DF)
    ttl: int = 64
    protocol: int = PROTO_UDP
    src_ip: bytes = bytes([10, 0, 0, 1])
    dst_ip: bytes = bytes([10, 0, 0, 2])
    src_port: int = DEFAULT_PORT
    dst_port: int = DEFAULT_PORT
    version: int = VERSION
    codec: int = 0
    param: int = 0
    flags: int = 0
    n: int = 0
    scale_bits: int = 0x3F800000   # 1.0
    aux_bits: int = 0x3F800000     # 1.0
    seed: int = 0
    offset: int = 0
    ip_total_length: int = field(default=0, compare=False)
    ip_checksum: int = field(default=0, compare=False)
    udp_length: int = field(default=0, compare=False)
    udp_checksum: int = field(default=0, compare=False)

    @property
    def encoded(self):
        return bool(self.flags & FLAG_ENCODED)

    @property
    def stochastic(self):
        return bool(self.flags & FLAG_STOCHASTIC)

    @property
    def flush(self):
        return bool(self.flags & FLAG_FLUSH)

    @property
    def scale(self):
        """``scale`` as np.float32 (payload kept)."""
        return np.uint32(self.scale_bits).view(np.float32)

    @property
    def aux(self):
        """``aux`` as np.float32 (payload kept)."""
        return np.uint32(self.aux_bits).view(np.float32)

    def coalesce_key(self):
        """The fields that must be equal for two host frames to share a wire frame (section 6)."""
        return (self.dst_mac, self.src_mac, self.src_ip, self.dst_ip, self.src_port,
                self.dst_port, self.codec, self.param, self.stochastic, self.scale_bits,
                self.aux_bits, self.seed)


class BypassReason(enum.Enum):
    """Why a lane passed a frame through unchanged; checked in this order, first one wins.

    The value is the stable counter suffix: the counter is ``"bypass_" + value``.
    """
    SHORT_FRAME = "short_frame"            # fewer than 64 bytes: no complete header
    NOT_IPV4 = "not_ipv4"                  # EtherType ≠ 0x0800 (ARP, IPv6, VLAN tag…)
    IP_OPTIONS = "ip_options"              # IP version ≠ 4 or IHL ≠ 5
    FRAGMENTED = "fragmented"              # MF set or fragment offset ≠ 0 (DF is fine)
    NOT_UDP = "not_udp"                    # protocol ≠ 17
    OTHER_PORT = "other_port"              # UDP destination port ≠ the SqueezeNIC port
    IP_CHECKSUM = "ip_checksum"            # IPv4 header checksum wrong
    IP_LENGTH = "ip_length"                # IPv4 total length ≠ frame length − 14
    UDP_LENGTH = "udp_length"              # UDP length ≠ frame length − 34
    VERSION = "version"                    # version ≠ 1
    RESERVED_FLAGS = "reserved_flags"      # flag bits 7–3 not zero
    ALREADY_ENCODED = "already_encoded"    # TX only: encoded = 1
    NOT_ENCODED = "not_encoded"            # RX only: encoded = 0
    CODEC = "codec"                        # codec id not built into this lane
    PARAM = "param"                        # parameter invalid for the codec
    ZERO_N = "zero_n"                      # n = 0
    LENGTH = "length"                      # TX: length ≠ 64 + 4n; RX: ≠ 64 + ⌈n·b/8⌉


#: Reasons the TX lane counts, in check order.
TX_REASONS = tuple(r for r in BypassReason if r is not BypassReason.NOT_ENCODED)
#: Reasons the RX lane counts, in check order.
RX_REASONS = tuple(r for r in BypassReason if r is not BypassReason.ALREADY_ENCODED)
#: The reasons of :func:`check_transport`, in check order: those before ``version``, which
#: every SqueezeNIC frame passes whatever its version (a reduce frame's too).
TRANSPORT_REASONS = TX_REASONS[:TX_REASONS.index(BypassReason.VERSION)]

# ---- building -------------------------------------------------------------------

_SQ = struct.Struct("<BBBBHIIII")  # version, codec, param, flags, n, scale, aux, seed, offset


def ipv4_checksum(ip_header):
    """RFC 791 / RFC 1071 header checksum of a 20-byte IPv4 header (checksum field as zero).

    Parameters
    ----------
    ip_header : bytes
        The header; its checksum bytes (10–11) are treated as zero.

    Returns
    -------
    int
        The 16-bit checksum to write into bytes 10–11.
    """
    h = bytearray(ip_header)
    h[10:12] = b"\0\0"
    total = sum(struct.unpack(f"!{len(h) // 2}H", bytes(h)))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _header_bytes(h, frame_len):
    if len(h.dst_mac) != 6 or len(h.src_mac) != 6 or len(h.src_ip) != 4 or len(h.dst_ip) != 4:
        raise ValueError("MAC addresses need 6 bytes and IPv4 addresses 4 bytes")
    if not 0 <= h.n < 2**16:
        raise ValueError(f"n must fit 16 bits, got {h.n}")
    if frame_len - 14 >= 2**16:
        raise ValueError(f"frame of {frame_len} bytes is too long for IPv4")
    eth = h.dst_mac + h.src_mac + struct.pack("!H", h.ethertype)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, h.ip_tos, frame_len - 14, h.ip_id,
                               h.ip_frag, h.ttl, h.protocol, 0, h.src_ip, h.dst_ip))
    ip[10:12] = struct.pack("!H", ipv4_checksum(ip))
    udp = struct.pack("!HHHH", h.src_port, h.dst_port, frame_len - 34, 0)
    sq = _SQ.pack(h.version, h.codec, h.param, h.flags, h.n, h.scale_bits, h.aux_bits,
                  h.seed, h.offset)
    out = eth + bytes(ip) + udp + sq
    assert len(out) == HEADER_LEN
    return out


def build_host_frame(header, values_f32):
    """A host frame: the header (with ``n`` = number of values) and the values as fp32 LE.

    Parameters
    ----------
    header : Header
        Every field but ``n`` and the computed lengths/checksums is written as given.
    values_f32 : array_like of float32
        The payload values (bit patterns kept, NaN payloads included).

    Returns
    -------
    bytes
    """
    v = np.ascontiguousarray(np.asarray(values_f32, dtype=np.float32)).reshape(-1)
    payload = v.view(np.uint32).astype("<u4").tobytes()
    h = replace(header, n=v.size)
    return _header_bytes(h, HEADER_LEN + len(payload)) + payload


def build_wire_frame(header, payload):
    """A frame of the header (``n`` as given) and an already packed payload.

    Parameters
    ----------
    header : Header
    payload : bytes or array of uint8

    Returns
    -------
    bytes
    """
    payload = bytes(np.asarray(payload, dtype=np.uint8)) if not isinstance(
        payload, (bytes, bytearray)) else bytes(payload)
    return _header_bytes(header, HEADER_LEN + len(payload)) + payload


# ---- parsing and classification ----------------------------------------------------

def parse(frame_bytes):
    """Read the 64-byte header without validating it; ``None`` when shorter than 64 bytes.

    Parameters
    ----------
    frame_bytes : bytes

    Returns
    -------
    Header or None
    """
    b = bytes(frame_bytes[:HEADER_LEN])
    if len(b) < HEADER_LEN:
        return None
    (_vihl, tos, total, ip_id, frag, ttl, proto, csum, src_ip, dst_ip) = struct.unpack(
        "!BBHHHBBH4s4s", b[14:34])
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", b[34:42])
    ver, codec, param, flags, n, scale, aux, seed, offset = _SQ.unpack(b[42:64])
    return Header(dst_mac=b[0:6], src_mac=b[6:12], ethertype=struct.unpack("!H", b[12:14])[0],
                  ip_tos=tos, ip_id=ip_id, ip_frag=frag, ttl=ttl, protocol=proto,
                  src_ip=src_ip, dst_ip=dst_ip, src_port=sport, dst_port=dport, version=ver,
                  codec=codec, param=param, flags=flags, n=n, scale_bits=scale,
                  aux_bits=aux, seed=seed, offset=offset, ip_total_length=total,
                  ip_checksum=csum, udp_length=ulen, udp_checksum=ucsum)


def check_transport(frame, *, port=DEFAULT_PORT, tuser_size=None):
    """The checks of :data:`TRANSPORT_REASONS`, which every SqueezeNIC frame passes
    whatever its version: Ethernet, IPv4 without options or fragments, UDP to ``port``,
    the IPv4 checksum and both lengths.

    Parameters
    ----------
    frame, port, tuser_size :
        As for :func:`classify_host_frame`.

    Returns
    -------
    (Header or None, BypassReason or None)
        The parsed header (``None`` only for frames shorter than 64 bytes) and the first
        failing check, ``None`` when all pass.
    """
    size = len(frame) if tuser_size is None else int(tuser_size)
    h = parse(frame)
    if h is None or size < HEADER_LEN:
        return h, BypassReason.SHORT_FRAME
    if h.ethertype != ETHERTYPE_IPV4:
        return h, BypassReason.NOT_IPV4
    if frame[14] != IPV4_VIHL:
        return h, BypassReason.IP_OPTIONS
    if h.ip_frag & IPV4_FRAGMENT_MASK:
        return h, BypassReason.FRAGMENTED
    if h.protocol != PROTO_UDP:
        return h, BypassReason.NOT_UDP
    if h.dst_port != port:
        return h, BypassReason.OTHER_PORT
    if ipv4_checksum(frame[14:34]) != h.ip_checksum:
        return h, BypassReason.IP_CHECKSUM
    if h.ip_total_length != size - 14:
        return h, BypassReason.IP_LENGTH
    if h.udp_length != size - 34:
        return h, BypassReason.UDP_LENGTH
    return h, None


def _common_checks(frame, port, tuser_size):
    """Section 2 checks shared by both lanes: ``(header, reason)``, reason ``None`` when fine."""
    h, reason = check_transport(frame, port=port, tuser_size=tuser_size)
    if reason is not None:
        return h, reason
    if h.version != VERSION:
        return h, BypassReason.VERSION
    if h.flags & FLAGS_RESERVED:
        return h, BypassReason.RESERVED_FLAGS
    return h, None


def _codec_checks(h, codecs_built_in, host):
    if h.codec not in codecs_built_in or h.codec not in KNOWN_CODECS:
        return BypassReason.CODEC
    try:
        validate_param(h.codec, h.param)
    except ValueError:
        return BypassReason.PARAM
    if host and h.codec == THRESHOLD_ID and h.param != 0:
        return BypassReason.PARAM   # the layout is the encoder's choice: host frames say 0
    if h.n == 0:
        return BypassReason.ZERO_N
    return None


def classify_host_frame(frame, *, port=DEFAULT_PORT, codecs_built_in=DEFAULT_CODECS,
                        tuser_size=None):
    """Section 6's rule: is ``frame`` a SqueezeNIC host frame the TX lane encodes?

    Parameters
    ----------
    frame : bytes
    port : int
        The SqueezeNIC UDP destination port.
    codecs_built_in : collection of int
        Codec ids the lane implements.
    tuser_size : int, optional
        The frame length OpenNIC announces; ``len(frame)`` by default.

    Returns
    -------
    (Header or None, BypassReason or None)
        The parsed header (``None`` only for frames shorter than 64 bytes) and the
        first failing check in :data:`TX_REASONS` order, ``None`` when it is a
        SqueezeNIC host frame.
    """
    h, reason = _common_checks(frame, port, tuser_size)
    if reason is not None:
        return h, reason
    if h.encoded:
        return h, BypassReason.ALREADY_ENCODED
    reason = _codec_checks(h, codecs_built_in, host=True)
    if reason is not None:
        return h, reason
    size = len(frame) if tuser_size is None else int(tuser_size)
    if size != HEADER_LEN + 4 * h.n or len(frame) != size:
        return h, BypassReason.LENGTH
    return h, None


def classify_wire_frame(frame, *, port=DEFAULT_PORT, codecs_built_in=DEFAULT_CODECS,
                        tuser_size=None):
    """Section 7's rule: is ``frame`` a wire frame the RX lane decodes?

    Same checks as :func:`classify_host_frame`, but ``encoded`` must be 1 and the
    length must be ``64 + ⌈n·b/8⌉`` (see :data:`RX_REASONS`).

    Returns
    -------
    (Header or None, BypassReason or None)
    """
    h, reason = _common_checks(frame, port, tuser_size)
    if reason is not None:
        return h, reason
    if not h.encoded:
        return h, BypassReason.NOT_ENCODED
    reason = _codec_checks(h, codecs_built_in, host=False)
    if reason is not None:
        return h, reason
    size = len(frame) if tuser_size is None else int(tuser_size)
    if h.codec == THRESHOLD_ID:
        right = values_count(h.n, h.param, size - HEADER_LEN) is not None
    else:
        right = size == HEADER_LEN + payload_bytes(codec_info(h.codec), h.param, h.n)
    if not right or len(frame) != size:
        return h, BypassReason.LENGTH
    return h, None
