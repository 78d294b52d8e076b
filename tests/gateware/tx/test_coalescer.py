# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.tx.coalescer.TxCoalescer` and the stage in front
of it, :class:`~squeezenic_hw.gateware.tx.prep.TxBeatPrep`, on their own: behind the lane's
classifier, with the coalescer's three outputs (``jobs``, ``records``, ``bypass``) each
taken by a sink of its own.

Host streams of every dense codec, and ``threshold`` tensors of several densities beside
a dense one, interleaved (so frames close on a mismatch), some ending with flush, with
frames the lane bypasses among them, go in under random idle cycles and the outputs under
random backpressure. The records and the jobs are read with
the meaning of their frame fields (``support.tx_cut``): where each wire frame closes, how
many elements it holds, the tensor index of its first one, whether it closes with a flush,
and where each bypassed frame's token stands. That sequence must be the reference TX lane's
(:func:`squeezenic_hw.reference.lane.tx`) output, frame for frame, up to the wire frame
still open at the end (the reference closes it when its input ends); the jobs must carry
every element of the frames it encodes, in order, and the bypassed frames' beats leave
unchanged. (Tiny MTUs, frames whose beats end before their ``tuser_size`` and idle closes:
through the lane, ``tests/gateware/tx/test_controller.py``, ``tests/gateware/tx/test_lane.py``
and ``tests/gateware/test_threshold_lanes.py``.)"""

import random

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from squeezenic_hw.gateware.codecs.bank import codec_widths
from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.lane.classifier import INPUT_QUEUE, FrameClassifier
from squeezenic_hw.gateware.tx.coalescer import RecordKind, TxCoalescer
from squeezenic_hw.gateware.tx.prep import TxBeatPrep
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import FrameSource, frame_beats
from squeezenic_hw.sim.streams import simulation_of, unpack_fields
from squeezenic_hw.sim.vectors import sparse_gradient
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.frames import Header, classify_host_frame, parse
from squeezenic_hw.spec.header import FLAG_FLUSH, HEADER_LEN
from squeezenic_hw.spec.threshold import MAX_N

from support.checked_sink import CheckedSink
from support.lane_scenarios import host_stream, interleave, mixed_traffic
from support.param_sweep import rotated
from support.shared_duts import shared
from support.tx_cut import cut_of

DENSE = ["raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural"]
STALLS = [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]
OUTPUTS = ("jobs", "records", "bypass")


class _PreparedCoalescer(wiring.Component):
    """The lane's classifier, then the prep and the coalescer, as in the TX controller."""

    def __init__(self, codecs, mtu):
        codecs = sorted(resolve_codecs(codecs))
        sparse = THRESHOLD_ID in codecs
        self.classifier = FrameClassifier("tx", codecs=codecs, depth=INPUT_QUEUE)
        self.prep = TxBeatPrep(capacity=lambda w: min(MAX_N, (mtu - HEADER_LEN) * 8 // w),
                               widths=codec_widths(codecs), sparse=sparse)
        self.coalescer = TxCoalescer(mtu=mtu, sparse=sparse)
        ports = self.coalescer.signature.members
        super().__init__({"i": In(axis_signature()),
                          **{name: ports[name] for name in OUTPUTS}})

    def elaborate(self, platform):
        m = Module()
        m.submodules.classifier = self.classifier
        m.submodules.prep, m.submodules.coalescer = self.prep, self.coalescer
        wiring.connect(m, wiring.flipped(self.i), self.classifier.i)
        wiring.connect(m, self.classifier.o, self.prep.i)
        wiring.connect(m, self.prep.o, self.coalescer.i)
        for name in OUTPUTS:
            wiring.connect(m, getattr(self.coalescer, name), wiring.flipped(getattr(self, name)))
        return m


def reference_outputs(frames, mtu, codecs):
    """The reference TX lane's output as ``("wire", n, offset, flush)`` and
    ``("bypass", length)``, the elements (fp32 bits) of the frames it encodes, in order,
    and the beats of the frames it bypasses."""
    built_in = resolve_codecs(codecs)
    elements, bypass_beats, bypassed = [], [], []
    for frame in frames:
        if classify_host_frame(frame.data, codecs_built_in=built_in)[1] is None:
            elements += list(np.frombuffer(frame.data[HEADER_LEN:], "<u4"))
        else:
            bypassed.append(frame.data)
            bypass_beats += frame_beats(frame)
    out, _ = lr.tx([f.data for f in frames], mtu=mtu, codecs=codecs)
    seq = []
    for data in out:
        if bypassed and data == bypassed[0]:
            bypassed.pop(0)
            seq.append(("bypass", len(data)))
        else:
            h = parse(data)
            seq.append(("wire", h.n, h.offset, bool(h.flags & FLAG_FLUSH)))
    return seq, [int(e) for e in elements], bypass_beats


def frames_of_records(records):
    """The output sequence the close records say, as :func:`reference_outputs` writes it."""
    seq, open_offset = [], None

    def close(n, offset, flush):
        seq.append(("wire", n, offset % 2**32, flush))

    for rec in records:
        cut = cut_of(rec)
        if rec["kind"] in (RecordKind.HEADER, RecordKind.BYPASS, RecordKind.CLOSE):
            if rec["mismatch"] or rec["kind"] == RecordKind.CLOSE:
                close(rec["n_before"], open_offset, False)
            if rec["kind"] == RecordKind.BYPASS:
                seq.append(("bypass", rec["size"]))
            continue
        if rec["opens"]:
            open_offset = rec["offset"]
        if cut.close1:
            close(rec["n_before"] + cut.take, open_offset, cut.flush1)
        if cut.rest_opens:
            open_offset = rec["offset"] + cut.take
            if cut.close2:
                close(cut.rest, open_offset, True)
    return seq


def _as_dict(view, layout):
    return {name: view[name] if name == "kind" else int(view[name])
            for name in layout.members if name not in ("hdr", "elements", "params")}


def run_coalescer(frames, *, mtu, n_elements, n_bypass_beats, codecs=DENSE, idle=0.0,
                  backpressure=0.0, seed=0, quiet=50):
    """Run until the jobs carried ``n_elements`` and ``n_bypass_beats`` left, then
    ``quiet`` cycles more (a record leaves with its job, so none may still come)."""
    dut = shared(_PreparedCoalescer, codecs, mtu)
    job_layout = dut.jobs.payload.shape()
    got = {name: [] for name in OUTPUTS}
    carried = [0]

    def sink(name, k):
        rng = random.Random(seed * len(OUTPUTS) + k)

        async def bench(ctx):
            # (an output's valid waits on the others' ready: they go into skid buffers)
            out = CheckedSink(ctx, getattr(dut, name), backpressure=backpressure, rng=rng,
                              holds=False)
            while True:
                beat, _ = await out.cycle()
                if beat is not None:
                    got[name].append(beat)
                    if name == "jobs":
                        carried[0] += int(unpack_fields(job_layout, beat).v)
        return bench

    source = FrameSource(dut.i, frames, idle=idle, seed=seed)

    async def until_quiet(ctx):
        for _ in range(40 * (n_elements + n_bypass_beats) + 2000):
            if carried[0] >= n_elements and len(got["bypass"]) >= n_bypass_beats:
                break
            await ctx.tick()
        await ctx.tick().repeat(quiet)

    simulation_of(dut).run([(source.run, True),
                            *[(sink(name, k), True) for k, name in enumerate(OUTPUTS)],
                            (until_quiet, False)])
    layouts = {name: getattr(dut, name).payload.shape() for name in OUTPUTS}
    records = [_as_dict(unpack_fields(layouts["records"], v), layouts["records"])
               for v in got["records"]]
    jobs = [unpack_fields(layouts["jobs"], v) for v in got["jobs"]]
    return records, jobs, got["bypass"]


def check(frames, *, mtu, codecs=DENSE, idle=0.0, backpressure=0.0, seed=0):
    want_seq, want_elements, want_bypass = reference_outputs(frames, mtu, codecs)
    records, jobs, bypass = run_coalescer(frames, mtu=mtu, codecs=codecs,
                                          n_elements=len(want_elements),
                                          n_bypass_beats=len(want_bypass), idle=idle,
                                          backpressure=backpressure, seed=seed)
    seq = frames_of_records(records)
    assert seq == want_seq[:len(seq)], "the records close other frames than the reference"
    assert len(want_seq) - len(seq) in (0, 1) and all(s[0] == "wire"
                                                      for s in want_seq[len(seq):])
    job_fields = [_as_dict(job, job.shape()) for job in jobs]
    elements = [int(job.elements[e]) for job, f in zip(jobs, job_fields, strict=True)
                for e in range(f["v"])]
    assert elements == want_elements
    # the jobs close the same frames (a beat job with no element before it opens one)
    assert frames_of_records([
        {**f, "kind": RecordKind.CLOSE, "mismatch": 1} if f["close_only"]
        else {**f, "kind": RecordKind.BEAT, "opens": f["n_before"] == 0}
        for f in job_fields]) == [s for s in seq if s[0] == "wire"]
    assert bypass == want_bypass
    return seq


def _traffic(rng, flush_rate, codecs=DENSE):
    return mixed_traffic(rng, codecs, n_streams=3, elements=(50, 600), flush_rate=flush_rate,
                         max_k=int(rng.choice([16, 100, 363])))


@pytest.mark.parametrize("idle, backpressure", STALLS)
@pytest.mark.parametrize("mtu", [200, 1518, 9600])
def test_closes_match_the_reference(mtu, idle, backpressure):
    seed = mtu + STALLS.index((idle, backpressure))
    frames = _traffic(np.random.default_rng(seed), flush_rate=0.2)
    seq = check(frames, mtu=mtu, idle=idle, backpressure=backpressure, seed=seed)
    assert {s[0] for s in seq} == {"wire", "bypass"}


def test_every_host_frame_flushes():
    """Each host frame ends with flush: its last beat closes the wire frame, and a beat
    that straddles a full frame closes two."""
    frames = _traffic(np.random.default_rng(6), flush_rate=1.0)
    seq = check(frames, mtu=200, idle=0.3, backpressure=0.3, seed=6)
    assert sum(1 for s in seq if s[0] == "wire" and s[3]) > 10



def _threshold_traffic(rng, density):
    """Two threshold tensors of ``density`` kept values and a dense one, interleaved, with
    bypassed frames among them."""
    streams = []
    for s in range(2):
        n, scale = int(rng.integers(300, 900)), float(rng.uniform(0.5, 4))
        streams.append(host_stream(
            rng, "threshold", n_total=n, max_k=int(rng.choice([16, 100, 363])),
            offset=int(rng.integers(0, 2**32)), header=Header(src_ip=bytes([10, 0, 0, 1 + s])),
            flush_rate=0.2, scale=scale, values=sparse_gradient(rng, n, density, scale=scale)))
    dense_header = Header(src_ip=bytes([10, 0, 0, 9]))
    streams.append(host_stream(rng, "fp16", n_total=200, header=dense_header))
    return interleave(rng, streams, bypass_rate=0.1)


@pytest.mark.parametrize("mtu, density, idle, backpressure",
                         rotated([(200, 0.01), (200, 0.5), (1518, 0.1)], STALLS))
def test_threshold_closes_match_the_reference(mtu, density, idle, backpressure):
    """``threshold`` tensors beside a dense one: their frames close where their kept values
    and layout fill the MTU (at 200 bytes, below the coalescer's ``SPARSE_SPECULATION_MTU``,
    the fit is known before the beat is taken; at 1518 it is guessed a beat ahead)."""
    codecs = ["fp16", "threshold"]
    seed = int(mtu * density) + STALLS.index((idle, backpressure))
    frames = _threshold_traffic(np.random.default_rng(seed), density)
    seq = check(frames, mtu=mtu, codecs=codecs, idle=idle, backpressure=backpressure,
                seed=seed)
    assert sum(1 for x in seq if x[0] == "wire") > 3
