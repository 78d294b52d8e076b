# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.adder.ReduceAdder` against the numpy
reference's hop (:func:`~squeezenic_hw.reference.allreduce.integer_hop`).

A node's input is the reduce-phase frames it receives in a reference ring, as the checker
takes them, and its host's codes of the same offsets in beats of random counts. Under
random idle cycles on both inputs and random backpressure on the outputs, every frame must
come out as the reference's hop of it (payload beats and outgoing fields), or, when the
wire queue had no room, unchanged on ``overflow`` and counted, its codes dropped.
"""

import random

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.adder import CONFIG_CYCLES, ReduceAdder
from squeezenic_hw.gateware.reduce.code_aligner import host_codes_layout
from squeezenic_hw.gateware.reduce.layouts import (
    CheckedBeat,
    ReduceCheck,
    ReduceFrameInfo,
)
from squeezenic_hw.reference.allreduce import allreduce, integer_hop
from squeezenic_hw.reference.codecs import encode
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.streams import BeatSender, pack_payload, simulation_of
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import (
    ReduceFields,
    host_segments,
    partial_width,
    sums_per_frame,
)

from support.checked_sink import CheckedSink, max_streak
from support.reduce_frames import SETTINGS, edge_tensors, lane_config
from support.shared_duts import shared
from support.unused import rejected

_LAYOUT = data.Layout.cast(CheckedBeat)
_BEAT_MASK = (1 << data.Layout.cast(AxisBeat).size) - 1
_LAST_AT = _LAYOUT["beat"].offset + data.Layout.cast(AxisBeat)["last"].offset


def hop_case(case, nodes, elements, rank, *, mtu=200, seed=0):
    """``(frames, codes, expected, settings)`` of node ``rank`` in a reference ring, in its
    host's order (:func:`~squeezenic_hw.spec.reduce.host_segments`): the reduce-phase
    frames it receives, its codes of every segment, and per segment ``(frame, out)``, the
    frame received (``None`` for the node's own chunk) and the frame the adder makes of it
    (the reference's hop, or the own chunk's frame the node sends)."""
    rng = np.random.default_rng(seed)
    settings = SETTINGS[case]
    codec = case.split("-")[0]
    xs = edge_tensors(rng, nodes, elements, codec, settings.get("param", 0))
    result = allreduce(xs, codec, seed=seed, mtu=mtu, **settings)
    def key(f):
        h = parse(f)
        return ReduceFields.of(h).origin, h.offset
    incoming = {key(f): f for f in result.links[(rank - 1) % nodes]
                if not ReduceFields.of(parse(f)).gather}
    own = {key(f): f for f in result.links[rank]
           if not ReduceFields.of(parse(f)).gather and key(f)[0] == rank}
    per_frame = sums_per_frame(partial_width(codec, settings.get("param", 0), nodes), mtu)
    frames, codes, expected = [], [], []
    for c, lo, hi in host_segments(elements, nodes, rank, per_frame):
        code = encode(xs[rank][lo:hi], codec, seed=seed + rank, offset=lo, **settings)
        codes.append([int(v) for v in code])
        if c == rank:
            expected.append((None, own[c, lo]))
        else:
            f = incoming[c, lo]
            frames.append(f)
            expected.append((f, integer_hop(f, code)))
    return frames, codes, expected, settings


def checked_beats(frame):
    """The checker's ``take`` beats of ``frame``."""
    fields = ReduceFields.of(parse(frame))
    h = parse(frame)
    info = pack_payload(ReduceFrameInfo, {
        "gather": int(fields.gather), "contributions": fields.contributions,
        "origin": fields.origin, "width": fields.width, "n": h.n, "offset": h.offset})
    out = []
    for b, word in enumerate(frame_beats(frame)):
        out.append(word | (b == 0) << _LAYOUT["first"].offset
                   | ReduceCheck.NONE.value << _LAYOUT["check"].offset
                   | (info if b == 0 else 0) << _LAYOUT["info"].offset)
    return out


def payload_beats(frame):
    payload = frame[64:]
    return [int.from_bytes(payload[k:k + 64], "little") for k in range(0, len(payload), 64)]


def out_fields(frame):
    h = parse(frame)
    f = ReduceFields.of(h)
    return (int(f.gather), f.contributions, f.origin, f.width, h.n, h.offset)


def run_adder(dut, case, nodes, frames, codes, expected, *, lead, idle=(0.0, 0.0),
              backpressure=0.0, seed=0, rank=0, elements=0):
    """Run ``frames`` and the host's ``codes`` (:func:`hop_case`) through ``dut``; a frame
    is offered once the host has sent all but ``lead`` codes before it (``None``: at
    once). Returns the payload beats, the outgoing fields, the frames overflowed (beats),
    the counter, the cycles the host's beats were taken and those of ``o``'s beats."""
    rng = random.Random(seed)
    cw = dut.code_width
    host_layout = host_codes_layout(cw)
    flat = [c for cs in codes for c in cs]
    host_beats = []
    k = 0
    while k < len(flat):
        n = min(len(flat) - k, rng.choice([16, 16, 16, rng.randrange(1, 17)]))
        host_beats.append((n, pack_payload(host_layout, {
            "codes": flat[k:k + n] + [0] * (16 - n), "count": n})))
        k += n
    starts = np.cumsum([0] + [len(c) for c in codes])
    before = [int(starts[j]) for j, (f, _) in enumerate(expected) if f is not None]
    total_frames = len(expected)
    state = {"sent": 0, "done": False}
    out = {"o": [], "desc": [], "overflow": [], "o_cycles": [],
           "host_cycles": []}

    async def wire(ctx):
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, enable=False))
        sender = BeatSender(ctx, dut.i, idle=idle[0], rng=random.Random(seed + 1))
        await sender.wait_until(CONFIG_CYCLES)      # the derived configuration's registers
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements))
        for j, f in enumerate(frames):
            while lead is not None and state["sent"] < before[j] - lead:
                await sender.wait_until(sender.t + 1)
            for word in checked_beats(f):
                await sender.send(word)
        await sender.close()

    async def host(ctx):
        sender = BeatSender(ctx, dut.host, idle=idle[1], rng=random.Random(seed + 2))
        await sender.wait_until(CONFIG_CYCLES + 2)
        for n, word in host_beats:
            out["host_cycles"].append(await sender.send(word))
            state["sent"] += n
        await sender.close()

    def sink(name, port, beat):
        async def bench(ctx):
            s = CheckedSink(ctx, port, backpressure=backpressure,
                            rng=random.Random(seed + hash(name) % 97), beat=beat)
            timeout = 400 + 20 * sum(len(c) for c in codes) + 40 * total_frames
            while not state["done"]:
                got, _ = await s.cycle()
                assert s.t < timeout, f"{len(out['desc'])} of {total_frames} frames"
                if got is not None:
                    out[name].append(got)
                    if name == "o":
                        out["o_cycles"].append(s.t)
            await s.close()
        return bench

    async def watch(ctx):
        while True:
            await ctx.tick()
            over = sum(1 for b in out["overflow"] if (b >> _LAST_AT) & 1)
            if len(out["desc"]) + over == total_frames:
                break
        for _ in range(30):            # nothing more leaves
            await ctx.tick()
        state["done"] = True
        out["counter"] = ctx.get(dut.overflows)

    def fields_of(value):
        v = data.Const(ReduceFrameInfo, value)
        return (int(v.gather), int(v.contributions), int(v.origin), int(v.width),
                int(v.n), int(v.offset))

    simulation_of(dut).run([(wire, True), (host, True),
                            (sink("o", dut.o, int), False),
                            (sink("desc", dut.desc, fields_of), False),
                            (sink("overflow", dut.overflow, int), False),
                            (watch, False)])
    return out


