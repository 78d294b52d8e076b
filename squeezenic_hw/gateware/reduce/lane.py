"""A node of the ring all-reduce for the integer codecs (``docs/wire-format.md`` section 8):
the host's contribution frames checked and encoded, the frames from the ring's predecessor
checked, each reduce-phase frame turned into its successor's by the host's codes, each
gather frame forked to the host and on, and everything the node does not take passed on to
the TX or the RX lane."""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.frame_arbiter import FrameArbiter
from squeezenic_hw.gateware.common.layouts import BEAT_BITS, AxisBeat, axis_signature
from squeezenic_hw.gateware.common.stream import skid_between
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    DEFAULT_PORT,
    HDR,
    check_port,
)
from squeezenic_hw.spec.reduce import FLAG_GATHER, INTEGER_CODECS, MAX_NODES, MIN_NODES

from .adder import ReduceAdder
from .checker import ReduceChecker
from .contribution_checker import ContributionChecker
from .contribution_encoder import ContributionEncoder
from .frame_out import ReduceFrameOut
from .gather_fork import GatherFork
from .layouts import (
    ReduceConfig,
    contribution_counters_layout,
    integer_codecs,
    reduce_counters_layout,
)
from .result_frames import ResultFrames

__all__ = ["ReduceLane"]

#: The ``gather`` flag's bit in a header beat's data.
_GATHER_BIT = 8 * HDR.FLAGS[0] + FLAG_GATHER.bit_length() - 1


