# amaranth: UnusedElaboratable=no
"""``common/lut_tree.py``: the trees equal the plain OR and the plain index for random
inputs, take as few LUTs as the levels need, and keep their pieces' nets."""

import functools
import operator
import random

import pytest
from amaranth import Array, Module, Mux, Signal
from amaranth.back import rtlil
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.lut_tree import LUT_INPUTS, mux_tree, or_tree


def _pieces(rtlil_text):
    return rtlil_text.count("attribute \\keep 1")


def _simulate(m, inputs, outputs, cases):
    """Each case (values of ``inputs``) in turn: the values of ``outputs``."""
    got = []

    async def bench(ctx):
        for case in cases:
            for signal, value in zip(inputs, case, strict=True):
                ctx.set(signal, value)
            got.append(tuple(ctx.get(o) for o in outputs))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("terms,pieces", [(1, 0), (3, 0), (4, 1), (7, 2), (17, 6), (40, 16)])
def test_or_tree_of_selected_values(terms, pieces):
    m = Module()
    sels = [Signal(name=f"s{k}") for k in range(terms)]
    data = [Signal(5, name=f"d{k}") for k in range(terms)]
    out, plain = Signal(5), Signal(5)
    selected = [Mux(s, d, 0) for s, d in zip(sels, data, strict=True)]
    m.d.comb += [out.eq(or_tree(m, selected, inputs=2, name="t")),
                 plain.eq(functools.reduce(operator.or_, selected))]
    rng = random.Random(terms)
    cases = [[rng.random() < 0.3 for _ in sels] + [rng.randrange(32) for _ in data]
             for _ in range(60)]
    got = _simulate(m, sels + data, [out, plain], cases)
    assert all(a == b for a, b in got)
    assert _pieces(rtlil.convert(m, ports=[*sels, *data, out])) == pieces


def test_or_tree_levels():
    """17 pairs: 6 pieces of at most 6 inputs, then one LUT of the 6 (2 levels); each
    piece is a kept net of its own."""
    m = Module()
    sels = [Signal(name=f"s{k}") for k in range(17)]
    data = [Signal(name=f"d{k}") for k in range(17)]
    out = Signal()
    m.d.comb += out.eq(or_tree(m, [Mux(s, d, 0) for s, d in zip(sels, data, strict=True)],
                               inputs=2, name="t"))
    text = rtlil.convert(m, ports=[*sels, *data, out])
    assert text.count("wire width 1 \\t_l0_") == 6 and "\\t_l1_" not in text


@pytest.mark.parametrize("width,count", [(4, 16), (4, 13), (4, 1), (5, 20), (3, 5), (1, 2)])
def test_mux_tree_is_the_index(width, count):
    m = Module()
    select = Signal(width)
    data = [Signal(6, name=f"d{k}") for k in range(count)]
    out, plain = Signal(6), Signal(6)
    m.d.comb += [out.eq(mux_tree(m, select, data, name="t")),
                 plain.eq(Array(data + [0] * ((1 << width) - count))[select])]
    rng = random.Random(width * 100 + count)
    cases = [[rng.randrange(1 << width)] + [rng.randrange(64) for _ in data]
             for _ in range(80)]
    got = _simulate(m, [select, *data], [out, plain], cases)
    assert all(a == b for a, b in got)


def test_mux_tree_keeps_no_piece_that_fits_one_lut():
    """Two values and four select bits (6 inputs): one LUT, nothing kept; sixteen: four
    kept 4:1 pieces, then the last 4:1."""
    for count, pieces in ((2, 0), (16, 4)):
        m = Module()
        select, data, out = Signal(4), [Signal(name=f"d{k}") for k in range(count)], Signal()
        m.d.comb += out.eq(mux_tree(m, select, data, name="t"))
        assert _pieces(rtlil.convert(m, ports=[select, *data, out])) == pieces


def test_bad_arguments():
    m = Module()
    with pytest.raises(ValueError, match="inputs"):
        or_tree(m, [Signal()], inputs=LUT_INPUTS + 1)
    with pytest.raises(ValueError, match="data"):
        mux_tree(m, Signal(2), [Signal()] * 5)
    with pytest.raises(ValueError, match="data"):
        mux_tree(m, Signal(2), [])


@pytest.mark.parametrize("terms,pieces", [(1, 0), (2, 2), (6, 6), (7, 8)])
def test_or_tree_of_whole_luts(terms, pieces):
    """Terms of six inputs each are LUTs of their own: kept, then OR-ed six at a time."""
    m = Module()
    data = [Signal(6, name=f"d{k}") for k in range(terms)]
    out = Signal()
    m.d.comb += out.eq(or_tree(m, [d.all() for d in data], inputs=6, name="t"))
    assert _pieces(rtlil.convert(m, ports=[*data, out])) == pieces


def test_or_tree_leaves_room_in_its_root():
    """8 pairs with room for two more inputs: three pieces of at most 6 inputs, the root
    an OR of the three (4 inputs at most); without room the root takes two pieces and
    two pairs (6 inputs)."""
    def pieces(room):
        m = Module()
        sels = [Signal(name=f"s{k}") for k in range(8)]
        data = [Signal(name=f"d{k}") for k in range(8)]
        out = Signal()
        m.d.comb += out.eq(or_tree(m, [Mux(s, d, 0) for s, d in zip(sels, data, strict=True)],
                                   inputs=2, name="t", room=room))
        return rtlil.convert(m, ports=[*sels, *data, out]).count("wire width 1 \\t_l0_")
    assert pieces(0) == 2 and pieces(2) == 3
    with pytest.raises(ValueError, match="room"):
        or_tree(Module(), [Signal()], room=5)
