"""The OpenNIC plugin's core on whole frames and a register script: compiled or Amaranth.

A run drives frames into the core's input streams (``h2c0``, ``rx0``, ...: QDMA H2C and
the wire) under random idle cycles, collects every output stream (``c2h0``, ``tx0``, ...)
under random backpressure, and meanwhile runs a register script on the AXI-Lite port: one
:class:`RegisterStep` after another (write, read, wait, poll a register, wait for the
inputs or for output frames). With ``looped``, interface 0's wire output feeds its wire
input (:class:`LoopedCore`, a cable), so ``tx0`` and ``rx0`` are not streams of the run.

:func:`simulate_core_compiled` runs it on a Verilator model with the C++ bench
``core_harness.cpp`` (no Python per cycle; built and cached by
:func:`~.compiled.build_model`); :func:`simulate_core` runs the same bench on Amaranth's
simulator. Both give the same frames and the same register reads; cycle numbers differ
under idle cycles and backpressure (each backend draws its own random numbers) and so may
reads of counters taken mid-run.
"""

import struct
import time
from dataclasses import dataclass, field

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.collector import collector_paused, to_verilog
from squeezenic_hw.gateware.arrays.source_port_splitter import is_generator_frame
from squeezenic_hw.gateware.axil.bus import AxiLiteSignature
from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.opennic.core import SqueezeNicCore, generator_lane
from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.regmap.plugin import plugin_register_map

from .axil import axil_read, axil_write
from .axis import AxisFrame, FrameSink, FrameSource
from .compiled import (
    BEAT_BYTES,
    ModelSource,
    beat_defines,
    build_model,
    cxx_switch,
    frames_of_beats,
    output_switches,
    run_bench,
    verilator_name,
    write_frames,
)

__all__ = ["RegisterStep", "write", "read", "wait", "poll", "inputs_done", "output_frames",
           "CoreRun", "LoopedCore", "core_streams", "build_core_model",
           "simulate_core_compiled", "simulate_core", "check_outputs"]

_KINDS = ("write", "read", "wait", "poll", "inputs_done", "frames")
#: The Verilog module of a generator lane in a compiled core.
GEN_LANE_MODULE = "core_gen_lane"


@dataclass(frozen=True)
class RegisterStep:
    """One step of a register script; make them with :func:`write`, :func:`read`,
    :func:`wait`, :func:`poll`, :func:`inputs_done` and :func:`output_frames`."""
    kind: str
    a: int = 0
    b: int = 0
    c: int = 0

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        # addresses and data are the bus's 32 bits; counts and cycles the bench's 63
        words = {"write": "ab", "read": "a", "poll": "ab"}.get(self.kind, "")
        for name in ("a", "b", "c"):
            value, top = getattr(self, name), 32 if name in words else 63
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value < 2**top:
                raise ValueError(f"{name} of a {self.kind} step must be an int in "
                                 f"0..2**{top}-1, got {value!r}")


def write(addr, data):
    """Write ``data`` to ``addr``; its response is recorded."""
    return RegisterStep("write", addr, data)


def read(addr):
    """Read ``addr``; the data and response are recorded."""
    return RegisterStep("read", addr)


def wait(cycles):
    """Let ``cycles`` cycles pass."""
    return RegisterStep("wait", cycles)


def poll(addr, value, every=50):
    """Wait ``every`` cycles and read ``addr``, until it reads ``value``; the last read is
    recorded."""
    return RegisterStep("poll", addr, value, max(1, every))


def inputs_done():
    """Wait until every input stream has sent its last beat."""
    return RegisterStep("inputs_done")


def output_frames(index, count):
    """Wait until output stream ``index`` (of :func:`core_streams`) has given ``count``
    frames."""
    return RegisterStep("frames", index, count)


