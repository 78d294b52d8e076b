# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.lane.ReduceLane`: N lanes joined in a ring,
each fed its host's contribution frames in ring order (with host frames of another kind
among them), must carry on every link the frames of the reference ring's link byte for
byte, deliver to each host the reference's result frames (every chunk's values, section
8.5), pass the other host frames on unchanged, and bypass nothing. Random gaps on the
links, random idle cycles on the hosts and random backpressure on every host-side
output."""

import random
from dataclasses import replace

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.adder import CONFIG_CYCLES
from squeezenic_hw.gateware.reduce.lane import ReduceLane
from squeezenic_hw.reference.allreduce import (
    allreduce,
    contribution_frames,
    result_frames,
)
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.reduce_ring import LaneRing, enable_and_start, write_sign_table
from squeezenic_hw.sim.streams import BeatSender, simulation_of
from squeezenic_hw.spec.frames import build_host_frame, parse
from squeezenic_hw.spec.reduce import ReduceFields

from support.checked_sink import CheckedSink
from support.reduce_frames import (
    SETTINGS,
    edge_tensors,
    frames_of_beats,
    lane_config,
    template_of,
)
from support.unused import rejected

_LAST_AT = data.Layout.cast(AxisBeat)["last"].offset
_SIZE_AT = data.Layout.cast(AxisBeat)["size"].offset
_DATA_MASK = (1 << 512) - 1


def _fields(frame):
    h = parse(frame)
    f = ReduceFields.of(h)
    return (int(f.gather), f.contributions, f.origin, f.width, h.n, h.offset)


def _expected(result, nodes, codec, settings, step):
    """Per node: the frames it sends, and the result frames its host receives."""
    return [{"sent": result.links[r],
             "results": result_frames(result, r, codec, max_host_elements=step, **settings)}
            for r in range(nodes)]


def run_ring(case, nodes, elements, *, mtu, link_gap=0.0, idle=0.0, backpressure=0.0,
             seed=0, build=None, host_step=100, result_step=100):
    rng = np.random.default_rng(seed)
    settings = SETTINGS[case]
    codec = case.split("-")[0]
    xs = edge_tensors(rng, nodes, elements, codec, settings.get("param", 0))
    result = allreduce(xs, codec, seed=seed, mtu=mtu, **settings)
    expected = _expected(result, nodes, codec, settings, result_step)
    ring = LaneRing(nodes, mtu=mtu, max_host_elements=result_step, **(build or {}))
    lanes = ring.lanes
    r_rng = random.Random(seed)
    out = [{"links": [], "results": [], "bypass": [], "host_other": []}
           for _ in range(nodes)]
    expected_other = [None] * nodes
    want = [{"links": sum(len(frame_beats(f)) for f in e["sent"]),
             "results": sum(len(frame_beats(f)) for f in e["results"]),
             "bypass": 0, "host_other": 0} for e in expected]
    state = {"done": False}
    timeout = 2000 + 8 * elements * nodes

    async def configure(ctx):
        for r, lane in enumerate(lanes):
            ctx.set(lane.cfg, lane_config(case, nodes, r, elements, seed=seed, enable=False))
        await write_sign_table(ctx, lanes, nodes, settings.get("scale", 1.0),
                               settings.get("aux", 1.0))
        for r, lane in enumerate(lanes):
            sent = expected[r]["sent"]
            ctx.set(lane.template, template_of(sent[0], r_rng) if sent else 0)
        await enable_and_start(ctx, lanes, [lane_config(case, nodes, r, elements, seed=seed)
                                            for r in range(nodes)])

    def host(r):
        frames = contribution_frames(xs[r], r, nodes, codec, max_host_elements=host_step,
                                     mtu=mtu, **settings)
        others = [build_host_frame(replace(parse(f), version=1, flags=0, seed=0),
                                   np.frombuffer(f[64:], np.float32))
                  for f in frames[::3]]           # not contributions: on to the TX lane
        sent = []
        for k, f in enumerate(frames):
            sent.append(f)
            if k % 3 == 0:
                sent.append(others[k // 3])
        want[r]["host_other"] = sum(len(frame_beats(f)) for f in others)
        expected_other[r] = [b for f in others for b in frame_beats(f)]

        async def bench(ctx):
            sender = BeatSender(ctx, lanes[r].host, idle=idle,
                                rng=random.Random(seed + 20 + r))
            await sender.wait_until(nodes + 3 * CONFIG_CYCLES + 4)   # the lanes enabled
            for f in sent:
                for word in frame_beats(f):
                    await sender.send(word)
            await sender.close()
        return bench

    async def links(ctx):
        samples = [s for lane in lanes for s in (lane.o.valid, lane.o.ready, lane.o.payload)]
        gap_rng = random.Random(seed + 30)
        async for _, _, *values in ctx.tick().sample(*samples):
            for r in range(nodes):
                valid, ready, payload = values[3 * r:3 * r + 3]
                if valid and ready:
                    out[r]["links"].append(int(payload.as_value().value)
                                           if hasattr(payload, "as_value") else int(payload))
                ctx.set(ring.gap[r], int(bool(link_gap) and gap_rng.random() < link_gap))
            if state["done"]:
                break

    def sink(r, name, beat):
        async def bench(ctx):
            s = CheckedSink(ctx, getattr(lanes[r], name), backpressure=backpressure,
                            rng=random.Random(seed + 40 + 7 * r + len(name)), beat=beat)
            while not state["done"]:
                got, _ = await s.cycle()
                if got is not None:
                    out[r][name].append(got)
            await s.close()
        return bench

    async def watch(ctx):
        t = 0
        while any(len(out[r][k]) < want[r][k] for r in range(nodes) for k in want[r]):
            await ctx.tick()
            t += 1
            assert t < timeout, [{k: (len(out[r][k]), want[r][k]) for k in want[r]}
                                 for r in range(nodes)]
        await ctx.tick().repeat(40)      # nothing more leaves
        out.append([(ctx.get(lane.overflows), ctx.get(lane.counters.reduce_taken))
                    for lane in lanes])
        state["done"] = True

    benches = [(configure, True), (links, False), (watch, False)]
    for r in range(nodes):
        benches += [(host(r), True),
                    (sink(r, "host_other", int), False),
                    (sink(r, "results", int), False),
                    (sink(r, "bypass", int), False)]
    simulation_of(ring).run(benches)
    counters = out.pop()
    for r in range(nodes):
        assert out[r]["host_other"] == expected_other[r], f"node {r}: host frames passed on"
    return out, expected, counters


def _frame_bytes(beats):
    size = (beats[0] >> _SIZE_AT) & 0xFFFF
    return b"".join(int(b & _DATA_MASK).to_bytes(64, "little") for b in beats)[:size]


def _by_chunk(frames):
    """A host's result frames (as beat lists), in order within each chunk."""
    out = {}
    for beats in frames:
        out.setdefault(ReduceFields.of(parse(_frame_bytes(beats))).origin, []).append(beats)
    return out


