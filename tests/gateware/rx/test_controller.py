# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.rx.controller.RxController`, the RX lane's frame
controller, on its own: behind the lane's classifier, with each of its outputs taken by a
sink of its own.

Wire frames of the TX reference lane (every dense codec, several MTUs) mixed with one
frame per bypass reason go in under random idle cycles; each output (``desc``, ``frames``,
``payload``, ``bypass``) withholds ``ready`` at random on its own, and a beat it did not
take may be withdrawn (the controller's ``valid`` of one output waits on the ``ready`` of
the others: they go into FIFOs). A model built from the reference's classification
(:func:`squeezenic_hw.spec.frames.classify_wire_frame`) says what each output carries:
per input frame a descriptor (a decoded frame's header fields, tuser and whether it fits
one host frame; a bypassed frame's length); per decoded frame its ``n``, code width, bits
and codec parameters, and its payload beats, ``last`` on the last; the bypassed frames'
beats unchanged; and the counters of the reference RX lane. (Frames whose beats end before
their ``tuser_size``, and ``threshold``, are tested through the lane:
``tests/gateware/test_threshold_lanes.py``, ``tests/gateware/rx/test_lane.py``.)"""

import random
from itertools import zip_longest

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, axis_signature
from squeezenic_hw.gateware.lane.classifier import INPUT_QUEUE, FrameClassifier
from squeezenic_hw.gateware.rx.controller import RxController, rx_counters_layout
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import AxisFrame, FrameSource, frame_beats
from squeezenic_hw.sim.streams import simulation_of, unpack_fields
from squeezenic_hw.spec.codecs import codec_info, resolve_codecs
from squeezenic_hw.spec.counters import RX_COUNTERS
from squeezenic_hw.spec.frames import classify_wire_frame
from squeezenic_hw.spec.header import DEFAULT_PORT, FLAG_STOCHASTIC, HEADER_LEN

from support.checked_sink import CheckedSink
from support.lane_scenarios import bad_frames, wire_traffic
from support.shared_duts import shared

DENSE = ["raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural"]
STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
OUTPUTS = ("desc", "frames", "payload", "bypass")


class _ClassifiedController(wiring.Component):
    """The lane's classifier in front of the controller, as in the RX lane."""

    def __init__(self, codecs, max_host_elements):
        self.controller = RxController(codecs=codecs, max_host_elements=max_host_elements)
        self.classifier = FrameClassifier("rx", codecs=sorted(resolve_codecs(codecs)),
                                          depth=INPUT_QUEUE)
        ports = self.controller.signature.members
        super().__init__({"i": In(axis_signature()), "counters": Out(rx_counters_layout()),
                          **{name: ports[name] for name in OUTPUTS}})

    def elaborate(self, platform):
        m = Module()
        m.submodules.classifier, m.submodules.controller = self.classifier, self.controller
        wiring.connect(m, wiring.flipped(self.i), self.classifier.i)
        wiring.connect(m, self.classifier.o, self.controller.i)
        for name in OUTPUTS:
            wiring.connect(m, getattr(self.controller, name), wiring.flipped(getattr(self, name)))
        m.d.comb += self.counters.eq(self.controller.counters)
        return m


def expected_outputs(frames, max_host, codecs):
    """What each output must carry for ``frames``, from the reference's classification."""
    built_in = resolve_codecs(codecs)
    want = {name: [] for name in OUTPUTS}
    for frame in frames:
        h, reason = classify_wire_frame(frame.data, port=DEFAULT_PORT, codecs_built_in=built_in)
        if reason is not None:
            want["desc"].append({"built": 0, "size": len(frame.data)})
            want["bypass"] += frame_beats(frame)
            continue
        width = codec_info(h.codec).bits_per_element(h.param)
        want["desc"].append({
            "built": 1, "template": int.from_bytes(frame.data[:HEADER_LEN], "little"),
            "n": h.n, "offset": h.offset, "flags": h.flags, "size": len(frame.data),
            "src": frame.src, "dst": frame.dst, "single": int(h.n <= max_host)})
        want["frames"].append({
            "n": h.n, "width": width, "bits": h.n * width,
            "tag": {"codec": h.codec, "params": {
                "param": h.param, "stochastic": int(bool(h.flags & FLAG_STOCHASTIC)),
                "scale": h.scale_bits, "aux": h.aux_bits, "seed": h.seed}}})
        payload = frame.data[HEADER_LEN:]
        beats = [payload[k:k + DATA_BYTES] for k in range(0, len(payload), DATA_BYTES)]
        for b, data in enumerate(beats):
            want["payload"].append({"data": int.from_bytes(data, "little"), "zero": 0,
                                    "last": int(b == len(beats) - 1)})
    return want


def _fields(view, want):
    """The fields of ``view`` that ``want`` names (nested dicts for nested structs)."""
    return {name: _fields(view[name], w) if isinstance(w, dict) else int(view[name])
            for name, w in want.items()}


def run_controller(frames, *, max_host=363, codecs=DENSE, idle=0.0, backpressure=0.0, seed=0):
    dut = shared(_ClassifiedController, codecs, max_host)
    want = expected_outputs(frames, max_host, codecs)
    got = {name: [] for name in OUTPUTS}
    counters = {}
    timeout = 20 * sum(len(v) for v in want.values()) + 2000

    def sink(name, k):
        stream = getattr(dut, name)
        rng = random.Random(seed * len(OUTPUTS) + k)

        async def bench(ctx):
            # (valid may drop while another output is not ready: the outputs go into FIFOs)
            out = CheckedSink(ctx, stream, backpressure=backpressure, rng=rng, holds=False)
            while len(got[name]) < len(want[name]):
                beat, _ = await out.cycle()
                assert out.t <= timeout, f"{name}: {len(got[name])} of {len(want[name])}"
                if beat is not None:
                    got[name].append(beat)
            await out.close()
        return bench

    async def read_counters(ctx):
        while any(len(got[n]) < len(want[n]) for n in OUTPUTS):
            await ctx.tick()
        await ctx.tick()
        # (host_frames is the splitter's count)
        counters.update({name: ctx.get(dut.counters[name]) for name in RX_COUNTERS
                         if name != "host_frames"})

    source = FrameSource(dut.i, frames, idle=idle, seed=seed)
    simulation_of(dut).run([(source.run, True),
                            *[(sink(name, k), True) for k, name in enumerate(OUTPUTS)],
                            (read_counters, False)])

    for name in ("desc", "frames", "payload"):
        layout = getattr(dut, name).payload.shape()
        for j, (value, w) in enumerate(zip(got[name], want[name], strict=True)):
            assert _fields(unpack_fields(layout, value), w) == w, f"{name} {j}"
    assert got["bypass"] == want["bypass"]
    _, ref_counters = lr.rx([f.data for f in frames], max_host_elements=max_host,
                            codecs=codecs)
    assert counters.pop("size_errors") == 0      # every frame's beats end at its tuser_size
    assert counters == {k: v for k, v in ref_counters.items() if k in counters}
    return want


def _traffic(rng, mtu, bad_rate=0.2):
    """A bypassed frame first (so every run has one), then :func:`wire_traffic`."""
    first = AxisFrame(next(iter(bad_frames("rx").values())), src=3, dst=4)
    return [first, *wire_traffic(rng, DENSE, mtu, bad_rate)]


@pytest.mark.parametrize("idle, backpressure", STALLS)
@pytest.mark.parametrize("mtu", [200, 1518, 9600])
def test_outputs_match_the_reference(mtu, idle, backpressure):
    seed = mtu + STALLS.index((idle, backpressure))
    frames = _traffic(np.random.default_rng(seed), mtu)
    want = run_controller(frames, idle=idle, backpressure=backpressure, seed=seed)
    assert want["bypass"] and want["payload"] and want["desc"]


def test_every_bypass_reason_and_one_host_frame_limits():
    """One frame per bypass reason between wire frames, with a host-frame limit that some
    wire frames fit and others do not (``single``)."""
    rng = np.random.default_rng(4)
    bad = [AxisFrame(f, src=k, dst=9) for k, f in enumerate(bad_frames("rx").values())]
    wire = _traffic(rng, 1518, bad_rate=0)
    frames = [f for pair in zip_longest(wire, bad) for f in pair if f is not None]
    want = run_controller(frames, max_host=314, idle=0.2, backpressure=0.4, seed=4)
    assert {d["single"] for d in want["desc"] if d["built"]} == {0, 1}
    assert sum(1 for d in want["desc"] if not d["built"]) == len(bad) + 1
