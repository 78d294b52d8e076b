"""Stream plumbing every pipeline uses: pipeline registers on one enable, a FIFO between
two streams, the FIFO depth check, and the merge of two streams in a queued order."""

from amaranth import Mux, Signal
from amaranth.lib import fifo

__all__ = ["Stager", "fifo_between", "check_fifo_depth", "merge_in_order"]


class Stager:
    """Inserts pipeline registers that all advance on one shared enable.

    With ``reset_less`` its registers take no reset by default (datapath registers: a
    reset only has to clear what says whether the data is valid); ``reg(...,
    reset_less=False)`` makes one that does (a valid bit).
    """

    def __init__(self, m, enable, *, reset_less=False):
        self._m = m
        self.enable = enable
        self.reset_less = reset_less
        self._count = 0

    def reg(self, value, *, name=None, reset=0, reset_less=None):
        """Return a register holding ``value`` one (enabled) cycle later."""
        self._count += 1
        shape = value.shape() if hasattr(value, "shape") else Signal.like(value).shape()
        # Structured shapes take no integer ``init``; zero is their default anyway.
        init = {"init": reset} if reset else {}
        if reset_less is None:
            reset_less = self.reset_less
        r = Signal(shape, name=name or f"stage{self._count}", reset_less=reset_less, **init)
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


def merge_in_order(m, order, sources, sink):
    """Drive ``sink`` from one of two sources at a time, run by run, in the order queued
    in ``order``.

    A producer queues, for every run of items it will send (a frame's payload, say), which
    of the two sources the run comes from; the runs of each source arrive in that order on
    it, and this merge forwards them to ``sink`` in the queued order.

    Parameters
    ----------
    m : Module
    order : amaranth.lib.fifo.FIFOInterface
        The order queue's read side: bit 0 of ``r_data`` at its head names the source of
        the next run (0 or 1). It is popped as the run's last item passes.
    sources : pair of (stream, payload, end)
        For sources 0 and 1: the stream (its ``valid`` and ``ready`` are used), the
        payload it offers ``sink`` (a value of ``sink.payload``'s shape), and the
        condition that marks the last item of a run.
    sink : stream interface
        ``valid``, ``ready`` and ``payload`` of the destination.

    Latency: none (combinational). Throughput: one item per cycle, also across the end
    of a run. Backpressure: the selected source sees ``sink.ready``; the other one, and
    both while ``order`` is empty, see ``ready`` low. Nothing is dropped or reordered.
    """
    (first, first_payload, first_end), (second, second_payload, second_end) = sources
    from_second = order.r_rdy & order.r_data[0]
    from_first = order.r_rdy & ~order.r_data[0]
    m.d.comb += [
        sink.payload.eq(Mux(from_second, second_payload, first_payload)),
        sink.valid.eq((from_first & first.valid) | (from_second & second.valid)),
        first.ready.eq(from_first & sink.ready),
        second.ready.eq(from_second & sink.ready),
        order.r_en.eq(sink.valid & sink.ready & Mux(from_second, second_end, first_end)),
    ]
