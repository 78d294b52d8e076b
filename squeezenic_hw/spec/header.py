"""The 64-byte SqueezeNIC header: its length, field offsets, flags and the limits and defaults
every frame obeys (``docs/wire-format.md`` section 2). The header is the whole first 512-bit
beat of a frame: Ethernet II, IPv4 without options, UDP, then the SqueezeNIC fields."""

__all__ = [
    "HEADER_LEN", "DEFAULT_PORT", "MAX_PKT_LEN", "DEFAULT_MTU", "DEFAULT_HOST_ELEMENTS",
    "VERSION", "FLAG_ENCODED", "FLAG_STOCHASTIC", "FLAG_FLUSH", "FLAGS_RESERVED",
    "ETHERTYPE_IPV4", "IPV4_VIHL", "IPV4_FRAGMENT_MASK", "PROTO_UDP", "HDR", "check_port",
]

#: Bytes of the header (the whole first 512-bit beat).
HEADER_LEN = 64
#: Default SqueezeNIC UDP destination port (a build parameter).
DEFAULT_PORT = 21329


def check_port(port):
    """``port`` if it is a UDP port number (1…65535), else ``ValueError`` naming it."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 0xFFFF:
        raise ValueError(f"port must be an int from 1 to 65535, got {port!r}")
    return port

#: Largest host frame in bytes (OpenNIC's ``MAX_PKT_LEN`` upper bound).
MAX_PKT_LEN = 9600
#: Default wire MTU (frame length in bytes, without FCS).
DEFAULT_MTU = 1518
#: Default host frame elements: 64 + 4·363 = 1516 bytes ≤ 1518.
DEFAULT_HOST_ELEMENTS = 363
#: Header ``version`` of wire format v1.
VERSION = 1
#: ``flags`` bit 0: the payload is encoded (a wire frame).
FLAG_ENCODED = 0x01
#: ``flags`` bit 1: stochastic rounding.
FLAG_STOCHASTIC = 0x02
#: ``flags`` bit 2: close the open wire frame after this host frame.
FLAG_FLUSH = 0x04
#: ``flags`` bits 3–7: must be zero.
FLAGS_RESERVED = 0xF8
#: Ethernet type of IPv4.
ETHERTYPE_IPV4 = 0x0800
#: IPv4 version 4 and header length 5 words (no options), the header's byte 14.
IPV4_VIHL = 0x45
#: The IPv4 flags-and-fragment-offset word's MF flag and fragment offset: a frame with any
#: of them set is a fragment (DF, bit 14, is fine).
IPV4_FRAGMENT_MASK = 0x3FFF
#: IP protocol number of UDP.
PROTO_UDP = 17


class HDR:
    """Byte offsets (start, length) of the header fields (wire format section 2)."""
    DST_MAC = (0, 6)
    SRC_MAC = (6, 6)
    ETHERTYPE = (12, 2)      # BE
    IP_VIHL = (14, 1)
    IP_TOS = (15, 1)
    IP_TOTAL_LENGTH = (16, 2)  # BE
    IP_ID = (18, 2)
    IP_FRAG = (20, 2)        # BE: flags + fragment offset
    IP_TTL = (22, 1)
    IP_PROTO = (23, 1)
    IP_CHECKSUM = (24, 2)    # BE
    SRC_IP = (26, 4)
    DST_IP = (30, 4)
    UDP_SRC = (34, 2)        # BE
    UDP_DST = (36, 2)        # BE
    UDP_LENGTH = (38, 2)     # BE
    UDP_CHECKSUM = (40, 2)   # BE
    VERSION = (42, 1)
    CODEC = (43, 1)
    PARAM = (44, 1)
    FLAGS = (45, 1)
    N = (46, 2)              # LE
    SCALE = (48, 4)          # LE
    AUX = (52, 4)            # LE
    SEED = (56, 4)           # LE
    OFFSET = (60, 4)         # LE
