"""``common/onehot_states.py``: one flip-flop a state, moves as ``goto`` says, and bad
use is rejected."""

import random

import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from squeezenic_hw.gateware.common.onehot_states import OneHotStates

_NAMES = ["A", "B", "C"]


def _machine():
    """A -> B on ``go``; B -> C on ``go``, B -> A on ``back``; C -> A on ``go``."""
    m = Module()
    go, back = Signal(name="go"), Signal(name="back")
    fsm = OneHotStates(m, _NAMES, name="t")
    with fsm.state("A"):
        with m.If(go):
            fsm.goto("B")
    with fsm.state("B"):
        with m.If(go):
            fsm.goto("C")
        with m.Elif(back):
            fsm.goto("A")
    with fsm.state("C"):
        with m.If(go):
            fsm.goto("A")
    return m, fsm, go, back


def _model(state, go, back):
    if state == "A":
        return "B" if go else "A"
    if state == "B":
        return "C" if go else ("A" if back else "B")
    return "A" if go else "C"


def test_moves_as_a_binary_state_machine_would():
    m, fsm, go, back = _machine()
    rng = random.Random(7)
    seen = []

    async def bench(ctx):
        state = "A"
        for _ in range(300):
            hot = [name for name in _NAMES if ctx.get(fsm.ongoing(name))]
            assert hot == [state]
            seen.append(state)
            g, b = rng.random() < 0.4, rng.random() < 0.4
            ctx.set(go, g)
            ctx.set(back, b)
            await ctx.tick()
            state = _model(state, g, b)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert set(seen) == set(_NAMES)


@pytest.mark.parametrize("names", [["A"], ["A", "A"], ["A", ""], []])
def test_bad_names_rejected(names):
    with pytest.raises(ValueError, match="names"):
        OneHotStates(Module(), names, name="t")


def test_goto_outside_a_state_rejected():
    fsm = OneHotStates(Module(), _NAMES, name="t")
    with pytest.raises(ValueError, match="outside a state"):
        fsm.goto("B")


def test_unknown_and_nested_states_rejected():
    fsm = OneHotStates(Module(), _NAMES, name="t")
    with pytest.raises(ValueError, match="no state"):
        with fsm.state("D"):
            pass
    with fsm.state("A"):
        with pytest.raises(ValueError, match="no state"):
            fsm.goto("D")
        with pytest.raises(ValueError, match="inside state"):
            with fsm.state("B"):
                pass
