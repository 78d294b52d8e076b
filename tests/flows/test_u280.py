# amaranth: UnusedElaboratable=no
"""Alveo U280 platform and the Vivado build plan of the on-chip loopback (no Vivado needed).

The pins are checked against values hard-coded here and against ``u280_pins.json``, a
transcription of the OpenNIC shell's board files (github.com/Xilinx/open-nic-shell,
``board_files/Xilinx/au280/production/1.1/part0_pins.xml`` and ``constr/au280/pins.xdc``).
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from amaranth.build import DiffPairs, Pins, Subsignal
from amaranth.sim import Simulator

from squeezenic_hw.flows.u280 import DESIGN_NAME, debug_probes, write_u280_plan
from squeezenic_hw.gateware.u280 import MMCM_PARAMS, U280Loopback
from squeezenic_hw.platforms.u280 import AlveoU280Platform
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.spec.generator import GeneratorConfig

from support.unused import rejected

#: The U280 pins transcribed from AMD's board file and the OpenNIC shell's pins.xdc.
PIN_TABLE = json.loads((Path(__file__).resolve().parent / "u280_pins.json").read_text())

# (resource, number) -> {subsignal path: pins}; "p"/"n" for differential pairs.
EXPECTED = {
    ("sysclk", 0): {"p": ["BJ43"], "n": ["BJ44"]},
    ("sysclk", 1): {"p": ["BH6"], "n": ["BJ6"]},
    ("sysclk", 3): {"p": ["G31"], "n": ["F31"]},
    ("pcie_refclk", 0): {"p": ["AR15"], "n": ["AR14"]},
    ("pcie_perst", 0): {"": ["BH26"]},
    ("hbm_cattrip", 0): {"": ["D32"]},
    ("qsfp_refclk", 0): {"p": ["T42"], "n": ["T43"]},
    ("qsfp_refclk", 1): {"p": ["P42"], "n": ["P43"]},
    ("qsfp_refclk_161", 0): {"p": ["R40"], "n": ["R41"]},
    ("qsfp_refclk_161", 1): {"p": ["M42"], "n": ["M43"]},
    ("qsfp", 0): {"tx.p": "L48 L44 K46 J48".split(), "tx.n": "L49 L45 K47 J49".split(),
                  "rx.p": "L53 K51 J53 H51".split(), "rx.n": "L54 K52 J54 H52".split()},
    ("qsfp", 1): {"tx.p": "G48 E48 C48 A49".split(), "tx.n": "G49 E49 C49 A50".split(),
                  "rx.p": "G53 F51 E53 D51".split(), "rx.n": "G54 F52 E54 D52".split()},
    ("satellite_gpio", 0): {"": "K28 J29 K29 J31".split()},
    ("satellite_uart", 0): {"tx": ["D29"], "rx": ["E28"]},
    ("uart", 0): {"tx": ["B33"], "rx": ["A28"]},
    ("cpu_reset", 0): {"": ["L30"]},
}


def _walk(ios, path=""):
    """{subsignal path: pins} of a resource's I/O tree, and {subsignal path: attrs}."""
    pins, attrs = {}, {}
    for io in ios:
        if isinstance(io, Subsignal):
            sub_path = f"{path}.{io.name}" if path else io.name
            p, a = _walk(io.ios, sub_path)
            pins.update(p)
            attrs.update(a)
            attrs[sub_path] = dict(io.attrs)
        elif isinstance(io, DiffPairs):
            pins[f"{path}.p" if path else "p"] = list(io.p.names)
            pins[f"{path}.n" if path else "n"] = list(io.n.names)
        elif isinstance(io, Pins):
            pins[path] = list(io.names)
    return pins, attrs


def _resource(platform, name, number):
    res = platform.lookup(name, number)
    pins, attrs = _walk(res.ios)
    return res, pins, attrs


# ---- the platform ---------------------------------------------------------------------

def test_part_family_and_toolchain():
    platform = AlveoU280Platform()
    assert platform.family == "ultrascaleplus"
    assert platform.toolchain == "Vivado"
    assert platform._part == "xcu280-fsvh2892-2L-e"
    assert platform.default_clk == "sysclk"
    assert platform.default_clk_frequency == 100e6


