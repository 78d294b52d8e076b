# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.axil.clock_bridge.AxiLiteClockBridge`.

The bridge runs with its ``s`` side in ``axil`` and its ``m`` side in ``sync`` under
several clock relations: OpenNIC's phase-aligned 125/250 MHz, unrelated ratios
(7 ns vs 4 ns, both ways) and equal periods with a phase offset. In front of an
:class:`~squeezenic_hw.gateware.axil.register_file.AxiLiteRegisterFile` (whose
``ro`` inputs change every ``sync`` cycle) random traffic with random ``aw``/``w``
skew and ``bready``/``rready`` stalls is compared with
``sim.axil.AxiLiteRegisterModel``; an ``ro`` read must return the value of some
``sync`` cycle inside the transaction, and a counter's ``_hi`` the snapshot of the
cycle its ``_lo`` read returned. ``w1p`` pulses must appear once each, in order.
Against a testbench slave that stalls every ready and response at random, the
bridge must still deliver each response once, unchanged, and keep ``m``'s valids
and payloads steady until their handshakes.
"""

import random

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator

from squeezenic_hw.gateware.axil.clock_bridge import AxiLiteClockBridge
from squeezenic_hw.gateware.axil.register_file import AxiLiteRegisterFile
from squeezenic_hw.regmap.registers import RegisterMap
from squeezenic_hw.sim.axil import (
    OKAY,
    SLVERR,
    AxiLiteRegisterModel,
    MovingRoFields,
    axil_read,
    axil_write,
)

from support.unused import rejected

# (axil period, sync period, sync phase) in seconds
CLOCKS = {
    "125_250_aligned": (8e-9, 4e-9, 0.0),
    "7ns_4ns": (7e-9, 4e-9, 0.0),
    "4ns_7ns": (4e-9, 7e-9, 0.0),
    "5ns_5ns_phase": (5e-9, 5e-9, 1.3e-9),
}


def regmap():
    rm = RegisterMap()
    rm.add("ctrl", access="rw", reset=0x0BAD_F00D, group="global")
    rm.add("mode", access="rw", width=4, reset=9, group="global")
    rm.add("kick", access="w1p", width=8, group="global")
    rm.add("status", access="ro", width=12, group="global")
    rm.add_counter64("frames", "frames", "lane0")
    rm.add("scratch", access="rw", offset=0x30, group="lane0")
    rm.add_counter64("bytes", "bytes", "lane0", offset=0x38)
    return rm


class Bench(Elaboratable):
    """Bridge (``axil`` -> ``sync``) in front of a register file with moving ``ro`` inputs."""

    def __init__(self, rm, seed=0):
        self.bridge = AxiLiteClockBridge(s_domain="axil", m_domain="sync")
        self.rf = AxiLiteRegisterFile(rm)
        self.cnt = Signal(64)
        self.moving = MovingRoFields(self.rf.ro_fields, seed=seed)
        self.ro_value = self.moving.value

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = self.bridge
        m.submodules.rf = rf = self.rf
        wiring.connect(m, self.bridge.m, rf.axil)
        m.d.sync += self.cnt.eq(self.cnt + 1)
        self.moving.drive(m, rf.ro, self.cnt)
        return m


def random_address(rng, rm):
    r = rng.random()
    if r < 0.75:
        return rng.choice(rm.registers).offset
    if r < 0.85:
        return rng.choice([a for a in range(0, rm.size, 4) if rm.at(a) is None])
    return rng.choice(rm.registers).offset | (1 << rng.randint(rm.address_bits, 31))


def add_clocks(sim, clocks):
    s_period, m_period, m_phase = CLOCKS[clocks]
    sim.add_clock(s_period, domain="axil")
    sim.add_clock(m_period, phase=m_phase if m_phase else None)


@pytest.mark.parametrize("clocks", list(CLOCKS))
@pytest.mark.parametrize("max_delay", [0, 4])
def test_bridge_register_file(clocks, max_delay):
    rm = regmap()
    bench = Bench(rm, seed=len(clocks) + max_delay)
    model = AxiLiteRegisterModel(rm)
    rng = random.Random(max_delay * 31 + len(clocks))
    bus = bench.bridge.s
    pulses_expected, pulses_seen, latencies = [], [], []
    n_ops = 150

    async def master(ctx):
        for k in range(n_ops):
            addr = random_address(rng, rm)
            c_start = ctx.get(bench.cnt)
            timing = {}
            if rng.random() < 0.45:
                value = rng.getrandbits(32)
                bresp = await axil_write(ctx, bus, addr, value, rng=rng, max_delay=max_delay,
                                         domain="axil", timing=timing)
                want, pulse = model.write(addr, value)
                assert bresp == want, f"op {k}: write 0x{addr:x}: {bresp} != {want}"
                if pulse is not None and pulse[1]:
                    pulses_expected.append((*pulse, c_start, ctx.get(bench.cnt)))
                latencies.append(("w", timing["bvalid"] - max(timing["aw"], timing["w"])))
                for name in bench.rf.rw_fields:
                    assert ctx.get(getattr(bench.rf.rw, name)) == model.rw[name]
            else:
                data, rresp = await axil_read(ctx, bus, addr, rng=rng, max_delay=max_delay,
                                              domain="axil", timing=timing)
                c_end = ctx.get(bench.cnt)
                latencies.append(("r", timing["rvalid"] - timing["ar"]))
                # Some sync cycle in the transaction must give this answer.
                cycles = [c for c in range(c_start, c_end + 1)
                          if model.read(addr, lambda f, c=c: bench.ro_value(f, c),
                                        update=False) == (data, rresp)]
                assert cycles, f"op {k}: read 0x{addr:x}: ({data:#x}, {rresp}) matches no " \
                               f"cycle in {c_start}..{c_end}"
                model.read(addr, lambda f, c=cycles[0]: bench.ro_value(f, c))
        for _ in range(4):
            await ctx.tick("axil")

    async def pulse_monitor(ctx):
        names = list(bench.rf.pulse_fields)
        signals = [getattr(bench.rf.pulse, n) for n in names]
        while True:
            _, _, cnt, *values = await ctx.tick().sample(bench.cnt, *signals)
            for name, value in zip(names, values, strict=True):
                if value:
                    pulses_seen.append((name, value, cnt))

    sim = Simulator(bench)
    add_clocks(sim, clocks)
    sim.add_testbench(master)
    sim.add_testbench(pulse_monitor, background=True)
    sim.run()

    assert [p[:2] for p in pulses_seen] == [p[:2] for p in pulses_expected]
    for (_, _, cycle), (_, _, c_start, c_end) in zip(pulses_seen, pulses_expected,
                                                       strict=True):
        assert c_start <= cycle <= c_end
    # The documented bound: at most 5 s cycles + (L + 4) m cycles, L the slave's latency.
    s_period, m_period, _ = CLOCKS[clocks]
    slave_latency = {"w": bench.rf.write_latency, "r": bench.rf.read_latency}
    for kind, lat in latencies:
        assert lat <= 5 + (slave_latency[kind] + 4) * m_period / s_period + 1e-9, (kind, lat)
    if clocks == "125_250_aligned" and max_delay == 0:
        # Fixed phase relation: the latency is the same for every transaction.
        assert bench.rf.write_latency == bench.rf.read_latency == 2
        assert {lat for _, lat in latencies} == {LATENCY_125_250}


# axil cycles from the last request handshake to bvalid/rvalid at 125/250 MHz, phase
# aligned, in front of a register file with write_latency = read_latency = 2.
LATENCY_125_250 = 7


def stalling_slave(bus, rng, log, *, stall=0.5, max_resp_delay=6):
    """A testbench AXI-Lite slave in ``sync`` that stalls everything at random.

    Writes store ``wdata``; reads return the stored word (or ``addr ^ 0x5A5A5A5A``).
    Addresses with bit 2 set answer SLVERR. Checks that the master (the bridge) keeps
    each ``*valid`` and payload steady until its handshake.
    """
    async def slave(ctx):
        mem = {}
        aw = w = ar = None
        b = r = None           # (countdown, resp[, data])
        held = {}
        while True:
            awready = aw is None and rng.random() >= stall
            wready = w is None and rng.random() >= stall
            arready = ar is None and r is None and rng.random() >= stall
            ctx.set(bus.awready, awready)
            ctx.set(bus.wready, wready)
            ctx.set(bus.arready, arready)
            b_on = b is not None and b[0] <= 0
            r_on = r is not None and r[0] <= 0
            ctx.set(bus.bvalid, b_on)
            ctx.set(bus.bresp, b[1] if b_on else 0)
            ctx.set(bus.rvalid, r_on)
            ctx.set(bus.rresp, r[1] if r_on else 0)
            ctx.set(bus.rdata, r[2] if r_on else 0)
            (_, _, awvalid, awaddr, wvalid, wdata, bready, arvalid, araddr,
             rready) = await ctx.tick().sample(
                bus.awvalid, bus.awaddr, bus.wvalid, bus.wdata, bus.bready,
                bus.arvalid, bus.araddr, bus.rready)
            for key, valid, payload in (("aw", awvalid, awaddr), ("w", wvalid, wdata),
                                        ("ar", arvalid, araddr)):
                if key in held:
                    assert valid and payload == held[key], f"m.{key}valid/payload not held"
                if valid:
                    held[key] = payload
            if awvalid and awready:
                aw = awaddr
                del held["aw"]
            if wvalid and wready:
                w = wdata
                del held["w"]
            if arvalid and arready:
                ar = araddr
                del held["ar"]
            if b_on and bready:
                b = None
            if r_on and rready:
                r = None
            if b is not None:
                b = (b[0] - 1, b[1])
            if r is not None:
                r = (r[0] - 1, *r[1:])
            if aw is not None and w is not None and b is None:
                mem[aw] = w
                log.append(("w", aw, w))
                b = (rng.randint(0, max_resp_delay), SLVERR if aw & 4 else OKAY)
                aw = w = None
            if ar is not None and r is None:
                log.append(("r", ar))
                r = (rng.randint(0, max_resp_delay), SLVERR if ar & 4 else OKAY,
                     mem.get(ar, ar ^ 0x5A5A_5A5A))
                ar = None
    return slave


@pytest.mark.parametrize("clocks", ["125_250_aligned", "7ns_4ns", "4ns_7ns"])
def test_bridge_stalling_slave(clocks):
    bridge = AxiLiteClockBridge()
    rng = random.Random(len(clocks))
    mem = {}
    log = []
    addrs = [0x0, 0x4, 0x8, 0xC, 0x1000, 0xFFFF_FFF0]
    expected_log = []

    async def master(ctx):
        for k in range(80):
            addr = rng.choice(addrs)
            if rng.random() < 0.5:
                value = rng.getrandbits(32)
                bresp = await axil_write(ctx, bridge.s, addr, value, rng=rng, max_delay=5,
                                         domain="axil")
                mem[addr] = value
                expected_log.append(("w", addr, value))
                assert bresp == (SLVERR if addr & 4 else OKAY), f"op {k}"
            else:
                got = await axil_read(ctx, bridge.s, addr, rng=rng, max_delay=5,
                                      domain="axil")
                expected_log.append(("r", addr))
                want = (mem.get(addr, addr ^ 0x5A5A_5A5A), SLVERR if addr & 4 else OKAY)
                assert got == want, f"op {k}: read 0x{addr:x}"

    sim = Simulator(bridge)
    add_clocks(sim, clocks)
    sim.add_testbench(master)
    sim.add_testbench(stalling_slave(bridge.m, random.Random(1), log), background=True)
    sim.run()
    assert log == expected_log       # each request reached the slave exactly once


def test_bridge_same_domain():
    """s_domain == m_domain works too (just latency)."""
    rm = regmap()

    class Top(Elaboratable):
        def __init__(self):
            self.bridge = AxiLiteClockBridge(s_domain="sync", m_domain="sync")
            self.rf = AxiLiteRegisterFile(rm)

        def elaborate(self, platform):
            m = Module()
            m.submodules.bridge = self.bridge
            m.submodules.rf = self.rf
            wiring.connect(m, self.bridge.m, self.rf.axil)
            return m

    top = Top()

    async def master(ctx):
        assert await axil_write(ctx, top.bridge.s, 0x30, 0x1234) == OKAY
        assert await axil_read(ctx, top.bridge.s, 0x30) == (0x1234, OKAY)
        assert await axil_read(ctx, top.bridge.s, 0x20) == (0, SLVERR)
        assert await axil_read(ctx, top.bridge.s, 0x4) == (9, OKAY)

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(master)
    sim.run()


def test_timeout_reports():
    """A master helper facing a dead slave raises instead of hanging."""
    bridge = AxiLiteClockBridge()

    async def master(ctx):
        with pytest.raises(AssertionError, match="timed out after 50 cycles"):
            await axil_write(ctx, bridge.s, 0, 1, domain="axil", timeout=50)

    sim = Simulator(bridge)
    sim.add_clock(8e-9, domain="axil")
    sim.add_clock(4e-9)
    sim.add_testbench(master)
    sim.run()


def test_parameters():
    for bad in ("", None, 3):
        rejected(AxiLiteClockBridge, s_domain=bad, match="s_domain")
        rejected(AxiLiteClockBridge, m_domain=bad, match="m_domain")


@pytest.mark.parametrize("clocks", ["125_250_aligned", "4ns_7ns"])
def test_bridge_concurrent_read_write(clocks):
    """A writer and a reader on ``s`` at once: both finish, each gets its own answers."""
    bridge = AxiLiteClockBridge()
    log = []
    expected = {"w": [], "r": []}
    write_addrs = [0x0, 0x4, 0x10, 0x8000_0000]
    read_addrs = [0x100, 0x104, 0x2000, 0xFFFF_FFFC]

    async def writer(ctx):
        rng = random.Random(1)
        for _ in range(40):
            addr, value = rng.choice(write_addrs), rng.getrandbits(32)
            bresp = await axil_write(ctx, bridge.s, addr, value, rng=rng, max_delay=3,
                                     domain="axil")
            expected["w"].append(("w", addr, value))
            assert bresp == (SLVERR if addr & 4 else OKAY)

    async def reader(ctx):
        rng = random.Random(2)
        for _ in range(40):
            addr = rng.choice(read_addrs)
            got = await axil_read(ctx, bridge.s, addr, rng=rng, max_delay=3, domain="axil")
            expected["r"].append(("r", addr))
            assert got == (addr ^ 0x5A5A_5A5A, SLVERR if addr & 4 else OKAY)

    sim = Simulator(bridge)
    add_clocks(sim, clocks)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.add_testbench(stalling_slave(bridge.m, random.Random(3), log), background=True)
    sim.run()
    for kind in ("w", "r"):
        assert [e for e in log if e[0] == kind] == expected[kind]


@pytest.mark.parametrize("clocks", ["125_250_aligned", "4ns_7ns"])
def test_bridge_outstanding(clocks):
    """aw, w and ar offered in the same cycle, then a second write and read before the
    first responses are taken, with bready/rready low for a long time: every request gets
    exactly one response, in order, and the register file ends with the last write."""
    rm = regmap()
    bench = Bench(rm)
    s = bench.bridge.s
    scratch, mode, ctrl = rm["scratch"].offset, rm["mode"].offset, rm["ctrl"].offset
    log = {"b": [], "r": []}

    async def master(ctx):
        async def offer(**channels):
            # Present the given channels; drop each valid at its handshake.
            pending = dict(channels)
            for key, payload in pending.items():
                ctx.set(getattr(s, f"{key}valid"), 1)
                ctx.set(getattr(s, "wdata" if key == "w" else f"{key}addr"), payload)
            for _ in range(200):
                if not pending:
                    return
                _, _, *readies = await ctx.tick("axil").sample(
                    *(getattr(s, f"{key}ready") for key in pending))
                for key, ready in zip(list(pending), readies, strict=True):
                    if ready:
                        ctx.set(getattr(s, f"{key}valid"), 0)
                        del pending[key]
            raise AssertionError(f"not accepted: {pending}")

        await offer(aw=scratch, w=0x11, ar=mode)
        await offer(aw=scratch, w=0x22, ar=ctrl)
        for _ in range(40):                # responses wait, held
            await ctx.tick("axil")
        ctx.set(s.rready, 1)
        ctx.set(s.bready, 1)
        for _ in range(200):
            _, _, bvalid, bresp, rvalid, rdata, rresp = await ctx.tick("axil").sample(
                s.bvalid, s.bresp, s.rvalid, s.rdata, s.rresp)
            if bvalid:
                log["b"].append(bresp)
            if rvalid:
                log["r"].append((rdata, rresp))
        assert ctx.get(bench.rf.rw.scratch) == 0x22

    sim = Simulator(bench)
    add_clocks(sim, clocks)
    sim.add_testbench(master)
    sim.run()
    assert log == {"b": [OKAY, OKAY], "r": [(9, OKAY), (0x0BAD_F00D, OKAY)]}
