# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.reduce.checker.ReduceChecker` against the
numpy reference of the receive checks (:class:`~squeezenic_hw.reference.reduce_rx.
ReduceReceiver`).

A node's input is what it receives in a reference ring (``reference.allreduce``), mixed
with frames mutated to fail each check and frames that are not reduce frames
(``support.reduce_frames``). Under random idle cycles on the input and random backpressure
on both outputs, every frame must leave whole and unchanged on the output the reference
sends it to, every beat with the reference's check, the first beat of a taken frame with
its header's fields, and every counter must equal the reference's.
"""

import random

import pytest
from amaranth.back import verilog
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.gateware.reduce.checker import MIN_DEPTH, REDUCIBLE_CODECS, ReduceChecker
from squeezenic_hw.gateware.reduce.layouts import CheckedBeat, ReduceCheck, check_of
from squeezenic_hw.sim.axis import AxisFrame, frame_beats
from squeezenic_hw.sim.streams import BeatSender, probe_registered_ready, simulation_of
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.counters import REDUCE_COUNTERS, reduce_counter_name
from squeezenic_hw.spec.reduce import ReduceReason, chunk_size

from support.checked_sink import CheckedSink, max_streak
from support.param_sweep import grid
from support.reduce_frames import SETTINGS, node_stream, ring_case, rng_of
from support.shared_duts import shared
from support.unused import rejected

_BEAT_MASK = (1 << data.Layout.cast(AxisBeat).size) - 1


def node_config(ring, rank, *, enable=True):
    """The checker's ``cfg`` for node ``rank`` of ``ring``, as software writes it."""
    receiver = ring.receiver(rank)
    return {"enable": int(enable), "nodes": ring.nodes, "rank": rank,
            "codec": receiver.codec, "param": receiver.param,
            "stochastic": int(receiver.stochastic), "scale": receiver.scale_bits,
            "aux": receiver.aux_bits, "elements": ring.elements,
            "chunk": chunk_size(ring.elements, ring.nodes)}


def expected_outputs(ring, rank, frames, *, enable=True, built=True):
    """``(take, bypass, counters)`` by the reference: each output's frames as
    ``(AxisFrame, check, fields)`` in order, and the counters. Without the ring's codec
    ``built`` into the checker, a frame that passes the checks before ``settings`` fails
    it."""
    receiver = ring.receiver(rank, enabled=enable)
    take, bypass = [], []
    counters = dict.fromkeys(REDUCE_COUNTERS, 0)
    for f in frames:
        verdict = receiver.receive(f.data, tuser_size=f.size)
        reason, fields = verdict.reason, verdict.fields
        if not built and reason is not None and (reason is ReduceReason.NONE
                                                 or reason > ReduceReason.SETTINGS):
            reason, fields = ReduceReason.SETTINGS, None
        if reason is not None:
            counters[reduce_counter_name(reason)] += 1
        (take if reason is ReduceReason.NONE else bypass).append((f, check_of(reason),
                                                                  fields))
    return take, bypass, counters


def _sink_bench(dut, out, expected, rng, backpressure, results, total_beats):
    """Collects ``out``'s beats and checks each against the frames ``expected`` there."""
    beats = [(word, f, check, fields, b == 0)
             for f, check, fields in expected for b, word in enumerate(frame_beats(f))]

    async def bench(ctx):
        sink = CheckedSink(ctx, out, backpressure=backpressure, rng=rng)
        cycles, k = [], 0
        timeout = 200 + 8 * len(beats) + 8 * total_beats
        while k < len(beats):
            got, _ = await sink.cycle()
            assert sink.t < timeout, f"{k} of {len(beats)} beats after {sink.t} cycles"
            if got is None:
                continue
            word, f, check, fields, first = beats[k]
            view = data.Const(CheckedBeat, got)
            assert got & _BEAT_MASK == word, f"beat {k} of {out.payload.shape()} changed"
            assert (int(view.first), view.check) == (int(first), check), \
                (k, f.data[:64].hex(), int(view.first), view.check, check)
            if first and fields is not None:
                info = view.info
                assert (int(info.gather), int(info.contributions), int(info.origin),
                        int(info.width), int(info.n), int(info.offset)) == (
                    int(fields.gather), fields.contributions, fields.origin, fields.width,
                    fields.n, fields.offset)
            cycles.append(sink.t)
            k += 1
        # nothing more leaves
        for _ in range(20):
            got, _ = await sink.cycle()
            assert got is None, "a beat more than the reference sends"
        await sink.close()
        results.append(cycles)
    return bench