def check_outputs(out, expected):
    """Every segment's frame in order (``expected`` of :func:`hop_case`): the reference's
    hop (or the own chunk's frame) on ``o``/``desc``, or the frame received unchanged on
    ``overflow``; returns how many overflowed."""
    overflowed, current = [], []
    for b in out["overflow"]:
        current.append(b & _BEAT_MASK)
        if (b >> _LAST_AT) & 1:
            overflowed.append(current)
            current = []
    beats, fields = list(out["o"]), list(out["desc"])
    oi = 0
    for f, made in expected:
        if f is not None and oi < len(overflowed) and overflowed[oi] == frame_beats(f):
            oi += 1
            continue
        assert fields and fields.pop(0) == out_fields(made), parse(made)
        want = payload_beats(made)
        assert beats[:len(want)] == want, parse(made)
        del beats[:len(want)]
    assert oi == len(overflowed) and not beats and not fields
    assert out["counter"] == oi
    return oi


def _overflowed(frame, overflowed):
    return frame is not None and frame_beats(frame) in overflowed


CASES = [("fixed", 2, 203, (0.3, 0.2), 0.3), ("qsgd-stochastic", 3, 500, (0.1, 0.5), 0.2),
         ("sign", 4, 1001, (0.5, 0.1), 0.4),
         pytest.param("fixed-stochastic", 8, 700, (0.2, 0.2), 0.1, marks=pytest.mark.slow),
         ("qsgd", 4, 3, (0.2, 0.3), 0.3),
         pytest.param("sign", 8, 5, (0.0, 0.0), 0.5, marks=pytest.mark.slow)]


