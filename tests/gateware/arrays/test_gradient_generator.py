"""The per-lane data generator: numpy reference (values, frames) and gateware against it."""

import zlib
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Module, ResetInserter, Signal
from amaranth.back import verilog
from amaranth.sim import Simulator

from squeezenic_hw.gateware.arrays.generator import GradientGenerator
from squeezenic_hw.reference.generator import (
    EXPONENT_TABLE,
    frame_header,
    generate_frames,
    gradient_values,
    value_bits,
)
from squeezenic_hw.reference.rng import draw_u32, tensor_indices
from squeezenic_hw.sim.axis import FrameSink
from squeezenic_hw.spec.codecs import CODECS, validate_param
from squeezenic_hw.spec.frames import Header, classify_host_frame, parse
from squeezenic_hw.spec.generator import (
    MAX_ELEMENTS,
    VALUE_SALT,
    GeneratorConfig,
    config_values,
    rate_to_q8_8,
)
from squeezenic_hw.spec.header import FLAG_FLUSH, FLAG_STOCHASTIC

# ---- reference: values ---------------------------------------------------------------


def test_value_check_values():
    # The check values of docs/generator.md.
    bits = gradient_values(0, 0, 4).view(np.uint32)
    assert [hex(b) for b in bits] == ["0xb9150a61", "0x36a36f95", "0x380463d4", "0xb82cbe60"]
    bits = gradient_values(0xDEADBEEF, 2**32 - 2, 3).view(np.uint32)
    assert [hex(b) for b in bits] == ["0x37c7b7fc", "0xb8aae3f3", "0xb9a2e852"]
    # Worked by hand: e8 = 0 -> -0; e8 = 3 -> 2**1; e8 = 255 (z = 0, b = 1) -> 2**-11;
    # e8 = 4 (z = 5, b = 0) -> 2**-20.
    assert [hex(b) for b in value_bits([0x807FFFFF, 0x01812345, 0xFF800001, 0x02000000])] == [
        "0x80000000", "0x40012345", "0xba000001", "0x35800000"]


def test_exponent_table_follows_the_definition():
    assert EXPONENT_TABLE[0] == 0
    assert list(EXPONENT_TABLE[1:4]) == [126, 127, 128]
    for e8 in range(4, 256):
        z = 8 - e8.bit_length()
        b = (e8 >> (6 - z)) & 1
        assert EXPONENT_TABLE[e8] == 117 - 2 * z - b, e8


