# amaranth: UnusedElaboratable=no
"""Tests of :class:`~squeezenic_hw.gateware.axil.register_file.AxiLiteRegisterFile`.

The register file sits in a bench whose ``ro`` inputs change every cycle (each is a
function of a free-running cycle counter ``cnt``; a 64-bit counter moves in both
halves every cycle). Random reads and writes, including unmapped addresses (gaps,
beyond the map, upper address bits set), go through ``sim.axil`` with random
``aw``/``w`` skew and ``bready``/``rready`` stalls, and every response is compared
with ``sim.axil.AxiLiteRegisterModel`` fed the ``ro`` values of the cycle the
documented latency says the hardware samples. Every ``w1p`` pulse seen on the port
(a monitor samples it each cycle) must be exactly one expected pulse, in the cycle
``bvalid`` rises, for one cycle. The read/write latencies are asserted on every
transaction and back-to-back throughput in the zero-delay runs.
"""

import random

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.back import verilog
from amaranth.sim import Simulator

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

WRITE_KEYS = {"aw_delay", "w_delay", "bready_delay"}
READ_KEYS = {"ar_delay", "rready_delay"}


class Bench(Elaboratable):
    """The register file with every ``ro`` field driven from a cycle counter."""

    def __init__(self, regmap, *, seed=0, **kwargs):
        self.dut = AxiLiteRegisterFile(regmap, **kwargs)
        self.cnt = Signal(64)
        self.moving = MovingRoFields(self.dut.ro_fields, seed=seed)
        self.ro_value = self.moving.value

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.d.sync += self.cnt.eq(self.cnt + 1)
        self.moving.drive(m, dut.ro, self.cnt)
        return m


def small_map():
    rm = RegisterMap()
    rm.add("ctrl", access="rw", reset=0x1234_5678, doc="control", group="global")
    rm.add("mode", access="rw", width=3, reset=5, group="global")
    rm.add("enable", access="rw", width=1, group="global")
    rm.add("start", access="w1p", width=1, group="global")
    rm.add("kick", access="w1p", width=8, group="global")
    rm.add("status", access="ro", width=16, group="global")
    rm.add("version", access="ro", group="global")
    rm.add_counter64("frames", "frames seen", "lane0.tx")
    rm.add("scratch", access="rw", offset=0x40, group="lane0.tx")       # gap before it
    rm.add_counter64("bytes", "bytes seen", "lane0.tx", offset=0x48)
    rm.add("flags", access="ro", width=5, offset=0x58, group="lane0.rx")
    rm.add("clear", access="w1p", offset=0x70, group="lane0.rx")
    return rm


def large_map(lanes=8):
    """~300 registers: per-lane groups at 0x100 strides with gaps, as a plugin map has."""
    rm = RegisterMap()
    rm.add("id", access="ro", group="global")
    rm.add("scratch", access="rw", reset=0xA5A5_A5A5, group="global")
    rm.add("soft_reset", access="w1p", width=4, group="global")
    for lane in range(lanes):
        base = 0x100 * (lane + 1)
        group = f"lane{lane}"
        rm.add(f"l{lane}_ctrl", access="rw", width=16, offset=base, reset=lane, group=group)
        rm.add(f"l{lane}_param", access="rw", width=8, group=group)
        rm.add(f"l{lane}_seed", access="rw", group=group)
        rm.add(f"l{lane}_go", access="w1p", width=2, group=group)
        rm.add(f"l{lane}_state", access="ro", width=4, group=group)
        rm.add(f"l{lane}_depth", access="ro", width=12, group=group)
        for k in range(14):
            rm.add_counter64(f"l{lane}_cnt{k}", f"counter {k}", group)
        for k in range(4):
            rm.add(f"l{lane}_err{k}", access="ro", width=20, group=group)
    return rm


def random_address(rng, regmap):
    """A mapped address most of the time, else one of the unmapped kinds."""
    r = rng.random()
    regs = regmap.registers
    if r < 0.7:
        return rng.choice(regs).offset
    if r < 0.78:   # unaligned: bits 1:0 are ignored
        return rng.choice(regs).offset | rng.randint(1, 3)
    if r < 0.86:   # a word inside the space with no register
        free = [a for a in range(0, regmap.size, 4) if regmap.at(a) is None]
        if free:
            return rng.choice(free)
    if r < 0.93:   # above the space, low bits aliasing a real register
        bit = rng.randint(regmap.address_bits, 31)
        return rng.choice(regs).offset | (1 << bit)
    return rng.randrange(regmap.size, 1 << 32) & ~3