def run_checker(ring, rank, frames, *, enable=True, idle=0.0, backpressure=0.0, seed=0,
                depth=16, codecs=REDUCIBLE_CODECS):
    """Run ``frames`` (bytes or AxisFrame) through a checker configured as node ``rank`` of
    ``ring``, check both outputs and the counters against the reference; returns the
    output cycles of each output, the input's stalls and the cycle of its first beat."""
    frames = [f if isinstance(f, AxisFrame) else AxisFrame(f) for f in frames]
    rng = random.Random(seed)
    for f in frames:
        f.src, f.dst = rng.randrange(2**16), rng.randrange(2**16)
    dut = shared(ReduceChecker, depth=depth, codecs=codecs)
    take, bypass, counters = expected_outputs(
        ring, rank, frames, enable=enable, built=codec_info(ring.codec).id in dut.codecs)
    total = sum(len(frame_beats(f)) for f in frames)
    config = node_config(ring, rank, enable=enable)
    results, source_state = [], {}

    async def source(ctx):
        ctx.set(dut.cfg, config)
        sender = BeatSender(ctx, dut.i, idle=idle, rng=random.Random(seed + 1))
        await sender.wait_until(2)              # the derived configuration's registers
        for f in frames:
            for word in frame_beats(f):
                t = await sender.send(word)
                source_state.setdefault("first", t)
        source_state["stalls"] = sender.stalls
        await sender.close()

    async def counters_bench(ctx):
        while len(results) < 2:
            await ctx.tick()
        got = {name: ctx.get(getattr(dut.counters, name)) for name in REDUCE_COUNTERS}
        assert got == counters

    benches = [(source, True),
               (_sink_bench(dut, dut.take, take, random.Random(seed + 2), backpressure,
                            results, total), False),
               (_sink_bench(dut, dut.bypass, bypass, random.Random(seed + 3), backpressure,
                            results, total), False),
               (counters_bench, False)]
    simulation_of(dut).run(benches)
    return results, source_state, take, bypass


STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.6)]


