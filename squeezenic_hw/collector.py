"""Amaranth's heavy one-time steps with Python's cyclic garbage collector paused.

Converting a design to Verilog, or setting its simulation up, makes millions of
objects that live until the step ends. While the heap grows, the collector's full passes
walk all of them again and again, to free little: an all-codec ``TxLane`` exports in
7.6 s instead of 10.3 s with it paused, and its Amaranth simulation sets up in 2.6 s
instead of 3.2 s (``docs/fastsim.md``). The step's cyclic garbage is freed after it
instead of during it, so its peak memory is higher: a 64-lane ``TxArray`` exports in 40 s
and 1.8 GB instead of 52 s and 1.0 GB.
"""

import contextlib
import gc

from amaranth.back import verilog

__all__ = ["collector_paused", "to_verilog"]


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
    """``amaranth.back.verilog.convert(design, **kwargs)``, the collector paused."""
    with collector_paused():
        return verilog.convert(design, **kwargs)
