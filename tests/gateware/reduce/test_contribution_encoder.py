# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.contribution_encoder.ContributionEncoder`:
the taken contribution frames of a node's host (edge values included) must come out as the
reference's codes of their values (``reference.codecs.encode`` with the node's seed and
each element's tensor index), in order, a beat per payload beat, under random idle cycles
and backpressure."""

import random

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.reduce.code_aligner import host_codes_layout
from squeezenic_hw.gateware.reduce.contribution_encoder import ContributionEncoder
from squeezenic_hw.gateware.reduce.layouts import ContributionBeat
from squeezenic_hw.reference.allreduce import contribution_frames
from squeezenic_hw.reference.codecs import encode
from squeezenic_hw.sim.axis import frame_beats
from squeezenic_hw.sim.streams import BeatSender, simulation_of
from squeezenic_hw.spec.frames import parse

from support.checked_sink import CheckedSink, max_streak, take_beats
from support.reduce_frames import SETTINGS, edge_tensors, lane_config
from support.shared_duts import shared
from support.unused import rejected

_FIRST_AT = data.Layout.cast(ContributionBeat)["first"].offset


def run_encoder(case, nodes, rank, elements, *, step, code_width, codecs, idle=0.0,
                backpressure=0.0, seed=0):
    rng = np.random.default_rng(seed)
    codec = case.split("-")[0]
    settings = SETTINGS[case]
    xs = edge_tensors(rng, nodes, elements, codec, settings.get("param", 0))
    frames = contribution_frames(xs[rank], rank, nodes, codec, max_host_elements=step,
                                 **settings)
    node_seed = (1000 + rank) % 2**32
    expected = []
    for f in frames:
        h = parse(f)
        codes = encode(np.frombuffer(f[64:], np.float32), codec, seed=node_seed,
                       offset=h.offset, **settings)
        codes = [int(v) & ((1 << code_width) - 1) for v in codes]
        expected += [(codes[k:k + 16], min(16, h.n - k)) for k in range(0, h.n, 16)]
    words = [w | int(b == 0) << _FIRST_AT for f in frames
             for b, w in enumerate(frame_beats(f))]
    dut = shared(ContributionEncoder, codecs=codecs, code_width=code_width)
    layout = host_codes_layout(code_width)
    got = []

    async def source(ctx):
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, seed=1000))
        await BeatSender(ctx, dut.i).wait_until(1)
        sender = BeatSender(ctx, dut.i, idle=idle, rng=random.Random(seed + 1))
        for w in words:
            await sender.send(w)
        await sender.close()

    def beat_of(value):
        v = data.Const(layout, value)
        n = int(v.count)
        return [int(v.codes[e]) for e in range(n)], n

    async def sink(ctx):
        s = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(seed + 2),
                        beat=beat_of)
        beats, cycles = await take_beats(s, len(expected), timeout=200 + 6 * len(words))
        got.extend(beats)
        got.append(cycles)

    simulation_of(dut).run([(source, True), (sink, False)])
    cycles = got.pop()
    assert got == expected
    return cycles, len(expected)


@pytest.mark.parametrize("case, nodes, rank, elements, step, stalls", [
    ("fixed", 3, 1, 700, 100, (0.3, 0.3)),
    ("fixed-stochastic", 2, 0, 300, 37, (0.2, 0.5)),
    ("qsgd-stochastic", 4, 3, 257, 16, (0.4, 0.2)),
    ("sign", 5, 2, 123, 7, (0.1, 0.1)),
])
def test_codes_as_the_reference(case, nodes, rank, elements, step, stalls):
    run_encoder(case, nodes, rank, elements, step=step, code_width=16,
                codecs=["fixed", "qsgd", "sign"], idle=stalls[0], backpressure=stalls[1],
                seed=nodes)


def test_a_sign_only_build_at_full_rate():
    """One code bit; with nothing stalled a beat of codes per payload beat, back to back."""
    cycles, beats = run_encoder("sign", 3, 0, 3000, step=363, code_width=1, codecs=["sign"])
    assert max_streak(cycles) >= 20


@pytest.mark.parametrize("kwargs, name", [
    ({"codecs": ["raw"], "code_width": 8}, "codecs"),
    ({"codecs": ["fixed"], "code_width": 0}, "code_width"),
    ({"codecs": ["fixed"], "code_width": 17}, "code_width")])
def test_bad_parameters(kwargs, name):
    rejected(ContributionEncoder, match=name, **kwargs)
