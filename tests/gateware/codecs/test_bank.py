# amaranth: UnusedElaboratable=no
"""Encoder and decoder banks: mixed codecs back to back, bit-exact with the reference."""

import numpy as np
import pytest
from amaranth import Module, ResetInserter, Signal, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.gateware.codecs.bank import DecoderBank, EncoderBank, codec_widths
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.reference import codecs as ref
from squeezenic_hw.sim.streams import run_stream
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, random_f32_bits
from squeezenic_hw.spec.codecs import codec_info

from support.shared_duts import shared
from support.unused import rejected

ONE = 0x3F800000


def _params(rng, codec):
    info = codec_info(codec)
    param = int(rng.integers(2, 17)) if info.param_range else 0
    stochastic = int(info.stochastic and rng.random() < 0.5)
    scale = int(np.float32(rng.uniform(0.5, 40)).view(np.uint32))
    aux = int(np.float32(rng.uniform(-2, 2)).view(np.uint32))
    return {"param": param, "stochastic": stochastic, "scale": scale, "aux": aux,
            "seed": int(rng.integers(0, 2**32))}


def _f32(bits):
    return np.uint32(bits).view(np.float32)


def _beats(rng, codecs, n_beats, encoder):
    """Random beats, each of a random codec, with the expected 16 outputs."""
    beats, expected = [], []
    for _ in range(n_beats):
        codec = codecs[int(rng.integers(len(codecs)))]
        info = codec_info(codec)
        p = _params(rng, codec)
        count = int(rng.integers(1, ELEMENTS_PER_BEAT + 1))
        offset = int(rng.integers(0, 2**32 - 16))
        user = int(rng.integers(0, 16))
        kw = dict(param=p["param"], scale=_f32(p["scale"]), aux=_f32(p["aux"]))
        if encoder:
            values = random_f32_bits(rng, count)
            edge = rng.random(count) < 0.3
            values[edge] = rng.choice(EDGE_F32_BITS, size=int(edge.sum()))
            out = np.asarray(ref.encode(ref.from_bits(values), info, seed=p["seed"],
                                        offset=offset, stochastic=bool(p["stochastic"]),
                                        **kw), dtype=np.uint32)
            field = "elements"
        else:
            b = info.bits_per_element(p["param"])
            values = rng.integers(0, 2**b, size=count, dtype=np.uint64).astype(np.uint32)
            out = ref.to_bits(ref.decode(values, info, **kw))
            field = "codes"
        lanes = [int(v) for v in values] + [0] * (ELEMENTS_PER_BEAT - count)
        beat = {field: lanes, "valid": (1 << count) - 1, "params": p,
                "meta": {"codec": info.id, "user": user}}
        if encoder:
            beat["offset"] = offset
        beats.append(beat)
        expected.append(([int(v) for v in out] + [0] * (ELEMENTS_PER_BEAT - count),
                         (1 << count) - 1, info.id, user))
    return beats, expected


def _check(dut, beats, expected, field, **kw):
    run = run_stream(dut, beats, **kw)
    layout = dut.o.payload.shape()
    for k, (word, (want, mask, codec, user)) in enumerate(zip(run.outputs, expected,
                                                             strict=True)):
        got = data.Const(layout, word)
        values = [int(got[field][e]) for e in range(ELEMENTS_PER_BEAT)]
        assert values == want, f"beat {k} (codec {codec}): {values} != {want}"
        assert int(got.valid) == mask and int(got.meta.codec) == codec
        assert int(got.meta.user) == user
    return run


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
def test_encoder_bank_mixed_codecs(idle, backpressure):
    codecs = ["raw", "fp16", "bf16", "sign", "natural"]
    rng = np.random.default_rng([1, int(idle * 10), int(backpressure * 10)])
    dut = shared(EncoderBank, codecs, meta_shape=unsigned(4))
    assert dut.latency == 14   # natural's, its cleared copy and the output register
    beats, expected = _beats(rng, codecs, 120, encoder=True)
    run = _check(dut, beats, expected, "codes", idle=idle, backpressure=backpressure,
                 seed=3)
    if idle == backpressure == 0:
        assert run.latency == dut.latency
        assert run.max_ready_streak == len(beats)


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.3)])
def test_decoder_bank_mixed_codecs(idle, backpressure):
    codecs = ["raw", "fp16", "bf16", "sign", "natural"]
    rng = np.random.default_rng([2, int(idle * 10)])
    dut = shared(DecoderBank, codecs, meta_shape=unsigned(4))
    beats, expected = _beats(rng, codecs, 120, encoder=False)
    run = _check(dut, beats, expected, "elements", idle=idle, backpressure=backpressure,
                 seed=4)
    if idle == backpressure == 0:
        assert run.max_ready_streak == len(beats)


