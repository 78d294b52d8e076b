# amaranth: UnusedElaboratable=no
"""LutramBuffer: every beat once and in order under random idle and backpressure, one beat
per cycle when nothing stalls, a ``ready`` that no input of the cycle can change, and the
payload kept in distributed RAM."""

import random

import pytest
from amaranth import unsigned
from amaranth.lib import data

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.common.stream import LutramBuffer
from squeezenic_hw.sim.streams import run_stream

from support.buffer_checks import check_struct_payload_at_full_rate, ready_per_cycle
from support.shared_duts import shared
from support.unused import rejected


@pytest.mark.parametrize("width,depth", [(1, 2), (8, 4), (600, 4), (33, 32)])
@pytest.mark.parametrize("idle,backpressure", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5),
                                               (0.4, 0.4), (0.1, 0.8)])
def test_every_beat_in_order(width, depth, idle, backpressure):
    rng = random.Random(width)
    beats = [rng.getrandbits(width) for _ in range(300)]
    run = run_stream(shared(LutramBuffer, data.StructLayout({"x": unsigned(width)}), depth), beats,
                     idle=idle, backpressure=backpressure, seed=width + depth)
    assert run.outputs == beats


def test_struct_payload_and_full_rate():
    check_struct_payload_at_full_rate(LutramBuffer, latency=2)


@pytest.mark.parametrize("depth", [2, 4])
def test_ready_depends_on_the_level_only(depth):
    seen = ready_per_cycle(LutramBuffer(unsigned(8), depth), depth + 4, depth + 1)
    # o stalls from the start: depth beats go in (the first two a cycle apart at depth
    # 2: one RAM entry and the output register), then i.ready stays low until o moves
    assert sum(seen[:depth + 2]) == depth and seen[depth + 1] == 0


def test_payload_in_lutram(tmp_path):
    result = synth.synthesize(LutramBuffer(unsigned(600)), name="buf", workdir=tmp_path)
    assert result.lutram == -(-600 // 14) and result.lut < 40 and result.ff < 620


def test_parameters_are_checked():
    rejected(LutramBuffer, "wide", match="shape")
    for bad in (1, 33, True):
        rejected(LutramBuffer, unsigned(8), bad, match="depth")
