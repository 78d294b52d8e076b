# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.sum_decoder.SumDecoder` against the
reference's host values (:func:`~squeezenic_hw.reference.allreduce.integer_values`), bit
for bit: sums at the widths of every ring size, their extremes, and ``aux``/``scale`` of
every class (±0, subnormal, normal, ±inf, NaN, products that overflow)."""

import random

import numpy as np
import pytest
from amaranth.lib import data

from squeezenic_hw.gateware.reduce.layouts import sums_job_layout
from squeezenic_hw.gateware.reduce.sum_decoder import SumDecoder, decoded_sums_layout
from squeezenic_hw.reference.allreduce import integer_values
from squeezenic_hw.sim.reduce_ring import write_sign_table
from squeezenic_hw.sim.streams import pack_payload, simulation_of
from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.reduce import partial_width

from support.beat_source import send_beats
from support.checked_sink import CheckedSink, max_streak, take_beats
from support.shared_duts import shared
from support.unused import rejected

AUX = [0.5, -1 / 32, 3.0e38, -1e-40, 1e-45, 0.0, -0.0, float("inf"), float("-inf"),
       float("nan"), 1.1754944e-38, 7.0e33]


def sums_for(rng, codec, param, nodes, jobs):
    """``jobs`` lists of up to 16 sums a ring of ``nodes`` can finish, extremes included."""
    if codec == "sign":
        lo, hi = 0, nodes
    else:
        hi = nodes * ((1 << (param - 1)) - 1)
        lo = -hi
    out = []
    for _ in range(jobs):
        n = rng.choice([16, 16, rng.randrange(1, 17)])
        out.append([rng.choice([lo, hi, 0, rng.randint(lo, hi), rng.randint(lo, hi)])
                    for _ in range(n)])
    return out


def run_decoder(dut, codec, nodes, width, scale, aux, jobs, *, idle=0.0,
                backpressure=0.0, seed=0):
    """The output jobs (lists of fp32 bit patterns) and the cycles they left."""
    in_layout = sums_job_layout(dut.sum_width)
    out_layout = decoded_sums_layout()
    mask = (1 << width) - 1
    words = [pack_payload(in_layout, {"sums": [s & mask for s in sums] + [0] * (16 - len(sums)),
                                      "count": len(sums), "width": width,
                                      "last": int(k % 3 == 2)})
             for k, sums in enumerate(jobs)]
    got, cycles = [], []

    async def source(ctx):
        ctx.set(dut.cfg, {"enable": 1, "nodes": nodes, "rank": 0,
                          "codec": codec_info(codec).id, "param": 0, "stochastic": 0,
                          "scale": f32_bits(scale), "aux": f32_bits(aux), "elements": 0,
                          "chunk": 0})
        await write_sign_table(ctx, [dut], nodes, scale, aux)
        await send_beats(ctx, dut.i, words, idle=idle, rng=random.Random(seed))

    async def sink(ctx):
        s = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=random.Random(seed + 1))
        beats, t = await take_beats(s, len(jobs), timeout=100 + 10 * len(jobs))
        for beat in beats:
            v = data.Const(out_layout, beat)
            got.append((int(v.count), int(v.last), [int(v.elements[e]) for e in range(16)]))
        cycles.extend(t)

    simulation_of(dut).run([(source, True), (sink, False)])
    return got, cycles


def expected(codec, nodes, scale, aux, jobs):
    out = []
    for k, sums in enumerate(jobs):
        values = integer_values(np.array(sums), codec, nodes, scale, aux).view(np.uint32)
        out.append((len(sums), int(k % 3 == 2),
                    [int(v) for v in values] + [0] * (16 - len(sums))))
    return out


@pytest.mark.parametrize("codec, param, nodes", [
    ("fixed", 8, 2), ("fixed", 16, 16), ("qsgd", 2, 3), ("sign", 0, 16),
    pytest.param("qsgd", 4, 8, marks=pytest.mark.slow),
    pytest.param("sign", 0, 4, marks=pytest.mark.slow),
    pytest.param("fixed", 5, 8, marks=pytest.mark.slow)])
def test_values_as_the_reference(codec, param, nodes):
    """Every class of ``aux`` (and of ``scale`` for ``sign``) with the ``fixed:8`` ring of
    2; a few with the others."""
    rng = random.Random(f"{codec}{param}{nodes}")
    dut = shared(SumDecoder)
    width = partial_width(codec, param, nodes)
    for k, aux in enumerate(AUX if (codec, param) == ("fixed", 8) else AUX[2::4]):
        scale = AUX[(k + 3) % len(AUX)]
        jobs = sums_for(rng, codec, param, nodes, 12)
        got, _ = run_decoder(dut, codec, nodes, width, scale, aux, jobs, idle=0.3,
                             backpressure=0.3, seed=k)
        assert got == expected(codec, nodes, scale, aux, jobs), (aux, scale)


def test_a_sign_only_build():
    dut = shared(SumDecoder, codecs=["sign"], sum_width=5)
    assert dut.latency == 1
    rng = random.Random(2)
    jobs = sums_for(rng, "sign", 0, 8, 40)
    got, _ = run_decoder(dut, "sign", 8, 4, 0.25, float("-inf"), jobs, idle=0.2,
                         backpressure=0.4, seed=2)
    assert got == expected("sign", 8, 0.25, float("-inf"), jobs)


def test_full_rate():
    dut = shared(SumDecoder)
    rng = random.Random(5)
    jobs = sums_for(rng, "fixed", 8, 4, 80)
    got, cycles = run_decoder(dut, "fixed", 4, 10, 1.0, 1 / 64, jobs, seed=5)
    assert got == expected("fixed", 4, 1.0, 1 / 64, jobs)
    assert max_streak(cycles) == len(jobs)


@pytest.mark.parametrize("kwargs, name", [
    ({"codecs": ["raw"]}, "codecs"), ({"codecs": "sign"}, "codecs"),
    ({"sum_width": 21}, "sum_width"), ({"sum_width": 1}, "sum_width")])
def test_bad_parameters(kwargs, name):
    rejected(SumDecoder, match=name, **kwargs)
