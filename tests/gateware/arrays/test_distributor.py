"""Tests of :class:`~squeezenic_hw.gateware.arrays.distributor.FrameDistributor`.

Random traffic mixes SqueezeNIC host and wire frames (built by
:mod:`squeezenic_hw.spec.frames`, random UDP source ports) with frames that only
nearly look like them (other destination port, EtherType, IHL, protocol;
runts) and random garbage, with random ``tuser``. It goes in through
``sim.axis.FrameSource`` with random idle cycles; every output has its own
``FrameSink`` with its own random backpressure. Each output must receive
exactly the frames that :func:`route_frame` (the model, checked against the
header fields on its own below) assigns to it, unchanged and in input order.
"""

import random
from dataclasses import replace

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.distributor import FrameDistributor, route_frame
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource, frame_beats
from squeezenic_hw.sim.streams import probe_registered_ready
from squeezenic_hw.spec import frames as F

from support.unused import rejected

STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]


def _header(rng, **fields):
    h = F.Header(src_mac=rng.randbytes(6), dst_mac=rng.randbytes(6),
                 src_ip=rng.randbytes(4), dst_ip=rng.randbytes(4),
                 src_port=rng.randrange(2**16), offset=rng.randrange(2**32))
    return replace(h, **fields)


def squeezenic_frame(rng, **fields):
    h = _header(rng, **fields)
    if rng.random() < 0.5:
        n = rng.randint(1, 363) if rng.random() < 0.6 else rng.randint(1, 20)
        return F.build_host_frame(h, np.frombuffer(rng.randbytes(4 * n), np.float32))
    return F.build_wire_frame(replace(h, flags=F.FLAG_ENCODED, n=rng.randint(1, 999)),
                              rng.randbytes(rng.randint(1, 1454)))


def random_frame(rng, port):
    r = rng.random()
    if r < 0.55:
        return squeezenic_frame(rng, dst_port=port)
    frame = bytearray(squeezenic_frame(rng, dst_port=port))
    if r < 0.62:
        frame[36:38] = ((port + rng.randint(1, 65535)) % 65536).to_bytes(2, "big")
    elif r < 0.68:
        frame[12:14] = rng.choice([b"\x86\xdd", b"\x08\x06", b"\x81\x00", b"\x00\x08"])
    elif r < 0.73:
        frame[14] = rng.choice([0x46, 0x55, 0x44, 0x65])
    elif r < 0.78:
        frame[23] = rng.choice([6, 1, 16, 18])
    elif r < 0.86:
        frame = frame[:rng.randint(1, 37)]          # runt: too short to route
    else:
        frame = bytearray(rng.randbytes(rng.randint(1, 1518)))
    return bytes(frame)


def run_distributor(n, frames, *, port=F.DEFAULT_PORT, idle=0.0, backpressure=0.0, seed=0,
                    blocked=()):
    """Simulate; return (dut, source, sinks). ``blocked`` outputs are never ready."""
    dut = FrameDistributor(n, port=port)
    axis_frames = [f if isinstance(f, AxisFrame) else AxisFrame(f) for f in frames]
    counts = [0] * n
    for f in axis_frames:
        counts[route_frame(f.data, n, port=port)] += 1
    source = FrameSource(dut.i, axis_frames, idle=idle, seed=seed)
    # generous for the stalls, short enough that a misrouted frame fails fast
    timeout = 30 * sum(len(frame_beats(f)) for f in axis_frames) + 2000
    sinks = [FrameSink(dut.o[k], n_frames=counts[k], backpressure=backpressure,
                       seed=seed * 67 + k, timeout=timeout) for k in range(n)]
    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(source.run, background=bool(blocked))
    for k, sink in enumerate(sinks):
        if k not in blocked:
            sim.add_testbench(sink.run)
    sim.run()
    return dut, source, sinks


def expected_outputs(n, frames, port=F.DEFAULT_PORT):
    out = [[] for _ in range(n)]
    for f in frames:
        out[route_frame(f.data, n, port=port)].append(f)
    return out


def _keys(frames):
    return [(f.data, f.src, f.dst) for f in frames]


# --------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,name", [
    ({"n_outputs": 0}, "n_outputs"), ({"n_outputs": 65}, "n_outputs"),
    ({"n_outputs": True}, "n_outputs"), ({"n_outputs": 2.0}, "n_outputs"),
    ({"n_outputs": 2, "port": -1}, "port"), ({"n_outputs": 2, "port": 65536}, "port"),
    ({"n_outputs": 2, "port": "21329"}, "port"),
])
def test_rejects_bad_parameters(kwargs, name):
    rejected(FrameDistributor, **kwargs, match=name)


def test_route_model_against_headers():
    """The model on its own: parse() fields and the rule of the docstring."""
    rng = random.Random(5)
    for _ in range(400):
        frame = random_frame(rng, F.DEFAULT_PORT)
        h = F.parse(frame + bytes(64))     # padded: the fields as the bytes say
        looks = (len(frame) >= 38 and h.ethertype == 0x0800 and frame[14] == 0x45
                 and h.protocol == 17 and h.dst_port == F.DEFAULT_PORT)
        for n in (1, 3, 8, 64):
            assert route_frame(frame, n) == (h.src_port % n if looks else 0)