def test_banks_with_fixed_and_qsgd():
    codecs = ["fixed", "qsgd", "sign"]
    rng = np.random.default_rng(5)
    enc = EncoderBank(codecs)
    assert enc.latency == 16
    beats, expected = _beats(rng, codecs, 24, encoder=True)
    for b in beats:
        b["meta"]["user"] = 0
    expected = [(w, m, c, 0) for (w, m, c, _u) in expected]
    _check(enc, beats, expected, "codes", idle=0.3, backpressure=0.3, seed=6)
    dec = DecoderBank(codecs)
    beats, expected = _beats(rng, codecs, 24, encoder=False)
    for b in beats:
        b["meta"]["user"] = 0
    expected = [(w, m, c, 0) for (w, m, c, _u) in expected]
    _check(dec, beats, expected, "elements", idle=0.3, backpressure=0.3, seed=7)


@pytest.mark.parametrize("encoder", [True, False], ids=["encoder", "decoder"])
def test_all_codecs_mixed(encoder):
    """Codecs 0-6 beat by beat: fixed and qsgd share their multipliers, and every
    stochastic codec (fixed, qsgd, natural) the bank's one random generator; each
    beat's draws and parameters stay its own."""
    codecs = ["raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural"]
    rng = np.random.default_rng([8, int(encoder)])
    dut = shared(EncoderBank if encoder else DecoderBank, codecs, meta_shape=unsigned(4))
    assert dut.latency == (16 if encoder else 11)
    beats, expected = _beats(rng, codecs, 60, encoder=encoder)
    _check(dut, beats, expected, "codes" if encoder else "elements", idle=0.3,
           backpressure=0.3, seed=9)


@pytest.mark.parametrize("encoder", [True, False], ids=["encoder", "decoder"])
def test_registered_ready_bank_advances_on_o_ready_alone(encoder):
    """With ``registered_ready`` the pipeline moves exactly when ``o.ready`` is high:
    ``i.ready`` is ``o.ready`` every cycle, and the results are the reference's."""
    codecs = ["raw", "fixed", "sign"]
    cls = EncoderBank if encoder else DecoderBank
    dut = shared(cls, codecs, meta_shape=unsigned(4), registered_ready=True)
    rng = np.random.default_rng([11, int(encoder)])
    beats, expected = _beats(rng, codecs, 60, encoder=encoder)
    cycles = []

    async def same_ready(ctx):
        async for _, _, i_ready, o_ready in ctx.tick().sample(dut.i.ready, dut.o.ready):
            assert i_ready == o_ready
            cycles.append(1)

    _check(dut, beats, expected, "codes" if encoder else "elements", idle=0.3,
           backpressure=0.4, seed=12, extra_testbenches=[same_ready])
    assert len(cycles) > len(beats)
    with pytest.raises(ValueError, match="registered_ready"):
        cls(codecs, registered_ready="yes")


def test_bank_rejects_bad_codecs():
    rejected(EncoderBank, [], match="codecs")
    rejected(DecoderBank, ["nope"], match="codec")


def test_codec_widths():
    assert codec_widths(["raw", "sign"]) == {32, 1}
    assert codec_widths(["fixed"]) == set(range(2, 17))


@pytest.mark.parametrize("encoder", [True, False])
def test_reset_mid_stream_leaves_no_stale_beat(encoder):
    """Only the valid bits take a reset: a reset with beats in the pipeline leaves no beat
    behind, and the beats after it come out right (the data registers keep stale values
    that nothing reads)."""
    codecs = ["raw", "fixed", "qsgd", "natural"]
    cls, field = (EncoderBank, "codes") if encoder else (DecoderBank, "elements")
    bank = cls(codecs, meta_shape=unsigned(4))
    rst = Signal()
    top = Module()
    top.submodules.bank = ResetInserter(rst)(bank)
    rng = np.random.default_rng(17)
    before, _ = _beats(rng, codecs, 6, encoder)
    after, expected = _beats(rng, codecs, 8, encoder)
    layout = bank.i.payload.shape()
    out = []

    async def bench(ctx):
        ctx.set(bank.o.ready, 0)                 # the pipeline fills and holds
        for beat in before:
            ctx.set(bank.i.payload, layout.const(beat))
            ctx.set(bank.i.valid, 1)
            await ctx.tick()
        ctx.set(bank.i.valid, 0)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(bank.o.ready, 1)
        for _ in range(bank.LATENCY + 3):        # nothing left from before the reset
            _, _, valid = await ctx.tick().sample(bank.o.valid)
            assert not valid
        for beat in after:
            ctx.set(bank.i.payload, layout.const(beat))
            ctx.set(bank.i.valid, 1)
            _, _, valid, payload = await ctx.tick().sample(bank.o.valid, bank.o.payload)
            if valid:
                out.append(payload)
        ctx.set(bank.i.valid, 0)
        while len(out) < len(after):
            _, _, valid, payload = await ctx.tick().sample(bank.o.valid, bank.o.payload)
            if valid:
                out.append(payload)

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    for k, (got, (want, mask, codec, user)) in enumerate(zip(out, expected, strict=True)):
        assert [int(got[field][e]) for e in range(ELEMENTS_PER_BEAT)] == want, k
        assert int(got.valid) == mask and int(got.meta.codec) == codec
        assert int(got.meta.user) == user
