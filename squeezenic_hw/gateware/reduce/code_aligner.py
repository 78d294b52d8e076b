"""The re-gearing buffer of the reduce lane's host side: the host's codes arrive in beats of
up to 16 (a host frame's last beat holds the rest), and the partial sums they join are cut
by the reduce frames, whose last job holds the rest of a frame: neither side's beats line
up with the other's."""

from amaranth import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import CODES_PER_JOB
from squeezenic_hw.gateware.common.stream import MAX_FANOUT

__all__ = ["host_codes_layout", "CodeAligner"]

#: Codes the buffer holds: three beats'. With two, a reader of 16 a cycle behind a
#: buffer holding 12 (a host frame's last beat held 12) takes a beat every other cycle:
#: it must wait for 16, and the beat that brings them leaves no room for the next.
SLOTS = 3 * CODES_PER_JOB
_POINTER = (SLOTS - 1).bit_length()
_LEVEL = SLOTS.bit_length()


def host_codes_layout(code_width):
    """A beat of the host's codes: ``codes[0 … count−1]``, in tensor order, ``code_width``
    bits each (an integer codec's code, as the encoder makes it)."""
    return data.StructLayout({
        "codes": data.ArrayLayout(unsigned(code_width), CODES_PER_JOB),
        "count": unsigned(5),
    })


def check_code_width(code_width):
    """``code_width`` if it is an int 1 … 16, else ``ValueError`` naming it."""
    if isinstance(code_width, bool) or not isinstance(code_width, int) or not (
            1 <= code_width <= 16):
        raise ValueError(f"code_width must be an int from 1 to 16, got {code_width!r}")
    return code_width


class CodeAligner(wiring.Component):
    """Turns beats of up to 16 codes into reads of any 0 … 16 codes, in order.

    A circular buffer of :data:`SLOTS` = 48 code registers with a write and a read
    pointer. A beat accepted on ``i`` is written into the slots from the write pointer on
    (slot ``j`` takes the beat's code ``j − wp`` mod 16, a 16:1 multiplexer per slot, when
    that falls inside the beat's ``count``). ``codes[e]`` is
    slot ``rp + e`` (a 48:1 multiplexer per code, selected by the read-pointer register),
    for the reader's register; ``pop`` codes leave in the cycle the reader sets it.

    Parameters
    ----------
    code_width : int
        Bits of a code, 1 … 16 (the widest code of the integer codecs built).

    Attributes
    ----------
    i : In(stream.Signature(host_codes_layout(code_width)))
        The host's codes; ``count`` = 0 beats are taken and add nothing.
    codes : Out(data.ArrayLayout(unsigned(code_width), 16))
        The next 16 codes held (those at ``e ≥ level`` are stale), combinational from
        registers.
    level : Out(6)
        Codes held and readable (a register).
    pop : In(5)
        Codes the reader takes in this cycle, at most ``level``.

    Notes
    -----
    Latency: 1 cycle from a beat accepted to its codes counted in ``level``. Throughput:
    one beat in and one read of up to 16 codes per cycle. Backpressure: ``i.ready`` is a
    register, set while the codes held after this cycle's beat and pop are at most 32 (the
    input's register then needs no ready chain), so a reader of 16 a cycle takes a beat
    every cycle whatever the codes held; nothing is dropped or reordered. Only the
    pointers, ``level`` and ``i.ready`` are reset; the slots are not.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.code_aligner import CodeAligner;
    print(synth.synthesize(CodeAligner(16), timing=True).summary())"``: 3 179 LUT (the
    read multiplexers 16 × 16 × 48:1, the write ones 48 × 16 × 16:1), 787 FF, 0 BRAM,
    0 DSP, estimated 3.19 ns at 5 LUT levels (the write pointer → a slot); ``code_width``
    1: 563 LUT, 67 FF, 3.14 ns. ``codes`` are outputs here: the reader's register behind
    them adds its path (measured in the :class:`~.adder.ReduceAdder`).
    """

    def __init__(self, code_width):
        self.code_width = check_code_width(code_width)
        super().__init__({
            "i": In(stream.Signature(host_codes_layout(code_width))),
            "codes": Out(data.ArrayLayout(unsigned(code_width), CODES_PER_JOB)),
            "level": Out(_LEVEL),
            "pop": In(5),
        })

    def elaborate(self, platform):
        m = Module()
        cw = self.code_width
        slots = [Signal(cw, name=f"slot{j}", reset_less=True) for j in range(SLOTS)]
        wp = Signal(_POINTER)
        rp = Signal(_POINTER, attrs={"max_fanout": MAX_FANOUT})   # every read multiplexer
        ready = Signal(init=1)
        accept = Signal()
        m.d.comb += [self.i.ready.eq(ready), accept.eq(self.i.valid & ready)]

        # slot j takes the beat's code j − wp (mod 16: SLOTS is a multiple of 16) when it
        # falls in the beat, j − wp (mod SLOTS) < count
        codes = self.i.payload.codes
        count = self.i.payload.count
        added = Signal(5)
        m.d.comb += added.eq(Mux(accept, count, 0))
        for j in range(SLOTS):
            distance = Mux(wp <= j, j - wp, j + SLOTS - wp)[:_POINTER]
            with m.If(accept & (distance < count)):
                choices = Array(codes[(j - s) % CODES_PER_JOB] for s in range(CODES_PER_JOB))
                m.d.sync += slots[j].eq(choices[wp[:4]])
        # the codes held after this cycle, and the room for a beat after it: the pop
        # (late, the reader's decision) is compared rather than subtracted first
        held = Signal(_LEVEL + 1)
        next_level = Signal(_LEVEL)
        m.d.comb += [held.eq(self.level + added), next_level.eq(held - self.pop)]
        # a pointer is its beat (0 … 2) above its code in the beat: a move of at most 16
        # carries into the beat at most once, and the beat wraps after the third
        def advanced(pointer, by):
            low = pointer[:4] + by
            beat = pointer[4:]
            return Cat(low[:4], Mux(low[4], Mux(beat == SLOTS // CODES_PER_JOB - 1, 0,
                                                beat + 1), beat))
        m.d.sync += [
            wp.eq(advanced(wp, added)),
            self.level.eq(next_level),
            rp.eq(advanced(rp, self.pop)),
        ]
        m.d.sync += ready.eq(held <= SLOTS - CODES_PER_JOB + self.pop)

        # read: code e is slot rp + e
        for e in range(CODES_PER_JOB):
            choices = Array(slots[(s + e) % SLOTS] for s in range(SLOTS))
            m.d.comb += self.codes[e].eq(choices[rp])
        return m
