# amaranth: UnusedElaboratable=no
"""``squeezenic-hw simulate-plugin``: the plugin's core on pcaps and a register script."""

import json

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.pcap import read_frames, write_frames
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.sim.compiled import compiled_available
from squeezenic_hw.spec.generator import GeneratorConfig

from support.lane_scenarios import host_stream

JSON_KEYS = {"backend", "build_seconds", "build_cached", "cycles", "sim_cycles_per_second",
             "frames_in", "outputs", "registers"}
STREAM_KEYS = {"frames", "bytes", "tuser_dst", "file", "matches_reference", "not_checked",
               "difference"}
ACCESS_KEYS = {"step", "op", "cycle", "register", "address", "data", "response"}
#: the build of tests/sim/test_core_model.py's LOOPED (one compiled model for both)
LOOPED = ["--host-bw", "200", "--codecs", "sign", "--gen-codecs", "sign", "--loopback",
          "--looped"]
SCRIPT = """\
# both generators: 3 frames of 64 sign elements each, at 32 bytes per cycle
write gen_n_frames 3
write gen_elements 64
write gen_codec 5
write gen_flush_every 2
write gen_seed 3
write gen_value_seed 11
write gen_rate_bytes_per_cycle 32
write gen_start 1
poll lane0_frames_sent 3
poll lane1_frames_sent 3 20
inputs-done
write gen_close 1
write tx_close 1
frames c2h0 {back}
wait 2000
read lane0_chk_frames_lo
read lane1_chk_frames_lo
read 0x2000   # a register by its address
"""


def _host_pcap(path):
    host = host_stream(np.random.default_rng(2), "sign", n_total=300, max_k=90,
                       flush_rate=0.0)
    write_frames(path, host)
    return host


@pytest.mark.skipif(not compiled_available(),
                    reason="this machine has no Verilator or C++ compiler")
