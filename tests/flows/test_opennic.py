# amaranth: UnusedElaboratable=no
"""``squeezenic-hw generate``: the plugin directory, its Verilog in Icarus and Verilator."""

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.cli import main
from squeezenic_hw.flows import opennic
from squeezenic_hw.flows.opennic import GEN_LANE_MODULE, PLUGIN_FILES, write_opennic_plugin
from squeezenic_hw.gateware.common.stream import MAX_FANOUT
from squeezenic_hw.gateware.opennic.plugin import opennic_ports
from squeezenic_hw.regmap.plugin import plugin_register_map

from support.shared_plugins import LOOPBACK_PLUGIN

#: The project's record of the OpenNIC box_250mhz user-plugin ports (its "Ports" table).
PORT_TABLE_DOC = Path(__file__).resolve().parents[2] / "docs" / "opennic.md"

# The user-plugin ports of box_250mhz, transcribed from docs/opennic.md (per lane widths;
# N = NUM_PHYS_FUNC·NUM_QDMA, P = NUM_CMAC_PORT). box_rstn/box_rst_done stay in the box.
_AXIL_TABLE = ("awvalid", "awaddr[31:0]", "awready", "wvalid", "wdata[31:0]", "wready",
               "bvalid", "bresp[1:0]", "bready", "arvalid", "araddr[31:0]", "arready",
               "rvalid", "rdata[31:0]", "rresp[1:0]", "rready")
_STREAM_TABLE = {"s_axis_qdma_h2c": "in", "m_axis_qdma_c2h": "out",
                 "m_axis_adap_tx_250mhz": "out", "s_axis_adap_rx_250mhz": "in"}
_AXIL_OUT = {"awready", "wready", "bvalid", "bresp", "arready", "rvalid", "rdata", "rresp"}


def _expected_ports(n):
    ports = []
    for entry in _AXIL_TABLE:
        name, _, rng = entry.partition("[")
        width = int(rng.split(":")[0]) + 1 if rng else 1
        ports.append((f"s_axil_{name}", "out" if name in _AXIL_OUT else "in", width))
    for prefix, d in _STREAM_TABLE.items():
        ports.append((f"{prefix}_tvalid", d, n))
        ports += [(f"{prefix}_{f}", d, w * n) for f, w in (
            ("tdata", 512), ("tkeep", 64), ("tlast", 1), ("tuser_size", 16),
            ("tuser_src", 16), ("tuser_dst", 16))]
        ports.append((f"{prefix}_tready", "out" if d == "in" else "in", n))
    ports += [("mod_rstn", "in", 16), ("mod_rst_done", "out", 16), ("axil_aclk", "in", 1),
              ("ref_clk_100mhz", "in", 1), ("axis_aclk", "in", 1)]
    return ports


def test_port_table_is_what_the_test_transcribed():
    text = PORT_TABLE_DOC.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `s_axil_*`"))
    cells = [c.strip() for c in row.split("|")[2].split(",")]
    assert cells == list(_AXIL_TABLE)
    for prefix in _STREAM_TABLE:
        assert f"`{prefix}_*`" in text
    assert "tuser_size[16], tuser_src[16], tuser_dst[16]" in text
    assert "mod_rstn[15:0] in, mod_rst_done[15:0] out" in text
    for clock in ("axil_aclk", "axis_aclk", "ref_clk_100mhz"):
        assert clock in text


def _verilog_ports(text, module):
    """``[(name, dir, width)]`` of ``module`` in yosys-written Verilog."""
    body = text[text.index(f"module {module}("):]
    body = body[:body.index("endmodule")]
    ports = []
    for d, rng, name in re.findall(r"^\s*(input|output)\s+(?:\[(\d+):0\]\s+)?(\w+);", body,
                                   re.M):
        ports.append((name, "in" if d == "input" else "out", int(rng) + 1 if rng else 1))
    return ports


