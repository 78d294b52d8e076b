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

Both run Amaranth's simulator; the figures are measured, not computed.
"""

import time
from dataclasses import dataclass

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.generator import GradientGenerator
from squeezenic_hw.gateware.arrays.lane_arrays import TxArray
from squeezenic_hw.gateware.common.layouts import DATA_BYTES, axis_signature
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.generator import GeneratorConfig, config_values
from squeezenic_hw.spec.header import HEADER_LEN
from squeezenic_hw.spec.scaling import lanes_for

__all__ = ["CLOCK_HZ", "BUS_GBPS", "bus_ceiling_gbps", "by_frame_length", "by_host_bw",
           "FrameLengthResult", "HostBwResult", "codec_setting"]

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


class _GenTx(wiring.Component):
    def __init__(self, codecs, max_elements):
        self.gen = GradientGenerator(max_elements)
        self.lane = TxLane(codecs=codecs)
        super().__init__({"o": Out(axis_signature()), "close": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen, m.submodules.lane = self.gen, self.lane
        wiring.connect(m, self.gen.o, self.lane.i)
        wiring.connect(m, self.lane.o, wiring.flipped(self.o))
        m.d.comb += self.lane.close.eq(self.close)
        return m


def _elements(frame_bytes):
    if frame_bytes < HEADER_LEN + 4 or (frame_bytes - HEADER_LEN) % 4:
        raise ValueError(f"frame length must be 64 + 4n bytes (n ≥ 1), got {frame_bytes}")
    return (frame_bytes - HEADER_LEN) // 4


def by_frame_length(codec_spec, frame_bytes, *, frames=12):
    """Host and wire Gb/s of one TX lane fed at full bus rate (see the module docstring)."""
    name, cid, param = codec_setting(codec_spec)
    n = _elements(frame_bytes)
    dut = _GenTx([cid], max(n, 1))
    cfg = GeneratorConfig(codec=cid, param=param, elements=n, rate_bytes_per_cycle=255.0,
                          scale_bits=0x41000000)
    res = {}

    async def bench(ctx):
        gen = dut.gen
        for key, value in config_values(cfg).items():
            ctx.set(getattr(gen, key), value)
        ctx.set(gen.n_frames, frames)
        ctx.set(gen.start, 1)
        ctx.set(dut.o.ready, 1)
        first_host = last_host = None
        t, wire_bytes, quiet, closing = 0, 0, 0, False
        while True:
            _, _, hv, hr, wv, keep = await ctx.tick().sample(
                gen.o.valid, gen.o.ready, dut.o.valid, dut.o.payload.keep)
            t += 1
            if hv and hr:
                first_host = t if first_host is None else first_host
                last_host = t
            if wv:
                wire_bytes += bin(int(keep)).count("1")
                quiet = 0
            else:
                quiet += 1
            if not closing and ctx.get(gen.frames_sent) == frames and not ctx.get(gen.busy):
                # the open wire frame closes: wait for it (and anything else) to leave
                ctx.set(dut.close, 1)
                closing, quiet = True, 0
            if closing and quiet > 100:
                break
        res.update(first_host=first_host, last_host=last_host, wire_bytes=wire_bytes)

    sim = Simulator(dut)
    sim.add_clock(1 / CLOCK_HZ)
    sim.add_testbench(bench)
    sim.run()
    host_bytes = frames * frame_bytes
    host_cycles = res["last_host"] - res["first_host"] + 1
    to_gbps = 8 * CLOCK_HZ / 1e9
    return FrameLengthResult(
        codec=name, frame_bytes=frame_bytes,
        host_gbps=host_bytes / host_cycles * to_gbps,
        # wire bytes over the time the host side took: wire frames close late (when
        # full), so a first-to-last wire window would mean nothing for compressing codecs
        wire_gbps=res["wire_bytes"] / host_cycles * to_gbps,
        ceiling_gbps=bus_ceiling_gbps(frame_bytes),
        ratio=host_bytes / res["wire_bytes"], cycles=host_cycles)


def by_host_bw(host_bw, codec_spec, frame_bytes, *, cycles=3000, warmup=300):
    """N generators at 100 Gb/s each onto one wire (see the module docstring)."""
    name, cid, param = codec_setting(codec_spec)
    n = _elements(frame_bytes)
    lanes = lanes_for(host_bw)
    dut = TxArray(host_bw, codecs=[cid], max_elements=max(n, 1))
    cfg = GeneratorConfig(codec=cid, param=param, elements=n, scale_bits=0x41000000)
    res = {}

    async def bench(ctx):
        c = dut.ctrl
        for key, value in config_values(cfg).items():
            if hasattr(c, key):
                ctx.set(getattr(c, key), value)
        ctx.set(c.start, 1)
        ctx.set(dut.o.ready, 1)
        beats, bytes_ = 0, 0
        sent0 = None
        for t in range(warmup + cycles):
            _, _, valid, keep = await ctx.tick().sample(dut.o.valid, dut.o.payload.keep)
            if t == warmup:
                sent0 = [ctx.get(dut.frames_sent[k]) for k in range(lanes)]
            if t >= warmup and valid:
                beats += 1
                bytes_ += bin(int(keep)).count("1")
        sent1 = [ctx.get(dut.frames_sent[k]) for k in range(lanes)]
        res.update(beats=beats, bytes=bytes_,
                   per_lane=[(b - a) for a, b in zip(sent0, sent1, strict=True)])

    sim = Simulator(dut)
    sim.add_clock(1 / CLOCK_HZ)
    sim.add_testbench(bench)
    start = time.perf_counter()
    sim.run()
    wall = time.perf_counter() - start
    to_gbps = 8 * CLOCK_HZ / 1e9
    gen_gbps = [f * frame_bytes / cycles * to_gbps for f in res["per_lane"]]
    programmed = cfg.rate_bytes_per_cycle * to_gbps
    info = codec_info(cid)
    return HostBwResult(
        host_bw=host_bw, codec=name, lanes=lanes, frame_bytes=frame_bytes,
        generator_gbps_min=min(gen_gbps),
        # a frame is whole or not sent: allow one frame of quantisation per lane
        all_full_rate=all(g >= programmed - frame_bytes / cycles * to_gbps for g in gen_gbps),
        wire_utilisation=res["beats"] / cycles, wire_gbps=res["bytes"] / cycles * to_gbps,
        ratio_needed=lanes * programmed / bus_ceiling_gbps(frame_bytes),
        ratio_codec=info.ratio(param if info.param_range else None), cycles=cycles,
        sim_cycles_per_s=(warmup + cycles) / wall)
