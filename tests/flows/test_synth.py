"""Tests of :mod:`squeezenic_hw.flows.synth`: the stat/ltp parsers and one real synthesis.

The fixtures are trimmed output of YoWASP Yosys 0.70 (``synth_xilinx -family
xcup``). The end-to-end tests call Yosys; its first call on a machine compiles
the WebAssembly module (about 30 s on both cores; one process at a time, see
``test_prepare_one_process_at_a_time``), later calls take a few seconds each.
"""

import subprocess
import sys

import pytest
from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.flows.synth import (
    U280_CLB,
    YOSYS_ENV,
    SynthesisError,
    classify_cells,
    count_loops,
    estimated_clbs,
    parse_ltp,
    parse_stat_json,
    parse_yosys_version,
    synthesize,
    utilization,
    yosys_backend,
)

# `tee -o stat.json stat -json` of an 8x8 multiply-add with IBUF/OBUF (trimmed: the
# counters other than the cells of the "design" entry are left out), after a log line.
STAT_JSON = r"""
5. Printing statistics.
{
   "creator": "Yosys 0.70 (git sha1 28ba3cb92, Release, Clang /workspace/YoWASP/yosys/wasi-sdk-33.0-x86_64-linux/share/cmake/../..//bin/clang++ 22.1.0)",
   "invocation": "stat -json ",
   "modules": {
      "\\top": {
         "num_wires":         90,
         "num_cells":         111,
         "num_submodules":       0,
         "num_cells_by_type": {
            "BUFG": 1,
            "CARRY4": 4,
            "FDRE": 16,
            "IBUF": 19,
            "INV": 1,
            "LUT2": 11,
            "LUT3": 9,
            "LUT4": 11,
            "LUT5": 25,
            "LUT6": 6,
            "OBUF": 8
         }
      }
   },
      "design": {
         "num_wires":         90,
         "num_cells":         111,
         "num_submodules":       0,
         "num_cells_by_type": {
            "BUFG": 1,
            "CARRY4": 4,
            "FDRE": 16,
            "IBUF": 19,
            "INV": 1,
            "LUT2": 11,
            "LUT3": 9,
            "LUT4": 11,
            "LUT5": 25,
            "LUT6": 6,
            "OBUF": 8
         }
      }
}
"""  # noqa: E501 (real Yosys output)

# Log of an `ltp -noff <endpoints> %n` run (same design, out of context).
LTP_LOG = r"""
3. Executing LTP pass (find longest path).

Longest topological path in top (length=7):
    0: \b [4]
    1: $techmap22593$abc$22550$lut$aiger22549$323.A [5] (via $abc$22550$lut$aiger22549$299)
    2: $techmap22608$abc$22550$lut$aiger22549$393.A [1] (via $abc$22550$lut$aiger22549$375)
    3: $techmap22610$abc$22550$lut$aiger22549$459.A [3] (via $abc$22550$lut$aiger22549$393)
    4: $techmap22620$abc$22550$lut$aiger$o34.A [5] (via $abc$22550$lut$aiger22549$483)
    5: $techmap22621$auto$abc_ops_reintegrate.cc:694:reintegrate$22552.A [3] (via $abc$22550$lut$aiger$o34)
    6: $abc$22550$aiger$o38 (via $auto$abc_ops_reintegrate.cc:694:reintegrate$22552)
    7: $abc$22550$aiger$i64 (via $auto$maccmap.cc:240:synth$1593.genblk1.slice[1].genblk1.carry4)

End of script. Logfile hash: e91a5ad8cd, time: 4.37s, user: 4.37s, system: 0.00s
Yosys 0.70 (git sha1 28ba3cb92, Release, Clang /workspace/YoWASP/yosys/wasi-sdk-33.0-x86_64-linux/share/cmake/../..//bin/clang++ 22.1.0)
"""  # noqa: E501 (real Yosys output)

# `ltp` with nothing selected, and `ltp -noff` alone (follows paths through FDRE: loops).
LTP_EMPTY = "3. Executing LTP pass (find longest path).\n\n" \
            "Longest topological path in top (length=-1):\n\n"
LTP_LOOPS = r"""
Warning: Detected loop at $abc$22576$aiger$o58 in top
Warning: Detected loop at \c [0] in top

Longest topological path in top (length=25):
    0: \clk
"""


def test_parse_stat_json():
    cells = parse_stat_json(STAT_JSON)
    assert cells == {"BUFG": 1, "CARRY4": 4, "FDRE": 16, "IBUF": 19, "INV": 1, "LUT2": 11,
                     "LUT3": 9, "LUT4": 11, "LUT5": 25, "LUT6": 6, "OBUF": 8}


def test_parse_stat_json_without_design_entry_sums_modules():
    text = ('{"modules": {"\\\\a": {"num_cells_by_type": {"FDRE": 2}},'
            ' "\\\\b": {"num_cells_by_type": {"FDRE": 3, "LUT1": 1}}}}')
    assert parse_stat_json(text) == {"FDRE": 5, "LUT1": 1}


def test_parse_stat_json_rejects_other_text():
    with pytest.raises(ValueError, match="stat -json"):
        parse_stat_json('log line\n{"not": "stat"}\n')