@pytest.fixture(scope="module")
def plugin_dirs(tmp_path_factory, generated_plugin):
    out = {}
    for n in (1, 2):
        d = tmp_path_factory.mktemp(f"opennic{n}")
        out[n] = (d, write_opennic_plugin(d, PluginParams(num_intf=n, codecs=["sign"])))
    # with generator lanes (their TX controllers keep a constant idle timeout), TX only
    d = tmp_path_factory.mktemp("opennic_gen")
    out["gen"] = (d, write_opennic_plugin(d, PluginParams(host_bw=200, codecs=["sign"])))
    # and with the loopback RX lanes and checkers: the plugin the co-simulation runs
    out["loop"] = generated_plugin(LOOPBACK_PLUGIN)
    return out


@pytest.mark.parametrize("n", [1, 2])
def test_module_has_exactly_the_box_250mhz_plugin_ports(plugin_dirs, n):
    d, _ = plugin_dirs[n]
    text = (d / "squeezenic_250mhz.v").read_text()
    assert sorted(_verilog_ports(text, "squeezenic_250mhz")) == sorted(_expected_ports(n))
    assert sorted(opennic_ports(n)) == sorted(_expected_ports(n))


def test_plugin_directory_has_every_file_and_a_manifest(plugin_dirs):
    d, manifest = plugin_dirs[2]
    for rel in PLUGIN_FILES:
        assert (d / rel).is_file(), rel
    on_disk = json.loads((d / "manifest.json").read_text())
    assert on_disk == manifest
    assert on_disk["params"]["num_intf"] == 2 and on_disk["params"]["codecs"] == [5]
    assert on_disk["codecs"] == [{"id": 5, "name": "sign"}]
    assert on_disk["opennic"]["NUM_CMAC_PORT"] == 2
    import hashlib
    for rel, info in on_disk["files"].items():
        assert hashlib.sha256((d / rel).read_bytes()).hexdigest() == info["sha256"]
    regs = json.loads((d / "registers.json").read_text())
    rm = plugin_register_map(PluginParams(num_intf=2, codecs=["sign"]))
    assert [r["name"] for r in regs["registers"]] == [r.name for r in rm]
    header = (d / "squeezenic_regs.h").read_text()
    for r in rm:
        assert re.search(rf"#define SQZ_{r.name.upper()}\s+0x0*{r.offset:x}u?\b", header,
                         re.I), r.name
    assert (d / "build_box_250mhz.tcl").read_text().strip().endswith("squeezenic_250mhz.v")
    assert "$fatal" in (d / "box_250mhz/user_plugin_250mhz_inst.vh").read_text()


# A stand-in for OpenNIC's box_250mhz: its parameters and ports, and the two includes.
_BOX_SHIM = """
`timescale 1ns/1ps
module box_250mhz #(
  parameter int MIN_PKT_LEN = 64, parameter int MAX_PKT_LEN = 1518,
  parameter int USE_PHYS_FUNC = 1, parameter int NUM_PHYS_FUNC = {n},
  parameter int NUM_QDMA = 1, parameter int NUM_CMAC_PORT = {n}
) (
{ports},
  input box_rstn, output box_rst_done
);
  assign box_rst_done = box_rstn;
  `include "box_250mhz_address_map_inst.vh"
  `include "user_plugin_250mhz_inst.vh"
endmodule

module tb;
  box_250mhz #(.NUM_PHYS_FUNC({pf}), .NUM_CMAC_PORT({cp})) dut ();
  initial begin #1 $display("ELABORATED"); $finish; end
endmodule
"""


def _shim(n, pf, cp):
    lines = [f"  {'input' if d == 'in' else 'output'} [{w - 1}:0] {name}"
             for name, d, w in _expected_ports(n)]
    return _BOX_SHIM.format(n=n, pf=pf, cp=cp, ports=",\n".join(lines))


def _need(tool):
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


