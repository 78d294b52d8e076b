"""Round-robin merge of N AXI-Streams onto one, a whole frame at a time.

The TX array puts the wire streams of its N lanes onto the one wire port with
this arbiter: frames are never interleaved, every lane gets its turn, and the
wire sees no idle cycle between frames while any lane has a frame ready.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import AxisBeat, axis_signature
from squeezenic_hw.gateware.common.stream import MAX_FANOUT, SkidBuffer, stage_enable

__all__ = ["FrameArbiter", "MAX_INPUTS", "ROUND_ROBIN_GROUP", "check_n_inputs", "none_set",
           "round_robin_next", "thermometer_count", "tree_or"]

#: Largest number of inputs (64 lanes of 100 Gb/s = 6400 Gb/s of host bandwidth).
MAX_INPUTS = 64


class FrameArbiter(wiring.Component):
    """Fair round-robin arbiter of whole AXI-Stream frames.

    Parameters
    ----------
    n_inputs : int
        Number of input streams, 1…64.

    Attributes
    ----------
    i : In(axis_signature()).array(n_inputs)
        The inputs, ``i[0] … i[n-1]`` (a list of stream interfaces; the flattened
        port names are ``i__<k>__valid`` etc.).
    o : Out(axis_signature())
        The merged stream; beats are those of the inputs, unchanged
        (``tdata``/``tkeep``/``tlast``/``tuser``).
    grant : Out(range(n_inputs))
        The input currently granted (the frame in progress, or the next one to be
        served): for monitoring and tests.

    Notes
    -----
    Arbitration: a frame, once its first beat is taken, owns the output up to its
    ``tlast`` (idle cycles of that input inside the frame leave the output idle).
    In the cycle of a frame's last beat from input ``k``, the grant goes to the
    first input after ``k`` (``k+1, k+2, …`` wrapping round) whose ``valid`` is
    high, or stays on ``k`` if there is none; so with every input ready the
    grants rotate ``0, 1, …, n-1, 0, …`` and a frame never waits for more than one
    frame of each other input. While no frame is in progress and the granted input
    has nothing to send, the grant moves in the same way to the next input (after
    the granted one) that has; that input's first beat leaves one cycle later.

    Latency: 1 cycle (``o`` is a register): a beat taken from an input in cycle
    ``t`` is on ``o`` in cycle ``t + 1``. A frame arriving on an input that is not
    granted while the arbiter is idle waits one cycle more (the grant moves).

    Throughput: one beat per cycle, with no idle cycle between frames when the
    next input already has its first beat ready at the last beat of the current
    frame (the next grant is decided in that cycle); the granted input's own next
    frame likewise follows at once.

    Backpressure: ``o`` holds (valid and payload) while ``o.valid & ~o.ready``.
    The output register is a :class:`~squeezenic_hw.gateware.common.stream.SkidBuffer`,
    and ``i[k].ready = (grant == k) & (skid register empty)`` is a register of its own
    per input, loaded with the next grant and the skid register's next state: no ready
    path crosses the arbiter, and an input's ready reaches the lane in front without a
    LUT (an input sees ``ready`` fall one cycle after ``o`` stalls with a beat held; the
    beat taken in that cycle waits in the skid register). Nothing is dropped.

    Reset: the grant, the inputs' ready, the frame state and the two valid bits of the
    output; the beat registers take none.

    Resources: the output and skid registers (2 × 625 bits + 2 valid), n ready
    registers, an
    n-to-1 AND-OR multiplexer of ``AxisBeat`` (625 bits, a balanced OR tree)
    driven by the one-hot grant, and the round robin: the grant as an n-bit
    thermometer register and its one-hot copy, the find-first of
    :func:`round_robin_next` (carry chains of :data:`ROUND_ROBIN_GROUP` inputs and one
    across the groups, for the inputs above the grant and for those below it) and two
    of :func:`none_set` (whether the granted input offers a beat, and its last). Each
    one-hot bit selects a whole beat (625 loads), so it and the grant's load enable
    carry the ``max_fanout`` attribute (Vivado copies their drivers). Yosys
    ``synth_xilinx`` (UltraScale+), n = 64: 19.6 k LUT, 1.4 k FF, 2.67 ns estimated
    (``docs/timing.md``; ``squeezenic_hw.flows.report.blocks.Block.of("arbiter", n=64)``).
    """

    def __init__(self, n_inputs):
        self.n_inputs = check_n_inputs(n_inputs)
        super().__init__({
            "i": In(axis_signature()).array(n_inputs),
            "o": Out(axis_signature()),
            "grant": Out(range(n_inputs)),
        })

    @property
    def latency(self):
        """Cycles from an input beat taken to the same beat on ``o``."""
        return 1

    def elaborate(self, platform):
        m = Module()
        n = self.n_inputs

        # The output register, with the skid register that makes every input's ready
        # a register.
        m.submodules.out = out = SkidBuffer(AxisBeat)
        wiring.connect(m, out.o, wiring.flipped(self.o))
        enable = Signal()                # a beat may be taken this cycle
        m.d.comb += enable.eq(out.i.ready)
        busy = Signal()                  # a frame of the granted input is in progress

        # The grant is kept as a thermometer, ``upto`` (bits 0 … grant set), which
        # masks the inputs above it for the round robin, and as a one-hot register
        # (which drives valid/ready and an AND-OR multiplexer of the beats, shallower
        # than a binary mux tree at 64 inputs); the two are loaded together.
        upto = Signal(n, init=1)
        # each bit selects a whole beat (625 loads): Vivado copies it
        onehot = Signal(n, init=1, attrs={"max_fanout": MAX_FANOUT})
        if n > 1:
            m.d.comb += self.grant.eq(thermometer_count(upto[1:]))

        valids = Signal(n)
        m.d.comb += valids.eq(Cat(s.valid for s in self.i))
        beat = Signal(AxisBeat)
        beat_valid = Signal()
        ending = Signal()                # the granted input offers a frame's last beat
        width = len(beat.as_value())
        lasts = Cat(s.payload.last for s in self.i)
        m.d.comb += [
            beat.eq(tree_or([s.payload.as_value() & onehot[k].replicate(width)
                              for k, s in enumerate(self.i)])),
            beat_valid.eq(~none_set(m, valids & onehot, name="offered")),
            ending.eq(~none_set(m, valids & onehot & lasts, name="ending")),
            out.i.valid.eq(beat_valid),
            out.i.payload.eq(beat),
        ]
        # Each input's ready, ``onehot[k] & out.i.ready``, as a register: loaded with the
        # next grant and the skid register's next ready, so the lane in front reads a
        # flip-flop.
        ready = Signal(n, init=1)
        onehot_next = Signal(n)
        m.d.comb += onehot_next.eq(onehot)
        m.d.sync += ready.eq(onehot_next & out.ready_next.replicate(n))
        for k, s in enumerate(self.i):
            m.d.comb += s.ready.eq(ready[k])

        with m.If(beat_valid & enable):
            m.d.sync += busy.eq(~ending)

        if n > 1:
            # Round robin after the grant: the first other input above it with a beat
            # ready, else the first one from 0, else the grant stays. The granted
            # input's own valid is left out: at a last beat it belongs to the frame
            # ending.
            found, next_upto, next_onehot = round_robin_next(m, valids, upto, onehot)
            # Decide at the last beat (no bubble), or while idle at a frame boundary
            # with nothing on the granted input; stay if no other input is ready. (The
            # enable of the grant's 2n flip-flops and of ``onehot``'s copies.)
            load = stage_enable("load")
            m.d.comb += load.eq(((enable & ending) | (~busy & ~beat_valid)) & found)
            with m.If(load):
                m.d.sync += [upto.eq(next_upto), onehot.eq(next_onehot)]
                m.d.comb += onehot_next.eq(next_onehot)
        return m


def check_n_inputs(n_inputs):
    """``n_inputs``, an arbiter's number of inputs (1…64), or ``ValueError``."""
    if isinstance(n_inputs, bool) or not isinstance(n_inputs, int) \
            or not 1 <= n_inputs <= MAX_INPUTS:
        raise ValueError(f"n_inputs must be an int from 1 to {MAX_INPUTS}, got {n_inputs!r}")
    return n_inputs


