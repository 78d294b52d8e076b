"""The receive checks on reduce frames (docs/wire-format.md section 8.4), in the numpy
reference: every frame of a reference ring is taken, every mutated frame is bypassed for
the check it fails first."""

import itertools
from collections import Counter

import pytest

from squeezenic_hw.reference.reduce_rx import ReduceReceiver
from squeezenic_hw.spec.counters import REDUCE_COUNTERS, reduce_counter_name
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import ReduceFields, ReduceReason, chunk_bounds

from support.reduce_frames import (
    MUTATIONS,
    SETTINGS,
    Frame,
    mutate,
    node_stream,
    not_reduce_frames,
    ring_case,
    rng_of,
)


@pytest.mark.parametrize("case", list(SETTINGS))
@pytest.mark.parametrize("nodes", [2, 3, 4, 8])
def test_every_ring_frame_is_taken(case, nodes):
    """Each node takes every frame its predecessor sends, twice over (two all-reduces of
    the same tensor size: a chunk's expected offset returns to its start once complete),
    with the fields of its header; no reason counts."""
    elements = 1001 if nodes != 3 else 2       # 2 < N: a chunk is empty
    ring = ring_case(case, nodes, elements, seed=nodes)
    for rank in range(nodes):
        receiver = ring.receiver(rank)
        frames = ring.received(rank)
        for frame in frames + frames:
            verdict = receiver.receive(frame)
            h = parse(frame)
            f = ReduceFields.of(h)
            assert verdict.taken, (rank, verdict.reason)
            got = verdict.fields
            assert (got.gather, got.contributions, got.origin, got.offset, got.n,
                    got.width) == (f.gather, f.contributions, f.origin, h.offset, h.n,
                                   f.width)
        assert receiver.counters == Counter({**dict.fromkeys(REDUCE_COUNTERS, 0),
                                             "reduce_taken": 2 * len(frames)})
        for chunk in range(nodes):
            for gather in (False, True):
                assert receiver.expected(chunk, gather) == chunk_bounds(
                    elements, nodes, chunk)[0]


@pytest.mark.parametrize("case", ["raw", "fixed-stochastic", "sign", "natural"])
@pytest.mark.parametrize("nodes", [2, 3, 4, 8])
def test_each_mutation_fails_its_check(case, nodes):
    """Mutated frames mixed into a node's stream: each is bypassed for the check it was
    made to fail (the first of two when it fails two), the ring frames are still all
    taken, and the counters count exactly that."""
    ring = ring_case(case, nodes, 997, mtu=80, seed=3 * nodes)
    seen = Counter()
    for rank in range(nodes):
        rng = rng_of("mutations", case, nodes, rank)
        stream = node_stream(ring, rank, rng, mutated=0.8, combined=0.3, other=0.2)
        receiver = ring.receiver(rank)
        want = Counter(dict.fromkeys(REDUCE_COUNTERS, 0))
        for frame, intended in stream:
            verdict = receiver.receive(frame)
            assert verdict.reason is intended, (rank, parse(frame), intended, verdict)
            if intended is not None:
                want[reduce_counter_name(intended)] += 1
            seen[intended] += 1
        assert receiver.counters == want
    assert set(seen) >= set(MUTATIONS) | {None, ReduceReason.NONE}


def _pairs():
    return [(a, b) for a, b in itertools.combinations(sorted(MUTATIONS), 2)]


@pytest.mark.parametrize("nodes", [3, 8])
def test_first_failing_check_wins(nodes):
    """A frame made to fail two checks (every pair) is bypassed for the earlier one, and a
    node with reduce disabled bypasses any reduce frame as disabled."""
    ring = ring_case("qsgd", nodes, 1500, mtu=200, seed=nodes)
    rank = 1
    receiver = ring.receiver(rank)
    frames = ring.received(rank)
    rng = rng_of("pairs", nodes)
    checked = set()
    for k, frame in enumerate(frames):
        for a, b in _pairs():
            bad = mutate(Frame.of(frame, receiver), [a, b], rng)
            if bad is None:
                continue
            assert receiver.receive(bad).reason is a, (k, a, b)
            checked.add((a, b))
        if k % 3 == 0:
            off = ring.receiver(rank, enabled=False)
            for reason in MUTATIONS:
                bad = mutate(Frame.of(frame, receiver), [reason], rng)
                if bad is not None:
                    assert off.receive(bad).reason is ReduceReason.DISABLED
        assert receiver.receive(frame).taken
    assert checked == set(_pairs())


