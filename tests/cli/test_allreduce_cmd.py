"""``squeezenic-hw allreduce`` end to end: the numpy reference (``--reference``) and the ring
of simulated NICs (``--backend amaranth``)."""

import json

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.pcap import read_frames
from squeezenic_hw.reference.allreduce import allreduce, result_frames
from squeezenic_hw.sim.compiled import compiled_available


def _tensors(tmp_path, nodes, elements, *, spread=1e-3):
    rng = np.random.default_rng(nodes)
    paths = []
    for r in range(nodes):
        path = tmp_path / f"t{r}.npy"
        np.save(path, (rng.normal(size=elements) * spread).astype(np.float32))
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("codec, extra", [("raw", []), ("fp16", []),
                                          ("fixed", ["--param", "8"]),
                                          ("int8", []), ("onebit", [])])
def test_results_links_and_summary(tmp_path, capsys, codec, extra):
    paths = _tensors(tmp_path, 3, 2000)
    out = tmp_path / "out"
    assert main(["allreduce", *paths, "--codec", codec, *extra, "--seed", "4", "--reference",
                 "-o", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["identical"] and summary["within_bound"]
    assert summary["nodes"] == 3 and summary["elements"] == 2000
    tensors = [np.load(p) for p in paths]
    kw = {k: summary[k] for k in ("param", "scale", "aux", "seed", "stochastic")}
    expected = allreduce(tensors, summary["codec"], **kw)
    frames = 0
    for r in range(3):
        got = np.load(out / f"result{r}.npy")
        assert np.array_equal(got.view(np.uint32), expected.results[r].view(np.uint32))
        link, _ = read_frames(out / f"link{r}.pcap")
        assert link == expected.links[r]
        frames += len(link)
    assert frames == summary["link_frames"]
    if codec == "fixed":
        # no --scale: derived from the largest magnitude, and said so
        amax = max(float(np.max(np.abs(t))) for t in tensors)
        assert summary["scale"] == pytest.approx(127 / amax, rel=1e-6)
        assert summary["max_error"] <= summary["max_bound"] <= 3 * 0.6 * amax / 127
        assert "derived" in captured.err


def test_sign_with_equal_scale_and_aux_warns(tmp_path, capsys):
    paths = _tensors(tmp_path, 2, 50)
    assert main(["allreduce", *paths, "--codec", "sign", "--reference", "-o",
                 str(tmp_path / "o")]) == 0
    assert "warning" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--codec", "threshold", "--reference"], "cannot be reduced"),
    (["--codec", "raw"], "reduces fixed, qsgd, sign so far"),
    (["--codec", "fixed", "--reference"], "param"),
    (["--codec", "raw", "--reference", "--seed", "-1"], "seed"),
])
def test_user_errors_exit_2_with_one_line(tmp_path, capsys, args, message):
    paths = _tensors(tmp_path, 2, 10)
    assert main(["allreduce", *paths, *args, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_one_tensor_or_different_lengths_are_refused(tmp_path, capsys):
    paths = _tensors(tmp_path, 2, 10)
    np.save(tmp_path / "short.npy", np.zeros(3, np.float32))
    assert main(["allreduce", paths[0], "--codec", "raw", "--reference", "-o",
                 str(tmp_path / "o")]) == 2
    assert main(["allreduce", paths[0], str(tmp_path / "short.npy"), "--codec", "raw",
                 "--reference", "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.count("error") == 2


@pytest.mark.parametrize("backend", [
    "amaranth",
    pytest.param("compiled", marks=pytest.mark.skipif(
        not compiled_available(), reason="no Verilator or C++ compiler here"))])
def test_the_simulated_nics_give_the_reference_results(tmp_path, capsys, backend):
    """Two NICs on each simulator: every host's result, every link's frames and the
    host's result frames as the reference's; the line-rate figures reported."""
    paths = _tensors(tmp_path, 2, 300)
    out = tmp_path / "out"
    assert main(["allreduce", *paths, "--codec", "signsgd", "--seed", "9",
                 "--max-host-elements", "50", "--backend", backend, "-o", str(out),
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["engine"] == backend and summary["equals_reference"]
    assert summary["identical"] and summary["bypassed"] == 0
    assert summary["cycles"] > summary["hop_latency"] > 0 and summary["link_gbps"] > 0
    tensors = [np.load(p) for p in paths]
    kw = {k: summary[k] for k in ("param", "scale", "aux", "seed", "stochastic")}
    expected = allreduce(tensors, summary["codec"], **kw)
    for r in range(2):
        got = np.load(out / f"result{r}.npy")
        assert np.array_equal(got.view(np.uint32), expected.results[r].view(np.uint32))
        link, _ = read_frames(out / f"link{r}.pcap")
        assert sorted(link) == sorted(expected.links[r])
        host, _ = read_frames(out / f"host{r}.pcap")
        assert sorted(host) == sorted(result_frames(expected, r, summary["codec"],
                                                    max_host_elements=50, **{
                                                        k: kw[k] for k in
                                                        ("param", "scale", "aux",
                                                         "stochastic")}))


@pytest.mark.slow
@pytest.mark.skipif(not compiled_available(), reason="no Verilator or C++ compiler here")
@pytest.mark.parametrize("nodes, codec, least", [(4, "signsgd", 0.95), (4, "int8", 0.95),
                                                  (8, "signsgd", 0.85)])
def test_a_million_elements_at_line_rate(tmp_path, capsys, nodes, codec, least):
    """10⁶ elements a node on the compiled ring: the reference's results on every node,
    nothing bypassed, and the links and hosts' streams near one beat a cycle (the ideal:
    the busiest stream's beats plus 2(N − 1) hops' latency)."""
    rng = np.random.default_rng(nodes)
    paths = []
    for r in range(nodes):
        paths.append(str(tmp_path / f"t{r}.npy"))
        np.save(paths[-1], (rng.normal(size=1_000_000) * 1e-2).astype(np.float32))
    assert main(["allreduce", *paths, "--codec", codec, "--backend", "compiled", "-o",
                 str(tmp_path / "out"), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["equals_reference"] and summary["identical"]
    assert summary["bypassed"] == 0 and summary["efficiency"] >= least
