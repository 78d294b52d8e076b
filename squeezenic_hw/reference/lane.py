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

__all__ = ["tx", "tx_input", "TxInput", "TxStepper", "rx", "wire_capacity", "frame_beats",
           "back_to_back_times"]

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
    return _back_to_back([frame_beats(f) for f in frames])


def _back_to_back(beats):
    beats = np.array(beats, dtype=np.int64)
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


@dataclass(frozen=True)
class _HostFrame:
    """What the TX lane makes of one frame wherever it falls in time: its beats, why it
    bypasses (``reason``), or its header, codes and, for ``threshold``, keep flags."""
    data: bytes
    beats: int
    header: object
    reason: object
    codes: object = None
    keep: object = None


@dataclass(frozen=True)
class TxInput:
    """Frames as the TX lane classifies and encodes them (:func:`tx_input`), for
    :func:`tx` to coalesce on one set of arrival cycles after another without doing that
    again: only when wire frames close depends on the cycles."""
    port: int
    built: frozenset
    frames: tuple


def tx_input(frames, *, port=DEFAULT_PORT, codecs=None):
    """``frames`` (bytes) classified and encoded by the rules of a TX lane on ``port``
    with ``codecs`` built in: a :class:`TxInput` for :func:`tx`."""
    built = resolve_codecs(codecs)
    out = []
    for frame in frames:
        frame = bytes(frame)
        h, reason = classify_host_frame(frame, port=port, codecs_built_in=built)
        if reason is not None:
            out.append(_HostFrame(frame, frame_beats(frame), h, reason))
            continue
        values = np.frombuffer(frame, dtype="<u4", count=h.n, offset=HEADER_LEN).view(
            np.float32)
        if codec_info(h.codec).variable:
            codes, keep = values, keep_mask(values, h.scale)
        else:
            codes = encode(values, h.codec, param=h.param, scale=h.scale, aux=h.aux,
                           seed=h.seed, offset=h.offset, stochastic=h.stochastic)
            keep = None
        out.append(_HostFrame(frame, frame_beats(frame), h, None, codes, keep))
    return TxInput(port, frozenset(built), tuple(out))


