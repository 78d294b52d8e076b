"""The command-line front end: formats, help and errors."""

import csv
import io
import json
import subprocess
import sys

import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.spec.codecs import ALL_CODECS, PRESETS


def test_codecs_json_lists_every_codec_and_preset(capsys):
    assert main(["codecs", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(ALL_CODECS) + list(PRESETS)
    by_name = {r["name"]: r for r in rows}
    assert by_name["fp16"]["id"] == 1 and by_name["fp16"]["ratio"] == 2.0
    assert by_name["fixed"]["bits"] == [2, 16]
    assert by_name["terngrad"]["codec"] == "qsgd" and by_name["terngrad"]["bits"] == 2
    assert by_name["natural"]["stochastic"] == "optional"
    assert set(rows[0]) == {"name", "kind", "codec", "id", "param", "bits", "ratio",
                            "stochastic", "scale", "aux", "summary"}


def test_codecs_csv_and_table_agree(capsys):
    assert main(["codecs", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["name"] for r in rows] == list(ALL_CODECS) + list(PRESETS)
    assert main(["codecs"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["name", "kind", "codec", "id"]
    assert len(table) == 2 + len(rows)


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_bad_format_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["codecs", "--format", "xml"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_console_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "squeezenic_hw", "codecs", "--format", "json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)[0]["name"] == "raw"
    out = subprocess.run([sys.executable, "-m", "squeezenic_hw", "--help"],
                         capture_output=True, text=True, check=True)
    assert "codecs" in out.stdout and "model" in out.stdout
