"""The README's worked example runs as written: every command of its ``## Commands`` shell
blocks, in order, in one directory, on a small gradient; the other commands (``cmp``) in a
shell, where they must succeed."""

import shlex
import subprocess
from pathlib import Path

import numpy as np

from squeezenic_hw.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands():
    """The lines of the shell blocks of the README's ``## Commands`` section, without
    their comments."""
    text = README.read_text().split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    blocks = text.split("```sh\n")[1:]
    return [line.split("  #", 1)[0].strip() for block in blocks
            for line in block.split("```", 1)[0].splitlines() if line.strip()]


def test_the_commands_are_the_worked_example():
    """Reference and simulation write files of their own, and the example compares them."""
    lines = _commands()
    outputs = [shlex.split(line)[shlex.split(line).index("-o") + 1] for line in lines
               if "-o" in shlex.split(line)]
    assert len(outputs) == len(set(outputs)), outputs
    assert any(line.startswith("cmp ") for line in lines)


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    """Each command as the README writes it (the simulations on Amaranth, so that no model
    is built: the compiled backend's runs are tests/cli/test_simulate_cmd.py's), exit 0."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    np.save("grad.npy", (rng.standard_normal(600) * 1e-3).astype(np.float32))
    for line in _commands():
        words = shlex.split(line)
        if words[0] == "squeezenic-hw":
            argv = words[1:] + (["--backend", "amaranth"] if words[1] == "simulate" else [])
            assert main(argv) == 0, (line, capsys.readouterr().err)
        else:
            run = subprocess.run(line, shell=True, capture_output=True, text=True)
            assert run.returncode == 0 and not run.stdout, (line, run.stdout, run.stderr)
