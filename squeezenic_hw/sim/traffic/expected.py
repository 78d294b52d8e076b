"""What the lanes must produce for a batch, from the numpy reference: frames with
their ``tuser``, and counters."""

import bisect
from dataclasses import dataclass

import numpy as np

from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.spec.codecs import resolve_codecs
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from ..axis import AxisFrame
from .malformed import bypass_reason

__all__ = ["lane_view", "LaneExpectation", "expected_tx", "expected_rx"]


def beat_count(length):
    return max(1, -(-length // 64))


def _size(frame):
    return len(frame.data) if frame.size is None else frame.size


def _axis(frame):
    return frame if isinstance(frame, AxisFrame) else AxisFrame(bytes(frame))


def lane_view(frame):
    """The bytes a lane reads of ``frame``: ``tuser_size`` of them, zeros where the beats
    ended early (what the lanes do with a frame whose ``tuser_size`` is wrong)."""
    frame = _axis(frame)
    size = _size(frame)
    return (frame.data + bytes(max(0, size - len(frame.data))))[:size]


@dataclass
class LaneExpectation:
    """What a hardware lane must produce: output frames in order with their ``tuser``
    (:class:`AxisFrame`), and its counters (the reference's and ``size_errors``)."""
    frames: list
    counters: dict


def lane_inputs(frames, lane, port, built):
    """The frames as :class:`AxisFrame` s, what the lane reads of each, and whether it
    processes it; ``ValueError`` for a bypassed frame whose ``tuser_size`` is wrong."""
    frames = [_axis(f) for f in frames]
    views = [lane_view(f) for f in frames]
    processed = [bypass_reason(v, lane, port, built) is None for v in views]
    for k, (f, p) in enumerate(zip(frames, processed, strict=True)):
        if not p and _size(f) != len(f.data):
            raise ValueError(f"frames: frame {k} is passed unchanged but its tuser_size "
                             f"({_size(f)}) is not its length ({len(f.data)})")
    errors = sum(p and beat_count(len(f.data)) != beat_count(_size(f))
                 for f, p in zip(frames, processed, strict=True))
    return frames, views, processed, errors


def expected_tx(frames, *, codecs=None, port=DEFAULT_PORT, mtu=DEFAULT_MTU, idle_timeout=None,
                times=None, close_at_end=True):
    """What a ``TxLane(codecs=codecs, port=port, mtu=mtu)`` must send for ``frames``
    (:class:`AxisFrame` s or ``bytes``, back to back, or each starting at its cycle of
    ``times``), with its idle timeout ``idle_timeout`` (``None``: never). With
    ``close_at_end`` false the lane's ``close`` is never raised: the wire frame open after
    the last host frame closes on the idle timeout instead (``close_idle``, not
    ``close_end``), which then must be set.

    Frames and counters are :func:`squeezenic_hw.reference.lane.tx`'s on what the lane
    reads (:func:`lane_view`); ``size_errors`` counts processed frames whose beats
    disagree with their ``tuser_size``. A bypassed frame keeps its ``tuser``, a wire
    frame takes that of the host frame holding its first element.

    Returns
    -------
    LaneExpectation
    """
    return TxBatch(frames, codecs, port).expected(mtu=mtu, idle_timeout=idle_timeout,
                                                   times=times, close_at_end=close_at_end)


class TxBatch:
    """Frames as a TX lane reads, classifies and encodes them: what :func:`expected_tx`
    makes once and coalesces on any arrival cycles (:meth:`expected`)."""

    def __init__(self, frames, codecs, port):
        self.codecs, self.port = codecs, port
        self.frames, self.views, self.processed, self.errors = lane_inputs(
            frames, "tx", port, resolve_codecs(codecs))
        self.input = lane_reference.tx_input(self.views, port=port, codecs=codecs)
        self.hosts = [(parse(v).n, f) for v, f, p in
                      zip(self.views, self.frames, self.processed, strict=True) if p]
        self.ends = np.cumsum([n for n, _ in self.hosts]).tolist()
        self.bypassed = [(v, f) for v, f, p in
                         zip(self.views, self.frames, self.processed, strict=True) if not p]

    def expected(self, *, mtu, idle_timeout, times, close_at_end):
        if not close_at_end and idle_timeout is None:
            raise ValueError("close_at_end: without close, an idle timeout must close the "
                             "last wire frame")
        out, counters = lane_reference.tx(self.input, port=self.port, mtu=mtu,
                                          codecs=self.codecs, idle_timeout=idle_timeout,
                                          times=times)
        return self.expectation(out, counters, close_at_end=close_at_end)

    def expectation(self, out, counters, *, close_at_end):
        """The :class:`LaneExpectation` of the reference's ``out`` and ``counters``."""
        counters = dict(counters)
        if not close_at_end and counters["close_end"]:
            counters["close_end"] -= 1
            counters["close_idle"] += 1
        counters["size_errors"] = self.errors
        hosts, ends, bypassed = self.hosts, self.ends, self.bypassed
        expected, next_bypassed, element = [], 0, 0
        for data in out:
            # A built frame never equals a bypassed one in the strategies' traffic (their
            # IPv4 identifications differ): the bypassed frames are the outputs that equal
            # them.
            if next_bypassed < len(bypassed) and data == bypassed[next_bypassed][0]:
                src = bypassed[next_bypassed][1]
                next_bypassed += 1
            else:
                src = hosts[bisect.bisect_right(ends, element)][1]
                element += parse(data).n
            expected.append(AxisFrame(data, src=src.src, dst=src.dst))
        return LaneExpectation(expected, counters)


def expected_rx(frames, *, codecs=None, port=DEFAULT_PORT,
                max_host_elements=DEFAULT_HOST_ELEMENTS):
    """What an ``RxLane(codecs=codecs, port=port, max_host_elements=...)`` must send for
    ``frames``: :func:`squeezenic_hw.reference.lane.rx`'s frames and counters on what the
    lane reads, ``size_errors`` as in :func:`expected_tx`; every frame out takes the
    ``tuser`` of the frame it came from.

    Returns
    -------
    LaneExpectation
    """
    built = resolve_codecs(codecs)
    frames, views, processed, errors = lane_inputs(frames, "rx", port, built)
    out, counters = lane_reference.rx(views, port=port, codecs=codecs,
                                      max_host_elements=max_host_elements)
    counters["size_errors"] = errors
    sources = []
    for v, f, p in zip(views, frames, processed, strict=True):
        sources += [f] * (-(-parse(v).n // max_host_elements) if p else 1)
    if len(sources) != len(out):
        raise RuntimeError(f"{len(out)} frames from the reference RX for {len(sources)} "
                           f"expected")
    return LaneExpectation([AxisFrame(d, src=s.src, dst=s.dst)
                            for d, s in zip(out, sources, strict=True)], counters)
