"""Amaranth's heavy one-time steps with Python's cyclic garbage collector paused.

Converting a design to Verilog, or setting its simulation up, makes millions of
objects that live until the step ends. While the heap grows, the collector's full passes
walk all of them again and again, to free little: an all-codec ``TxLane`` exports in
7.6 s instead of 10.3 s with it paused, and its Amaranth simulation sets up in 2.6 s
instead of 3.2 s (``docs/fastsim.md``). The step's cyclic garbage is freed after it
instead of during it, so its peak memory is higher: a 64-lane ``TxArray`` exports in 40 s
and 1.8 GB instead of 52 s and 1.0 GB.

:func:`to_verilog` also refuses Verilog that simulators would run differently from the
design: yosys writes a constant driving part of a ``reg`` as an ``always @*`` block that
reads nothing, and such a block never runs in Icarus, Verilator or any simulator that
follows IEEE 1364 (its part stays X or 0), while synthesis takes the constant.
"""

import contextlib
import gc
import re

from amaranth.back import verilog

__all__ = ["collector_paused", "to_verilog", "blocks_never_run"]


@contextlib.contextmanager
def collector_paused():
    """The ``with`` block runs with the cyclic collector off; it is back on after it (if
    it was on before: pauses nest)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def to_verilog(design, **kwargs):
    """``amaranth.back.verilog.convert(design, **kwargs)``, the collector paused.

    Raises ``RuntimeError`` when the Verilog has an ``always @*`` block that reads nothing
    (:func:`blocks_never_run`): a design that drives part of a signal in an ``If`` or
    ``Switch`` and another part with a constant must drive the signal whole instead."""
    with collector_paused():
        text = verilog.convert(design, **kwargs)
    never_run = blocks_never_run(text)
    if never_run:
        module, target = never_run[0]
        raise RuntimeError(
            f"Verilog of {type(design).__name__}: {len(never_run)} `always @*` block(s) "
            f"read no signal and never run in simulation, the first driving {target} in "
            f"module {module}")
    return text


# yosys's form of a constant driving part of a `reg`: `always @*` and one assignment
_CONSTANT_ALWAYS = re.compile(
    r"^[ \t]*always @\*\n[ \t]*(?P<target>[^\n=]+?) = \d+'s?[bhd][0-9a-fA-FxzXZ?_]+;$",
    re.MULTILINE)
_MODULE = re.compile(r"^module (\S+?)\s*\(", re.MULTILINE)


def blocks_never_run(text):
    """The ``always @*`` blocks of Verilog ``text`` that assign a constant and read
    nothing, as ``(module, target)``: IEEE 1364 runs such a block on no event at all."""
    blocks = list(_CONSTANT_ALWAYS.finditer(text))
    if not blocks:          # every export: one scan of the text, no module table
        return []
    modules = [(m.start(), m.group(1).lstrip("\\")) for m in _MODULE.finditer(text)]
    return [(next((name for start, name in reversed(modules) if start < block.start()), "?"),
             block.group("target")) for block in blocks]
