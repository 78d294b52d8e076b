"""What a timed TX run must produce when stalls moved its beats, so that when an
idle timeout fell is the lane's to say."""

import bisect
from dataclasses import replace

import numpy as np

from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.header import DEFAULT_MTU, DEFAULT_PORT, FLAG_ENCODED

from .differences import Difference, counter_differences, differences
from .expected import LaneExpectation, TxBatch, lane_inputs

__all__ = ["expected_tx_stalled", "differences_stalled", "holds_threshold"]


def _shorter_cut(got, want):
    """The element count of ``got`` when it is ``want`` (a wire frame) closed earlier: the
    same tensor stream and first offset, fewer elements (a threshold frame's layout may
    differ); else ``None``."""
    g, w = parse(got), parse(want)
    if g is None or w is None or not g.flags & FLAG_ENCODED:
        return None
    if w.codec == THRESHOLD_ID:
        g = replace(g, param=w.param)     # a threshold frame's param is its layout
    if (g.coalesce_key(), g.offset) != (w.coalesce_key(), w.offset) or not 0 < g.n < w.n:
        return None
    return g.n


def expected_tx_stalled(frames, got, got_counters, *, codecs=None, port=DEFAULT_PORT,
                        mtu=DEFAULT_MTU, idle_timeout):
    """What a TX lane with idle timeout ``idle_timeout`` must send for ``frames`` when
    stalls (idle cycles, backpressure) moved their beats, so that when an idle timeout
    fell is the lane's to say; ``got`` and ``got_counters`` are what it sent
    (:class:`~.axis.AxisFrame` s) and counted.

    The lane may close the open wire frame for idleness before any frame, and nowhere
    else: every other byte and counter is the reference's. The expectation is
    :func:`~.expected.expected_tx` with ``close_at_end`` false, on arrival cycles that put a gap of
    ``idle_timeout`` cycles before exactly the frames the lane's output shows an idle close
    before. Those are found from the first wire frame out that is the expectation's
    frame closed after fewer elements, at the start of a host frame: the gap goes before
    the first frame after the host frame before it. This repeats until no wire frame is
    such a cut; what still differs then is for :func:`differences_stalled` to report.
    (Frames the lane passes through are told from built ones by their bytes: the
    strategies' built and passed-through frames never share them.) A frame whose key
    differs closes the open frame anyway, and so does a threshold frame whose first
    element does not fit the open one, so a timeout before it shows only in the
    counters: expected ``close_mismatch`` (and, with threshold frames, ``close_full``)
    closes count as idle closes when ``got_counters`` says so.

    Returns
    -------
    (LaneExpectation, list of int)
        The expectation and the indices of the frames an idle close came before.
    """
    batch = TxBatch(frames, codecs, port)
    views, processed = batch.views, batch.processed
    back_to_back = lane_reference.back_to_back_times(views)
    host_index = [k for k, p in enumerate(processed) if p]
    starts = np.cumsum([0] + [parse(views[k]).n for k in host_index]).tolist()
    passed = {v for v, p in zip(views, processed, strict=True) if not p}
    got_wire = [f.data for f in got if f.data not in passed]
    hosts = batch.input.frames
    lane = lane_reference.TxStepper(port=port, mtu=mtu, codecs=codecs,
                                    idle_timeout=idle_timeout)
    # One pass over the frames, comparing each built wire frame with the lane's as it
    # closes. An idle close found before frame f takes the reference back to its state
    # before f (nothing earlier depends on f's cycle), exactly as running it again on the
    # new cycles would; ``saved[f]`` is that state, with the built frames compared and
    # their elements.
    before, saved = [], []
    judging, checked, elements = True, 0, 0
    j = 0
    while j <= len(hosts):
        if len(saved) == j:
            saved.append((lane.save(), checked, elements))
        seen = len(lane.out)
        if j < len(hosts):
            lane.feed(hosts[j], back_to_back[j] + idle_timeout * bisect.bisect_right(before, j))
        else:
            lane.finish()
        frame = None
        for data in lane.out[seen:]:
            if data in passed:
                continue
            k, n_want = checked, parse(data).n
            checked, elements = checked + 1, elements + n_want
            if not judging or k >= len(got_wire) or got_wire[k] == data:
                continue
            n = _shorter_cut(got_wire[k], data)
            element = elements - n_want + (n or 0)
            host = bisect.bisect_left(starts, element)
            if n is None or host >= len(host_index) or starts[host] != element:
                judging = False              # not an idle close: a difference
                continue
            # the gap goes right after the host frame that ends at ``element``
            frame = host_index[host - 1] + 1
            if frame in before:
                judging, frame = False, None
                continue
            break
        if frame is None:
            j += 1
            continue
        bisect.insort(before, frame)
        # (a gap after frame j changes nothing up to it: step j again finds the same
        # difference, now one that ends the judging, as a run on the new cycles would)
        j = min(frame, j)
        state, checked, elements = saved[j]
        lane.restore(state)
        del saved[j + 1:]
    expected = batch.expectation(lane.out, lane.counters, close_at_end=False)
    if judging:
        _idle_in_place_of(expected.counters, got_counters,
                          _encodes_threshold(views, processed))
    return expected, before


