# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.rx.host_frame_splitter.HostFrameSplitter`, the RX
lane's cut of decoded wire frames into host frames, on its own.

Random wire-frame descriptors (element counts around multiples of ``M``, offsets near the
32-bit wrap, every flag bit) and bypassed frames' descriptors (their unused fields full of
garbage) go through the splitter under random idle cycles and backpressure. Each output
descriptor is compared field for field with the cut of the reference RX lane
(:func:`squeezenic_hw.reference.lane.rx`): ``⌈n/M⌉`` host frames of ``M`` elements and the
rest, contiguous offsets, the stochastic flag on each, the flush flag on the last, a length
of ``64 + 4·m``; a bypassed frame's descriptor keeps its template and length."""

import random

import pytest
from amaranth import unsigned

from squeezenic_hw.gateware.rx.controller import wire_desc_layout
from squeezenic_hw.gateware.rx.host_frame_splitter import HostFrameSplitter
from squeezenic_hw.sim.streams import run_stream, unpack_fields
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    MAX_PKT_LEN,
)

from support.shared_duts import shared
from support.unused import rejected

SETTINGS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
LIMIT = (MAX_PKT_LEN - HEADER_LEN) // 4


def wire_descs(rng, M, count):
    """``count`` descriptors: about three in four wire frames, the others bypassed."""
    descs = []
    for _ in range(count):
        desc = {"template": rng.getrandbits(512), "src": rng.getrandbits(16),
                "dst": rng.getrandbits(16), "size": rng.getrandbits(16),
                "offset": rng.getrandbits(32), "flags": rng.getrandbits(8),
                "n": rng.getrandbits(16), "single": rng.getrandbits(1)}
        if rng.random() < 0.75:
            n = rng.choice([1, M - 1, M, M + 1, 2 * M, 2 * M + 1, rng.randint(1, 5 * M)])
            n = min(max(n, 1), 65535)
            if rng.random() < 0.2:
                desc["offset"] = 2**32 - rng.randint(1, 2 * M)
            desc.update(built=1, n=n, single=int(n <= M))
        else:
            desc["built"] = 0
        descs.append(desc)
    return descs


def expected_outputs(descs, M):
    """The host-frame descriptors of the reference RX lane's cut: per wire frame, the
    fields of each host frame; per bypassed frame, its template, length and tuser."""
    out = []
    for d in descs:
        tag = {"built": d["built"], "src": d["src"], "dst": d["dst"]}
        if not d["built"]:
            out.append({"template": d["template"], "size": d["size"],
                        "tag": {**tag, "size": d["size"]}})
            continue
        for k in range(0, d["n"], M):
            last = k + M >= d["n"]
            m = min(M, d["n"] - k)
            size = HEADER_LEN + 4 * m
            out.append({"template": d["template"], "size": size, "n": m,
                        "offset": (d["offset"] + k) % 2**32,
                        "flags": (d["flags"] & FLAG_STOCHASTIC)
                        | (d["flags"] & FLAG_FLUSH if last else 0),
                        "tag": {**tag, "size": size}})
    return out


def fields_of(beat, want):
    """The fields of output ``beat`` that ``want`` names, as integers."""
    got = {}
    for name, value in want.items():
        if isinstance(value, dict):
            got[name] = {k: int(beat[name][k]) for k in value}
        else:
            got[name] = int(beat[name])
    return got


def check(M, descs, *, idle=0.0, backpressure=0.0, seed=0):
    dut = shared(HostFrameSplitter, max_host_elements=M)
    want = expected_outputs(descs, M)
    counts = []

    async def count_host_frames(ctx):
        async for _, _, value in ctx.tick().sample(dut.host_frames):
            counts.append(value)

    run = run_stream(dut, descs, n_outputs=len(want), idle=idle, backpressure=backpressure,
                     seed=seed, extra_testbenches=[count_host_frames])
    layout = dut.o.payload.shape()
    assert len(run.outputs) == len(want)
    for j, (value, w) in enumerate(zip(run.outputs, want, strict=True)):
        got = fields_of(unpack_fields(layout, value), w)
        assert got == w, f"output {j}: got {got}, want {w}"
    assert max(counts) == sum(1 for w in want if w["tag"]["built"])
    return run


@pytest.mark.parametrize("idle, backpressure", SETTINGS)
@pytest.mark.parametrize("M", [1, 7, DEFAULT_HOST_ELEMENTS, LIMIT])
def test_cut_matches_the_reference(M, idle, backpressure):
    seed = M * 10 + SETTINGS.index((idle, backpressure))
    rng = random.Random(seed)
    descs = wire_descs(rng, M, 60 if M > 100 else 150)
    check(M, descs, idle=idle, backpressure=backpressure, seed=seed)


def test_one_host_frame_per_cycle():
    """No idle, no backpressure: the registered output a cycle after the first input is
    offered (clock edge 1 takes it in, edge 2 out), then one descriptor per cycle, across
    wire frames and bypassed frames."""
    rng = random.Random(5)
    descs = wire_descs(rng, 7, 100)
    run = check(7, descs)
    assert run.first_output_cycle == 2
    assert run.max_ready_streak == len(run.outputs)


def test_input_descriptor_layout_is_the_controllers():
    dut = HostFrameSplitter()
    assert dut.i.payload.shape() == wire_desc_layout()
    assert dut.host_frames.shape() == unsigned(32)


@pytest.mark.parametrize("bad", [0, LIMIT + 1, -1, 2.0, None])
def test_rejects_bad_max_host_elements(bad):
    rejected(HostFrameSplitter, max_host_elements=bad, match="max_host_elements")
