"""The receive checks of the reduce lane: each wire frame from the ring's predecessor is
taken into the lane or bypassed to the RX lane (``docs/wire-format.md`` section 8.4)."""

import functools
import operator

from amaranth import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import axis_signature, field_le
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.counters import reduce_counter_name
from squeezenic_hw.spec.header import (
    DEFAULT_PORT,
    FLAG_ENCODED,
    HDR,
    HEADER_LEN,
    check_port,
)
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    FLOAT_CODECS,
    INTEGER_CODECS,
    MAX_NODES,
    MIN_NODES,
    REDUCE_FLAGS_RESERVED,
    REDUCE_HDR,
    REDUCE_VERSION,
    ReduceReason,
    partial_width,
    reduce_family,
)

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
from .layouts import CheckedBeat, ReduceCheck, ReduceConfig, reduce_counters_layout

__all__ = ["ReduceChecker", "REDUCIBLE_CODECS", "MIN_DEPTH", "codec_ids"]

#: The codecs a reduce lane can build in (section 8.2), by id.
REDUCIBLE_CODECS = frozenset(codec_info(c).id for c in INTEGER_CODECS + FLOAT_CODECS)

#: The checks on a reduce frame's header made before its expected offset, in order.
_HEADER_CHECKS = (ReduceReason.DISABLED, ReduceReason.LENGTH, ReduceReason.FLAGS,
                  ReduceReason.SETTINGS, ReduceReason.NODES, ReduceReason.WIDTH,
                  ReduceReason.PHASE, ReduceReason.OFFSET)


def codec_ids(codecs):
    """The ids of ``codecs`` (names or ids), each reducible; ``ValueError`` naming ``codecs``."""
    if isinstance(codecs, (str, bytes)) or not hasattr(codecs, "__iter__"):
        raise ValueError(f"codecs: expected an iterable of codec names or ids, got {codecs!r}")
    try:
        ids = frozenset(codec_info(c).id for c in codecs)
        for c in ids:
            reduce_family(c)
    except ValueError as e:
        raise ValueError(f"codecs: {e}") from None
    return ids


