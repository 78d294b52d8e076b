"""The frames / reference / tensor commands end to end."""

import json

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.reference.codecs import decode, encode
from squeezenic_hw.spec.codecs import preset_params


@pytest.mark.parametrize("codec", ["terngrad", "int8", "fp16"])
def test_worked_example(tmp_path, capsys, codec):
    g = np.random.default_rng(5).standard_normal((20, 50)).astype(np.float32)
    np.save(tmp_path / "g.npy", g)
    p = lambda name: str(tmp_path / name)  # noqa: E731
    assert main(["frames", p("g.npy"), "--codec", codec, "--seed", "9", "-o", p("host.pcap"),
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["frames"] == 3 and summary["elements"] == 1000
    assert main(["reference", "tx", p("host.pcap"), "-o", p("wire.pcap"), "--format",
                 "json"]) == 0
    tx = json.loads(capsys.readouterr().out)
    assert tx["frames_in"] == 3 and tx["counters"]["elements"] == 1000
    assert main(["reference", "rx", p("wire.pcap"), "-o", p("back.pcap"), "--format",
                 "csv"]) == 0
    capsys.readouterr()
    assert main(["tensor", p("back.pcap"), "-o", p("out.npy")]) == 0
    out = np.load(p("out.npy"))
    if codec == "fp16":
        ref = decode(encode(g, "fp16"), "fp16")
    else:
        pp = preset_params(codec, g)
        ref = decode(encode(g, pp["codec"], param=pp["param"], scale=pp["scale"],
                            aux=pp["aux"], seed=9, stochastic=pp["stochastic"]),
                     pp["codec"], param=pp["param"], scale=pp["scale"], aux=pp["aux"])
    assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


def test_tensor_gaps(tmp_path, capsys):
    np.save(tmp_path / "g.npy", np.arange(10, dtype=np.float32))
    main(["frames", str(tmp_path / "g.npy"), "--codec", "raw", "--offset", "5",
          "-o", str(tmp_path / "a.pcap")])
    from squeezenic_hw.pcap import read_frames, write_frames
    frames, _ = read_frames(tmp_path / "a.pcap")
    assert len(frames) == 1
    main(["frames", str(tmp_path / "g.npy"), "--codec", "raw", "--offset", "20",
          "--elements-per-frame", "3", "-o", str(tmp_path / "b.pcap")])
    write_frames(tmp_path / "c.pcap", frames + read_frames(tmp_path / "b.pcap")[0])
    capsys.readouterr()
    assert main(["tensor", str(tmp_path / "c.pcap"), "-o", str(tmp_path / "t.npy")]) == 2
    assert "gap" in capsys.readouterr().err
    assert main(["tensor", str(tmp_path / "c.pcap"), "-o", str(tmp_path / "t.npy"),
                 "--allow-gaps", "--format", "json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["first_offset"] == 5 and stats["missing"] == 5 and stats["elements"] == 25
    t = np.load(tmp_path / "t.npy")
    assert np.array_equal(t[:10], np.arange(10)) and not t[10:15].any()


def _bad(tmp_path):
    np.save(tmp_path / "g.npy", np.ones(10, np.float32))
    np.save(tmp_path / "i.npy", np.ones(10, np.int32))
    (tmp_path / "junk.pcap").write_bytes(b"not a pcap at all, sorry")
    g, out = str(tmp_path / "g.npy"), str(tmp_path / "o.pcap")
    return [
        ["frames", g, "--codec", "nope", "-o", out],
        ["frames", g, "--codec", "threshold", "--param", "1", "-o", out],
        ["frames", g, "--codec", "threshold", "--keep-fraction", "1.5", "-o", out],
        ["frames", g, "--codec", "raw", "--keep-fraction", "0.5", "-o", out],
        ["frames", g, "--codec", "fixed", "-o", out],
        ["frames", g, "--codec", "fixed", "--param", "17", "-o", out],
        ["frames", g, "--codec", "int8", "--param", "4", "-o", out],
        ["frames", g, "--codec", "raw", "--elements-per-frame", "0", "-o", out],
        ["frames", g, "--codec", "raw", "--elements-per-frame", "2385", "-o", out],
        ["frames", str(tmp_path / "i.npy"), "--codec", "raw", "-o", out],
        ["frames", str(tmp_path / "missing.npy"), "--codec", "raw", "-o", out],
        ["frames", str(tmp_path / "junk.pcap"), "--codec", "raw", "-o", out],
        ["reference", "tx", str(tmp_path / "junk.pcap"), "-o", out],
        ["reference", "tx", str(tmp_path / "missing.pcap"), "-o", out],
        ["tensor", str(tmp_path / "junk.pcap"), "-o", str(tmp_path / "t.npy")],
    ]


def test_errors_are_one_line(tmp_path, capsys):
    for argv in _bad(tmp_path):
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)


def test_reference_option_errors(tmp_path, capsys):
    np.save(tmp_path / "g.npy", np.ones(10, np.float32))
    host = str(tmp_path / "h.pcap")
    main(["frames", str(tmp_path / "g.npy"), "--codec", "raw", "-o", host])
    for extra in (["--codecs", "raw,bogus"], ["--mtu", "20"], ["--idle-timeout", "0"]):
        capsys.readouterr()
        assert main(["reference", "tx", host, "-o", str(tmp_path / "o.pcap"), *extra]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["reference", "tx", host, "-o", str(tmp_path / "o.pcap"), "--codecs",
                 "fp16", "--format", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["counters"]["bypass_codec"] == 1 and res["frames_out"] == 1


@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
def test_level_codecs_derive_scale_or_warn(tmp_path, capsys, codec):
    """A 1e-3-sized gradient: without --scale the scale is derived (and said), so it does
    not decode to zeros; with --scale 1 most elements quantise to 0, and a warning says so."""
    g = (np.random.default_rng(2).standard_normal(500) * 1e-3).astype(np.float32)
    np.save(tmp_path / "g.npy", g)
    p = lambda name: str(tmp_path / name)  # noqa: E731
    assert main(["frames", p("g.npy"), "--codec", codec, "--param", "8", "-o", p("h.pcap"),
                 "--format", "json"]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert "derived" in out.err
    assert summary["scale"] == pytest.approx(127 / float(np.max(np.abs(g))), rel=1e-6)
    decoded = decode(encode(g, codec, param=8, scale=summary["scale"], aux=summary["aux"]),
                     codec, param=8, scale=summary["scale"], aux=summary["aux"])
    assert np.count_nonzero(decoded) > 0.9 * g.size
    assert main(["frames", p("g.npy"), "--codec", codec, "--param", "8", "--scale", "1",
                 "-o", p("h1.pcap")]) == 0
    assert "quantise to 0" in capsys.readouterr().err
