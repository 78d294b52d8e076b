"""The TX controller's decision: which wire frame each element goes into, and where frames close.

Wire frames close (wire format section 6, ``docs/frames.md``) when full, on a mismatch (the
next SqueezeNIC host frame has another coalescing key or is not contiguous), after a host
frame with ``flush``, after ``idle_timeout`` cycles without a host frame, or when
``close`` is raised while no frame is arriving (the reference's ``end``).

The decision is made once per prepared beat (:class:`~.prep.TxBeatPrep`), in one cycle,
from registers only:

* dense codecs: the open frame's element count ``n`` against ``cap − 16`` (is there room
  for a whole beat?) and the low bits of ``cap − n``; the beat is all in (``v < room``),
  fills the frame exactly, or straddles it (the rest, fewer than ``cap`` elements, opens
  the next frame);
* ``threshold``: a frame's size depends on which elements are kept, so whether ``j``
  elements of a beat fit is a compare per ``j`` against the frame's slack under either
  layout (bitmap ``⌈n/8⌉ + 4k``, index list ``6k``) and the 65535-element limit. These
  compares are made a stage earlier (``F``, the beat before the decision stage ``D``),
  against the frame as it will be once the beat in ``D`` is in, assuming it is all in. When
  ``D`` closes a frame instead, that guess is wrong for the next two beats; they fit anyway
  whenever the MTU is at least :data:`SPARSE_SPECULATION_MTU` (a frame with up to 48
  elements, all kept, fits it), and below that MTU a threshold beat enters ``D`` only when
  ``D`` is empty, so no guess is made (half rate for threshold frames at such MTUs).

Outputs, all in the order of the reference's decisions: ``jobs`` (one per payload beat, and
one with no elements for each close between beats), ``records`` (what the
:class:`~.close_sizer.TxCloseSizer` needs to write headers: host headers, frame opens and
closes, bypassed frames' tokens) and ``bypass`` (the beats of bypassed frames).
"""

from types import SimpleNamespace

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.unit import CodecParams
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    Reason,
    axis_signature,
    field_le,
)
from squeezenic_hw.gateware.common.lut_tree import balanced_or, kept
from squeezenic_hw.gateware.lane.control import codec_params_of
from squeezenic_hw.gateware.sparse.bits import add_bits
from squeezenic_hw.spec.counters import TX_COUNTERS
from squeezenic_hw.spec.frames import TX_REASONS
from squeezenic_hw.spec.header import HDR, HEADER_LEN
from squeezenic_hw.spec.threshold import MAX_N

from .prep import PrepKind, popcount, prepared_beat_layout

__all__ = ["RecordKind", "Cut", "job_record_layout", "close_record_layout", "TxCoalescer",
           "tx_counters_layout", "SPARSE_SPECULATION_MTU"]

_COUNT = unsigned(5)
#: Elements that fit a fresh threshold frame at any MTU this guess is made for: the rest
#: of a beat that closed one (up to 16) and the two beats after it.
_GUESS_ELEMENTS = 3 * ELEMENTS_PER_BEAT
#: Smallest MTU at which the threshold fit is guessed a beat ahead (see the module
#: docstring): 48 kept elements, bitmap layout.
SPARSE_SPECULATION_MTU = HEADER_LEN + (_GUESS_ELEMENTS + 7) // 8 + 4 * _GUESS_ELEMENTS


def tx_counters_layout():
    return data.StructLayout({name: unsigned(32) for name in TX_COUNTERS})


class RecordKind(enum.Enum, shape=2):
    """What a record tells the close sizer."""
    HEADER = 0      # a SqueezeNIC host frame starts (its header; maybe a mismatch close)
    BYPASS = 1      # a bypassed frame's place in the output order
    BEAT = 2        # a payload beat that opens and/or closes wire frames
    CLOSE = 3       # the open frame closes between host frames (idle, end)


def _frame_fields():
    """What a decided beat (or a close between beats) is made of: the decision's inputs,
    from which :class:`Cut` derives where wire frames close (so that the outputs are a
    gate from registers and every consumer derives the cut itself)."""
    return {
        "close_only": unsigned(1),     # a close between beats: the open frame, no elements
        "v": _COUNT,                   # the beat's elements
        "room_big": unsigned(1),       # dense: the frame has room for 17 or more
        "room_low": _COUNT,            # dense: its room, when 16 or less
        "fit": unsigned(ELEMENTS_PER_BEAT),   # threshold: element e fits (a thermometer)
        "keep": unsigned(ELEMENTS_PER_BEAT),  # threshold: element e kept (e < v)
        "flush_end": unsigned(1),      # the beat ends a host frame with flush
        "sparse": unsigned(1),         # a threshold frame
        "n_before": unsigned(16),      # elements of the frame open before the beat
        "k_before": unsigned(16),      # threshold: its kept elements
        "offset": unsigned(32),        # tensor index of the beat's element 0
        "width": unsigned(6),
    }


