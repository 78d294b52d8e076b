"""Tests of the hosts' reduce frames (``docs/wire-format.md`` section 8.5): the contribution
frames a host sends (:func:`~squeezenic_hw.reference.allreduce.contribution_frames`), the
result frames it receives (:func:`~squeezenic_hw.reference.allreduce.result_frames`) and a
node's checks on its host's frames
(:class:`~squeezenic_hw.reference.reduce_rx.ContributionReceiver`)."""

from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.reference.allreduce import allreduce, contribution_frames, result_frames
from squeezenic_hw.reference.reduce_rx import ContributionReceiver
from squeezenic_hw.spec.counters import CONTRIBUTION_COUNTERS
from squeezenic_hw.spec.frames import build_host_frame, parse
from squeezenic_hw.spec.header import FLAG_ENCODED
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    ContributionReason,
    ReduceFields,
    chunk_bounds,
    host_segments,
    partial_width,
    sums_per_frame,
)

from support.reduce_frames import SETTINGS, contribution_mutations

CASES = ["fixed", "qsgd-stochastic", "sign", "raw", "natural-stochastic"]


def _ring(case, nodes, elements, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    codec = case.split("-")[0]
    return xs, codec, SETTINGS[case], allreduce(xs, codec, seed=seed, mtu=200,
                                                **SETTINGS[case])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nodes, elements, step", [(2, 1000, 363), (3, 7, 2), (4, 2, 1),
                                                   (5, 101, 9), (3, 2000, 100)])
def test_contributions_cover_the_tensor_in_the_hosts_order(case, nodes, elements, step):
    xs, codec, settings, _ = _ring(case, nodes, elements)
    per_frame = sums_per_frame(partial_width(codec, settings.get("param", 0), nodes), 200)
    for r in range(nodes):
        frames = contribution_frames(xs[r], r, nodes, codec, max_host_elements=step,
                                     mtu=200, **settings)
        receiver = ContributionReceiver(nodes, r, codec, elements=elements, mtu=200,
                                        **settings)
        values, segments = [], []
        for f in frames:
            h = parse(f)
            fields = ReduceFields.of(h)
            assert len(f) == 64 + 4 * h.n and 1 <= h.n <= step
            assert (h.version, h.flags & (FLAG_ENCODED | FLAG_GATHER)) == (2, 0)
            assert (fields.contributions, fields.width, fields.nodes) == (0, 32, nodes)
            assert receiver.receive(f).taken
            values.append((h.offset, np.frombuffer(f[64:], np.float32)))
            if segments and segments[-1][0] == fields.origin and segments[-1][2] == h.offset \
                    and (h.offset - chunk_bounds(elements, nodes, fields.origin)[0]) % per_frame:
                segments[-1][2] = h.offset + h.n        # the same segment goes on
            else:
                segments.append([fields.origin, h.offset, h.offset + h.n])
        # segment by segment: each chunk's j-th frame's elements, the chunks in ring order
        want = [[c, lo, hi] for c, lo, hi in host_segments(elements, nodes, r, per_frame)]
        assert segments == want
        # a hop's segment comes a round after the predecessor's of it: in round j + k
        first = min((r - c) % nodes for c, _, _ in want)
        rounds = [(lo - chunk_bounds(elements, nodes, c)[0]) // per_frame + (r - c) % nodes
                  - first for c, lo, _ in want]
        assert rounds == sorted(rounds)
        got = np.concatenate([v for _, v in sorted(values, key=lambda t: t[0])]) if values \
            else np.zeros(0, np.float32)
        assert got.view(np.uint32).tolist() == xs[r].view(np.uint32).tolist()
        assert receiver.counters["contribution_taken"] == len(frames)
        # a second all-reduce of the same size starts over
        assert receiver.position == ((want[0][0], want[0][1]) if want else (None, 0))
        if frames:
            assert receiver.receive(frames[0]).taken


def test_the_hosts_segments_follow_the_hops():
    # E = 10, N = 4: chunks [0, 3), [3, 6), [6, 9), [9, 10); frames of 2 sums. Node 1
    # meets chunk 1 (k = 0), 0 (k = 1), 3 (k = 2), 2 (k = 3): segment j of the chunk with
    # k in round j + k
    assert host_segments(10, 4, 1, 2) == [(1, 3, 5), (1, 5, 6), (0, 0, 2), (0, 2, 3),
                                          (3, 9, 10), (2, 6, 8), (2, 8, 9)]
    assert host_segments(0, 3, 0, 5) == []
    with pytest.raises(ValueError, match="per_frame"):
        host_segments(10, 4, 1, 0)


