"""Tests of :class:`FrameMerger`, the output stage of both lanes.

Random mixes of built frames (header from the token, payload beats from their
own stream; sizes 65…1518 and a few up to 9600) and bypassed frames (1…1518
bytes, many of one beat) go through the merger with random idle cycles on each
of the three inputs and random backpressure on the output. The expected output
beats are those of the whole frames, cut into beats by ``sim.axis.frame_beats``
(a built frame is ``header + payload bytes`` with the token's ``tuser``), and
are compared bit for bit: data, ``tkeep``, ``tlast`` and ``tuser`` of every
beat. The output must hold under backpressure, and with everything ready and
no backpressure, frames leave back to back, one beat per cycle.
"""

import random

import pytest
from amaranth import Module, ResetInserter, Signal, Value
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, AxisBeat, FrameToken
from squeezenic_hw.gateware.lane.merger import FrameMerger
from squeezenic_hw.sim.axis import AxisFrame, FrameSource, frame_beats
from squeezenic_hw.sim.streams import BeatSender, unpack_fields

from support.checked_sink import CheckedSink, max_streak
from support.unused import rejected

# --------------------------------------------------------------------------
# Stimulus and expected output
# --------------------------------------------------------------------------


class Mix:
    """Tokens, payload beats, bypass frames and the expected output beats."""

    def __init__(self):
        self.tokens = []      # packed FrameToken ints
        self.payload = []     # payload beat ints
        self.bypass = []      # AxisFrame
        self.expected = []    # packed AxisBeat ints
        self.frame_ends = []  # index into expected of each frame's last beat


def built_frame(rng, mix, size):
    header = rng.randbytes(DATA_BYTES)
    body = rng.randbytes(size - DATA_BYTES)
    src, dst = rng.getrandbits(16), rng.getrandbits(16)
    mix.tokens.append(FrameToken.const({
        "built": 1, "header": int.from_bytes(header, "little"),
        "size": size, "src": src, "dst": dst}).as_value().value)
    # payload beats as a packer delivers them: zero past the end of the frame
    for k in range(0, len(body), DATA_BYTES):
        mix.payload.append(int.from_bytes(body[k:k + DATA_BYTES], "little"))
    mix.expected += frame_beats(AxisFrame(header + body, src=src, dst=dst))
    mix.frame_ends.append(len(mix.expected) - 1)


def bypass_frame(rng, mix, size):
    frame = AxisFrame(rng.randbytes(size), src=rng.getrandbits(16), dst=rng.getrandbits(16))
    mix.bypass.append(frame)
    # a bypass token's other fields are ignored: fill them with garbage
    mix.tokens.append(FrameToken.const({
        "built": 0, "header": rng.getrandbits(512), "size": rng.getrandbits(16),
        "src": rng.getrandbits(16), "dst": rng.getrandbits(16)}).as_value().value)
    mix.expected += frame_beats(frame)
    mix.frame_ends.append(len(mix.expected) - 1)


def random_mix(rng, n_frames, mix=None):
    mix = Mix() if mix is None else mix
    for _ in range(n_frames):
        if rng.random() < 0.5:
            r = rng.random()
            if r < 0.06:
                size = rng.randint(1519, 9600)
            elif r < 0.3:
                size = rng.choice([65, 127, 128, 129, 192, 1518]) + rng.randint(0, 1) * 64
            else:
                size = rng.randint(65, 1518)
            built_frame(rng, mix, size)
        else:
            size = rng.randint(1, 64) if rng.random() < 0.3 else rng.randint(1, 1518)
            bypass_frame(rng, mix, size)
    return mix


# --------------------------------------------------------------------------
# Simulation harness
# --------------------------------------------------------------------------


def _source(stream, values, idle, rng, accepted):
    async def run(ctx):
        sender = BeatSender(ctx, stream, idle=idle, rng=rng)
        for value in values:
            accepted.append(await sender.send(value))
        await sender.close()
    return run


class MergeRun:
    def __init__(self):
        self.outputs = []
        self.out_cycles = []
        self.token_cycles = []
        self.payload_cycles = []


