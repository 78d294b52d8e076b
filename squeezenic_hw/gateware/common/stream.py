"""Stream plumbing every pipeline uses: pipeline registers on one enable, a skid buffer (the
registered ready at a block boundary), a FIFO between two streams, the FIFO depth check, and
the merge of two streams in a queued order."""

from amaranth import Cat, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["Stager", "load_or_clear", "SkidBuffer", "LutramBuffer", "BlockRamFifo", "lutram_delay",
           "lutram_delay_each", "split_like", "skid_between", "fifo_between", "check_fifo_depth",
           "merge_in_order"]


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

    def reg(self, value, *, name=None, reset=0, reset_less=None, clear=None):
        """Return a register holding ``value`` one (enabled) cycle later.

        ``clear``: the register takes 0 instead (when enabled), as
        :func:`load_or_clear` loads it: the flip-flops' synchronous reset.
        """
        self._count += 1
        shape = value.shape() if hasattr(value, "shape") else Signal.like(value).shape()
        # Structured shapes take no integer ``init``; zero is their default anyway.
        init = {"init": reset} if reset else {}
        if reset_less is None:
            reset_less = self.reset_less
        r = Signal(shape, name=name or f"stage{self._count}", reset_less=reset_less, **init)
        if clear is None:
            with self._m.If(self.enable):
                self._m.d.sync += r.eq(value)
        else:
            load_or_clear(self._m, r, value, load=self.enable, clear=clear)
        return r

    def delay(self, value, cycles, *, name=None):
        for k in range(cycles):
            value = self.reg(value, name=f"{name}_d{k + 1}" if name else None)
        return value


def load_or_clear(m, reg, value, *, load, clear):
    """``reg`` takes ``value`` when ``load``, and 0 instead when ``clear`` too. The clear
    is tested before the load, so that synthesis makes it the flip-flops' synchronous
    reset (one LUT for the two conditions) rather than an AND gate on every bit."""
    with m.If(load & clear):
        m.d.sync += reg.eq(0)
    with m.Elif(load):
        m.d.sync += reg.eq(value)


def _check_shape(shape):
    """``ValueError`` naming ``shape`` unless it is shape-castable."""
    try:
        Shape.cast(shape)
    except TypeError as e:
        raise ValueError(f"shape must be shape-castable, got {shape!r} ({e})") from None


class SkidBuffer(wiring.Component):
    """A stream register whose ``ready`` is a flip-flop: what a block boundary needs so that
    no ready chain crosses it.

    Two payload registers: the output register, and a skid register that catches the beat
    sent in the cycle ``o.ready`` fell (the sender saw ``i.ready`` of the cycle before).

    Parameters
    ----------
    shape : shape-castable
        The payload.

    Attributes
    ----------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))

    Notes
    -----
    Latency: 1 cycle (a beat accepted in cycle ``t`` is offered on ``o`` from ``t + 1``).
    Throughput: one beat per cycle, sustained, while ``o.ready`` is high.
    Backpressure: ``i.ready`` is a register (high while the skid register is empty); it
    falls one cycle after ``o`` stalls with a beat held, the beat then in flight waits in
    the skid register. Nothing is dropped or reordered. ``o.valid`` and ``o.payload`` are
    registers. Only the two valid bits are reset.
    Resources: two registers of the payload's width and a 2:1 mux in front of the output
    register.
    """

    def __init__(self, shape):
        _check_shape(shape)
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        # kept as "free" rather than "valid": the skid register's enable and ``i.ready``
        # are then the flip-flop itself, not its inverse (which Yosys maps to an
        # inverter in front of every enable pin)
        skid_free = Signal(init=1)
        skid = Signal(self._shape, reset_less=True)
        out_valid = Signal()
        out = Signal(self._shape, reset_less=True)
        m.d.comb += [
            self.i.ready.eq(skid_free),
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out),
        ]
        # The skid register takes whatever is offered while it is free: its enable, like
        # the output register's, comes from registers only; ``i.valid`` only sets valid bits.
        with m.If(skid_free):
            m.d.sync += skid.eq(self.i.payload)
        with m.If(~out_valid | self.o.ready):
            m.d.sync += [
                out_valid.eq(~skid_free | self.i.valid),
                out.eq(Mux(skid_free, self.i.payload, skid)),
                skid_free.eq(1),
            ]
        with m.Elif(self.i.valid & skid_free):
            m.d.sync += skid_free.eq(0)
        return m