def test_generators_and_host_frames_looped_back(tmp_path, capsys, cache):
    """A register script starts the generators while host frames go H2C → wire → C2H:
    C2H equals the reference round trip, the checkers count the reference's frames, and
    every output stream is a pcap."""
    host = _host_pcap(tmp_path / "host.pcap")
    back = lr.rx(lr.tx(host, codecs=["sign"])[0], codecs=["sign"])[0]
    (tmp_path / "run.txt").write_text(SCRIPT.format(back=len(back)))
    args = ["simulate-plugin", *LOOPED, "--input", f"h2c0={tmp_path / 'host.pcap'}",
            "--script", str(tmp_path / "run.txt"), "-o", str(tmp_path / "out"),
            "--idle", "0.2", "--backpressure", "0.2", "--cache-dir", str(cache)]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == JSON_KEYS and out["backend"] == "compiled"
    assert out["frames_in"] == {"h2c0": len(host)} and list(out["outputs"]) == ["c2h0"]
    c2h = out["outputs"]["c2h0"]
    assert set(c2h) == STREAM_KEYS and c2h["matches_reference"] is True
    assert c2h["frames"] == len(back) and c2h["tuser_dst"] == [1]
    assert read_frames(c2h["file"])[0] == back
    assert all(set(a) == ACCESS_KEYS and a["response"] == "OKAY" for a in out["registers"])
    reads = {a["register"]: a["data"] for a in out["registers"] if a["op"] == "read"}
    config = GeneratorConfig(codec=5, elements=64, flush_every=2, seed=3, value_seed=11,
                             rate_bytes_per_cycle=32.0)
    want = array_reference(2, config, 3, codecs=["sign"], src_port_base=0x5000)
    assert [reads["lane0_chk_frames_lo"], reads["lane1_chk_frames_lo"]] == \
        [lane["checker"]["frames"] for lane in want]
    assert reads["lane0_frames_sent"] == 3            # read at 0x2000, named
    polls = [a for a in out["registers"] if a["op"] == "poll"]
    assert [a["data"] for a in polls] == [3, 3]

    # the table says the same; a read the bus refuses, and a poll that never ends, fail
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "c2h0 check" in table and "matches the reference" in table
    (tmp_path / "bad.txt").write_text("read 0x9990\n")
    assert main(["simulate-plugin", *LOOPED, "--script", str(tmp_path / "bad.txt"), "-o",
                 str(tmp_path / "bad"), "--cache-dir", str(cache), "--format", "json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["registers"][0]["response"] == "SLVERR"
    assert "step 0 (read 0x9990) answered SLVERR" in captured.err
    (tmp_path / "never.txt").write_text("poll lane0_frames_sent 7 10\n")
    assert main(["simulate-plugin", *LOOPED, "--script", str(tmp_path / "never.txt"), "-o",
                 str(tmp_path / "never"), "--cache-dir", str(cache), "--timeout",
                 "3000"]) == 1
    assert "timeout after" in capsys.readouterr().err


def test_amaranth_backend_registers_and_one_interface(tmp_path, capsys):
    """The smallest build on Amaranth: host frames H2C → TX (against the reference TX
    lane, tuser_dst for CMAC port 0) and a scratch register written and read back."""
    params = ["--codecs", "raw"]
    frames = host_stream(np.random.default_rng(4), "raw", n_total=120, max_k=40,
                         flush_rate=0.0)
    write_frames(tmp_path / "h.pcap", frames)
    (tmp_path / "s.txt").write_text("write scratch 0x1234\nread scratch\ninputs-done\n"
                                    "write tx_close 1\nframes tx0 1\n")
    assert main(["simulate-plugin", *params, "--input", f"h2c0={tmp_path / 'h.pcap'}",
                 "--script", str(tmp_path / "s.txt"), "-o", str(tmp_path / "o"),
                 "--backend", "amaranth", "--idle", "0.3", "--backpressure", "0.3",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "amaranth" and out["build_seconds"] is None
    tx = out["outputs"]["tx0"]
    assert tx["matches_reference"] is True and tx["tuser_dst"] == [1 << 6]
    assert read_frames(tx["file"])[0] == lr.tx(frames, codecs=["raw"])[0]
    assert out["outputs"]["c2h0"]["frames"] == 0
    assert out["outputs"]["c2h0"]["matches_reference"] is True     # no wire input, none out
    scratch = [a for a in out["registers"] if a["register"] == "scratch"]
    assert [(a["op"], a["data"]) for a in scratch] == [("write", 0x1234), ("read", 0x1234)]


@pytest.mark.parametrize("args,message", [
    (["--input", "h2c0"], "--input must be STREAM=IN.pcap"),
    (["--input", "rx7=x.pcap"], "no input stream 'rx7'"),
    (["--looped", "--input", "rx0=x.pcap"], "no input stream 'rx0'"),
    (["--input", "h2c0={pcap}", "--input", "h2c0={pcap}"], "h2c0 given twice"),
    (["--input", "h2c0=missing.pcap"], "missing.pcap"),
    (["--script", "{bad}"], "line 2: unknown step 'jump'"),
    (["--script", "missing.txt"], "missing.txt"),
    (["--host-bw", "150"], "--host-bw"),
    (["--mtu", "big"], "--mtu: expected an integer"),
    (["--idle", "1.5"], "--idle must be in [0, 1)"),
    (["--timeout", "0"], "--timeout must be at least 1"),
])
def test_user_errors(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    write_frames("good.pcap", [bytes(64)])
    (tmp_path / "bad.txt").write_text("read scratch\njump 3\n")
    args = [a.format(pcap="good.pcap", bad="bad.txt") for a in args]
    assert main(["simulate-plugin", "--codecs", "raw", "-o", "out", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "out").exists()


def test_reduce_is_for_a_ring(tmp_path, capsys):
    """One plugin cannot form a ring: ``--reduce`` points to ``allreduce`` (exit 2)."""
    assert main(["simulate-plugin", "--reduce", "sign", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "allreduce" in err and err.count("\n") == 1