class ReduceLane(wiring.Component):
    """One node of the ring: the :class:`~.contribution_checker.ContributionChecker` and
    :class:`~.contribution_encoder.ContributionEncoder` on the host's side, the
    :class:`~.checker.ReduceChecker`, the :class:`~.adder.ReduceAdder`, the
    :class:`~.gather_fork.GatherFork` and the :class:`~.frame_out.ReduceFrameOut` on the
    wire's, and the :class:`~.result_frames.ResultFrames` back to the host, joined.

    ::

        host ─► contribution checker ─┬─ take ─► contribution encoder ─► adder (codes)
                                      └─ other ─► host_other (the TX lane)
        i ─► checker ─┬─ reduce phase ─► adder ─► frame out ─┬─ reduce phase ─┬─► arbiter ─► o
                      │                                     └─ gather ─┐      │
                      │  gather phase ───────────────────► gather fork ─ forward
                      │                                          └─ host ─► result frames
                      └─ bypass ──────────────────► arbiter ─► bypass
                         adder overflow ─────────┘

    A frame taken goes by its phase (``gather``, on its header beat) to the adder or to the
    fork. The adder's reduce-phase frames and the frames the fork forwards share the wire
    to the successor, a whole frame at a time (round robin); the gather frames the adder
    makes (the chunk the node finishes) go to the fork beside those taken, which sends
    every gather to the result frames and on; the frames the checker bypasses and those
    the adder overflows share ``bypass``, whole and unchanged, for the RX lane.

    Parameters
    ----------
    codecs : iterable of str or int
        The codecs built in; the integer ones among them (``fixed``, ``qsgd``, ``sign``),
        at least one, are reduced, and reduce frames of any other fail the ``settings``
        check (bypassed).
    nodes, params, wire_depth, host_depth, mtu
        As :class:`~.adder.ReduceAdder`'s.
    port : int
        The SqueezeNIC UDP port ``cfg_port`` starts at.
    out_depth : int
        Payload beats the outgoing frames' queue holds, 2 … 4096 (default 64; block RAM
        from 64): at least the longest frame's ⌈(``mtu`` − 64)/64⌉.
    max_host_elements : int
        Most values a result frame carries (default 363).

    Attributes
    ----------
    i : In(axis_signature())
        Wire frames from the ring's predecessor.
    o : Out(axis_signature())
        Reduce frames to the successor: this node's hops of the reduce phase (its own
        chunk's first) and the gather frames it forwards.
    bypass : Out(axis_signature())
        Every frame of ``i`` the node does not take, and every reduce-phase frame the
        adder's wire queue had no room for, unchanged (for the RX lane; counted).
    host : In(axis_signature())
        Frames from the host: its contribution frames (section 8.5), in ring order, and
        any other frame.
    host_other : Out(axis_signature())
        The host's frames that are not contribution frames taken, unchanged (for the TX
        lane; counted by reason in ``contribution_counters``).
    results : Out(axis_signature())
        The host's result frames (section 8.5): every chunk's values once.
    cfg : In(ReduceConfig)
        The node's configuration, to every stage.
    cfg_port : In(16), init ``port``
    template : In(512)
        The node's header for its successor (:class:`~.frame_out.ReduceFrameOut`), also
        its result frames'.
    table_addr, table_data, table_we : In(5), In(32), In(1)
        The ``sign`` values' table (:class:`~.sum_decoder.SumDecoder`).
    counters : Out(reduce_counters_layout())
        The receive checks' counters.
    contribution_counters : Out(contribution_counters_layout())
        The contribution checks' counters.
    overflows : Out(32)
        Reduce-phase frames bypassed for want of room in the wire queue.

    Notes
    -----
    Latency: a hop, from a frame's first beat on ``i`` (its codes waiting) to the
    outgoing frame's first beat on ``o``: the checker's 9 cycles, the adder's, the frame
    out's and the arbiter's 1. A gather frame forwarded: the checker's 9, the fork's 3,
    the arbiter's 1.
    A contribution's codes reach the adder after the contribution checker's 9 cycles and
    the encoder's. A gather frame's result frames follow the
    :class:`~.result_frames.ResultFrames`' latency.
    Throughput: one beat per cycle on ``i``, on ``o`` and on ``host`` (16 elements).
    Backpressure: ``i.ready`` and ``host.ready`` are registers (the two checkers'
    queues' room). A taken frame waits while its stage is not ready (the adder, or the
    fork, which is ready for a gather it has admitted); ``o``, ``bypass`` and the
    host-side outputs hold their beat while not ready, and fill the queues behind them.
    Nothing is dropped or reordered within an output. The gathers wait only in the
    fork's queues, which admit them as bubble flow control does
    (:class:`~.gather_fork.GatherFork`), so a ring of nodes forwarding gathers to each
    other always moves.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.lane import ReduceLane;
    print(synth.synthesize(ReduceLane(codecs=['sign']), timing=True).summary())"``:
    15 051 LUT, 506 LUTRAM and 375 SRL, 26 403 FF, 32 BRAM36 (the adder's wire queue 8,
    the fork's forward queue 9, the frame out's and the result frames' queues), 5 DSP;
    estimated 3.10 ns, at most 6 LUT levels. The all-codec adder alone
    (``ReduceAdder()``) is 16 902 LUT, 3.19 ns.
    """

    def __init__(self, *, codecs=INTEGER_CODECS, nodes=range(MIN_NODES, MAX_NODES + 1),
                 params=range(2, 17), wire_depth=512, host_depth=64, mtu=DEFAULT_MTU,
                 port=DEFAULT_PORT, out_depth=64, max_host_elements=DEFAULT_HOST_ELEMENTS):
        check_port(port)             # checked before any part is made
        integer_codecs(codecs)
        longest = -(-(mtu - 64) // 64) if isinstance(mtu, int) else 2
        if isinstance(out_depth, bool) or not isinstance(out_depth, int) or not (
                max(2, longest) <= out_depth <= 4096):
            raise ValueError(f"out_depth must be an int from {max(2, longest)} (the longest "
                             f"frame's payload beats at mtu {mtu}) to 4096, got {out_depth!r}")
        self._adder = ReduceAdder(codecs=codecs, nodes=nodes, params=params,
                                  wire_depth=wire_depth, host_depth=host_depth, mtu=mtu)
        self._checker = ReduceChecker(port=port, codecs=self._adder.codecs)
        self._frame_out = ReduceFrameOut(depth=out_depth)
        self._contributions = ContributionChecker(port=port, codecs=self._adder.codecs,
                                                 mtu=mtu)
        self._encoder = ContributionEncoder(codecs=self._adder.codecs,
                                            code_width=self._adder.code_width)
        self._results = ResultFrames(codecs=self._adder.codecs, nodes=nodes, params=params,
                                     max_host_elements=max_host_elements)
        self.codecs = self._adder.codecs
        self.code_width = self._adder.code_width
        self.sum_width = self._adder.sum_width
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(axis_signature()),
            "bypass": Out(axis_signature()),
            "host": In(axis_signature()),
            "host_other": Out(axis_signature()),
            "results": Out(axis_signature()),
            "cfg": In(ReduceConfig),
            "cfg_port": In(16, init=self._checker.port),
            "template": In(BEAT_BITS),
            "table_addr": In(5),
            "table_data": In(32),
            "table_we": In(1),
            "counters": Out(reduce_counters_layout()),
            "contribution_counters": Out(contribution_counters_layout()),
            "overflows": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.checker = checker = self._checker
        m.submodules.adder = adder = self._adder
        m.submodules.fork = fork = GatherFork(mtu=self._adder.mtu)
        m.submodules.frame_out = frame_out = self._frame_out
        m.submodules.wire_arbiter = wire = FrameArbiter(2)
        m.submodules.bypass_arbiter = bypass = FrameArbiter(2)
        m.submodules.contributions = contributions = self._contributions
        m.submodules.encoder = encoder = self._encoder
        m.submodules.results = results = self._results
        for stage in (checker, adder, fork, frame_out, contributions, encoder, results):
            m.d.comb += stage.cfg.eq(self.cfg)
        m.d.comb += [
            results.template.eq(self.template),
            results.table_addr.eq(self.table_addr),
            results.table_data.eq(self.table_data),
            results.table_we.eq(self.table_we),
        ]
        m.d.comb += [
            checker.cfg_port.eq(self.cfg_port),
            contributions.cfg_port.eq(self.cfg_port),
            self.contribution_counters.eq(contributions.counters),
            frame_out.template.eq(self.template),
            self.counters.eq(checker.counters),
            self.overflows.eq(adder.overflows),
        ]
        wiring.connect(m, checker.i, wiring.flipped(self.i))
        # the host's side: contributions encoded into the adder, anything else passed on
        wiring.connect(m, contributions.i, wiring.flipped(self.host))
        wiring.connect(m, wiring.flipped(self.host_other), contributions.other)
        wiring.connect(m, encoder.i, contributions.take)
        wiring.connect(m, adder.host, encoder.o)

        # the phase of the frame taken, from its header beat on
        take = checker.take
        to_fork = Signal()
        gather = Mux(take.payload.first, take.payload.info.gather, to_fork)
        with m.If(take.valid & take.ready & take.payload.first):
            m.d.sync += to_fork.eq(take.payload.info.gather)
        # (the fork is ready only for a gather it has admitted: a reduce-phase frame must
        # not wait for it)
        m.d.comb += [
            take.ready.eq(Mux(gather, fork.i.ready, adder.i.ready)),
            adder.i.valid.eq(take.valid & ~gather),
            adder.i.payload.eq(take.payload),
            fork.i.valid.eq(take.valid & gather),
            fork.i.payload.eq(take.payload),
        ]

        # the adder's frames to the frame out
        wiring.connect(m, frame_out.desc, adder.desc)
        wiring.connect(m, frame_out.payload, adder.o)

        # the wire to the successor: the adder's reduce-phase frames, and the gathers the
        # fork forwards, frame by frame; the gather frames the adder makes (the chunk this
        # node finishes) start their gather at the fork
        # (each beat tagged with its frame's phase before a skid buffer, so that the choice
        # after it reads a register and nothing reaches back into the frame out's queue)
        made_in = frame_out.o
        header_next = Signal(init=1)          # the next beat of ``made_in`` is a header
        made_gather = Signal()
        with m.If(made_in.valid & made_in.ready):
            m.d.sync += header_next.eq(made_in.payload.last)
        with m.If(made_in.valid & made_in.ready & header_next):
            m.d.sync += made_gather.eq(made_in.payload.data[_GATHER_BIT])
        tagged = data.StructLayout({"beat": AxisBeat, "gather": 1})
        tagging = stream.Signature(tagged).create(path=("made_tagging",))
        made = stream.Signature(tagged).create(path=("made",))
        m.d.comb += [
            tagging.valid.eq(made_in.valid),
            tagging.payload.beat.eq(made_in.payload),
            tagging.payload.gather.eq(Mux(header_next, made_in.payload.data[_GATHER_BIT],
                                          made_gather)),
            made_in.ready.eq(tagging.ready),
        ]
        skid_between(m, "made_skid", tagging, made)
        gather_now = made.payload.gather
        m.d.comb += [
            wire.i[0].payload.eq(made.payload.beat),
            fork.made.payload.eq(made.payload.beat),
            wire.i[0].valid.eq(made.valid & ~gather_now),
            fork.made.valid.eq(made.valid & gather_now),
            made.ready.eq(Mux(gather_now, fork.made.ready, wire.i[0].ready)),
        ]
        wiring.connect(m, wire.i[1], fork.forward)
        wiring.connect(m, wiring.flipped(self.o), wire.o)

        # the host's results: every gather frame, taken or made, from the fork
        wiring.connect(m, results.i, fork.host)
        wiring.connect(m, wiring.flipped(self.results), results.o)

        # the frames for the RX lane: bypassed by the checker, overflowed by the adder
        for k, source in enumerate((checker.bypass, adder.overflow)):
            m.d.comb += [
                bypass.i[k].valid.eq(source.valid),
                bypass.i[k].payload.eq(source.payload.beat),
                source.ready.eq(bypass.i[k].ready),
            ]
        wiring.connect(m, wiring.flipped(self.bypass), bypass.o)
        return m
