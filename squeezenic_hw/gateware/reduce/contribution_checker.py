"""The checks on the host's contribution frames (``docs/wire-format.md`` section 8.5): which
frames from the host carry the node's own elements of the all-reduce, in ring order, and
which go on to the TX lane, counted by reason."""

import functools
import operator

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import axis_signature, field_le
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.counters import contribution_counter_name
from squeezenic_hw.spec.header import (
    DEFAULT_MTU,
    DEFAULT_PORT,
    FLAG_ENCODED,
    HDR,
    HEADER_LEN,
    check_port,
)
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    HOST_VALUE_WIDTH,
    REDUCE_FLAGS_RESERVED,
    REDUCE_HDR,
    REDUCE_VERSION,
    ContributionReason,
)

from .checker import REDUCIBLE_CODECS, codec_ids
from .host_segments import SEGMENTS_CONFIG_CYCLES, HostSegments
from .judging import (
    MIN_DEPTH,
    check_depth,
    count_verdicts,
    first_failing,
    header_byte,
    header_flag,
    leave_by_verdict,
    queued_input,
    settings_compares,
)
from .layouts import (
    ContributionBeat,
    ContributionCheck,
    ReduceConfig,
    contribution_counters_layout,
)

__all__ = ["ContributionChecker", "CONTRIBUTION_CONFIG_CYCLES", "MIN_DEPTH"]

#: Cycles from ``cfg`` written to the host's starting position derived from it.
CONTRIBUTION_CONFIG_CYCLES = SEGMENTS_CONFIG_CYCLES

#: Segments the host's walk must hold for the input to take a beat: one for each frame
#: the pipeline holds before its verdict (frames of two beats in the nine stages), and one
#: more.
_WALK_AHEAD = 6

#: The checks made on the header alone, in order (``offset`` needs the position).
_HEADER_CHECKS = (ContributionReason.DISABLED, ContributionReason.LENGTH,
                  ContributionReason.FLAGS, ContributionReason.SETTINGS,
                  ContributionReason.NODES, ContributionReason.FIELDS)


