# amaranth: UnusedElaboratable=no
"""The TX controller's pipeline (prep, coalescer, job shaper, close sizer) through the TX lane,
against the numpy reference: the paths its decisions take that the lane tests reach rarely —
the threshold fit guessed a beat ahead at the smallest MTU where it is guessed and just below
it, beats cut into pieces at tiny MTUs, beats that close two frames, idle closes between
threshold frames — each under random idle cycles and backpressure."""

import shutil
import subprocess

import numpy as np
import pytest

from squeezenic_hw.collector import blocks_never_run, to_verilog
from squeezenic_hw.gateware.tx.coalescer import SPARSE_SPECULATION_MTU
from squeezenic_hw.gateware.tx.prep import TxBeatPrep
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.vectors import sparse_gradient
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.frames import Header, build_host_frame
from squeezenic_hw.spec.header import FLAG_FLUSH
from squeezenic_hw.spec.threshold import payload_size

from support.lane_scenarios import check_against_reference, host_stream, interleave, lane_simulation
from support.param_sweep import grid, rotated

STALLS = [(0.0, 0.0), (0.3, 0.3)]


def _threshold_stream(rng, density, n, *, flush_rate=0.1, lengths=None, src=1):
    scale = float(rng.uniform(0.5, 4))
    return host_stream(rng, "threshold", n_total=n, offset=int(rng.integers(0, 2**32)),
                       header=Header(src_ip=bytes([10, 0, 0, src])), flush_rate=flush_rate,
                       scale=scale, lengths=lengths,
                       values=sparse_gradient(rng, n, density, scale=scale))


def test_speculation_mtu_is_where_three_beats_of_kept_values_fit():
    # the guess a beat ahead holds when a fresh frame takes a closing beat's rest and the
    # two beats after it, every element kept
    assert payload_size(48, 48) + 64 == SPARSE_SPECULATION_MTU
    assert payload_size(49, 49) + 64 > SPARSE_SPECULATION_MTU


@pytest.mark.parametrize("mtu,density,idle,backpressure", rotated(
    grid([SPARSE_SPECULATION_MTU - 1, SPARSE_SPECULATION_MTU, SPARSE_SPECULATION_MTU + 7],
         [0.3, 1.0]), STALLS))
def test_threshold_around_the_speculation_mtu(mtu, density, idle, backpressure):
    """Frames close every few beats, so every close is followed by beats decided on the
    guess (at and above the MTU) or after the slack settles (below it)."""
    rng = np.random.default_rng([mtu, int(density * 10), int(idle * 10)])
    frames = interleave(rng, [_threshold_stream(rng, density, 900, src=1),
                              _threshold_stream(rng, density, 700, src=2)], bypass_rate=0.05)
    run = lane_simulation("tx", codecs=["threshold", "raw"], mtu=mtu).run(frames, idle=idle,
                        backpressure=backpressure, seed=mtu)
    check_against_reference(run, frames, "tx", codecs=["threshold", "raw"], mtu=mtu)
    assert run.counters["close_full"] > 5


@pytest.mark.parametrize("density", [0.1, 0.3])
def test_threshold_full_rate_at_the_speculation_mtu(density):
    """At the smallest guessing MTU frames close every few beats and the input never
    stalls (the wire still has room at these densities)."""
    rng = np.random.default_rng(int(density * 10))
    frames = _threshold_stream(rng, density, 363 * 8, flush_rate=0.0, lengths=[363])
    run = lane_simulation("tx", codecs=["threshold"], mtu=SPARSE_SPECULATION_MTU).run(frames,
                        quiet=200)
    check_against_reference(run, frames, "tx", codecs=["threshold"],
                            mtu=SPARSE_SPECULATION_MTU)
    assert run.counters["close_full"] > 5
    assert run.input_cycles == run.beats_in, "the lane stalled its input"


@pytest.mark.parametrize("mtu,idle,backpressure", rotated([68, 76, 100, 127], STALLS))
def test_tiny_mtus_cut_beats_into_pieces(mtu, idle, backpressure):
    """Wire frames of fewer than 16 codes: every beat is cut into pieces, flush included."""
    rng = np.random.default_rng(mtu)
    codecs = ["raw", "fp16", "natural"]
    streams = [host_stream(rng, c, n_total=300, flush_rate=0.2,
                           header=Header(src_ip=bytes([10, 0, 1, k])))
               for k, c in enumerate(codecs)]
    frames = interleave(rng, streams, bypass_rate=0.1)
    run = lane_simulation("tx", codecs=codecs, mtu=mtu).run(frames, idle=idle,
                        backpressure=backpressure, seed=mtu)
    check_against_reference(run, frames, "tx", codecs=codecs, mtu=mtu)