#: Inputs in a group of the round robin's find-first (:func:`round_robin_next`).
ROUND_ROBIN_GROUP = 8


def round_robin_next(m, requests, upto, onehot, *, name="rr"):
    """The round robin's next grant: ``(found, next_upto, next_onehot)``, driven in ``m``.

    ``upto`` (ones from bit 0 up to the grant) and ``onehot`` (the grant's bit) hold the
    grant, ``requests`` the inputs that ask for it. The next grant is the first requesting
    input after the grant (``grant + 1, …, n - 1``, then ``0, …, grant - 1``), the grant's
    own request left out. ``found``: there is one; ``next_upto`` and ``next_onehot``: that
    input as ``upto`` and ``onehot`` (meaningful with ``found``).

    A find-first in two levels: the inputs in groups of :data:`ROUND_ROBIN_GROUP`, a
    short carry chain in each group (whether a request lies below each input, and in the
    group) and one across the groups (whether a group below has one), for the requests
    above the grant and, apart, below it. An input is the first when neither its group
    below it nor a group below its own has a request; the requests above the grant come
    first. The same order as one find-first over all n inputs, in two chains of
    ``group`` and ``n / group`` bits instead of one of n.
    """
    n = len(requests)
    upper_empty = Signal(n, name=f"{name}_upper_empty")   # no request above the grant here
    lower_empty = Signal(n, name=f"{name}_lower_empty")   # nor below it
    m.d.comb += [upper_empty.eq(~requests | upto),
                 lower_empty.eq(~requests | ~upto | onehot)]
    none_upper, first_upper = _find_first(m, upper_empty, f"{name}_upper")
    none_lower, first_lower = _find_first(m, lower_empty, f"{name}_lower")
    found = Signal(name=f"{name}_found")
    next_upto = Signal(n, name=f"{name}_next_upto")
    next_onehot = Signal(n, name=f"{name}_next_onehot")
    m.d.comb += [
        found.eq(~(none_upper & none_lower)),
        next_upto.eq(Mux(none_upper, first_lower, first_upper)),
        next_onehot.eq(Mux(none_upper, ~lower_empty & first_lower,
                           ~upper_empty & first_upper)),
    ]
    return found, next_upto, next_onehot


