"""Which codec, and the compression rate r it gives on the wire.

``r`` is the paper's compression rate: compressed size / original size, so a
partition g of |g| bytes goes on the wire as r|g| bytes. For a codec of b bits
per element the payload alone gives ``r = b / 32`` (``1 / codec_info(c).ratio``).
With ``header_overhead`` the model also charges the SqueezeNIC frame header
(``docs/wire-format.md`` section 2): a wire frame of at most ``mtu``
bytes is a 64-byte header (Ethernet + IPv4 + UDP + 22 SqueezeNIC bytes) and
a packed payload of ``n`` codes, while the baseline is taken to send plain
fp32 in Ethernet/IPv4/UDP frames (42 header bytes) of the same MTU, whose
goodput is the effective bandwidth B. Hence::

    n = min(65535, floor((mtu - 64) * 8 / b))
    r = ((64 + ceil(n * b / 8)) / n) / (mtu / floor((mtu - 42) / 4))

which is b/32 times about 1.015 at the default MTU of 1518 bytes.
"""

import math
from dataclasses import dataclass

from squeezenic_hw.spec.codecs import CODECS, PRESETS, codec_info, validate_param

__all__ = ["Compression", "resolve_compression", "wire_rate", "lookup_codec",
           "SQUEEZENIC_HEADER_BYTES", "UDP_HEADER_BYTES"]

SQUEEZENIC_HEADER_BYTES = 64
"""Header of a SqueezeNIC wire frame (wire-format.md section 2)."""

UDP_HEADER_BYTES = 42
"""Ethernet II + IPv4 + UDP header of a plain frame (the baseline's framing)."""

MTU_RANGE = (SQUEEZENIC_HEADER_BYTES + 64, 9600)


def lookup_codec(codec):
    """``codec_info(codec)``, with a ``ValueError`` that starts with ``codec:``."""
    if not isinstance(codec, str) or codec not in CODECS:
        raise ValueError(f"codec: {codec!r} is not a known codec (known: {', '.join(CODECS)})")
    return codec_info(codec)


@dataclass(frozen=True)
class Compression:
    """A resolved compression choice.

    Attributes
    ----------
    label : str
        What the user chose: a preset name (``onebit``) or ``codec[:param]``.
    codec : str
        Codec name.
    param : int
        Codec parameter (0 when none).
    bits : int
        Bits per element on the wire.
    rate : float
        Compression rate r = wire bytes / fp32 bytes.
    rate_source : str
        How ``rate`` was obtained.
    """

    label: str
    codec: str
    param: int
    bits: int
    rate: float
    rate_source: str


def wire_rate(codec, param=None, *, header_overhead=True, mtu=1518):
    """Compression rate r of ``codec`` on the wire (see the module docstring).

    Parameters
    ----------
    codec : str
        Codec name.
    param : int, optional
        Codec parameter.
    header_overhead : bool
        Charge the 64-byte frame header against the baseline's 42-byte one.
    mtu : int
        Largest wire frame in bytes (128 to 9600).

    Returns
    -------
    float
    """
    info = lookup_codec(codec)
    param = validate_param(info.name, param)
    bits = info.bits_per_element(param or None)
    if not header_overhead:
        return bits / 32
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not (
            MTU_RANGE[0] <= mtu <= MTU_RANGE[1]):
        raise ValueError(f"mtu: must be an integer from {MTU_RANGE[0]} to {MTU_RANGE[1]} bytes, "
                         f"got {mtu!r}")
    n = min(65535, (mtu - SQUEEZENIC_HEADER_BYTES) * 8 // bits)
    wire_per_element = (SQUEEZENIC_HEADER_BYTES + math.ceil(n * bits / 8)) / n
    base_per_element = mtu / ((mtu - UDP_HEADER_BYTES) // 4)
    return wire_per_element / base_per_element


def resolve_compression(codec=None, param=None, preset=None, *, rate=None,
                        header_overhead=True, mtu=1518):
    """Resolve the user's codec or preset (default ``onebit``) and its rate r.

    Parameters
    ----------
    codec : str, optional
        Codec name; excludes ``preset``.
    param : int, optional
        Codec parameter (``fixed``/``qsgd``: 2..16).
    preset : str, optional
        Preset name (``terngrad``, ``signsgd``, ``onebit``, ``int8``).
    rate : float, optional
        Use this r (0 < r <= 1) instead of the codec's.
    header_overhead, mtu
        See :func:`wire_rate`.

    Returns
    -------
    Compression
    """
    if codec is not None and preset is not None:
        raise ValueError("codec: give a codec or a preset, not both")
    if codec is None:
        preset = "onebit" if preset is None else preset
        try:
            p = PRESETS[preset]
        except (KeyError, TypeError):
            raise ValueError(f"preset: {preset!r} is not a known preset "
                             f"(known: {', '.join(PRESETS)})") from None
        label, codec, param = p.name, p.codec, p.param
    else:
        label = codec if param in (None, 0) else f"{codec}:{param}"
    info = lookup_codec(codec)
    param = validate_param(info.name, param)
    bits = info.bits_per_element(param or None)
    if rate is not None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (
                0 < rate <= 1):
            raise ValueError(f"rate: compression rate r must be in (0, 1], got {rate!r}")
        return Compression(label, info.name, param, bits, float(rate), "given")
    r = wire_rate(info.name, param, header_overhead=header_overhead, mtu=mtu)
    source = (f"{bits}/32 with {mtu}-byte frame headers" if header_overhead
              else f"{bits}/32, no header overhead")
    return Compression(label, info.name, param, bits, r, source)
