"""The checks a reduce frame alone decides (``classify_reduce_frame``, wire format section
8.4): the reference ring's frames pass, a frame made to fail one check fails it, the
transport checks and the version come first, and the first failing check wins."""

import struct
from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.spec.frames import BypassReason, build_wire_frame, parse
from squeezenic_hw.spec.header import HDR, HEADER_LEN, VERSION
from squeezenic_hw.spec.reduce import (
    FRAME_REDUCE_REASONS,
    ReduceFields,
    ReduceReason,
    classify_reduce_frame,
)

from support.nic_corpus import malformed_reduce_frame, reduce_frames


@pytest.fixture(scope="module")
def ring_frames():
    return reduce_frames(np.random.default_rng(3), max_nodes=6)


def test_the_reference_rings_frames_pass(ring_frames):
    assert {parse(f).codec for f in ring_frames} == set(range(7))
    assert {classify_reduce_frame(f)[1] for f in ring_frames} == {None}


@pytest.mark.parametrize("reason", FRAME_REDUCE_REASONS, ids=lambda r: r.name.lower())
def test_each_check_fails_its_frames(ring_frames, reason):
    rng = np.random.default_rng(reason.value)
    for frame in ring_frames[:40]:
        assert classify_reduce_frame(malformed_reduce_frame(frame, reason, rng))[1] is reason


def test_transport_and_version_come_first(ring_frames):
    frame = ring_frames[0]
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


def test_the_first_failing_check_wins(ring_frames):
    rng = np.random.default_rng(9)
    for i, first in enumerate(FRAME_REDUCE_REASONS):
        for later in FRAME_REDUCE_REASONS[i + 1:]:
            frame = malformed_reduce_frame(ring_frames[i], later, rng)
            twice = malformed_reduce_frame(frame, first, rng)
            got = classify_reduce_frame(twice)[1]
            # making the earlier fault may repair the later one, never outrank it
            assert got is first, (first, later, got)


def test_gather_frames_need_every_contribution(ring_frames):
    gather = next(f for f in ring_frames if ReduceFields.of(parse(f)).gather)
    h = parse(gather)
    f = ReduceFields.of(h)
    short = replace(f, contributions=f.nodes - 1)
    frame = build_wire_frame(replace(h, seed=short.seed_word), gather[HEADER_LEN:])
    assert classify_reduce_frame(frame)[1] is ReduceReason.PHASE
    as_reduce = replace(short, gather=False)
    frame = build_wire_frame(replace(h, seed=as_reduce.seed_word,
                                     flags=as_reduce.flags(h.stochastic)), gather[HEADER_LEN:])
    assert classify_reduce_frame(frame)[1] is None