@dataclass
class CoreRun:
    """What a core run produced: ``outputs`` maps each output stream to its frames;
    ``responses`` has one ``(step index, cycle, addr, data, resp)`` per write and read
    (``data`` is the written value for a write); ``wall_seconds`` is the cycle loop's."""
    outputs: dict
    responses: list
    cycles: int
    wall_seconds: float
    extra: dict = field(default_factory=dict)

    def reads(self):
        """``{addr: data}`` of the reads, the last one of each address."""
        steps = self.extra.get("steps", ())
        return {addr: data for step, _, addr, data, _ in self.responses
                if steps and steps[step].kind in ("read", "poll")}


class LoopedCore(wiring.Component):
    """The core with interface 0's wire output looped into its wire input, as a cable
    would: the other streams and the register port stay ports. ``gen_lane_module`` is
    the core's (:class:`~squeezenic_hw.gateware.opennic.core.SqueezeNicCore`)."""

    def __init__(self, params, *, gen_lane_module=None):
        self.params = params
        self._gen_lane_module = gen_lane_module
        n = params.num_intf
        members = {"axil": In(AxiLiteSignature()),
                   "h2c": In(axis_signature()).array(n),
                   "c2h": Out(axis_signature()).array(n)}
        if n > 1:
            members |= {"tx1": Out(axis_signature()), "rx1": In(axis_signature())}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = SqueezeNicCore(self.params,
                                                  gen_lane_module=self._gen_lane_module)
        wiring.connect(m, core.tx[0], core.rx[0])
        wiring.connect(m, wiring.flipped(self.axil), core.axil)
        for i in range(self.params.num_intf):
            wiring.connect(m, wiring.flipped(self.h2c[i]), core.h2c[i])
            wiring.connect(m, core.c2h[i], wiring.flipped(self.c2h[i]))
        if self.params.num_intf > 1:
            wiring.connect(m, core.tx[1], wiring.flipped(self.tx1))
            wiring.connect(m, wiring.flipped(self.rx1), core.rx[1])
        return m


def _check_params(params):
    if not isinstance(params, PluginParams):
        raise ValueError(f"params must be a PluginParams, got {type(params).__name__}")


def _design(params, looped, gen_lane_module=None):
    _check_params(params)
    design = LoopedCore if looped else SqueezeNicCore
    return design(params, gen_lane_module=gen_lane_module)


def core_streams(params, *, looped=False):
    """``(inputs, outputs)``: the names of the run's input and output streams, in the
    bench's order (an :func:`output_frames` step names an output by its index here)."""
    n = params.num_intf
    first = 1 if looped else 0
    return ([f"h2c{i}" for i in range(n)] + [f"rx{i}" for i in range(first, n)],
            [f"c2h{i}" for i in range(n)] + [f"tx{i}" for i in range(first, n)])


def _split(name):
    """``("h2c", 0)`` of ``"h2c0"``."""
    return name[:-1], int(name[-1])


def _prefix(name, looped):
    """The top-level port prefix of stream ``name``: ``h2c__0``, or ``rx1`` on a
    :class:`LoopedCore` (a port of its own, not an element of an array)."""
    kind, i = _split(name)
    return name if looped and kind in ("rx", "tx") else f"{kind}__{i}"


def _stream(top, name):
    kind, i = _split(name)
    if isinstance(top, LoopedCore) and kind in ("rx", "tx"):
        return getattr(top, name)
    return getattr(top, kind)[i]


def ports_header(params, *, looped=False):
    """The C++ header that names the streams and the register port of the core (with
    ``looped``, of :class:`LoopedCore`) for the bench (``core_ports.h``)."""
    inputs, outputs = core_streams(params, looped=looped)
    words = BEAT_BYTES // 4

    def port(name, member):
        return "top." + verilator_name(f"{_prefix(name, looped)}__{member}")

    lines = [
        "// generated by squeezenic_hw/sim/core_model.py: the core's port names",
        "#pragma once",
        *beat_defines(),
        f"#define N_IN {len(inputs)}",
        f"#define N_OUT {len(outputs)}",
        f"#define AXIL(member) {verilator_name('axil__')}##member",
        *cxx_switch("void set_input(Vtop &top, int k, bool valid, const uint32_t *w)",
                    [f"{port(n, 'valid')} = valid; if (valid) for (int j = 0; j < {words}; "
                     f"j++) {port(n, 'payload')}[j] = w[j]; break;" for n in inputs]),
        *cxx_switch("bool input_ready(Vtop &top, int k)",
                    [f"return {port(n, 'ready')};" for n in inputs], ["  return false;"]),
        *output_switches(outputs, port),
    ]
    return "\n".join(lines) + "\n"