def random_ops(rng, regmap, count):
    ops = []
    counters = list(regmap.counters.values())
    while len(ops) < count:
        r = rng.random()
        if r < 0.1 and counters:
            # A software 64-bit read, maybe with another access between the halves.
            lo, hi = rng.choice(counters)
            ops.append(("r", lo.offset))
            if rng.random() < 0.5:
                ops.append(("r", random_address(rng, regmap)))
            ops.append(("r", hi.offset))
        elif r < 0.55:
            ops.append(("r", random_address(rng, regmap)))
        else:
            ops.append(("w", random_address(rng, regmap), rng.getrandbits(32)))
    return ops


def run_ops(bench, ops, *, seed=0, max_delay=0, check_rw_every=1, explicit=None):
    """Run ``ops`` through the bench, checking each response against the model.

    ``explicit`` maps an op index to fixed delay keywords for the helper.
    Returns the per-op timings.
    """
    dut = bench.dut
    regmap = dut.regmap
    model = AxiLiteRegisterModel(regmap)
    rng = random.Random(seed)
    expected_pulses = []
    seen_pulses = []
    timings = []
    done = []
    pulse_names = list(dut.pulse_fields)

    async def master(ctx):
        # rw fields come out of reset with their reset values.
        for name in dut.rw_fields:
            assert ctx.get(getattr(dut.rw, name)) == model.rw[name], name
        for k, op in enumerate(ops):
            timing = {}
            kwargs = dict(rng=rng, max_delay=max_delay, timing=timing)
            keys = WRITE_KEYS if op[0] == "w" else READ_KEYS
            kwargs.update((key, v) for key, v in (explicit or {}).get(k, {}).items()
                          if key in keys)
            c0 = ctx.get(bench.cnt)
            if op[0] == "w":
                _, addr, value = op
                bresp = await axil_write(ctx, dut.axil, addr, value, **kwargs)
                want, pulse = model.write(addr, value)
                assert bresp == want, f"op {k}: write 0x{addr:08x}: bresp {bresp}, want {want}"
                assert timing["bvalid"] - max(timing["aw"], timing["w"]) == dut.write_latency
                if pulse is not None and pulse[1]:
                    expected_pulses.append((c0 + timing["bvalid"], *pulse))
                if k % check_rw_every == 0:
                    for name in dut.rw_fields:
                        got = ctx.get(getattr(dut.rw, name))
                        assert got == model.rw[name], f"op {k}: rw {name} {got:#x}"
            else:
                _, addr = op
                data, rresp = await axil_read(ctx, dut.axil, addr, **kwargs)
                assert timing["rvalid"] - timing["ar"] == dut.read_latency
                sample = c0 + timing["ar"] + 1     # ro values are sampled the cycle after ar
                want = model.read(addr, lambda f, s=sample: bench.ro_value(f, s))
                assert (data, rresp) == want, \
                    f"op {k}: read 0x{addr:08x}: got ({data:#x}, {rresp}), want " \
                    f"({want[0]:#x}, {want[1]})"
            timings.append(timing)
        for _ in range(3):
            await ctx.tick()
        done.append(True)

    async def pulse_monitor(ctx):
        signals = [getattr(dut.pulse, name) for name in pulse_names]
        while True:
            _, _, cnt, *values = await ctx.tick().sample(bench.cnt, *signals)
            for name, value in zip(pulse_names, values, strict=True):
                if value:
                    seen_pulses.append((cnt, name, value))

    sim = Simulator(bench)
    sim.add_clock(4e-9)
    sim.add_testbench(master)
    if pulse_names:
        sim.add_testbench(pulse_monitor, background=True)
    sim.run()
    assert done
    assert seen_pulses == expected_pulses
    return timings


@pytest.mark.parametrize("radix,max_delay", [(16, 0), (16, 4), (2, 3)])
def test_small_map_random(radix, max_delay):
    rm = small_map()
    bench = Bench(rm, seed=radix + max_delay, read_mux_radix=radix)
    # size 0x80: 5 word bits -> 2 levels of 16:1, 5 levels of 2:1.
    assert bench.dut.read_pipeline_depth == {16: 2, 2: 5}[radix]
    ops = random_ops(random.Random(max_delay), rm, 400)
    timings = run_ops(bench, ops, seed=max_delay + 7, max_delay=max_delay)
    if max_delay == 0:
        # Back to back: a write takes 3 cycles, a read read_latency + 1.
        for op, timing in zip(ops, timings, strict=True):
            if op[0] == "w":
                assert timing == {"aw": 0, "w": 0, "bvalid": 2, "b": 2}
            else:
                lat = bench.dut.read_latency
                assert timing == {"ar": 0, "rvalid": lat, "r": lat}


