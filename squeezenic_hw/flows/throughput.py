"""Cycle-accurate throughput measurements: the paper's Table 5 and the host_bw sweep.

* :func:`by_frame_length`: one generator at full bus rate → one TX lane →
  an always-ready wire. Host-side and wire-side Gb/s at 250 MHz for a host
  frame length and codec, beside the bus ceiling for that frame length
  (``L / ⌈L/64⌉`` bytes per cycle: the last beat of a frame is partly empty).
* :func:`by_host_bw`: N = host_bw/100 generators programmed at 100 Gb/s
  each → N TX lanes → the arbiter → one always-ready wire: whether every
  generator keeps its programmed rate, the wire's utilisation, and the
  compression ratio the wire needs (host bytes over what one 512-bit wire
  carries at that frame length).

Both are measurement runs of :mod:`squeezenic_hw.sim.stream_run`, on either backend:
``"compiled"`` (a Verilator model; an array's lanes are one module compiled once,
``TxArray(..., lane_module=...)``) or ``"amaranth"`` (Amaranth's simulator). The wire is
always ready, so the two give the same figures, cycle for cycle; the figures are
measured, not computed.
"""

from dataclasses import dataclass

from amaranth import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.arrays.generator import GradientGenerator
from squeezenic_hw.gateware.arrays.lane_arrays import GeneratorControl, GeneratorLane, TxArray
from squeezenic_hw.gateware.common.layouts import DATA_BYTES, axis_signature
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.sim.stream_run import RunPorts, check_run, run_amaranth, run_compiled
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.generator import MAX_ELEMENTS, GeneratorConfig, config_values
from squeezenic_hw.spec.header import HEADER_LEN
from squeezenic_hw.spec.scaling import lanes_for

__all__ = ["CLOCK_HZ", "BUS_GBPS", "BACKENDS", "bus_ceiling_gbps", "by_frame_length",
           "by_host_bw", "FrameLengthResult", "HostBwResult", "codec_setting",
           "frame_elements"]

#: The simulation backends of :func:`by_frame_length` and :func:`by_host_bw`.
BACKENDS = ("compiled", "amaranth")
#: The Verilog module name of a compiled array's generator lane.
LANE_MODULE = "gen_lane"

CLOCK_HZ = 250e6
#: One 512-bit beat per cycle at 250 MHz.
BUS_GBPS = DATA_BYTES * 8 * CLOCK_HZ / 1e9


