"""Frames in pcap files, through scapy's pcap reader and writer.

Frames stay ``bytes`` everywhere else. Timestamps map to 250 MHz clock cycles
(4 ns each): files are written with nanosecond resolution, frame ``i`` at
``cycles[i] · 4 ns``; reading gives cycles relative to the first frame.
"""

import logging
import os
import struct
from decimal import Decimal

__all__ = ["CLOCK_HZ", "read_frames", "write_frames"]

#: Lane clock: one cycle per 4 ns.
CLOCK_HZ = 250_000_000
_LINKTYPE_ETHERNET = 1


def read_frames(path):
    """Read every frame of a pcap (or pcapng) file of Ethernet frames.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    (list of bytes, list of int)
        The frames and their arrival times in cycles, relative to the first frame.

    Raises
    ------
    ValueError
        When the file is not a complete pcap/pcapng file of whole Ethernet frames
        (bad magic, truncated records, snapped packets, other link types).
    OSError
        When the file cannot be opened.
    """
    from scapy.error import Scapy_Exception
    from scapy.utils import RawPcapReader

    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # errors are ours to raise
    path = str(path)
    size = os.path.getsize(path)  # OSError (missing, unreadable) before scapy's messages
    frames, stamps = [], []
    try:
        with RawPcapReader(path) as reader:
            linktype = getattr(reader, "linktype", _LINKTYPE_ETHERNET)
            nano = getattr(reader, "nano", False)
            classic = hasattr(reader, "nano")  # pcap, not pcapng
            consumed = 24
            for data, meta in reader:
                lt = getattr(meta, "linktype", linktype)
                if lt != _LINKTYPE_ETHERNET:
                    raise ValueError(f"{path}: link type {lt} is not Ethernet (1)")
                caplen = getattr(meta, "caplen", len(data))
                consumed += 16 + caplen
                if len(data) < caplen:
                    raise ValueError(f"{path}: truncated file (frame {len(frames)} has "
                                     f"{len(data)} of {caplen} bytes)")
                if meta.wirelen > len(data):
                    raise ValueError(f"{path}: frame {len(frames)} was captured with "
                                     f"{len(data)} of its {meta.wirelen} bytes")
                if hasattr(meta, "tshigh"):  # pcapng
                    t = Decimal((meta.tshigh << 32) | meta.tslow) / Decimal(meta.tsresol)
                else:
                    t = Decimal(meta.sec) + Decimal(meta.usec) / Decimal(
                        10**9 if nano else 10**6)
                frames.append(bytes(data))
                stamps.append(t)
            if classic and not _gzipped(path) and consumed != size:
                raise ValueError(f"{path}: truncated file or trailing bytes after frame "
                                 f"{len(frames)}")
    except ValueError:
        raise
    except (Scapy_Exception, EOFError, struct.error, TypeError) as exc:
        raise ValueError(f"{path}: not a pcap or pcapng file ({exc})") from None
    t0 = stamps[0] if stamps else Decimal(0)
    cycles = [int((t - t0) * CLOCK_HZ) for t in stamps]
    return frames, cycles


def _gzipped(path):
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def write_frames(path, frames, cycles=None):
    """Write frames to a nanosecond pcap file of link type Ethernet.

    Parameters
    ----------
    path : str or os.PathLike
    frames : iterable of bytes
    cycles : sequence of int, optional
        Timestamp of each frame in cycles; default: one frame after the other,
        one 64-byte beat per cycle.
    """
    from scapy.utils import RawPcapWriter

    frames = [bytes(f) for f in frames]
    if cycles is None:
        cycles, t = [], 0
        for f in frames:
            cycles.append(t)
            t += max(1, -(-len(f) // 64))
    with RawPcapWriter(str(path), linktype=_LINKTYPE_ETHERNET, nano=True, sync=False) as w:
        w.write_header(None)
        for f, c in zip(frames, cycles, strict=True):
            ns = int(c) * 1_000_000_000 // CLOCK_HZ
            w.write_packet(f, sec=ns // 10**9, usec=ns % 10**9)
