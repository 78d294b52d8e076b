"""The checks every node makes alike on a reduce frame (``classify_reduce_frame``, wire
format section 8.4), against a node's own checks (``reference.reduce_rx.ReduceReceiver``):
the reference rings' frames pass, a frame bypassed for a reason is bypassed by the node
for that reason or an earlier one, the checks that need no node agree exactly, and the
transport checks and the version come first."""

import struct
from dataclasses import replace

import pytest

from squeezenic_hw.spec.frames import TRANSPORT_REASONS, BypassReason, build_wire_frame, parse
from squeezenic_hw.spec.header import HDR, HEADER_LEN, VERSION
from squeezenic_hw.spec.reduce import (
    FRAME_REDUCE_REASONS,
    ReduceReason,
    classify_reduce_frame,
)

from support.reduce_frames import SETTINGS, node_stream, ring_case, rng_of


@pytest.fixture(scope="module")
def streams():
    """What each node of rings of every codec setting and a few sizes receives."""
    out = []
    for case in SETTINGS:
        for nodes in (2, 3, 7):
            ring = ring_case(case, nodes, 40 * nodes + 3, seed=nodes)
            for rank in range(nodes):
                stream = node_stream(ring, rank, rng_of("test_reduce", case, nodes, rank),
                                     mutated=0.7, combined=0.3)
                out.append((ring, rank, stream))
    return out


def test_a_frame_bypassed_for_a_reason_every_node_bypasses_by_then(streams):
    seen = set()
    for ring, rank, stream in streams:
        receiver = ring.receiver(rank)
        for frame, _ in stream:
            node = receiver.receive(frame).reason
            _, alone = classify_reduce_frame(frame)
            seen.add(alone)
            if node is None:          # not a reduce frame
                assert alone in TRANSPORT_REASONS or alone is BypassReason.VERSION
            elif node is ReduceReason.NONE:
                assert alone is None
            elif alone is not None:
                assert alone in FRAME_REDUCE_REASONS and node <= alone, (node, alone)
            if node in (ReduceReason.LENGTH, ReduceReason.FLAGS):   # no node's to judge
                assert alone is node
    assert set(FRAME_REDUCE_REASONS) <= seen


def test_transport_and_version_come_first(streams):
    ring, rank, _ = streams[0]
    frame = ring.received(rank)[0]
    at = HDR.IP_CHECKSUM[0]
    wrong = struct.pack("!H", parse(frame).ip_checksum ^ 1)
    assert classify_reduce_frame(frame[:at] + wrong + frame[at + 2:])[1] is (
        BypassReason.IP_CHECKSUM)
    assert classify_reduce_frame(frame, port=4000)[1] is BypassReason.OTHER_PORT
    assert classify_reduce_frame(frame[:HEADER_LEN - 1])[1] is BypassReason.SHORT_FRAME
    v1 = build_wire_frame(replace(parse(frame), version=VERSION), frame[HEADER_LEN:])
    assert classify_reduce_frame(v1)[1] is BypassReason.VERSION
    # the announced length decides, as on the lanes
    assert classify_reduce_frame(frame, tuser_size=len(frame) + 1)[1] is (
        BypassReason.IP_LENGTH)
