"""Stream plumbing every pipeline uses: pipeline registers on one enable, a skid buffer (the
registered ready at a block boundary), a FIFO between two streams, the FIFO depth check, and
the merge of two streams in a queued order."""

from amaranth import Cat, Elaboratable, Module, Mux, Shape, Signal, Value, unsigned
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["MAX_FANOUT", "stage_enable", "Stager", "load_or_clear", "SkidBuffer", "LutramBuffer",
           "LutramQueue", "LutramFifo", "BlockRamFifo", "lutram_delay", "lutram_delay_each",
           "split_like", "skid_between", "fifo_between", "fifo_with_room", "ROOM_SLACK",
           "check_fifo_depth", "merge_in_order"]


#: The loads a pipeline's enable may drive from one driver: the ``max_fanout`` attribute of
#: :func:`stage_enable`, which Vivado honours by copying the driver for every so many loads
#: (UG901), and which the timing estimate counts the same way (``docs/timing.md``).
MAX_FANOUT = 64


def stage_enable(name="enable", *, keep=False):
    """A pipeline's enable: a signal with the ``max_fanout`` attribute (:data:`MAX_FANOUT`).

    An enable reaches every register of its pipeline (thousands in a codec bank); one
    driver and one net that large is slow on a full chip. With the attribute, Vivado
    drives each group of :data:`MAX_FANOUT` loads from a copy of the driver. With
    ``keep`` the net is also a LUT boundary (:func:`~.lut_tree.kept`): the logic it
    reaches other than clock enables reads it as it is, however a LUT mapper would
    rather merge it."""
    attrs = {"max_fanout": MAX_FANOUT, **({"keep": 1} if keep else {})}
    return Signal(name=name, attrs=attrs)


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

    def reg(self, value, *, name=None, reset=0, reset_less=None, clear=None, fanout=False):
        """Return a register holding ``value`` one (enabled) cycle later.

        ``clear``: the register takes 0 instead (when enabled), as
        :func:`load_or_clear` loads it: the flip-flops' synchronous reset. ``fanout``: the
        register drives many loads (a select of a wide multiplexer) and carries the
        ``max_fanout`` attribute (:data:`MAX_FANOUT`), for Vivado to copy it.
        """
        self._count += 1
        shape = value.shape() if hasattr(value, "shape") else Signal.like(value).shape()
        # Structured shapes take no integer ``init``; zero is their default anyway.
        init = {"init": reset} if reset else {}
        if reset_less is None:
            reset_less = self.reset_less
        attrs = {"max_fanout": MAX_FANOUT} if fanout else {}
        r = Signal(shape, name=name or f"stage{self._count}", reset_less=reset_less,
                   attrs=attrs, **init)
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
    ready_next : Signal
        What ``i.ready`` will be in the next cycle (combinational), for a block in
        front that keeps registered copies of it.

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
        self.ready_next = Signal()

    def elaborate(self, platform):
        m = Module()
        # kept as "free" rather than "valid": the skid register's enable and ``i.ready``
        # are then the flip-flop itself, not its inverse (which Yosys maps to an
        # inverter in front of every enable pin)
        skid_free = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})
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
        advance = stage_enable("advance")   # the output register's enable (wide)
        m.d.comb += advance.eq(~out_valid | self.o.ready)
        with m.If(advance):
            m.d.sync += [
                out_valid.eq(~skid_free | self.i.valid),
                out.eq(Mux(skid_free, self.i.payload, skid)),
                skid_free.eq(1),
            ]
        with m.Elif(self.i.valid & skid_free):
            m.d.sync += skid_free.eq(0)
        # the rule above: free after the output register moves, taken by a beat offered
        # while free
        m.d.comb += self.ready_next.eq(advance | (skid_free & ~self.i.valid))
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
    Latency: 2 cycles (a beat accepted in cycle ``t`` is offered on ``o`` from ``t + 2``).
    Throughput: one beat per cycle, sustained, while ``o.ready`` is high. Backpressure:
    ``i.ready`` is a flip-flop of the fill level, never of ``o.ready``; it falls when
    ``depth`` beats wait. Nothing is dropped or reordered. ``o.payload`` is a register
    holding the RAM's read of the oldest beat (a :class:`LutramFifo`), so its reader's
    first stage starts at flip-flops, not at a LUTRAM read (0.70 ns in
    ``docs/timing.md``). Resources: ``⌈width / 14⌉`` RAM32M16 (8 LUTs each), a flip-flop
    a bit and a few LUTs of pointers and level, where a skid buffer takes a LUT and two
    flip-flops a bit.
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
        fifo_between(m, "fifo", self.i, self.o, self._depth)
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