@pytest.mark.parametrize("aw_delay,w_delay", [(0, 0), (0, 3), (3, 0), (1, 5), (6, 2)])
def test_aw_w_order(aw_delay, w_delay):
    """w before aw, aw before w, and together; with bready held low a while."""
    rm = small_map()
    bench = Bench(rm)
    ops = [("w", rm["ctrl"].offset, 0xDEAD_BEEF), ("w", rm["kick"].offset, 0x1FF),
           ("w", 0x44, 7), ("w", rm["mode"].offset, 0xFFFF_FFFE), ("r", rm["ctrl"].offset),
           ("r", rm["mode"].offset), ("w", rm["start"].offset, 1), ("r", 0x44)]
    explicit = {k: {"aw_delay": aw_delay, "w_delay": w_delay, "bready_delay": k % 3,
                    "rready_delay": k % 4} for k in range(len(ops))}
    timings = run_ops(bench, ops, explicit=explicit)
    for op, timing in zip(ops, timings, strict=True):
        if op[0] == "w":
            assert timing["aw"] == aw_delay and timing["w"] == w_delay


def test_counter64_snapshot():
    """Reading _lo snapshots _hi; a later _hi read returns it, per counter."""
    rm = small_map()
    bench = Bench(rm)
    f_lo, f_hi = rm.counters["frames"]
    b_lo, b_hi = rm.counters["bytes"]
    ops = [("r", f_hi.offset),                       # before any _lo read: 0
           ("r", f_lo.offset), ("r", b_lo.offset), ("w", rm["ctrl"].offset, 1),
           ("r", rm["version"].offset), ("r", f_hi.offset), ("r", b_hi.offset),
           ("r", f_hi.offset), ("r", b_lo.offset), ("r", b_hi.offset)]
    explicit = {k: {"ar_delay": 5 * k} for k in range(len(ops))}
    run_ops(bench, ops, explicit=explicit)


@pytest.mark.parametrize("radix,depth", [(16, 3), (4, 5)])
def test_large_map_pipelined(radix, depth):
    rm = large_map()
    assert 290 <= len(rm) <= 320
    bench = Bench(rm, seed=3, read_mux_radix=radix)
    # size 0x1000: 10 word bits -> ceil(10 / log2(radix)) registered levels.
    assert rm.size == 0x1000
    assert bench.dut.read_pipeline_depth == depth
    assert bench.dut.read_latency == depth + 1
    ops = random_ops(random.Random(radix), rm, 400)
    run_ops(bench, ops, seed=radix, max_delay=2, check_rw_every=10)


def test_3000_registers():
    """The scale of the plugin map: 3008 registers, 12 word bits, 3 levels of 16:1."""
    rm = RegisterMap()
    for lane in range(16):
        for k in range(70):
            rm.add_counter64(f"l{lane}_c{k}", group=f"lane{lane}")
        for k in range(30):
            rm.add(f"l{lane}_r{k}", access="rw", width=16, reset=k, group=f"lane{lane}")
        for k in range(18):
            rm.add(f"l{lane}_p{k}", access="w1p", width=2, group=f"lane{lane}")
    assert len(rm) == 3008 and rm.size == 0x4000
    bench = Bench(rm, seed=11)
    assert bench.dut.read_pipeline_depth == 3 and bench.dut.read_latency == 4
    run_ops(bench, random_ops(random.Random(4), rm, 40), max_delay=1, check_rw_every=1000)


@pytest.mark.parametrize("top_offset,word_bits", [(0x3FFFC, 16), (0x40000, 17)])
def test_sparse_map_decode(top_offset, word_bits):
    """The "holds a register" decode of writes: a bitmap up to 16 word bits, an OR of
    runs above; both answer OKAY exactly on mapped words, SLVERR on the gaps."""
    rm = RegisterMap()
    rm.add("low", access="rw", width=8, reset=1)
    rm.add("mid", access="rw", offset=0x1000)
    rm.add_counter64("cnt", "a counter", "g", offset=0x2000)
    rm.add("top", access="rw", width=16, offset=top_offset)
    bench = Bench(rm, seed=6)
    assert bench.dut.word_bits == word_bits
    rng = random.Random(word_bits)
    neighbours = [0x4, 0xFFC, 0x1004, 0x1FFC, 0x2008, top_offset - 4]
    ops = []
    for _ in range(60):
        addr = rng.choice([r.offset for r in rm] + neighbours)
        ops.append(("w", addr, rng.getrandbits(32)) if rng.random() < 0.6 else ("r", addr))
    run_ops(bench, ops, seed=word_bits, max_delay=1)


