"""Measurement runs of a component's output stream: compiled (Verilator) or on Amaranth.

A run sets the component's input ports once (``statics``: values computed in Python, for
instance a packed control struct), keeps its output stream ready (or not, with a
probability) and counts, after ``warmup`` cycles, the stream's beats and bytes (the ones of
the payload's ``keep`` field), how often each 1-bit event port is high and in which first
and last cycle, and the values of snapshot ports at the start of the measured cycles and at
the end. It runs a fixed number of cycles, or until a ``done`` port rises, which raises a
``close`` input, and the stream has been quiet for ``quiet`` cycles. Which ports play
which part is a :class:`RunPorts`.

:func:`run_compiled` runs it on a Verilator model with the C++ bench ``run_harness.cpp``
(no Python per cycle; built and cached by :func:`~.compiled.build_model`);
:func:`run_amaranth` runs the same bench on Amaranth's simulator. With the stream always
ready the two agree cycle for cycle; with backpressure each draws its own random ready.
The cycle-by-cycle rules are in ``run_harness.cpp`` and ``docs/fastsim.md``.

A component that instantiates a Verilog module many times (``TxArray(...,
lane_module=NAME)``) is built with ``blocks={NAME: component}``: the module is compiled once
and each instance calls it (:class:`~.compiled.ModelSource`).
"""

import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from amaranth.hdl import Elaboratable, Value
from amaranth.lib import data
from amaranth.lib.wiring import In
from amaranth.sim import Simulator

from squeezenic_hw.collector import collector_paused, to_verilog

from .compiled import ModelSource, build_model, verilator_name

__all__ = ["RunPorts", "RunResult", "run_ports_header", "build_run_model", "run_compiled",
           "run_amaranth", "check_run"]

_KEEP = "keep"


@dataclass(frozen=True)
class RunPorts:
    """The parts a component's ports play in a measurement run.

    Attributes
    ----------
    stream : str
        The output stream (``valid``, ``ready``, a payload with a ``keep`` field).
    events : tuple of str
        1-bit outputs counted in every cycle they are high.
    snapshots : tuple of str
        Outputs read at the start of the measured cycles and at the end.
    done : str or None
        A 1-bit output that ends the run: it raises ``close``, and the run ends once the
        stream has been quiet for ``quiet`` cycles. Without it a run has a fixed length.
    close : str or None
        A 1-bit input held high from the cycle after ``done`` was first high.
    """
    stream: str = "o"
    events: tuple = ()
    snapshots: tuple = ()
    done: str | None = None
    close: str | None = None


@dataclass
class RunResult:
    """What a measurement run counted (the same from both backends).

    ``cycles`` is every cycle run, warm-up included; ``beats`` and ``bytes`` are the
    stream's in the measured cycles; ``events`` maps each event port to ``(count, first
    cycle, last cycle)`` (``None`` for a cycle that never was); ``before`` and ``after``
    map each snapshot port to its value (``before`` is ``None`` when the run ended before
    the warm-up did); ``closed_at`` is the first cycle with ``close`` high. ``wall_seconds``
    is the time of the cycle loop alone; ``extra`` has ``backend`` and, compiled, ``build``
    (:func:`~.compiled.build_model` 's info).
    """
    cycles: int
    beats: int
    bytes: int
    events: dict
    before: dict | None
    after: dict
    closed_at: int | None
    wall_seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def cycles_per_second(self):
        return self.cycles / self.wall_seconds if self.wall_seconds > 0 else float("inf")


def _ports(dut):
    """``{name: (value, is_input, width, init)}`` of every port of ``dut``, each named as
    Amaranth names a top-level port (its path joined by ``__``)."""
    out = {}
    for path, member, value in dut.signature.flatten(dut):
        signal = Value.cast(value)
        out["__".join(str(p) for p in path)] = (value, member.flow == In,
                                                len(signal), signal.init)
    return out


