"""The numpy reference of the TX and RX lanes (``docs/wire-format.md`` sections 6, 7).

Frames are ``bytes``; the hardware's ``tuser_src``/``tuser_dst`` are not modelled
here (they are passed through by the lanes; see ``docs/frames.md``). The
hardware must produce exactly the frames, in exactly the order, that
:func:`tx` and :func:`rx` produce.
"""

from dataclasses import dataclass, field, replace

import numpy as np

from squeezenic_hw.spec.codecs import codec_info, resolve_codecs
from squeezenic_hw.spec.counters import rx_counter_names, tx_counter_names
from squeezenic_hw.spec.frames import (
    build_host_frame,
    build_wire_frame,
    classify_host_frame,
    classify_wire_frame,
)
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    DEFAULT_PORT,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    MAX_PKT_LEN,
)
from squeezenic_hw.spec.threshold import fits, min_mtu

from .codecs import decode, encode, pack, unpack
from .threshold import decode_payload, encode_payload, keep_mask

__all__ = ["tx", "rx", "wire_capacity", "frame_beats", "back_to_back_times"]

_MAX_N = 2**16 - 1


def wire_capacity(codec, param, mtu):
    """Most elements one wire frame of at most ``mtu`` bytes can carry (≤ 65535)."""
    b = codec_info(codec).bits_per_element(param)
    return min(_MAX_N, (mtu - HEADER_LEN) * 8 // b)


def frame_beats(frame):
    """512-bit beats of a frame (at least 1)."""
    return max(1, -(-len(frame) // 64))


def back_to_back_times(frames):
    """Arrival cycle of each frame's first beat when frames come one beat per cycle."""
    beats = np.array([frame_beats(f) for f in frames], dtype=np.int64)
    return (np.cumsum(beats) - beats).tolist()


@dataclass
class _Open:
    """The wire frame TX is assembling (``bits`` is ``None`` for ``threshold``)."""
    header: object
    key: tuple
    bits: int | None
    capacity: int | None
    codes: list = field(default_factory=list)
    keep: list = field(default_factory=list)   # threshold: keep flags of the elements
    n: int = 0
    k: int = 0                                 # threshold: kept elements
    next_offset: int = 0
    end_time: int = 0  # cycle after the last beat of the last host frame in it


def tx(frames, *, port=DEFAULT_PORT, mtu=DEFAULT_MTU, codecs=None, idle_timeout=None,
       times=None):
    """The TX lane: host frames in, wire frames out (section 6).

    Parameters
    ----------
    frames : iterable of bytes
        Host-side frames in arrival order.
    port : int
        SqueezeNIC UDP destination port.
    mtu : int
        Largest wire frame in bytes, 68…9600 (69… with ``threshold`` built in).
    codecs : iterable of str or int, optional
        Codecs built in (default: 0–6; ``threshold``, 7, only when named).
    idle_timeout : int, optional
        Close the open wire frame when the next frame's first beat arrives at
        least this many cycles after the last beat of the last host frame in it.
        ``None``: never.
    times : sequence of int, optional
        Arrival cycle of each frame's first beat; default back to back.

    Returns
    -------
    (list of bytes, dict)
        Output frames in order and the counters (keys: :func:`tx_counter_names`).
    """
    frames = [bytes(f) for f in frames]
    if not HEADER_LEN + 4 <= mtu <= MAX_PKT_LEN:
        raise ValueError(f"mtu must be from {HEADER_LEN + 4} to {MAX_PKT_LEN} bytes, got {mtu}")
    if idle_timeout is not None and idle_timeout < 1:
        raise ValueError(f"idle_timeout must be at least 1 cycle, got {idle_timeout}")
    built = resolve_codecs(codecs)
    if 7 in built and mtu < min_mtu():
        raise ValueError(f"mtu must be at least {min_mtu()} bytes with threshold built in "
                         f"(one kept value), got {mtu}")
    times = back_to_back_times(frames) if times is None else [int(t) for t in times]
    if len(times) != len(frames):
        raise ValueError(f"{len(times)} times for {len(frames)} frames")
    counters = dict.fromkeys(tx_counter_names(), 0)
    out = []
    state = {"open": None}

    def close(why, flush=False):
        o = state["open"]
        state["open"] = None
        codes = np.concatenate(o.codes)
        flags = FLAG_ENCODED | (o.header.flags & FLAG_STOCHASTIC) | (FLAG_FLUSH if flush else 0)
        h = replace(o.header, flags=flags, n=o.n)
        if o.bits is None:
            layout, payload = encode_payload(codes, np.concatenate(o.keep))
            h = replace(h, param=layout)
        else:
            payload = pack(codes, o.bits)
        out.append(build_wire_frame(h, payload))
        counters["wire_frames"] += 1
        counters[f"close_{why}"] += 1

    for frame, t in zip(frames, times, strict=True):
        o = state["open"]
        if o is not None and idle_timeout is not None and t - o.end_time >= idle_timeout:
            close("idle")
        h, reason = classify_host_frame(frame, port=port, codecs_built_in=built)
        if reason is not None:
            out.append(frame)
            counters["bypass_frames"] += 1
            counters[f"bypass_{reason.value}"] += 1
            continue
        counters["host_frames"] += 1
        counters["elements"] += h.n
        o = state["open"]
        if o is not None and (o.key != h.coalesce_key() or o.next_offset != h.offset):
            close("mismatch")
        values = np.frombuffer(frame, dtype="<u4", count=h.n, offset=HEADER_LEN).view(
            np.float32)
        info = codec_info(h.codec)
        if info.variable:
            codes, keep = values, keep_mask(values, h.scale)
        else:
            codes = encode(values, h.codec, param=h.param, scale=h.scale, aux=h.aux,
                           seed=h.seed, offset=h.offset, stochastic=h.stochastic)
        pos = 0
        while pos < h.n:
            if state["open"] is None:
                off = (h.offset + pos) % 2**32
                sparse = info.variable
                state["open"] = _Open(header=replace(h, offset=off), key=h.coalesce_key(),
                                      bits=None if sparse else info.bits_per_element(h.param),
                                      capacity=None if sparse else wire_capacity(
                                          info, h.param, mtu),
                                      next_offset=off)
            o = state["open"]
            if o.bits is None:
                # Data-dependent size: admit elements while the frame still fits the MTU;
                # the frame closes full when its next element does not fit.
                rest = keep[pos:]
                fit = fits(o.n + np.arange(1, rest.size + 1), o.k + np.cumsum(rest), mtu)
                take = rest.size if fit.all() else int(np.argmin(fit))
                if take == 0:
                    close("full")
                    continue
                o.keep.append(rest[:take])
                o.k += int(rest[:take].sum())
            else:
                take = min(o.capacity - o.n, h.n - pos)
            o.codes.append(codes[pos:pos + take])
            o.n += take
            pos += take
            o.next_offset = (o.next_offset + take) % 2**32
            o.end_time = t + frame_beats(frame)
            if o.n == o.capacity or (o.capacity is None and pos < h.n):
                close("full", flush=h.flush and pos == h.n)
        if h.flush and state["open"] is not None:
            close("flush", flush=True)
    if state["open"] is not None:
        close("end")
    return out, counters


def rx(frames, *, port=DEFAULT_PORT, max_host_elements=DEFAULT_HOST_ELEMENTS, codecs=None):
    """The RX lane: wire frames in, host frames out (section 7).

    Parameters
    ----------
    frames : iterable of bytes
        Wire-side frames in arrival order.
    port : int
        SqueezeNIC UDP destination port.
    max_host_elements : int
        Most elements per host frame, 1…2384 (so a host frame fits 9600 bytes).
    codecs : iterable of str or int, optional
        Codecs built in (default: 0–6; ``threshold`` only when named).

    Returns
    -------
    (list of bytes, dict)
        Output frames in order and the counters (keys: :func:`rx_counter_names`).
    """
    if not 1 <= max_host_elements <= (MAX_PKT_LEN - HEADER_LEN) // 4:
        raise ValueError(f"max_host_elements must be from 1 to "
                         f"{(MAX_PKT_LEN - HEADER_LEN) // 4}, got {max_host_elements}")
    built = resolve_codecs(codecs)
    counters = dict.fromkeys(rx_counter_names(), 0)
    out = []
    for frame in frames:
        frame = bytes(frame)
        h, reason = classify_wire_frame(frame, port=port, codecs_built_in=built)
        if reason is not None:
            out.append(frame)
            counters["bypass_frames"] += 1
            counters[f"bypass_{reason.value}"] += 1
            continue
        counters["wire_frames"] += 1
        counters["elements"] += h.n
        info = codec_info(h.codec)
        if info.variable:
            d = decode_payload(frame[HEADER_LEN:], h.n, h.param)
            values = d.values
            counters["sparse_count_errors"] += d.count_error
            counters["sparse_layout_errors"] += d.layout_error
        else:
            codes = unpack(frame[HEADER_LEN:], info.bits_per_element(h.param), h.n)
            values = decode(codes, info, param=h.param, scale=h.scale, aux=h.aux)
        for k in range(0, h.n, max_host_elements):
            last = k + max_host_elements >= h.n
            flags = (h.flags & FLAG_STOCHASTIC) | (h.flags & FLAG_FLUSH if last else 0)
            hh = replace(h, flags=flags, offset=(h.offset + k) % 2**32)
            out.append(build_host_frame(hh, values[k:k + max_host_elements]))
            counters["host_frames"] += 1
    return out, counters
