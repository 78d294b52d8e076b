"""Parsing and checking of physical quantities: bytes, bandwidths, times.

The CLI accepts values with or without a unit (``25MiB``, ``100Gb/s``,
``10us``); the library works in SI base units only (bytes, bytes per second,
seconds). Every checker raises ``ValueError`` that names the parameter.
"""

import math
import numbers
import re

__all__ = [
    "GBIT", "parse_size", "parse_bandwidth", "parse_time",
    "check_positive", "check_nonnegative", "check_count",
]

GBIT = 1e9 / 8
"""Bytes per second in one Gb/s."""

_NUMBER = r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*"

_SIZE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}

_TIME_DIVISORS = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}


def _split(text, name, *, zero_ok=False):
    m = re.fullmatch(_NUMBER + r"(.*?)\s*", str(text))
    if not m:
        raise ValueError(f"{name}: cannot read {text!r} as a number with an optional unit")
    value = float(m.group(1))
    if value < 0 or (value == 0 and not zero_ok):
        raise ValueError(f"{name}: must be {'>=' if zero_ok else '>'} 0, got {text!r}")
    return value, m.group(2)


def parse_size(text, name="size"):
    """Read a byte count such as ``25MiB``, ``1.36GB``, ``1e9`` (bytes).

    Decimal prefixes (kB, MB, GB, TB) are powers of 1000, binary ones (KiB,
    MiB, GiB, TiB) powers of 1024. A bare number is bytes.

    Returns
    -------
    float
        The size in bytes (positive and finite).
    """
    value, unit = _split(text, name)
    try:
        scale = _SIZE_UNITS[unit.lower()]
    except KeyError:
        raise ValueError(f"{name}: unknown size unit {unit!r} in {text!r} "
                         "(use B, kB, MB, GB, KiB, MiB, GiB)") from None
    return check_positive(value * scale, name)


def parse_bandwidth(text, name="bandwidth"):
    """Read a bandwidth such as ``100``, ``100Gb/s``, ``150GB/s``, ``400Gbps``.

    A lower-case ``b`` is bits, an upper-case ``B`` bytes; a bare number is
    Gb/s (the unit of network links and of ``host_bw``).

    Returns
    -------
    float
        The bandwidth in bytes per second (positive and finite).
    """
    value, unit = _split(text, name)
    if unit == "":
        return check_positive(value * GBIT, name)
    m = re.fullmatch(r"([kKmMgGtT]?)(b|B)(?:/s|ps|it/s|its/s|yte/s|ytes/s)", unit)
    if not m:
        raise ValueError(f"{name}: unknown bandwidth unit {unit!r} in {text!r} "
                         "(use Gb/s, Gbps, GB/s, Mb/s, Tb/s; a bare number is Gb/s)")
    scale = _PREFIX[m.group(1).lower()] / (8 if m.group(2) == "b" else 1)
    return check_positive(value * scale, name)


def parse_time(text, name="time", default_unit="s"):
    """Read a duration such as ``3.3``, ``3.3s``, ``10us``, ``0.5ms``.

    Parameters
    ----------
    text : str
        Number with an optional unit (s, ms, us, µs, ns).
    name : str
        Parameter name for error messages.
    default_unit : str
        Unit of a bare number.

    Returns
    -------
    float
        The duration in seconds (non-negative and finite).
    """
    value, unit = _split(text, name, zero_ok=True)
    try:
        divisor = _TIME_DIVISORS[unit or default_unit]
    except KeyError:
        raise ValueError(f"{name}: unknown time unit {unit!r} in {text!r} "
                         "(use s, ms, us, ns)") from None
    return check_nonnegative(value / divisor, name)


def _real(value, name):
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name}: must be finite, got {value!r}")
    return v


def check_positive(value, name):
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless > 0 and finite."""
    v = _real(value, name)
    if v <= 0:
        raise ValueError(f"{name}: must be > 0, got {value!r}")
    return v


def check_nonnegative(value, name):
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless >= 0 and finite."""
    v = _real(value, name)
    if v < 0:
        raise ValueError(f"{name}: must be >= 0, got {value!r}")
    return v


def check_count(value, name, minimum=1):
    """Return ``value`` as int; raise ``ValueError`` naming ``name`` unless an int >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)
