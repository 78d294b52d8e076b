# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.contribution_checker.ContributionChecker`
against the numpy reference of the contribution checks (:class:`~squeezenic_hw.reference.
reduce_rx.ContributionReceiver`).

A node's host sends its contribution frames (``reference.allreduce.contribution_frames``)
for two all-reduces in a row, mixed with contribution frames mutated to fail each check and
frames that are not contribution frames. Under random idle cycles on the input and random
backpressure on both outputs, every frame must leave whole and unchanged on the output the
reference sends it to, and every counter must equal the reference's."""

import random
from dataclasses import replace

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.checker import REDUCIBLE_CODECS
from squeezenic_hw.gateware.reduce.contribution_checker import (
    CONTRIBUTION_CONFIG_CYCLES,
    MIN_DEPTH,
    ContributionChecker,
)
from squeezenic_hw.gateware.reduce.layouts import ContributionBeat
from squeezenic_hw.reference.allreduce import allreduce, contribution_frames
from squeezenic_hw.reference.reduce_rx import ContributionReceiver
from squeezenic_hw.sim.axis import AxisFrame, frame_beats
from squeezenic_hw.sim.streams import BeatSender, probe_registered_ready, simulation_of
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.counters import CONTRIBUTION_COUNTERS, contribution_counter_name
from squeezenic_hw.spec.frames import build_host_frame, parse
from squeezenic_hw.spec.reduce import ContributionReason

from support.checked_sink import CheckedSink
from support.reduce_frames import SETTINGS, contribution_mutations, lane_config
from support.shared_duts import shared
from support.unused import rejected

_BEAT_MASK = (1 << data.Layout.cast(AxisBeat).size) - 1
_FIRST_AT = data.Layout.cast(ContributionBeat)["first"].offset


def host_stream(case, nodes, rank, elements, rng, *, step, mutated=0.4, other=0.1,
                rounds=2):
    """What node ``rank``'s host sends: its contribution frames ``rounds`` times, each
    preceded, with probability ``mutated``, by a copy mutated to fail a check (the checks
    in turns), and with ``other`` by a frame that is not a contribution frame."""
    np_rng = np.random.default_rng(rng.randrange(2**32))
    xs = [np_rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    codec = case.split("-")[0]
    settings = SETTINGS[case]
    frames = contribution_frames(xs[rank], rank, nodes, codec, max_host_elements=step,
                                 **settings)
    links = allreduce(xs, codec, mtu=200, **settings).links
    reasons = [r for r in ContributionReason
               if r not in (ContributionReason.NONE, ContributionReason.DISABLED)]
    turns, out = [], []
    for _ in range(rounds):
        for f in frames:
            if rng.random() < mutated:
                turns = turns or rng.sample(reasons, len(reasons))
                out.append(rng.choice(contribution_mutations(f)[turns.pop(0)]))
            if rng.random() < other:
                h = parse(f)
                v1 = build_host_frame(replace(h, version=1, flags=0, seed=0),
                                      np.frombuffer(f[64:], np.float32))
                wire = [g for link in links for g in link]
                out.append(rng.choice([v1, f[:rng.randrange(1, 64)]]
                                      + ([rng.choice(wire)] if wire else [])))
            out.append(f)
    return out


def expected_outputs(case, nodes, rank, elements, frames, *, enable=True, built=True):
    """``(take, other, counters)`` by the reference. Without the ring's codec ``built`` in,
    a frame that passes the checks before ``settings`` fails it (and moves nothing)."""
    codec = case.split("-")[0]
    receiver = ContributionReceiver(nodes, rank, codec, elements=elements,
                                    enabled=enable, **SETTINGS[case])
    take, other = [], []
    counters = dict.fromkeys(CONTRIBUTION_COUNTERS, 0)
    for f in frames:
        if built:
            reason = receiver.receive(f.data, tuser_size=f.size).reason
        else:
            reason = receiver._judge(f.data, f.size).reason
            if reason is not None and (reason is ContributionReason.NONE
                                       or reason > ContributionReason.SETTINGS):
                reason = ContributionReason.SETTINGS
        if reason is not None:
            counters[contribution_counter_name(reason)] += 1
        (take if reason is ContributionReason.NONE else other).append(f)
    return take, other, counters


def run_checker(case, nodes, rank, elements, frames, *, enable=True, idle=0.0,
                backpressure=0.0, seed=0, depth=16, codecs=REDUCIBLE_CODECS):
    frames = [f if isinstance(f, AxisFrame) else AxisFrame(f) for f in frames]
    rng = random.Random(seed)
    for f in frames:
        f.src, f.dst = rng.randrange(2**16), rng.randrange(2**16)
    dut = shared(ContributionChecker, depth=depth, codecs=codecs)
    take, other, counters = expected_outputs(
        case, nodes, rank, elements, frames, enable=enable,
        built=codec_info(case.split("-")[0]).id in dut.codecs)
    total = sum(len(frame_beats(f)) for f in frames)
    done = []

    async def source(ctx):
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, enable=False))
        sender = BeatSender(ctx, dut.i, idle=idle, rng=random.Random(seed + 1))
        await sender.wait_until(CONTRIBUTION_CONFIG_CYCLES + 1)
        ctx.set(dut.cfg, lane_config(case, nodes, rank, elements, enable=enable))
        await sender.wait_until(CONTRIBUTION_CONFIG_CYCLES + 3)
        for f in frames:
            for word in frame_beats(f):
                await sender.send(word)
        await sender.close()

    def sink(out, expected, first_bit, rng):
        beats = [(word, b == 0) for f in expected for b, word in enumerate(frame_beats(f))]

        async def bench(ctx):
            s = CheckedSink(ctx, out, backpressure=backpressure, rng=rng)
            k = 0
            while k < len(beats):
                got, _ = await s.cycle()
                assert s.t < 300 + 10 * total, f"{k} of {len(beats)} beats"
                if got is None:
                    continue
                word, first = beats[k]
                assert got & _BEAT_MASK == word, f"beat {k} changed or out of order"
                if first_bit:
                    assert (got >> _FIRST_AT) & 1 == first, f"beat {k}: first"
                k += 1
            for _ in range(20):
                got, _ = await s.cycle()
                assert got is None, "a beat more than the reference sends"
            await s.close()
            done.append(out)
        return bench

    async def counters_bench(ctx):
        while len(done) < 2:
            await ctx.tick()
        got = {name: ctx.get(getattr(dut.counters, name)) for name in CONTRIBUTION_COUNTERS}
        assert got == counters

    simulation_of(dut).run([
        (source, True),
        (sink(dut.take, take, True, random.Random(seed + 2)), False),
        (sink(dut.other, other, False, random.Random(seed + 3)), False),
        (counters_bench, False)])
    return take, other, counters


