"""cocotb test of a ``--host-bw`` > 100 build with the wire looped back: the on-chip
generators started over AXI-Lite, their wire frames merged with host traffic, looped
into RX, split to the checkers and the host RX lane; every counter compared with
``squeezenic_hw.reference.array`` and ``squeezenic_hw.reference.lane``.

Run by ``tests/cosim/test_cosim.py``; ``COSIM_PLUGIN_DIR`` names the plugin directory.
"""

import struct

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles
from harness import Bench, PluginDir, report
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from traffic import TUSER_DST_C2H, TUSER_DST_TX, expected_src, make_streams, tx_bypass_frames

from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.spec.frames import classify_host_frame, classify_wire_frame
from squeezenic_hw.spec.generator import GeneratorConfig

CHECKER = ("frames", "elements", "bytes", "gaps", "last_offset_end", "bypass", "crc")
WIDE = {"frames", "elements", "bytes", "gaps", "bypass"}      # 64-bit: _lo/_hi


def _f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _registers(cfg):
    """gen_* register values of a generator configuration, as docs/registers.md says."""
    return {"elements": cfg.elements, "codec": cfg.codec, "param": cfg.param,
            "stochastic": int(cfg.stochastic), "scale": cfg.scale_bits, "aux": cfg.aux_bits,
            "seed": cfg.seed, "value_seed": cfg.value_seed, "offset": cfg.offset,
            "flush_every": cfg.flush_every,
            "rate_bytes_per_cycle": round(cfg.rate_bytes_per_cycle * 256)}     # Q8.8