def test_value_statistics():
    v = gradient_values(12345, 2**32 - 500_000, 1_000_000)
    n = v.size
    bits = v.view(np.uint32)
    assert np.isfinite(v).all()
    exponent = (bits >> 23) & 0xFF
    assert not ((exponent == 0) & (bits & 0x7FFFFF != 0)).any()       # no subnormals
    zero = v == 0
    large = np.abs(v) >= 0.5
    small = ~zero & ~large

    def near(count, p):   # within 5 binomial standard deviations
        return abs(count - n * p) < 5 * np.sqrt(n * p * (1 - p))

    assert near(zero.sum(), 1 / 256)
    assert near(large.sum(), 3 / 256)
    assert np.abs(v[large]).max() < 4.0
    assert np.abs(v[small]).min() >= 2.0**-21 and np.abs(v[small]).max() < 2.0**-9
    sign = bits >> 31
    assert near(sign.sum(), 0.5)
    assert 0.4 < sign[zero].mean() < 0.6                         # +0 and -0 alike
    assert abs(np.mean(v[small]) / np.std(v[small])) < 0.01      # symmetric about zero
    # Each pair of binades half as likely as the pair above (k = 2z + b).
    for k in range(12):
        p = 2.0 ** -(k // 2 + 2)
        assert near((exponent == 117 - k).sum(), p), k


def test_values_are_a_pure_function_of_the_index():
    whole = gradient_values(7, 2**32 - 100, 300)
    assert np.array_equal(whole[150:200], gradient_values(7, 2**32 + 50, 50))
    assert not np.array_equal(whole, gradient_values(8, 2**32 - 100, 300))
    # The salt keeps values apart from the codec draws under an equal seed.
    j = tensor_indices(0, 10_000)
    assert np.array_equal(gradient_values(3, 0, 10_000).view(np.uint32),
                          value_bits(draw_u32(3 ^ VALUE_SALT, j)))
    assert np.mean((draw_u32(3, j) & 0x7FFFFF) == (value_bits(draw_u32(3 ^ VALUE_SALT, j))
                                                   & 0x7FFFFF)) < 0.01


# ---- reference: frames ----------------------------------------------------------------


def test_frames_follow_the_config():
    cfg = GeneratorConfig(codec=3, param=4, stochastic=True, scale_bits=0x41000000,
                          aux_bits=0x3E000000, seed=99, value_seed=5, offset=2**32 - 20,
                          elements=17, flush_every=3, udp_src_port=40001)
    frames = generate_frames(cfg, 7)
    for k, f in enumerate(frames):
        h, reason = classify_host_frame(f)
        assert reason is None and len(f) == 64 + 4 * 17
        assert h.ip_id == k and h.src_port == 40001 and h.seed == 99
        assert h.offset == (2**32 - 20 + 17 * k) % 2**32
        assert h.flags == FLAG_STOCHASTIC | (FLAG_FLUSH if k in (2, 5) else 0)
        assert f[64:] == gradient_values(5, h.offset, 17).tobytes()
    assert frame_header(cfg, 2**16 + 1).ip_id == 1
    assert frame_header(replace(cfg, flush_every=1), 0).flags & FLAG_FLUSH


def test_frame_check_values():
    # The frame check values of docs/generator.md.
    frames = generate_frames(GeneratorConfig(), 10)
    assert zlib.crc32(b"".join(frames)) == 0x0AB06C64
    assert [parse(f).ip_checksum for f in frames[:2]] == [0x210D, 0x210C]
    cfg = GeneratorConfig(codec=3, param=4, stochastic=True, seed=7, value_seed=7,
                          offset=2**32 - 100, elements=100, flush_every=2, udp_src_port=1000)
    frames = generate_frames(cfg, 4)
    assert zlib.crc32(b"".join(frames)) == 0x075648BD
    assert [parse(f).flags for f in frames] == [2, 6, 2, 6]


@pytest.mark.parametrize("bad", [
    {"elements": 0}, {"elements": MAX_ELEMENTS + 1}, {"codec": 256}, {"seed": -1},
    {"flush_every": 2**16}, {"udp_src_port": 70000}, {"rate_bytes_per_cycle": 256},
    {"template": "x"}, {"stochastic": 2}, {"offset": 2**32},
])
def test_config_rejects_bad_fields(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        GeneratorConfig(**bad)


def test_rate_q8_8():
    assert rate_to_q8_8(50) == 0x3200 and rate_to_q8_8(64) == 0x4000
    assert rate_to_q8_8(255.996) == 0xFFFF


# ---- gateware harness -------------------------------------------------------------------

def _set_config(ctx, dut, cfg, n_frames):
    for name, value in config_values(cfg).items():
        ctx.set(getattr(dut, name), value)
    ctx.set(dut.n_frames, n_frames)


async def _wait(ctx, dut, cond, limit=100_000):
    for _ in range(limit):
        if cond():
            return
        await ctx.tick()
    raise TimeoutError("condition not reached")


def _simulate(dut, control, sink):
    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control, background=True)
    sim.add_testbench(sink.run)
    sim.run()


def _run_configs(runs, *, backpressure, seed, max_elements=363, template=None):
    """Runs ``[(config, n_frames)]`` one after the other on one generator; its frames."""
    dut = GradientGenerator(max_elements, template=template)
    total = sum(n for _, n in runs)
    sink = FrameSink(dut.o, n_frames=total, backpressure=backpressure, seed=seed)
    sent = []

    async def control(ctx):
        for cfg, n in runs:
            _set_config(ctx, dut, cfg, n)
            ctx.set(dut.start, 1)
            await ctx.tick()
            await _wait(ctx, dut, lambda: ctx.get(dut.busy))
            await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
            sent.append(ctx.get(dut.frames_sent))
            ctx.set(dut.start, 0)
            await ctx.tick()

    _simulate(dut, control, sink)
    assert sent == [n for _, n in runs][:len(sent)]
    return sink.frames


# Every codec id's header, lengths around the beat size, flush, offsets across the
# 2**32 wrap, side-band, and a mix of rates (>= 64: back to back; 50: paced).
_RUNS = [
    (GeneratorConfig(codec=0, elements=1, rate_bytes_per_cycle=255.99), 4),
    (GeneratorConfig(codec=1, elements=15, value_seed=1, offset=2**32 - 7,
                     tuser_src=0x1234, tuser_dst=0xBEEF, rate_bytes_per_cycle=64), 4),
    (GeneratorConfig(codec=2, elements=16, udp_src_port=1, rate_bytes_per_cycle=10.5), 3),
    (GeneratorConfig(codec=3, param=4, stochastic=True, elements=17, seed=0xDEADBEEF,
                     value_seed=0xDEADBEEF, flush_every=2, scale_bits=0x41000000,
                     rate_bytes_per_cycle=100), 4),
    (GeneratorConfig(codec=4, param=8, stochastic=True, elements=33, flush_every=1,
                     aux_bits=0x3A83126F, offset=2**32 - 40, rate_bytes_per_cycle=200), 3),
    (GeneratorConfig(codec=5, elements=363, value_seed=77, scale_bits=0x3C23D70A,
                     aux_bits=0xBC23D70A), 2),
    (GeneratorConfig(codec=6, stochastic=True, elements=31, offset=2**32 - 31 * 2 - 5,
                     flush_every=3, seed=1, rate_bytes_per_cycle=255.99), 5),
]


@pytest.mark.parametrize("backpressure", [0.0, 0.3, 0.7])
def test_gateware_equals_reference(backpressure):
    frames = _run_configs(_RUNS, backpressure=backpressure, seed=int(backpressure * 10))
    expected = [(f, cfg) for cfg, n in _RUNS for f in generate_frames(cfg, n)]
    assert len(frames) == len(expected)
    for k, (got, (want, cfg)) in enumerate(zip(frames, expected, strict=True)):
        assert got.data == want, k
        assert (got.src, got.dst) == (cfg.tuser_src, cfg.tuser_dst)


def test_gateware_with_another_template_and_long_frames():
    template = Header(dst_mac=bytes.fromhex("a0b1c2d3e4f5"), src_mac=bytes.fromhex("0123456789ab"),
                      ip_tos=0xB8, ttl=17, src_ip=bytes([192, 168, 7, 200]),
                      dst_ip=bytes([172, 31, 255, 254]), dst_port=4791, ip_frag=0)
    runs = [(GeneratorConfig(template=template, elements=1000, value_seed=9,
                             udp_src_port=50000 + k, rate_bytes_per_cycle=64), 1)
            for k in range(2)]
    frames = _run_configs(runs, backpressure=0.3, seed=4, max_elements=1000,
                          template=template)
    assert [f.data for f in frames] == [generate_frames(c, n)[0] for c, n in runs]
    assert parse(frames[0].data).dst_port == 4791


def test_reset_mid_run_leaves_no_stale_beat():
    """Only the sequencer and the valid bits take a reset: a reset with a full pipeline
    (the sink stalled) leaves no beat behind, and the next run's frames are the
    reference's (the descriptor and data registers keep stale values nothing reads)."""
    cfg = GeneratorConfig(codec=1, elements=40, value_seed=6, flush_every=2,
                          rate_bytes_per_cycle=64)
    dut = GradientGenerator(363)
    rst = Signal()
    top = Module()
    top.submodules.gen = ResetInserter(rst)(dut)
    sink = FrameSink(dut.o, n_frames=3)

    async def bench(ctx):
        _set_config(ctx, dut, replace(cfg, value_seed=99, elements=17), 0)
        ctx.set(dut.start, 1)
        ctx.set(dut.o.ready, 0)
        for _ in range(30):                      # the pipeline fills and holds
            await ctx.tick()
        assert ctx.get(dut.o.valid) and ctx.get(dut.busy)
        ctx.set(dut.start, 0)
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(GradientGenerator.LATENCY + 3):   # nothing from before the reset
            _, _, valid, busy = await ctx.tick().sample(dut.o.valid, dut.busy)
            assert not valid and not busy
        _set_config(ctx, dut, cfg, 3)
        ctx.set(dut.start, 1)
        await sink.run(ctx)

    sim = Simulator(top)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    assert [f.data for f in sink.frames] == generate_frames(cfg, 3)


# ---- rate --------------------------------------------------------------------------------

def _paced(cfg, n, *, stall=0, backpressure=0.0):
    """``n`` frames of an unlimited run; the sink is not ready for the first ``stall`` cycles."""
    dut = GradientGenerator(max(cfg.elements, 1))
    sink = FrameSink(dut.o, n_frames=n, backpressure=backpressure, seed=3)

    async def control(ctx):
        _set_config(ctx, dut, cfg, 0)
        ctx.set(dut.start, 1)

    async def late_sink(ctx):
        ctx.set(dut.o.ready, 0)
        for _ in range(stall):
            await ctx.tick()
        await sink.run(ctx)

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control, background=True)
    sim.add_testbench(late_sink)
    sim.run()
    assert [f.data for f in sink.frames] == generate_frames(cfg, n)
    return sink