@pytest.mark.parametrize("key", list(EXPECTED))
def test_resource_pins(key):
    res, pins, attrs = _resource(AlveoU280Platform(), *key)
    assert pins == EXPECTED[key]


def test_io_standards_and_clocks():
    platform = AlveoU280Platform()
    for number in (0, 1, 3):
        res, _, _ = _resource(platform, "sysclk", number)
        assert res.attrs["IOSTANDARD"] == "LVDS" and res.attrs["DQS_BIAS"] == "TRUE"
        assert res.clock.frequency == 100e6
    res, _, _ = _resource(platform, "hbm_cattrip", 0)
    assert res.attrs["IOSTANDARD"] == "LVCMOS18" and res.attrs["PULLDOWN"] == "TRUE"
    assert res.ios[0].dir == "o"
    assert _resource(platform, "pcie_perst", 0)[0].ios[0].invert      # PERST# is active low
    for name, freq in [("pcie_refclk", 100e6), ("qsfp_refclk", 156.25e6),
                       ("qsfp_refclk_161", 161.1328125e6)]:
        res, _, _ = _resource(platform, name, 0)
        assert res.clock.frequency == freq
        assert "IOSTANDARD" not in res.attrs                       # GT clock pins
    for name in ("qsfp", "pcie"):
        res, _, attrs = _resource(platform, name, 0)
        assert "IOSTANDARD" not in res.attrs
        assert all("IOSTANDARD" not in a for a in attrs.values())  # GT lanes


def test_pcie_lanes():
    _, pins, _ = _resource(AlveoU280Platform(), "pcie", 0)
    assert all(len(v) == 16 for v in pins.values())
    assert pins["rx.p"][0] == "AL2" and pins["tx.n"][15] == "BC6"


def test_pins_match_the_board_file():
    board = PIN_TABLE["board_file"]
    platform = AlveoU280Platform()
    expect = {
        ("sysclk", 0): {"p": ["sysclk0_p"], "n": ["sysclk0_n"]},
        ("sysclk", 1): {"p": ["sysclk1_p"], "n": ["sysclk1_n"]},
        ("sysclk", 3): {"p": ["sysclk3_p"], "n": ["sysclk3_n"]},
        ("pcie_refclk", 0): {"p": ["pcie_mgt_clkp"], "n": ["pcie_mgt_clkn"]},
        ("pcie_perst", 0): {"": ["pcie_perstn_rst"]},
        ("hbm_cattrip", 0): {"": ["HBM_CATTRIP"]},
        ("uart", 0): {"tx": ["USB_UART_TX"], "rx": ["USB_UART_RX"]},
        ("cpu_reset", 0): {"": ["CPU_RESET"]},
    }
    for q in (0, 1):
        expect[("qsfp_refclk", q)] = {"p": [f"qsfp{q}_156mhz_p"], "n": [f"qsfp{q}_156mhz_n"]}
        expect[("qsfp_refclk_161", q)] = {"p": [f"qsfp{q}_161mhz_p"],
                                          "n": [f"qsfp{q}_161mhz_n"]}
        expect[("qsfp", q)] = {f"{d}.{pol}": [f"qsfp{q}_{d.upper()}_{pol.upper()}{i}"
                                              for i in range(4)]
                               for d in ("tx", "rx") for pol in ("p", "n")}
    expect[("pcie", 0)] = {f"{d}.{pol}": [f"pcie_{d}{i}_{pol}" for i in range(16)]
                           for d in ("tx", "rx") for pol in ("p", "n")}
    for key, names in expect.items():
        _, pins, _ = _resource(platform, *key)
        assert pins == {path: [board[n] for n in ns] for path, ns in names.items()}, key


