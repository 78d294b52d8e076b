"""cocotb side of the co-simulation: clocks, the shell's reset, AXI-Lite, the four streams.

Everything that touches the design goes through cocotbext-axi (``AxiLiteMaster``,
``AxiStreamSource``/``Sink``/``Monitor``) on ``cosim_top`` (``cosim_top.v``), a
wrapper that only flattens each stream's three ``tuser_*`` ports into one.
The plugin directory's own ``manifest.json`` and ``registers.json`` (what
``write_opennic_plugin`` wrote) give the build parameters and register offsets.

Environment (set by ``tests/cosim/test_cosim.py``): ``COSIM_PLUGIN_DIR`` (the plugin
directory), ``COSIM_REPORT`` (a JSON-lines file each test appends its
statistics to: simulated cycles, wall seconds).
"""

import itertools
import json
import logging
import os
import time
import warnings
from pathlib import Path

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, SimTimeoutError, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamMonitor,
    AxiStreamSink,
    AxiStreamSource,
)
from traffic import random_bits, tuser, untuser

# cocotbext-axi 0.1.28 still uses cocotb's Event.data and setimmediatevalue, both
# deprecated in cocotb 2.0
warnings.filterwarnings("ignore", "The data field will be removed", DeprecationWarning)
warnings.filterwarnings("ignore", "Use `handle.set", DeprecationWarning)

__all__ = ["PluginDir", "Bench", "OKAY", "SLVERR", "AXIS_NS", "AXIL_NS", "RST_DONE_EDGES",
           "report"]

AXIS_NS = 4        # axis_aclk, 250 MHz
AXIL_NS = 8        # axil_aclk, 125 MHz, phase aligned with axis_aclk
OKAY, SLVERR = 0, 2
#: mod_rstn[0] high to mod_rst_done[0] high, axil cycles (docs/opennic.md) ...
DONE_CYCLES = 24
#: ... as :meth:`Bench.start` counts them: rising edges of axil_aclk from the write of
#: mod_rstn until mod_rst_done[0] reads 1 right after one: the 2-flop input
#: synchronizer, the 24 cycles, and the edge whose update the read does not yet see
RST_DONE_EDGES = DONE_CYCLES + 3


class PluginDir:
    """What ``write_opennic_plugin`` wrote: the manifest and the register map."""

    def __init__(self, path=None):
        self.path = Path(path or os.environ["COSIM_PLUGIN_DIR"])
        self.manifest = json.loads((self.path / "manifest.json").read_text())
        regmap = json.loads((self.path / "registers.json").read_text())
        self.size = regmap["size"]
        self.registers = {r["name"]: r for r in regmap["registers"]}
        self.params = self.manifest["params"]
        self.codec_names = [c["name"] for c in self.manifest["codecs"]]
        self.codec_ids = [c["id"] for c in self.manifest["codecs"]]
        self.port = self.params["port"]
        self.mtu = self.params["mtu"]

    def offset(self, name):
        return self.registers[name]["offset"]

    def gaps(self):
        """Word addresses inside the map's size that no register holds, and some outside."""
        used = {r["offset"] for r in self.registers.values()}
        inside = [a for a in range(0, self.size, 4) if a not in used]
        # the first gap, one between the global and host blocks, the window's last word
        picks = sorted({inside[0], 0x0F00 if 0x0F00 in inside else inside[1], inside[-1]})
        return picks + [self.size, self.size + 0x1000, 0x8000_0000, 0xFFFF_FFFC]


def _quiet(*objs):
    for o in objs:
        o.log.setLevel(logging.WARNING)


