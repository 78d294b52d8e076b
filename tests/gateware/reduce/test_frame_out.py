# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.frame_out.ReduceFrameOut`: given each
frame's outgoing fields and payload beats, and the node's header template, it writes the
frames of the reference ring's links byte for byte (header, ``tkeep``, ``tlast``,
``tuser_size``), under random stalls and at full rate."""

import random

import numpy as np
import pytest

from squeezenic_hw.gateware.reduce.frame_out import ReduceFrameOut
from squeezenic_hw.gateware.reduce.layouts import ReduceFrameInfo
from squeezenic_hw.reference.allreduce import allreduce
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.streams import pack_payload, simulation_of
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import ReduceFields

from support.beat_source import send_beats
from support.checked_sink import CheckedSink, max_streak, take_beats
from support.reduce_frames import SETTINGS, template_of
from support.shared_duts import shared
from support.unused import rejected


def link_frames(case, nodes, elements, *, mtu, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    settings = SETTINGS[case]
    result = allreduce(xs, case.split("-")[0], seed=seed, mtu=mtu, **settings)
    return [f for link in result.links for f in link], settings


def run_frame_out(dut, case, nodes, frames, settings, *, idle=(0.0, 0.0), backpressure=0.0,
                  seed=0):
    rng = random.Random(seed)
    template = template_of(frames[0], rng)
    descs, beats = [], []
    for f in frames:
        h = parse(f)
        fields = ReduceFields.of(h)
        descs.append(pack_payload(ReduceFrameInfo, {
            "gather": int(fields.gather), "contributions": fields.contributions,
            "origin": fields.origin, "width": fields.width, "n": h.n, "offset": h.offset}))
        payload = f[64:]
        beats += [int.from_bytes(payload[k:k + 64], "little")
                  for k in range(0, len(payload), 64)]
    expected = [b for f in frames for b in frame_beats(f)]
    got, cycles = [], []

    async def fields_source(ctx):
        ctx.set(dut.template, template)
        ctx.set(dut.cfg, {"enable": 1, "nodes": nodes, "rank": 0,
                          "codec": codec_info(case.split("-")[0]).id, "param": 0,
                          "stochastic": int(settings.get("stochastic", False)),
                          "scale": 0, "aux": 0, "elements": 0, "chunk": 0})
        await send_beats(ctx, dut.desc, descs, idle=idle[0], rng=random.Random(seed + 1))

    async def payload_source(ctx):
        await send_beats(ctx, dut.payload, beats, idle=idle[1], rng=random.Random(seed + 2))

    async def sink(ctx):
        s = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(seed + 3))
        beats, t = await take_beats(s, len(expected), timeout=100 + 8 * len(expected))
        got.extend(beats)
        cycles.extend(t)

    simulation_of(dut).run([(fields_source, True), (payload_source, True), (sink, False)])
    return got, expected, cycles


@pytest.mark.parametrize("case, nodes, elements, mtu, idle, backpressure", [
    ("fixed", 3, 1000, 200, (0.3, 0.2), 0.3), ("sign", 8, 2001, 120, (0.1, 0.4), 0.2),
    ("qsgd-stochastic", 4, 7, 100, (0.5, 0.5), 0.5), ("fixed", 2, 3000, 1518, (0.2, 0.0), 0.1)])
def test_frames_as_the_links(case, nodes, elements, mtu, idle, backpressure):
    frames, settings = link_frames(case, nodes, elements, mtu=mtu, seed=nodes)
    dut = shared(ReduceFrameOut)
    got, expected, _ = run_frame_out(dut, case, nodes, frames, settings, idle=idle,
                                     backpressure=backpressure, seed=nodes)
    for k, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert a == b, f"beat {k}"


def test_full_rate():
    """With nothing stalled the frames leave back to back, a beat a cycle."""
    frames, settings = link_frames("sign", 4, 3000, mtu=400, seed=1)
    dut = shared(ReduceFrameOut)
    got, expected, cycles = run_frame_out(dut, "sign", 4, frames, settings, seed=1)
    assert got == expected
    assert max_streak(cycles) >= len(expected) - 20


@pytest.mark.parametrize("depth", [1, 5000, True])
def test_bad_depth(depth):
    rejected(ReduceFrameOut, depth=depth, match="depth")


def test_a_frame_never_pauses():
    """With the payload arriving slowly and ``o`` always ready, each frame's beats leave on
    consecutive cycles (a MAC cannot pause inside a frame)."""
    frames, settings = link_frames("fixed", 3, 1500, mtu=600, seed=4)
    dut = shared(ReduceFrameOut)
    got, expected, cycles = run_frame_out(dut, "fixed", 3, frames, settings,
                                          idle=(0.3, 0.7), seed=4)
    assert got == expected
    k = 0
    for f in frames:
        n = len(frame_beats(f))
        assert cycles[k + n - 1] - cycles[k] == n - 1
        k += n
