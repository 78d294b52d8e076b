"""binary32 operand pairs for the multiplier tests and the units built on it: edge
values, uniform patterns, and pairs aimed at rounding ties, the subnormal range and
overflow."""

import random
import time

import numpy as np
from amaranth.sim import Simulator

from squeezenic_hw.spec.fp32 import CANONICAL_NAN

U32 = np.uint32

# Edge operands (bit patterns); the cross product of these with themselves and
# their negations is checked exhaustively.
_EDGE_POSITIVE = [
    0x00000000,              # +0
    0x00000001,              # smallest subnormal 2**-149
    0x00000002, 0x00000003,  # 3 * 2**-149: * 0.5 is a tie between 1 and 2 ulps
    0x00000005,
    0x00400000, 0x00400001,  # 2**-127, and just above
    0x007FFFFF,              # largest subnormal (* (1 + 2**-23) rounds to min normal)
    0x00800000, 0x00800001,  # smallest normal, and just above
    0x00FFFFFF,              # (2 - 2**-23) * 2**-126: * 0.5 is a tie into min normal
    0x1F800000, 0x20000000,  # 2**-64, 2**-63
    0x33800000, 0x34000000,  # 2**-24, 2**-23
    0x3EFFFFFF, 0x3F000000, 0x3F000001,  # just below 0.5, 0.5, just above
    0x3F400000,              # 0.75
    0x3F7FFFFF,              # 1 - 2**-24
    0x3F800000, 0x3F800001,  # 1.0, 1 + 2**-23
    0x3F800800, 0x3F801800,  # 1 + 2**-12 (squared: exact tie, to even), 1 + 3 * 2**-12
    0x3FB504F3, 0x3FB504F4,  # ~sqrt(2): squares land either side of 2
    0x3FC00000,              # 1.5
    0x3FFFFFFF,              # 2 - 2**-23 (* (1 + 2**-23) rounds up to 2.0)
    0x40000000,              # 2.0
    0x4B000000, 0x4B800000,  # 2**23, 2**24
    0x5F800000, 0x5F000000,  # 2**64, 2**63
    0x7E800000, 0x7F000000,  # 2**126, 2**127
    0x7EFFFFFF, 0x7F7FFFFF,  # largest binade; largest finite (* (1 + 2**-23) -> inf)
    0x7F800000,              # inf
    0x7F800001, 0x7FA00000,  # signalling NaNs
    0x7FC00000, 0x7FC00001, 0x7FFFFFFF,  # quiet NaNs with payloads
]
EDGE_VALUES = np.array(_EDGE_POSITIVE + [x | 0x80000000 for x in _EDGE_POSITIVE], dtype=U32)


def edge_pairs():
    a, b = np.meshgrid(EDGE_VALUES, EDGE_VALUES, indexing="ij")
    return a.ravel(), b.ravel()


def numpy_reference(a, b):
    """numpy float32 product bits, NaN results canonicalised."""
    with np.errstate(all="ignore"):
        r = np.asarray(a, dtype=U32).view(np.float32) * np.asarray(b, dtype=U32).view(np.float32)
    return np.where(np.isnan(r), U32(CANONICAL_NAN), r.view(U32))


def random_pairs(rng, n):
    """Uniform 32-bit patterns: every class, NaN payloads and subnormals included."""
    return (rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32),
            rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32))


def _fractions(rng, n):
    """23-bit fractions: uniform, few set bits (exact products, ties), near all-ones,
    uniform with the low bits cleared."""
    kind = rng.integers(0, 4, n)
    uniform = rng.integers(0, 1 << 23, n)
    few = np.zeros(n, dtype=np.int64)
    for _ in range(3):
        bit = rng.integers(0, 24, n)          # bit 23 means "no bit"
        few |= np.where(bit < 23, 1 << np.minimum(bit, 22), 0)
    ones = (1 << 23) - 1 - rng.integers(0, 1 << rng.integers(0, 8, n))
    short = uniform & -(1 << rng.integers(0, 23, n))    # uniform with low bits cleared
    return np.select([kind == 0, kind == 1, kind == 2], [uniform, few, ones], short)


def _subnormal_fractions(rng, n):
    """Non-zero 23-bit fractions of every bit length (few or many set bits)."""
    frac = np.where(rng.integers(0, 2, n) == 0, rng.integers(1, 1 << 23, n), _fractions(rng, n))
    frac = frac >> rng.integers(0, 23, n)
    return np.maximum(frac, 1)