@pytest.mark.parametrize("case, nodes, rank, elements, step, stalls", [
    ("fixed", 3, 1, 1000, 100, (0.3, 0.3)),
    ("sign", 4, 0, 97, 7, (0.0, 0.0)),
    ("qsgd-stochastic", 2, 1, 40, 16, (0.2, 0.5)),
    ("raw", 5, 4, 9, 1, (0.1, 0.2)),         # chunks 3 and 4 empty: the own one is
    ("natural-stochastic", 16, 3, 300, 13, (0.3, 0.1)),
])
def test_contributions_and_mutated_frames(case, nodes, rank, elements, step, stalls):
    """Every contribution frame taken in ring order for two all-reduces; every mutated and
    foreign frame passed on unchanged; the counters as the reference's."""
    rng = random.Random(nodes * 100 + rank)
    frames = host_stream(case, nodes, rank, elements, rng, step=step, mutated=0.9)
    take, other, counters = run_checker(case, nodes, rank, elements, frames,
                                        idle=stalls[0], backpressure=stalls[1], seed=nodes)
    assert counters["contribution_taken"] == len(take) > 0
    assert all(counters[contribution_counter_name(r)] > 0
               for r in ContributionReason if r is not ContributionReason.DISABLED)


def test_disabled_passes_every_frame_on():
    rng = random.Random(5)
    frames = host_stream("fixed", 3, 2, 200, rng, step=50, mutated=0.0, other=0.0,
                         rounds=1)
    take, other, counters = run_checker("fixed", 3, 2, 200, frames, enable=False,
                                        idle=0.2, backpressure=0.2)
    assert take == [] and counters["contribution_disabled"] == len(frames)


def test_a_codec_not_built_fails_settings():
    rng = random.Random(6)
    frames = host_stream("fixed", 2, 0, 100, rng, step=30, mutated=0.5, other=0.2)
    take, other, counters = run_checker("fixed", 2, 0, 100, frames, idle=0.1,
                                        backpressure=0.1, codecs=["sign", "raw"])
    assert take == [] and counters["contribution_settings"] > len(frames) // 3


def test_ready_is_a_register():
    dut = ContributionChecker()
    seen = probe_registered_ready(dut, [dut.i], [dut.take, dut.other])
    assert any(ready for ready, in seen)


@pytest.mark.parametrize("kwargs, name", [({"depth": MIN_DEPTH - 1}, "depth"),
                                          ({"depth": 65}, "depth"), ({"port": 0}, "port")])
def test_bad_parameters(kwargs, name):
    rejected(ContributionChecker, match=name, **kwargs)
