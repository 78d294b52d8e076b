# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.host_segments.HostSegments` against
:func:`~squeezenic_hw.spec.reduce.host_segments`: the walk's segments, two all-reduces in a
row, under random backpressure, for ring sizes, ranks and tensor sizes whose chunks are
empty, shorter than a frame, or end in a short segment."""

import random

import pytest

from squeezenic_hw.gateware.reduce.host_segments import SEGMENTS_CONFIG_CYCLES, HostSegments
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.spec.reduce import host_segments, partial_width, sums_per_frame

from support.reduce_frames import SETTINGS, lane_config
from support.shared_duts import shared
from support.unused import rejected

CASES = [  # (case, nodes, elements)
    ("sign", 4, 100_000), ("sign", 3, 10), ("sign", 16, 5), ("sign", 2, 1),
    ("fixed", 5, 4099), ("fixed", 8, 1057 * 8 + 3), ("qsgd", 16, 70_000),
    ("fixed", 4, 0),
]


def run_walk(case, nodes, rank, elements, count, *, backpressure, seed, mtu=1518):
    dut = shared(HostSegments, mtu=mtu)
    got = []
    rng = random.Random(seed)

    async def bench(ctx):
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, enable=False))
        await ctx.tick().repeat(SEGMENTS_CONFIG_CYCLES)
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, enable=True))
        t = 0
        while len(got) < count and t < 20 * count + 100:
            ready = rng.random() >= backpressure
            ctx.set(dut.o.ready, ready)
            if ready and ctx.get(dut.o.valid):
                p = ctx.get(dut.o.payload)
                got.append((p.chunk, p.lo, p.hi))
            await ctx.tick()
            t += 1
        # nothing is offered for an empty tensor
        await ctx.tick().repeat(10)
        got.append(ctx.get(dut.o.valid))

    simulation_of(dut).run([(bench, False)])
    return got


@pytest.mark.parametrize("case, nodes, elements", CASES)
def test_the_walk_is_the_hosts_order(case, nodes, elements):
    rng = random.Random(elements)
    rank = rng.randrange(nodes)
    per_frame = sums_per_frame(
        partial_width(case, SETTINGS[case].get("param", 0), nodes), 1518)
    want = host_segments(elements, nodes, rank, per_frame)
    count = min(2 * len(want), 400)
    got = run_walk(case, nodes, rank, elements, count, backpressure=0.3, seed=elements)
    if not want:
        assert got == [0]
        return
    assert got[:-1] == (want * 2)[:count]


def test_a_full_queue_loses_no_segment():
    # a consumer that rarely takes one: the walk waits at a full queue
    want = host_segments(300, 16, 3, sums_per_frame(9, 1518))
    got = run_walk("natural", 16, 3, 300, 3 * len(want), backpressure=0.9, seed=4)
    assert got[:-1] == want * 3


def test_every_rank_of_a_small_ring():
    for rank in range(5):
        want = host_segments(23, 5, rank, sums_per_frame(3, 144))
        got = run_walk("sign", 5, rank, 23, 2 * len(want), backpressure=0.5, seed=rank,
                       mtu=144)
        assert got[:-1] == want * 2, rank


def test_bad_parameters_are_named():
    for kwargs, name in (({"mtu": 100}, "mtu"), ({"depth": 2}, "depth"),
                         ({"codecs": ["threshold"]}, "codecs")):
        rejected(HostSegments, match=name, **kwargs)