def build_core_model(params, *, looped=False, cache_dir=None, jobs=2, progress=None):
    """Build (or find in the cache) the compiled model of ``SqueezeNicCore(params)`` (with
    ``looped``, of :class:`LoopedCore`). Returns ``(path, info)`` as
    :func:`~.compiled.build_model`; a second call with equal parameters finds the model
    without elaborating the core (the key is the parameters)."""
    _check_params(params)

    def source():
        # the generator lanes: one module, compiled once, instantiated gen_lanes times
        module = GEN_LANE_MODULE if params.gen_lanes else None
        top = _design(params, looped, gen_lane_module=module)
        inputs, outputs = core_streams(params, looped=looped)
        blocks = {}
        if module:
            blocks[module] = to_verilog(generator_lane(params), name=module, emit_src=False)
        return ModelSource(type(top).__name__,
                           to_verilog(top, name="top", emit_src=False),
                           {"core_ports.h": ports_header(params, looped=looped)},
                           meta={"inputs": inputs, "outputs": outputs}, blocks=blocks)

    return build_model(source, bench="core_harness.cpp", cache_dir=cache_dir, jobs=jobs,
                       key=f"{'LoopedCore' if looped else 'SqueezeNicCore'}({params!r})",
                       key_sources=[__file__], exe_name="core_model",
                       meta_file="streams.json", progress=progress)