def _check_ports(dut, ports):
    """The component's ports as :func:`_ports` gives them, after checking that ``ports``
    names ports of the right kind (``ValueError`` naming the field otherwise)."""
    members = getattr(getattr(dut, "signature", None), "members", None)
    if members is None:
        raise ValueError(f"dut: a wiring.Component, got {type(dut).__name__}")
    flat = _ports(dut)
    stream = ports.stream
    if not all(f"{stream}__{p}" in flat for p in ("valid", "ready", "payload")) \
            or flat[f"{stream}__ready"][1] is not True:
        raise ValueError(f"ports.stream: {type(dut).__name__} has no output stream "
                         f"{stream!r}")
    payload = getattr(dut, stream).payload
    if not isinstance(payload, data.View) or _KEEP not in dict(data.Layout.cast(payload.shape())):
        raise ValueError(f"ports.stream: {stream}.payload has no {_KEEP!r} field")
    for role, names, want_input, one_bit in (
            ("events", ports.events, False, True),
            ("snapshots", ports.snapshots, False, False),
            ("done", [ports.done] if ports.done else [], False, True),
            ("close", [ports.close] if ports.close else [], True, True)):
        for name in names:
            if name not in flat or flat[name][1] != want_input or (one_bit
                                                                   and flat[name][2] != 1):
                kind = ("a 1-bit " if one_bit else "an ") + ("input" if want_input
                                                             else "output")
                raise ValueError(f"ports.{role}: {name!r} is not {kind} of "
                                 f"{type(dut).__name__}")
    return flat


def _static_inputs(flat, ports):
    """``[[name, width, init]]`` of the inputs a run sets once: all but the stream's
    ``ready`` and ``close``."""
    driven = {f"{ports.stream}__ready", ports.close}
    return [[name, width, init] for name, (_, is_input, width, init) in flat.items()
            if is_input and name not in driven]