def _queue_ram(m, width, depth, do_write, do_read, *, read_domain, attrs=None):
    """The storage of a queue of ``depth`` entries and its two pointers; returns
    ``(write data, read data, held, nonempty, full)``.

    How many entries are held is the difference of two counters, one counting writes
    (``do_write``) and one reads (``do_read``), each a register that adds one on its
    enable, not a level that a late ``do_read`` chooses to raise or lower: a late enable
    then only reaches the counters' clock enables, never a carry chain. ``held`` comes
    from those registers alone; ``full`` and ``nonempty`` are registers
    of their own (the write side's and the read side's ready: no compare in front of
    them), which change when exactly one of a write and a read happens, to a value of
    the write's enable and the counters, so a late read enable reaches only their clock
    enable."""
    count_bits = depth.bit_length() + 1           # holds 0 … depth, wrapping by itself
    storage = Memory(shape=unsigned(width), depth=depth, init=[], attrs=attrs or {})
    m.submodules.storage = storage
    write = storage.write_port()
    read = storage.read_port(domain=read_domain)
    w_data = Signal(width, name="w_data_in", reset_less=True)
    produce = Signal(range(depth))
    consume = Signal(range(depth))
    written = Signal(count_bits)
    taken = Signal(count_bits)
    held = Signal(count_bits)
    nonempty = Signal()
    full = Signal()
    m.d.comb += [
        held.eq(written - taken),
        write.addr.eq(produce),
        write.data.eq(w_data),
        write.en.eq(do_write),
        read.addr.eq(consume),
    ]
    if read_domain != "comb":
        m.d.comb += read.en.eq(do_read)
    with m.If(do_write):
        m.d.sync += [produce.eq(_next(produce, depth)), written.eq(written + 1)]
    with m.If(do_read):
        m.d.sync += [consume.eq(_next(consume, depth)), taken.eq(taken + 1)]
    # a late ``do_read`` reaches ``full`` and ``nonempty`` only as their enable
    with m.If(do_write ^ do_read):
        m.d.sync += [full.eq(do_write & (held == depth - 1)),
                     nonempty.eq(do_write | (held != 1))]
    return w_data, read.data, held, nonempty, full


class LutramQueue(Elaboratable, fifo.FIFOInterface):
    """``SyncFIFO``, cycle for cycle: a first-word-fall-through queue in distributed RAM,
    ``r_data`` the RAM's read at the oldest entry (addressed by a register).

    Parameters
    ----------
    width : int
        Bits of an entry.
    depth : int
        Entries it holds, at least 1.

    Attributes
    ----------
    w_data, w_en, w_rdy, r_data, r_en, r_rdy, level, w_level, r_level
        As ``amaranth.lib.fifo.SyncFIFO``.

    Notes
    -----
    Latency: an entry written in cycle ``t`` is on ``r_data`` with ``r_rdy`` from
    ``t + 1``. Throughput: one write and one read per cycle. Backpressure: ``w_rdy`` low
    while ``depth`` entries are held. The count of entries is two counters' difference
    (a late ``r_en`` reaches no carry chain; ``_queue_ram``). Reset: pointers and
    counters; the data takes none.
    """

    def __init__(self, *, width, depth):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an int of at least 1, got {depth!r}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        do_write = Signal()
        do_read = Signal()
        w_data, r_data, held, nonempty, full = _queue_ram(
            m, self.width, self.depth, do_write, do_read, read_domain="comb")
        m.d.comb += [
            w_data.eq(self.w_data),
            self.w_rdy.eq(~full),
            self.r_rdy.eq(nonempty),
            do_write.eq(self.w_en & ~full),
            do_read.eq(self.r_en & nonempty),
            self.r_data.eq(r_data),
            self.level.eq(held),
            self.w_level.eq(held),
            self.r_level.eq(held),
        ]
        return m