@cocotb.test(timeout_time=8000, timeout_unit="us")
async def generators_looped_back(dut):
    """Generators over AXI-Lite with host traffic (30 % idle, 30 % C2H backpressure) on
    the same interface, the wire looped back."""
    plugin = PluginDir()
    p = plugin.params
    n_lanes, port, base = p["gen_lanes"], plugin.port, p["src_port_base"]
    codecs = plugin.codec_names
    assert n_lanes >= 2, "needs a --host-bw > 100 build"
    codec = plugin.codec_ids[-1]
    cfg = GeneratorConfig(codec=codec, elements=150, flush_every=3, value_seed=11, seed=3,
                          offset=1000, scale_bits=_f32(0.25), aux_bits=_f32(-0.5),
                          rate_bytes_per_cycle=24.0)
    n_frames = 8
    expected = array_reference(n_lanes, cfg, n_frames, codecs=codecs, mtu=plugin.mtu,
                               port=port, max_host_elements=p["max_host_elements"],
                               src_port_base=base)
    rng = np.random.default_rng(21)
    host = [f for s in make_streams(rng, codecs * 2, port=port, elements=(200, 600),
                                    max_frame=120) for f in s.frames]
    host += [(f, int(rng.integers(0, 2**16))) for f in tx_bypass_frames(port)[:6]]
    host_wire, host_tx = lr.tx([f for f, _ in host], port=port, mtu=plugin.mtu, codecs=codecs)
    back, host_rx = lr.rx(host_wire, port=port, max_host_elements=p["max_host_elements"],
                          codecs=codecs)
    # what reaches C2H carries the tuser_src of the wire frame, whose own is the host
    # frame's holding its first element
    wire_src, _ = expected_src(host, host_wire, lambda f: classify_host_frame(
        f, port=port, codecs_built_in=set(plugin.codec_ids))[1] is None)
    c2h_src, _ = expected_src(list(zip(host_wire, wire_src, strict=True)), back,
                              lambda f: classify_wire_frame(
                                  f, port=port, codecs_built_in=set(plugin.codec_ids))[1]
                              is None)

    tb = Bench(dut, plugin, seed=5, idle=0.3, backpressure=0.3, loopback=True)
    await tb.start()
    n_wire = sum(len(e["wire"]) for e in expected) + len(host_wire)
    wire, c2h = [], []
    wire_task = cocotb.start_soon(tb.collect(tb.wire, n_wire, out=wire))
    c2h_task = cocotb.start_soon(tb.collect(tb.c2h, len(back), out=c2h))

    for name, value in _registers(cfg).items():
        await tb.write_ok(f"gen_{name}", value)
    await tb.write_ok("gen_n_frames", n_frames)
    await tb.write_ok("gen_start", 1)
    await Bench.send(tb.h2c, host, dst=0x0F0F)
    sent = []
    for _ in range(200):
        sent = [await tb.read_ok(f"lane{k}_frames_sent") for k in range(n_lanes)]
        if sent == [n_frames] * n_lanes and tb.h2c.idle():
            break
        await ClockCycles(dut.axis_aclk, 50)
    assert sent == [n_frames] * n_lanes, sent
    await ClockCycles(dut.axis_aclk, 4)
    await tb.write_ok("gen_close", 1)
    await tb.write_ok("tx_close", 1)
    try:
        await wire_task
        await c2h_task
    except AssertionError:
        dut._log.error("wire frames seen (UDP source port, bytes): %s",
                       [(Ether(d)[UDP].sport if UDP in Ether(d) else None, len(d))
                        for d, *_ in wire])
        raise
    for _ in range(100):             # the last wire frames' way through RX to the checkers
        checked = [await tb.read_ok(f"lane{k}_chk_frames_lo") for k in range(n_lanes)]
        if checked == [e["checker"]["frames"] for e in expected]:
            break
        await ClockCycles(dut.axis_aclk, 20)
    await tb.write_ok("gen_start", 0)

    # the wire: per generator lane and for the host lane, the reference's frames in order
    by_src = {}
    for data, _, src, dst in wire:
        assert dst == TUSER_DST_TX, f"wire tuser_dst {dst:#x}"
        pkt = Ether(data)
        sport = pkt[UDP].sport if UDP in pkt else None
        lane = sport - base if sport is not None and 0 <= sport - base < n_lanes else "host"
        by_src.setdefault(lane, []).append((data, src))
    for k in range(n_lanes):
        assert [d for d, _ in by_src.get(k, [])] == expected[k]["wire"], f"lane {k} wire"
        assert all(s == k for _, s in by_src[k]), f"lane {k}: tuser_src"
    assert [d for d, _ in by_src.get("host", [])] == host_wire, "host wire frames"
    assert [s for _, s in by_src["host"]] == wire_src, "host wire tuser_src"
    assert [d for d, *_ in c2h] == back, "C2H frames"
    assert [s for _, _, s, _ in c2h] == c2h_src, "C2H tuser_src"
    assert all(d == TUSER_DST_C2H for *_, d in c2h), "C2H tuser_dst"

    for k, e in enumerate(expected):
        assert await tb.read_ok(f"lane{k}_frames_sent") == n_frames
        for side in ("tx", "rx"):
            # the counters the map has (a generator lane's TX side: those a trusted lane
            # moves); the reference's others must be 0
            names = [n for n in e[side] if f"lane{k}_{side}_{n}" in tb.plugin.registers]
            hw = {name: await tb.read_ok(f"lane{k}_{side}_{name}") for name in names}
            want = {n: e[side][n] for n in names}
            assert hw == want, (k, side, {n: (hw[n], v) for n, v in want.items()
                                          if hw[n] != v})
            assert all(v == 0 for n, v in e[side].items() if n not in want), (k, side)
            if f"lane{k}_{side}_size_errors" in tb.plugin.registers:
                assert await tb.read_ok(f"lane{k}_{side}_size_errors") == 0
        hw = {}
        for name in CHECKER:
            hw[name] = await (tb.read64 if name in WIDE else tb.read_ok)(f"lane{k}_chk_{name}")
        assert hw == e["checker"], (k, {n: (hw[n], v) for n, v in e["checker"].items()
                                        if hw[n] != v})
        assert hw["elements"] == n_frames * cfg.elements
    hw_tx = {name: await tb.read_ok(f"host0_tx_{name}") for name in host_tx}
    hw_rx = {name: await tb.read_ok(f"host0_rx_{name}") for name in host_rx}
    assert hw_tx == host_tx and hw_rx == host_rx, (hw_tx, hw_rx)
    report("generators_looped_back", tb, lanes=n_lanes, frames_per_lane=n_frames,
           wire_frames=len(wire), c2h_frames=len(c2h), checker=[e["checker"] for e in expected])