def tx(frames, *, port=DEFAULT_PORT, mtu=DEFAULT_MTU, codecs=None, idle_timeout=None,
       times=None):
    """The TX lane: host frames in, wire frames out (section 6).

    Parameters
    ----------
    frames : iterable of bytes, or TxInput
        Host-side frames in arrival order, or :func:`tx_input` of them (made with this
        ``port`` and ``codecs``).
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
    lane = TxStepper(port=port, mtu=mtu, codecs=codecs, idle_timeout=idle_timeout)
    if not isinstance(frames, TxInput):
        frames = tx_input(frames, port=port, codecs=codecs)
    frames = lane.check(frames).frames
    times = (_back_to_back([f.beats for f in frames]) if times is None
             else [int(t) for t in times])
    if len(times) != len(frames):
        raise ValueError(f"{len(times)} times for {len(frames)} frames")
    for host, t in zip(frames, times, strict=True):
        lane.feed(host, t)
    lane.finish()
    return lane.out, lane.counters


class TxStepper:
    """:func:`tx` one frame at a time, with its state saved and restored at will: what
    finds, in one pass, where a stalled lane's idle timeouts fell (the frames before a
    point do not depend on the arrival cycles after it).

    ``out`` and ``counters`` are :func:`tx`'s so far. :meth:`feed` takes the frames of a
    :class:`TxInput` (made with this ``port`` and ``codecs``: :meth:`check`), in order,
    with their arrival cycles; :meth:`finish` closes the open wire frame (``close_end``).
    """

    def __init__(self, *, port=DEFAULT_PORT, mtu=DEFAULT_MTU, codecs=None, idle_timeout=None):
        if not HEADER_LEN + 4 <= mtu <= MAX_PKT_LEN:
            raise ValueError(f"mtu must be from {HEADER_LEN + 4} to {MAX_PKT_LEN} bytes, "
                             f"got {mtu}")
        if idle_timeout is not None and idle_timeout < 1:
            raise ValueError(f"idle_timeout must be at least 1 cycle, got {idle_timeout}")
        self.built = resolve_codecs(codecs)
        if 7 in self.built and mtu < min_mtu():
            raise ValueError(f"mtu must be at least {min_mtu()} bytes with threshold built "
                             f"in (one kept value), got {mtu}")
        self.port, self.mtu, self.idle_timeout = port, mtu, idle_timeout
        self.out = []
        self.counters = dict.fromkeys(tx_counter_names(), 0)
        self._open = None

    def check(self, frames):
        """``frames`` (a :class:`TxInput`), ``ValueError`` if made for another port or
        other codecs."""
        if frames.port != self.port or frames.built != frozenset(self.built):
            raise ValueError("frames: a TxInput made for another port or other codecs")
        return frames

    def save(self):
        """The state now, for :meth:`restore`."""
        o = self._open
        if o is not None:
            o = replace(o, codes=list(o.codes), keep=list(o.keep))
        return len(self.out), dict(self.counters), o

    def restore(self, saved):
        """Back to the state :meth:`save` gave ``saved``."""
        n, counters, o = saved
        del self.out[n:]
        self.counters = dict(counters)
        self._open = None if o is None else replace(o, codes=list(o.codes), keep=list(o.keep))

    def _close(self, why, flush=False):
        o, self._open = self._open, None
        codes = np.concatenate(o.codes)
        flags = FLAG_ENCODED | (o.header.flags & FLAG_STOCHASTIC) | (FLAG_FLUSH if flush else 0)
        h = replace(o.header, flags=flags, n=o.n)
        if o.bits is None:
            layout, payload = encode_payload(codes, np.concatenate(o.keep))
            h = replace(h, param=layout)
        else:
            payload = pack(codes, o.bits)
        self.out.append(build_wire_frame(h, payload))
        self.counters["wire_frames"] += 1
        self.counters[f"close_{why}"] += 1

    def feed(self, host, t):
        """Frame ``host`` (of a :class:`TxInput`) with its first beat at cycle ``t``."""
        counters, mtu = self.counters, self.mtu
        o = self._open
        if o is not None and self.idle_timeout is not None and \
                t - o.end_time >= self.idle_timeout:
            self._close("idle")
        h, reason = host.header, host.reason
        if reason is not None:
            self.out.append(host.data)
            counters["bypass_frames"] += 1
            counters[f"bypass_{reason.value}"] += 1
            return
        counters["host_frames"] += 1
        counters["elements"] += h.n
        o = self._open
        if o is not None and (o.key != h.coalesce_key() or o.next_offset != h.offset):
            self._close("mismatch")
        info = codec_info(h.codec)
        codes, keep = host.codes, host.keep
        pos = 0
        while pos < h.n:
            if self._open is None:
                off = (h.offset + pos) % 2**32
                sparse = info.variable
                self._open = _Open(header=replace(h, offset=off), key=h.coalesce_key(),
                                   bits=None if sparse else info.bits_per_element(h.param),
                                   capacity=None if sparse else wire_capacity(
                                       info, h.param, mtu),
                                   next_offset=off)
            o = self._open
            if o.bits is None:
                # Data-dependent size: admit elements while the frame still fits the MTU;
                # the frame closes full when its next element does not fit.
                rest = keep[pos:]
                fit = fits(o.n + np.arange(1, rest.size + 1), o.k + np.cumsum(rest), mtu)
                take = rest.size if fit.all() else int(np.argmin(fit))
                if take == 0:
                    self._close("full")
                    continue
                o.keep.append(rest[:take])
                o.k += int(rest[:take].sum())
            else:
                take = min(o.capacity - o.n, h.n - pos)
            o.codes.append(codes[pos:pos + take])
            o.n += take
            pos += take
            o.next_offset = (o.next_offset + take) % 2**32
            o.end_time = t + host.beats
            if o.n == o.capacity or (o.capacity is None and pos < h.n):
                self._close("full", flush=h.flush and pos == h.n)
        if h.flush and self._open is not None:
            self._close("flush", flush=True)

    def finish(self):
        """The end of the input: the open wire frame closes (``close_end``)."""
        if self._open is not None:
            self._close("end")


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