class LutramFifo(Elaboratable, fifo.FIFOInterface):
    """``SyncFIFOBuffered``, cycle for cycle, whose output register's enable carries the
    ``max_fanout`` attribute.

    Its storage is distributed RAM and its ``r_data`` the RAM's registered read; that
    register's enable reaches every bit of it (hundreds of loads for a beat-wide queue),
    so it is a :func:`stage_enable` (Vivado copies its driver for every
    :data:`MAX_FANOUT` loads).

    Parameters
    ----------
    width : int
        Bits of an entry.
    depth : int
        Entries it holds, at least 2: ``depth - 1`` in the RAM and one in the output
        register.

    Attributes
    ----------
    w_data, w_en, w_rdy, r_data, r_en, r_rdy, level, w_level, r_level
        As ``amaranth.lib.fifo.SyncFIFOBuffered``.

    Notes
    -----
    Latency: an entry written in cycle ``t`` is on ``r_data`` with ``r_rdy`` from
    ``t + 2`` when the queue was empty. Throughput: one write and one read per cycle.
    Backpressure: ``w_rdy`` low while the RAM's ``depth - 1`` entries are held; the
    output register holds while ``r_rdy & ~r_en``. The RAM's count is two counters'
    difference (``_queue_ram``). Reset: pointers, counters and ``r_rdy``; the data takes
    none.
    """

    def __init__(self, *, width, depth):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 2:
            raise ValueError(f"depth must be an int of at least 2, got {depth!r}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        do_write = Signal()
        do_read = stage_enable("do_read")      # the output register takes the oldest entry
        w_data, r_data, held, nonempty, full = _queue_ram(
            m, self.width, self.depth - 1, do_write, do_read, read_domain="sync")
        m.d.comb += [
            w_data.eq(self.w_data),
            self.w_rdy.eq(~full),
            do_write.eq(self.w_en & ~full),
            do_read.eq(nonempty & (~self.r_rdy | self.r_en)),
            self.r_data.eq(r_data),
            self.level.eq(held + self.r_rdy),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
        ]
        with m.If(do_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


def _next(pointer, depth):
    """``pointer + 1`` modulo ``depth`` (a power of two wraps by itself)."""
    if depth == 1 << len(pointer):
        return pointer + 1
    return Mux(pointer == depth - 1, 0, pointer + 1)


class BlockRamFifo(Elaboratable, fifo.FIFOInterface):
    """A first-word-fall-through FIFO whose storage is block RAM and whose read data is
    registered after the RAM.

    The interface of ``SyncFIFOBuffered`` (``w_*``, ``r_*``, ``level``), for a deep queue of
    wide entries: Yosys would build a ``SyncFIFOBuffered``'s storage of distributed RAM (a
    64-entry queue of 625-bit beats takes 89 RAM64M8, 712 LUTs), where this one takes 9
    RAMB36 and no LUT of storage (the ``ram_style = "block"`` attribute, which Yosys'
    ``memory_libmap`` and Vivado honour). Block RAM's clock-to-out is slow (0.9 ns in
    ``docs/timing.md`` without its output register, against 0.15 ns for a flip-flop), so no
    logic reads it: the read data goes straight into an output register, which Vivado
    places in the RAM as its ``DOA_REG``/``DOB_REG`` (``docs/timing.md``).

    Parameters
    ----------
    width : int
        Bits of an entry.
    depth : int
        Entries it holds, at least 3: ``depth - 2`` in the RAM, one on its read port and
        one in the output register.

    Attributes
    ----------
    w_data, w_en, w_rdy, r_data, r_en, r_rdy, level, w_level, r_level
        As ``amaranth.lib.fifo.SyncFIFOBuffered``: ``r_data`` is valid while ``r_rdy``
        (first word fall-through) and is the output register.

    Notes
    -----
    Latency: an entry written in cycle ``t`` is on ``r_data`` with ``r_rdy`` from cycle
    ``t + 3`` when the queue was empty (the RAM, its read port, the output register).

    Throughput: one write and one read per cycle, sustained.

    Backpressure: ``w_rdy`` is low while ``depth`` entries are held (a compare of a
    register). While ``r_rdy & ~r_en`` the output register and the read port hold; the
    read port and the RAM read on when the stage after them is empty or moves on. Nothing
    is dropped or reordered.

    Reset: the pointers, the level and the two stages' valid bits; the data takes none.

    Resources: ``⌈width / 72⌉`` RAMB36 for up to 512 entries; ``width`` flip-flops of
    output register (inside the RAM in Vivado); pointers and level.
    """

    def __init__(self, *, width, depth):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 3:
            raise ValueError(f"depth must be an int of at least 3, got {depth!r}")
        super().__init__(width=width, depth=depth)
        self.level = Signal(range(depth + 1))

    def elaborate(self, platform):
        m = Module()
        on_port = Signal()          # an entry is on the read port
        out_valid = Signal()        # an entry is in the output register
        out = Signal(self.width, reset_less=True)
        do_write = Signal()
        do_read = Signal()          # the RAM reads its oldest entry onto the read port
        out_moves = stage_enable("out_moves")   # the output register takes the read port's
        w_data, r_data, held, nonempty, full = _queue_ram(
            m, self.width, self.depth - 2, do_write, do_read, read_domain="sync",
            attrs={"ram_style": "block"})
        m.d.comb += [
            w_data.eq(self.w_data),
            self.w_rdy.eq(~full),
            do_write.eq(self.w_en & ~full),
            out_moves.eq(~out_valid | self.r_en),
            do_read.eq(nonempty & (~on_port | out_moves)),
            self.r_data.eq(out),
            self.r_rdy.eq(out_valid),
            self.level.eq(held + on_port + out_valid),
            self.w_level.eq(self.level),
            self.r_level.eq(self.level),
        ]
        with m.If(out_moves):
            m.d.sync += [out_valid.eq(on_port), out.eq(r_data)]
        with m.If(do_read):
            m.d.sync += on_port.eq(1)
        with m.Elif(out_moves):
            m.d.sync += on_port.eq(0)
        return m


def fifo_between(m, name, source, sink, depth, *, block_ram=False):
    """A :class:`LutramFifo` (``block_ram``: a :class:`BlockRamFifo`) from stream ``source``
    to stream ``sink`` (payloads as bits); both read through a register."""
    width = len(source.payload.as_value()) if hasattr(source.payload, "as_value") else len(
        source.payload)
    kind = BlockRamFifo if block_ram else LutramFifo
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


#: Entries of a :func:`fifo_with_room` kept free: its ``ready`` is a register, one cycle
#: behind the FIFO's level (at most one write a cycle), so it reads "room" only while two
#: entries are free.
ROOM_SLACK = 2


def fifo_with_room(m, name, source, sink, depth, *, block_ram=False):
    """A :class:`LutramFifo` (``block_ram``: a :class:`BlockRamFifo`) of ``depth`` +
    :data:`ROOM_SLACK` entries from stream ``source`` to stream ``sink`` (``None``: the
    caller reads the FIFO), whose ``source.ready`` is a flip-flop: set while at least 3
    entries were free in the cycle before, so ``depth`` entries can be filled. What feeds
    it then sees a registered ready: no ready chain crosses the FIFO, and a pipeline that
    advances on that ready (``registered_ready``) has a register for its enable."""
    width = len(source.payload.as_value()) if hasattr(source.payload, "as_value") else len(
        source.payload)
    total = depth + ROOM_SLACK
    kind = BlockRamFifo if block_ram else LutramFifo
    q = m.submodules[name] = kind(width=width, depth=total)
    room = Signal(name=f"{name}_room", attrs={"max_fanout": MAX_FANOUT})
    m.d.sync += room.eq(q.level <= total - 1 - ROOM_SLACK)
    m.d.comb += [
        q.w_data.eq(source.payload),
        q.w_en.eq(source.valid & room),
        source.ready.eq(room),
    ]
    if sink is not None:   # else the caller reads the FIFO
        m.d.comb += [
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
