"""Frames cut into AXI-Stream beats (``sim.axis.frame_beats``): the packed ints Amaranth's
``layout.const`` gives for every field, on every length and out-of-range side-band; and
whole frames through a block under idle cycles and backpressure (``FrameSource`` and
``FrameSink``)."""

import random

import pytest
from amaranth.lib.data import Layout

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, AxisBeat, BareBeat
from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.sim.axis import AxisFrame, FrameAssembler, FrameSink, FrameSource, frame_beats
from squeezenic_hw.sim.streams import BeatSender, simulation_of

from support.unused import rejected

LENGTHS = [0, 1, 63, 64, 65, 127, 128, 129, 1518, 9600]


def _const(layout, frame):
    """The beats by ``layout.const``, field by field."""
    names = {name for name, _ in Layout.cast(layout)}
    n = max(1, -(-len(frame.data) // DATA_BYTES))
    size = len(frame.data) if frame.size is None else frame.size
    beats = []
    for k in range(n):
        chunk = frame.data[k * DATA_BYTES:(k + 1) * DATA_BYTES]
        fields = {"data": int.from_bytes(chunk, "little"), "keep": (1 << len(chunk)) - 1,
                  "last": int(k == n - 1), "size": size & 0xFFFF, "src": frame.src,
                  "dst": frame.dst}
        beats.append(layout.const({k: v for k, v in fields.items() if k in names})
                     .as_value().value)
    return beats


@pytest.mark.parametrize("layout", [AxisBeat, BareBeat])
@pytest.mark.parametrize("length", LENGTHS)
def test_beats_are_the_layouts_constants(layout, length):
    rng = random.Random(length)
    for src, dst, size in [(0, 0, None), (0xFFFF, 1, length + 70000), (70000, -1, 0),
                           (rng.getrandbits(16), rng.getrandbits(16), length)]:
        frame = AxisFrame(rng.randbytes(length), src=src, dst=dst, size=size)
        assert frame_beats(frame, layout) == _const(layout, frame)
    assert frame_beats(frame.data, layout) == _const(layout, AxisFrame(frame.data))


@pytest.mark.parametrize("length", LENGTHS[1:])
def test_beats_assemble_into_the_frame(length):
    frame = AxisFrame(random.Random(length).randbytes(length), src=3, dst=4)
    assembler, out = FrameAssembler(), None
    for cycle, beat in enumerate(frame_beats(frame)):
        b = AxisBeat.from_bits(beat)
        out = assembler.add(cycle, int(b.data), int(b.keep), int(b.last),
                            (int(b.size), int(b.src), int(b.dst)))
    assert out is not None and (out.data, out.src, out.dst) == (frame.data, 3, 4)


def test_frames_through_a_skid_buffer_under_idle_and_backpressure():
    """``FrameSource`` into a skid buffer, ``FrameSink`` out of it: every frame whole and in
    order, the arrival times kept, and the backpressure seen at the source as stalls."""
    dut = SkidBuffer(AxisBeat)
    rng = random.Random(5)
    frames = [AxisFrame(rng.randbytes(n), src=k, dst=k + 1)
              for k, n in enumerate([1, 63, 64, 65, 200, 9600])]
    source = FrameSource(dut.i, frames, times=[0, 0, 50, 0, 0, 0], idle=0.3, seed=1)
    sink = FrameSink(dut.o, backpressure=0.4, seed=2, source=source, quiet=20)
    simulation_of(dut).run([(source.run, True), (sink.run, False)])
    assert [(f.data, f.src, f.dst) for f in sink.frames] == \
        [(f.data, f.src, f.dst) for f in frames]
    assert sink.beats == sum(max(1, -(-len(f.data) // DATA_BYTES)) for f in frames)
    assert source.accepted_cycles[2] > 50 and source.stalls > 0
    assert source.done_cycle >= source.accepted_cycles[-1] and sink.frames[0].first_cycle > 1


def test_beat_sender_draws_idle_cycles_from_a_given_rng():
    rejected(BeatSender, None, None, idle=0.5, match="rng")