class Bench:
    """Clocks, reset and bus-functional models around ``cosim_top``.

    ``idle``/``backpressure``: probability that a source pauses (tvalid low) or a sink
    pauses (tready low) in a cycle; the patterns are seeded ``itertools.cycle`` lists.
    With ``loopback`` the wrapper ties adapter TX to RX: ``self.wire`` is then a monitor
    of the looped stream.
    """

    def __init__(self, dut, plugin, *, seed, idle=0.0, backpressure=0.0, loopback=False):
        self.dut = dut
        self.plugin = plugin
        self.seed = seed
        self.idle = idle
        self.backpressure = backpressure
        self.loopback = loopback
        self.axil = None
        self.rst_done_cycles = None
        self.transactions = 0         # AXI-Lite reads and writes

    # ---- start-up -----------------------------------------------------------------
    async def start(self):
        """Clocks; reset as the shell does (mod_rstn low for 8 axil cycles, then high; wait
        for mod_rst_done[0]); the bus-functional models."""
        dut = self.dut
        Clock(dut.axis_aclk, AXIS_NS, unit="ns").start()
        Clock(dut.axil_aclk, AXIL_NS, unit="ns").start()
        for name in ("s_axil_awvalid", "s_axil_wvalid", "s_axil_arvalid", "h2c_tvalid",
                     "rx_tvalid"):
            getattr(dut, name).value = 0
        for name in ("s_axil_bready", "s_axil_rready", "c2h_tready", "tx_tready"):
            getattr(dut, name).value = 0
        dut.loopback.value = int(self.loopback)
        dut.mod_rstn.value = 0
        await ClockCycles(dut.axil_aclk, 8)
        assert int(dut.mod_rst_done.value) == 0xFFFE, "mod_rst_done during reset"
        assert int(dut.h2c_tready.value) == 0, "h2c tready high during reset"
        assert int(dut.rx_tready.value) == 0, "rx tready high during reset"
        # The models are made only now: compiled as SystemVerilog, Icarus shows X on
        # some outputs before the first axil edge (docs/cosim.md), which
        # cocotbext-axi's monitors refuse.
        self._models()
        dut.mod_rstn.value = 0xFFFF
        self.rst_done_cycles = 0
        while not int(dut.mod_rst_done.value) & 1 and self.rst_done_cycles < 200:
            await RisingEdge(dut.axil_aclk)
            self.rst_done_cycles += 1
        assert int(dut.mod_rst_done.value) == 0xFFFF
        assert self.rst_done_cycles == RST_DONE_EDGES, self.rst_done_cycles
        self.t0 = get_sim_time("ns")
        self.wall0 = time.perf_counter()

    def _models(self):
        dut, clk = self.dut, self.dut.axis_aclk
        self.h2c = AxiStreamSource(AxiStreamBus.from_prefix(dut, "h2c"), clk)
        self.c2h = AxiStreamSink(AxiStreamBus.from_prefix(dut, "c2h"), clk)
        if self.loopback:
            self.wire = AxiStreamMonitor(AxiStreamBus.from_prefix(dut, "wire"), clk)
            ends = [self.h2c, self.c2h, self.wire]
        else:
            self.tx = AxiStreamSink(AxiStreamBus.from_prefix(dut, "tx"), clk)
            self.rx = AxiStreamSource(AxiStreamBus.from_prefix(dut, "rx"), clk)
            ends = [self.h2c, self.c2h, self.tx, self.rx]
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.axil_aclk)
        w, r = self.axil.write_if, self.axil.read_if
        _quiet(*ends, w, r, w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel)
        k = itertools.count(self.seed * 16)
        for src in (self.h2c, None if self.loopback else self.rx):
            if src is not None and self.idle:
                src.set_pause_generator(itertools.cycle(random_bits(next(k), self.idle)))
        for sink in (self.c2h, None if self.loopback else self.tx):
            if sink is not None and self.backpressure:
                sink.set_pause_generator(itertools.cycle(random_bits(next(k),
                                                                     self.backpressure)))
        # AXI-Lite: every channel pauses at random, so address, data and response
        # handshakes come in every order
        for ch in (w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel):
            ch.set_pause_generator(itertools.cycle(random_bits(next(k), 0.3)))

    # ---- AXI-Lite --------------------------------------------------------------------
    def _addr(self, reg):
        return reg if isinstance(reg, int) else self.plugin.offset(reg)

    async def read(self, reg):
        """``(value, resp)`` of one 32-bit read."""
        self.transactions += 1
        r = await with_timeout(self.axil.read(self._addr(reg), 4), 20, "us")
        return int.from_bytes(r.data, "little"), int(r.resp)

    async def write(self, reg, value):
        self.transactions += 1
        r = await with_timeout(self.axil.write(self._addr(reg), value.to_bytes(4, "little")),
                               20, "us")
        return int(r.resp)

    async def read_ok(self, reg):
        value, resp = await self.read(reg)
        assert resp == OKAY, f"read {reg}: resp {resp}"
        return value

    async def write_ok(self, reg, value):
        resp = await self.write(reg, value)
        assert resp == OKAY, f"write {reg}: resp {resp}"

    async def read64(self, name):
        lo = await self.read_ok(f"{name}_lo")
        return lo | await self.read_ok(f"{name}_hi") << 32

    # ---- streams ---------------------------------------------------------------------
    @staticmethod
    async def send(source, frames, dst=0):
        """Queue ``[(bytes, tuser_src)]`` on a source; tuser_size is the frame's length."""
        for data, src in frames:
            await source.send(AxiStreamFrame(data, tuser=tuser(len(data), src, dst)))

    @staticmethod
    async def collect(sink, n, timeout_us=20, out=None):
        """``n`` frames from a sink or monitor as ``(bytes, size, src, dst)``, checking the
        AXI-Stream rules the spec adds: tkeep holes only at the end of the last beat,
        tuser constant over the frame, tuser_size = bytes delivered. ``timeout_us``: the
        longest wait for one frame; ``out``: a list to append to (seen after a failure)."""
        out = [] if out is None else out
        for _ in range(n):
            try:
                f = await with_timeout(sink.recv(compact=False), timeout_us, "us")
            except SimTimeoutError:
                raise AssertionError(f"{sink.bus._name}: {len(out)} of {n} frames, then none "
                                     f"for {timeout_us} us") from None
            keep = list(f.tkeep)
            ones = sum(keep)
            # ones then zeros, and the zeros within the last beat
            assert keep == [1] * ones + [0] * (len(keep) - ones) and \
                len(keep) - ones < 64, f"tkeep holes in frame {len(out)}"
            users = f.tuser if isinstance(f.tuser, list) else [f.tuser]
            assert len(set(users)) == 1, f"tuser changes within frame {len(out)}"
            size, src, dst = untuser(users[0])
            data = bytes(f.tdata[:ones])
            assert size == len(data), f"tuser_size {size}, {len(data)} bytes (frame {len(out)})"
            out.append((data, size, src, dst))
        return out

    # ---- statistics ------------------------------------------------------------------
    def cycles(self):
        return int((get_sim_time("ns") - self.t0) // AXIS_NS)

    def wall(self):
        return time.perf_counter() - self.wall0


def report(name, bench, **extra):
    """Append this test's statistics to ``$COSIM_REPORT`` (one JSON object per line)."""
    path = os.environ.get("COSIM_REPORT")
    entry = {"test": name, "cycles": bench.cycles(), "wall_s": round(bench.wall(), 3),
             "axil_transactions": bench.transactions} | extra
    bench.dut._log.info("stats %s", entry)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")