class ContributionChecker(wiring.Component):
    """Takes each contribution frame that passes the checks of section 8.5 onto ``take``
    and passes every other frame from the host onto ``other`` (the TX lane), whole and
    unchanged.

    A frame is judged from its header beat and ``tuser_size`` alone, as
    :class:`~.checker.ReduceChecker` judges the ring's frames: section 7's checks before
    ``version`` are a :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`
    built without codecs, and a frame that fails one, whose ``version`` is not 2 or whose
    ``encoded`` is 1 is not a contribution frame: it leaves on ``other`` with no counter
    moved.

    The host's expected position (section 8.5) is the head of a
    :class:`~.host_segments.HostSegments` walk of the host's segments, and the offset
    expected in it (the segment's start, then each taken frame's end). A frame taken that
    ends the segment takes the walk's next one; the walk starts again, at the node's own
    chunk's first segment, while ``cfg.enable`` is 0. The node takes contribution frames
    once the walk has its first segment, seven cycles after ``enable`` rises; a frame judged
    before then is passed on as ``disabled`` (software enables the ring before its hosts
    send).

    Parameters
    ----------
    port : int
        The SqueezeNIC UDP port ``cfg_port`` starts at, 1 … 65535.
    codecs : iterable of str or int
        The reducible codecs built in (default all): a contribution frame of another codec
        fails ``settings``, whatever ``cfg.codec`` says.
    depth : int
        Beats the input queue holds, :data:`MIN_DEPTH` … 64 (default 16).
    mtu : int
        The ring's reduce frames' MTU, 144 … 9600 (default 1518): the host's segments are
        their sums.

    Attributes
    ----------
    i : In(axis_signature())
        Frames from the host.
    take : Out(stream.Signature(ContributionBeat))
        The beats of the contribution frames taken.
    other : Out(axis_signature())
        Every other frame's beats, for the TX lane.
    cfg : In(ReduceConfig)
        The node's configuration; ``rank``, ``chunk``, ``chunks``, ``elements`` and the
        partial sums' width (``codec``, ``param``, ``nodes``) give the segments,
        :data:`CONTRIBUTION_CONFIG_CYCLES` cycles after they are written (write them while
        ``enable`` is 0).
    cfg_port : In(16), init ``port``
    counters : Out(contribution_counters_layout())
        Frames taken (``contribution_taken``) and passed on per reason, 32 bits, wrapping.

    Notes
    -----
    Latency: ``LATENCY`` = 9 cycles from a beat accepted to the same beat offered: the
    header's checks in five stages beside the classifier's five (field compares, the
    frame's end ``offset`` + n and its payload's bytes; the settings' AND and the
    length compare; three stages of delay), the first failing check and the position's
    compares (stage 6), the verdict and the position's move (7), then the tag queue's
    write and registered read. Throughput: one beat per cycle, back-to-back frames of
    any length (while the walk keeps ahead). Backpressure: ``i.ready`` is the beat
    queue's room and the walk holding enough segments, two flip-flops; a stalled output
    fills the queues. Nothing is dropped or
    reordered. Only valid bits, the position, the queues' pointers and the counters are
    reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.contribution_checker import ContributionChecker;
    print(synth.synthesize(ContributionChecker(), timing=True).summary())"``: 1 441 LUT,
    51 LUTRAM and 84 SRL, 2 148 FF, 0 BRAM, 0 DSP; estimated 2.73 ns at 3 LUT levels (the
    walk's step).
    """

    LATENCY = 9

    def __init__(self, *, port=DEFAULT_PORT, codecs=REDUCIBLE_CODECS, depth=16,
                 mtu=DEFAULT_MTU):
        self.port = check_port(port)
        self.codecs = codec_ids(codecs)
        self.depth = check_depth(depth)
        self._walk = HostSegments(codecs=self.codecs, mtu=mtu)   # checks mtu
        self.mtu = mtu
        super().__init__({
            "i": In(axis_signature()),
            "take": Out(stream.Signature(ContributionBeat)),
            "other": Out(axis_signature()),
            "cfg": In(ReduceConfig),
            "cfg_port": In(16, init=self.port),
            "counters": Out(contribution_counters_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        # a frame is judged against the walk's head some cycles after its header came in:
        # the input waits while the walk holds fewer segments than the frames that fit in
        # the pipeline (it runs ahead; only a burst of tiny frames meets this)
        hold = Signal(name="hold_for_walk")
        m.d.sync += hold.eq(self.cfg.enable & (self.cfg.chunks != 0)
                            & (self._walk.level < _WALK_AHEAD))
        beats, classifier = queued_input(m, self.i, port=self.port, depth=self.depth,
                                         cfg_port=self.cfg_port, hold=hold)
        st = Stager(m, Const(1), reset_less=True)
        position = self._position(m)
        flags5, fields = self._header_checks(m, st)

        # ---- stage 5 → 6: the first failing header check; the position's compares --------
        cls = classifier.o
        pre = first_failing(m, classifier, fields["contribution"],
                            {reason: flags5[reason] for reason in _HEADER_CHECKS},
                            ContributionCheck, ContributionCheck.NOT_CONTRIBUTION,
                            name="header_check")
        valid6 = st.reg(cls.valid, name="valid_s6", reset_less=False)
        header6 = st.reg(cls.valid & cls.payload.first, name="header_s6", reset_less=False)
        first6 = st.reg(cls.payload.first, name="first_s6")
        pre6 = st.reg(pre, name="header_check_s6")
        pre_ok6 = st.reg(pre == ContributionCheck.NONE, name="header_ok_s6")
        end5 = fields["end"]
        # the position's compares each into a register, ANDed after them (the frame's end
        # comes out of a shift register, slow to its carry chain)
        hits6 = [
            st.reg((fields["origin"] == position["chunk"]) & position["any"],
                   name="position_chunk_hit_s6"),
            st.reg(Mux(position["fresh"], fields["offset"] == position["lo"],
                       fields["offset"] == position["progress"]), name="position_offset_hit_s6"),
            st.reg(end5 <= position["hi"], name="position_end_hit_s6"),
        ]
        hit6 = hits6[0] & hits6[1] & hits6[2]
        completes6 = st.reg(end5 == position["hi"], name="completes_segment_s6")
        end6 = st.reg(end5[:32], name="end_s6")

        # ---- stage 6: the verdict; the position moves on -----------------------------------
        take = Signal(name="take")
        m.d.comb += take.eq(pre_ok6 & hit6)
        check = Signal(ContributionCheck, name="check")
        with m.If(~pre_ok6):
            m.d.comb += check.eq(pre6)
        with m.Elif(hit6):
            m.d.comb += check.eq(ContributionCheck.NONE)
        with m.Else():
            m.d.comb += check.eq(ContributionCheck.OFFSET)
        m.d.comb += [position["move"].eq(header6 & take), position["completes"].eq(completes6),
                     position["end"].eq(end6)]

        valid7 = st.reg(valid6, name="valid_s7", reset_less=False)
        header7 = st.reg(header6, name="header_s7", reset_less=False)
        first7 = st.reg(first6, name="first_s7")
        check7 = Signal(ContributionCheck, name="check_s7", reset_less=True)
        taken7 = Signal(name="taken_s7", reset_less=True)
        with m.If(header6):
            m.d.sync += [check7.eq(check), taken7.eq(take)]
        count_verdicts(m, self.counters, header7, check7, ContributionReason,
                       ContributionCheck, contribution_counter_name)

        rest, beat = leave_by_verdict(m, beats, Cat(taken7, first7), valid7, self.depth,
                                      self.take, self.other)
        m.d.comb += [
            self.take.payload.beat.eq(beat),
            self.take.payload.first.eq(rest[0]),
            self.other.payload.eq(beat),
        ]
        return m

    def _header_checks(self, m, st):
        """Stages 1–5 on every beat (what matters is the header's): the stage-5 register of
        each header check's failure (by :class:`ContributionReason`) and the fields the
        position's compares read."""
        c = self.cfg
        beat = self.i.payload
        d = beat.data
        flags = header_byte(d, HDR.FLAGS[0])
        n = field_le(d, *HDR.N)
        offset = field_le(d, *HDR.OFFSET)
        not_zero = REDUCE_FLAGS_RESERVED | FLAG_GATHER     # reserved, flush and gather

        # ---- stage 1: field compares, the frame's end, the payload's bytes ---------------
        contribution1 = st.reg((header_byte(d, HDR.VERSION[0]) == REDUCE_VERSION)
                               & ~header_flag(flags, FLAG_ENCODED), name="contribution_s1")
        flags_bad1 = st.reg((flags & not_zero) != 0, name="flags_bad_s1")
        settings_eq1 = st.reg(Cat(*settings_compares(d, c)), name="settings_eq_s1")
        nodes_bad1 = st.reg(header_byte(d, REDUCE_HDR.NODES[0]) != c.nodes,
                            name="nodes_bad_s1")
        fields_bad1 = st.reg((header_byte(d, REDUCE_HDR.CONTRIBUTIONS[0]) != 0)
                             | (header_byte(d, REDUCE_HDR.WIDTH[0]) != HOST_VALUE_WIDTH),
                             name="fields_bad_s1")
        origin1 = st.reg(header_byte(d, REDUCE_HDR.ORIGIN[0]), name="origin_s1")
        n1 = st.reg(n, name="n_s1")
        offset1 = st.reg(offset, name="offset_s1")
        end1 = st.reg(offset + n, name="end_s1")                        # 33 bits, no wrap
        payload1 = st.reg((beat.size - HEADER_LEN)[:16], name="payload_bytes_s1")
        # a header beat that is its frame's last, of a frame that says it is longer
        cut1 = st.reg(beat.last & (beat.size != HEADER_LEN), name="cut_s1")

        # ---- stage 2: the settings' AND; the length ---------------------------------------
        codec_ok = Signal(name="cfg_codec_ok")
        m.d.sync += codec_ok.eq(functools.reduce(
            operator.or_, [c.codec == cid for cid in sorted(self.codecs)]))
        settings_bad2 = st.reg(~(functools.reduce(operator.and_, list(settings_eq1))
                                 & codec_ok), name="settings_bad_s2")
        length_bad2 = st.reg((payload1 != Cat(Const(0, 2), n1)) | (n1 == 0) | cut1,
                             name="length_bad_s2")
        bad2 = {ContributionReason.LENGTH: length_bad2,
                ContributionReason.FLAGS: st.reg(flags_bad1, name="flags_bad_s2"),
                ContributionReason.SETTINGS: settings_bad2,
                ContributionReason.NODES: st.reg(nodes_bad1, name="nodes_bad_s2"),
                ContributionReason.FIELDS: st.reg(fields_bad1, name="fields_bad_s2")}

        # ---- stages 3–5: waiting for the classifier ---------------------------------------
        flags5 = {reason: st.delay(bad, 3, name=f"{reason.name.lower()}_bad")
                  for reason, bad in bad2.items()}
        flags5[ContributionReason.DISABLED] = ~self._enable
        fields = {
            "contribution": st.delay(contribution1, 4, name="contribution"),
            "origin": st.delay(origin1, 4, name="origin"),
            "offset": st.delay(offset1, 4, name="offset"),
            "end": st.delay(end1, 4, name="end"),
        }
        return flags5, fields

    def _position(self, m):
        """The host's expected position: the head of the walk of its segments
        (:class:`~.host_segments.HostSegments`) and the offset expected in it; returns its
        signals and those that move it (``move``, ``completes``, ``end``)."""
        c = self.cfg
        m.submodules.segments = walk = self._walk
        m.d.comb += walk.cfg.eq(c)
        # enabled once the walk has its first segment (or there is none): a frame judged
        # before then is passed on as the node's while disabled
        self._enable = enable = Signal(name="enabled")
        m.d.sync += enable.eq(c.enable & (enable | walk.o.valid | (c.chunks == 0)))
        head = walk.o.payload
        fresh = Signal(init=1, name="position_fresh")      # at the head segment's start
        progress = Signal(32, name="position_offset")
        move, completes, end = Signal(), Signal(), Signal(32)
        m.d.comb += walk.o.ready.eq(move & completes)
        with m.If(~enable | (move & completes)):
            m.d.sync += fresh.eq(1)
        with m.Elif(move):
            m.d.sync += [fresh.eq(0), progress.eq(end)]
        return {"chunk": head.chunk, "fresh": fresh, "lo": head.lo, "progress": progress,
                "hi": head.hi,
                "any": walk.o.valid, "move": move, "completes": completes, "end": end}
