"""The TX lane's ring of assembled wire-frame payloads.

The packer writes the payload beats of a wire frame into the ring (up to two
per cycle) and commits the frame once all of its beats are in; the ring hands
committed beats to the frame merger one per cycle. The ring is the lane's
double buffer: while one wire frame drains to the wire, the next one is
assembled behind it, so the packer does not wait for the previous frame to be
sent.
"""

from amaranth import Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import RingRead, RingWrite
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, stage_enable

__all__ = ["WireRing", "ring_depth"]

_BEAT = unsigned(512)


def ring_depth(max_frame_beats):
    """Write slots the ring holds: the smallest power of two ``>= 2 * max_frame_beats + 4``.

    Two whole frames (one draining, one being assembled) plus headroom for a
    two-beat write and the read pipeline; a power of two so that addresses wrap
    for free.
    """
    return 1 << (2 * max_frame_beats + 3).bit_length()


class WireRing(wiring.Component):
    """Ring buffer of wire-frame payload beats; only committed frames leave.

    Parameters
    ----------
    max_frame_beats : int
        Payload beats of the largest wire frame, 1…150. The ring holds
        ``depth = ring_depth(max_frame_beats)`` write *slots* (the smallest power of
        two ``>= 2 * max_frame_beats + 4``: 64 for 23, 512 for 150). A slot holds one
        write's one or two beats: its ``beats[0]`` in bank 0 and its ``beats[1]`` in
        bank 1, two ``Memory`` banks of ``depth`` beats in block RAM, each with one
        write port and one synchronous read port. Beat 0 always goes to bank 0 and
        beat 1 to bank 1, so no write data is multiplexed; a 1-bit distributed RAM
        says which slots hold a second beat.

    Attributes
    ----------
    i : In(stream.Signature(RingWrite))
        ``beats[0 … count-1]`` are appended (``count`` 0…2); ``commit`` closes
        the frame being written after them. ``i.ready`` is a register, high
        when at least two slots were free in the cycle before (so that one is
        free now).
    o : Out(stream.Signature(RingRead))
        The beats of committed frames, in write order: ``banks[bank]`` (both read
        ports' outputs and which holds the beat, so that the reader's multiplexer
        picks the bank). Beats of the frame still being written never leave.

    Notes
    -----
    Latency: 3 cycles from the write that commits a frame to the first of its
    beats on ``o``, when nothing is ahead of it (commit write accepted in cycle
    ``t``, read in ``t + 1``, the beat in the output registers and transferable in
    cycle ``t + 3``).

    Throughput: one write (up to two beats) in per cycle, one beat out per cycle,
    back to back, while committed beats are stored. A frame takes a slot per write
    with beats, at most one per beat, so two whole frames fit: with ``o`` never held
    and frames written at up to one beat per cycle the writer never stalls.

    Backpressure: while ``o.valid & ~o.ready``, ``o.payload`` holds; nothing is
    lost. The beat on ``o`` is in the output register of the bank that read it (block
    RAM's read data feeds no logic; Vivado puts these registers in the RAMs as their
    ``DOB_REG``); the beat read behind it waits on its read port, which holds its data
    while its enable is low. The next read is issued when the read port is free or its
    beat moves on (combinationally from ``o.ready``, as in a first-word-fall-through
    FIFO). A full ring drops ``i.ready``; writes wait, nothing is overwritten.

    Resources: ``2 * depth * 512`` bits of block RAM (the same block RAM count as
    ``depth * 512``, up to 512 beats a bank) with their output registers (2 × 512
    flip-flops in Yosys's count, inside the RAMs in Vivado's), ``depth`` bits of
    distributed RAM, three slot pointers of ``log2(depth)+1`` bits; no multiplexer on
    the data.
    """

    def __init__(self, max_frame_beats):
        if (not isinstance(max_frame_beats, int) or isinstance(max_frame_beats, bool)
                or not 1 <= max_frame_beats <= 150):
            raise ValueError(f"max_frame_beats must be an int in 1..150, not {max_frame_beats!r}")
        self.max_frame_beats = max_frame_beats
        self.depth = ring_depth(max_frame_beats)
        super().__init__({
            "i": In(stream.Signature(RingWrite)),
            "o": Out(stream.Signature(RingRead)),
        })

    @property
    def latency(self):
        """Cycles from the committing write to the frame's first beat on ``o``."""
        return 3

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        abits = depth.bit_length() - 1   # slot address bits; pointers carry one more (wrap)
        banks = []
        for b in range(2):
            # block RAM at every depth (Yosys would take distributed RAM for a shallow one)
            mem = Memory(shape=_BEAT, depth=depth, init=[], attrs={"ram_style": "block"})
            m.submodules[f"bank{b}"] = mem
            banks.append(mem)
        m.submodules.second = second = Memory(shape=1, depth=depth, init=[])

        ws = Signal(abits + 1)   # next slot to write
        cs = Signal(abits + 1)   # end of the committed slots
        rs = Signal(abits + 1)   # slot being read (slots before it are free)

        # ---- write side -------------------------------------------------
        # ``i.ready`` is a register: two slots free in the cycle before leave one now,
        # whatever that cycle wrote (one slot at most).
        used = Signal(abits + 1)
        room = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})   # empty after reset
        m.d.comb += [
            used.eq(ws - rs),
            self.i.ready.eq(room),
        ]
        m.d.sync += room.eq(used <= depth - 2)
        write = self.i.valid & self.i.ready
        count = self.i.payload.count
        beats = self.i.payload.beats
        fills = Signal()         # the write has beats: it takes a slot
        m.d.comb += fills.eq(count != 0)
        for b, mem in enumerate(banks):
            port = mem.write_port()
            m.d.comb += [
                port.addr.eq(ws[:abits]),
                port.data.eq(beats[b]),
                port.en.eq(write & (count > b)),
            ]
        second_w = second.write_port()
        m.d.comb += [
            second_w.addr.eq(ws[:abits]),
            second_w.data.eq(count == 2),
            second_w.en.eq(write & fills),
        ]
        with m.If(write):
            m.d.sync += ws.eq(ws + fills)
            with m.If(self.i.payload.commit):
                m.d.sync += cs.eq(ws + fills)

        # ---- read side: a beat on a read port, then in the output registers ----
        # Reads only touch committed slots (< cs <= ws) and writes only free ones, so a
        # read and a write never meet on one address. Block RAM's read data feeds no
        # logic: each bank's read goes straight into an output register (the RAM's
        # ``DOB_REG`` in Vivado), from which the reader's multiplexer picks the bank.
        half = Signal()          # the next beat to read is the slot's second (bank 1)
        held = Signal()          # a beat is on the read port of bank ``held_bank``
        held_bank = Signal()
        out_valid = Signal()     # a beat is in the output registers, of bank ``out_bank``
        out_bank = Signal()
        out_moves = Signal()     # the output registers take the beat on the read port
        issue = Signal()
        second_r = second.read_port(domain="comb")
        m.d.comb += [
            second_r.addr.eq(rs[:abits]),
            out_moves.eq(~out_valid | self.o.ready),
            issue.eq((rs != cs) & (~held | out_moves)),
        ]
        for b, mem in enumerate(banks):
            port = mem.read_port(domain="sync")
            out = Signal(_BEAT, name=f"out{b}", reset_less=True)
            m.d.comb += [
                port.addr.eq(rs[:abits]),
                port.en.eq(issue & (half == b)),
                self.o.payload.banks[b].eq(out),
            ]
            load = stage_enable(f"load{b}")     # the bank's output register (512 loads)
            m.d.comb += load.eq(out_moves & held & (held_bank == b))
            with m.If(load):
                m.d.sync += out.eq(port.data)
        with m.If(issue):
            m.d.sync += [held.eq(1), held_bank.eq(half)]
            with m.If(~half & second_r.data):
                m.d.sync += half.eq(1)
            with m.Else():
                m.d.sync += [half.eq(0), rs.eq(rs + 1)]
        with m.Elif(out_moves):
            m.d.sync += held.eq(0)
        with m.If(out_moves):
            m.d.sync += [out_valid.eq(held), out_bank.eq(held_bank)]
        m.d.comb += [
            self.o.valid.eq(out_valid),
            self.o.payload.bank.eq(out_bank),
        ]
        return m
