"""The counter-based random generator of wire format section 5, in gateware.

Bit-exact with :func:`squeezenic_hw.reference.rng.draw_u32` (the definition and
its rationale are there and in ``docs/rng.md``)::

    K    = W(seed ^ 0x9E3779B9)
    U[e] = W(W(offset + e + K) ^ K)        e = 0 … 15

``W`` is Wang's ``hash32shift``: shifts, XORs and 4 adders, no multiplier. Each
``W`` is split over three pipeline stages of one carry chain each:
``~x + (x << 15)`` and the XOR with ``x >> 12`` behind it; then ``x + (x << 2)``;
then ``x + (x << 3) + (x << 11)`` as a carry-save add (a 3:2 compressor in the LUTs,
one carry chain), the XOR with ``x >> 4`` in front of it. The last XOR, with
``x >> 16``, is left to whatever reads ``W``: it folds into that reader's LUTs (the
next round's first step, the key's adder, the encoders' comparators).
"""

from amaranth import Const, Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.rng import GOLDEN

__all__ = ["CounterRng", "beat_draws"]


def _add3(a, b, c):
    """``(a + b + c) mod 2**32`` with one carry chain: the sum and majority bits of a
    carry-save step, then one add."""
    majority = (a & b) | (a & c) | (b & c)
    return ((a ^ b ^ c) + (majority << 1))[:32]


def _wang_first(x):
    """``W``'s first step, ``~x + (x << 15)`` = ``x·(2**15 - 1) - 1`` (mod 2**32)."""
    return (~x + (x << 15))[:32]


def _wang_stages(st, x, name, first=None):
    """``W(x)`` over three stages of ``st``. ``first``: the value of ``W``'s first step
    (:func:`_wang_first`), when the caller has it.

    Returns ``r ^ (r >> 16)``, ``r`` the third stage's register: a combinational XOR
    that the reader folds into its own LUTs. The XOR with ``x >> 12`` is registered
    behind the first step's carry chain, so that the second stage's adder reads its
    operands from flip-flops (fewer LUTs than the XOR in front of that adder).
    """
    x = _wang_first(x) if first is None else first
    x = st.reg(x ^ (x >> 12), name=f"{name}_a")
    x = st.reg((x + (x << 2))[:32], name=f"{name}_b")
    x = x ^ (x >> 4)
    x = st.reg(_add3(x, (x << 3)[:32], (x << 11)[:32]), name=f"{name}_c")
    return x ^ (x >> 16)


class CounterRng(wiring.Component):
    """The 16 random draws of one beat, as a clock-enabled pipeline.

    Ports
    -----
    seed : In(32)
        The frame's seed.
    offset : In(32)
        Tensor index of element 0 of the beat.
    en : In(1)
        Clock enable: every register advances only when ``en`` is high, so the
        generator stalls in step with the codec pipeline around it.
    u : Out(ArrayLayout(32, 16))
        ``u[e]`` = ``draw_u32(seed, offset + e)``: a register XOR-ed with its own high
        half (one LUT input more for the comparator that reads it).

    ``LATENCY`` = 11 enabled cycles from ``seed``/``offset`` to ``u``: three
    stages for the key, one for ``base = offset + K``, one for the first step of
    ``W(base)``, three for each of the two rounds of ``W`` on the 16 indices (the
    first round's first step is linear: for ``j = base + e`` it is that of
    ``base`` plus ``e·(2**15 - 1)``, one constant add per element). No register
    takes a reset (draws only: the enclosing pipeline's valid bits say which count).
    """

    LATENCY = 11

    def __init__(self):
        super().__init__({
            "seed": In(32),
            "offset": In(32),
            "en": In(1),
            "u": Out(data.ArrayLayout(unsigned(32), ELEMENTS_PER_BEAT)),
        })

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, self.en, reset_less=True)
        # Key: K = W(seed ^ GOLDEN), offset riding beside it.
        key = _wang_stages(st, self.seed ^ Const(GOLDEN, 32), "key")
        offset = st.delay(self.offset, 3, name="offset")
        base = st.reg((offset + key)[:32], name="base")
        key = st.delay(key, 5, name="key")  # aligned with the indices' second round
        # W's first step is linear: for j = base + e it is first(base) + e·(2**15 - 1),
        # so one first step per beat and one constant add per element.
        first = st.reg(_wang_first(base), name="first")
        for e in range(ELEMENTS_PER_BEAT):
            h = _wang_stages(st, None, f"h1_{e}",
                             first=(first + e * ((1 << 15) - 1))[:32] if e else first)
            u = _wang_stages(st, h ^ key, f"h2_{e}")
            m.d.comb += self.u[e].eq(u)
        return m


def beat_draws(m, stager, payload, shared=None):
    """The 16 draws of an encoder beat (``payload.params.seed``, ``payload.offset``),
    ``CounterRng.LATENCY`` enabled cycles of ``stager`` after the input beat.

    The draws are a function of the seed and the tensor index only, the same for every
    stochastic codec, so a pipeline of several such codecs builds one generator
    (``shared``, a :class:`~squeezenic_hw.gateware.codecs.unit.SharedParts`); without
    ``shared`` the caller gets a generator of its own.
    """
    def build():
        m.submodules.rng = rng = CounterRng()
        # The generator registers on the pipeline's enable, so its draws stay lined up
        # with the delayed elements through stalls and bubbles.
        m.d.comb += [
            rng.seed.eq(payload.params.seed),
            rng.offset.eq(payload.offset),
            rng.en.eq(stager.enable),
        ]
        return rng.u
    return build() if shared is None else shared.get("draws", build)
