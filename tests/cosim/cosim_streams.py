"""cocotb tests of the generated plugin (one interface, no generators): registers and reset
over AXI-Lite, H2C → adapter TX and adapter RX → C2H against the numpy reference.

Run by ``tests/cosim/test_cosim.py`` through cocotb's runner; ``COSIM_PLUGIN_DIR`` names the
directory ``write_opennic_plugin`` wrote.
"""

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from harness import SLVERR, Bench, PluginDir, report
from traffic import (
    TUSER_DST_C2H,
    TUSER_DST_TX,
    expected_src,
    inspect,
    stream_test_traffic,
)

from squeezenic_hw.reference import lane as lr
from squeezenic_hw.spec.codecs import parse_codec_spec
from squeezenic_hw.spec.frames import classify_host_frame, classify_wire_frame

PLUGIN_ID = 0x53515A4E      # "SQZN"


def _version_word(text):
    major, minor, patch = (int(p) for p in text.split(".")[:3])
    return major << 16 | minor << 8 | patch


@cocotb.test(timeout_time=2000, timeout_unit="us")
async def registers(dut):
    """Reset as the shell does; every register of registers.json answers OKAY with its
    reset value or build constant; rw registers keep their width; writes to read-only
    registers are ignored; unmapped addresses answer SLVERR (read data 0), never a hang."""
    plugin = PluginDir()
    tb = Bench(dut, plugin, seed=1)
    await tb.start()

    p, regs = plugin.params, plugin.registers
    constants = {"id": PLUGIN_ID, "version": _version_word(plugin.manifest["version"]),
                 "build_num_intf": p["num_intf"], "build_gen_lanes": p["gen_lanes"],
                 "build_codecs": sum(1 << c for c in plugin.codec_ids),
                 "build_mtu": p["mtu"], "build_port": p["port"],
                 "build_max_host_elements": p["max_host_elements"],
                 "build_src_port_base": p["src_port_base"], "build_rx_lanes": p["rx_lanes"],
                 "build_gen_codecs": sum({1 << parse_codec_spec(s)[0].id
                                          for s in p["gen_codecs"]})}
    for name, reg in regs.items():
        value = await tb.read_ok(name)
        if name in constants:
            assert value == constants[name], (name, hex(value))
        elif reg["access"] == "rw":
            assert value == reg["reset"], (name, value, reg["reset"])
        else:                    # w1p reads 0; counters are 0 after reset
            assert value == 0, (name, value)

    for name, reg in regs.items():
        if reg["access"] != "rw" or name == "gen_start":
            continue
        await tb.write_ok(name, 0xFFFF_FFFF)
        assert await tb.read_ok(name) == (1 << reg["width"]) - 1, name
        await tb.write_ok(name, reg["reset"])
        assert await tb.read_ok(name) == reg["reset"], name
    await tb.write_ok("scratch", 0x1234_5678)
    for name in ("id", "build_codecs", "host0_tx_wire_frames"):
        await tb.write_ok(name, 0xA5A5_A5A5)
        assert await tb.read_ok(name) == constants.get(name, 0), name
    for addr in plugin.gaps():
        assert await tb.read(addr) == (0, SLVERR), hex(addr)
        assert await tb.write(addr, 0xFFFF_FFFF) == SLVERR, hex(addr)
    assert await tb.read_ok("scratch") == 0x1234_5678
    report("registers", tb)


