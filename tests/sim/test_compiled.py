# amaranth: UnusedElaboratable=no
"""The compiled lane model (Verilator and the C++ bench of ``sim/compiled.py``) against the
numpy reference and the Amaranth simulation: every codec, every bypass reason, random idle
cycles and backpressure; and its build cache."""

import numpy as np
import pytest

from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.compiled import (
    OPT,
    OPT_VARIABLE,
    build_lane_model,
    compiled_available,
    cxx_opt,
    ports_header,
    simulate_lane_compiled,
)
from squeezenic_hw.sim.traffic import lane_builders
from squeezenic_hw.spec.frames import Header

from support.lane_scenarios import (
    bad_frames,
    check_against_reference,
    check_tuser,
    host_stream,
    idle_gap_traffic,
    interleave,
    lane_simulation,
    wire_of,
)
from support.param_sweep import rotated
from support.unused import inspected

pytestmark = pytest.mark.skipif(not compiled_available(),
                                reason="this machine has no Verilator or C++ compiler")

CODECS = ["raw", "fp16", "bf16", "fixed", "qsgd", "sign", "natural"]
STALLS = [(0.0, 0.0), (0.3, 0.4)]
#: codecs of the lanes simulated on Amaranth too (quick there), one model per lane kind,
#: which the command's tests (tests/cli/test_simulate_cmd.py) find built
CHEAP = ["raw", "fp16", "sign"]


def _model(lane, codecs=None):
    """``simulate_lane_compiled``'s arguments for a lane of ``codecs`` (default 0–6): its
    builder and key, the ``fuzz`` and ``simulate`` commands' (``traffic.lane_builders``), so
    the tests and commands that run the same lane export its Verilog once."""
    build, key = lane_builders(codecs)[lane]
    return {"lane": build, "key": key}


def _traffic(rng, codecs, lane, *, elements=(100, 900)):
    """A stream of every codec, interleaved, with every frame the lane must bypass."""
    streams = [host_stream(rng, c, n_total=int(rng.integers(*elements)), flush_rate=0.1,
                           offset=int(rng.integers(0, 2**32)),
                           header=Header(src_ip=bytes([10, 0, 3, k])))
               for k, c in enumerate(codecs)]
    frames = interleave(rng, streams, lane="tx", bypass_rate=0.0)
    if lane == "rx":
        frames = [AxisFrame(f, src=int(rng.integers(2**16)), dst=int(rng.integers(2**16)))
                  for f in wire_of(frames, codecs=codecs)]
    for bad in bad_frames(lane).values():
        frames.insert(int(rng.integers(len(frames) + 1)),
                      AxisFrame(bad, src=int(rng.integers(2**16)), dst=int(rng.integers(2**16))))
    return frames


@pytest.mark.parametrize("lane,idle,backpressure", rotated(["tx", "rx"], STALLS))
def test_every_codec_and_bypass_reason(lane, idle, backpressure, cache):
    rng = np.random.default_rng([len(lane), int(idle * 10)])
    frames = _traffic(rng, CODECS, lane)
    run = simulate_lane_compiled(frames=frames, idle=idle, backpressure=backpressure, seed=3,
                                 cache_dir=cache, **_model(lane))
    check_against_reference(run, frames, lane)
    check_tuser(run, frames, lane)
    reasons = [name for name in run.counters if name.startswith("bypass_")
               and name != "bypass_frames"]
    assert all(run.counters[name] > 0 for name in reasons), run.counters
    assert run.extra["backend"] == "compiled"


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_same_frames_and_counters_as_amaranth(lane, cache):
    codecs = CHEAP
    rng = np.random.default_rng(len(lane))
    frames = _traffic(rng, codecs, lane, elements=(50, 300))

    kw = dict(idle=0.2, backpressure=0.3, seed=5)
    compiled = simulate_lane_compiled(frames=frames, **kw, cache_dir=cache,
                                      **_model(lane, codecs))
    amaranth = lane_simulation(lane, codecs=codecs).run(frames, **kw)
    assert [(f.data, f.src, f.dst) for f in compiled.frames] == \
        [(f.data, f.src, f.dst) for f in amaranth.frames]
    assert compiled.counters == amaranth.counters
    assert compiled.beats_in == amaranth.beats_in and compiled.beats_out == amaranth.beats_out


def test_full_rate_without_stalls(cache):
    """No idle, no backpressure: the compiled TX lane takes one host beat per cycle."""
    rng = np.random.default_rng(9)
    frames = host_stream(rng, "sign", n_total=363 * 20, lengths=[363])
    run = simulate_lane_compiled(frames=frames, cache_dir=cache, **_model("tx", CHEAP))
    check_against_reference(run, frames, "tx", codecs=CHEAP)
    assert run.input_cycles == run.beats_in and run.input_stalls == 0
    # raw frames (no smaller on the wire) into a wire that takes a beat in five: the lane
    # holds its input back, and the bench counts the cycles
    raw = host_stream(rng, "raw", n_total=363 * 8, lengths=[363])
    slow = simulate_lane_compiled(frames=raw, backpressure=0.8, cache_dir=cache,
                                  **_model("tx", CHEAP))
    check_against_reference(slow, raw, "tx", codecs=CHEAP)
    assert slow.input_stalls > 0 and slow.input_cycles > slow.beats_in