def _after(cycles, testbench):
    """``testbench`` started ``cycles`` clock edges late."""
    async def run(ctx):
        if cycles:
            await ctx.tick().repeat(cycles)
        await testbench(ctx)
    return run


def run_merger(mix, *, idle=0.0, backpressure=0.0, seed=0, quiet=30, dut=None, top=None,
               start=0, prelude=None):
    """Run ``mix`` through a merger (``dut``, simulated as ``top``), its sources and sink
    starting ``start`` cycles in; ``prelude`` runs from cycle 0 beside them."""
    dut = FrameMerger() if dut is None else dut
    run = MergeRun()
    n_out = len(mix.expected)
    timeout = int(n_out * (2 + 10 * backpressure + 6 * idle)) + 500
    has_bypass = "bypass" in dut.signature.members
    bypass_src = FrameSource(dut.bypass, mix.bypass, idle=idle, seed=seed) if has_bypass \
        else None

    async def sink(ctx):
        out = CheckedSink(ctx, dut.o, backpressure=backpressure,
                           rng=random.Random(seed * 5 + 4))
        last_beat = 0
        while len(run.outputs) < n_out or out.t < last_beat + quiet:
            beat, _ = await out.cycle()
            assert out.t <= timeout, f"{len(run.outputs)} of {n_out} beats after {out.t} cycles"
            if beat is not None:
                run.outputs.append(beat)
                run.out_cycles.append(out.t)
                last_beat = out.t
        await out.close()

    sim = Simulator(dut if top is None else top)
    sim.add_clock(4e-9)
    if prelude is not None:
        sim.add_testbench(prelude, background=True)
    sim.add_testbench(_after(start, _source(dut.tokens, mix.tokens, idle,
                                            random.Random(seed * 5 + 1), run.token_cycles)),
                      background=True)
    sim.add_testbench(_after(start, _source(dut.payload, mix.payload, idle,
                                            random.Random(seed * 5 + 2), run.payload_cycles)),
                      background=True)
    if bypass_src is not None:
        sim.add_testbench(_after(start, bypass_src.run), background=True)
    sim.add_testbench(_after(start, sink))
    sim.run()
    return run


def _fields(value):
    beat = unpack_fields(AxisBeat, value)
    return {k: int(beat[k]) for k in ("data", "keep", "last", "size", "src", "dst")}


def check_output(run, mix):
    assert len(run.outputs) == len(mix.expected), "missing or extra beats"
    for j, (got, want) in enumerate(zip(run.outputs, mix.expected, strict=True)):
        if got != want:
            g, w = _fields(got), _fields(want)
            diff = [k for k in g if g[k] != w[k]]
            raise AssertionError(f"beat {j} differs in {diff}")
    assert len(run.token_cycles) == len(mix.tokens)
    assert len(run.payload_cycles) == len(mix.payload)


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
def test_random(idle, backpressure, seed):
    rng = random.Random(seed * 100 + int(idle * 10) * 10 + int(backpressure * 10))
    mix = random_mix(rng, 120)
    run = run_merger(mix, idle=idle, backpressure=backpressure, seed=seed)
    check_output(run, mix)


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
def test_without_bypass_input(idle, backpressure):
    """``bypass=False`` (a trusted lane): built frames only, same output, no bypass port."""
    rng = random.Random(7 + int(idle * 10) + int(backpressure * 100))
    mix = Mix()
    for _ in range(80):
        size = rng.choice([65, 128, 129, 1518, rng.randint(65, 9600)])
        built_frame(rng, mix, size)
    dut = FrameMerger(bypass=False)
    assert "bypass" not in dut.signature.members
    run = run_merger(mix, idle=idle, backpressure=backpressure, seed=3, dut=dut)
    check_output(run, mix)
    if idle == backpressure == 0:
        assert max_streak(run.out_cycles) == len(mix.expected)
    rejected(FrameMerger, bypass=None, match="bypass")


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
def test_banked_payload(idle, backpressure):
    """``banked=True`` (the TX ring's two read ports): each payload beat is offered on a
    random bank with junk on the other; the output is the same as from plain beats."""
    rng = random.Random(11 + int(idle * 10) + int(backpressure * 100))
    mix = random_mix(rng, 100)
    packed = []
    for beat in mix.payload:
        bank, junk = rng.randrange(2), rng.getrandbits(512)
        banks = (beat, junk) if bank == 0 else (junk, beat)
        packed.append(banks[0] | banks[1] << 512 | bank << 1024)
    mix.payload = packed
    dut = FrameMerger(banked=True)
    run = run_merger(mix, idle=idle, backpressure=backpressure, seed=4, dut=dut)
    check_output(run, mix)
    if idle == backpressure == 0:
        assert max_streak(run.out_cycles) > 100
    rejected(FrameMerger, banked=1, match="banked")


