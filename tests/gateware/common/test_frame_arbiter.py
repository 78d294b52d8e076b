"""Tests of :class:`~squeezenic_hw.gateware.common.frame_arbiter.FrameArbiter`.

Every input gets random frames (1…1518 bytes, random ``tuser_src``/``tuser_dst``)
sent by ``sim.axis.FrameSource`` with random idle cycles; ``sim.axis.FrameSink``
collects the output under random backpressure and checks the AXI-Stream rules
(whole frames: ``tuser`` constant, ``tkeep`` a prefix only short on ``tlast``,
``tuser_size`` equal to the bytes). The output must be the inputs' frames,
unchanged, each input's in its own order, and must hold while stalled. With all
inputs always ready, the order must be exactly the round-robin one (the model
below), and with no backpressure the output must carry every beat back to back.
"""

import random
import re
from collections import deque

import pytest
from amaranth import Module
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.frame_arbiter import FrameArbiter, none_set, round_robin_next
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource, frame_beats
from squeezenic_hw.sim.streams import probe_registered_ready, simulation_of

from support.param_sweep import rotated
from support.shared_duts import shared
from support.unused import rejected

STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


def random_frames(rng, count, *, max_size=1518):
    out = []
    for _ in range(count):
        r = rng.random()
        size = rng.randint(1, 64) if r < 0.25 else rng.randint(1, max_size)
        out.append(AxisFrame(rng.randbytes(size), src=rng.getrandbits(16),
                             dst=rng.getrandbits(16)))
    return out


def _key(frame):
    return (frame.data, frame.src, frame.dst)


def round_robin_order(per_input):
    """Frames in the order of a frame round robin whose inputs are always ready."""
    queues = [deque(frames) for frames in per_input]
    out, k = [], 0
    n = len(queues)
    while any(queues):
        if queues[k]:
            out.append(queues[k].popleft())
        k = (k + 1) % n
    return out


def run_arbiter(per_input, *, idle=0.0, backpressure=0.0, seed=0):
    """Simulate; return (sink, hold violations)."""
    n = len(per_input)
    dut = shared(FrameArbiter, n)
    sources = [FrameSource(dut.i[k], frames, idle=idle, seed=seed * 131 + k)
               for k, frames in enumerate(per_input)]
    total = sum(len(f) for f in per_input)
    beats = sum(len(frame_beats(f)) for frames in per_input for f in frames)
    sink = FrameSink(dut.o, n_frames=total, backpressure=backpressure, seed=seed,
                     timeout=30 * beats + 2000)
    holds = []

    async def monitor(ctx):
        # AXI-Stream: a beat offered and not taken stays, unchanged
        prev = None
        async for _, _, valid, ready, payload in ctx.tick().sample(
                dut.o.valid, dut.o.ready, dut.o.payload.as_value()):
            if prev is not None and (valid, payload) != prev:
                holds.append((prev, (valid, payload)))
            prev = (valid, payload) if valid and not ready else None

    simulation_of(dut).run([*((src.run, True) for src in sources), (monitor, True),
                            (sink.run, False)])
    return sink, holds


def assert_per_input_order(per_input, out_frames):
    """Each output frame is the next frame of one input; every frame comes out once."""
    queues = [deque(_key(f) for f in frames) for frames in per_input]
    for j, frame in enumerate(out_frames):
        key = _key(frame)
        for q in queues:
            if q and q[0] == key:
                q.popleft()
                break
        else:
            raise AssertionError(f"output frame {j} is not the next frame of any input")
    assert not any(queues)


# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 65, -1, 1.5, True, "2", None])
def test_rejects_bad_n_inputs(bad):
    rejected(FrameArbiter, bad, match="n_inputs")