@pytest.mark.parametrize("rate, elements", [(50.0, 363), (25.0, 363), (50.0, 61), (12.5, 1)])
def test_rate_is_held(rate, elements):
    cfg = GeneratorConfig(elements=elements, rate_bytes_per_cycle=rate, value_seed=2)
    n = 31
    sink = _paced(cfg, n)
    starts = [f.first_cycle for f in sink.frames]
    measured = (n - 1) * cfg.frame_length / (starts[-1] - starts[0])
    assert abs(measured / rate - 1) < 0.02, measured


@pytest.mark.parametrize("rate", [64.0, 255.99])
def test_full_rate_is_back_to_back(rate):
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=rate)
    sink = _paced(cfg, 30)
    assert sink.beats == 30 * 24
    assert sink.max_streak == sink.beats
    assert sink.frames[-1].last_cycle - sink.frames[0].first_cycle + 1 == sink.beats


def test_burst_after_a_stall_is_bounded():
    # After 600 stalled cycles the credit is capped at one frame (1516 B). Back to
    # back, a frame of 24 beats earns 24·50 = 1200 B and costs 1516 B, so the
    # credit falls by 316 B a frame: the pending frame and five more go back to
    # back (1516 → 1200 → 884 → 568 → 252 → −64), then frames are paced again.
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=50.0)
    sink = _paced(cfg, 12, stall=600)
    starts = [f.first_cycle for f in sink.frames]   # counted from the release
    gaps = list(np.diff(starts))
    assert gaps[:5] == [24] * 5 and gaps[5] == 26, starts
    assert all(g in (30, 31) for g in gaps[6:]), starts
    # Over any window the bytes sent stay within rate·T + 2 frames.
    for a in range(len(starts)):
        for b in range(a + 1, len(starts)):
            sent = (b - a) * cfg.frame_length
            assert sent <= 50 * (starts[b] - starts[a]) + 2 * cfg.frame_length


