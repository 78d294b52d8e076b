# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.gather_fork.GatherFork`: every gather
frame a node takes in a reference ring goes whole to the host's result frames, and on to
the successor unchanged unless the successor finished its chunk."""

import random

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.reduce.gather_fork import GatherFork
from squeezenic_hw.gateware.reduce.layouts import CheckedBeat, ReduceCheck, ReduceFrameInfo
from squeezenic_hw.reference.allreduce import allreduce
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.streams import pack_payload, simulation_of
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import ReduceFields

from support.beat_source import send_beats
from support.checked_sink import CheckedSink, take_beats
from support.reduce_frames import SETTINGS, frames_of_beats
from support.shared_duts import shared

_LAYOUT = data.Layout.cast(CheckedBeat)


def info_of(frame):
    h = parse(frame)
    f = ReduceFields.of(h)
    return pack_payload(ReduceFrameInfo, {
        "gather": int(f.gather), "contributions": f.contributions, "origin": f.origin,
        "width": f.width, "n": h.n, "offset": h.offset})


def checked_beats(frame):
    info = info_of(frame)
    return [word | (b == 0) << _LAYOUT["first"].offset
            | ReduceCheck.NONE.value << _LAYOUT["check"].offset
            | (info if b == 0 else 0) << _LAYOUT["info"].offset
            for b, word in enumerate(frame_beats(frame))]


def _apart(frames, made):
    """``frames`` (beats each) split into those made and those taken, each in order."""
    made_beats = [frame_beats(f) for f in made]
    mine = [f for f in frames if f in made_beats]
    return mine, [f for f in frames if f not in made_beats]


@pytest.mark.parametrize("case, nodes, rank, stalls", [
    ("sign", 2, 0, (0.0, 0.0)), ("fixed", 4, 1, (0.3, 0.3)), ("qsgd", 8, 5, (0.2, 0.5))])
def test_gather_frames_forked(case, nodes, rank, stalls):
    """The gathers taken and those made, each whole and in its order on both outputs (the
    two inputs' frames alternating as they are admitted); a frame taken forwarded unless
    the successor finished its chunk, every frame made forwarded."""
    rng = np.random.default_rng(nodes)
    xs = [rng.normal(size=900).astype(np.float32) for _ in range(nodes)]
    links = allreduce(xs, case, mtu=150, **SETTINGS[case]).links
    frames = [f for f in links[(rank - 1) % nodes] if ReduceFields.of(parse(f)).gather]
    forwarded = [f for f in frames if ReduceFields.of(parse(f)).origin != (rank + 2) % nodes]
    made = [f for f in links[rank] if ReduceFields.of(parse(f)).gather
            and ReduceFields.of(parse(f)).origin == (rank + 1) % nodes]
    # what the successor receives of the gather phase is what this node forwards and makes
    assert sorted(forwarded + made) == sorted(f for f in links[rank]
                                              if ReduceFields.of(parse(f)).gather)
    expect = {"forward": (made, forwarded), "host": (made, frames)}
    dut = shared(GatherFork, mtu=150)
    idle, backpressure = stalls
    got = {}

    async def source(ctx):
        ctx.set(dut.cfg, {"enable": 1, "nodes": nodes, "rank": rank, "codec": 0, "param": 0,
                          "stochastic": 0, "scale": 0, "aux": 0, "elements": 0, "chunk": 0})
        await ctx.tick()
        words = [w for f in frames for w in checked_beats(f)]
        await send_beats(ctx, dut.i, words, idle=idle, rng=random.Random(nodes))

    async def made_source(ctx):
        await ctx.tick()
        words = [w for f in made for w in frame_beats(f)]
        await send_beats(ctx, dut.made, words, idle=idle, rng=random.Random(nodes + 1))

    def sink(name, seed):
        async def bench(ctx):
            s = CheckedSink(ctx, getattr(dut, name), backpressure=backpressure,
                            rng=random.Random(seed))
            total = sum(len(frame_beats(f)) for group in expect[name] for f in group)
            got[name], _ = await take_beats(s, total, timeout=300 + 8 * total)
        return bench

    simulation_of(dut).run([(source, True), (made_source, True)]
                           + [(sink(n, k), False) for k, n in enumerate(expect)])
    for name, (mine, taken) in expect.items():
        assert _apart(frames_of_beats(got[name]), mine) == (
            [frame_beats(f) for f in mine], [frame_beats(f) for f in taken]), name
    assert frames and made and (nodes == 2 or forwarded)
