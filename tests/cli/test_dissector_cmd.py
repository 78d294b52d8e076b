"""``squeezenic-hw dissector``: the script it writes is the one the spec makes, with the
preferences' defaults it is given; what it prints says where it went and how to load it."""

import json

from squeezenic_hw.cli import main
from squeezenic_hw.dissector.lua_script import INSTALL_DIR, lua_script


def test_writes_the_script_and_says_where(tmp_path, capsys):
    out = tmp_path / "plugins" / "squeezenic.lua"
    assert main(["dissector", "-o", str(out)]) == 0
    table = capsys.readouterr().out
    assert out.read_text() == lua_script()
    assert str(out) in table and str(out.stat().st_size) in table
    assert INSTALL_DIR in table and f"tshark -X lua_script:{out}" in table


def test_port_and_codecs_are_the_preferences_defaults(tmp_path, capsys):
    out = tmp_path / "sq.lua"
    assert main(["dissector", "-o", str(out), "--port", "4000", "--codecs", "fixed,7",
                 "--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj) == {"files", "port", "codecs", "install_dir"}
    assert obj["files"] == [{"file": str(out), "bytes": out.stat().st_size,
                             "what": obj["files"][0]["what"]}]
    assert (obj["port"], obj["codecs"]) == (4000, ["fixed", "threshold"])
    assert out.read_text() == lua_script(port=4000, codecs=["fixed", "threshold"])
    assert main(["dissector", "-o", str(out), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "file,bytes,what", f"{out},{out.stat().st_size},{obj['files'][0]['what']}"]


def test_help_says_where_to_install(capsys):
    try:
        main(["dissector", "--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert INSTALL_DIR in text and "-X lua_script:" in text and "udp.port==N" in text