class ReduceChecker(wiring.Component):
    """Takes each reduce frame that passes the checks of section 8.4 onto ``take`` and
    bypasses every other frame onto ``bypass``, whole and unchanged.

    A frame is judged from its header beat and ``tuser_size`` alone, as the RX lane's
    classifier judges it (the frame's length is ``tuser_size``, valid from its first
    beat; section 1): so nothing waits for a frame's last beat, and no frame buffer is
    needed. Section 7's checks before ``version`` are the RX lane's
    :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`, built in here
    without codecs; a frame that fails one of them, or whose ``version`` is not 2, is
    not a reduce frame: it leaves on ``bypass`` with ``check`` = ``NOT_REDUCE``, and
    no counter counts it (the RX lane behind ``bypass`` does). A frame whose header beat
    is its last but whose ``tuser_size`` is not 64 fails ``length``: every frame taken
    has a payload beat, so two taken headers are at least two cycles apart, which the
    expected offsets' read-modify-write below relies on. Beyond that the beats are not
    counted: a frame whose beats end elsewhere than its ``tuser_size`` says is judged by
    its ``tuser_size`` (the reference, which sees the bytes, calls it ``length``) and
    leaves whole, up to ``tlast``, on the output chosen.

    The expected offset of each (chunk, phase), 2 × 16 of them, is a 32-entry LUTRAM of
    32 bits (the next offset, read into a register before it is compared) beside 32
    flip-flops saying whether the entry holds one (else the chunk's start is expected:
    the state after reset, after ``cfg.enable`` falls, and after a chunk completes).

    Parameters
    ----------
    port : int
        The SqueezeNIC UDP port ``cfg_port`` starts at, 1 … 65535.
    codecs : iterable of str or int
        The reducible codecs built in (default: all of :data:`REDUCIBLE_CODECS`); a
        reduce frame of another codec fails ``settings``, whatever ``cfg.codec`` says.
    depth : int
        Beats the input queue holds, :data:`MIN_DEPTH` … 64 (default 16): the frames'
        beats wait there while the checks run.

    Attributes
    ----------
    i : In(axis_signature())
        Wire frames from the ring's predecessor (the RX lane's input).
    take : Out(stream.Signature(CheckedBeat))
        The beats of the frames taken: ``check`` = ``NONE``; on the first beat
        ``info`` holds the header's phase, contributions, origin, width, ``n`` and
        ``offset``.
    bypass : Out(stream.Signature(CheckedBeat))
        Every other frame's beats, ``check`` saying why (``NOT_REDUCE``: not a reduce
        frame).
    cfg : In(ReduceConfig)
        The node's configuration (registers; :class:`~.layouts.ReduceConfig`). The
        partial-sum width w and the rank's neighbours are derived from it into registers
        a cycle later: change it only while ``cfg.enable`` is 0 and no frame is inside.
    cfg_port : In(16), init ``port``
        The SqueezeNIC port (the RX lane's register).
    counters : Out(reduce_counters_layout())
        Frames taken (``reduce_taken``) and bypassed per reason (``reduce_<reason>``;
        :data:`~squeezenic_hw.spec.counters.REDUCE_COUNTERS`), 32 bits, wrapping as
        the lanes' counters do; a frame counts when its header's checks end, before it
        leaves. Reset to 0.

    Notes
    -----
    Latency: ``LATENCY`` = 9 cycles from a beat accepted to the same beat offered. The
    checks run in stages beside the classifier's five: field compares, the frame's end
    ``offset`` + n, and n·w's inputs (stage 1); the settings' AND, the phase's parts and
    the chunk's start ``origin``·C as two sums of shifted C (2); their sum, the phase,
    and n·w's product (a 16 × 8 multiply in a DSP slice with its M and P registers) (3);
    the length compare, the chunk's end and the offset's lower bound (4); its upper
    bound and whether the frame ends its chunk (5); the first failing check, and the
    expected offset's LUTRAM read into a register (6); the offset compared with it, the
    entry written and the frame's check (7); then the check queue's write and registered
    read (8, 9). Throughput: one beat per cycle, back-to-back frames of any length
    included. Backpressure: every beat is written into a distributed-RAM queue of
    ``depth`` beats as it is accepted, and its check into a narrow queue beside it when
    the checks are done (the checks never stall); a beat leaves both queues when the
    output its frame goes to takes it. ``i.ready`` is the beat queue's room, a
    flip-flop; a stalled output fills the queues and then drops ``i.ready``.
    ``take.valid`` and ``bypass.valid`` are one LUT of registers (the check queue's
    valid and its taken bit); their payloads are registers. Nothing is dropped or
    reordered. Only valid bits, the expected offsets' flags, the queues' pointers and
    the counters are reset.

    Resources (default parameters), measured with ``python -c "from squeezenic_hw.flows
    import synth; from squeezenic_hw.gateware.reduce.checker import ReduceChecker;
    print(synth.synthesize(ReduceChecker(), timing=True).summary())"``: 864 LUT and 504
    LUTs as memory (49 RAM32M16: the beat queue's 44, the expected offsets' 3; 112
    SRL16E), 1 744 FF, 0 BRAM, 1 DSP; estimated 2.61 ns (``offset_s6`` → the expected
    offsets' flags), at most 5 LUT levels on any path.
    """

    LATENCY = 9

    def __init__(self, *, port=DEFAULT_PORT, codecs=REDUCIBLE_CODECS, depth=16):
        self.port = check_port(port)
        self.codecs = codec_ids(codecs)
        self.depth = check_depth(depth)
        super().__init__({
            "i": In(axis_signature()),
            "take": Out(stream.Signature(CheckedBeat)),
            "bypass": Out(stream.Signature(CheckedBeat)),
            "cfg": In(ReduceConfig),
            "cfg_port": In(16, init=self.port),
            "counters": Out(reduce_counters_layout()),
        })

    def elaborate(self, platform):
        m = Module()
        # the beats wait in a queue from the input on; the checks run beside it, never stall
        beats, classifier = queued_input(m, self.i, port=self.port, depth=self.depth,
                                         cfg_port=self.cfg_port)
        cfg = self._derived_config(m)
        st = Stager(m, Const(1), reset_less=True)
        flags5, fields = self._header_checks(m, st, cfg)

        # ---- stage 6: the first failing check; the expected offset's read --------------
        # the classifier's output is stage 5 of the same beat
        cls = classifier.o
        pre = first_failing(m, classifier, fields["version2"],
                            {reason: flags5[reason] for reason in _HEADER_CHECKS}, ReduceCheck,
                            ReduceCheck.NOT_REDUCE, name="header_check")
        valid6 = st.reg(cls.valid, name="valid_s6", reset_less=False)
        header6 = st.reg(cls.valid & cls.payload.first, name="header_s6", reset_less=False)
        first6 = st.reg(cls.payload.first, name="first_s6")
        pre6 = st.reg(pre, name="header_check_s6")
        pre_ok6 = st.reg(pre == ReduceCheck.NONE, name="header_ok_s6")
        key5 = fields["key"]
        expected_mem = Memory(shape=unsigned(32), depth=32, init=[])
        m.submodules.expected = expected_mem
        read = expected_mem.read_port(domain="sync", transparent_for=())
        write = expected_mem.write_port()
        m.d.comb += read.addr.eq(key5)
        held = Signal(32, name="expected_held")        # entry k holds an expected offset
        held6 = st.reg(held.bit_select(key5, 1), name="expected_held_s6")
        key6 = st.reg(key5, name="key_s6")
        offset6 = st.reg(fields["offset"], name="offset_s6")
        end6 = st.reg(fields["end"], name="end_s6")
        at_start6 = st.reg(fields["at_start"], name="at_start_s6")
        chunk_end6 = st.reg(fields["chunk_end"], name="chunk_end_s6")

        # ---- stage 7: the offset against the expected one; the entry written ------------
        rd = read.data
        expected_hit = Mux(held6, offset6 == rd, at_start6)
        below = held6 & (offset6 < rd)
        take = Signal(name="take")
        m.d.comb += take.eq(pre_ok6 & expected_hit)
        check = Signal(ReduceCheck, name="check")
        with m.If(~pre_ok6):
            m.d.comb += check.eq(pre6)
        with m.Elif(expected_hit):
            m.d.comb += check.eq(ReduceCheck.NONE)
        with m.Elif(below):
            m.d.comb += check.eq(ReduceCheck.DUPLICATE)
        with m.Else():
            m.d.comb += check.eq(ReduceCheck.OFFSET)
        written = Signal(name="expected_written")
        m.d.comb += [
            written.eq(header6 & take),
            write.addr.eq(key6),
            write.data.eq(end6),
            write.en.eq(written),
        ]
        # a complete chunk expects its start again: the entry no longer holds an offset
        with m.If(~cfg["enable"]):
            m.d.sync += held.eq(0)
        with m.Elif(written):
            m.d.sync += held.bit_select(key6, 1).eq(~chunk_end6)

        valid7 = st.reg(valid6, name="valid_s7", reset_less=False)
        header7 = st.reg(header6, name="header_s7", reset_less=False)
        first7 = st.reg(first6, name="first_s7")
        # loaded on a frame's header, held for the rest of its beats
        check7 = Signal(ReduceCheck, name="check_s7", reset_less=True)
        taken7 = Signal(name="taken_s7", reset_less=True)
        with m.If(header6):
            m.d.sync += [check7.eq(check), taken7.eq(take)]
        count_verdicts(m, self.counters, header7, check7, ReduceReason, ReduceCheck,
                       reduce_counter_name)
        self._outputs(m, beats, valid7, first7, check7, taken7)
        return m

    def _derived_config(self, m):
        """Registers of what the checks derive from the configuration: the width w, whether
        the codec is built in, r + N, r + 1 mod N, and ``enable``."""
        c = self.cfg
        width = Signal(6, name="cfg_width")
        codec_ok = Signal(name="cfg_codec_ok")
        ceil_log2 = Signal(3, name="cfg_ceil_log2_nodes")
        bit_length = Signal(3, name="cfg_bit_length_nodes")
        with m.Switch(c.nodes):
            for n in range(MIN_NODES, MAX_NODES + 1):
                with m.Case(n):
                    m.d.comb += [ceil_log2.eq((n - 1).bit_length()),
                                 bit_length.eq(n.bit_length())]
        m.d.comb += width.eq(0)
        with m.Switch(c.codec):
            for cid in sorted(self.codecs):
                name = codec_info(cid).name
                with m.Case(cid):
                    m.d.comb += codec_ok.eq(1)
                    if name in ("fixed", "qsgd"):
                        m.d.comb += width.eq(c.param[:5] + ceil_log2)
                    elif name == "sign":
                        m.d.comb += width.eq(bit_length)
                    else:
                        m.d.comb += width.eq(partial_width(cid, 0, MIN_NODES))
        regs = {}
        for name, value in (("width", width), ("codec_ok", codec_ok), ("rank", c.rank),
                            ("rank_plus_nodes", c.rank + c.nodes),
                            ("rank_next", Mux(c.rank + 1 == c.nodes, 0, c.rank + 1)),
                            ("enable", c.enable)):
            value = Value.cast(value)
            reg = Signal(value.shape(), name=f"cfg_{name}_q")
            m.d.sync += reg.eq(value)
            regs[name] = reg
        return regs

    def _header_checks(self, m, st, cfg):
        """Stages 1–5 on every beat (what matters is the header's): returns the stage-5
        register of each check's failure (by :class:`ReduceReason`) and the fields the
        later stages read."""
        c = self.cfg
        beat = self.i.payload
        d = beat.data
        flags = header_byte(d, HDR.FLAGS[0])
        k, width = header_byte(d, REDUCE_HDR.CONTRIBUTIONS[0]), header_byte(d, REDUCE_HDR.WIDTH[0])
        nodes, origin = header_byte(d, REDUCE_HDR.NODES[0]), header_byte(d, REDUCE_HDR.ORIGIN[0])
        n = field_le(d, *HDR.N)
        offset = field_le(d, *HDR.OFFSET)
        settings_eq = settings_compares(d, c)

        # ---- stage 1: field compares, the frame's end, n·w's inputs ---------------------
        version2 = st.reg(header_byte(d, HDR.VERSION[0]) == REDUCE_VERSION, name="version2_s1")
        flags_bad1 = st.reg((flags & (REDUCE_FLAGS_RESERVED | FLAG_ENCODED)) != FLAG_ENCODED,
                            name="flags_bad_s1")
        settings_eq1 = st.reg(Cat(*settings_eq), name="settings_eq_s1")
        nodes_bad1 = st.reg(nodes != c.nodes, name="nodes_bad_s1")
        width_bad1 = st.reg(width != cfg["width"], name="width_bad_s1")
        gather1 = st.reg(header_flag(flags, FLAG_GATHER), name="gather_s1")
        k1 = st.reg(k, name="k_s1")
        origin1 = st.reg(origin, name="origin_s1")
        n1 = st.reg(n, name="n_s1")
        width1 = st.reg(width, name="width_s1")
        offset1 = st.reg(offset, name="offset_s1")
        end1 = st.reg(offset + n, name="end_s1")                        # 33 bits, no wrap
        payload1 = st.reg((beat.size - HEADER_LEN)[:16], name="payload_bytes_s1")
        # a header beat that is its frame's last, of a frame that says it is longer
        cut1 = st.reg(beat.last & (beat.size != HEADER_LEN), name="cut_s1")
        n_zero1 = st.reg(n == 0, name="n_zero_s1")

        # ---- stage 2: the settings' AND, the phase's parts, origin·C's two halves -------
        chunk = c.chunk
        o = origin1[:4]
        half_a = Mux(o[0], chunk, 0) + Mux(o[1], chunk << 1, 0)
        half_b = Mux(o[2], chunk << 2, 0) + Mux(o[3], chunk << 3, 0)
        lo_a2 = st.reg(half_a, name="chunk_start_a_s2")
        lo_b2 = st.reg(half_b, name="chunk_start_b_s2")
        settings_bad2 = st.reg(~(functools.reduce(operator.and_, list(settings_eq1))
                                 & cfg["codec_ok"]), name="settings_bad_s2")
        k_ok = Mux(gather1, k1 == c.nodes, (k1 != 0) & (k1 < c.nodes))
        phase_ok2 = st.reg(k_ok & (origin1 < c.nodes), name="phase_ok_s2")
        # reduce phase: origin + k ≡ r (mod N), with origin, k < N: the sum is r or r + N
        sum2 = st.reg(o + k1[:4], name="origin_plus_k_s2")
        not_next2 = st.reg(o != cfg["rank_next"], name="not_rank_next_s2")
        gather2 = st.reg(gather1, name="gather_s2")
        nw2 = st.reg(n1 * width1, name="nw")                         # M register
        in_tensor2 = st.reg(end1 <= c.elements, name="in_tensor_s2")
        offset2 = st.reg(offset1, name="offset_s2")
        end2 = st.reg(end1, name="end_s2")
        payload2 = st.reg(payload1, name="payload_bytes_s2")
        early = {"flags": flags_bad1, "nodes": nodes_bad1, "width": width_bad1, "cut": cut1,
                 "n_zero": n_zero1}
        early2 = {name: st.reg(v, name=f"{name}_s2") for name, v in early.items()}

        # ---- stage 3: the chunk's start; the phase; n·w's P register --------------------
        lo3 = st.reg(lo_a2 + lo_b2, name="chunk_start_s3")            # 36 bits
        nw3 = st.reg(nw2, name="nw_s3")
        reduce_hit = (sum2 == cfg["rank"]) | (sum2 == cfg["rank_plus_nodes"])
        phase_bad3 = st.reg(~(phase_ok2 & Mux(gather2, not_next2, reduce_hit)),
                            name="phase_bad_s3")
        settings_bad3 = st.reg(settings_bad2, name="settings_bad_s3")
        in_tensor3 = st.reg(in_tensor2, name="in_tensor_s3")
        offset3 = st.reg(offset2, name="offset_s3")
        end3 = st.reg(end2, name="end_s3")
        payload3 = st.reg(payload2, name="payload_bytes_s3")
        payload_m1_3 = st.reg(payload2 - 1, name="payload_bytes_m1_s3")
        payload_nz3 = st.reg(payload2 != 0, name="payload_bytes_nz_s3")
        early3 = {name: st.reg(v, name=f"{name}_s3") for name, v in early2.items()}

        # ---- stage 4: length; the chunk's end; the offset's lower bound ------------------
        # 64 + ⌈n·w/8⌉ = size: ⌊n·w/8⌋ is the payload's bytes, or one less with a remainder
        q, rem = nw3[3:], nw3[:3] != 0
        length_ok = ((q == payload3) & ~rem) | ((q == payload_m1_3) & payload_nz3 & rem)
        length_bad4 = st.reg(~length_ok | early3["cut"] | early3["n_zero"],
                             name="length_bad_s4")
        hi4 = st.reg(lo3 + chunk, name="chunk_end_s4")
        above_start4 = st.reg(offset3 >= lo3, name="above_start_s4")
        at_start4 = st.reg(offset3 == lo3, name="at_start_s4")
        phase_bad4 = st.reg(phase_bad3, name="phase_bad_s4")
        settings_bad4 = st.reg(settings_bad3, name="settings_bad_s4")
        in_tensor4 = st.reg(in_tensor3, name="in_tensor_s4")
        end4 = st.reg(end3, name="end_s4")
        offset4 = st.reg(offset3, name="offset_s4")
        early4 = {name: st.reg(v, name=f"{name}_s4") for name, v in early3.items()}

        # ---- stage 5: the offset's upper bound; whether the frame ends the chunk ---------
        # the chunk's end is min(lo + C, E): a frame inside it ends at one of the two
        in_chunk = (end4 <= hi4) & in_tensor4 & above_start4
        flags5 = {
            ReduceReason.DISABLED: ~cfg["enable"],
            ReduceReason.LENGTH: st.reg(length_bad4, name="length_bad_s5"),
            ReduceReason.FLAGS: st.reg(early4["flags"], name="flags_bad_s5"),
            ReduceReason.SETTINGS: st.reg(settings_bad4, name="settings_bad_s5"),
            ReduceReason.NODES: st.reg(early4["nodes"], name="nodes_bad_s5"),
            ReduceReason.WIDTH: st.reg(early4["width"], name="width_bad_s5"),
            ReduceReason.PHASE: st.reg(phase_bad4, name="phase_bad_s5"),
            ReduceReason.OFFSET: st.reg(~in_chunk, name="outside_chunk_s5"),
        }
        chunk_end5 = st.reg((end4 == hi4) | (end4 == c.elements), name="chunk_end_s5")
        fields = {
            "version2": st.delay(version2, 4, name="version2"),
            "key": Cat(st.delay(origin1[:4], 4, name="origin"),
                       st.delay(gather1, 4, name="gather")),
            "offset": st.reg(offset4, name="offset_s5"),
            "end": st.reg(end4[:32], name="end_s5"),
            "at_start": st.reg(at_start4, name="at_start_s5"),
            "chunk_end": chunk_end5,
        }
        return flags5, fields

    def _outputs(self, m, beats, valid7, first7, check7, taken7):
        """The checks into a queue of their own as they come; a beat leaves the beat queue
        with its check, onto the output its frame goes to."""
        rest, beat = leave_by_verdict(m, beats, Cat(taken7, first7, check7), valid7,
                                      self.depth, self.take, self.bypass)
        first, check = rest[0], rest[1:]
        for out in (self.take, self.bypass):
            p = out.payload
            m.d.comb += [
                p.beat.eq(beat),
                p.first.eq(first),
                p.check.eq(check),
            ]
            d = p.beat.data
            m.d.comb += [
                p.info.gather.eq(header_flag(header_byte(d, HDR.FLAGS[0]), FLAG_GATHER)),
                p.info.contributions.eq(header_byte(d, REDUCE_HDR.CONTRIBUTIONS[0])),
                p.info.origin.eq(header_byte(d, REDUCE_HDR.ORIGIN[0])),
                p.info.width.eq(header_byte(d, REDUCE_HDR.WIDTH[0])),
                p.info.n.eq(field_le(d, *HDR.N)),
                p.info.offset.eq(field_le(d, *HDR.OFFSET)),
            ]