def _by_chunk_and_phase(frames):
    """A link's frames (as beat lists), in order within each (origin, phase)."""
    out = {}
    for beats in frames:
        h = parse(_frame_bytes(beats))
        f = ReduceFields.of(h)
        out.setdefault((f.origin, f.gather), []).append(beats)
    return out


def check_ring(out, expected, counters):
    """Every link carries the reference's frames, byte for byte, in the reference's order
    within each chunk and phase (frames of different ones may alternate, section 8.3); every
    node's host receives the reference's result frames, in the reference's order within each
    chunk, and the counters are the reference's."""
    for r, (got, exp) in enumerate(zip(out, expected, strict=True)):
        want = _by_chunk_and_phase([frame_beats(f) for f in exp["sent"]])
        assert _by_chunk_and_phase(frames_of_beats(got["links"])) == want, f"link {r}"
        want = _by_chunk([frame_beats(f) for f in exp["results"]])
        assert _by_chunk(frames_of_beats(got["results"])) == want, f"node {r}: result frames"
        assert got["bypass"] == [], f"node {r}: bypassed"
        overflows, taken = counters[r]
        assert overflows == 0
        received = expected[(r - 1) % len(expected)]["sent"]
        assert taken == len(received), f"node {r}: frames taken"


def test_a_sign_ring_carries_the_reference_links():
    """A ring of three sign-only lanes, every stream stalled at random."""
    out, expected, counters = run_ring("sign", 3, 301, mtu=144, link_gap=0.2, idle=0.3,
                                       backpressure=0.3, seed=3,
                                       build={"codecs": ["sign"], "nodes": [3]})
    check_ring(out, expected, counters)


@pytest.mark.slow
@pytest.mark.parametrize("case, nodes, elements, mtu, stalls", [
    ("fixed", 3, 301, 200, (0.0, 0.0, 0.0)),
    ("sign", 4, 1001, 144, (0.2, 0.3, 0.3)),
    ("qsgd-stochastic", 2, 500, 160, (0.3, 0.2, 0.4)),
    ("fixed-stochastic", 3, 2, 200, (0.1, 0.1, 0.1)),
    ("qsgd", 8, 1000, 300, (0.1, 0.2, 0.2)),
    ("fixed", 4, 3, 200, (0.2, 0.2, 0.2)),
])
def test_ring_carries_the_reference_links(case, nodes, elements, mtu, stalls):
    """Every integer family, N = 2 … 8, E not divisible by N and E < N."""
    link_gap, idle, backpressure = stalls
    out, expected, counters = run_ring(case, nodes, elements, mtu=mtu, link_gap=link_gap,
                                       idle=idle, backpressure=backpressure, seed=nodes,
                                       build={"nodes": [nodes], "params": [8, 6, 4]})
    check_ring(out, expected, counters)


@pytest.mark.parametrize("kwargs, name", [
    ({"out_depth": 1}, "out_depth"), ({"mtu": 1518, "out_depth": 10}, "out_depth"),
    ({"codecs": ["raw"]}, "codecs"), ({"nodes": [1]}, "nodes"), ({"port": 0}, "port")])
def test_bad_parameters(kwargs, name):
    rejected(ReduceLane, match=name, **kwargs)