async def _streams(dut, name, *, seed, idle, backpressure, full_rate=False):
    plugin = PluginDir()
    codecs, port, mtu = plugin.codec_names, plugin.port, plugin.mtu
    mhe = plugin.params["max_host_elements"]
    built_in = set(plugin.codec_ids)

    def tx_ref(frames):
        return lr.tx(frames, port=port, mtu=mtu, codecs=codecs)

    tx_in, rx_in = stream_test_traffic(seed, codecs, port=port, mtu=mtu, max_host_elements=mhe,
                                       tx_reference=lambda f: tx_ref(f)[0])
    want_tx, tx_counters = tx_ref([f for f, _ in tx_in])
    want_c2h, rx_counters = lr.rx([f for f, _ in rx_in], port=port, max_host_elements=mhe,
                                  codecs=codecs)
    # every codec of the build is encoded and decoded
    for frames, classify in ((tx_in, classify_host_frame), (rx_in, classify_wire_frame)):
        seen = {classify(f, port=port, codecs_built_in=built_in)[0].codec for f, _ in frames
                if classify(f, port=port, codecs_built_in=built_in)[1] is None}
        assert seen == built_in, (seen, built_in)
    src_tx, built_tx = expected_src(tx_in, want_tx, lambda f: classify_host_frame(
        f, port=port, codecs_built_in=built_in)[1] is None)
    src_c2h, built_c2h = expected_src(rx_in, want_c2h, lambda f: classify_wire_frame(
        f, port=port, codecs_built_in=built_in)[1] is None)

    tb = Bench(dut, plugin, seed=seed, idle=idle, backpressure=backpressure)
    await tb.start()
    stalls = {"h2c": 0}
    if full_rate:
        async def watch():
            while True:
                await RisingEdge(dut.axis_aclk)
                if dut.h2c_tvalid.value == 1 and dut.h2c_tready.value == 0:
                    stalls["h2c"] += 1
        watcher = cocotb.start_soon(watch())

    got_tx = cocotb.start_soon(tb.collect(tb.tx, len(want_tx)))
    got_c2h = cocotb.start_soon(tb.collect(tb.c2h, len(want_c2h)))
    await Bench.send(tb.h2c, tx_in, dst=0x1234)
    await Bench.send(tb.rx, rx_in, dst=0x4321)
    await tb.h2c.wait()
    if full_rate:
        watcher.cancel()
    # every host frame is in the lane: close the open wire frame (reference: close_end)
    await ClockCycles(dut.axis_aclk, 4)
    await tb.write_ok("tx_close", 1)
    got_tx = await got_tx
    got_c2h = await got_c2h
    await tb.rx.wait()
    traffic_cycles, traffic_wall = tb.cycles(), tb.wall()

    for lane, got, want, dst, srcs, built in (
            ("tx", got_tx, want_tx, TUSER_DST_TX, src_tx, built_tx),
            ("c2h", got_c2h, want_c2h, TUSER_DST_C2H, src_c2h, built_c2h)):
        for k, ((data, _, _, d), w) in enumerate(zip(got, want, strict=True)):
            if data != w:
                diff = next((i for i, (a, b) in enumerate(zip(data, w, strict=False))
                             if a != b),
                            min(len(data), len(w)))
                raise AssertionError(f"{lane} frame {k}: {len(data)} bytes, reference "
                                     f"{len(w)}; first difference at byte {diff}")
            assert d == dst, f"{lane} frame {k}: tuser_dst {d:#x}, want {dst:#x}"
        assert [g[2] for g in got] == srcs, f"{lane}: tuser_src"
        # scapy's reading of every frame the hardware built (lengths, checksums, header)
        for (data, *_), b in zip(got, built, strict=True):
            if b:
                assert inspect(data, port=port, encoded=lane == "tx") is not None

    hw_tx = {name: await tb.read_ok(f"host0_tx_{name}") for name in tx_counters}
    hw_rx = {name: await tb.read_ok(f"host0_rx_{name}") for name in rx_counters}
    assert hw_tx == tx_counters, {k: (hw_tx[k], v) for k, v in tx_counters.items()
                                  if hw_tx[k] != v}
    assert hw_rx == rx_counters, {k: (hw_rx[k], v) for k, v in rx_counters.items()
                                  if hw_rx[k] != v}
    assert await tb.read_ok("host0_tx_size_errors") == 0
    assert await tb.read_ok("host0_rx_size_errors") == 0
    assert tb.tx.empty() and tb.c2h.empty(), "frames beyond the reference's"
    if full_rate:
        assert stalls["h2c"] == 0, f"h2c stalled {stalls['h2c']} cycles without backpressure"
    beats = {lane: sum(-(-len(f) // 64) for f in frames) for lane, frames in
             (("h2c", [f for f, _ in tx_in]), ("tx", want_tx), ("rx", [f for f, _ in rx_in]),
              ("c2h", want_c2h))}
    report(name, tb, idle=idle, backpressure=backpressure, beats=beats, frames={
        "h2c": len(tx_in), "tx": len(want_tx), "rx": len(rx_in), "c2h": len(want_c2h)},
        traffic_cycles=traffic_cycles, traffic_wall_s=round(traffic_wall, 3),
        h2c_stalls=stalls["h2c"] if full_rate else None)


@cocotb.test(timeout_time=4000, timeout_unit="us")
async def streams_full_rate(dut):
    """No idle, no backpressure: TX takes one host beat per cycle (never stalls H2C)."""
    await _streams(dut, "streams_full_rate", seed=11, idle=0.0, backpressure=0.0, full_rate=True)


@cocotb.test(timeout_time=4000, timeout_unit="us")
async def streams_idle_backpressure(dut):
    """30 % idle on both inputs, 30 % backpressure on both outputs."""
    await _streams(dut, "streams_idle_backpressure", seed=12, idle=0.3, backpressure=0.3)


@cocotb.test(timeout_time=6000, timeout_unit="us")
async def streams_heavy_backpressure(dut):
    """10 % idle, 70 % backpressure."""
    await _streams(dut, "streams_heavy_backpressure", seed=13, idle=0.1, backpressure=0.7)
