# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.result_frames.ResultFrames`: the gather
frames a node makes and takes in a reference ring (edge values and clamped codes among the
tensors) must come out as the reference's result frames (``reference.allreduce.
result_frames``) byte for byte, under random idle cycles and backpressure."""

import random

import numpy as np
import pytest

from squeezenic_hw.gateware.reduce.result_frames import ResultFrames
from squeezenic_hw.reference.allreduce import allreduce, result_frames
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.reduce_ring import write_sign_table
from squeezenic_hw.sim.streams import simulation_of
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import ReduceFields

from support.beat_source import send_beats
from support.checked_sink import CheckedSink, max_streak, take_beats
from support.reduce_frames import SETTINGS, edge_tensors, lane_config, template_of
from support.shared_duts import shared
from support.unused import rejected


def gather_frames(result, rank, nodes):
    """The gather frames node ``rank`` makes (its finished chunk), then those it takes."""
    made = [f for f in result.links[rank]
            if ReduceFields.of(parse(f)).gather
            and ReduceFields.of(parse(f)).origin == (rank + 1) % nodes]
    taken = [f for f in result.links[(rank - 1) % nodes] if ReduceFields.of(parse(f)).gather]
    return made + taken


def run_results(case, nodes, rank, elements, *, mtu, step, build, idle=0.0,
                backpressure=0.0, seed=0):
    rng = np.random.default_rng(seed)
    codec = case.split("-")[0]
    settings = SETTINGS[case]
    xs = edge_tensors(rng, nodes, elements, codec, settings.get("param", 0))
    result = allreduce(xs, codec, seed=seed, mtu=mtu, **settings)
    frames = gather_frames(result, rank, nodes)
    expected = result_frames(result, rank, codec, max_host_elements=step, **settings)
    want = [b for f in expected for b in frame_beats(f)]
    dut = shared(ResultFrames, max_host_elements=step, **build)
    got = []

    async def source(ctx):
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements))
        ctx.set(dut.template, template_of(result.links[rank][0], random.Random(seed)))
        await write_sign_table(ctx, [dut], nodes, settings.get("scale", 1.0),
                               settings.get("aux", 1.0))
        words = [w for f in frames for w in frame_beats(f)]
        await send_beats(ctx, dut.i, words, idle=idle, rng=random.Random(seed + 1))

    async def sink(ctx):
        s = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(seed + 2))
        beats, cycles = await take_beats(s, len(want), timeout=500 + 12 * len(want))
        got.append((beats, cycles))

    simulation_of(dut).run([(source, True), (sink, False)])
    beats, cycles = got[0]
    for k, (a, b) in enumerate(zip(beats, want, strict=True)):
        assert a == b, f"beat {k}"
    return cycles, expected


@pytest.mark.parametrize("case, nodes, rank, elements, mtu, step, stalls", [
    ("fixed", 3, 1, 1000, 200, 100, (0.3, 0.3)),
    ("qsgd-stochastic", 4, 0, 700, 300, 363, (0.2, 0.4)),
    ("sign", 5, 4, 801, 144, 40, (0.4, 0.1)),
    ("fixed-stochastic", 2, 1, 3, 200, 1, (0.1, 0.1)),
])
def test_result_frames_as_the_reference(case, nodes, rank, elements, mtu, step, stalls):
    run_results(case, nodes, rank, elements, mtu=mtu, step=step,
                build={"nodes": [nodes], "params": [8, 6, 4]}, idle=stalls[0],
                backpressure=stalls[1], seed=nodes)


def test_a_sign_only_build_at_full_rate():
    """Nothing stalled: the values leave back to back (a header between result frames)."""
    cycles, expected = run_results("sign", 4, 2, 20000, mtu=1518, step=363,
                                   build={"codecs": ["sign"], "nodes": [4]})
    assert len(expected) > 5 and max_streak(cycles) >= 24


@pytest.mark.parametrize("kwargs, name", [
    ({"codecs": ["raw"]}, "codecs"), ({"max_host_elements": 0}, "max_host_elements")])
def test_bad_parameters(kwargs, name):
    rejected(ResultFrames, match=name, **kwargs)
