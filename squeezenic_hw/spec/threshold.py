"""The wire layout and sizing rules of codec 7, ``threshold`` (``docs/threshold.md``): which
layout a frame takes, how many bytes it is, whether it fits an MTU, and the RX length rule.
The keep rule and the payload bytes are defined by :mod:`squeezenic_hw.reference.threshold`."""

import numpy as np

from .header import HEADER_LEN

__all__ = [
    "BITMAP", "INDEX_LIST", "MAX_N", "layout_bytes", "choose_layout", "payload_size", "fits",
    "min_mtu", "values_count",
]

#: Wire parameter (payload layout) of a bitmap frame.
BITMAP = 0
#: Wire parameter (payload layout) of an index-list frame.
INDEX_LIST = 1
#: Most elements in one wire frame (``n`` is 16 bits).
MAX_N = 2**16 - 1


def layout_bytes(n, k, layout):
    """Bytes of the layout part: ``⌈n/8⌉`` for the bitmap, ``2k`` for the index list."""
    return (int(n) + 7) // 8 if layout == BITMAP else 2 * int(k)


def choose_layout(n, k):
    """The shorter layout for ``n`` elements with ``k`` kept (a tie picks the bitmap)."""
    return BITMAP if (int(n) + 7) // 8 <= 2 * int(k) else INDEX_LIST


def payload_size(n, k):
    """Wire payload bytes of a frame of ``n`` elements with ``k`` kept (shorter layout)."""
    return min((int(n) + 7) // 8, 2 * int(k)) + 4 * int(k)


def fits(n, k, mtu):
    """Whether a wire frame of ``n`` elements, ``k`` kept, fits ``mtu`` bytes (vectorised)."""
    n = np.asarray(n, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    size = np.minimum((n + 7) // 8, 2 * k) + 4 * k
    return (size <= mtu - HEADER_LEN) & (n <= MAX_N)


def min_mtu():
    """Smallest MTU that carries one kept element (64 + 1 + 4 bytes)."""
    return HEADER_LEN + 5


def values_count(n, layout, payload_len):
    """``k`` from the frame's payload length, or ``None`` when the length cannot be right."""
    if layout == BITMAP:
        rest = int(payload_len) - (int(n) + 7) // 8
        return rest // 4 if rest >= 0 and rest % 4 == 0 else None
    if layout == INDEX_LIST:
        return int(payload_len) // 6 if payload_len % 6 == 0 else None
    return None