@pytest.mark.parametrize("case, nodes, stalls", [
    ("fixed", 2, STALLS[1]), ("sign", 3, STALLS[2]), ("raw", 4, STALLS[1]),
    ("natural-stochastic", 8, STALLS[2]), ("qsgd-stochastic", 4, STALLS[0]),
    ("bf16", 3, STALLS[1]),
])
def test_ring_and_mutated_frames(case, nodes, stalls):
    """A node's ring frames, mutated frames of every reason and frames that are not reduce
    frames, under random stalls: each on the reference's output, unchanged, with its check
    and fields; the counters as the reference's."""
    ring = ring_case(case, nodes, 1500 if nodes < 8 else 700, mtu=100, seed=nodes)
    rank = nodes - 1
    rng = rng_of("checker", case, nodes)
    stream = node_stream(ring, rank, rng, mutated=0.6, combined=0.2, other=0.15)
    frames = [f for f, _ in stream]
    # a header alone whose tuser_size says more: length
    frames.insert(len(frames) // 2, AxisFrame(frames[-1][:64], size=len(frames[-1])))
    idle, backpressure = stalls
    _, _, take, bypass = run_checker(ring, rank, frames, idle=idle,
                                     backpressure=backpressure, seed=nodes)
    checks = {check for _, check, _ in bypass}
    assert len(take) == len(ring.received(rank))
    assert {check_of(r) for r in ReduceReason if r not in (ReduceReason.NONE,
                                                            ReduceReason.DISABLED)} <= checks


def test_every_node_takes_every_frame_twice():
    """Two all-reduces back to back, at full rate: every node takes all its frames (a
    complete chunk expects its start again)."""
    ring = ring_case("fixed-stochastic", 3, 200, mtu=100, seed=5)
    for rank in range(3):
        frames = ring.received(rank) * 2
        _, _, take, bypass = run_checker(ring, rank, frames, seed=rank)
        assert len(take) == len(frames) and not bypass


def test_disabled_bypasses_every_reduce_frame():
    ring = ring_case("qsgd", 4, 300, mtu=120, seed=2)
    stream = node_stream(ring, 2, rng_of("disabled"), mutated=0.5, other=0.3)
    _, _, take, bypass = run_checker(ring, 2, [f for f, _ in stream], enable=False,
                                     idle=0.2, backpressure=0.2, seed=9)
    assert not take
    assert {check for _, check, _ in bypass} == {ReduceCheck.DISABLED, ReduceCheck.NOT_REDUCE}


@pytest.mark.parametrize("case", ["sign", "fixed"])
def test_a_sign_only_build(case):
    """Built with ``sign`` alone: a ``sign`` ring as the reference; a ``fixed`` ring's frames
    fail ``settings`` (the configuration names a codec the build lacks), the checks before
    it as the reference."""
    ring = ring_case(case, 3, 400, mtu=100, seed=6)
    stream = node_stream(ring, 0, rng_of("sign only", case), mutated=0.4, other=0.1)
    _, _, take, bypass = run_checker(ring, 0, [f for f, _ in stream], idle=0.1,
                                     backpressure=0.3, seed=11, codecs=["sign"])
    assert bool(take) == (case == "sign")


def test_full_rate():
    """Back-to-back frames of every kind, outputs always ready: the input never stalls,
    the first beat leaves ``LATENCY`` cycles after it came, and the beats leave one per
    cycle, whichever output each takes."""
    ring = ring_case("sign", 4, 700, mtu=100, seed=1)
    stream = node_stream(ring, 1, rng_of("full rate"), mutated=0.5, combined=0.2,
                         other=0.2)
    frames = [f for f, _ in stream]
    results, source, take, bypass = run_checker(ring, 1, frames, seed=4, depth=MIN_DEPTH)
    beats = sum(len(frame_beats(f)) for f in frames)
    cycles = sorted(results[0] + results[1])
    assert source["stalls"] == 0
    assert cycles[0] - source["first"] == ReduceChecker.LATENCY
    assert len(cycles) == beats and max_streak(cycles) == beats
    assert take and bypass


def test_ready_is_a_register():
    dut = ReduceChecker()
    seen = probe_registered_ready(dut, [dut.i], [dut.take, dut.bypass])
    assert any(ready for ready, in seen)


@pytest.mark.parametrize("kwargs, name", [
    ({"port": 0}, "port"), ({"port": "1"}, "port"), ({"codecs": ["threshold"]}, "codecs"),
    ({"codecs": "raw"}, "codecs"), ({"codecs": [99]}, "codecs"),
    ({"depth": MIN_DEPTH - 1}, "depth"), ({"depth": 65}, "depth"), ({"depth": True}, "depth"),
])
def test_parameter_validation(kwargs, name):
    rejected(ReduceChecker, **kwargs, match=name)


def test_verilog():
    text = verilog.convert(ReduceChecker(codecs=["sign"]), name="reduce_checker")
    assert "module reduce_checker" in text


@pytest.mark.slow
@pytest.mark.parametrize("case, nodes, stalls", [
    (case, nodes, STALLS[k % len(STALLS)])
    for k, (case, nodes) in enumerate(grid(list(SETTINGS), [2, 3, 4, 8]))])
def test_every_family_and_ring_size(case, nodes, stalls):
    """Every codec family and ring size, every node: its ring frames twice over and mutated
    frames of every reason, under random stalls."""
    ring = ring_case(case, nodes, 1001, mtu=120, seed=nodes)
    idle, backpressure = stalls
    for rank in range(nodes):
        stream = node_stream(ring, rank, rng_of("sweep", case, nodes, rank), mutated=0.4,
                             combined=0.2, other=0.1)
        frames = [f for f, _ in stream] + ring.received(rank)
        _, _, take, _ = run_checker(ring, rank, frames, idle=idle, backpressure=backpressure,
                                    seed=rank)
        assert len(take) == 2 * len(ring.received(rank))
