"""Random lane traffic: hypothesis strategies, the frames they stand for, and what the
lanes must make of them.

Hypothesis draws *recipes*, small records of what a batch of traffic holds (which codec,
parameter, flags and scale kinds each tensor stream has, how many frames, which
malformations, with numpy seeds for everything bulky); :func:`~.batches.host_traffic` and
:func:`~.batches.wire_traffic` materialise a recipe into frames with numpy, so that a batch of
hundreds of frames costs hypothesis a few hundred choices and shrinks to a small one.

* :func:`~.strategies.stream_recipes`: one tensor stream of host frames of a built-in codec with any
  parameter, lengths of 1…363 elements (partial last beats included), random or edge
  scales and aux values, any seed, stochastic and flush flags, values with a share of
  fp32 edge values (±0, subnormals, ±inf, NaN payloads) and rounding ties, contiguous
  offsets (wrapping at 2³², with gaps);
* :func:`~.strategies.malformed_recipes`: a frame the lane must pass unchanged, one kind per
  ``BypassReason`` of the lane (:data:`~.recipes.MALFORMED_KINDS`), ARP, IPv6 and VLAN-tagged
  frames among the not-IPv4 ones;
* :func:`~.strategies.traffic_recipes`: a batch of exactly ``frames`` host frames:
  streams whose keys differ in one field, interleaved in runs so that coalescing starts
  and stops, malformed frames between them, frames whose ``tuser_size`` is wrong, random
  ``tuser_src``/``tuser_dst``; and for the RX lane, wire-side malformed frames and
  wrong sizes.

:func:`~.expected.expected_tx` and :func:`~.expected.expected_rx` give the frames (with
``tuser``) and counters (``size_errors`` included) a hardware lane must produce, from the
numpy reference (:mod:`squeezenic_hw.reference.lane`); :func:`~.differences.differences`
compares a run with them, and :func:`~.round_trip.round_trip` runs a batch through a TX
and an RX lane and compares both. The campaign of ``squeezenic-hw fuzz`` and the property
tests both use them (``docs/fuzz.md``).

One file per idea: :mod:`.recipes` (what is drawn), :mod:`.strategies` (how),
:mod:`.streams`, :mod:`.malformed` and :mod:`.batches` (recipes made into frames),
:mod:`.expected`, :mod:`.differences` and :mod:`.stalled` (what the lanes must make of them
and how a run differs), :mod:`.round_trip` (a batch through both lanes), :mod:`.lanes` (the
lanes' builders).
"""

from .batches import arrival_times, host_traffic, wire_traffic
from .differences import Difference, differences
from .expected import LaneExpectation, expected_rx, expected_tx, lane_view
from .lanes import lane_builders, narrow_spec
from .malformed import malformed_frame
from .recipes import (
    IDENTITY_FIELDS,
    LENGTH_KINDS,
    MALFORMED_KINDS,
    MAX_ELEMENTS,
    NARROW_SCALE_KINDS,
    OFFSET_KINDS,
    SCALE_KINDS,
    VALUE_KINDS,
    MalformedRecipe,
    StreamRecipe,
    TrafficRecipe,
)
from .round_trip import LaneCheck, round_trip
from .stalled import differences_stalled, expected_tx_stalled, holds_threshold
from .strategies import (
    IDLE_TIMEOUTS,
    MAX_STREAM_FRAMES,
    SEEDED_BACKEND,
    draw_example,
    malformed_recipes,
    stream_recipes,
    traffic_recipes,
)
from .streams import stream_frames

__all__ = [
    "MAX_ELEMENTS", "SCALE_KINDS", "VALUE_KINDS", "LENGTH_KINDS", "OFFSET_KINDS",
    "IDENTITY_FIELDS", "MALFORMED_KINDS", "StreamRecipe", "MalformedRecipe", "TrafficRecipe",
    "NARROW_SCALE_KINDS", "MAX_STREAM_FRAMES", "IDLE_TIMEOUTS", "stream_recipes",
    "malformed_recipes", "traffic_recipes", "draw_example", "SEEDED_BACKEND", "stream_frames",
    "malformed_frame", "host_traffic", "arrival_times", "wire_traffic", "lane_view",
    "LaneExpectation", "expected_tx", "expected_rx", "Difference", "differences",
    "expected_tx_stalled", "differences_stalled", "holds_threshold", "LaneCheck", "round_trip",
    "lane_builders", "narrow_spec",
]