@pytest.mark.parametrize("n", [1, 2])
def test_icarus_compiles_the_plugin_inside_a_box(plugin_dirs, tmp_path, n):
    _need("iverilog")
    d, _ = plugin_dirs[n]
    for pf, expect_ok in ((n, True), (3 - n, False)):
        shim = tmp_path / f"box_{pf}.sv"
        shim.write_text(_shim(n, pf, pf))
        vvp = tmp_path / f"box_{pf}.vvp"
        r = subprocess.run(["iverilog", "-g2012", "-D__au280__", "-I", str(d / "box_250mhz"),
                            "-s", "tb", "-o", str(vvp), str(shim),
                            str(d / "squeezenic_250mhz.v")], capture_output=True, text=True)
        if not expect_ok and r.returncode:
            continue     # widths already disagree at compile time: also a clear failure
        assert r.returncode == 0, r.stderr[-2000:]
        # an `always @*` that reads nothing never runs: its bits would stay X
        assert "no sensitivities" not in r.stderr, r.stderr[-2000:]
        run = subprocess.run(["vvp", "-n", str(vvp)], capture_output=True, text=True)
        if expect_ok:
            assert "ELABORATED" in run.stdout and "FATAL" not in run.stdout.upper()
        else:
            assert "built for NUM_PHYS_FUNC" in run.stdout + run.stderr


def test_generator_lanes_are_one_module_instantiated_n_times(plugin_dirs):
    """The generator lanes' Verilog is written once; the manifest says which lanes carry
    which codecs."""
    for key, n, rx, gen in (("gen", 2, 0, ["fp16"]), ("loop", 2, 2, ["sign"])):
        d, manifest = plugin_dirs[key]
        text = (d / "squeezenic_250mhz.v").read_text()
        assert text.count(f"module {GEN_LANE_MODULE}(") == 1
        assert len(re.findall(rf"^\s*{GEN_LANE_MODULE} \S+ \(", text, re.M)) == n
        lanes = manifest["lanes"]
        assert lanes["host"] == {**lanes["host"], "count": 1, "tx_codecs": ["sign"],
                                 "rx_codecs": ["sign"]}
        assert lanes["generator"]["count"] == n and lanes["generator"]["codecs"] == gen
        assert lanes["generator"]["module"] == GEN_LANE_MODULE
        assert lanes["loopback"]["count"] == rx
        assert manifest["params"]["gen_codecs"] == gen and manifest["params"]["rx_lanes"] == rx
    assert "squeezenic_gen_lane" not in (plugin_dirs[1][0] / "squeezenic_250mhz.v").read_text()


def test_wide_enables_and_resets_carry_max_fanout_into_the_verilog(plugin_dirs):
    """The nets of thousands of loads (each domain's reset, the pipelines' enables) reach
    the plugin's Verilog with the ``max_fanout`` attribute that Vivado honours."""
    text = (plugin_dirs[1][0] / "squeezenic_250mhz.v").read_text()
    marked = re.findall(r"\(\* max_fanout = 32'd(\d+) \*\)\s*(?:reg|wire)\s*(?:\[[^]]*\]\s*)?"
                        r"(\S+);", text)
    names = {name.strip("\\") for _, name in marked}
    assert {int(v) for v, _ in marked} == {MAX_FANOUT}
    assert {"in_reset", "sync_rst"} <= names
    assert any(name.endswith("enable") for name in names)