@pytest.mark.parametrize("elements, nodes, rank, per_frame", [
    (10, 4, 1, 2), (100, 3, 2, 7), (37, 16, 5, 3), (5, 16, 9, 1), (1000, 8, 3, 50),
    (20, 16, 0, 5), (1, 2, 1, 1)])
def test_the_hosts_segments_cover_the_tensor_once(elements, nodes, rank, per_frame):
    segments = host_segments(elements, nodes, rank, per_frame)
    assert sorted(i for _, lo, hi in segments for i in range(lo, hi)) == list(range(elements))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nodes, elements, step", [(3, 1000, 363), (4, 5, 2), (2, 1, 1)])
def test_results_are_every_chunk_once(case, nodes, elements, step):
    xs, codec, settings, result = _ring(case, nodes, elements, seed=nodes)
    for r in range(nodes):
        frames = result_frames(result, r, codec, max_host_elements=step, **settings)
        got = np.zeros(elements, np.float32)
        seen = np.zeros(elements, int)
        for f in frames:
            h = parse(f)
            fields = ReduceFields.of(h)
            assert len(f) == 64 + 4 * h.n and 1 <= h.n <= step
            assert (h.version, h.flags & (FLAG_ENCODED | FLAG_GATHER)) == (2, FLAG_GATHER)
            assert (fields.contributions, fields.width, fields.nodes) == (nodes, 32, nodes)
            lo, hi = chunk_bounds(elements, nodes, fields.origin)
            assert lo <= h.offset and h.offset + h.n <= hi
            got[h.offset:h.offset + h.n] = np.frombuffer(f[64:], np.float32)
            seen[h.offset:h.offset + h.n] += 1
        assert (seen == 1).all()
        assert got.view(np.uint32).tolist() == result.results[r].view(np.uint32).tolist()


@pytest.mark.parametrize("reason", [r for r in ContributionReason
                                    if r not in (ContributionReason.NONE,
                                                 ContributionReason.DISABLED)])
def test_each_check_passes_its_frame_on_and_counts_it(reason):
    xs, codec, settings, _ = _ring("fixed", 3, 100)
    frames = contribution_frames(xs[1], 1, 3, codec, max_host_elements=10, **settings)
    receiver = ContributionReceiver(3, 1, codec, elements=100, **settings)
    for k, f in enumerate(frames):
        if k == 4:
            for bad in contribution_mutations(f)[reason]:
                assert receiver.receive(bad).reason is reason
        assert receiver.receive(f).taken, k     # the bad frame did not move the position
    bad = len(contribution_mutations(frames[4])[reason])
    assert receiver.counters[f"contribution_{reason.name.lower()}"] == bad
    assert sum(receiver.counters[c] for c in CONTRIBUTION_COUNTERS) == len(frames) + bad


def test_out_of_ring_order_and_disabled():
    xs, codec, settings, _ = _ring("sign", 4, 40)
    frames = contribution_frames(xs[2], 2, 4, codec, **settings)
    receiver = ContributionReceiver(4, 2, codec, elements=40, **settings)
    # the chunk after the own one first: offset
    assert receiver.receive(frames[1]).reason is ContributionReason.OFFSET
    assert receiver.receive(frames[0]).taken
    receiver.enabled = False
    assert receiver.receive(frames[1]).reason is ContributionReason.DISABLED
    receiver.enabled = True          # forgets the position: the own chunk again
    assert receiver.receive(frames[1]).reason is ContributionReason.OFFSET
    assert receiver.receive(frames[0]).taken


def test_frames_that_are_not_contributions_count_nowhere():
    xs, codec, settings, result = _ring("fixed", 2, 50)
    receiver = ContributionReceiver(2, 0, codec, elements=50, **settings)
    wire = result.links[0][0]                     # encoded = 1: a reduce frame
    v1 = build_host_frame(replace(parse(wire), version=1, flags=0), np.zeros(3, np.float32))
    for f in (wire, v1, b"\0" * 60):
        assert receiver.receive(f).reason is None
    assert sum(receiver.counters.values()) == 0


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="max_host_elements"):
        contribution_frames(np.zeros(4, np.float32), 0, 2, "fixed", param=8,
                            max_host_elements=0)
    with pytest.raises(ValueError, match="rank"):
        contribution_frames(np.zeros(4, np.float32), 2, 2, "fixed", param=8)