def test_classify_cells():
    totals = classify_cells(parse_stat_json(STAT_JSON))
    assert totals["lut"] == 11 + 9 + 11 + 25 + 6 + 1     # INV counts as a LUT1
    assert totals["ff"] == 16
    assert totals["carry"] == 4
    assert (totals["dsp"], totals["bram"], totals["lutram"], totals["muxf"]) == (0, 0, 0, 0)
    more = classify_cells({"RAMB36E2": 2, "RAMB18E2": 3, "URAM288": 1, "DSP48E2": 4,
                           "RAM64M": 2, "RAM32X1D": 1, "SRLC32E": 5, "SRL16E": 1,
                           "MUXF7": 2, "MUXF8": 1, "FDSE": 1, "FDCE": 1, "FDPE": 1,
                           "CARRY8": 1, "LUT6_2": 1})
    assert more == {"lut": 1, "ff": 3, "carry": 1, "dsp": 4, "bram": 3.5, "uram": 1,
                    "lutram": 3, "srl": 6, "muxf": 3}


def test_parse_ltp():
    assert parse_ltp(LTP_LOG) == 7
    assert parse_ltp(LTP_EMPTY) == 0
    assert parse_ltp(LTP_LOOPS) == 25
    assert count_loops(LTP_LOOPS) == 2 and count_loops(LTP_LOG) == 0
    with pytest.raises(ValueError, match="Longest topological path"):
        parse_ltp("End of script.\n")


def test_parse_yosys_version():
    assert parse_yosys_version(LTP_LOG) == "Yosys 0.70 (git sha1 28ba3cb92)"
    assert parse_yosys_version("nothing") == "unknown"


def test_estimated_clbs():
    assert estimated_clbs(80, 16) == 10
    assert estimated_clbs(8, 161) == 11
    assert U280_CLB * 8 == 1_303_680


class Counter(wiring.Component):
    """8-bit counter with enable: 8 flip-flops, an adder between them."""
    en: In(1)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        return m


def test_synthesize_counter(tmp_path):
    result = synthesize(Counter(), workdir=tmp_path, timeout=600)
    assert result.ff == 8
    assert result.cells.get("FDRE", 0) + result.cells.get("FDSE", 0) == 8
    assert result.depth >= 1
    assert result.depth_loops == 0
    assert result.dsp == 0 and result.bram == 0
    assert result.wall_time > 0 and result.peak_mib > 0
    assert result.yosys_version.startswith("Yosys ")
    assert result.log_path == tmp_path / "yosys.log" and result.log_path.exists()
    assert "-noiopad" in (tmp_path / "synth.ys").read_text()
    pct = utilization(result)
    assert pct["FF"] == pytest.approx(100 * 8 / 2_607_360)
    assert pct["CLB_est"] == 1


def test_synthesis_failure_names_log(tmp_path):
    with pytest.raises(SynthesisError) as info:
        synthesize(Counter(), family="bogus", workdir=tmp_path, timeout=600)
    log_path = tmp_path / "yosys.log"
    assert str(log_path) in str(info.value)
    assert info.value.log_path == log_path and log_path.exists()
    assert "family" in str(info.value)


# A stand-in for Yosys that notes when it starts and ends, and takes long enough that two
# unlocked runs would overlap; and a process that prepares Yosys with it, twice.
_STAND_IN = """
import sys, time
with open(sys.argv[1], "a") as log:
    log.write("start\\n")
    log.flush()
    time.sleep(0.4)
    log.write("end\\n")
"""
_PREPARING = """
import sys
from squeezenic_hw.flows import synth
stand_in, log, lock = sys.argv[1:]
synth._yosys_command = lambda: [sys.executable, stand_in, log]
synth.prepare_yosys(lock)
synth.prepare_yosys(lock)
"""


def test_prepare_one_process_at_a_time(tmp_path):
    stand_in, log = tmp_path / "yosys.py", tmp_path / "runs.txt"
    stand_in.write_text(_STAND_IN)
    argv = [sys.executable, "-c", _PREPARING, str(stand_in), str(log), str(tmp_path / "lock")]
    procs = [subprocess.Popen(argv) for _ in range(3)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    # each process ran the stand-in once, and never while another ran it
    assert log.read_text().split() == ["start", "end"] * 3


class _Pipelined(wiring.Component):
    """An adder and a compare between registers: LUTs, carry cells and flip-flops."""
    a: In(16)
    b: In(16)
    o: Out(17)

    def elaborate(self, platform):
        m = Module()
        a = Signal(16, reset_less=True)
        b = Signal(16, reset_less=True)
        m.d.sync += [a.eq(self.a), b.eq(self.b), self.o.eq(Cat(a + b, a < b))]
        return m


def test_native_yosys_gives_what_yowasp_gives(tmp_path, monkeypatch):
    """``SQUEEZENIC_HW_YOSYS=native`` runs the pyosys build of the same Yosys release (no
    4 GiB WebAssembly limit): the same cells, depth and timing estimate."""
    wasm = synthesize(_Pipelined(), workdir=tmp_path / "wasm", timing=True)
    monkeypatch.setenv(YOSYS_ENV, "native")
    native = synthesize(_Pipelined(), workdir=tmp_path / "native", timing=True)
    assert native.cells == wasm.cells and native.depth == wasm.depth
    assert native.timing.as_dict() == wasm.timing.as_dict()
    assert native.yosys_version == wasm.yosys_version    # the same release and commit
    assert (tmp_path / "native" / "yosys.log").read_text().startswith("Yosys 0.")


def test_yosys_backend_is_checked(monkeypatch):
    monkeypatch.setenv(YOSYS_ENV, "bogus")
    with pytest.raises(ValueError, match=YOSYS_ENV):
        yosys_backend()
    monkeypatch.delenv(YOSYS_ENV)
    assert yosys_backend() == "yowasp"