@pytest.mark.parametrize("n", [1, 2, "gen", "loop"])
def test_verilator_lints_both_modules(plugin_dirs, n):
    _need("verilator")
    d, _ = plugin_dirs[n]
    for module in ("squeezenic_250mhz", "squeezenic_322mhz"):
        r = subprocess.run(["verilator", "--lint-only", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE",
                            "--top-module", module, str(d / f"{module}.v")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.parametrize("argv,message", [
    (["--host-bw", "150"], "--host-bw must be a multiple of 100"),
    (["--codecs", "nope"], "--codecs: codec 'nope' is not a known codec"),
    (["--mtu", "x"], "--mtu: expected an integer"),
    (["--mtu", "40"], "--mtu must be"),
    (["--num-intf", "3"], "--num-intf must be"),
    (["--target", "vck"], "--target must be one of"),
    (["--port", "70000"], "--port must be"),
    (["--host-bw", "400", "--gen-codecs", "nope"], "--gen-codecs: codec 'nope'"),
    (["--host-bw", "400", "--gen-codecs", "sign:3"], "--gen-codecs: codec 'sign' takes no"),
    (["--target", "u280", "--loopback"], "--gen-codecs, --loopback and --reduce apply to"),
    (["--target", "u280", "--reduce", "sign"], "--gen-codecs, --loopback and --reduce apply to"),
    (["--reduce", "raw"], "--reduce: the reduce lane reduces fixed, qsgd, sign, not raw"),
    # the u280 target checks its options as the plugin's build does
    (["--target", "u280", "--port", "0"], "--port must be"),
    (["--target", "u280", "--idle-timeout", "-1"], "--idle-timeout must be"),
    (["--target", "u280", "--host-bw", "0x"], "--host-bw: expected an integer"),
    (["--target", "u280", "--codecs", ","], "--codecs: empty list"),
])
def test_generate_bad_options_fail_with_one_line(capsys, tmp_path, argv, message):
    assert main(["generate", "-o", str(tmp_path / "x"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "x").exists()


def test_generate_prints_what_it_wrote(capsys, tmp_path):
    assert main(["generate", "-o", str(tmp_path / "p"), "--codecs", "raw",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "opennic"
    files = {Path(f["file"]).relative_to(tmp_path / "p").as_posix() for f in out["files"]}
    assert files == set(PLUGIN_FILES)
    assert out["manifest"]["params"]["codecs"] == [0]
    assert out["manifest"]["opennic"]["build"] == opennic.build_command(tmp_path / "p",
                                                                        PluginParams())


#: The options OpenNIC's script/build.tcl reads after -tclargs (its build_options and
#: design_params); it skips any other with a message, so a misspelt one would go unnoticed.
BUILD_TCL_OPTIONS = {"-board_repo", "-board", "-tag", "-overwrite", "-rebuild", "-jobs",
                     "-synth_ip", "-impl", "-post_impl", "-user_plugin", "-bitstream_userid",
                     "-bitstream_usr_access", "-build_timestamp", "-min_pkt_len",
                     "-max_pkt_len", "-use_phys_func", "-num_phys_func", "-num_queue",
                     "-num_cmac_port"}


@pytest.mark.parametrize("n", [1, 2])
def test_generate_prints_the_vivado_command_that_builds_the_plugin(capsys, tmp_path,
                                                                   monkeypatch, n):
    """The printed command runs as printed: Vivado in batch mode sourcing build.tcl, its
    options after -tclargs in pairs, each one build.tcl reads, the interface counts the
    plugin's."""
    def fake(out_dir, params, progress=None):
        out_dir.mkdir(parents=True)
        (out_dir / "manifest.json").write_text("{}")
        return {"files": {}, "registers": {"count": 3}, "lanes": opennic.lane_summary(params),
                "opennic": {"build": opennic.build_command(out_dir, params)}}

    monkeypatch.setattr(opennic, "write_opennic_plugin", fake)
    assert main(["generate", "-o", str(tmp_path / "p"), "--num-intf", str(n)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(k for k, line in enumerate(lines) if "open-nic-shell" in line)
    assert "script/" in lines[at]
    words = shlex.split(lines[at + 1])
    assert words[:6] == ["vivado", "-mode", "batch", "-source", "build.tcl", "-tclargs"]
    args = dict(zip(words[6::2], words[7::2], strict=True))
    assert set(args) <= BUILD_TCL_OPTIONS
    assert args["-board"] == "au280" and args["-impl"] == "1"
    assert args["-user_plugin"] == str((tmp_path / "p").resolve())
    assert args["-num_phys_func"] == args["-num_cmac_port"] == str(n)


def test_generate_says_which_lanes_carry_which_codecs(capsys, tmp_path, monkeypatch):
    """The table output names the host lanes' codecs and the generator lanes' codec."""
    seen = {}

    def fake(out_dir, params, progress=None):
        seen["params"] = params
        out_dir.mkdir(parents=True)
        for rel in PLUGIN_FILES:
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_text("x")
        return {"files": {rel: {"bytes": 1, "what": "w"} for rel in PLUGIN_FILES
                          if rel != "manifest.json"},
                "registers": {"count": 3}, "opennic": {"build": "build.tcl"},
                "lanes": opennic.lane_summary(params)}

    monkeypatch.setattr(opennic, "write_opennic_plugin", fake)
    assert main(["generate", "-o", str(tmp_path / "p"), "--host-bw", "6400"]) == 0
    out = capsys.readouterr().out
    assert "host lanes (1 TX + 1 RX): raw, fp16, bf16, fixed, qsgd, sign, natural" in out
    assert "generator lanes (64 x generator → TX lane, module squeezenic_gen_lane): sign" in out
    assert "loopback RX lanes with checkers: 0 (TX only" in out
    assert seen["params"].gen_codecs == ("sign",) and not seen["params"].loopback
    assert main(["generate", "-o", str(tmp_path / "q"), "--host-bw", "800", "--loopback",
                 "--gen-codecs", "fixed:8,sign"]) == 0
    out = capsys.readouterr().out
    assert "): fixed:8, sign" in out and "loopback RX lanes with checkers: 8 (" in out
    assert seen["params"].rx_lanes == 8


def test_registers_option_prints_the_map(capsys):
    assert main(["generate", "--registers", "--host-bw", "200", "--format", "json"]) == 0
    regs = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in regs["registers"]]
    assert "gen_start" in names and "lane1_tx_wire_frames" in names
    assert not any("_chk_" in n for n in names)        # TX only by default
    assert main(["generate", "--registers", "--host-bw", "200", "--loopback",
                 "--format", "json"]) == 0
    names = [r["name"] for r in json.loads(capsys.readouterr().out)["registers"]]
    assert "lane1_chk_crc" in names and "lane2_chk_crc" not in names


def test_generate_u280_target_lists_the_plan(capsys, tmp_path, monkeypatch):
    """The CLI wiring of --target u280 (the plan itself: tests/test_u280.py)."""
    import squeezenic_hw.flows.u280 as u280

    calls = {}

    def fake_plan(out_dir, **kw):
        calls.update(kw)
        out_dir.mkdir(parents=True)
        paths = [out_dir / "top.v", out_dir / "build_top.sh"]
        for p in paths:
            p.write_text("x")
        return paths

    monkeypatch.setattr(u280, "write_u280_plan", fake_plan)
    assert main(["generate", "--target", "u280", "-o", str(tmp_path / "u"), "--codecs",
                 "sign", "--host-bw", "800"]) == 0
    out = capsys.readouterr().out
    assert "sh build_top.sh" in out and "top.v" in out
    assert calls["host_bw"] == 800 and calls["codecs"] == ["sign"]
    assert main(["generate", "--target", "u280", "--num-intf", "2"]) == 2


@pytest.mark.slow
def test_generate_6400_within_three_minutes(tmp_path):
    """``generate --host-bw 6400`` writes its 64 generator lanes as one module in
    ≤ 3 minutes (2 min 2 s measured on the 2-core machine under a load of 7)."""
    import time

    start = time.perf_counter()
    assert main(["generate", "-o", str(tmp_path / "p"), "--host-bw", "6400"]) == 0
    elapsed = time.perf_counter() - start
    text = (tmp_path / "p" / "squeezenic_250mhz.v").read_text()
    assert len(re.findall(rf"^\s*{GEN_LANE_MODULE} \S+ \(", text, re.M)) == 64
    assert elapsed <= 180, elapsed


def test_lane_summary_says_what_narrow_generator_lanes_hold():
    """A fixed:8 build's generators always send fixed:8, nearest, a power-of-two scale;
    the manifest's ``held`` and the printed summary say so; a wide set holds nothing."""
    from squeezenic_hw.cli.generate_cmd import _lanes_text

    fixed = opennic.lane_summary(PluginParams(host_bw=400))
    assert fixed["generator"]["held"] == {"codec": 3, "param": 8, "deterministic": True,
                                          "pow2_scale": True}
    text = _lanes_text(fixed)
    assert "always send fixed:8, rounded to nearest" in text and "power of two" in text
    assert "gen_scale say" in text
    sign = _lanes_text(opennic.lane_summary(PluginParams(host_bw=3200)))
    assert "always send sign (whatever gen_codec says)" in sign
    wide = opennic.lane_summary(PluginParams(host_bw=200))
    assert wide["generator"]["held"] is None and "narrow" not in _lanes_text(wide)