def _words(width):
    return -(-width // 32)


def _port_copy(name, width, at, *, to_port):
    """C++ statements that copy the port ``name`` (``width`` bits) from the 32-bit words
    ``w[at]``, ``w[at + 1]`` … (``to_port``) or to them: a VlWide (past 64 bits) word by
    word, a narrower port as one integer."""
    cpp = f"top.{verilator_name(name)}"
    n = _words(width)
    if width > 64:
        port, words = f"{cpp}[i]", f"w[{at} + i]"
        target, value = (port, words) if to_port else (words, port)
        return f"for (int i = 0; i < {n}; i++) {target} = {value};"
    if to_port:
        return f"{cpp} = " + " | ".join(f"((uint64_t)w[{at + k}] << {32 * k})"
                                       for k in range(n)) + ";"
    return " ".join(f"w[{at + k}] = (uint32_t)((uint64_t){cpp} >> {32 * k});"
                    for k in range(n))


def _keep_bytes(payload_name, payload_width, offset, width):
    """A C++ expression: the number of one bits of ``width`` bits at ``offset`` of the
    payload port (a VlWide of 32-bit words past 64 bits)."""
    cpp = f"top.{verilator_name(payload_name)}"
    if payload_width <= 64:
        return f"__builtin_popcountll(((uint64_t){cpp} >> {offset}) & {(1 << width) - 1}ULL)"
    terms = []
    for word in range(offset // 32, (offset + width - 1) // 32 + 1):
        lo, hi = max(offset, 32 * word), min(offset + width, 32 * word + 32)
        mask = ((1 << (hi - lo)) - 1) << (lo - 32 * word)
        terms.append(f"__builtin_popcount({cpp}[{word}] & 0x{mask:08x}u)")
    return " + ".join(terms)


def run_ports_header(dut, ports):
    """The C++ header (``run_ports.h``) that tells ``run_harness.cpp`` which of ``dut``'s
    ports play which part of a :class:`RunPorts`."""
    flat = _check_ports(dut, ports)
    statics = _static_inputs(flat, ports)
    payload = f"{ports.stream}__payload"
    keep = data.Layout.cast(getattr(dut, ports.stream).payload.shape())[_KEEP]
    lines = [
        "// generated by squeezenic_hw/sim/stream_run.py: the component's ports",
        "#pragma once",
        f"#define N_STATIC {len(statics)}",
        "static const int STATIC_WORDS[] = {"
        + "".join(f"{_words(width)}, " for _, width, _ in statics) + "0};",
        "static inline void set_static(Vtop &top, int k, const uint32_t *w) {",
        "  switch (k) {",
        *(f"  case {k}: {_port_copy(name, width, 0, to_port=True)} break;  // {name}"
          for k, (name, width, _) in enumerate(statics)),
        "  default: break;",
        "  }",
        "}",
        f"#define STREAM_VALID {verilator_name(ports.stream + '__valid')}",
        f"#define STREAM_READY {verilator_name(ports.stream + '__ready')}",
        "static inline int keep_bytes(const Vtop &top) {",
        f"  return {_keep_bytes(payload, flat[payload][2], keep.offset, keep.width)};",
        "}",
        f"#define N_EVENTS {len(ports.events)}",
        "static inline bool read_event(const Vtop &top, int k) {",
        "  switch (k) {",
        *(f"  case {k}: return top.{verilator_name(name)};"
          for k, name in enumerate(ports.events)),
        "  default: return false;",
        "  }",
        "}",
    ]
    at = 0
    reads = []
    for name in ports.snapshots:
        reads.append(f"  {_port_copy(name, flat[name][2], at, to_port=False)}  // {name}")
        at += _words(flat[name][2])
    lines += [f"#define SNAPSHOT_WORDS {at}",
              "static inline void read_snapshots(const Vtop &top, uint32_t *w) {",
              *reads, "  (void)top; (void)w;", "}"]
    if ports.done:
        lines.append(f"#define DONE_PORT {verilator_name(ports.done)}")
    if ports.close:
        lines.append(f"#define CLOSE_PORT {verilator_name(ports.close)}")
    return "\n".join(lines) + "\n"


def _made(thing):
    """``thing``, or what it returns when it is a function that builds a component."""
    return thing() if not isinstance(thing, Elaboratable) and callable(thing) else thing


def build_run_model(dut, ports, *, blocks=None, cache_dir=None, jobs=2, key=None,
                    key_sources=(), progress=None):
    """Build (or find in the cache) the compiled bench of ``dut`` for ``ports``.

    ``dut`` is a component, or a function of no arguments that returns one; ``blocks``
    maps the name of each Verilog module ``dut`` instantiates to the component (or
    function) it is converted from, compiled once as a library. ``key`` (with
    ``key_sources``, the files besides the package's gateware that ``dut`` follows from)
    names how both were built, so that a second build finds the model without elaborating
    them (:func:`~.compiled.build_model`, which tells ``progress`` the build's steps).
    Returns ``(path, info)``; ``info["meta"]`` has the ports the bench sets (``statics``:
    ``[name, width, init]``), counts (``events``) and reads (``snapshots``: ``[name,
    width]``).
    """
    def source():
        made = _made(dut)
        flat = _check_ports(made, ports)
        meta = {"statics": _static_inputs(flat, ports), "events": list(ports.events),
                "snapshots": [[name, flat[name][2]] for name in ports.snapshots]}
        texts = {name: to_verilog(_made(block), name=name, emit_src=False)
                 for name, block in (blocks or {}).items()}
        return ModelSource(type(made).__name__,
                           to_verilog(made, name="top", emit_src=False),
                           {"run_ports.h": run_ports_header(made, ports)}, meta=meta,
                           blocks=texts)

    return build_model(source, bench="run_harness.cpp", cache_dir=cache_dir, jobs=jobs, key=key,
                       key_sources=key_sources, progress=progress)


def _static_values(inputs, statics):
    """Every static input's value: ``statics``' where given, else the port's initial value
    (``inputs``: ``[[name, width, init]]``)."""
    widths = {name: width for name, width, _ in inputs}
    for name, value in statics.items():
        if name not in widths:
            raise ValueError(f"statics: no input port {name!r} to set (inputs: "
                             f"{', '.join(widths)})")
        if not 0 <= int(value) < 1 << widths[name]:
            raise ValueError(f"statics: {name}={value} does not fit {widths[name]} bits")
    return [(name, width, int(statics.get(name, init))) for name, width, init in inputs]


def check_run(*, warmup=0, cycles=1, quiet=0, backpressure=0.0):
    """``ValueError`` naming the first of a run's parameters that is out of range."""
    for name, value in (("warmup", warmup), ("quiet", quiet)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int ≥ 0, got {value!r}")
    if not isinstance(cycles, int) or cycles < 1:
        raise ValueError(f"cycles must be an int ≥ 1, got {cycles!r}")
    if not 0.0 <= backpressure < 1.0:
        raise ValueError(f"backpressure must be in [0, 1), got {backpressure}")


def _unpack(words, fields):
    out, at = {}, 0
    for name, width in fields:
        n = _words(width)
        out[name] = sum(w << (32 * k) for k, w in enumerate(words[at:at + n]))
        at += n
    return out


def _read_result(path, meta):
    rows = {}
    events = []
    for line in Path(path).read_text().splitlines():
        head, *rest = line.split()
        if head == "event":
            events.append(tuple(int(x) for x in rest))
        else:
            rows[head] = rest
    snapshots = meta["snapshots"]
    before = rows.get("before")
    closed = int(rows["closed_at"][0])
    return RunResult(
        cycles=int(rows["cycles"][0]), beats=int(rows["beats"][0]),
        bytes=int(rows["bytes"][0]),
        events={name: (count, None if first < 0 else first, None if last < 0 else last)
                for name, (count, first, last) in zip(meta["events"], events, strict=True)},
        before=None if before is None else _unpack([int(w) for w in before], snapshots),
        after=_unpack([int(w) for w in rows["after"]], snapshots),
        closed_at=None if closed < 0 else closed, wall_seconds=float(rows["seconds"][0]))


def run_compiled(dut, ports, *, statics=None, warmup=0, cycles=1000, quiet=100,
                 backpressure=0.0, seed=0, progress=None, progress_seconds=1.0, blocks=None,
                 cache_dir=None, jobs=2, key=None, key_sources=(), build_progress=None):
    """Run ``dut`` on its compiled bench (:func:`build_run_model` builds or finds it).

    Parameters
    ----------
    dut, ports, blocks, cache_dir, jobs, key, key_sources :
        As :func:`build_run_model`.
    statics : dict of str to int, optional
        Values of input ports (named as Amaranth names top-level ports), set before the
        first cycle; the others keep their initial values.
    warmup : int
        Cycles before the measured ones.
    cycles : int
        Measured cycles; with ``ports.done``, the most the run may take after the
        warm-up before it fails with ``TimeoutError``.
    quiet : int
        With ``ports.done``: the run ends after this many cycles in a row without a beat
        once ``close`` is high.
    backpressure : float
        Probability that the stream is not ready in a cycle (the bench's own random
        numbers, from ``seed``).
    progress : callable, optional
        Called as ``progress(cycle)`` about every ``progress_seconds`` while it runs.
    build_progress : callable, optional
        Told of the build's steps, when the model is built (:func:`build_run_model`'s
        ``progress``).

    Returns a :class:`RunResult`; ``extra["build"]`` is the build's info.
    """
    check_run(warmup=warmup, cycles=cycles, quiet=quiet, backpressure=backpressure)
    exe, build = build_run_model(dut, ports, blocks=blocks, cache_dir=cache_dir, jobs=jobs,
                                 key=key, key_sources=key_sources, progress=build_progress)
    meta = build["meta"]
    values = _static_values(meta["statics"], statics or {})
    with tempfile.TemporaryDirectory(prefix="stream_run.") as tmp:
        config, out = Path(tmp) / "run.cfg", Path(tmp) / "out.txt"
        words = " ".join(str((value >> (32 * k)) & 0xFFFFFFFF) for _, width, value in values
                         for k in range(_words(width)))
        config.write_text(f"{warmup} {cycles} {quiet} {float(backpressure)!r} {int(seed)} "
                          f"{float(progress_seconds) if progress else 0.0!r}\n{words}\n")
        with subprocess.Popen([str(exe), str(config), str(out)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as proc:
            for line in proc.stdout:
                if progress and line.startswith("progress "):
                    progress(int(line.split()[1]))
            error = proc.stderr.read().strip()
        if proc.returncode == 3:
            raise TimeoutError(error)
        if proc.returncode != 0:
            raise RuntimeError(f"compiled model failed ({proc.returncode}): {error}")
        result = _read_result(out, meta)
    result.extra = {"backend": "compiled", "build": build}
    return result


def run_amaranth(dut, ports, *, statics=None, warmup=0, cycles=1000, quiet=100,
                 backpressure=0.0, seed=0, progress=None, progress_seconds=1.0):
    """:func:`run_compiled` 's bench on Amaranth's simulator (the same arguments but the
    build's; ``backpressure`` draws from numpy's generator of ``seed``)."""
    check_run(warmup=warmup, cycles=cycles, quiet=quiet, backpressure=backpressure)
    flat = _check_ports(dut, ports)
    values = _static_values(_static_inputs(flat, ports), statics or {})
    stream = getattr(dut, ports.stream)
    keep = stream.payload[_KEEP]
    events = [flat[name][0] for name in ports.events]
    snapshots = {name: flat[name][0] for name in ports.snapshots}
    done = flat[ports.done][0] if ports.done else None
    close = flat[ports.close][0] if ports.close else None
    rng = np.random.default_rng(seed)
    res = {}

    async def bench(ctx):
        for name, _, value in values:
            ctx.set(Value.cast(flat[name][0]), value)
        counts = [[0, None, None] for _ in events]
        before, t, beats, nbytes, still, closing, closed_at = None, 0, 0, 0, 0, False, None
        shown = time.perf_counter()
        # what ``ready`` and ``close`` were last set to: each is set again only when it
        # changes (this loop runs every cycle)
        ready_now = close_now = None
        # one trigger for every clock edge of the run, not one made and registered per edge
        # (closed when the loop ends; a run that ends first leaves it to lapse at the next
        # edge: closing it there, while it waits, is an error)
        edges = aiter(ctx.tick().sample(stream.valid, keep, *events))
        while True:
            if t == warmup:
                before = {name: ctx.get(Value.cast(v)) for name, v in snapshots.items()}
            ready = not (backpressure > 0 and rng.random() < backpressure)
            if ready != ready_now:
                ctx.set(stream.ready, ready)
                ready_now = ready
            if close is not None and closing != close_now:
                ctx.set(close, closing)
                close_now = closing
            _, _, valid, keep_bits, *high = await anext(edges)
            beat = ready and bool(valid)
            if t >= warmup:
                if beat:
                    beats += 1
                    nbytes += bin(int(keep_bits)).count("1")
                for count, h in zip(counts, high, strict=True):
                    if h:
                        count[0] += 1
                        count[1] = t if count[1] is None else count[1]
                        count[2] = t
            t += 1
            if done is not None:
                if closing:
                    still = 0 if beat else still + 1
                    if still >= quiet:
                        break
                elif ctx.get(done):
                    closing, closed_at = True, t
                if t >= warmup + cycles:
                    raise TimeoutError(f"timeout: not done after {t} cycles")
            elif t >= warmup + cycles:
                break
            if progress and t % 256 == 0 and time.perf_counter() - shown >= progress_seconds:
                progress(t)
                shown = time.perf_counter()
        await edges.aclose()
        res.update(cycles=t, beats=beats, bytes=nbytes, closed_at=closed_at, before=before,
                   events={name: tuple(c) for name, c in zip(ports.events, counts,
                                                             strict=True)},
                   after={name: ctx.get(Value.cast(v)) for name, v in snapshots.items()})

    with collector_paused():
        sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    start = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - start
    return RunResult(wall_seconds=wall, extra={"backend": "amaranth"}, **res)