def _idle_in_place_of(counters, got, threshold):
    """Count as idle closes the expected closes that a timeout before the next frame
    would have made instead (key mismatches; with ``threshold``, full closes too, which a
    threshold frame makes when the next frame's first element arrives and does not fit)
    when ``got``'s counters say exactly that happened."""
    kinds = ["close_mismatch"] + (["close_full"] if threshold else [])
    fewer = {name: counters[name] - got.get(name, 0) for name in kinds}
    moved = got.get("close_idle", 0) - counters["close_idle"]
    if moved > 0 and min(fewer.values()) >= 0 and sum(fewer.values()) == moved:
        counters["close_idle"] += moved
        for name, n in fewer.items():
            counters[name] -= n


def holds_threshold(frames, *, codecs=None, port=DEFAULT_PORT):
    """Whether the TX lane encodes a ``threshold`` frame of ``frames``. Such a frame may
    hold the lane's decision stage a few cycles after its input took the beats (its wire
    frame's payload is written once the frame has closed, and the dense frames behind it
    wait in order), so an idle close can fall later than the input's clock says, as under
    stalls: a timed batch that holds one is judged by :func:`expected_tx_stalled`."""
    built = resolve_codecs(codecs)
    if THRESHOLD_ID not in built:
        return False
    _, views, processed, _ = lane_inputs(frames, "tx", port, built)
    return _encodes_threshold(views, processed)


def _encodes_threshold(views, processed):
    return any(p and parse(v).codec == THRESHOLD_ID
               for v, p in zip(views, processed, strict=True))


def differences_stalled(lane, frames, counters, expected, inputs, *, port=DEFAULT_PORT,
                        codecs=None):
    """:func:`~.differences.differences` where the order of built and passed-through
    frames is not compared (a passed-through frame may overtake a wire frame that stalls
    hold): the built frames in order, the passed-through ones (those equal to a frame of
    ``inputs`` that the lane does not process) in order, and the counters. A difference's
    ``frame`` is its index in ``frames``."""
    built = resolve_codecs(codecs)
    _, views, processed, _ = lane_inputs(inputs, "tx", port, built)
    passed = {v for v, p in zip(views, processed, strict=True) if not p}
    found = []
    for through in (False, True):
        got = [k for k, f in enumerate(frames) if (f.data in passed) == through]
        want = [f for f in expected.frames if (f.data in passed) == through]
        part = differences(lane, [frames[k] for k in got], {}, LaneExpectation(want, {}))
        kind = "passed-through" if through else "built"
        found += [Difference(lane, got[d.frame] if d.frame is not None and d.frame < len(got)
                             else len(frames), f"{kind} frame: {d.what}") for d in part]
    found.sort(key=lambda d: d.frame)
    return found + counter_differences(lane, counters, expected.counters)