def bus_ceiling_gbps(frame_bytes):
    """Gb/s of frames of ``frame_bytes`` on a 512-bit, 250 MHz bus (one frame per beat group)."""
    beats = -(-frame_bytes // DATA_BYTES)
    return frame_bytes / beats * 8 * CLOCK_HZ / 1e9


def codec_setting(spec):
    """``(name, codec id, param)`` from ``"raw"``, ``"fixed:4"``, ``"qsgd:2"`` …"""
    name, _, param = spec.partition(":")
    info = codec_info(name)
    if info.param_range:
        if not param:
            raise ValueError(f"codec {name!r} needs a parameter, e.g. {name}:4")
        p = int(param)
    else:
        if param:
            raise ValueError(f"codec {name!r} takes no parameter")
        p = 0
    if info.param_range:
        info.bits_per_element(p)   # ValueError naming the codec when out of range
    return spec, info.id, p


@dataclass
class FrameLengthResult:
    codec: str
    frame_bytes: int
    host_gbps: float
    wire_gbps: float
    ceiling_gbps: float
    ratio: float           # host bytes / wire bytes
    cycles: int
    backend: str = "amaranth"
    build_seconds: float | None = None     # the compiled model's build (None on Amaranth)
    build_cached: bool | None = None
    sim_cycles_per_s: float = 0.0
    build: dict | None = None              # the whole build info (build_model's)


@dataclass
class HostBwResult:
    host_bw: int
    codec: str
    lanes: int
    frame_bytes: int
    generator_gbps_min: float
    all_full_rate: bool
    wire_utilisation: float    # wire beats per cycle
    wire_gbps: float
    ratio_needed: float        # host Gb/s over the wire ceiling at this frame length
    ratio_codec: float
    cycles: int
    sim_cycles_per_s: float
    backend: str = "amaranth"
    build_seconds: float | None = None
    build_cached: bool | None = None
    build: dict | None = None


class _GenTx(wiring.Component):
    """One generator → one TX lane of ``codecs``, for :func:`by_frame_length`.

    Ports: the generator's control inputs (same names and initial values), ``close``
    (the lane's), ``o`` (the wire), ``host_beat`` (a beat from the generator to the lane
    in this cycle) and ``done`` (the generator has sent ``n_frames`` and is idle).
    """

    def __init__(self, codecs):
        self.gen = GradientGenerator(MAX_ELEMENTS)
        self.lane = TxLane(codecs=codecs)
        self._controls = [name for name, member in self.gen.signature.members.items()
                          if member.is_port and member.flow == In]
        members = self.gen.signature.members
        super().__init__({
            **{name: In(members[name].shape, init=members[name].init)
               for name in self._controls},
            "o": Out(axis_signature()), "close": In(1), "host_beat": Out(1), "done": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen, m.submodules.lane = gen, lane = self.gen, self.lane
        for name in self._controls:
            m.d.comb += getattr(gen, name).eq(getattr(self, name))
        wiring.connect(m, gen.o, lane.i)
        wiring.connect(m, lane.o, wiring.flipped(self.o))
        m.d.comb += [
            lane.close.eq(self.close),
            self.host_beat.eq(gen.o.valid & gen.o.ready),
            self.done.eq((gen.frames_sent == self.n_frames) & ~gen.busy),
        ]
        return m


class _ArrayWire(wiring.Component):
    """A :class:`TxArray` with only what :func:`by_host_bw` reads: ``ctrl``, ``o`` and
    ``frames_sent`` (its per-lane counters left out, so a compiled model need not carry
    them)."""

    def __init__(self, array):
        self.array = array
        super().__init__({
            "ctrl": In(GeneratorControl), "o": Out(axis_signature()),
            "frames_sent": Out(data.ArrayLayout(32, array.n_lanes))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self.array
        m.d.comb += [array.ctrl.eq(self.ctrl), self.frames_sent.eq(array.frames_sent)]
        wiring.connect(m, array.o, wiring.flipped(self.o))
        return m


def frame_elements(frame_bytes):
    """The elements of a host frame of ``frame_bytes`` bytes (64 + 4n); ``ValueError``
    naming the frame length for any other length."""
    if isinstance(frame_bytes, bool) or not isinstance(frame_bytes, int) \
            or frame_bytes < HEADER_LEN + 4 or (frame_bytes - HEADER_LEN) % 4 \
            or (frame_bytes - HEADER_LEN) // 4 > MAX_ELEMENTS:
        raise ValueError(f"frame length must be 64 + 4n bytes (1 ≤ n ≤ {MAX_ELEMENTS}), "
                         f"got {frame_bytes}")
    return (frame_bytes - HEADER_LEN) // 4


def _check_backend(backend):
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")


def _measure(backend, make, ports, *, key, blocks=None, cache_dir=None, jobs=2,
             build_progress=None, **run):
    """A :mod:`~squeezenic_hw.sim.stream_run` run of ``make(compiled)`` (the component to
    simulate, built for the backend) on ``backend``; ``key`` names it for the cache."""
    if backend == "amaranth":
        return run_amaranth(make(False), ports, **run)
    return run_compiled(lambda: make(True), ports, blocks=blocks, key=key,
                        key_sources=[__file__], cache_dir=cache_dir, jobs=jobs,
                        build_progress=build_progress, **run)


def _build_fields(run):
    build = run.extra.get("build")
    return {"backend": run.extra["backend"], "build": build,
            "build_seconds": build["build_s"] if build else None,
            "build_cached": build["cached"] if build else None,
            "sim_cycles_per_s": run.cycles_per_second}


def by_frame_length(codec_spec, frame_bytes, *, frames=12, backend="amaranth", cache_dir=None,
                    jobs=2, progress=None, build_progress=None):
    """Host and wire Gb/s of one TX lane fed at full bus rate (see the module docstring).

    ``backend`` is ``"compiled"`` or ``"amaranth"``; ``cache_dir`` and ``jobs`` go to the
    compiled build (:func:`~squeezenic_hw.sim.stream_run.run_compiled`), ``progress`` is
    called with the cycle while it runs and ``build_progress`` with the steps of a compiled
    model's build."""
    _check_backend(backend)
    name, cid, param = codec_setting(codec_spec)
    n = frame_elements(frame_bytes)
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames must be an int ≥ 1, got {frames!r}")
    cfg = GeneratorConfig(codec=cid, param=param, elements=n, rate_bytes_per_cycle=255.0,
                          scale_bits=0x41000000)
    beats = frames * (-(-frame_bytes // DATA_BYTES))
    run = _measure(
        backend, lambda compiled: _GenTx([cid]),
        RunPorts(events=("host_beat",), done="done", close="close"),
        key=f"_GenTx(codecs=[{cid}])", cache_dir=cache_dir, jobs=jobs,
        statics={**config_values(cfg), "n_frames": frames, "start": 1},
        cycles=10_000 + 100 * beats, quiet=100, progress=progress,
        build_progress=build_progress)
    host_beats, first_host, last_host = run.events["host_beat"]
    host_bytes = frames * frame_bytes
    host_cycles = last_host - first_host + 1
    to_gbps = 8 * CLOCK_HZ / 1e9
    return FrameLengthResult(
        codec=name, frame_bytes=frame_bytes,
        host_gbps=host_bytes / host_cycles * to_gbps,
        # wire bytes over the time the host side took: wire frames close late (when
        # full), so a first-to-last wire window would mean nothing for compressing codecs
        wire_gbps=run.bytes / host_cycles * to_gbps,
        ceiling_gbps=bus_ceiling_gbps(frame_bytes),
        ratio=host_bytes / run.bytes, cycles=host_cycles, **_build_fields(run))


def by_host_bw(host_bw, codec_spec, frame_bytes, *, cycles=3000, warmup=300,
               backend="amaranth", cache_dir=None, jobs=2, progress=None, build_progress=None,
               lane_module=True):
    """N generators at 100 Gb/s each onto one wire (see the module docstring).

    ``backend``, ``cache_dir``, ``jobs``, ``progress`` and ``build_progress`` as
    :func:`by_frame_length`. On
    ``"compiled"`` the lanes are instances of one :class:`GeneratorLane` module, compiled
    once (``TxArray(..., lane_module=...)``); ``lane_module=False`` exports and compiles the
    whole array instead, every lane elaborated (the other build route, measured in
    ``bench/fastsim_arrays.py``; ``docs/fastsim.md``)."""
    _check_backend(backend)
    check_run(warmup=warmup, cycles=cycles)
    name, cid, param = codec_setting(codec_spec)
    n = frame_elements(frame_bytes)
    lanes = lanes_for(host_bw)
    cfg = GeneratorConfig(codec=cid, param=param, elements=n, scale_bits=0x41000000)
    values = config_values(cfg)
    control = data.Layout.cast(GeneratorControl)
    ctrl = control.const({**{key: values[key] for key, _ in control if key in values},
                          "start": 1}).as_bits()

    module = LANE_MODULE if lane_module else None

    def array(compiled):
        return _ArrayWire(TxArray(host_bw, codecs=[cid], max_elements=MAX_ELEMENTS,
                                  lane_module=module if compiled else None))

    run = _measure(
        backend, array, RunPorts(snapshots=("frames_sent",)),
        blocks={module: lambda: GeneratorLane([cid], max_elements=MAX_ELEMENTS)}
        if module else None,
        key=f"_ArrayWire(TxArray({host_bw}, codecs=[{cid}], max_elements={MAX_ELEMENTS}, "
            f"lane_module={module!r}))",
        cache_dir=cache_dir, jobs=jobs, statics={"ctrl": ctrl}, warmup=warmup, cycles=cycles,
        progress=progress, build_progress=build_progress)
    sent0, sent1 = run.before["frames_sent"], run.after["frames_sent"]
    per_lane = [((sent1 >> 32 * k) - (sent0 >> 32 * k)) & 0xFFFFFFFF for k in range(lanes)]
    to_gbps = 8 * CLOCK_HZ / 1e9
    gen_gbps = [f * frame_bytes / cycles * to_gbps for f in per_lane]
    programmed = cfg.rate_bytes_per_cycle * to_gbps
    info = codec_info(cid)
    return HostBwResult(
        host_bw=host_bw, codec=name, lanes=lanes, frame_bytes=frame_bytes,
        generator_gbps_min=min(gen_gbps),
        # a frame is whole or not sent: allow one frame of quantisation per lane
        all_full_rate=all(g >= programmed - frame_bytes / cycles * to_gbps for g in gen_gbps),
        wire_utilisation=run.beats / cycles, wire_gbps=run.bytes / cycles * to_gbps,
        ratio_needed=lanes * programmed / bus_ceiling_gbps(frame_bytes),
        ratio_codec=info.ratio(param if info.param_range else None), cycles=cycles,
        **_build_fields(run))