@pytest.mark.parametrize("codec,mtu,first", [("raw", 1518, 355), ("fp16", 200, 60),
                                             ("sign", 130, 520)])
def test_beats_that_close_two_frames(codec, mtu, first):
    """A host frame leaves ``cap − first`` = 8 elements of room, and the next, of 12
    elements with flush, fills it in its only beat and flushes the rest: every such beat
    becomes two jobs and two headers, in order, at full input rate."""
    info = codec_info(codec)
    x = np.random.default_rng(1).standard_normal(40 * (first + 12)).astype(np.float32)
    frames, offset = [], 0
    for _ in range(40):
        for n, flags in ((first, 0), (12, FLAG_FLUSH)):
            frames.append(build_host_frame(Header(codec=info.id, offset=offset, flags=flags),
                                           x[offset:offset + n]))
            offset += n
    run = lane_simulation("tx", codecs=[codec], mtu=mtu).run(frames, quiet=150)
    check_against_reference(run, frames, "tx", codecs=[codec], mtu=mtu)
    assert run.counters["close_full"] == run.counters["close_flush"] == 40
    assert run.input_cycles == run.beats_in, "the lane stalled its input"


def test_idle_closes_between_threshold_frames():
    T = 40
    rng = np.random.default_rng(3)
    frames = _threshold_stream(rng, 0.4, 1500, flush_rate=0.0)
    times, t = [], 5
    for f in frames:
        times.append(t)
        t += lr.frame_beats(f) + int(rng.choice([0, T - 1, T, T + 1]))
    run = lane_simulation("tx", codecs=["threshold"]).run(frames, times=times, idle_timeout=T)
    check_against_reference(run, frames, "tx", codecs=["threshold"], idle_timeout=T,
                            times=times)
    assert run.counters["close_idle"] >= 3


@pytest.mark.parametrize("idle,backpressure", STALLS)
def test_wire_frames_take_the_header_of_their_first_host_frame(idle, backpressure):
    """Host frames of two tensors differ in a field outside the coalescing key (the IPv4
    identification): each wire frame carries that of the host frame holding its first
    element — kept while later headers of its tensor arrive, taken by a frame that opens
    mid-beat or closes in the beat that opens it, and by both frames of a beat that
    closes two."""
    rng = np.random.default_rng([5, int(idle * 10)])
    streams = []
    for s in range(2):
        frames, offset = [], int(rng.integers(0, 2**32))
        for k in range(40):
            n = int(rng.integers(1, 60))
            flags = FLAG_FLUSH if rng.random() < 0.15 else 0
            h = Header(codec=codec_info("fixed").id, param=8, src_ip=bytes([10, 0, 2, s]),
                       ip_id=1000 * s + k, offset=offset % 2**32, flags=flags)
            frames.append(build_host_frame(h, rng.standard_normal(n).astype(np.float32)))
            offset += n
        streams.append(frames)
    frames = interleave(rng, streams, bypass_rate=0.1)
    run = lane_simulation("tx", codecs=["fixed", "raw"], mtu=120).run(frames, idle=idle,
                        backpressure=backpressure, seed=5)
    wire = check_against_reference(run, frames, "tx", codecs=["fixed", "raw"], mtu=120)
    ids = {int.from_bytes(f[18:20], "big") for f in wire if len(f) > 64 and f[23] == 17}
    assert len(ids) > 20, "wire frames from many different host headers"
    assert run.counters["close_full"] > 10 and run.counters["close_mismatch"] > 5


@pytest.mark.parametrize("widths,sparse", [([1], False), ([1, 8, 16, 32], False),
                                           ([1, 32], True)])
def test_prep_verilog_has_no_block_simulators_never_run(tmp_path, widths, sparse):
    # A constant (or undriven) part of a signal driven in an FSM became an `always @*`
    # reading nothing: Icarus and Verilator never ran it, and the prepared beat's code
    # width was X there in a one-codec lane.
    prep = TxBeatPrep(capacity=lambda w: 11776 // w, widths=widths, sparse=sparse)
    text = to_verilog(prep, name="prep", emit_src=False)     # raises on such a block
    assert blocks_never_run(text) == []
    if shutil.which("iverilog"):
        (tmp_path / "prep.v").write_text(text)
        done = subprocess.run(["iverilog", "-g2005", "-o", str(tmp_path / "prep.vvp"),
                               str(tmp_path / "prep.v")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "no sensitivities" not in done.stderr, done.stderr