def test_pins_match_the_opennic_xdc():
    loc = PIN_TABLE["opennic_xdc"]
    platform = AlveoU280Platform()
    assert _resource(platform, "hbm_cattrip", 0)[1][""] == [loc["hbm_cattrip"]]
    assert _resource(platform, "pcie_perst", 0)[1][""] == [loc["pcie_rstn"]]
    assert _resource(platform, "pcie_refclk", 0)[1] == {"p": [loc["pcie_refclk_p"]],
                                                        "n": [loc["pcie_refclk_n"]]}
    for q in (0, 1):
        assert _resource(platform, "qsfp_refclk", q)[1] == {
            "p": [loc[f"qsfp_refclk_p[{q}]"]], "n": [loc[f"qsfp_refclk_n[{q}]"]]}
    assert _resource(platform, "satellite_gpio", 0)[1][""] == [
        loc[f"satellite_gpio[{i}]"] for i in range(4)]
    # OpenNIC pulls hbm_cattrip down; so must the platform
    cattrip, _, _ = _resource(platform, "hbm_cattrip", 0)
    assert PIN_TABLE["opennic_xdc_hbm_cattrip_pulldown"] == (
        dict(cattrip.attrs).get("PULLDOWN") == "TRUE")


# ---- the loopback top and its build plan ------------------------------------------------

def test_mmcm_makes_250_mhz_within_the_vco_range():
    p = MMCM_PARAMS
    f_in = 1e3 / p["CLKIN1_PERIOD"]                           # MHz
    vco = f_in * p["CLKFBOUT_MULT_F"] / p["DIVCLK_DIVIDE"]
    assert 800 <= vco <= 1600                                  # UltraScale+ MMCM VCO
    assert vco / p["CLKOUT0_DIVIDE_F"] == 250.0


# A short run (6 frames of 64 elements per lane, at one beat per cycle) so that the
# Verilog can be simulated to its end; the wire frames close after 32 idle cycles.
FAST = GeneratorConfig(codec=5, elements=64, value_seed=7, seed=3, aux_bits=0xBF800000,
                       rate_bytes_per_cycle=64.0)
FAST_FRAMES = 6


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    out = tmp_path_factory.mktemp("u280_plan")
    paths = write_u280_plan(out, host_bw=200, codecs=["sign"], config=FAST,
                            n_frames=FAST_FRAMES, idle_timeout=32)
    return out, paths


def _read(out, suffix):
    return (out / f"{DESIGN_NAME}{suffix}").read_text()


def test_plan_writes_the_files(plan):
    out, paths = plan
    names = {p.name for p in paths}
    for suffix in (".v", ".tcl", ".xdc", "_timing.xdc", "_ila.tcl"):
        assert f"{DESIGN_NAME}{suffix}" in names
    assert f"build_{DESIGN_NAME}.sh" in names
    assert all(p.is_file() and p.parent == out for p in paths)


def test_plan_tcl(plan):
    out, _ = plan
    tcl = _read(out, ".tcl")
    assert "-part xcu280-fsvh2892-2L-e" in tcl
    assert f"read_xdc {DESIGN_NAME}.xdc" in tcl
    assert f'read_xdc "{DESIGN_NAME}_timing.xdc"' in tcl
    assert f"add_files {DESIGN_NAME}.v" in tcl
    # the 250 MHz clock is checked after synthesis, then the ILA goes in
    assert "get_clocks clk_250mhz" in tcl and "4.000" in tcl
    assert tcl.index("synth_design") < tcl.index(f"source {DESIGN_NAME}_ila.tcl") \
        < tcl.index("opt_design")
    assert f"write_debug_probes -force {DESIGN_NAME}.ltx" in tcl
    assert "-source squeezenic_u280_loopback.tcl" in (out / f"build_{DESIGN_NAME}.sh").read_text()


def test_plan_xdc(plan):
    out, _ = plan
    xdc = _read(out, ".xdc")
    for pin, port in [("BJ43", "sysclk_0__p"), ("BJ44", "sysclk_0__n"),
                      ("D32", "hbm_cattrip_0__io")]:
        assert f'set_property LOC {pin} [get_ports "{port}"]' in xdc
    assert 'set_property IOSTANDARD "LVDS" [get_ports "sysclk_0__p"]' in xdc
    assert 'set_property PULLDOWN "TRUE" [get_ports "hbm_cattrip_0__io"]' in xdc
    assert re.search(r"create_clock .*-period 10\.0 .*sysclk_0__p", xdc)
    assert "CONFIG_VOLTAGE 1.8" in xdc and "CONFIG_MODE SPIx4" in xdc
    timing = _read(out, "_timing.xdc")
    assert "create_generated_clock -name clk_250mhz [get_pins mmcm/CLKOUT0]" in timing
    assert "4.000 ns" in timing


