"""Every command's user errors: exit status 2 and one line on stderr, no traceback."""

import subprocess
import sys

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.pcap import write_frames


@pytest.fixture
def files(tmp_path):
    """A pcap, a file that is not a pcap, a tensor, and a path that does not exist."""
    write_frames(tmp_path / "in.pcap", [bytes(70)])
    (tmp_path / "text.pcap").write_text("not a capture\n")
    np.save(tmp_path / "t.npy", np.ones(8, np.float32))
    (tmp_path / "text.npy").write_text("not a tensor\n")
    return tmp_path


def _cases(d):
    missing, text, pcap, npy = d / "missing.pcap", d / "text.pcap", d / "in.pcap", d / "t.npy"
    out = str(d / "out")
    return {
        "generate bad host_bw": ["generate", "-o", out, "--host-bw", "150"],
        "generate bad codec": ["generate", "-o", out, "--codecs", "zip"],
        "report bad host_bw": ["report", "--host-bw", "50", "--cache-dir", out],
        "codecs bad codec": ["frames", str(npy), "--codec", "nope", "-o", out],
        "model bad size": ["model", "--model-bytes", "lots"],
        "frames missing tensor": ["frames", str(d / "none.npy"), "--codec", "raw", "-o", out],
        "frames not a tensor": ["frames", str(text), "--codec", "raw", "-o", out],
        "reference missing input": ["reference", "tx", str(missing), "-o", out],
        "reference not a pcap": ["reference", "rx", str(text), "-o", out],
        "reference bad mtu": ["reference", "tx", str(pcap), "-o", out, "--mtu", "10"],
        "simulate not a pcap": ["simulate", "tx", str(text), "-o", out],
        "simulate missing input": ["simulate", "rx", str(missing), "-o", out],
        "tensor not a pcap": ["tensor", str(text), "-o", out],
        "tensor missing input": ["tensor", str(missing), "-o", out],
        "throughput bad host_bw": ["throughput", "--host-bw", "130"],
        "dissector bad port": ["dissector", "-o", out, "--port", "70000"],
        "dissector bad codec": ["dissector", "-o", out, "--codecs", "zip"],
    }


@pytest.mark.parametrize("case", list(_cases(__import__("pathlib").Path("."))))
def test_user_error_exits_2_with_one_line(files, capsys, case):
    argv = _cases(files)[case]
    assert main(argv) == 2, case
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"squeezenic-hw {argv[0]}: error:"), err
    assert "Traceback" not in err[0]


def test_bad_option_from_argparse_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["codecs", "--format", "yaml"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_console_script_exit_status_and_help(files):
    run = subprocess.run([sys.executable, "-m", "squeezenic_hw", "tensor",
                          str(files / "text.pcap"), "-o", str(files / "x.npy")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    help_text = subprocess.run([sys.executable, "-m", "squeezenic_hw", "simulate", "--help"],
                               capture_output=True, text=True).stdout
    assert "exit status" in " ".join(help_text.split())


def _error(capsys, argv):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv", [
    ["frames", "{missing_npy}", "--codec", "raw", "-o", "{out}"],
    ["allreduce", "{npy}", "{missing_npy}", "--codec", "raw", "--reference", "-o", "{out}"],
    ["reference", "tx", "{missing}", "-o", "{out}"],
    ["simulate", "rx", "{missing}", "-o", "{out}"],
    ["tensor", "{missing}", "-o", "{out}"],
    ["simulate-plugin", "--input", "h2c0={missing}", "-o", "{out}"],
])
def test_a_missing_input_file_says_cannot_read_it(files, capsys, argv):
    """Every command says the same of an input file that is not there: which file, and
    why in words (no "[Errno 2]", no repr of the name)."""
    names = {"missing": files / "missing.pcap", "missing_npy": files / "none.npy",
             "npy": files / "t.npy", "out": files / "out"}
    argv = [a.format(**names) for a in argv]
    path = next(str(p) for p in names.values() if str(p) in " ".join(argv)
                and not p.exists() and p.name != "out")
    err = _error(capsys, argv)
    assert err == (f"squeezenic-hw {argv[0]}: error: cannot read {path}: "
                   "No such file or directory")


@pytest.mark.parametrize("command, name", [("frames", "text.npy"), ("reference", "text.pcap"),
                                           ("tensor", "text.pcap")])
def test_a_file_of_the_wrong_kind_says_cannot_read_it(files, capsys, command, name):
    """A text file given as a tensor or a pcap: the same words, the reason in ours (not
    numpy's advice to unpickle it)."""
    argv = {"frames": ["frames", str(files / name), "--codec", "raw", "-o", str(files / "o")],
            "reference": ["reference", "rx", str(files / name), "-o", str(files / "o")],
            "tensor": ["tensor", str(files / name), "-o", str(files / "o")]}[command]
    err = _error(capsys, argv)
    assert err.startswith(f"squeezenic-hw {command}: error: cannot read {files / name}: not a ")
    assert "pickle" not in err and err.count(str(files / name)) == 1


@pytest.mark.parametrize("command", ["frames", "allreduce"])
def test_an_unknown_codec_lists_the_codecs_and_the_presets(files, capsys, command):
    from squeezenic_hw.spec.codecs import ALL_CODECS, PRESETS

    npy = str(files / "t.npy")
    argv = {"frames": ["frames", npy, "--codec", "zip", "-o", str(files / "o")],
            "allreduce": ["allreduce", npy, npy, "--codec", "zip", "-o", str(files / "o")]}[command]
    err = _error(capsys, argv)
    assert err.startswith(f"squeezenic-hw {command}: error: --codec: 'zip' is neither")
    assert all(name in err for name in [*ALL_CODECS, *PRESETS])


@pytest.mark.parametrize("codec", ["fixed", "qsgd"])
def test_a_missing_param_says_which_codec_needs_it_and_what_values(files, capsys, codec):
    err = _error(capsys, ["frames", str(files / "t.npy"), "--codec", codec,
                          "-o", str(files / "o")])
    assert err == (f"squeezenic-hw frames: error: --param: codec {codec!r} needs one: its "
                   "bits per element, from 2 to 16 (--param 8, say)")
    err = _error(capsys, ["frames", str(files / "t.npy"), "--codec", codec, "--param", "40",
                          "-o", str(files / "o")])
    assert err.startswith(f"squeezenic-hw frames: error: --param: codec {codec!r} needs") \
        and err.endswith("got 40")


def test_an_output_path_that_cannot_be_written_names_it_in_words(files, capsys):
    err = _error(capsys, ["frames", str(files / "t.npy"), "--codec", "raw",
                          "-o", str(files / "no" / "o.pcap")])
    assert err == (f"squeezenic-hw frames: error: {files / 'no' / 'o.pcap'}: "
                   "No such file or directory")
