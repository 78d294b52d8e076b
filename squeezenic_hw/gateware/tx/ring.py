"""The TX lane's ring of assembled wire-frame payloads.

The packer writes the payload beats of a wire frame into the ring (up to two
per cycle) and commits the frame once all of its beats are in; the ring hands
committed beats to the frame merger one per cycle. The ring is the lane's
double buffer: while one wire frame drains to the wire, the next one is
assembled behind it, so the packer does not wait for the previous frame to be
sent.
"""

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import RingWrite

__all__ = ["WireRing", "ring_depth"]

_BEAT = unsigned(512)


def ring_depth(max_frame_beats):
    """Beats the ring holds: the smallest power of two ``>= 2 * max_frame_beats + 4``.

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
        ``depth = ring_depth(max_frame_beats)`` beats (the smallest power of two
        ``>= 2 * max_frame_beats + 4``: 64 for 23, 512 for 150), split into two
        ``Memory`` banks of ``depth / 2`` beats (even and odd beat addresses),
        each with one write port and one synchronous read port, so two beats
        can be written per cycle.

    Attributes
    ----------
    i : In(stream.Signature(RingWrite))
        ``beats[0 … count-1]`` are appended (``count`` 0…2); ``commit`` closes
        the frame being written after them. ``i.ready`` is a register, high
        when at least four beats were free in the cycle before (so that two are
        free now).
    o : Out(stream.Signature(unsigned(512)))
        The beats of committed frames, in write order. Beats of the frame still
        being written never leave.

    Notes
    -----
    Latency: 3 cycles from the write that commits a frame to the first of its
    beats on ``o``, when nothing is ahead of it (commit write accepted in cycle
    ``t``, the beat transfers in cycle ``t + 3``).

    Throughput: up to two beats in per cycle, one beat out per cycle, back to
    back, while committed beats are stored. With ``o`` never held and frames
    written at up to one beat per cycle the writer never stalls: the
    uncommitted frame plus at most a few committed beats are stored.

    Backpressure: while ``o.valid & ~o.ready``, ``o.payload`` holds; nothing is
    lost. A 2-entry prefetch buffer behind the read ports feeds ``o`` from
    registers; its read request depends combinationally on ``o.ready`` (as in a
    first-word-fall-through FIFO), which is what lets two entries sustain one
    beat per cycle. A full ring drops ``i.ready``; writes wait, nothing is
    overwritten.

    Resources: ``depth * 512`` bits of memory (two banks of ``depth / 2 x 512``;
    block RAM), 2 x 512 prefetch registers, three pointers of ``log2(depth)+1``
    bits.
    """

    def __init__(self, max_frame_beats):
        if (not isinstance(max_frame_beats, int) or isinstance(max_frame_beats, bool)
                or not 1 <= max_frame_beats <= 150):
            raise ValueError(f"max_frame_beats must be an int in 1..150, not {max_frame_beats!r}")
        self.max_frame_beats = max_frame_beats
        self.depth = ring_depth(max_frame_beats)
        super().__init__({
            "i": In(stream.Signature(RingWrite)),
            "o": Out(stream.Signature(_BEAT)),
        })

    @property
    def latency(self):
        """Cycles from the committing write to the frame's first beat on ``o``."""
        return 3

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        abits = depth.bit_length() - 1   # beat address bits; pointers carry one more (wrap)
        banks = []
        for b in range(2):
            # block RAM at every depth (Yosys would take distributed RAM for a bank of
            # 32 beats: 37 RAM32M16, 296 LUTs)
            mem = Memory(shape=_BEAT, depth=depth // 2, init=[], attrs={"ram_style": "block"})
            m.submodules[f"bank{b}"] = mem
            banks.append(mem)

        wp = Signal(abits + 1)   # next beat address to write
        cp = Signal(abits + 1)   # end of the committed beats
        rp = Signal(abits + 1)   # next beat address to read (beats before it are free)

        # ---- write side -------------------------------------------------
        # ``i.ready`` is a register: at least four beats free in the cycle before leaves
        # at least two now, whatever that cycle wrote (two beats at most).
        used = Signal(abits + 1)
        room = Signal(init=1)   # empty after reset
        m.d.comb += [
            used.eq(wp - rp),
            self.i.ready.eq(room),
        ]
        m.d.sync += room.eq(used <= depth - 4)
        write = self.i.valid & self.i.ready
        count = self.i.payload.count
        beats = self.i.payload.beats
        wp1 = Signal(abits + 1)
        m.d.comb += wp1.eq(wp + 1)
        for b, mem in enumerate(banks):
            port = mem.write_port()
            first_here = wp[0] == b   # beat 0 lands in this bank, else beat 1 does
            m.d.comb += [
                port.addr.eq(Mux(first_here, wp[1:abits], wp1[1:abits])),
                port.data.eq(Mux(first_here, beats[0], beats[1])),
                port.en.eq(write & Mux(first_here, count >= 1, count >= 2)),
            ]
        with m.If(write):
            m.d.sync += wp.eq(wp + count)
            with m.If(self.i.payload.commit):
                m.d.sync += cp.eq(wp + count)

        # ---- read side: sync read ports + 2-entry prefetch buffer ---------
        # Reads only touch committed addresses (< cp <= wp) and writes only
        # free ones (used <= depth - 2 before a 2-beat write), so a read and a
        # write never meet on one address.
        buf = [Signal(_BEAT, name=f"buf{k}", reset_less=True) for k in range(2)]
        level = Signal(range(3))       # beats in buf (buf[0] is the head)
        inflight = Signal()            # a read issued last cycle; its data is on the port now
        inflight_bank = Signal()
        take = Signal()
        after_take = Signal(range(3))
        issue = Signal()
        m.d.comb += [
            self.o.valid.eq(level != 0),
            self.o.payload.eq(buf[0]),
            take.eq(self.o.valid & self.o.ready),
            after_take.eq(level - take),
            # room in buf for the beat in flight and the one issued now
            issue.eq((rp != cp) & (after_take + inflight < 2)),
        ]
        rdata = []
        for b, mem in enumerate(banks):
            port = mem.read_port(domain="sync")
            m.d.comb += [
                port.addr.eq(rp[1:abits]),
                port.en.eq(issue & (rp[0] == b)),
            ]
            rdata.append(port.data)
        with m.If(issue):
            m.d.sync += rp.eq(rp + 1)
        m.d.sync += [
            inflight.eq(issue),
            inflight_bank.eq(rp[0]),
            level.eq(after_take + inflight),
        ]
        with m.If(take):
            m.d.sync += buf[0].eq(buf[1])
        with m.If(inflight):
            arriving = Mux(inflight_bank, rdata[1], rdata[0])
            with m.If(after_take == 0):
                m.d.sync += buf[0].eq(arriving)
            with m.Else():
                m.d.sync += buf[1].eq(arriving)
        return m