def test_plan_verilog(plan):
    out, _ = plan
    v = _read(out, ".v")
    assert re.search(r"MMCME4_BASE #\(", v)
    for name, value in [("CLKIN1_PERIOD", "10.0"), ("CLKFBOUT_MULT_F", "10.0"),
                        ("CLKOUT0_DIVIDE_F", "4.0")]:
        assert f".{name}({value})" in v
    assert re.search(r"\) mmcm \(", v) and "BUFG bufg" in v and "IBUFDS" in v
    for k in range(2):
        for net, width in [(f"lane{k}_ok", 1), (f"lane{k}_frames", 64), (f"lane{k}_crc", 32)]:
            decl = f"reg [{width - 1}:0] {net}" if width > 1 else f"reg {net}"
            assert re.search(r'\(\* mark_debug = "true" \*\)\s*' + re.escape(decl), v), net
    # every net of the ILA script is a mark_debug register of the top module
    ila = _read(out, "_ila.tcl")
    assert ila.count("connect_debug_port u_ila_0/probe") == len(debug_probes(2)) == 7
    assert "connect_debug_port u_ila_0/clk [get_nets clk]" in ila
    top = v[:v.index("endmodule")]
    assert re.search(r"\bwire clk;", top)


IVERILOG_STUBS = """
// Behavioural stand-ins for the Xilinx primitives: the MMCM makes CLKOUT0 from its
// parameters and reports LOCKED after 50 ns.
`timescale 1ns/1ps
module MMCME4_BASE #(
  parameter BANDWIDTH = "OPTIMIZED", parameter real CLKFBOUT_MULT_F = 5.0,
  parameter real CLKFBOUT_PHASE = 0.0, parameter real CLKIN1_PERIOD = 0.0,
  parameter real CLKOUT0_DIVIDE_F = 1.0, parameter real CLKOUT0_DUTY_CYCLE = 0.5,
  parameter real CLKOUT0_PHASE = 0.0, parameter integer DIVCLK_DIVIDE = 1,
  parameter real REF_JITTER1 = 0.0, parameter STARTUP_WAIT = "FALSE"
) (input CLKIN1, input CLKFBIN, input RST, input PWRDWN,
   output reg CLKOUT0 = 1'b0, output CLKFBOUT, output reg LOCKED = 1'b0);
  localparam real HALF = CLKIN1_PERIOD * DIVCLK_DIVIDE * CLKOUT0_DIVIDE_F / CLKFBOUT_MULT_F / 2;
  assign CLKFBOUT = CLKIN1;
  always #(HALF) CLKOUT0 = ~CLKOUT0;
  initial #50 LOCKED = 1'b1;
endmodule
module BUFG (input I, output O); assign O = I; endmodule
module IBUFDS (input I, input IB, output O); assign O = I; endmodule
module OBUFT (input I, input T, output O); assign O = T ? 1'bz : I; endmodule
module FDPE #(parameter [0:0] INIT = 1'b1)
  (input C, input CE, input D, input PRE, output reg Q = INIT);
  always @(posedge C or posedge PRE) if (PRE) Q <= 1'b1; else if (CE) Q <= D;
endmodule

// The board: 100 MHz on sysclk 0; stop once every lane's checker has its frames.
module u280_tb;
  reg clk = 0;
  always #5 clk = ~clk;
  wire cattrip;
  squeezenic_u280_loopback dut(.sysclk_0__p(clk), .sysclk_0__n(~clk),
                               .hbm_cattrip_0__io(cattrip));
  initial begin
    wait (dut.lane0_frames == `FRAMES0 && dut.lane1_frames == `FRAMES1);
    #20;
    $display("RESULT %b %b %0d %0d %0d %0d", cattrip, dut.all_ok, dut.lane0_frames,
             dut.lane0_crc, dut.lane1_frames, dut.lane1_crc);
    $finish;
  end
  initial begin #20000; $display("TIMEOUT"); $finish; end
endmodule
"""