@pytest.mark.parametrize("n", [1, 2, 3, 8])
@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_random_traffic(n, idle, backpressure):
    rng = random.Random(n * 100 + int(10 * idle) + int(100 * backpressure))
    port = rng.choice([F.DEFAULT_PORT, 4791, 0x8000 + rng.randrange(0x8000)])
    frames = [AxisFrame(random_frame(rng, port), src=rng.getrandbits(16), dst=rng.getrandbits(16))
              for _ in range(60)]
    _, source, sinks = run_distributor(n, frames, port=port, idle=idle, backpressure=backpressure,
                                       seed=rng.randrange(1 << 16))
    for k, (sink, want) in enumerate(zip(sinks, expected_outputs(n, frames, port), strict=True)):
        assert _keys(sink.frames) == _keys(want), f"output {k}"
    if idle == backpressure == 0:
        # full rate: the input never stalls, one beat per cycle
        beats = sum(len(frame_beats(f)) for f in frames)
        assert source.done_cycle == beats
        last = max(s.frames[-1].last_cycle for s in sinks if s.frames)
        assert last == beats + 2


def test_lanes_reach_their_outputs():
    """Source port base + k (base a multiple of n) goes to output k."""
    rng = random.Random(11)
    n, base = 8, 64 * 300
    frames, lanes = [], []
    for _ in range(40):
        k = rng.randrange(n)
        lanes.append(k)
        frames.append(AxisFrame(squeezenic_frame(rng, src_port=base + k)))
    _, _, sinks = run_distributor(n, frames, idle=0.2, backpressure=0.3, seed=2)
    for k, sink in enumerate(sinks):
        mine = [f for f, lane in zip(frames, lanes, strict=True) if lane == k]
        assert _keys(sink.frames) == _keys(mine)


def test_runt_and_port_zero():
    """port = 0: a runt with zero bytes past its end must not match (tkeep checked)."""
    rng = random.Random(3)
    n = 4
    frames = []
    for _ in range(30):
        full = squeezenic_frame(rng, dst_port=0, src_port=rng.choice([1, 2, 3, 5, 7]))
        size = rng.choice([34, 35, 36, 37, 38, 39, 64, len(full)])
        frames.append(AxisFrame(full[:size]))
    want = expected_outputs(n, frames, port=0)
    assert sum(len(w) for w in want[1:]) > 5      # some do match
    _, _, sinks = run_distributor(n, frames, port=0, idle=0.1, backpressure=0.3, seed=4)
    for sink, w in zip(sinks, want, strict=True):
        assert _keys(sink.frames) == _keys(w)


def test_stalled_output_blocks_only_its_frames():
    """Output 1 never ready: the frames before the first one for output 1 all leave on 0."""
    rng = random.Random(8)
    to0 = [AxisFrame(random_frame(rng, 999)) for _ in range(6)]      # other port: output 0
    to1 = AxisFrame(squeezenic_frame(rng, src_port=1))
    after = [AxisFrame(random_frame(rng, 999)) for _ in range(3)]
    frames = to0 + [to1] + after
    dut = FrameDistributor(2)
    source = FrameSource(dut.i, frames)
    sink0 = FrameSink(dut.o[0], n_frames=len(to0))
    seen = {}

    async def check(ctx):
        await sink0.run(ctx)
        ctx.set(dut.o[0].ready, 1)
        await ctx.tick().repeat(50)
        seen["o1"] = (ctx.get(dut.o[1].valid), ctx.get(dut.o[1].payload.as_value()))
        seen["o0_valid"] = ctx.get(dut.o[0].valid)
        seen["i_ready"] = ctx.get(dut.i.ready)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(source.run, background=True)
    sim.add_testbench(check)
    sim.run()
    assert _keys(sink0.frames) == _keys(to0)
    # the frame for output 1 waits at its head, and holds up the input behind it
    assert seen["o1"] == (1, frame_beats(to1)[0])
    assert not seen["o0_valid"] and not seen["i_ready"]
    assert source.done_cycle is None


def test_64_outputs_short():
    rng = random.Random(64)
    frames = [AxisFrame(squeezenic_frame(rng, src_port=rng.randrange(2**16))) for _ in range(12)]
    frames += [AxisFrame(random_frame(rng, F.DEFAULT_PORT)) for _ in range(6)]
    _, _, sinks = run_distributor(64, frames, backpressure=0.2, seed=1)
    for sink, w in zip(sinks, expected_outputs(64, frames), strict=True):
        assert _keys(sink.frames) == _keys(w)


@pytest.mark.parametrize("n", [1, 5, 64])
def test_converts_to_verilog(n):
    text = verilog.convert(FrameDistributor(n), name="frame_distributor")
    assert "module frame_distributor" in text


@pytest.mark.parametrize("n", [3, 8])
def test_ready_is_a_register(n):
    """No ready path crosses the distributor: ``i.ready`` is a function of registers."""
    dut = FrameDistributor(n)
    seen = probe_registered_ready(dut, [dut.i], list(dut.o), seed=n)
    assert {r[0] for r in seen} == {0, 1}
