# amaranth: UnusedElaboratable=no
# (the bad-parameter tests create components that raise in __init__ and are never used)
"""Tests of :class:`WireRing`, the TX lane's store of assembled wire-frame payloads.

A Python model (:class:`RingModel`) replays the same ``RingWrite`` sequence and
says which beats must leave, in which order, and which write committed each of
them. The simulation drives random writes (count 0/1/2, commits on their own or
with the last beats, frames of 1…max beats, a trailing frame never committed)
with random idle cycles and random output backpressure, and checks:

* the output beats bit for bit against the model, and nothing more;
* no beat leaves before the write that commits its frame was accepted;
* ``o`` holds (valid and payload) while backpressured;
* one beat per cycle out, back to back, once beats are committed;
* with 23-beat frames written at one beat per cycle and no backpressure the
  writer never sees ``i.ready`` low.
"""

import random

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.common.layouts import RingWrite
from squeezenic_hw.gateware.tx.ring import WireRing, ring_depth
from squeezenic_hw.sim.streams import BeatSender, unpack_fields

from support.checked_sink import CheckedSink, max_streak
from support.unused import rejected

# --------------------------------------------------------------------------
# Model and stimulus
# --------------------------------------------------------------------------


class RingModel:
    """What must leave the ring for a sequence of writes (dicts of RingWrite)."""

    def __init__(self):
        self.open = []         # beats of the frame being written
        self.out = []          # committed beats, in order
        self.commit_of = []    # per committed beat: index of the write that committed it

    def write(self, k, w):
        self.open += w["beats"][:w["count"]]
        if w["commit"]:
            self.out += self.open
            self.commit_of += [k] * len(self.open)
            self.open = []


def make_writes(rng, n_frames, max_beats, *, trailing=True, max_count=2):
    """Random writes of ``n_frames`` committed frames (+ an uncommitted one)."""
    writes = []

    def w(beats, commit):
        # unused beat slots carry garbage: the ring must ignore them
        slots = beats + [rng.getrandbits(512) for _ in range(2 - len(beats))]
        writes.append({"beats": slots, "count": len(beats), "commit": int(commit)})

    for f in range(n_frames + int(trailing)):
        closing = f < n_frames
        n = rng.randint(1, max_beats)
        beats = [rng.getrandbits(512) for _ in range(n)]
        k = 0
        while k < n:
            if rng.random() < 0.1:
                w([], False)                            # no-op write
            c = min(rng.randint(1, max_count), n - k)
            k += c
            w(beats[k - c:k], closing and k == n and rng.random() < 0.7)
        if closing and not writes[-1]["commit"]:
            w([], True)                                 # commit with no beats
    return writes


def model_of(writes):
    model = RingModel()
    for k, w in enumerate(writes):
        model.write(k, w)
    return model


# --------------------------------------------------------------------------
# Simulation harness
# --------------------------------------------------------------------------


class RingRun:
    def __init__(self):
        self.accept = []       # cycle each write was accepted
        self.stalls = 0        # cycles a write was offered and not accepted
        self.outputs = []
        self.out_cycles = []
        self.source_done = None


def run_ring(dut, writes, n_out, *, idle=0.0, backpressure=0.0, seed=0, hold=0, quiet=40,
             timeout=None):
    """Drive ``writes`` into ``dut.i``; collect ``n_out`` beats, then check that
    nothing more leaves for ``quiet`` cycles after the last write. The sink keeps
    ``ready`` low for the first ``hold`` cycles."""
    run = RingRun()
    rng_src = random.Random(seed * 2 + 1)
    rng_snk = random.Random(seed * 2 + 2)
    packed = [RingWrite.const(w).as_value().value for w in writes]
    if timeout is None:
        timeout = hold + int((len(writes) + n_out) * (3 + 10 * backpressure + 4 * idle)) + 500

    async def source(ctx):
        sender = BeatSender(ctx, dut.i, idle=idle, rng=rng_src)
        for value in packed:
            run.accept.append(await sender.send(value))
        run.stalls, run.source_done = sender.stalls, sender.t
        await sender.close()

    layout = dut.o.payload.shape()

    def beat_of(bits):
        read = unpack_fields(layout, bits)
        return int(read.banks[int(read.bank)])      # the beat: the port holding it

    async def sink(ctx):
        out = CheckedSink(ctx, dut.o, backpressure=backpressure, rng=rng_snk, beat=beat_of)
        while (len(run.outputs) < n_out or run.source_done is None
               or out.t < run.source_done + quiet):
            beat, _ = await out.cycle(ready=out.t >= hold)
            assert out.t <= timeout, f"{len(run.outputs)} of {n_out} beats after {out.t} cycles"
            if beat is not None:
                run.outputs.append(beat)
                run.out_cycles.append(out.t)
        await out.close()

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    return run