# Yosys' Verilog starts every `always @*` block through a dummy register initialised in
# its declaration; Icarus 11 delivers no event for that at time 0, so a block whose
# inputs never change would stay X. Setting the dummy registers at 1 ps starts them all.
_DUMP_MODULE = re.compile(r"^(  reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+) +)= 0;",
                          re.M)


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="iverilog is not installed")
def test_plan_verilog_runs_in_iverilog(plan, tmp_path):
    """The Verilog of the plan, with stub primitives: MMCM → reset → run → checkers agree."""
    out, _ = plan
    expected = [lane["checker"] for lane in array_reference(2, FAST, FAST_FRAMES,
                                                            codecs=["sign"])]
    stubs = tmp_path / "xilinx_stubs.v"
    stubs.write_text(IVERILOG_STUBS)
    design, n = _DUMP_MODULE.subn(lambda m: f"{m.group(1)}= 0;\n  initial #0.001 {m.group(2)} = 1;",
                                  (out / f"{DESIGN_NAME}.v").read_text())
    assert n > 0
    (tmp_path / "design.v").write_text(design)
    compiled = subprocess.run(
        ["iverilog", "-g2012", "-s", "u280_tb", f"-DFRAMES0={expected[0]['frames']}",
         f"-DFRAMES1={expected[1]['frames']}", "-o", str(tmp_path / "a.out"), str(stubs),
         str(tmp_path / "design.v")], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    run = subprocess.run(["vvp", "-n", str(tmp_path / "a.out")], capture_output=True, text=True,
                         timeout=120)
    line = next(x for x in run.stdout.splitlines() if x.startswith(("RESULT", "TIMEOUT")))
    assert line == "RESULT 0 1 {} {} {} {}".format(
        expected[0]["frames"], expected[0]["crc"], expected[1]["frames"], expected[1]["crc"])


def test_top_in_simulation_matches_the_reference():
    """Without a platform the top is simulated as is: constants, start, checkers, debug regs."""
    dut = U280Loopback(200, config=FAST, n_frames=FAST_FRAMES, idle_timeout=32)
    expected = [lane["checker"] for lane in array_reference(2, FAST, FAST_FRAMES,
                                                            codecs=["sign"])]
    assert expected[0]["crc"] != expected[1]["crc"]       # −1.0 for bit 1: lanes differ
    got = {}

    async def bench(ctx):
        for _ in range(1500):
            await ctx.tick()
            if all(ctx.get(dut.lane_frames[k]) == expected[k]["frames"] for k in range(2)):
                break
        for _ in range(4):
            await ctx.tick()
        got["lanes"] = [(ctx.get(dut.lane_ok[k]), ctx.get(dut.lane_frames[k]),
                         ctx.get(dut.lane_crc[k])) for k in range(2)]
        got["all_ok"] = ctx.get(dut.all_ok)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert got["lanes"] == [(1, e["frames"], e["crc"]) for e in expected]
    assert got["all_ok"] == 1


# ---- parameters -------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,name", [
    (dict(host_bw=150), "host_bw"),
    (dict(host_bw=0), "host_bw"),
    (dict(host_bw=400.0), "host_bw"),
    (dict(mtu=10), "mtu"),
    (dict(port=70000), "port"),
    (dict(codecs=["fp16"]), "codecs"),
    (dict(codecs=["nope"]), "codecs"),
    (dict(max_host_elements=100), "max_host_elements"),
    (dict(config="sign"), "config"),
    (dict(n_frames=-1), "n_frames"),
    (dict(idle_timeout=0), "idle_timeout"),
])
def test_bad_parameters(kwargs, name):
    rejected(U280Loopback, **kwargs, match=name)


def test_bad_host_bw_writes_nothing(tmp_path):
    rejected(write_u280_plan, tmp_path / "plan", host_bw=250, match="host_bw")
    assert not (tmp_path / "plan").exists()
