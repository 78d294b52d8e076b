# amaranth: UnusedElaboratable=no
"""SourcePortSplitter against its model ``is_generator_frame``, under idle and backpressure."""


import numpy as np
import pytest
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.source_port_splitter import (
    SourcePortSplitter,
    is_generator_frame,
)
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource
from squeezenic_hw.sim.streams import probe_registered_ready
from squeezenic_hw.spec.frames import Header
from squeezenic_hw.spec.header import DEFAULT_PORT

from support.lane_scenarios import bad_frames, host_stream
from support.unused import rejected

BASE, COUNT = 0x5000, 4


def _traffic(rng):
    frames = []
    for src in (BASE - 1, BASE, BASE + 2, BASE + COUNT - 1, BASE + COUNT, 80):
        frames += host_stream(rng, "sign", n_total=int(rng.integers(20, 200)), max_k=60,
                              header=Header(src_port=src))
    frames += list(bad_frames("tx").values())
    frames += host_stream(rng, "sign", n_total=40, max_k=20,
                          header=Header(src_port=BASE, dst_port=DEFAULT_PORT + 1))
    order = rng.permutation(len(frames))
    return [AxisFrame(frames[k], src=int(k), dst=7) for k in order]


@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)])
def test_splitter_matches_model(idle, backpressure):
    rng = np.random.default_rng([int(idle * 10), int(backpressure * 10)])
    frames = _traffic(rng)
    want = {1: [f for f in frames if is_generator_frame(f.data, BASE, COUNT)]}
    want[0] = [f for f in frames if not is_generator_frame(f.data, BASE, COUNT)]
    assert want[0] and want[1]
    dut = SourcePortSplitter(BASE, COUNT)
    src = FrameSource(dut.i, frames, idle=idle, seed=3)
    sinks = {k: FrameSink(dut.o[k], n_frames=len(want[k]), backpressure=backpressure,
                          seed=5 + k) for k in (0, 1)}
    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(src.run, background=True)
    for sink in sinks.values():
        sim.add_testbench(sink.run)
    sim.run()
    for k in (0, 1):
        assert [(f.data, f.src, f.dst) for f in sinks[k].frames] == [
            (f.data, f.src, f.dst) for f in want[k]]
    if idle == 0 and backpressure == 0:
        beats = sum(-(-len(f.data) // 64) for f in frames)
        assert src.done_cycle <= beats + 2       # one beat per cycle


@pytest.mark.parametrize("kw,match", [(dict(base=-1, count=1), "base"),
                                      (dict(base=0, count=0), "count"),
                                      (dict(base=0xFFFF, count=2), "base \\+ count")])
def test_parameters_are_checked(kw, match):
    rejected(SourcePortSplitter, **kw, match=match)


def test_ready_is_a_register():
    """No ready path crosses the splitter: ``i.ready`` is a function of registers."""
    dut = SourcePortSplitter(BASE, COUNT)
    seen = probe_registered_ready(dut, [dut.i], list(dut.o))
    assert {r[0] for r in seen} == {0, 1}