def test_single_register():
    """A one-word map: no address bits to decode, one read level."""
    rm = RegisterMap()
    rm.add("only", access="rw", width=7, reset=3)
    bench = Bench(rm)
    assert bench.dut.read_pipeline_depth == 1
    ops = [("r", 0), ("w", 0, 0xFFFF), ("r", 0), ("r", 4), ("w", 4, 1), ("r", 2), ("r", 0)]
    run_ops(bench, ops)


def test_no_hang_on_garbage():
    """Only unmapped addresses, with stalls: every request answered SLVERR, reads 0."""
    rm = small_map()
    bench = Bench(rm)
    rng = random.Random(5)
    ops = []
    for _ in range(40):
        addr = rng.choice([0x30, 0x50, 0x7C, 0x80, 0x1000_0000, 0xFFFF_FFFC, 0x8000_0000])
        ops.append(("r", addr) if rng.random() < 0.5 else ("w", addr, rng.getrandbits(32)))
    run_ops(bench, ops, max_delay=5)
    model = AxiLiteRegisterModel(rm)
    assert all(model.decode(op[1]) is None for op in ops)
    assert SLVERR != OKAY


def test_parameters():
    rm = small_map()
    for bad in (0, 1, 3, 12, 16.0, True):
        rejected(AxiLiteRegisterFile, rm, read_mux_radix=bad, match="read_mux_radix")
    rejected(AxiLiteRegisterFile, {"a": 1}, match="regmap")
    rejected(AxiLiteRegisterFile, RegisterMap(), match="no registers")
    named = RegisterMap()
    named.add("signature", access="rw")
    rejected(AxiLiteRegisterFile, named, match="signature")


def test_ports_and_verilog():
    rm = small_map()
    dut = AxiLiteRegisterFile(rm)
    assert dut.rw_fields == {"ctrl": 32, "mode": 3, "enable": 1, "scratch": 32}
    assert dut.pulse_fields == {"start": 1, "kick": 8, "clear": 32}
    assert dut.ro_fields == {"status": 16, "version": 32, "frames": 64, "bytes": 64,
                             "flags": 5}
    assert dut.rw.ctrl.init == 0x1234_5678 and dut.rw.mode.init == 5
    text = verilog.convert(dut, name="axil_regs")
    assert "module axil_regs" in text


def test_concurrent_read_write():
    """Reads and writes in flight at once on their independent channels."""
    rm = small_map()
    bench = Bench(rm, seed=9)
    dut = bench.dut
    write_model = AxiLiteRegisterModel(rm)
    read_model = AxiLiteRegisterModel(rm)
    writable = [r.offset for r in rm if r.access in ("rw", "w1p") and r.name != "mode"]
    readable = [r.offset for r in rm if r.access == "ro"] + [rm["mode"].offset, 0x30]
    overlaps = []

    async def writer(ctx):
        rng = random.Random(1)
        for _ in range(60):
            addr, value = rng.choice(writable), rng.getrandbits(32)
            bresp = await axil_write(ctx, dut.axil, addr, value, rng=rng, max_delay=2)
            assert bresp == write_model.write(addr, value)[0]
        for name in dut.rw_fields:
            assert ctx.get(getattr(dut.rw, name)) == write_model.rw[name]

    async def reader(ctx):
        rng = random.Random(2)
        for _ in range(60):
            addr, timing = rng.choice(readable), {}
            c0 = ctx.get(bench.cnt)
            got = await axil_read(ctx, dut.axil, addr, rng=rng, max_delay=2, timing=timing)
            assert timing["rvalid"] - timing["ar"] == dut.read_latency
            sample = c0 + timing["ar"] + 1
            assert got == read_model.read(addr, lambda f, s=sample: bench.ro_value(f, s))

    async def watch(ctx):
        while True:
            _, _, aw, ar = await ctx.tick().sample(dut.axil.awvalid, dut.axil.arvalid)
            overlaps.append(aw and ar)

    sim = Simulator(bench)
    sim.add_clock(4e-9)
    sim.add_testbench(writer)
    sim.add_testbench(reader)
    sim.add_testbench(watch, background=True)
    sim.run()
    assert sum(overlaps) > 5       # requests really were offered together