def test_duplicate_and_offset_rule():
    """Below the expected offset: duplicate; above it: offset. A chunk's last frame
    completes it and its expected offset is the chunk's start again, so a repeat of that
    frame is an offset error, as is a frame after a lost one."""
    ring = ring_case("fixed", 4, 2000, mtu=200)
    rank = 2
    frames = [f for f in ring.received(rank) if ReduceFields.of(parse(f)).origin == 1
              and not ReduceFields.of(parse(f)).gather]
    assert len(frames) >= 3
    receiver = ring.receiver(rank)
    assert receiver.receive(frames[0]).taken
    assert receiver.receive(frames[0]).reason is ReduceReason.DUPLICATE
    assert receiver.receive(frames[2]).reason is ReduceReason.OFFSET     # frames[1] lost
    for frame in frames[1:]:
        assert receiver.receive(frame).taken
    assert receiver.expected(1, False) == chunk_bounds(2000, 4, 1)[0]
    assert receiver.receive(frames[-1]).reason is ReduceReason.OFFSET
    assert receiver.receive(frames[0]).taken                              # the next round


def test_disabling_forgets_the_expected_offsets():
    ring = ring_case("sign", 3, 3000, mtu=100)
    receiver = ring.receiver(0)
    first, second = ring.received(0)[:2]
    assert receiver.receive(first).taken
    receiver.enabled = False
    assert receiver.receive(second).reason is ReduceReason.DISABLED
    receiver.enabled = True
    assert receiver.receive(second).reason is ReduceReason.OFFSET
    assert receiver.receive(first).taken
    assert receiver.counters["reduce_disabled"] == 1


def test_frames_that_are_not_reduce_frames_count_nowhere():
    ring = ring_case("bf16", 2, 100)
    receiver = ring.receiver(1)
    frame = ring.received(1)[0]
    for other in not_reduce_frames(frame, rng_of("other")):
        assert receiver.receive(other).reason is None
    assert sum(receiver.counters.values()) == 0


def test_tuser_size_that_disagrees():
    """A ``tuser_size`` that disagrees with the IPv4 length is section 7's ``ip_length``
    (not a reduce frame); bytes that end before the ``tuser_size`` the header agrees with
    are ``length``."""
    ring = ring_case("raw", 2, 100)
    receiver = ring.receiver(1)
    frame = ring.received(1)[0]
    assert receiver.receive(frame, tuser_size=len(frame) + 1).reason is None
    assert receiver.receive(frame[:64], tuser_size=len(frame)).reason is ReduceReason.LENGTH
    assert receiver.receive(frame, tuser_size=len(frame)).taken


@pytest.mark.parametrize("kwargs, match", [
    ({"nodes": 1}, "nodes"), ({"nodes": 17}, "nodes"), ({"rank": 4}, "rank"),
    ({"rank": -1}, "rank"), ({"rank": True}, "rank"), ({"elements": -1}, "elements"),
    ({"elements": 2**32}, "elements"), ({"codec": "threshold"}, "cannot be reduced"),
    ({"codec": "fixed", "param": 1}, "param"), ({"port": 0}, "port"),
])
def test_bad_parameters_are_named(kwargs, match):
    args = {"nodes": 4, "rank": 0, "codec": "raw", "elements": 10, **kwargs}
    with pytest.raises(ValueError, match=match):
        ReduceReceiver(args.pop("nodes"), args.pop("rank"), args.pop("codec"), **args)