def test_rate_under_backpressure_is_caught_up():
    # 20 % backpressure leaves 51 B/cycle of bus: the bucket makes up the stalls.
    cfg = GeneratorConfig(elements=363, rate_bytes_per_cycle=40.0)
    sink = _paced(cfg, 31, backpressure=0.2)
    starts = [f.first_cycle for f in sink.frames]
    measured = 30 * cfg.frame_length / (starts[-1] - starts[0])
    assert abs(measured / 40 - 1) < 0.03, measured


# ---- start / stop ---------------------------------------------------------------------------

def test_n_frames_stop_and_restart():
    cfg = GeneratorConfig(elements=20, flush_every=2, rate_bytes_per_cycle=64, offset=5)
    dut = GradientGenerator(363)
    sink = FrameSink(dut.o, n_frames=None, quiet=120, backpressure=0.3, seed=8)
    log = {}

    async def control(ctx):
        _set_config(ctx, dut, cfg, 3)
        ctx.set(dut.start, 1)
        await ctx.tick()
        await _wait(ctx, dut, lambda: ctx.get(dut.busy))
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["first"] = ctx.get(dut.frames_sent)
        idle = []
        for _ in range(40):      # start still high: no new run
            await ctx.tick()
            idle.append(ctx.get(dut.busy) or ctx.get(dut.o.valid))
        log["idle"] = any(idle)
        ctx.set(dut.start, 0)
        await ctx.tick()
        ctx.set(dut.start, 1)    # a new run: counter, offset and flush restart
        await ctx.tick()
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["second"] = ctx.get(dut.frames_sent)

    _simulate(dut, control, sink)
    assert log == {"first": 3, "idle": False, "second": 3}
    assert [f.data for f in sink.frames] == generate_frames(cfg, 3) * 2


