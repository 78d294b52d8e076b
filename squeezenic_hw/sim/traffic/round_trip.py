"""A batch through the TX lane, then the RX lane, each compared with the
reference."""

import time
from dataclasses import dataclass, field

from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from .batches import arrival_times, host_traffic, wire_traffic
from .differences import Difference, differences
from .expected import LaneExpectation, expected_rx, expected_tx
from .stalled import differences_stalled, expected_tx_stalled, holds_threshold

__all__ = ["LaneCheck", "round_trip"]


@dataclass
class LaneCheck:
    """One lane's run of a batch: its input, the expectation, the run (``None`` when it
    did not finish), the differences, and where the time went."""
    lane: str
    inputs: list
    expected: LaneExpectation
    run: object = None
    differences: list = field(default_factory=list)
    reference_seconds: float = 0.0
    model_seconds: float = 0.0
    #: a timed TX run, not stalled, whose lane held its input back: judged as stalled
    held: bool = False


def _run_and_compare(lane, inputs, expected, run_lane, reference_seconds, judge=None,
                     **timing):
    """``judge(run)``, when given, makes the expectation from the run and compares:
    ``(expected, differences)``."""
    check = LaneCheck(lane, inputs, expected, reference_seconds=reference_seconds)
    start = time.perf_counter()
    try:
        check.run = run_lane(lane, inputs, **timing)
    except TimeoutError as exc:
        check.differences = [Difference(lane, None, f"the lane hung: {exc}")]
    except AssertionError as exc:    # the output broke an AXI-Stream rule
        check.differences = [Difference(lane, None, f"AXI-Stream rule broken: {exc}")]
    check.model_seconds = time.perf_counter() - start
    if check.run is not None and judge is not None:
        start = time.perf_counter()
        check.expected, check.differences = judge(check.run)
        check.reference_seconds += time.perf_counter() - start
    elif check.run is not None:
        check.differences = differences(lane, check.run.frames, check.run.counters, expected)
    return check


def round_trip(recipe, run_lane, *, codecs=None, port=DEFAULT_PORT, mtu=DEFAULT_MTU,
               max_host_elements=DEFAULT_HOST_ELEMENTS, stalled=False, exact_idle=True):
    """A batch through the TX lane, then the RX lane, each compared with the reference.

    The RX lane is fed the *reference's* TX output (the TX expectation, ``tuser``
    included), with the recipe's wire-side frames among it: RX is judged on the same
    input whatever the TX hardware did, and when the TX lane matches, that input is
    also what the hardware sent.

    Parameters
    ----------
    recipe : TrafficRecipe
    run_lane : callable
        ``run_lane(lane, frames)`` with ``lane`` ``"tx"`` or ``"rx"``: the run
        (:class:`~squeezenic_hw.sim.lane.LaneRun`) of that lane, built with ``codecs``
        and ``port`` (TX: ``mtu``; RX: ``max_host_elements``), on the :class:`~.axis.AxisFrame` s
        ``frames``. ``TimeoutError`` (the
        lane hung) and ``AssertionError`` (its output broke an AXI-Stream rule) become
        differences. A timed batch's TX run is ``run_lane("tx", frames, times=...,
        idle_timeout=..., close_at_end=False)``: the frames arrive at those cycles, the
        lane's idle timeout is set, ``close`` is never raised (the timeout closes the last
        wire frame), and neither idle cycles nor backpressure may move the frames' beats
        (the reference's clock counts the beats at their times). With ``stalled`` it is
        ``run_lane("tx", frames, times=..., idle_timeout=..., close_at_end=False,
        stalled=True)``: the run keeps its idle cycles and backpressure, and is judged by
        :func:`~.stalled.expected_tx_stalled` and :func:`~.stalled.differences_stalled`
        (when an idle timeout fell is the lane's to say). So is an unstalled timed run whose
        lane held its input back (``LaneRun.input_stalls``: its wire is slower than its
        input, as at a small MTU, so the frames went in later than their times); its check
        is ``held``.
    stalled : bool
        Whether a timed batch's TX run is stalled (no effect on other batches). A timed
        batch whose TX lane encodes ``threshold`` frames is judged as stalled either way
        (:func:`~.stalled.holds_threshold`).
    exact_idle : bool
        Whether the TX lane's idle closes are cycle-exact when it is not stalled (a
        ``NarrowTxLane``'s are not: ``docs/lanes.md``). When false, every timed batch is
        judged as stalled.

    Returns
    -------
    dict
        ``{"tx": LaneCheck, "rx": LaneCheck}``.
    """
    start = time.perf_counter()
    tx_in = host_traffic(recipe, codecs=codecs, port=port)
    times = arrival_times(recipe, tx_in)
    timing = {} if times is None else {"times": times, "idle_timeout": recipe.idle_timeout,
                                       "close_at_end": False}
    tx_expected = expected_tx(tx_in, codecs=codecs, port=port, mtu=mtu, **timing)
    judge = None
    if times is not None and stalled:
        timing["stalled"] = True

    def stalled_judge(run):
        expected, _ = expected_tx_stalled(tx_in, run.frames, run.counters, codecs=codecs,
                                          port=port, mtu=mtu, idle_timeout=recipe.idle_timeout)
        return expected, differences_stalled("tx", run.frames, run.counters, expected, tx_in,
                                             port=port, codecs=codecs)

    def held_or_exact(run):
        # A lane that held its input back (a wire slower than its input: a small MTU)
        # took frames later than their times: when its idle timeouts fell is its own.
        if run.input_stalls:
            return stalled_judge(run)
        return tx_expected, differences("tx", run.frames, run.counters, tx_expected)

    if times is not None:
        judge = stalled_judge if (stalled or not exact_idle or holds_threshold(
            tx_in, codecs=codecs, port=port)) else held_or_exact
    tx = _run_and_compare("tx", tx_in, tx_expected, run_lane, time.perf_counter() - start,
                          judge, **timing)
    tx.held = bool(judge is held_or_exact and tx.run is not None and tx.run.input_stalls)
    start = time.perf_counter()
    rx_in = wire_traffic(recipe, tx.expected.frames, codecs=codecs, port=port)
    rx_expected = expected_rx(rx_in, codecs=codecs, port=port,
                              max_host_elements=max_host_elements)
    rx = _run_and_compare("rx", rx_in, rx_expected, run_lane, time.perf_counter() - start)
    return {"tx": tx, "rx": rx}
