"""Reference of the RX checkers: counters and running CRC over a lane's host frames.

:func:`check_frames` gives, for a list of frames (what one RX lane delivers to
the host), exactly what :class:`~squeezenic_hw.gateware.arrays.checker.FrameChecker`
shows after the same frames: the same keys, the same values (the hardware
counters are 64 bits wide and wrap there; the reference does not).

A frame is **counted** (a SqueezeNIC host frame) when it has at least 64 bytes,
EtherType 0x0800, byte 14 = 0x45 (IPv4 without options), IP protocol 17
(UDP), UDP destination port ``port`` and the ``encoded`` flag (byte 45 bit 0)
clear. Nothing else is checked (not the checksums, lengths, version, codec or
``n``); every other frame counts as ``bypass`` and is otherwise ignored.
"""

import struct
import zlib

from squeezenic_hw.spec.header import DEFAULT_PORT, FLAG_ENCODED, HEADER_LEN

__all__ = ["CHECKER_KEYS", "is_host_frame", "check_frames"]

#: The counters, in the order the checker's ports are declared.
CHECKER_KEYS = ("frames", "elements", "bytes", "gaps", "last_offset_end", "bypass", "crc")


def _bytes(frame):
    return bytes(frame.data if hasattr(frame, "data") else frame)


def is_host_frame(frame, *, port=DEFAULT_PORT):
    """Whether the checker counts ``frame`` (see the module docstring for the rule)."""
    f = _bytes(frame)
    return (len(f) >= HEADER_LEN and f[12:14] == b"\x08\x00" and f[14] == 0x45
            and f[23] == 17 and struct.unpack_from("!H", f, 36)[0] == port
            and not f[45] & FLAG_ENCODED)


def check_frames(frames, *, port=DEFAULT_PORT):
    """Counters of one checker after ``frames`` (``bytes``, or objects with ``.data``).

    Returns
    -------
    dict
        ``frames``: counted frames. ``elements``: sum of their header ``n``.
        ``bytes``: sum of their lengths. ``gaps``: counted frames whose header
        ``offset`` is not the previous counted frame's ``offset + n`` (mod 2³²);
        the first counted frame only sets that expectation. ``last_offset_end``:
        ``offset + n`` (mod 2³²) of the last counted frame, 0 before any.
        ``bypass``: frames not counted. ``crc``: ``zlib.crc32`` (CRC-32 of IEEE
        802.3) of the concatenated payloads (bytes 64… of each counted frame, as
        received: ``4 n`` bytes for a well-formed host frame); 0 before any byte.
    """
    out = dict.fromkeys(CHECKER_KEYS, 0)
    crc = 0
    expected = None
    for frame in frames:
        f = _bytes(frame)
        if not is_host_frame(f, port=port):
            out["bypass"] += 1
            continue
        n = struct.unpack_from("<H", f, 46)[0]
        offset = struct.unpack_from("<I", f, 60)[0]
        out["frames"] += 1
        out["elements"] += n
        out["bytes"] += len(f)
        if expected is not None and offset != expected:
            out["gaps"] += 1
        expected = (offset + n) % 2**32
        out["last_offset_end"] = expected
        crc = zlib.crc32(f[HEADER_LEN:], crc)
    out["crc"] = crc
    return out