@pytest.mark.parametrize("backpressure", [0.0, 0.5])
def test_start_dropping_finishes_the_frame(backpressure):
    cfg = GeneratorConfig(elements=100, rate_bytes_per_cycle=64, value_seed=3)
    dut = GradientGenerator(363)
    sink = FrameSink(dut.o, n_frames=None, quiet=100, backpressure=backpressure, seed=5)
    log = {}

    async def control(ctx):
        _set_config(ctx, dut, cfg, 0)
        ctx.set(dut.start, 1)
        for _ in range(40):
            await ctx.tick()
        ctx.set(dut.start, 0)    # mid-frame (8 beats per frame)
        await _wait(ctx, dut, lambda: not ctx.get(dut.busy))
        log["sent"] = ctx.get(dut.frames_sent)

    _simulate(dut, control, sink)
    n = len(sink.frames)
    assert n >= 2 and log["sent"] == n
    assert [f.data for f in sink.frames] == generate_frames(cfg, n)


@pytest.mark.parametrize("elements", [0, 364])
def test_no_run_with_elements_out_of_range(elements):
    dut = GradientGenerator(363)
    seen = []

    async def control(ctx):
        ctx.set(dut.elements, elements)
        ctx.set(dut.start, 1)
        ctx.set(dut.o.ready, 1)
        for _ in range(30):
            await ctx.tick()
            seen.append(ctx.get(dut.busy) or ctx.get(dut.o.valid))

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control)
    sim.run()
    assert not any(seen)


def test_latency():
    dut = GradientGenerator(363)
    cycles = []

    async def control(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.start, 1)
        for t in range(1, 30):
            await ctx.tick()
            if ctx.get(dut.o.valid):
                cycles.append(t)
                return

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(control)
    sim.run()
    assert cycles == [GradientGenerator.LATENCY]


# ---- construction ---------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, name", [
    ({"max_elements": 0}, "max_elements"), ({"max_elements": MAX_ELEMENTS + 1}, "max_elements"),
    ({"max_elements": 1.5}, "max_elements"), ({"template": 3}, "template"),
    ({"template": Header(src_ip=b"\1\2\3")}, "template"),
    ({"template": Header(ttl=256)}, "template"),
])
def test_constructor_rejects(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GradientGenerator(**kwargs)


def test_converts_to_verilog_at_the_largest_size():
    assert "module" in verilog.convert(GradientGenerator(MAX_ELEMENTS), name="gradient_gen")


def test_every_codec_header_is_a_valid_host_frame():
    # The generator's frames are SqueezeNIC host frames for every built-in codec.
    for info in CODECS.values():
        param = 0 if info.param_range is None else info.param_range[0]
        validate_param(info.id, param)
        f = generate_frames(GeneratorConfig(codec=info.id, param=param, elements=5), 1)[0]
        assert classify_host_frame(f)[1] is None, info.name
