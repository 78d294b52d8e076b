"""A traffic recipe made into a batch: host frames for the TX lane, wire frames
for the RX lane, and when the host frames arrive."""

from dataclasses import replace

import numpy as np

from squeezenic_hw.spec.codecs import resolve_codecs
from squeezenic_hw.spec.header import DEFAULT_PORT, HEADER_LEN

from ..axis import AxisFrame
from .expected import beat_count
from .malformed import bypass_reason, malformed_frame
from .streams import batch_header, stream_frames

__all__ = ["host_traffic", "arrival_times", "wire_traffic"]


def _interleave(rng, streams, run_length):
    """The frames of ``streams`` in runs of 1…``run_length`` frames of one stream."""
    queues = [list(s) for s in streams]
    heads = [0] * len(queues)
    live = [k for k, q in enumerate(queues) if q]
    out = []
    while live:
        k = live[int(rng.integers(len(live)))]
        take = int(rng.integers(1, run_length + 1))
        out.extend(queues[k][heads[k]:heads[k] + take])
        heads[k] += take
        if heads[k] >= len(queues[k]):
            live.remove(k)
    return out


def _wrong_size(rng, frame):
    """``frame`` as an :class:`AxisFrame` whose beats end early or go on past its
    ``tuser_size`` (at least the 64-byte header is kept)."""
    data = frame.data
    if rng.random() < 0.5 and len(data) > HEADER_LEN:
        cut = int(rng.integers(HEADER_LEN, len(data)))
        return replace(frame, data=data[:cut], size=len(data))
    return replace(frame, data=data + rng.bytes(int(rng.integers(1, 200))), size=len(data))


def _insert(rng, frames, extra):
    for f in extra:
        frames.insert(int(rng.integers(len(frames) + 1)), f)


def _tuser(rng, data):
    return AxisFrame(data, src=int(rng.integers(0, 65536)), dst=int(rng.integers(0, 65536)))


def host_traffic(recipe, *, codecs=None, port=DEFAULT_PORT):
    """The TX lane's input of a :class:`~.recipes.TrafficRecipe`: :class:`AxisFrame` s in order.

    ``codecs`` and ``port`` are the lane's build; the recipe's codecs must be built in."""
    rng = np.random.default_rng([recipe.seed, 0])
    base = batch_header(rng, port)
    streams = [stream_frames(s, base, k) for k, s in enumerate(recipe.streams)]
    frames = [_tuser(rng, f) for f in _interleave(rng, streams, recipe.run_length)]
    for k in rng.choice(len(frames), size=min(recipe.size_errors, len(frames)),
                        replace=False).tolist():
        frames[k] = _wrong_size(rng, frames[k])
    _insert(rng, frames, [_tuser(rng, malformed_frame(m, "tx", codecs=codecs, port=port))
                          for m in recipe.malformed])
    return frames


def arrival_times(recipe, frames):
    """The cycles at which ``frames`` (the batch's :func:`host_traffic`) start to arrive in
    a timed batch, or ``None`` (back to back). After each frame's beats comes a gap of 0,
    1, T−1, T, T+1 or 2T+7 cycles (T the idle timeout): every side of the timeout."""
    if recipe.idle_timeout is None:
        return None
    T = recipe.idle_timeout
    gaps = [g for g in (0, 1, T - 1, T, T + 1, 2 * T + 7) if g >= 0]
    rng = np.random.default_rng([recipe.seed, 2])
    times, t = [], 5
    for f in frames:
        times.append(t)
        t += beat_count(len(f.data)) + int(rng.choice(gaps))
    return times


def wire_traffic(recipe, tx_output, *, codecs=None, port=DEFAULT_PORT):
    """The RX lane's input of a :class:`~.recipes.TrafficRecipe`: ``tx_output`` (what the TX lane
    sends, :class:`AxisFrame` s with their ``tuser``) with the recipe's wire-side
    malformed frames among them and some of its wire frames' ``tuser_size`` wrong."""
    rng = np.random.default_rng([recipe.seed, 1])
    built = resolve_codecs(codecs)
    frames = list(tx_output)
    wire = [k for k, f in enumerate(frames) if bypass_reason(f.data, "rx", port, built) is None]
    for k in rng.choice(wire, size=min(recipe.wire_size_errors, len(wire)),
                        replace=False).tolist():
        frames[k] = _wrong_size(rng, frames[k])
    _insert(rng, frames, [_tuser(rng, malformed_frame(m, "rx", codecs=codecs, port=port))
                          for m in recipe.wire_malformed])
    return frames