class LutramBuffer(wiring.Component):
    """A stream buffer of a few beats in distributed RAM: for wide payloads, where a
    :class:`SkidBuffer`'s two registers and multiplexer cost more.

    Parameters
    ----------
    shape : shape-castable
        The payload's shape.
    depth : int
        Beats it holds, 2 … 32 (one RAM32M16 deep; default 4).

    Attributes
    ----------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))

    Notes
    -----
    Latency: 1 cycle (a beat accepted in cycle ``t`` is offered on ``o`` from ``t + 1``),
    as a :class:`SkidBuffer`. Throughput: one beat per cycle, sustained, while
    ``o.ready`` is high. Backpressure: ``i.ready`` is a compare of the fill level (a
    register), never of ``o.ready``; it falls when ``depth`` beats wait. Nothing is
    dropped or reordered. ``o.payload`` is the RAM's read of the oldest beat, addressed
    by a register: its reader's first stage sees a LUTRAM read (0.70 ns in
    ``docs/timing.md``) rather than a flip-flop. Resources: ``⌈width / 14⌉`` RAM32M16
    (8 LUTs each) and a few LUTs of pointers and level, where a skid buffer takes a LUT
    and two flip-flops a bit.
    """

    def __init__(self, shape, depth=4):
        _check_shape(shape)
        if isinstance(depth, bool) or not isinstance(depth, int) or not 2 <= depth <= 32:
            raise ValueError(f"depth must be an int from 2 to 32, got {depth!r}")
        self._shape = shape
        self._depth = depth
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        # unbuffered: the read is the RAM's, so a beat is out the cycle after it is in
        fifo_between(m, "fifo", self.i, self.o, self._depth, buffered=False)
        return m


def lutram_delay(m, stager, value, cycles, *, name):
    """``value`` delayed by ``cycles`` enabled cycles of ``stager`` (2 … 32) in distributed
    RAM: what a chain of that many registers would hold, for a wide datapath value.

    A ring of ``cycles`` entries: each enabled cycle writes ``value`` at the pointer and
    moves it on; the output is the RAM's read at the pointer, the entry written
    ``cycles`` enabled cycles ago. Like a shift register's (which Yosys makes of a plain
    register chain), it is a read, not a flip-flop; it takes about ``width / 16``
    RAM32M16 (8 LUTs each; its read and write share the address) where a shift register
    takes a LUT a bit. The entries take no reset:
    a datapath value whose valid bit is delayed beside it."""
    if isinstance(cycles, bool) or not isinstance(cycles, int) or not 2 <= cycles <= 32:
        raise ValueError(f"cycles must be an int from 2 to 32, got {cycles!r}")
    width = len(value)
    m.submodules[name] = ring = Memory(shape=unsigned(width), depth=cycles, init=[])
    write = ring.write_port()
    read = ring.read_port(domain="comb")
    ptr = Signal(range(cycles), name=f"{name}_ptr")
    m.d.comb += [write.addr.eq(ptr), write.data.eq(value), write.en.eq(stager.enable),
                 read.addr.eq(ptr)]
    with m.If(stager.enable):
        m.d.sync += ptr.eq(Mux(ptr == cycles - 1, 0, ptr + 1))
    return read.data


def split_like(value, parts):
    """``value`` cut into slices as wide as ``parts``, lowest first: the inverse of
    ``Cat(*parts)``, for values that travelled together (a delay line of several)."""
    out, lo = [], 0
    for part in parts:
        width = len(Value.cast(part))
        out.append(value[lo:lo + width])
        lo += width
    return out


def lutram_delay_each(m, stager, values, cycles, *, name):
    """Each of ``values`` delayed by ``cycles`` enabled cycles of ``stager``, on one
    :func:`lutram_delay` (their concatenation); a list in the order given."""
    return split_like(lutram_delay(m, stager, Cat(*values), cycles, name=name), values)


def skid_between(m, name, source, sink, *, lutram=False):
    """A :class:`SkidBuffer` (with ``lutram``, a :class:`LutramBuffer`) from stream
    ``source`` to stream ``sink`` (interfaces whose payloads have one shape), as submodule
    ``name``; returns it."""
    shape = source.payload.shape() if hasattr(source.payload, "shape") else Shape.cast(
        len(source.payload))
    buf = m.submodules[name] = LutramBuffer(shape) if lutram else SkidBuffer(shape)
    m.d.comb += [
        buf.i.valid.eq(source.valid),
        buf.i.payload.eq(source.payload),
        source.ready.eq(buf.i.ready),
        sink.valid.eq(buf.o.valid),
        sink.payload.eq(buf.o.payload),
        buf.o.ready.eq(sink.ready),
    ]
    return buf


class BlockRamFifo(fifo.SyncFIFOBuffered):
    """A ``SyncFIFOBuffered`` whose storage is block RAM.

    The same queue (its ports, first-word fall-through, the output register behind the
    memory's registered read), for a deep queue of wide entries: Yosys would build its
    storage of distributed RAM (a 64-entry queue of 625-bit beats takes 89 RAM64M8, 712
    LUTs), where its registered read fits block RAM (9 RAMB36, no LUT). The storage takes
    the ``ram_style = "block"`` attribute that Yosys' ``memory_libmap`` and Vivado honour.
    """

    def elaborate(self, platform):
        m = super().elaborate(platform)
        if self.depth > 1:
            m.submodules.storage.attrs["ram_style"] = "block"
        return m


def fifo_between(m, name, source, sink, depth, *, buffered=True, block_ram=False):
    """A ``SyncFIFOBuffered`` (``buffered=False``: a ``SyncFIFO``, read as it is
    addressed; ``block_ram``: a :class:`BlockRamFifo`) from stream ``source`` to stream
    ``sink`` (payloads as bits)."""
    width = len(source.payload.as_value()) if hasattr(source.payload, "as_value") else len(
        source.payload)
    kind = BlockRamFifo if block_ram else fifo.SyncFIFOBuffered if buffered else fifo.SyncFIFO
    q = m.submodules[name] = kind(width=width, depth=depth)
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