@pytest.mark.parametrize("n,idle,backpressure", rotated([1, 2, 3, 8], STALLS))
def test_random_traffic(n, idle, backpressure):
    rng = random.Random(n * 1000 + int(idle * 10) * 10 + int(backpressure * 10))
    counts = {1: 30, 2: 16, 3: 12, 8: 6}[n]
    # some inputs busier than others, some with nothing at all (n > 2)
    per_input = [random_frames(rng, rng.randint(0 if n > 2 else 1, counts)) for _ in range(n)]
    sink, holds = run_arbiter(per_input, idle=idle, backpressure=backpressure,
                              seed=rng.randrange(1 << 16))
    assert not holds
    assert_per_input_order(per_input, sink.frames)


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("backpressure", [0.0, 0.5])
def test_fair_round_robin(n, backpressure):
    """All inputs always ready: grants rotate exactly (unequal frame counts included)."""
    rng = random.Random(7 * n + int(backpressure * 10))
    per_input = [random_frames(rng, rng.randint(1, 5), max_size=400) for _ in range(n)]
    sink, holds = run_arbiter(per_input, backpressure=backpressure, seed=n)
    assert not holds
    assert [_key(f) for f in sink.frames] == [_key(f) for f in round_robin_order(per_input)]


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_no_bubble(n):
    """Inputs ready, no backpressure: every beat back to back, one per cycle."""
    rng = random.Random(99 + n)
    per_input = [random_frames(rng, 12 // n + 2, max_size=300) for _ in range(n)]
    sink, _ = run_arbiter(per_input)
    beats = sum(len(frame_beats(f)) for frames in per_input for f in frames)
    assert sink.beats == beats
    assert sink.max_streak == beats
    # first beat one cycle after the first input beat (output register)
    assert sink.frames[0].first_cycle == 2


def test_grant_moves_when_idle():
    """A frame on an input that is not granted starts one cycle later than a granted one."""
    frames = [[AxisFrame(b"a" * 70)], [AxisFrame(b"b" * 70)]]
    dut = FrameArbiter(2)
    src1 = FrameSource(dut.i[1], frames[1], times=[5])
    src0 = FrameSource(dut.i[0], frames[0], times=[20])
    sink = FrameSink(dut.o, n_frames=2)
    grants = []

    async def watch(ctx):
        async for _, _, grant in ctx.tick().sample(dut.grant):
            grants.append(grant)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(src0.run, background=True)
    sim.add_testbench(src1.run, background=True)
    sim.add_testbench(watch, background=True)
    sim.add_testbench(sink.run)
    sim.run()
    # grant (sampled at edges 1, 2, ...): 0 from reset, 1 from edge 7, 0 again from 22
    assert grants[:6] == [0] * 6 and grants[6:21] == [1] * 15 and grants[21] == 0
    # input 1 offered from cycle 5: the grant moves (edge 6), first beat taken at edge 7
    assert src1.accepted_cycles == [7]
    assert sink.frames[0].first_cycle == 8
    # input 0 offered from 20: the grant moves back, taken at edge 22
    assert src0.accepted_cycles == [22]


def test_64_inputs_short():
    """64 inputs, all ready: one round of 1-beat and 2-beat frames, exact rotation, no bubble."""
    rng = random.Random(64)
    per_input = [random_frames(rng, 2, max_size=128) for _ in range(64)]
    sink, holds = run_arbiter(per_input, seed=3)
    assert not holds
    assert [_key(f) for f in sink.frames] == [_key(f) for f in round_robin_order(per_input)]
    beats = sum(len(frame_beats(f)) for frames in per_input for f in frames)
    assert sink.max_streak == beats


@pytest.mark.parametrize("n", [1, 3, 64])
def test_converts_to_verilog(n):
    text = verilog.convert(FrameArbiter(n), name="frame_arbiter")
    assert "module frame_arbiter" in text


@pytest.mark.parametrize("n", [2, 5])
def test_ready_is_a_register(n):
    """No ready path crosses the arbiter: ``i[k].ready`` is a register."""
    dut = FrameArbiter(n)
    seen = probe_registered_ready(dut, list(dut.i), [dut.o], seed=n)
    assert {r[k] for r in seen for k in range(n)} == {0, 1}
    # and a flip-flop of its own, no LUT between it and the lane in front
    text = verilog.convert(FrameArbiter(n), name="frame_arbiter")
    assert re.search(rf"reg \[{n - 1}:0\] ready = {n}'h0*1;", text)
    for k in range(n):
        assert f"assign i__{k}__ready = ready[{k}];" in text


class _NextGrant(wiring.Component):
    """:func:`round_robin_next` and :func:`none_set` of ``n`` inputs, combinational."""

    def __init__(self, n):
        self.n = n
        super().__init__({"requests": In(n), "upto": In(n), "onehot": In(n),
                          "found": Out(1), "next_upto": Out(n), "next_onehot": Out(n),
                          "none": Out(1)})

    def elaborate(self, platform):
        m = Module()
        found, next_upto, next_onehot = round_robin_next(m, self.requests, self.upto,
                                                         self.onehot)
        m.d.comb += [self.found.eq(found), self.next_upto.eq(next_upto),
                     self.next_onehot.eq(next_onehot),
                     self.none.eq(none_set(m, self.requests))]
        return m


def flat_next_grant(requests, grant, n):
    """The next grant of a flat round robin: the lowest requesting input above ``grant``,
    else the lowest other one, else None (the grant stays)."""
    upper = requests & ~((2 << grant) - 1)
    others = requests & ~(1 << grant)
    for candidates in (upper, others):
        if candidates:
            return (candidates & -candidates).bit_length() - 1
    return None


def _request_patterns(rng, n, count):
    """Random request sets: dense, sparse, single inputs, none and all."""
    patterns = [0, (1 << n) - 1]
    patterns += [1 << k for k in range(n)]
    for _ in range(count):
        density = rng.choice([0.05, 0.2, 0.5, 0.9])
        patterns.append(sum(1 << k for k in range(n) if rng.random() < density))
    return patterns


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 63, 64])
def test_grouped_round_robin_is_the_flat_one(n):
    """The grouped find-first chooses as one flat round robin does, for every grant and
    random request sets (the grant's own request included or not)."""
    rng = random.Random(n)
    dut = _NextGrant(n)
    cases = [(requests, rng.randrange(n)) for requests in _request_patterns(rng, n, 40)]
    cases += [(requests, grant) for requests in _request_patterns(rng, n, 6)
              for grant in range(n)]
    mismatches = []

    async def bench(ctx):
        for requests, grant in cases:
            ctx.set(dut.requests, requests)
            ctx.set(dut.upto, (2 << grant) - 1)
            ctx.set(dut.onehot, 1 << grant)
            expected = flat_next_grant(requests, grant, n)
            got = (ctx.get(dut.found), ctx.get(dut.next_upto), ctx.get(dut.next_onehot))
            want = (0,) if expected is None else (1, (2 << expected) - 1, 1 << expected)
            if got[:len(want)] != want or ctx.get(dut.none) != (requests == 0):
                mismatches.append((requests, grant, got, want))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not mismatches, mismatches[:3]
