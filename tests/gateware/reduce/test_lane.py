# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.lane.ReduceLane`: N lanes joined in a ring,
each fed its host's contribution frames in ring order (with host frames of another kind
among them), must carry on every link the frames of the reference ring's link byte for
byte, hand each node the sums and fields of the chunk it finishes and the gather frames it
takes, pass the other host frames on unchanged, and bypass nothing. Random gaps on the
links, random idle cycles on the hosts and random backpressure on every host-side
output."""

import random
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.adder import CONFIG_CYCLES
from squeezenic_hw.gateware.reduce.lane import ReduceLane
from squeezenic_hw.gateware.reduce.layouts import ReduceFrameInfo, sums_job_layout
from squeezenic_hw.reference.allreduce import allreduce, contribution_frames
from squeezenic_hw.reference.codecs import unpack
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.streams import BeatSender, simulation_of
from squeezenic_hw.spec.frames import build_host_frame, parse
from squeezenic_hw.spec.reduce import ReduceFields

from support.checked_sink import CheckedSink
from support.reduce_frames import (
    SETTINGS,
    edge_tensors,
    lane_config,
    sums_by_frame,
    template_of,
)
from support.unused import rejected

_LAST_AT = data.Layout.cast(AxisBeat)["last"].offset
_SIZE_AT = data.Layout.cast(AxisBeat)["size"].offset
_DATA_MASK = (1 << 512) - 1
#: The ``gather`` flag (byte 45, bit 3) in a header beat.
_GATHER_AT = 45 * 8 + 3


class _Ring(Elaboratable):
    """``size`` lanes, lane r's ``o`` into lane r + 1's ``i`` through a gate that a test
    closes at random (``gap[r]``: the link idles whatever the lanes offer)."""

    def __init__(self, size, **kwargs):
        self.lanes = [ReduceLane(**kwargs) for _ in range(size)]
        self.gap = [Signal(name=f"gap{r}") for r in range(size)]

    def elaborate(self, platform):
        m = Module()
        n = len(self.lanes)
        for r, lane in enumerate(self.lanes):
            m.submodules[f"node{r}"] = lane
        for r, lane in enumerate(self.lanes):
            succ = self.lanes[(r + 1) % n]
            m.d.comb += [
                succ.i.valid.eq(lane.o.valid & ~self.gap[r]),
                succ.i.payload.eq(lane.o.payload),
                lane.o.ready.eq(succ.i.ready & ~self.gap[r]),
            ]
        return m


def _fields(frame):
    h = parse(frame)
    f = ReduceFields.of(h)
    return (int(f.gather), f.contributions, f.origin, f.width, h.n, h.offset)


def _expected(result, nodes):
    """Per node: the frames it sends, the (fields, sums) of the gather frames it makes
    (the chunk it finishes), and the gather frames it takes (fields, payload beats)."""
    out = []
    for r in range(nodes):
        sent = result.links[r]
        received = result.links[(r - 1) % nodes]
        finished = []
        for f in sent:
            fields = _fields(f)
            if fields[0] and fields[2] == (r + 1) % nodes:
                sums = unpack(np.frombuffer(f[64:], np.uint8), fields[3], fields[4])
                finished.append((fields, [int(s) for s in sums]))
        gathers = [(_fields(f), [int.from_bytes(f[64 + k:128 + k], "little")
                                 for k in range(0, len(f) - 64, 64)])
                   for f in received if _fields(f)[0]]
        out.append({"sent": sent, "finished": finished, "gathers": gathers})
    return out


def run_ring(case, nodes, elements, *, mtu, link_gap=0.0, idle=0.0, backpressure=0.0,
             seed=0, build=None, host_step=100):
    rng = np.random.default_rng(seed)
    settings = SETTINGS[case]
    codec = case.split("-")[0]
    xs = edge_tensors(rng, nodes, elements, codec, settings.get("param", 0))
    result = allreduce(xs, codec, seed=seed, mtu=mtu, **settings)
    expected = _expected(result, nodes)
    ring = _Ring(nodes, mtu=mtu, **(build or {}))
    lanes = ring.lanes
    r_rng = random.Random(seed)
    out = [{"links": [], "finished": [], "finished_fields": [], "gather_fields": [],
            "gather_payload": [], "bypass": [], "host_other": []} for _ in range(nodes)]
    expected_other = [None] * nodes
    want = [{"links": sum(len(frame_beats(f)) for f in e["sent"]),
             "finished": sum(-(-len(s) // 16) for _, s in e["finished"]),
             "finished_fields": len(e["finished"]),
             "gather_fields": len(e["gathers"]),
             "gather_payload": sum(len(p) for _, p in e["gathers"]),
             "bypass": 0, "host_other": 0} for e in expected]
    state = {"done": False}
    timeout = 2000 + 8 * elements * nodes

    async def configure(ctx):
        for r, lane in enumerate(lanes):
            ctx.set(lane.cfg, lane_config(case, nodes, r, elements, seed=seed, enable=False))
        await ctx.tick().repeat(CONFIG_CYCLES)
        for r, lane in enumerate(lanes):
            ctx.set(lane.cfg, lane_config(case, nodes, r, elements, seed=seed))
            sent = expected[r]["sent"]
            ctx.set(lane.template, template_of(sent[0], r_rng) if sent else 0)
        await ctx.tick().repeat(CONFIG_CYCLES)
        for lane in lanes:
            ctx.set(lane.start, 1)
        await ctx.tick()
        for lane in lanes:
            ctx.set(lane.start, 0)

    def host(r):
        frames = contribution_frames(xs[r], r, nodes, codec, max_host_elements=host_step,
                                     **settings)
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
            await sender.wait_until(CONFIG_CYCLES + 2)
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

    sum_width = lanes[0].sum_width

    def job_of(value):
        v = data.Const(sums_job_layout(sum_width), value)
        return [int(v.sums[e]) for e in range(int(v.count))], int(v.last)

    def fields_of(value):
        v = data.Const(ReduceFrameInfo, value)
        return (int(v.gather), int(v.contributions), int(v.origin), int(v.width),
                int(v.n), int(v.offset))

    benches = [(configure, True), (links, False), (watch, False)]
    for r in range(nodes):
        benches += [(host(r), True),
                    (sink(r, "host_other", int), False),
                    (sink(r, "finished", job_of), False),
                    (sink(r, "finished_fields", fields_of), False),
                    (sink(r, "gather_fields", fields_of), False),
                    (sink(r, "gather_payload", int), False),
                    (sink(r, "bypass", int), False)]
    simulation_of(ring).run(benches)
    counters = out.pop()
    for r in range(nodes):
        assert out[r]["host_other"] == expected_other[r], f"node {r}: host frames passed on"
    return out, expected, counters


def _frame_bytes(beats):
    size = (beats[0] >> _SIZE_AT) & 0xFFFF
    return b"".join(int(b & _DATA_MASK).to_bytes(64, "little") for b in beats)[:size]


def _by_chunk_and_phase(frames):
    """A link's frames (as beat lists), in order within each (origin, phase)."""
    out = {}
    for beats in frames:
        h = parse(_frame_bytes(beats))
        f = ReduceFields.of(h)
        out.setdefault((f.origin, f.gather), []).append(beats)
    return out