def interesting_pairs(rng, n):
    """Operand pairs aimed at the delicate cases.

    Normal x normal with exponents putting the product near the subnormal range,
    at the overflow boundary, or anywhere; significands that are random,
    sparse, near all-ones, constructed to make the product an exact rounding tie
    at its guard position, or constructed to make the product land within a few
    units of a power of two (rounding up into the next binade, to the smallest
    normal, to inf). A quarter are subnormal x normal instead.
    """
    u = rng.random(n)
    target = np.select(
        [u < 0.35, u < 0.55, u < 0.75],
        [rng.integers(-30, 4, n),             # result subnormal / underflow / min normal
         rng.integers(250, 259, n),           # overflow boundary
         rng.integers(-60, 320, n)],          # anywhere (incl. far under/overflow)
        rng.integers(1, 255, n),              # normal results
    )
    # ea + eb - 127 = target with 1 <= ea, eb <= 254
    target = np.clip(target, 2 - 127, 508 - 127)
    ea = rng.integers(np.maximum(1, target - 127), np.minimum(254, target + 126) + 1)
    eb = target + 127 - ea
    fa = _fractions(rng, n)
    fb = _fractions(rng, n)
    kind = rng.random(n)
    # exact ties: the product's lowest set bit i + j sits at the guard position
    # (P bit 22 or 23 for normal results, P bit 23 - target for subnormal ones)
    g = np.where(target <= 0, np.minimum(23 - target, 46), 22 + rng.integers(0, 2, n))
    i = rng.integers(np.maximum(0, g - 23), np.minimum(23, g) + 1)
    j = g - i
    ma = ((rng.integers(0, 1 << 24, n) | (1 << 23)) & -(1 << i)) | (1 << i)
    mb = ((rng.integers(0, 1 << 24, n) | (1 << 23)) & -(1 << j)) | (1 << j)
    tie = kind < 0.25
    fa = np.where(tie, ma & 0x7FFFFF, fa)
    fb = np.where(tie, mb & 0x7FFFFF, fb)
    # products within a few units of 2**47 or 2**48
    ma = fa | (1 << 23)
    mb = ((1 << (47 + rng.integers(0, 2, n))) // ma) + rng.integers(-2, 3, n)
    near = (kind >= 0.25) & (kind < 0.45)
    fb = np.where(near, np.clip(mb, 1 << 23, (1 << 24) - 1) & 0x7FFFFF, fb)
    # a quarter: a subnormal operand times a normal with an exponent that puts the
    # product anywhere from deep underflow to well into the normal range
    sub = rng.random(n) < 0.25
    ea = np.where(sub, 0, ea)
    fa = np.where(sub, _subnormal_fractions(rng, n), fa)
    eb = np.where(sub, rng.integers(60, 255, n), eb)
    sa = rng.integers(0, 2, n)
    sb = rng.integers(0, 2, n)
    a = (sa << 31) | (ea << 23) | fa
    b = (sb << 31) | (eb << 23) | fb
    swap = rng.random(n) < 0.5
    return np.where(swap, b, a).astype(U32), np.where(swap, a, b).astype(U32)


def run_enabled_pipeline(dut, inputs, outputs, *, stall=0.3, seed=0):
    """Feed ``inputs`` (port name → values) one set per enabled cycle of ``dut.en``,
    with random stalls (garbage on the inputs while ``en`` = 0), and read ``outputs``
    (port names) ``dut.LATENCY`` enabled edges after each set is sampled. Checks that
    the outputs hold over every disabled cycle. Returns ``({name: [values]}, stats)``."""
    inputs = {name: [int(v) for v in values] for name, values in inputs.items()}
    n = len(next(iter(inputs.values())))
    rnd = random.Random(seed)
    out = {name: [] for name in outputs}
    stats = {}

    # the ports and their widths, looked up once: the loop below runs every cycle
    in_ports = [(getattr(dut, name), len(getattr(dut, name)), values)
                for name, values in inputs.items()]
    out_ports = [getattr(dut, name) for name in outputs]

    async def bench(ctx):
        issued = enabled = cycles = 0
        last = [ctx.get(port) for port in out_ports]
        while issued < n or enabled < n + dut.LATENCY - 1:
            en = rnd.random() >= stall
            for port, width, values in in_ports:
                ctx.set(port, values[issued] if en and issued < n
                        else rnd.getrandbits(width))
            ctx.set(dut.en, en)
            await ctx.tick()
            cycles += 1
            now = [ctx.get(port) for port in out_ports]
            if en:
                issued += 1
                enabled += 1
                if dut.LATENCY <= enabled < n + dut.LATENCY:
                    for name, value in zip(outputs, now, strict=True):
                        out[name].append(value)
            else:
                assert now == last, f"outputs changed while en = 0 (cycle {cycles})"
            last = now
        stats["cycles"] = cycles

    sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    start = time.perf_counter()
    sim.run()
    stats["seconds"] = time.perf_counter() - start
    return out, stats
