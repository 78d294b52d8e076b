"""Stream plumbing every pipeline uses: pipeline registers on one enable, a FIFO between
two streams, and the FIFO depth check."""

from amaranth import Signal
from amaranth.lib import fifo

__all__ = ["Stager", "fifo_between", "check_fifo_depth"]


class Stager:
    """Inserts pipeline registers that all advance on one shared enable."""

    def __init__(self, m, enable):
        self._m = m
        self.enable = enable
        self._count = 0

    def reg(self, value, *, name=None, reset=0):
        """Return a register holding ``value`` one (enabled) cycle later."""
        self._count += 1
        shape = value.shape() if hasattr(value, "shape") else Signal.like(value).shape()
        # Structured shapes take no integer ``init``; zero is their default anyway.
        init = {"init": reset} if reset else {}
        r = Signal(shape, name=name or f"stage{self._count}", **init)
        with self._m.If(self.enable):
            self._m.d.sync += r.eq(value)
        return r

    def delay(self, value, cycles, *, name=None):
        for k in range(cycles):
            value = self.reg(value, name=f"{name}_d{k + 1}" if name else None)
        return value


def fifo_between(m, name, source, sink, depth):
    """A ``SyncFIFOBuffered`` from stream ``source`` to stream ``sink`` (payloads as bits)."""
    width = len(source.payload.as_value()) if hasattr(source.payload, "as_value") else len(
        source.payload)
    q = m.submodules[name] = fifo.SyncFIFOBuffered(width=width, depth=depth)
    m.d.comb += [
        q.w_data.eq(source.payload),
        q.w_en.eq(source.valid),
        source.ready.eq(q.w_rdy),
        sink.payload.eq(q.r_data),
        sink.valid.eq(q.r_rdy),
        q.r_en.eq(sink.ready),
    ]
    return q


def check_fifo_depth(name, value, unit):
    """``ValueError`` naming ``name`` unless a lane FIFO depth is at least 2."""
    if value < 2:
        raise ValueError(f"{name} must be at least 2 {unit}, got {value!r}")