def none_set(m, value, *, name="none"):
    """Whether ``value`` has no set bit (a signal driven in ``m``): the carry chains of
    :func:`round_robin_next`, in groups of :data:`ROUND_ROBIN_GROUP` bits."""
    clear = Signal(len(value), name=f"{name}_clear")
    m.d.comb += clear.eq(~value)
    return _find_first(m, clear, name)[0]


def _find_first(m, empty, name):
    """``(all, first)`` of the bits ``empty`` (1: no request at that input): whether all
    are set, and for each input whether all inputs below it are (its group's and the
    groups' below), in two levels of carry chains (:func:`_carries`)."""
    n = len(empty)
    bounds = [(s, min(s + ROUND_ROBIN_GROUP, n)) for s in range(0, n, ROUND_ROBIN_GROUP)]
    group_empty, before_in_group = [], []
    for g, (s, e) in enumerate(bounds):
        group_all, before = _carries(m, empty[s:e], f"{name}_group{g}")
        group_empty.append(group_all)
        before_in_group.append(before)
    if len(bounds) == 1:
        return group_empty[0], before_in_group[0]
    empty_groups = Signal(len(bounds), name=f"{name}_groups")
    m.d.comb += empty_groups.eq(Cat(group_empty))
    all_empty, groups_before = _carries(m, empty_groups, f"{name}_across")
    first = Signal(n, name=f"{name}_first")
    m.d.comb += first.eq(Cat(before_in_group[g] & groups_before[g].replicate(e - s)
                             for g, (s, e) in enumerate(bounds)))
    return all_empty, first


def _carries(m, bits, name):
    """``(all, before)``: whether every bit of ``bits`` is set, and for each bit whether
    every bit below it is (1 for bit 0): the carries of ``Cat(1, bits) + 1``, one carry
    chain, the bits straight on its propagate inputs (the constant bit 0 starts the
    carry). The carry into bit ``i`` is sum bit ``i`` XOR ``bits[i]``."""
    width = len(bits)
    total = Signal(width + 2, name=name)
    m.d.comb += total.eq(Cat(Const(1, 1), bits) + 1)
    before = Signal(width, name=f"{name}_before")
    m.d.comb += before.eq(total[1:width + 1] ^ bits)
    return total[width + 1], before


def tree_or(values):
    """OR of ``values`` as a balanced tree (a chain would be n - 1 gates deep)."""
    while len(values) > 1:
        values = [values[k] | values[k + 1] if k + 1 < len(values) else values[k]
                  for k in range(0, len(values), 2)]
    return values[0]


def thermometer_count(prefix):
    """Number of ones of a prefix mask (bits 0 … k-1 set, the rest clear), in binary.

    Bit ``b`` of ``k`` is set when ``k`` lies in an odd block of ``2^b``:
    OR over m of ``prefix[(2m+1)·2^b − 1] & ~prefix[(2m+2)·2^b − 1]`` — two LUT
    levels a bit, where a popcount adder tree would take several.
    """
    width = len(prefix)
    bits = []
    for b in range(max(1, width.bit_length())):
        block = 1 << b
        terms = []
        for top in range(2 * block - 1, width + block, 2 * block):
            low = prefix[top - block]
            terms.append(low & ~prefix[top] if top < width else low)
        bits.append(Cat(*terms).any())
    return Cat(*bits)