def test_build_is_cached(cache):
    """A lane's model is found again by its Verilog and, with a key, without exporting it.
    (The cold build and the shared run-time library: ``test_stream_run.py``, on a
    small design.)"""
    exe, first = build_lane_model(RxLane(codecs=CHEAP), cache_dir=cache)
    again, second = build_lane_model(RxLane(codecs=CHEAP), cache_dir=cache)
    assert second["cached"] and again == exe

    def build():
        return RxLane(codecs=CHEAP)

    key = f"RxLane(codecs={CHEAP})"
    keyed, third = build_lane_model(build, cache_dir=cache, key=key)
    fast, fourth = build_lane_model(build, cache_dir=cache, key=key)
    assert keyed == fast == exe and third["cached"] and fourth["cached"]
    # the second keyed call does not export the Verilog: well under the 2 s a cached
    # build may take
    assert fourth["build_s"] < 1.0 and "source_s" not in fourth
    assert fourth["counters"] == first["counters"] and first["counters"][0] == [
        "wire_frames", 0, 32]


def test_cxx_optimisation_from_the_environment(monkeypatch):
    monkeypatch.delenv(OPT_VARIABLE, raising=False)
    assert cxx_opt() == OPT == "-O1"
    monkeypatch.setenv(OPT_VARIABLE, " -O3 ")
    assert cxx_opt() == "-O3"
    monkeypatch.setenv(OPT_VARIABLE, "-O9")
    with pytest.raises(ValueError, match=OPT_VARIABLE):
        cxx_opt()


def test_ports_header_names_the_lanes_ports():
    tx = ports_header(inspected(TxLane, codecs=["raw"]))
    rx = ports_header(inspected(RxLane, codecs=["raw"]))
    assert "HAS_CLOSE" in tx and "HAS_CLOSE" not in rx
    assert "#define COUNTER_WORDS 26" in tx and "#define COUNTER_WORDS 23" in rx
    assert "cfg___05Fidle___05Ftimeout" not in tx   # single underscores stay as they are
    assert "(top).cfg_idle_timeout = 0;" in tx


def test_rejects_a_lane_with_other_beats():
    from squeezenic_hw.gateware.tx.narrow import NarrowTxLane
    with pytest.raises(ValueError, match="lane: .*NarrowTxLane has no 'o'"):
        build_lane_model(NarrowTxLane("sign", bare=True))


def test_arrival_times_and_idle_closes(cache):
    """Frames at given arrival cycles, gaps either side of the idle timeout: the compiled
    bench keeps the times as the Amaranth source does, so the idle closes are the
    reference's. The timeout is set at run time, in the model of a lane built without one."""
    T = 50
    frames, times = idle_gap_traffic(np.random.default_rng(4), T, n_total=600)
    lane = _model("tx", CHEAP)
    run = simulate_lane_compiled(frames=frames, times=times, idle_timeout=T, cache_dir=cache,
                                 **lane)
    check_against_reference(run, frames, "tx", codecs=CHEAP, idle_timeout=T, times=times)
    assert run.counters["close_idle"] >= 5
    assert run.extra["input_first_cycles"][:3] == [t + 1 for t in times[:3]]
    # the same model without a run-time timeout keeps the lane's: none
    again = simulate_lane_compiled(frames=frames, times=times, cache_dir=cache, **lane)
    assert again.extra["build"]["key"] == run.extra["build"]["key"]
    check_against_reference(again, frames, "tx", codecs=CHEAP, times=times)
    assert again.counters["close_idle"] == 0
    with pytest.raises(ValueError, match="idle_timeout"):
        simulate_lane_compiled(frames=frames, idle_timeout=-1, cache_dir=cache, **lane)


def test_no_stalls_same_cycles_and_gaps_as_amaranth(cache):
    """Without idle cycles or backpressure both benches are deterministic: the same beats in
    the same cycles, and the same gaps inside frames (RX: a host frame's header leaves
    before the decoders deliver its payload)."""
    codecs = CHEAP
    rng = np.random.default_rng(6)
    host = host_stream(rng, "fp16", n_total=700, max_k=363)
    frames = [AxisFrame(f, src=3, dst=4) for f in wire_of(host, codecs=codecs)]
    compiled = simulate_lane_compiled(frames=frames, cache_dir=cache, **_model("rx", codecs))
    amaranth = lane_simulation("rx", codecs=codecs).run(frames)
    check_against_reference(compiled, frames, "rx", codecs=codecs)
    assert [(f.data, f.first_cycle, f.last_cycle) for f in compiled.frames] == \
        [(f.data, f.first_cycle, f.last_cycle) for f in amaranth.frames]
    assert compiled.gaps_in_frames == amaranth.gaps_in_frames > 0
    assert compiled.max_out_streak == amaranth.max_out_streak


def test_a_model_is_built_by_one_process_at_a_time(tmp_path):
    """The build lock: a second asker for the same model waits until the first is done
    (then finds the model); another model's build does not wait."""
    import threading
    import time

    from squeezenic_hw.sim.compiled import _build_lock

    order, inside = [], threading.Event()

    def first():
        with _build_lock(tmp_path, "abc"):
            inside.set()
            time.sleep(0.3)
            order.append("first done")

    def second(digest):
        inside.wait()
        with _build_lock(tmp_path, digest):
            order.append(f"{digest} in")

    a = threading.Thread(target=first)
    a.start()
    other = threading.Thread(target=second, args=("xyz",))
    other.start()
    other.join()
    same = threading.Thread(target=second, args=("abc",))
    same.start()
    a.join()
    same.join()
    assert order == ["xyz in", "first done", "abc in"]