def _frames_of(beats):
    frames, frame = [], []
    for b in beats:
        frame.append(b)
        if (b >> _LAST_AT) & 1:
            frames.append(frame)
            frame = []
    assert frame == [], "a frame left unfinished"
    return frames


def check_ring(out, expected, counters):
    """Every link carries the reference's frames, byte for byte, in the reference's order
    within each chunk and phase (frames of different ones may alternate, section 8.3); every
    node's host-side outputs and counters are the reference's."""
    for r, (got, exp) in enumerate(zip(out, expected, strict=True)):
        want = _by_chunk_and_phase([frame_beats(f) for f in exp["sent"]])
        assert _by_chunk_and_phase(_frames_of(got["links"])) == want, f"link {r}"
        assert got["finished_fields"] == [f for f, _ in exp["finished"]], f"node {r}"
        assert sums_by_frame(got["finished"]) == [s for _, s in exp["finished"]], \
            f"node {r}: finished sums"
        # the gathers node r takes are those of its incoming link, in the order they came
        incoming = _frames_of(out[(r - 1) % len(out)]["links"])
        gathers = [f for f in incoming if (f[0] >> _GATHER_AT) & 1]
        assert got["gather_fields"] == [_fields(_frame_bytes(f)) for f in gathers], \
            f"node {r}: gather fields"
        assert got["gather_payload"] == [b & _DATA_MASK for f in gathers for b in f[1:]], \
            f"node {r}: gather payload"
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