@pytest.mark.parametrize("case, nodes, elements, idle, backpressure", CASES)
def test_hops_as_the_reference(case, nodes, elements, idle, backpressure):
    """Every frame a node takes comes out as the reference's hop, and every segment of its
    own chunk as its frame, in the host's order, under random stalls; no frame overflows
    while the wire runs at most a frame ahead of the host."""
    rank = nodes - 1
    frames, codes, expected, _ = hop_case(case, nodes, elements, rank, seed=nodes + elements)
    assert frames
    dut = shared(ReduceAdder, mtu=200)
    out = run_adder(dut, case, nodes, frames, codes, expected, lead=300, idle=idle,
                    backpressure=backpressure, seed=nodes, rank=rank, elements=elements)
    assert check_outputs(out, expected) == 0


def test_a_sign_only_build():
    frames, codes, expected, _ = hop_case("sign", 3, 600, 1, seed=4)
    dut = shared(ReduceAdder, codecs=["sign"], wire_depth=16, host_depth=16, mtu=200)
    assert dut.code_width == 1 and dut.widths == (2, 3, 4, 5)
    out = run_adder(dut, "sign", 3, frames, codes, expected, lead=100, idle=(0.2, 0.2),
                    backpressure=0.3, seed=4, rank=1, elements=600)
    assert check_outputs(out, expected) == 0


def test_frames_overflow_when_the_host_lags():
    """The wire runs ahead with a small wire queue: some frames overflow, whole and
    counted, their codes dropped; the others still hop as the reference."""
    frames, codes, expected, _ = hop_case("fixed", 4, 2000, 2, mtu=300, seed=7)
    dut = shared(ReduceAdder, codecs=["fixed"], params=[8], nodes=[4], wire_depth=8,
                 host_depth=8, mtu=300)
    out = run_adder(dut, "fixed", 4, frames, codes, expected, lead=None, idle=(0.0, 0.6),
                    backpressure=0.2, seed=7, rank=2, elements=2000)
    over = check_outputs(out, expected)
    assert 0 < over < len(frames)


def test_full_rate():
    """With nothing stalled, the host's codes go in at one beat per cycle and the sums'
    beats leave back to back."""
    frames, codes, expected, _ = hop_case("fixed", 2, 4000, 1, mtu=1518, seed=3)
    dut = shared(ReduceAdder)
    out = run_adder(dut, "fixed", 2, frames, codes, expected, lead=600, seed=3, rank=1,
                    elements=4000)
    assert check_outputs(out, expected) == 0
    host = out["host_cycles"]
    # the host's beats: one a cycle but where the frames' partial jobs put a few back
    assert host[-1] - host[0] <= len(host) + 2 * len(expected)
    assert max_streak(host) >= 60


@pytest.mark.parametrize("kwargs, name", [
    ({"codecs": ["raw"]}, "codecs"), ({"codecs": "fixed"}, "codecs"),
    ({"nodes": [1]}, "nodes"), ({"nodes": []}, "nodes"), ({"params": [17]}, "params"),
    ({"wire_depth": 1}, "wire_depth"), ({"host_depth": True}, "host_depth"),
    ({"mtu": 100}, "mtu")])
def test_bad_parameters(kwargs, name):
    rejected(ReduceAdder, match=name, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fixed", "fixed-stochastic", "qsgd", "qsgd-stochastic",
                                  "sign"])
@pytest.mark.parametrize("nodes, elements", [(2, 1), (3, 1000), (4, 2001), (8, 1003),
                                             (16, 1500)])
def test_hops_of_every_codec_and_ring(case, nodes, elements):
    """Every rank of every ring, under random stalls."""
    dut = shared(ReduceAdder, mtu=200)
    for rank in range(nodes):
        frames, codes, expected, _ = hop_case(case, nodes, elements, rank, seed=rank)
        if not expected:
            continue
        out = run_adder(dut, case, nodes, frames, codes, expected, lead=300,
                        idle=(0.3, 0.3), backpressure=0.3, seed=rank, rank=rank,
                        elements=elements)
        assert check_outputs(out, expected) == 0


@pytest.mark.parametrize("case, nodes, elements, rank", [
    ("fixed-stochastic", 3, 1000, 1), ("sign", 4, 2001, 3), ("qsgd", 2, 3, 0),
    pytest.param("fixed", 8, 700, 6, marks=pytest.mark.slow), ("sign", 4, 3, 3)])
def test_own_chunk_between_hops(case, nodes, elements, rank):
    """The node's own chunk's frames (k = 1, its codes' signed values) where its host's
    order puts them, between its hops, under random stalls."""
    frames, codes, expected, _ = hop_case(case, nodes, elements, rank, seed=rank)
    dut = shared(ReduceAdder, mtu=200)
    out = run_adder(dut, case, nodes, frames, codes, expected, lead=300, idle=(0.2, 0.2),
                    backpressure=0.2, seed=rank, rank=rank, elements=elements)
    assert check_outputs(out, expected) == 0
    assert any(f is None for f, _ in expected) or elements < nodes