def test_back_to_back():
    """Everything ready, no backpressure: one beat per cycle from the first beat to
    the last, across frame boundaries (1-beat bypass frames and 2-beat built ones
    included), with the documented latencies."""
    rng = random.Random(99)
    mix = Mix()
    for size, built in [(65, 1), (1, 0), (64, 0), (65, 1), (128, 1), (129, 1), (30, 0),
                        (1518, 1), (1518, 0), (9600, 1), (65, 0), (60, 0), (200, 1)]:
        (built_frame if built else bypass_frame)(rng, mix, size)
    random_mix(rng, 30, mix)
    run = run_merger(mix)
    check_output(run, mix)
    assert max_streak(run.out_cycles) == len(mix.expected)
    assert run.out_cycles[0] - run.token_cycles[0] == 2
    # the token of each frame after the first is taken with the previous frame's last beat
    # (the output register delays that beat by one cycle)
    ends = [run.out_cycles[j] for j in mix.frame_ends]
    assert all(run.token_cycles[k + 1] == ends[k] - 1 for k in range(len(ends) - 1))


def test_reset_mid_frame_leaves_no_stale_beat():
    """Only the state and valid bits take a reset: a reset in the middle of a built and a
    bypassed frame, with the output stalled, leaves no beat behind (the merger is idle,
    ready for a token, ``o.valid`` low), and the frames after it come out right."""
    rng = random.Random(5)
    before = random_mix(rng, 2)
    while len(before.payload) < 4:
        before = random_mix(rng, 2)
    mix = random_mix(rng, 40)
    dut = FrameMerger()
    rst = Signal()
    top = Module()
    top.submodules.merger = ResetInserter(rst)(dut)
    frames = iter(before.bypass)
    start = 30

    async def prelude(ctx):
        # tokens, payload and bypass beats offered, the output stalled: state fills up
        ctx.set(dut.o.ready, 0)
        ctx.set(Value.cast(dut.tokens.payload), before.tokens[0])
        ctx.set(dut.tokens.valid, 1)
        ctx.set(dut.payload.payload, before.payload[0])
        ctx.set(dut.payload.valid, 1)
        bypass = next(frames, None)
        if bypass is not None:
            ctx.set(dut.bypass.payload.as_value(), frame_beats(bypass)[0])
            ctx.set(dut.bypass.valid, 1)
        for k in range(8):
            ctx.set(dut.o.ready, k in (2, 4))     # a beat or two out, then one held
            await ctx.tick()
        assert ctx.get(dut.o.valid)
        for s in (dut.tokens, dut.payload, dut.bypass):
            ctx.set(s.valid, 0)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        for _ in range(start - 12):
            ctx.set(dut.o.ready, 1)
            assert ctx.get(dut.tokens.ready) and not ctx.get(dut.payload.ready)
            assert not ctx.get(dut.bypass.ready)
            _, _, valid = await ctx.tick().sample(dut.o.valid)
            assert not valid

    run = run_merger(mix, idle=0.2, backpressure=0.3, seed=5, dut=dut, top=top,
                     start=start, prelude=prelude)
    check_output(run, mix)


def test_verilog():
    text = verilog.convert(FrameMerger(), name="frame_merger")
    assert "module frame_merger" in text
