# amaranth: UnusedElaboratable=no
"""delay_taps: every tap holds the value of as many enabled cycles ago as a register chain
would, under a random enable, with the line in flip-flops and shift registers or, with
``lutram``, in distributed RAM up to the first tap."""

import pytest
from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.flows import synth
from squeezenic_hw.gateware.codecs.unit import delay_taps
from squeezenic_hw.gateware.common.stream import Stager

from support.random_enable import outputs_under_random_enable


class _Taps(wiring.Component):
    """A value through delay_taps and, beside it, a register chain per tap."""

    def __init__(self, width, taps, lutram):
        self.width, self.taps, self.lutram = width, sorted(taps), lutram
        n = len(self.taps)
        super().__init__({"value": In(width), "en": In(1), "line": Out(width * n),
                          "chain": Out(width * n)})

    def elaborate(self, platform):
        m = Module()
        st = Stager(m, self.en, reset_less=True)
        line = delay_taps(m, st, self.value, self.taps, name="line", lutram=self.lutram)
        m.d.comb += [
            self.line.eq(Cat(*(line[t] for t in self.taps))),
            self.chain.eq(Cat(*(st.delay(self.value, t, name=f"chain{t}") for t in self.taps))),
        ]
        return m


@pytest.mark.parametrize("lutram", [False, True])
@pytest.mark.parametrize("width,taps", [(8, [1]), (33, [3]), (16, [2, 5]), (40, [4, 9, 13]),
                                        (7, [10, 12, 13])])
def test_taps_equal_register_chains(width, taps, lutram):
    compared = outputs_under_random_enable(_Taps(width, taps, lutram), width, ("line", "chain"),
                                           settle=2 * max(taps) + 30, seed=width + len(taps),
                                           cycles=300)
    assert all(a == b for a, b in compared)
    assert len({b for _, b in compared}) > 1


@pytest.mark.parametrize("lutram", [False, True])
def test_lutram_line_takes_no_shift_registers(tmp_path, lutram):
    # line only: the reference chains would be shift registers of their own
    class _Line(wiring.Component):
        def __init__(self):
            super().__init__({"value": In(256), "en": In(1), "out": Out(512)})

        def elaborate(self, platform):
            m = Module()
            st = Stager(m, self.en, reset_less=True)
            line = delay_taps(m, st, self.value, [10, 12], name="line", lutram=lutram)
            m.d.comb += self.out.eq(Cat(line[10], line[12]))
            return m

    result = synth.synthesize(_Line(), name="line", workdir=tmp_path)
    if lutram:
        # nine cycles in RAM32M16s (8 LUTs and 14-16 bits each), the taps in flip-flops
        assert 0 < result.lutram <= -(-256 // 14) and result.srl == 0
    else:
        assert result.lutram == 0 and result.srl >= 256
    assert result.ff >= 3 * 256
