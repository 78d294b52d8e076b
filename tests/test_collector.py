"""``squeezenic_hw.collector``: exports and simulation set-ups with the collector paused."""

import gc

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, Signal

import squeezenic_hw.sim.streams as streams
from squeezenic_hw.collector import blocks_never_run, collector_paused, to_verilog


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def _counter():
    m = Module()
    count = Signal(4)
    m.d.sync += count.eq(count + 1)
    return m, [count]


def test_paused_inside_and_back_after_even_on_an_error(collector_on):
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():          # nested: still off after the inner block
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("in the step")
    assert gc.isenabled()


def test_left_off_when_it_was_off(collector_on):
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_to_verilog_is_amaranths_conversion_paused(collector_on, monkeypatch):
    design, ports = _counter()
    expected = verilog.convert(design, name="counter", ports=ports)
    seen = []
    convert = verilog.convert

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return convert(*args, **kwargs)

    monkeypatch.setattr(verilog, "convert", spy)
    design, ports = _counter()
    assert to_verilog(design, name="counter", ports=ports) == expected
    assert seen == [False] and gc.isenabled()


def test_simulations_set_up_paused(collector_on, monkeypatch):
    seen = []
    simulator = streams.Simulator

    def spy(dut):
        seen.append(gc.isenabled())
        return simulator(dut)

    monkeypatch.setattr(streams, "Simulator", spy)
    streams.ReusableSimulation(_counter()[0]).run([])
    assert seen == [False] and gc.isenabled()


def _partly_in_a_process(whole):
    """A signal with two bits driven in an ``If`` and two left undriven (constant zero),
    or, with ``whole``, the same logic with the ``If`` on a signal of its own."""
    m = Module()
    sel, a = Signal(name="sel"), Signal(2, name="a")
    out = Signal(4, name="out")
    low = Signal(2, name="low") if whole else out[:2]
    with m.If(sel):
        m.d.comb += low.eq(a)
    if whole:
        m.d.comb += out.eq(low)
    return m, [sel, a, out]


def test_a_constant_part_of_a_process_driven_signal_is_refused():
    design, ports = _partly_in_a_process(whole=False)
    text = verilog.convert(design, name="partly", ports=ports)
    # yosys's output, as simulators get it: a block that reads nothing
    assert blocks_never_run(text) == [("partly", "out[3:2]")]
    design, ports = _partly_in_a_process(whole=False)
    with pytest.raises(RuntimeError, match=r"never run in simulation.*out\[3:2\] in module partly"):
        to_verilog(design, name="partly", ports=ports)


def test_the_same_logic_driven_whole_is_accepted():
    design, ports = _partly_in_a_process(whole=True)
    text = to_verilog(design, name="whole", ports=ports)
    assert blocks_never_run(text) == []
    assert "always @*" in text        # the If is still a process, with yosys's trigger