def check_run(run, model):
    assert len(run.outputs) == len(model.out), "beats missing or extra beats left"
    for j, (got, want) in enumerate(zip(run.outputs, model.out, strict=True)):
        assert got == want, f"beat {j} differs"
    for j, k in enumerate(model.commit_of):
        assert run.out_cycles[j] > run.accept[k], f"beat {j} left before its commit"


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 151, -1, 2.0, True, None, "23"])
def test_bad_max_frame_beats(bad):
    rejected(WireRing, bad, match="max_frame_beats")


@pytest.mark.parametrize("max_beats, depth", [(1, 8), (2, 8), (3, 16), (23, 64), (30, 64),
                                              (31, 128), (150, 512)])
def test_depth(max_beats, depth):
    assert ring_depth(max_beats) == depth
    assert depth >= 2 * max_beats + 4 and depth & (depth - 1) == 0


@pytest.mark.parametrize("idle, backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
@pytest.mark.parametrize("max_beats, n_frames", [(23, 40), (1, 120), (4, 90)])
def test_random(idle, backpressure, max_beats, n_frames):
    seed = int(idle * 10) * 100 + int(backpressure * 10) * 10 + max_beats
    rng = random.Random(seed)
    writes = make_writes(rng, n_frames, max_beats)
    model = model_of(writes)
    dut = WireRing(max_beats)
    assert dut.depth == ring_depth(max_beats)
    run = run_ring(dut, writes, len(model.out), idle=idle, backpressure=backpressure, seed=seed)
    check_run(run, model)


def test_large_frames():
    """max_frame_beats = 150 (512-beat ring), two beats per write, slow reader."""
    rng = random.Random(150)
    writes = make_writes(rng, 8, 150)
    model = model_of(writes)
    run = run_ring(WireRing(150), writes, len(model.out), idle=0.1, backpressure=0.5, seed=150)
    check_run(run, model)


def test_full_rate_out():
    """Committed beats leave one per cycle, back to back, with the ring's latency."""
    rng = random.Random(7)
    writes = make_writes(rng, 6, 8, trailing=True)   # at most 56 beats: all fit
    model = model_of(writes)
    dut = WireRing(20)
    assert dut.depth == 64
    hold = len(writes) + 10          # everything is written before the reader starts
    run = run_ring(dut, writes, len(model.out), hold=hold)
    check_run(run, model)
    assert run.stalls == 0
    assert run.out_cycles[0] == hold + 1
    assert max_streak(run.out_cycles) == len(model.out)

    # latency: one frame into an empty ring, reader always ready
    writes = make_writes(random.Random(8), 1, 10, trailing=False)
    model = model_of(writes)
    run = run_ring(WireRing(10), writes, len(model.out))
    check_run(run, model)
    assert run.out_cycles[0] - run.accept[model.commit_of[0]] == dut.latency
    assert max_streak(run.out_cycles) == len(model.out)


def test_writer_never_stalls():
    """23-beat frames written at one beat per cycle while the reader drains:
    no stall, and the output runs at one beat per cycle from the first commit."""
    rng = random.Random(23)
    writes = []
    for _ in range(20):
        for k in range(23):
            slots = [rng.getrandbits(512), rng.getrandbits(512)]
            writes.append({"beats": slots, "count": 1, "commit": int(k == 22)})
    model = model_of(writes)
    dut = WireRing(23)
    run = run_ring(dut, writes, len(model.out))
    check_run(run, model)
    assert run.stalls == 0
    assert run.accept == list(range(1, len(writes) + 1))
    assert max_streak(run.out_cycles) == len(model.out)
    assert run.out_cycles[0] - run.accept[22] == dut.latency


def test_verilog():
    text = verilog.convert(WireRing(23), name="wire_ring")
    assert "module wire_ring" in text


def test_banks_are_block_ram(tmp_path):
    # the default MTU's ring: 64 slots, two banks of 64 beats, which Yosys would otherwise
    # put in distributed RAM; only the slots' 1-bit second-beat flags are (one cell)
    result = synth.synthesize(WireRing(23), name="wire_ring", workdir=tmp_path, timing=True)
    assert result.bram > 0 and result.lutram == 1
    # each bank's read goes straight into its output register (the RAM's DOB_REG)
    assert result.timing.bram_reads_into_logic == ()
    assert result.timing.ram_output_ffs == 2 * 512
    # no write multiplexer: the LUTs are the read side's 512-bit bank select and the
    # pointers
    assert result.lut < 600