class Cut:
    """Where a decided beat cuts wire frames, from its :func:`_frame_fields`.

    The frame open before the beat (or opened by its element 0) takes elements
    ``0 … take-1``; with ``close1`` it closes after them (``flush1``: with the flush flag).
    With ``rest_opens`` elements ``take … v-1`` open the next frame, and with ``close2`` it
    closes after element ``v-1`` too (a flush). ``prefix_take``/``suffix_take``: kept
    elements among ``0 … take-1`` and ``take … v-1``.
    """

    def __init__(self, m, f, name):
        v = f.v
        beat = ~f.close_only
        dense_all_in = f.room_big | (v < f.room_low)
        dense_straddle = ~f.room_big & (v > f.room_low)
        sparse_all_in = Array([Const(1, 1), *f.fit])[v]   # a thermometer: the v-th fits
        all_in = beat & Mux(f.sparse, sparse_all_in, dense_all_in)
        straddle = beat & Mux(f.sparse, ~sparse_all_in, dense_straddle)
        self.take = Signal(_COUNT, name=f"{name}_take")
        self.rest = Signal(_COUNT, name=f"{name}_rest")
        m.d.comb += [
            self.take.eq(Mux(f.close_only, 0,
                             Mux(f.sparse, _thermometer_count(f.fit),
                                 Mux(dense_all_in, v, f.room_low)))),
            self.rest.eq(Mux(f.close_only, 0, v - self.take)),
        ]
        self.close1 = f.close_only | (beat & ~all_in) | (all_in & f.flush_end)
        self.flush1 = beat & f.flush_end & ~straddle
        self.rest_opens = straddle
        self.close2 = straddle & f.flush_end
        counted = f.sparse & beat
        self.prefix_take = Mux(counted, popcount(m, f.keep & f.fit, f"{name}_kept_in"), 0)
        self.suffix_take = Mux(counted, popcount(m, f.keep & ~f.fit, f"{name}_kept_out"), 0)


def job_record_layout():
    """One job for the :class:`~.job_shaper.TxJobShaper`: a payload beat (``v`` ≥ 1) or a
    close with no elements (``v`` = 0, ``close1``)."""
    return data.StructLayout({
        **_frame_fields(),
        "elements": data.ArrayLayout(unsigned(32), ELEMENTS_PER_BEAT),
        "codec": unsigned(3),
        "params": CodecParams,
    })


def close_record_layout():
    """One record for the :class:`~.close_sizer.TxCloseSizer`."""
    return data.StructLayout({
        **_frame_fields(),
        "kind": RecordKind,
        "hdr": unsigned(512),      # HEADER: the host frame's header
        "src": unsigned(16),       # HEADER: its tuser_src / tuser_dst
        "dst": unsigned(16),
        "size": unsigned(16),      # BYPASS: the bypassed frame's length
        "mismatch": unsigned(1),   # HEADER, BYPASS: the open frame closes first
        "opens": unsigned(1),      # BEAT: no frame was open; element 0 opens one
    })


def _ceil8_step(r8, j):
    """``⌈(n + j)/8⌉ − ⌈n/8⌉`` for ``n mod 8`` = ``r8`` (a Value) and a constant ``j`` ≤ 16."""
    return Array(Const(((r + j + 7) >> 3) - ((r + 7) >> 3), 2) for r in range(8))[r8]


class _Budget:
    """A slack of the open frame, with ``slack − limit`` beside it for a quick "at least
    ``limit`` left" test. Every update is from registers: a fresh frame less an amount,
    or the slack less an amount."""

    def __init__(self, name, fresh, limit):
        # reset: a fresh frame
        self.reg = Signal(signed(18), name=f"{name}_slack", init=fresh)
        self.reg_minus_limit = Signal(signed(18), name=f"{name}_slack_m{limit}",
                                      init=fresh - limit)
        self.fresh = fresh
        self.limit = limit

    def load_fresh(self, m, amount, more=None, use_more=None):
        """A fresh frame, less ``amount`` (and less ``more`` too when ``use_more``: both
        differences are formed from registers, then chosen)."""
        if more is None:
            m.d.sync += [self.reg.eq(self.fresh - amount),
                         self.reg_minus_limit.eq(self.fresh - self.limit - amount)]
            return
        both = amount + more
        m.d.sync += [
            self.reg.eq(Mux(use_more, self.fresh - both, self.fresh - amount)),
            self.reg_minus_limit.eq(Mux(use_more, self.fresh - self.limit - both,
                                        self.fresh - self.limit - amount)),
        ]

    def spend(self, m, amount):
        m.d.sync += [self.reg.eq(self.reg - amount),
                     self.reg_minus_limit.eq(self.reg_minus_limit - amount)]