def _check_run(params, inputs, script, looped, idle, backpressure):
    _check_params(params)
    names, outputs = core_streams(params, looped=looped)
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise ValueError(f"inputs: no input stream {unknown[0]!r} (this run has "
                         f"{', '.join(names)})")
    for name, value in (("idle", idle), ("backpressure", backpressure)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    script = list(script)
    for step in script:
        if not isinstance(step, RegisterStep):
            raise ValueError(f"script: {step!r} is not a RegisterStep")
        if step.kind == "frames" and step.a >= len(outputs):
            raise ValueError(f"script: output_frames({step.a}, ...): this run has "
                             f"{len(outputs)} outputs ({', '.join(outputs)})")
    frames = {name: [f if isinstance(f, AxisFrame) else AxisFrame(bytes(f))
                     for f in inputs.get(name, ())] for name in names}
    return frames, script


def simulate_core_compiled(params, inputs, script=(), *, looped=False, idle=0.0,
                           backpressure=0.0, seed=0, quiet=200, timeout=2_000_000,
                           cache_dir=None, jobs=2, progress=None):
    """Run the core's compiled model.

    Parameters
    ----------
    params : PluginParams
    inputs : dict
        Input stream name (:func:`core_streams`) -> list of frames (``AxisFrame`` or
        bytes); a stream not named gets none.
    script : sequence of RegisterStep
    looped : bool
        Interface 0's wire output feeds its wire input (:class:`LoopedCore`).
    idle, backpressure : float
        Probability of an idle cycle before each input beat / of an output's ``ready``
        low in a cycle.
    quiet : int
        Cycles without an output beat, once the script and the inputs are done, that end
        the run.
    cache_dir, jobs, progress :
        As :func:`~.compiled.build_model`'s.

    Returns a :class:`CoreRun`; ``extra`` has ``backend`` (``"compiled"``), ``build``,
    ``steps`` and ``sim_cycles_per_s``. Raises ``TimeoutError`` after ``timeout``
    cycles."""
    frames, script = _check_run(params, inputs, script, looped, idle, backpressure)
    exe, build = build_core_model(params, looped=looped, cache_dir=cache_dir, jobs=jobs,
                                  progress=progress)
    in_names, out_names = build["meta"]["inputs"], build["meta"]["outputs"]
    def write_input(f):
        f.write(struct.pack("<Q", len(script)))
        for step in script:
            f.write(struct.pack("<QQQQ", _KINDS.index(step.kind), step.a, step.b, step.c))
        for name in in_names:
            write_frames(f, frames[name])

    r, _, _ = run_bench(exe, write_input, idle=idle, backpressure=backpressure, seed=seed,
                        quiet=quiet, timeout=timeout)
    cycles = r.u64()
    outputs = {name: frames_of_beats(r.beats(r.u64()))[0] for name in out_names}
    responses = [tuple(r.u64() for _ in range(5)) for _ in range(r.u64())]
    seconds = r.f64()
    return CoreRun(outputs=outputs, responses=responses, cycles=cycles, wall_seconds=seconds,
                   extra={"backend": "compiled", "build": build, "steps": script,
                          "sim_cycles_per_s": round(cycles / seconds) if seconds else None})


def simulate_core(params, inputs, script=(), *, looped=False, idle=0.0, backpressure=0.0,
                  seed=0, quiet=200, timeout=2_000_000):
    """:func:`simulate_core_compiled` on Amaranth's simulator (same arguments but the
    build's, same :class:`CoreRun`; ``extra["backend"]`` is ``"amaranth"``)."""
    frames, script = _check_run(params, inputs, script, looped, idle, backpressure)
    top = _design(params, looped)
    ins, outs = core_streams(params, looped=looped)
    sources = [FrameSource(_stream(top, name), frames[name], idle=idle, seed=seed + 1 + k)
               for k, name in enumerate(ins)]
    sinks = [FrameSink(_stream(top, name), backpressure=backpressure, seed=seed + 101 + k,
                       quiet=2**62, timeout=2**62) for k, name in enumerate(outs)]
    responses = []
    state = {"t": 0}

    async def clock(ctx):
        # every cycle of the run, the AXI-Lite helpers' own included (one trigger for
        # every clock edge, not one made and registered per edge)
        async for _ in ctx.tick():
            state["t"] += 1

    async def tick(ctx):
        await ctx.tick()
        if state["t"] > timeout:
            raise TimeoutError(f"timeout after {state['t']} cycles: register step "
                               f"{len(responses)} of {len(script)}")

    async def bench(ctx):
        bus = top.axil
        for k, step in enumerate(script):
            if step.kind == "write":
                resp = await axil_write(ctx, bus, step.a, step.b, timeout=timeout)
                responses.append((k, state["t"], step.a, step.b, resp))
            elif step.kind in ("read", "poll"):
                while True:
                    if step.kind == "poll":
                        for _ in range(step.c):
                            await tick(ctx)
                    value, resp = await axil_read(ctx, bus, step.a, timeout=timeout)
                    if step.kind == "read" or value == step.b:
                        break
                responses.append((k, state["t"], step.a, value, resp))
            elif step.kind == "wait":
                for _ in range(step.a):
                    await tick(ctx)
            elif step.kind == "inputs_done":
                while any(s.done_cycle is None for s in sources):
                    await tick(ctx)
            else:
                while len(sinks[step.a].frames) < step.b:
                    await tick(ctx)
        while any(s.done_cycle is None for s in sources):
            await tick(ctx)
        beats, still = None, 0
        while still < quiet:
            now = sum(s.beats for s in sinks)
            still = still + 1 if now == beats else 0
            beats = now
            await tick(ctx)

    with collector_paused():
        sim = Simulator(top)
    sim.add_clock(4e-9)
    for s in sources + sinks:
        sim.add_testbench(s.run, background=True)
    sim.add_testbench(clock, background=True)
    sim.add_testbench(bench)
    start = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - start
    return CoreRun(outputs={name: list(sink.frames)
                            for name, sink in zip(outs, sinks, strict=True)},
                   responses=responses, cycles=state["t"], wall_seconds=wall,
                   extra={"backend": "amaranth", "steps": script})


#: Registers whose writes change what the host lanes make of a frame: the numpy lanes do not
#: follow them, so a run whose script writes one has no reference of its host streams.
_HOST_SETTINGS = ("enable", "udp_port", "idle_timeout")


def check_outputs(params, inputs, script, outputs, *, looped=False):
    """Compare the output streams of a run with the numpy reference lanes where they
    determine them: ``{output name: (matches, detail)}``, ``matches`` ``True``, ``False``
    (``detail`` says what differs) or ``None`` (not checked, ``detail`` says why).

    - ``tx{i}``: the reference TX lane on ``h2c{i}``. On interface 0 with generator lanes,
      the frames that are not the generators' (:func:`is_generator_frame`, by UDP source
      port), on both sides alike: the generators' own frames are the checkers' to judge.
    - ``c2h{i}``: the reference RX lane on what reaches host RX lane ``i``: ``rx{i}`` (less
      the generators' frames where loopback lanes take them), or on a looped interface 0
      the reference TX lane's frames of ``h2c0``.

    Not checked: every host stream when the script writes ``enable``, ``udp_port`` or
    ``idle_timeout``; ``tx`` when the build's idle timeout is not 0 (the reference would
    need the cycle of every frame); ``c2h0`` when the generators' frames reach its lane
    (looped, without loopback lanes).
    """
    regmap = plugin_register_map(params)
    settings = {regmap[name].offset for name in _HOST_SETTINGS if name in regmap}
    written = any(step.kind == "write" and step.a in settings for step in script)
    frames = {name: [bytes(f.data if isinstance(f, AxisFrame) else f) for f in got]
              for name, got in inputs.items()}
    generators = params.gen_lanes

    def generated(frame):
        return is_generator_frame(frame, params.src_port_base, generators, port=params.port)

    def wire_tx(i):
        return lane_reference.tx(frames.get(f"h2c{i}", []), port=params.port, mtu=params.mtu,
                                 codecs=params.codecs)[0]

    result = {}
    for name in outputs:
        kind, i = _split(name)
        shared = i == 0 and generators > 0        # the generators share interface 0's wire
        if written:
            result[name] = (None, "the script writes " + "/".join(_HOST_SETTINGS))
            continue
        if kind == "tx":
            if params.idle_timeout:
                result[name] = (None, "the build's idle timeout depends on cycle times")
                continue
            want = wire_tx(i)
        else:
            if looped and i == 0:
                if shared and not params.rx_lanes:
                    result[name] = (None, "the generators' frames reach this lane")
                    continue
                wire = wire_tx(0)
            else:
                wire = frames.get(f"rx{i}", [])
            if shared and params.rx_lanes:
                wire = [f for f in wire if not generated(f)]
            want = lane_reference.rx(wire, port=params.port,
                                     max_host_elements=params.max_host_elements,
                                     codecs=params.codecs)[0]
        got = [bytes(f.data) for f in outputs[name]]
        if kind == "tx" and shared:
            got, want = ([f for f in side if not generated(f)] for side in (got, want))
        result[name] = _difference(got, want, kind)
    return result


def _difference(got, want, kind):
    for k, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return False, f"frame {k}: {len(a)} bytes, reference {len(b)}" + (
                "" if len(a) != len(b) else f", first difference at byte "
                f"{next(j for j in range(len(a)) if a[j] != b[j])}")
    if len(got) != len(want):
        hint = ""
        if kind == "tx" and len(got) < len(want):
            hint = " (an open wire frame waits for tx_close, a flush or the idle timeout)"
        return False, f"{len(got)} frames, reference {len(want)}{hint}"
    return True, None
