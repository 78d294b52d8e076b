# amaranth: UnusedElaboratable=no
"""lutram_delay: the same values as a chain of as many enabled registers, under a random
enable, and the delay kept in distributed RAM."""

import pytest
from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.common.stream import Stager, lutram_delay

from support.random_enable import outputs_under_random_enable


class _Both(wiring.Component):
    """A value through lutram_delay and through a register chain, side by side."""

    def __init__(self, width, cycles):
        self.cycles = cycles
        super().__init__({"value": In(width), "en": In(1), "ram": Out(width),
                          "chain": Out(width)})

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, self.en, reset_less=True)
        m.d.comb += [self.ram.eq(lutram_delay(m, st, self.value, self.cycles, name="d")),
                     self.chain.eq(st.delay(self.value, self.cycles, name="chain"))]
        return m


@pytest.mark.parametrize("width,cycles", [(1, 2), (40, 3), (512, 3), (9, 7), (5, 32)])
def test_equals_a_register_chain(width, cycles):
    compared = outputs_under_random_enable(_Both(width, cycles), width, ("ram", "chain"),
                                           settle=2 * cycles + 40, seed=width * cycles)
    assert all(a == b for a, b in compared)
    assert len({b for _, b in compared}) > 1


def test_maps_to_lutram(tmp_path):
    result = synth.synthesize(_Both(512, 3), name="both", workdir=tmp_path)
    # the delay is at most 37 RAM32M16 (8 LUTs and 14-16 bits each); the chain beside it
    # 512 shift registers
    assert 0 < result.lutram <= -(-512 // 14) and result.srl == 512


def test_cycles_checked():
    m = Module()
    st = Stager(m, Signal(), reset_less=True)
    for bad in (1, 33, True):
        with pytest.raises(ValueError, match="cycles"):
            lutram_delay(m, st, Signal(8), bad, name="d")