class TxCoalescer(wiring.Component):
    """Decides, beat by beat, how host frames become wire frames (see the module docstring).

    Parameters
    ----------
    mtu : int
        Largest wire frame in bytes.
    sparse : bool
        ``threshold`` is built in.
    idle_timeout : int or None
        Initial value of ``cfg_idle_timeout`` (0 or ``None``: never).
    cap : int or None
        With one code width built in, its wire-frame capacity: a constant in place of
        the beats' ``cap`` (``None``: read from each header beat).

    Attributes
    ----------
    i : In(stream.Signature(prepared_beat_layout()))
    jobs : Out(stream.Signature(job_record_layout()))
    records : Out(stream.Signature(close_record_layout()))
    bypass : Out(axis_signature())
    close : In(1)
        Close the open wire frame when no frame is arriving (held until ``close_done``).
    close_done : Out(1)
        ``close`` was acted on this cycle (the open frame closed, or none was open).
    counters : Out(tx_counters_layout())
        Every counter but ``size_errors`` (the prep stage's).
    cfg_idle_timeout : In(32)
        Cycles without a host frame after which the open frame closes (0: never),
        counted from the cycle after the last beat of the last host frame put in it.

    Notes
    -----
    Latency: 2 cycles from a prepared beat to its job and record (``F``, ``D``); the
    outputs are combinational from ``D`` and meant to enter FIFOs. Throughput: one
    prepared beat per cycle; an idle close when no beat waits and a ``close`` close take
    a cycle with no beat in ``D`` (an idle close before a header or a bypassed frame goes
    with it, as a mismatch close does); below
    :data:`SPARSE_SPECULATION_MTU` a threshold beat waits for ``D`` to be empty.
    Backpressure: ``F`` and ``D`` advance together while all three outputs are ready
    (each a FIFO's registered ready) and hold otherwise, so that ``i.ready`` is that
    ready: a gate from three flip-flops (below :data:`SPARSE_SPECULATION_MTU`, where a
    threshold beat may wait in ``F``, also of ``F``'s and ``D``'s states). Nothing is
    dropped.
    """

    def __init__(self, *, mtu, sparse, idle_timeout=None, cap=None):
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)
                                or not 1 <= cap < 2**16):
            raise ValueError(f"cap must be None or an int 1..65535, got {cap!r}")
        self._cap = cap
        self._mtu = mtu
        self._sparse = bool(sparse)
        self._budget = mtu - HEADER_LEN
        super().__init__({
            "i": In(stream.Signature(prepared_beat_layout())),
            "jobs": Out(stream.Signature(job_record_layout())),
            "records": Out(stream.Signature(close_record_layout())),
            "bypass": Out(axis_signature()),
            "close": In(1),
            "close_done": Out(1),
            "counters": Out(tx_counters_layout()),
            "cfg_idle_timeout": In(32, init=idle_timeout or 0),
        })

    # ---- pieces ------------------------------------------------------------------------

    def _idle_timer(self, m, frame_ended):
        """``(due_empty, due_with_beat)``: the open frame is due to close for idleness, when
        no beat waits in D, and when one does. ``frame_ended``: the last beat of a host
        frame is decided this cycle (the count restarts)."""
        timeout = self.cfg_idle_timeout
        since = Signal(32)
        nxt = Signal(32)
        m.d.comb += nxt.eq(Mux(frame_ended, 0, Mux(since == 2**32 - 1, since, since + 1)))
        m.d.sync += since.eq(nxt)
        # ``a ≥ b`` as the sign bit of ``a − b`` (34 bits): no compare against a constant 0
        ahead1 = Signal(34)
        ahead2 = Signal(34)
        m.d.comb += [ahead1.eq(since + 1 - timeout), ahead2.eq(since + 2 - timeout)]
        # Both flags are registers (the decisions read them without a gate): due with a
        # beat when enabled (``timeout != 0``) and ``since ≥ timeout``; due when empty one
        # cycle early, ``since + 1 ≥ timeout`` (it follows from the first). After a frame
        # ends, ``since`` restarts at 0: due at once only for a timeout of 1 (when empty).
        # Close one cycle early when no beat is waiting, so that the close never delays a
        # header that arrives exactly ``idle_timeout`` cycles late.
        enabled = Signal()
        m.d.comb += enabled.eq(timeout != 0)
        due_empty = Signal()
        due_with_beat = Signal()
        m.d.sync += [
            due_with_beat.eq(~frame_ended & enabled & ~ahead1[-1]),
            due_empty.eq(Mux(frame_ended, timeout == 1, enabled & ~ahead2[-1])),
        ]
        return due_empty, due_with_beat

    def _counter_events(self, m):
        """``bump(name, amount=1)`` (call it under the condition, in this cycle) and
        ``finish()``: the counters add their registered events a cycle later, so that no
        decision reaches a counter's carry chain."""
        events = {}

        def bump(name, amount=1):
            if name not in events:
                events[name] = Signal(16, name=f"event_{name}")
            m.d.comb += events[name].eq(amount)

        def finish():
            for name, event in events.items():
                registered = Signal.like(event, name=f"event_{name}_q")
                m.d.sync += [registered.eq(event),
                             self.counters[name].eq(self.counters[name] + registered)]
        return bump, finish

    # ---- the decision ------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        beat_layout = prepared_beat_layout()
        ready = self.jobs.ready & self.records.ready & self.bypass.ready

        # ---- the two stages: F (fit compares) and D (decision) ------------------------
        f_valid = Signal()
        f = Signal(beat_layout, reset_less=True)
        d_valid = Signal()
        d = Signal(beat_layout, reset_less=True)
        # threshold: per j = 1…16, j elements of D's beat fit under the bitmap layout, the
        # index layout, the 65535 limit (bit j−1), and whether those guesses hold
        d_fit_bitmap = Signal(ELEMENTS_PER_BEAT, reset_less=True)
        d_fit_index = Signal(ELEMENTS_PER_BEAT, reset_less=True)
        d_fit_n = Signal(ELEMENTS_PER_BEAT, reset_less=True)
        d_fit_known = Signal(reset_less=True)

        # ---- the open wire frame and the host frame being read ------------------------
        frame = self._frame_registers(d=d)
        kind = d.kind
        frame_ended = Signal()
        due_empty, due_with_beat = self._idle_timer(m, frame_ended)
        # Everything below is written flat from registers: the handshake, the close
        # between frames and the actions each reach a FIFO in a few gates.
        nothing_arriving = ~d_valid & ~f_valid & ~self.i.valid
        end_close = self.close & nothing_arriving
        # an idle close waits for the frame in D to end, and goes with the header or the
        # bypassed frame's first beat that waits there (the record says "close first", as
        # for a key mismatch), so that D never falls a cycle behind the lane's input: idle
        # time is counted at D, as the reference counts it at the input. With a beat in D
        # no ``close`` acts; with none, the idle close (or ``close``) takes the cycle.
        idle_due_in_d = frame.is_open & ~frame.mid_frame & due_with_beat
        # a close between frames with no beat in D (kept: a piece of every output's valid)
        idle_close = kept(m, ~d_valid & frame.is_open & ~frame.mid_frame
                          & (due_empty | end_close), "idle_close")
        d_fire = Signal()
        m.d.comb += d_fire.eq(ready & d_valid)
        m.d.comb += self.close_done.eq(self.close & nothing_arriving & ~frame.mid_frame
                                       & (~frame.is_open | (idle_close & ready)))

        # ---- the decision of a payload beat -------------------------------------------
        cut = self._payload_decision(m, d=d, frame=frame, d_fit_bitmap=d_fit_bitmap,
                                     d_fit_index=d_fit_index, d_fit_n=d_fit_n,
                                     d_fit_known=d_fit_known)

        # ---- what D does this cycle (each from registers, a gate or two deep) ---------
        act = self._actions(m, ready=ready, d_valid=d_valid, kind=kind, d_fire=d_fire, frame=frame,
                            d=d, idle_due_in_d=idle_due_in_d, idle_close=idle_close)
        # the same, were the outputs ready: the state changes under ``If(ready)`` read these,
        # so that ``ready`` (the prep's enable, thousands of loads) is their registers'
        # enable and not one more input of every decision
        acts = self._actions(m, ready=Const(1), d_valid=d_valid, kind=kind, d_fire=d_valid,
                             frame=frame, d=d, idle_due_in_d=idle_due_in_d, idle_close=idle_close)

        # ---- outputs: the decision's inputs (registers, a gate or two), not its results
        self._outputs(m, act=act, acts=acts, cut=cut, d=d, d_valid=d_valid, frame=frame,
                      kind=kind, idle_close=idle_close, due_with_beat=due_with_beat,
                      ready=ready)

        # ---- state and counters -------------------------------------------------------
        self._state(m, ready=ready, act=acts, frame=frame, idle_close=idle_close,
                    due_empty=due_empty, d=d, frame_ended=frame_ended, cut=cut)

        # ---- moving beats: input → F → D ----------------------------------------------
        close_pending, move = self._move_beats(m, ready=ready, d_valid=d_valid, d_fire=d_fire,
                                               f_valid=f_valid, f=f, d=d)

        if self._sparse:
            closes_now = Signal()
            m.d.comb += closes_now.eq(ready & (act.close_between | (act.a_payload & cut.close1)))
            # what stays in the next frame: the rest of a straddling beat
            straddle = act.a_payload & cut.rest_opens & ~cut.close2
            next_rest = Signal(_COUNT)
            rest_kept = Signal(_COUNT)
            m.d.comb += [next_rest.eq(Mux(straddle, cut.rest, 0)),
                         rest_kept.eq(Mux(straddle, cut.suffix_take, 0))]
            self._fit_stage(m, f, d, d_valid, d_fire, move, closes_now, close_pending,
                            next_rest, rest_kept, d_fit_bitmap, d_fit_index, d_fit_n,
                            d_fit_known)
        return m

    def _frame_registers(self, *, d):
        """The open wire frame and the host frame being read: their registers."""
        is_open = Signal()
        n_open = Signal(16)          # elements in the open frame (0 when none is)
        k_open = Signal(16)          # threshold: kept elements in it
        mid_frame = Signal()         # D is inside a frame (host or bypassed)
        cur_codec = Signal(3, reset_less=True)
        cur_params = Signal(CodecParams, reset_less=True)
        cur_width = Signal(6, reset_less=True)
        cur_cap = Signal(16, reset_less=True) if self._cap is None else Const(self._cap, 16)
        new_cap = d.cap if self._cap is None else cur_cap
        room = Signal(16)            # dense: elements the open frame (or a new one) can take
        cur_sparse = Signal(reset_less=True)
        cur_flush = Signal(reset_less=True)

        return SimpleNamespace(is_open=is_open, n_open=n_open, k_open=k_open, mid_frame=mid_frame,
                               cur_codec=cur_codec, cur_params=cur_params, cur_width=cur_width,
                               cur_cap=cur_cap, new_cap=new_cap, room=room, cur_sparse=cur_sparse,
                               cur_flush=cur_flush)

    def _payload_decision(self, m, *, d, frame, d_fit_bitmap, d_fit_index, d_fit_n, d_fit_known):
        """The decision of a payload beat: the elements that go into the open frame, the rest, and
        the closes."""
        v = d.v
        flush_end = d.last & frame.cur_flush
        take = Signal(_COUNT)
        rest = Signal(_COUNT)        # v − take
        all_in = Signal()            # every element of the beat goes into the open frame
        closes_full = Signal()       # the open frame closes full in this beat
        prefix_take = Signal(_COUNT)
        suffix_take = Signal(_COUNT)
        # dense: room = cap − n
        room_big = Signal()
        room_low = Signal(_COUNT)
        m.d.comb += [
            # room ≥ 17
            room_big.eq((frame.room[5:] != 0) | (frame.room[4] & (frame.room[:4] != 0))),
            room_low.eq(frame.room[:5]),                                        # room ≤ 16
        ]
        dense_all_in = room_big | (v < room_low)
        dense_exact = ~room_big & (v == room_low)
        dense_rest = (v - room_low)[:5]
        if self._sparse:
            # the elements that fit, a thermometer: element e goes in when fit[e]
            fit = Signal(ELEMENTS_PER_BEAT)
            for j in range(1, ELEMENTS_PER_BEAT + 1):
                known = (d_fit_bitmap[j - 1] | d_fit_index[j - 1]) & d_fit_n[j - 1]
                m.d.comb += fit[j - 1].eq(Mux(d_fit_known, known, 1) & d.upto_v[j - 1])
            sparse_take = Signal(_COUNT)
            sparse_all_in = Signal()
            # the fit is a thermometer, so all v are in when the v-th fits
            m.d.comb += [sparse_take.eq(_thermometer_count(fit)),
                         sparse_all_in.eq(Array([Const(1, 1), *fit])[v])]
            m.d.comb += [
                all_in.eq(Mux(frame.cur_sparse, sparse_all_in, dense_all_in)),
                closes_full.eq(Mux(frame.cur_sparse, ~sparse_all_in, ~dense_all_in)),
                take.eq(Mux(frame.cur_sparse, sparse_take, Mux(dense_all_in, v, room_low))),
                rest.eq(Mux(frame.cur_sparse, _select_at_cut(fit, d.after),
                            Mux(dense_all_in, 0, dense_rest))),
                # kept elements before and after the cut, straight from the thermometer
                # kept elements before and after the cut: the prep stage's counts at the
                # cut, chosen by where the run of fitting elements ends (one-hot)
                prefix_take.eq(Mux(frame.cur_sparse, _select_at_cut(fit, d.prefix), 0)),
                suffix_take.eq(Mux(frame.cur_sparse, _select_at_cut(fit, d.suffix), 0)),
            ]
        else:
            m.d.comb += [all_in.eq(dense_all_in), closes_full.eq(~dense_all_in),
                         take.eq(Mux(dense_all_in, v, room_low)),
                         rest.eq(Mux(dense_all_in, 0, dense_rest))]
        # a straddle: the rest of the beat opens the next frame (dense: v > room; threshold:
        # not all fit); an exact dense fill closes with no rest
        rest_opens = closes_full & ~(dense_exact & ~frame.cur_sparse)
        close1 = closes_full | (all_in & flush_end)
        close2 = rest_opens & flush_end
        return SimpleNamespace(v=v, flush_end=flush_end, rest=rest, all_in=all_in,
                               closes_full=closes_full, suffix_take=suffix_take, room_big=room_big,
                               room_low=room_low, dense_rest=dense_rest,
                               fit=fit if self._sparse else None, rest_opens=rest_opens,
                               close1=close1, close2=close2)

    def _actions(self, m, *, ready, d_valid, kind, d_fire, frame, d, idle_due_in_d, idle_close):
        """What D does this cycle (each from registers, a gate or two deep)."""
        a_payload = ready & d_valid & (kind == PrepKind.PAYLOAD)
        a_header = d_fire & (kind == PrepKind.HEADER)
        a_bypass_first = d_fire & (kind == PrepKind.BYPASS_FIRST)
        a_bypass = ready & d_valid & (kind == PrepKind.BYPASS)
        mismatch = Signal()          # a header closes the open frame: another key
        idle_first = Signal()        # a header or bypassed frame closes it: idle before it
        m.d.comb += [mismatch.eq(a_header & frame.is_open & ~d.matches & ~idle_due_in_d),
                     idle_first.eq((a_header | a_bypass_first) & idle_due_in_d)]
        close_between = idle_close | mismatch | idle_first   # the open frame closes
        opens = ~frame.is_open
        return SimpleNamespace(a_payload=a_payload, a_header=a_header,
                               a_bypass_first=a_bypass_first, a_bypass=a_bypass, mismatch=mismatch,
                               idle_first=idle_first, close_between=close_between, opens=opens)

    def _outputs(self, m, *, act, acts, cut, d, d_valid, frame, kind, idle_close,
                 due_with_beat, ready):
        """The outputs: the decision's inputs (registers, a gate or two), not its results.

        Each output's ``valid`` is ``ready`` and what D would send were the outputs ready
        (``acts``), on a kept net: the late ``ready`` then meets a FIFO's write enable in
        one LUT, whichever LUT mapper maps the lane."""
        job, rec = self.jobs.payload, self.records.payload
        # D's beat gives a job were the outputs ready (``acts.a_payload |
        # acts.close_between`` less the idle close): a payload beat, or a header or
        # bypassed frame's first beat that closes the open frame, from registers in one
        # kept LUT, so that ``want_job`` is one LUT of it, ``d_valid`` and the idle close
        idle_due = frame.is_open & ~frame.mid_frame & due_with_beat
        job_kind = kept(m, (kind == PrepKind.PAYLOAD)
                        | ((kind == PrepKind.HEADER) & frame.is_open & (~d.matches | idle_due))
                        | ((kind == PrepKind.BYPASS_FIRST) & idle_due), "job_kind")
        for out in (job, rec):
            m.d.comb += [
                out.close_only.eq(~act.a_payload),
                out.v.eq(Mux(act.a_payload, cut.v, 0)),
                out.room_big.eq(cut.room_big),
                out.room_low.eq(cut.room_low),
                out.fit.eq(cut.fit if self._sparse else 0),
                out.keep.eq(d.keep),
                out.flush_end.eq(cut.flush_end),
                out.sparse.eq(frame.cur_sparse),
                out.n_before.eq(frame.n_open), out.k_before.eq(frame.k_open),
                out.offset.eq(d.offset), out.width.eq(frame.cur_width),
            ]
        record_kind = Signal(RecordKind)
        with m.Switch(kind):
            with m.Case(PrepKind.HEADER):
                m.d.comb += record_kind.eq(RecordKind.HEADER)
            with m.Case(PrepKind.BYPASS_FIRST, PrepKind.BYPASS):
                m.d.comb += record_kind.eq(RecordKind.BYPASS)
            with m.Case(PrepKind.PAYLOAD):
                m.d.comb += record_kind.eq(RecordKind.BEAT)
        m.d.comb += [
            job.elements.as_value().eq(d.beat.data),
            job.codec.eq(frame.cur_codec),
            job.params.eq(frame.cur_params),
            rec.kind.eq(Mux(idle_close, RecordKind.CLOSE, record_kind)),
            rec.hdr.eq(d.beat.data),
            rec.src.eq(d.beat.src),
            rec.dst.eq(d.beat.dst),
            rec.size.eq(d.beat.size),
            rec.mismatch.eq(act.mismatch | act.idle_first),
            rec.opens.eq(act.opens),
            self.bypass.payload.eq(d.beat),
            self.jobs.valid.eq(ready & kept(m, (d_valid & job_kind) | idle_close, "want_job")),
            # a payload beat gives a record when it opens or closes a frame (the sizer
            # has a cycle to spare for a beat that closes two)
            self.records.valid.eq(ready & kept(
                m, idle_close | acts.a_header | acts.a_bypass_first
                | (acts.a_payload & (acts.opens | cut.close1)), "want_record")),
            self.bypass.valid.eq(ready & kept(m, acts.a_bypass_first | acts.a_bypass,
                                              "want_bypass")),
        ]

    def _state(self, m, *, ready, act, frame, idle_close, due_empty, d, frame_ended, cut):
        """The state of the open frame and the host frame, and the counters, from what D does this
        cycle: ``act`` says what it does when the outputs are ready, and nothing changes
        while they are not."""
        bump, finish_counters = self._counter_events(m)
        with m.If(ready):
            with m.If(act.close_between):
                m.d.sync += [frame.is_open.eq(0), frame.n_open.eq(0), frame.k_open.eq(0),
                             frame.room.eq(frame.cur_cap)]
                bump("wire_frames")
            with m.If(idle_close):
                with m.If(due_empty):
                    bump("close_idle")
                with m.Else():
                    bump("close_end")
            with m.If(act.mismatch):
                bump("close_mismatch")
            with m.If(act.idle_first):
                bump("close_idle")
            with m.If(act.a_bypass_first | act.a_bypass):
                m.d.sync += frame.mid_frame.eq(~d.beat.last)
            with m.If(act.a_bypass_first):
                bump("bypass_frames")
                with m.Switch(d.reason):
                    for r in TX_REASONS:
                        with m.Case(Reason[r.name]):
                            bump(f"bypass_{r.value}")
            with m.If(act.a_header):
                hdr = d.beat.data
                m.d.sync += [
                    frame.mid_frame.eq(1),
                    frame.cur_codec.eq(field_le(hdr, *HDR.CODEC)),
                    *codec_params_of(frame.cur_params, hdr),
                    frame.cur_width.eq(d.width),
                    *([frame.cur_cap.eq(d.cap)] if self._cap is None else []),
                    # a frame that stays open has this codec, so this capacity
                    frame.room.eq(Mux(frame.is_open & ~(act.mismatch | act.idle_first), frame.room,
                                      frame.new_cap)),
                    frame.cur_sparse.eq(d.sparse),
                    frame.cur_flush.eq(d.flush),
                ]
                bump("host_frames")
                bump("elements", field_le(hdr, *HDR.N))
            with m.If(act.a_payload):
                m.d.comb += frame_ended.eq(d.last)
                m.d.sync += frame.mid_frame.eq(~d.last)
                with m.If(cut.rest_opens & ~cut.close2):
                    m.d.sync += [frame.is_open.eq(1), frame.n_open.eq(cut.rest),
                                 frame.k_open.eq(cut.suffix_take),
                                 frame.room.eq(frame.cur_cap - cut.dense_rest)]
                with m.Elif(cut.close1):
                    m.d.sync += [frame.is_open.eq(0), frame.n_open.eq(0), frame.k_open.eq(0),
                                 frame.room.eq(frame.cur_cap)]
                with m.Else():
                    m.d.sync += [frame.is_open.eq(1), frame.n_open.eq(frame.n_open + cut.v),
                                 frame.k_open.eq(frame.k_open + d.suffix[0]),
                                 frame.room.eq(frame.room - cut.v)]
                with m.If(cut.close1):
                    bump("wire_frames", 1 + cut.close2)
                    with m.If(cut.closes_full):
                        bump("close_full")
                    with m.If(cut.close2 | (cut.all_in & cut.flush_end)):
                        bump("close_flush")

        finish_counters()

    def _move_beats(self, m, *, ready, d_valid, d_fire, f_valid, f, d):
        """Moving beats: input → F → D; returns the threshold close not yet applied to the slacks,
        and whether F's beat moves to D."""
        small_mtu = self._sparse and self._mtu < SPARSE_SPECULATION_MTU
        close_pending = Signal()        # threshold: a close not yet applied to the slacks
        move = Signal()
        if small_mtu:
            # below the speculation MTU a threshold beat is compared only against a settled
            # frame: it enters D when D is empty and no close is pending
            d_takes = ~d_valid | d_fire
            f_sparse_beat = f_valid & (f.kind == PrepKind.PAYLOAD) & f.sparse
            m.d.comb += move.eq(f_valid & d_takes
                                & (~f_sparse_beat | (~d_valid & ~close_pending)))
            f_takes = ~f_valid | move
        else:
            # F and D advance together on the outputs' ready, which is three flip-flops:
            # the input's ready (the prep's pipeline enable) is then a gate from registers,
            # whatever the LUT mapping, where taking F's beat into an empty D would put
            # D's and F's states in front of it
            m.d.comb += move.eq(f_valid & ready)
            f_takes = ready
        m.d.comb += self.i.ready.eq(f_takes)
        with m.If(move):
            m.d.sync += [d_valid.eq(1), d.eq(f)]
        with m.Elif(d_fire):
            m.d.sync += d_valid.eq(0)
        with m.If(f_takes):
            m.d.sync += [f_valid.eq(self.i.valid), f.eq(self.i.payload)]
        return close_pending, move

    def _fit_stage(self, m, f, d, d_valid, d_fire, move, closes_now, close_pending, rest,
                   rest_kept, d_fit_bitmap, d_fit_index, d_fit_n, d_fit_known):
        """threshold: the fit compares of F's beat, and the slack state behind them.

        ``S``, the slacks of the frame after every beat ``D`` has decided, are registers
        updated from registers only. ``D``'s beat carries its own cost (``d_cost_*``,
        reckoned when it entered ``D``), so F compares against ``S`` minus that cost: the
        frame as it will be if ``D``'s beat is all in. A close is applied to ``S`` a cycle
        after ``D`` decides it (``close_pending``): a fresh frame less the rest of the
        closing beat, and less ``D``'s next beat if that is decided meanwhile; the compares
        made in those two cycles are not used (the beats they are for fit anyway, at the
        MTUs where the guess is made).

        A beat's cost: bitmap bytes ``⌈(n+v)/8⌉ − ⌈n/8⌉`` (a table over ``n mod 8`` from
        the prep stage) plus 4 per kept element; kept elements (index list, counted
        against ``⌊B/6⌋``); elements (the 65535 limit).
        """
        budget = self._budget
        bitmap = _Budget("bitmap", budget, 2 + 4 * ELEMENTS_PER_BEAT)
        index = _Budget("index", budget // 6, ELEMENTS_PER_BEAT)
        elements = _Budget("elements", MAX_N, ELEMENTS_PER_BEAT)
        budgets = (bitmap, index, elements)
        r8 = Signal(3)                      # n mod 8 of the frame after the decided beats
        # D's beat: its cost and n mod 8 after it (zero cost for other items)
        d_cost = [Signal(8, name="d_cost_bitmap", reset_less=True),
                  Signal(6, name="d_cost_index", reset_less=True),
                  Signal(6, name="d_cost_elements", reset_less=True)]
        d_r8 = Signal(3, name="d_r8_after", reset_less=True)
        pending_rest = Signal(_COUNT, reset_less=True)
        pending_rest_kept = Signal(_COUNT, reset_less=True)

        def step8(item):
            """What an item adds to ``n mod 8``: its element count if it is a beat."""
            return Mux(item.kind == PrepKind.PAYLOAD, item.v[:3], 0)

        def cost(item, residue):
            """The three costs of an item entering with ``n mod 8`` = ``residue``, and
            ``n mod 8`` after it."""
            is_beat = item.kind == PrepKind.PAYLOAD
            kept = item.suffix[0]
            step = Array(item.ceil8)[residue]
            return ([Mux(is_beat, Cat(step, kept), 0), Mux(is_beat, kept, 0),
                     Mux(is_beat, item.v, 0)],
                    _add_mod8(residue, step8(item)))

        # ---- the compares of F's beat (against S minus D's beat) ----------------------
        # (D's cost is zero, and d_r8 the frame's n mod 8, when D holds no beat)
        d_beat = d_valid & (d.kind == PrepKind.PAYLOAD)
        f_residue = d_r8
        totals = d_cost
        big_b, neg_b = bitmap.reg_minus_limit >= totals[0], bitmap.reg < totals[0]
        # kept and element slacks: 64 or more is room for both beats whatever they hold;
        # below that, six bits of the difference are exact (its borrow: no room at all)
        index_low = Signal(7, name="index_low")
        elements_low = Signal(7, name="elements_low")
        m.d.comb += [index_low.eq(index.reg[:6] - totals[1]),
                     elements_low.eq(elements.reg[:6] - totals[2])]
        big_i = ~index.reg[-1] & (index.reg[6:] != 0)
        neg_i = index.reg[-1] | index_low[6]
        big_n = elements.reg[6:] != 0
        low_b = (bitmap.reg[:7] - totals[0][:7])[:7]
        low_i = index_low[:6]
        low_n = elements_low[:6]
        fit_b = Signal(ELEMENTS_PER_BEAT)
        fit_i = Signal(ELEMENTS_PER_BEAT)
        fit_n = Signal(ELEMENTS_PER_BEAT)
        for j in range(1, ELEMENTS_PER_BEAT + 1):
            cost_b = Cat(_ceil8_step(f_residue, j), f.prefix[j])
            m.d.comb += [
                fit_b[j - 1].eq(big_b | (~neg_b & (cost_b <= low_b))),
                fit_i[j - 1].eq(big_i | (~neg_i & (f.prefix[j] <= low_i))),
                fit_n[j - 1].eq(big_n | (~elements_low[6] & (Const(j, 6) <= low_n))),
            ]

        # ---- S, and the cost of the beat entering D -----------------------------------
        # n mod 8 before the beat that enters D now: after D's beat, when D decides it now
        # without a close (if D closes, that is repaired next cycle)
        d_leaves = d_fire & d_beat
        entering_residue = Signal(3)
        after_rest = pending_rest[:3]
        d_costs_true, d_r8_true = cost(d, after_rest)
        # the residue's two candidates, known early; the late d_leaves only selects
        residue_if_leaves = Signal(3)
        residue_if_stays = Signal(3)
        m.d.comb += [residue_if_leaves.eq(Mux(close_pending, d_r8_true, d_r8)),
                     residue_if_stays.eq(Mux(close_pending, after_rest, r8))]
        with m.If(close_pending):
            m.d.comb += entering_residue.eq(Mux(d_leaves, d_r8_true, after_rest))
            for budget_, rest_cost, dc in zip(budgets, [
                    Cat(((pending_rest + 7) >> 3)[:2], pending_rest_kept),
                    pending_rest_kept, pending_rest], d_costs_true, strict=True):
                budget_.load_fresh(m, rest_cost, dc, d_leaves)
            m.d.sync += r8.eq(entering_residue)
            # D's beat, if it stays, is reckoned again from the fresh frame
            with m.If(d_valid & ~d_fire):
                m.d.sync += [c.eq(v) for c, v in zip(d_cost, d_costs_true, strict=True)]
                m.d.sync += d_r8.eq(d_r8_true)
            with m.Else():
                m.d.sync += [c.eq(0) for c in d_cost]
                m.d.sync += d_r8.eq(entering_residue)
        with m.Else():
            m.d.comb += entering_residue.eq(Mux(d_leaves, d_r8, r8))
            with m.If(d_leaves):
                for budget_, dc in zip(budgets, d_cost, strict=True):
                    budget_.spend(m, dc)
                m.d.sync += r8.eq(d_r8)
            with m.If(d_fire):
                m.d.sync += [c.eq(0) for c in d_cost]      # D empties (unless a beat enters)
        with m.If(move):
            costs_if_leaves, _ = cost(f, residue_if_leaves)
            costs_if_stays, r8_if_stays = cost(f, residue_if_stays)
            # n mod 8 after F's beat when D's leaves: after the rest of a close, D's beat
            # and F's beat, the last two summed from registers beside the rest's
            r8_if_leaves = Mux(close_pending,
                               _add_mod8(after_rest, _add_mod8(step8(d), step8(f))),
                               _add_mod8(d_r8, step8(f)))
            f_costs = [Mux(d_leaves, a, b)
                       for a, b in zip(costs_if_leaves, costs_if_stays, strict=True)]
            f_r8 = Mux(d_leaves, r8_if_leaves, r8_if_stays)
            m.d.sync += [c.eq(v) for c, v in zip(d_cost, f_costs, strict=True)]
            m.d.sync += [d_r8.eq(f_r8),
                         d_fit_bitmap.eq(fit_b), d_fit_index.eq(fit_i), d_fit_n.eq(fit_n),
                         d_fit_known.eq(~close_pending & ~closes_now)]
        m.d.sync += [close_pending.eq(closes_now), pending_rest.eq(rest),
                     pending_rest_kept.eq(rest_kept)]


def _add_mod8(a, b):
    """``(a + b) mod 8`` of two 3-bit values as plain gates (:func:`add_bits`): a LUT per
    bit, no carry chain (a 3-bit adder mapped to a CARRY8 costs more than the sum)."""
    return Cat(*add_bits(list(a[:3]), list(b[:3]))[:3])


def _thermometer_count(bits):
    """How many of ``bits`` are set, for a thermometer (bit j set implies bit i for i < j):
    bit b of the count is an OR over the positions where the run of ones ends."""
    n = len(bits)
    ends = [bits[j] & (~bits[j + 1] if j + 1 < n else 1) for j in range(n)]   # count j+1
    return Cat(balanced_or([ends[j] for j in range(n) if (j + 1) >> b & 1])
               for b in range((n).bit_length()))


def _select_at_cut(fit, table):
    """``table[t]`` for ``t`` the count of the thermometer ``fit`` (``table`` has
    ``len(fit) + 1`` entries), as an AND-OR over the one-hot end of the run."""
    n = len(fit)
    ends = [~fit[0]] + [fit[j] & (~fit[j + 1] if j + 1 < n else 1) for j in range(n)]
    width = len(table[0])
    return Cat(balanced_or([ends[t] & table[t][b] for t in range(n + 1)]) for b in range(width))
