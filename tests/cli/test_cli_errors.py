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
