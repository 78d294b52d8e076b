"""The counter-based random generator of wire format section 5, in gateware.

Bit-exact with :func:`squeezenic_hw.reference.rng.draw_u32` (the definition and
its rationale are there and in ``docs/rng.md``)::

    K    = W(seed ^ 0x9E3779B9)
    U[e] = W(W(offset + e + K) ^ K)        e = 0 … 15

``W`` is Wang's ``hash32shift``: shifts, XORs and 4 adders, no multiplier.
Each ``W`` is split over two pipeline stages of two adders each.
"""

from amaranth import Const, Module, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.rng import GOLDEN

__all__ = ["CounterRng"]


def _wang_first_half(x):
    x = (~x + (x << 15))[:32]
    x = x ^ (x >> 12)
    return (x + (x << 2))[:32]


def _wang_second_half(x):
    x = x ^ (x >> 4)
    x = (x + (x << 3) + (x << 11))[:32]
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
        ``u[e]`` = ``draw_u32(seed, offset + e)``, registered.

    ``LATENCY`` = 8 enabled cycles from ``seed``/``offset`` to ``u``: two
    stages for the key, one for ``offset + K``, one for the 16 indices, two
    for each of the two rounds of ``W``.
    """

    LATENCY = 8

    def __init__(self):
        super().__init__({
            "seed": In(32),
            "offset": In(32),
            "en": In(1),
            "u": Out(data.ArrayLayout(unsigned(32), ELEMENTS_PER_BEAT)),
        })

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, self.en, reset_less=True)   # draws only: nothing to reset
        # Key: K = W(seed ^ GOLDEN), over two stages, offset riding beside it.
        key_a = st.reg(_wang_first_half(self.seed ^ Const(GOLDEN, 32)), name="key_a")
        offset = st.delay(self.offset, 2, name="offset")
        key = st.reg(_wang_second_half(key_a), name="key")
        base = st.reg((offset + key)[:32], name="base")
        key = st.delay(key, 2, name="key")  # aligned with the indices' second round
        for e in range(ELEMENTS_PER_BEAT):
            j = st.reg((base + e)[:32], name=f"j{e}")
            h = st.reg(_wang_first_half(j), name=f"h1a_{e}")
            h = st.reg(_wang_second_half(h), name=f"h1_{e}")
            if e == 0:
                key = st.delay(key, 2, name="key_r2")
            h = st.reg(_wang_first_half(h ^ key), name=f"h2a_{e}")
            u = st.reg(_wang_second_half(h), name=f"u{e}")
            m.d.comb += self.u[e].eq(u)
        return m
