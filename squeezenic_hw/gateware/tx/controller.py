"""The TX lane's frame controller: bypass or encode, coalesce, and decide where wire frames close.

It sits after the :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`
and turns host frames into three streams, all in the order the reference
(:func:`squeezenic_hw.reference.lane.tx`) emits frames:

* ``jobs`` — payload beats for the :class:`~squeezenic_hw.gateware.codecs.bank.EncoderBank`,
  each tagged with a :class:`~squeezenic_hw.gateware.common.layouts.PackMeta` that tells
  the packer how many codes it carries, their width and where the open wire frame closes;
* ``desc`` — one descriptor per output frame for the
  :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`: a wire frame
  (``built = 1``) when it closes, or a bypassed frame (``built = 0``) when its header
  arrives;
* ``bypass`` — the beats of bypassed frames, unchanged.

Wire frames close (section 6, ``docs/frames.md``) when full, on a mismatch
(the next SqueezeNIC host frame has another coalescing key or is not
contiguous), after a host frame with ``flush``, after ``idle_timeout`` cycles
without a host frame, or when ``close`` is raised while no frame is arriving
(the reference's ``end``).

How it is built (:meth:`TxController.elaborate`): registers of the host frame being read
(``_HostFrame``) and of the open wire frame (``_WireFrame``); each cycle the job frame
(``_JobFrame``: the open frame, or a new one) and its sizing — dense room from the
capacity, or with ``threshold`` the keep bits, fit and size tables (``_Sizes``,
``_threshold_sizing``) — feed the close decision (``_Decision``, ``_close_decision``);
the states ``IDLE`` (``_idle_state``: idle/``close`` closes, bypass, headers and
mismatch closes) and ``PAYLOAD`` (``_payload_state``: jobs and close descriptors) drive
the outputs.
"""

from types import SimpleNamespace

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import bank_meta_layout, codec_widths
from squeezenic_hw.gateware.codecs.unit import CodecParams, encoder_input_layout
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    PackMeta,
    Reason,
    axis_signature,
    field_le,
    header_bytes,
    token_tag_layout,
)
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat
from squeezenic_hw.gateware.lane.control import (
    bypass_and_drain_states,
    bypass_first_beat,
    code_width_of,
    codec_params_of,
)
from squeezenic_hw.gateware.lane.header_builder import header_request_layout
from squeezenic_hw.gateware.sparse.frame_builder import SPARSE_MIN_MTU
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import TX_COUNTERS
from squeezenic_hw.spec.frames import TX_REASONS
from squeezenic_hw.spec.header import (
    DEFAULT_MTU,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HDR,
    HEADER_LEN,
    MAX_PKT_LEN,
)
from squeezenic_hw.spec.threshold import MAX_N

__all__ = ["TxController", "tx_counters_layout"]



def tx_counters_layout():
    return data.StructLayout({name: unsigned(32) for name in TX_COUNTERS})


def _popcount(bits):
    """Sum of one-bit values as a balanced adder tree (depth log2 n, not n)."""
    terms = list(bits)
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def _keep_key(hdr):
    """The coalescing key of a header (section 6): addresses, ports, codec, param,
    ``stochastic``, scale, aux and seed."""
    fields = [HDR.DST_MAC, HDR.SRC_MAC, HDR.SRC_IP, HDR.DST_IP, HDR.UDP_SRC, HDR.UDP_DST,
              HDR.CODEC, HDR.PARAM]
    return Cat(*[header_bytes(hdr, *f) for f in fields], stochastic_flag(hdr),
               *[header_bytes(hdr, *f) for f in (HDR.SCALE, HDR.AUX, HDR.SEED)])


def stochastic_flag(hdr):
    """The ``stochastic`` bit of a header's flags."""
    return field_le(hdr, *HDR.FLAGS)[FLAG_STOCHASTIC.bit_length() - 1]


class _HostFrame:
    """Registers of the host frame being cut into jobs."""

    def __init__(self):
        self.hdr = Signal(512, name="cur_hdr")
        self.src = Signal(16, name="cur_src")
        self.dst = Signal(16, name="cur_dst")
        self.offset = Signal(32, name="cur_offset")   # tensor index of its next element
        self.left = Signal(16, name="cur_left")       # its elements not yet sent as jobs
        self.flush = Signal(name="cur_flush")
        self.codec = Signal(3, name="cur_codec")
        self.params = Signal(CodecParams, name="cur_params")
        self.width = Signal(6, name="cur_width")
        self.cap = Signal(16, name="cur_cap")
        self.sparse = Signal(name="cur_sparse")       # threshold: size depends on the data
        # elements of the current input beat already sent
        self.shift = Signal(range(ELEMENTS_PER_BEAT), name="shift")
        self.pad = Signal(name="pad")                 # truncated frame: zeros, consume nothing


class _WireFrame:
    """Registers of the open wire frame: the header it was opened with, where it starts,
    how many elements (and, threshold, kept elements) it holds."""

    def __init__(self):
        self.is_open = Signal(name="is_open")
        self.hdr = Signal(512, name="open_hdr")
        self.src = Signal(16, name="open_src")
        self.dst = Signal(16, name="open_dst")
        self.offset = Signal(32, name="open_offset")
        self.n = Signal(16, name="open_n")
        self.k = Signal(16, name="open_k")


class _JobFrame:
    """The wire frame this cycle's job adds to: the open one, or else a new one with the
    current host frame's header (then it holds nothing yet)."""

    def __init__(self, cur, wire):
        self.n = Mux(wire.is_open, wire.n, 0)
        self.k = Mux(wire.is_open, wire.k, 0)
        self.hdr = Mux(wire.is_open, wire.hdr, cur.hdr)
        self.offset = Mux(wire.is_open, wire.offset, cur.offset)
        self.src = Mux(wire.is_open, wire.src, cur.src)
        self.dst = Mux(wire.is_open, wire.dst, cur.dst)


class _Sizes:
    """What the frame closing this cycle would be, for j = 0…16 elements of the job taken
    into it: dense size, threshold layout and size, kept elements before j; and the
    threshold layout of the frame that closes this cycle."""

    def __init__(self):
        beats = range(ELEMENTS_PER_BEAT + 1)
        self.ranks = [Signal(5, name=f"kept_before{j}") for j in beats]
        self.sparse_layout = [Signal(name=f"sparse_layout{j}") for j in beats]
        self.sparse_size = [Signal(16, name=f"sparse_size{j}") for j in beats]
        self.dense_size = [Signal(16, name=f"dense_size{j}") for j in beats]
        self.close_layout = Signal(name="close_layout")


class _Decision:
    """The job of this cycle: how many of the beat's elements it carries, how many go into
    the open frame, and whether a frame closes in the middle or at its end."""

    def __init__(self):
        self.take = Signal(range(ELEMENTS_PER_BEAT + 1), name="take")  # into the open frame
        self.count = Signal(range(ELEMENTS_PER_BEAT + 1), name="count")   # codes in the job
        self.close_mid = Signal(name="close_mid")
        self.close_end = Signal(name="close_end")
        self.beat_done = Signal(name="beat_done")   # the job finishes the input beat
        self.all_fit = Signal(name="all_fit")       # every element goes into the open frame
        self.exact_fit = Signal(name="exact_fit")   # and fills it (dense: a full close)
        self.rest_fits = Signal(name="rest_fits")   # the rest of the beat fits a new frame

    @property
    def closes(self):
        return self.close_mid | self.close_end


class TxController(wiring.Component):
    """Frame controller of the TX lane (see the module docstring).

    Parameters
    ----------
    codecs : iterable of str or int, optional
        Codecs built into the lane (default 0–6); sets the code widths.
    mtu : int
        Largest wire frame in bytes (68…9600): a wire frame holds at most
        ``min(65535, ⌊(mtu − 64)·8 / b⌋)`` codes of ``b`` bits.
    idle_timeout : int or None
        Close the open wire frame after this many cycles without a host frame
        (counted from the cycle after the last beat of the last host frame put
        in it, as the reference counts); ``None``: never. The port
        ``cfg_idle_timeout`` (init this value, 0 = never) sets it at run time.

    Latency: a header or payload beat is turned into its outputs in the cycle
    it is accepted (combinational; the blocks around it register).
    Throughput: one input beat per cycle. A beat costs a second cycle only when
    it closes two wire frames (a straddling host frame whose last beat also
    ends in ``flush``, or wire frames of fewer than 16 codes); a header beat
    that closes a frame on mismatch costs nothing extra. Idle/``close``
    closes take a cycle with no input.
    Backpressure: a beat is accepted only when every output it needs is ready;
    nothing is dropped. Frames whose beats end before ``tuser_size`` says are
    padded with zero elements, extra beats are discarded; both count in
    ``size_errors`` (OpenNIC's ``tuser_size`` is always right, so this guards
    against broken producers, not a normal case).
    """

    def __init__(self, *, codecs=None, mtu=DEFAULT_MTU, idle_timeout=None):
        if not HEADER_LEN + 4 <= mtu <= MAX_PKT_LEN:
            raise ValueError(f"mtu must be from {HEADER_LEN + 4} to {MAX_PKT_LEN} bytes, "
                             f"got {mtu!r}")
        if idle_timeout is not None and not 1 <= idle_timeout < 2**32:
            raise ValueError(f"idle_timeout must be None or 1…2**32-1 cycles, "
                             f"got {idle_timeout!r}")
        self._codecs = sorted(resolve_codecs(codecs))
        self._sparse = THRESHOLD_ID in self._codecs
        if self._sparse and mtu < SPARSE_MIN_MTU:
            raise ValueError(f"mtu must be at least {SPARSE_MIN_MTU} bytes with threshold "
                             f"built in (16 kept values per wire frame), got {mtu!r}")
        self._widths = sorted(codec_widths(self._codecs)) or [32]
        self._mtu = mtu
        self._idle_timeout = idle_timeout
        job = encoder_input_layout(bank_meta_layout(PackMeta))
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "jobs": Out(stream.Signature(job)),
            "desc": Out(stream.Signature(header_request_layout(token_tag_layout()))),
            "bypass": Out(axis_signature()),
            "close": In(1),
            # ``close`` was acted on this cycle (the open frame closed, or none was open)
            "close_done": Out(1),
            "counters": Out(tx_counters_layout()),
            # run-time idle timeout (a plugin register); undriven it is the constant
            "cfg_idle_timeout": In(32, init=idle_timeout or 0),
        })

    def capacity(self, width):
        """Codes per wire frame for a code width (an int)."""
        return min(MAX_N, (self._mtu - HEADER_LEN) * 8 // width)

    def elaborate(self, platform):
        m = Module()
        cur, wire, sizes, decision = _HostFrame(), _WireFrame(), _Sizes(), _Decision()
        hdr = self.i.payload.beat.data
        header = self._incoming_header(m, hdr)
        matches = (_keep_key(hdr) == _keep_key(wire.hdr)) & (header.offset == cur.offset)
        idle_due, frame_ended = self._idle_timer(m)

        # The elements of the current beat this job can carry: v of them from `shift` on.
        elements = Signal(512)
        m.d.comb += elements.eq(Mux(cur.pad, 0, hdr) >> Cat(Const(0, 5), cur.shift))
        avail = Signal(range(ELEMENTS_PER_BEAT + 1))
        m.d.comb += avail.eq(ELEMENTS_PER_BEAT - cur.shift)
        v = Signal(range(ELEMENTS_PER_BEAT + 1))
        m.d.comb += v.eq(Mux(cur.left < avail, cur.left, avail))
        frame = _JobFrame(cur, wire)

        # How many of the v elements the open frame takes: the dense room, or with
        # threshold the count of elements that still fit under either layout.
        room = Signal(17)
        dense_room = Signal(17)
        m.d.comb += dense_room.eq(cur.cap - frame.n)
        kept = Signal(16)          # threshold: keep bits of this beat's v elements
        if self._sparse:
            sparse_all_fit, fitting = self._threshold_sizing(m, cur, frame, kept, v, sizes)
            # All v fit: no close (a threshold frame closes only when an element does
            # not fit, or on flush/mismatch/idle/end), so room must exceed v.
            m.d.comb += room.eq(Mux(cur.sparse, Mux(sparse_all_fit, ELEMENTS_PER_BEAT + 1,
                                                    fitting),
                                    dense_room))
        else:
            sparse_all_fit = None
            m.d.comb += room.eq(cur.cap - frame.n)
        ends_frame = v == cur.left
        self._close_decision(m, decision, cur, v, room, dense_room, sparse_all_fit,
                             ends_frame & cur.flush)
        self._job_payload(m, decision, cur, frame, elements, kept, sizes)

        with m.FSM(name="tx_ctrl"):
            with m.State("IDLE"):
                self._idle_state(m, cur, wire, sizes, header, matches, idle_due)
            with m.State("PAYLOAD"):
                self._payload_state(m, cur, wire, frame, sizes, decision, ends_frame,
                                    frame_ended)
            bypass_and_drain_states(m, self.i, self.bypass)
        return m

    # ---- inputs: the incoming header and the idle timer --------------------------------

    def _incoming_header(self, m, hdr):
        """The fields of a header beat the controller reads, its code width and capacity."""
        header = SimpleNamespace(
            codec=field_le(hdr, *HDR.CODEC),
            param=field_le(hdr, *HDR.PARAM),
            flags=field_le(hdr, *HDR.FLAGS),
            n=field_le(hdr, *HDR.N),
            offset=field_le(hdr, *HDR.OFFSET),
            width=Signal(6, name="h_width"),
            cap=Signal(16, name="h_cap"),
        )
        m.d.comb += header.width.eq(code_width_of(header.codec, header.param))
        with m.Switch(header.width):
            for w in self._widths:
                with m.Case(w):
                    m.d.comb += header.cap.eq(self.capacity(w))
        return header

    def _idle_timer(self, m):
        """``(idle_due, frame_ended)``: the open frame is due to close for idleness; the
        last job of a host frame fires this cycle (drive it: it restarts the count)."""
        idle_due = Signal()
        since = Signal(32)
        frame_ended = Signal()
        timeout = self.cfg_idle_timeout    # 0: never
        with m.If(frame_ended):
            m.d.sync += since.eq(0)
        with m.Elif(since != 2**32 - 1):
            m.d.sync += since.eq(since + 1)
        # Close one cycle early when no header is waiting, so that the close
        # never delays a header that arrives exactly ``idle_timeout`` cycles late
        # (the delay would shift that frame's own idle count by one).
        # ``a >= b`` as the sign bit of a − b: with the timeout left at a constant 0 a
        # compare would become ``since >= 0``, which Verilator's lint rejects.
        late = Signal(34, name="idle_late")        # since − timeout, two's complement
        late_soon = Signal(34, name="idle_late_soon")
        m.d.comb += [late.eq(since - timeout), late_soon.eq(since + 1 - timeout)]
        m.d.comb += idle_due.eq((timeout != 0)
                                & (~late[-1] | (~late_soon[-1] & ~self.i.valid)))
        return idle_due, frame_ended

    # ---- sizing ------------------------------------------------------------------------

    def _threshold_sizing(self, m, cur, frame, kept, v, sizes):
        """threshold: the keep bits of the job, the size tables over j, and the fit.

        Returns ``(all_fit, fitting)``: all v elements fit the open frame; how many do.
        Also fills the dense size table, which with threshold built in replaces the
        multiplier after ``take`` (which comes late, after the fit logic)."""
        # the first v elements, as a thermometer of compares (no carry chain)
        first_v = Cat(*[Const(e, 5) < v for e in range(ELEMENTS_PER_BEAT)])
        m.d.comb += kept.eq((self.i.payload.keep >> cur.shift) & first_v)
        fit = self._sparse_tables(m, frame.n, frame.k, kept, v, sizes.ranks,
                                  sizes.sparse_layout, sizes.sparse_size)
        n_bits = Signal(22, name="open_bits")        # registers only: early
        m.d.comb += n_bits.eq(frame.n * cur.width)
        for j, size_j in enumerate(sizes.dense_size):
            m.d.comb += size_j.eq(HEADER_LEN + ((n_bits + j * cur.width + 7) >> 3))
        fitting = Signal(range(ELEMENTS_PER_BEAT + 1))
        m.d.comb += fitting.eq(_popcount(fit))
        # fit is a thermometer (fits_j implies fits_i for i < j, and is 0 past v), so
        # "all v fit" is one bit of it: a mux, not the count and a compare
        all_fit = Signal(name="sparse_all_fit")
        m.d.comb += all_fit.eq(Array(fit)[v - 1])
        return all_fit, fitting

    def _sparse_tables(self, m, eff_n, eff_k, kept, v, ranks, lay, size):
        """threshold: for every j = 0…16 (elements of this job taken into the open frame),
        ``ranks[j]`` = kept among them, ``lay[j]``/``size[j]`` = the frame's layout and size
        if it closed after them; returns ``fit`` (j = 1…16: those j elements fit).

        The frame's own n and k enter only through a few registers-only sums (its slack
        under either layout), and each j adds small numbers, so the path from the keep
        bits stays short: ⌈(n+j)/8⌉ = ⌈n/8⌉ + d_j with d_j from n mod 8.
        """
        budget = self._mtu - HEADER_LEN
        r = eff_n[:3]
        bm = Signal(14, name="sparse_bitmap_bytes")          # ⌈n/8⌉
        s_bitmap = Signal(signed(20), name="sparse_slack_bitmap")   # B − ⌈n/8⌉ − 4k
        s_index = Signal(signed(20), name="sparse_slack_index")     # B − 6k
        s_n = Signal(17, name="sparse_slack_n")                     # 65535 − n
        e = Signal(signed(18), name="sparse_bitmap_minus_index")    # ⌈n/8⌉ − 2k
        m.d.comb += [
            bm.eq((eff_n + 7) >> 3),
            s_bitmap.eq(budget - bm - (eff_k << 2)),
            s_index.eq(budget - (eff_k << 2) - (eff_k << 1)),
            s_n.eq(MAX_N - eff_n),
            e.eq(bm - (eff_k << 1)),
        ]
        fit = []
        for j in range(ELEMENTS_PER_BEAT + 1):
            if j:
                # ranks as independent balanced popcounts (no chain through 16 adders)
                m.d.comb += ranks[j].eq(_popcount([kept[i] for i in range(j)]))
            d = Signal(3, name=f"sparse_d{j}")    # ⌈(n+j)/8⌉ − ⌈n/8⌉
            m.d.comb += d.eq(((r + j + 7) >> 3) - (r != 0))
            k4 = ranks[j] << 2
            m.d.comb += lay[j].eq(e > (ranks[j] << 1) - d)   # 2k < ⌈n/8⌉ after j
            k_j = eff_k + ranks[j]
            m.d.comb += size[j].eq(HEADER_LEN + (k_j << 2) + Mux(lay[j], k_j << 1, bm + d))
            if j:
                f = Signal(name=f"fits{j}")
                m.d.comb += f.eq(((d + k4 <= s_bitmap) | ((k4 + (ranks[j] << 1)) <= s_index))
                                 & (j <= s_n) & (j <= v))
                fit.append(f)
        return fit

    # ---- the close decision and the job ------------------------------------------------

    def _close_decision(self, m, decision, cur, v, room, dense_room, sparse_all_fit,
                        flush_end):
        """How many elements the job carries and takes into the open frame, and where a
        frame closes. Each branch condition comes from the fast (register-based) dense room
        or the late threshold fit, not from their mux: ``room`` itself is only a count."""
        d = decision
        if self._sparse:
            m.d.comb += [
                d.all_fit.eq(Mux(cur.sparse, sparse_all_fit, v < dense_room)),
                d.exact_fit.eq(~cur.sparse & (v == dense_room)),
                d.rest_fits.eq(cur.sparse | ((v - dense_room) < cur.cap)),
            ]
        else:
            m.d.comb += [d.all_fit.eq(v < room), d.exact_fit.eq(v == room),
                         d.rest_fits.eq((v - room) < cur.cap)]
        with m.If(d.all_fit):
            m.d.comb += [d.take.eq(v), d.count.eq(v), d.close_end.eq(flush_end),
                         d.beat_done.eq(1)]
        with m.Elif(d.exact_fit):
            m.d.comb += [d.take.eq(v), d.count.eq(v), d.close_end.eq(1), d.beat_done.eq(1)]
        # (threshold: room can be 0, the first element of the beat does not fit; the
        # job then closes the frame with none of its elements, split = 0, and opens
        # the next one with all of them: no extra cycle)
        with m.Elif(d.rest_fits & ~flush_end):
            m.d.comb += [d.take.eq(room), d.count.eq(v), d.close_mid.eq(1),
                         d.beat_done.eq(1)]
        with m.Else():
            # The rest of the beat closes another frame: send it next cycle.
            m.d.comb += [d.take.eq(room), d.count.eq(room), d.close_end.eq(1)]

    def _job_payload(self, m, decision, cur, frame, elements, kept, sizes):
        """The ``jobs`` payload of a payload beat (valid is driven by the FSM)."""
        user = self.jobs.payload.meta.user
        count_mask = (Const(1, ELEMENTS_PER_BEAT + 1) << decision.count) - 1
        m.d.comb += [
            self.jobs.payload.elements.as_value().eq(elements),
            self.jobs.payload.valid.eq(count_mask),
            self.jobs.payload.offset.eq(cur.offset),
            self.jobs.payload.params.eq(cur.params),
            self.jobs.payload.meta.codec.eq(cur.codec),
            user.width.eq(cur.width),
            user.count.eq(decision.count),
            user.split.eq(decision.take),
            user.close_mid.eq(decision.close_mid),
            user.close_end.eq(decision.close_end),
            user.keep.eq(kept & count_mask),
            user.base.eq(frame.n),
            user.layout.eq(sizes.close_layout),
        ]

    def _close_only_job(self, cur, wire, sizes):
        """A job with no codes that only closes the open frame (its width for the size)."""
        user = self.jobs.payload.meta.user
        return [
            self.jobs.valid.eq(1),
            self.jobs.payload.valid.eq(0),
            self.jobs.payload.meta.codec.eq(cur.codec),
            user.width.eq(cur.width),
            user.count.eq(0),
            user.split.eq(0),
            user.close_mid.eq(0),
            user.close_end.eq(1),
            user.layout.eq(sizes.close_layout),
            user.base.eq(wire.n),
        ]

    def _close_descriptor(self, m, cur, sizes, template, offset, n, flush, src, dst, at=0):
        """The descriptor of the wire frame closing after element ``at`` of the job."""
        desc = self.desc
        size = Signal(16, name="close_size")
        dense_size = HEADER_LEN + ((n * cur.width + 7) >> 3)
        if self._sparse:
            def at_j(table):
                return table[at] if isinstance(at, int) else Array(table)[at]
            # the dense size too from a table over j: no multiplier after `take`,
            # which with threshold built in comes late (after the fit logic)
            dense_size = at_j(sizes.dense_size)
            # threshold: the shorter of bitmap ⌈n/8⌉ and index list 2k, then 4k values;
            # the layout goes into the header's codec parameter
            layout = at_j(sizes.sparse_layout)
            m.d.comb += [size.eq(Mux(cur.sparse, at_j(sizes.sparse_size), dense_size)),
                         sizes.close_layout.eq(layout)]
            p0, plen = HDR.PARAM
            template = Mux(cur.sparse,
                           Cat(template[:8 * p0], layout, Const(0, 7),
                               template[8 * (p0 + plen):]),
                           template)
        else:
            m.d.comb += size.eq(dense_size)
        flags = Cat(Const(1, 1), stochastic_flag(template), flush, Const(0, 5))
        return [
            desc.valid.eq(1),
            desc.payload.template.eq(template),
            desc.payload.size.eq(size),
            desc.payload.n.eq(n),
            desc.payload.offset.eq(offset),
            desc.payload.flags.eq(flags),
            desc.payload.tag.built.eq(1),
            desc.payload.tag.size.eq(size),
            desc.payload.tag.src.eq(src),
            desc.payload.tag.dst.eq(dst),
        ]

    def _bump(self, m, name, amount=1):
        field = self.counters[name]
        m.d.sync += field.eq(field + amount)

    # ---- the states --------------------------------------------------------------------

    def _idle_state(self, m, cur, wire, sizes, header, matches, idle_due):
        """Between host frames: close the open frame (idle, ``close``), bypass a frame, or
        take a header (closing the open frame first on a mismatch)."""
        i, jobs, desc = self.i, self.jobs, self.desc
        beat = i.payload.beat
        hdr = beat.data

        def bump(name, amount=1):
            self._bump(m, name, amount)

        def close_open_frame():
            m.d.comb += self._close_only_job(cur, wire, sizes)
            m.d.comb += self._close_descriptor(m, cur, sizes, wire.hdr, wire.offset, wire.n,
                                               0, wire.src, wire.dst)
            m.d.comb += [jobs.valid.eq(desc.ready), desc.valid.eq(jobs.ready)]

        m.d.comb += self.close_done.eq(self.close & ~i.valid & ~wire.is_open)
        with m.If(wire.is_open & (idle_due | (self.close & ~i.valid))):
            close_open_frame()
            with m.If(jobs.ready & desc.ready):
                m.d.sync += wire.is_open.eq(0)
                m.d.comb += self.close_done.eq(self.close & ~i.valid)
                bump("wire_frames")
                with m.If(idle_due):
                    bump("close_idle")
                with m.Else():
                    bump("close_end")
        with m.Elif(i.valid & (i.payload.reason != Reason.NONE)):
            # Bypass: a token now (order), the frame's beats to the bypass FIFO.
            bypass_first_beat(m, i, desc, self.bypass, built=desc.payload.tag.built,
                              size=desc.payload.tag.size, reasons=TX_REASONS, bump=bump)
        with m.Elif(i.valid):
            mismatch = wire.is_open & ~matches
            with m.If(mismatch):
                close_open_frame()
            ok = ~mismatch | (jobs.ready & desc.ready)
            m.d.comb += i.ready.eq(ok)
            with m.If(ok):
                with m.If(mismatch):
                    m.d.sync += wire.is_open.eq(0)
                    bump("wire_frames")
                    bump("close_mismatch")
                bump("host_frames")
                bump("elements", header.n)
                sparse = header.codec == THRESHOLD_ID
                m.d.sync += [
                    cur.hdr.eq(hdr),
                    cur.src.eq(beat.src),
                    cur.dst.eq(beat.dst),
                    cur.offset.eq(header.offset),
                    cur.left.eq(header.n),
                    cur.flush.eq(header.flags[FLAG_FLUSH.bit_length() - 1]),
                    cur.codec.eq(header.codec),
                    *codec_params_of(cur.params, hdr),
                    cur.width.eq(header.width),
                    cur.cap.eq(Mux(sparse, MAX_N, header.cap)),
                    cur.sparse.eq(sparse),
                    cur.shift.eq(0),
                    cur.pad.eq(beat.last),
                ]
                with m.If(beat.last):
                    bump("size_errors")
                m.next = "PAYLOAD"

    def _payload_state(self, m, cur, wire, frame, sizes, decision, ends_frame, frame_ended):
        """A host frame's payload beats: one job per cycle, a descriptor when it closes a
        wire frame; the rest of a beat opens the next frame."""
        i, jobs, desc = self.i, self.jobs, self.desc
        d = decision
        beat = i.payload.beat

        def bump(name, amount=1):
            self._bump(m, name, amount)

        # tuser_size says where the frame ends; the beats may disagree.
        early_end = beat.last & ~cur.pad & d.beat_done & ~ends_frame
        late_end = ~beat.last & ~cur.pad & d.beat_done & ends_frame
        have = i.valid | cur.pad
        m.d.comb += jobs.valid.eq(have & (~d.closes | desc.ready))
        with m.If(d.closes):
            n_closed = Signal(16)
            m.d.comb += n_closed.eq(frame.n + d.take)
            # flush only on the frame that carries the host frame's last element
            m.d.comb += self._close_descriptor(
                m, cur, sizes, frame.hdr, frame.offset, n_closed,
                d.close_end & cur.flush & (d.count == cur.left), frame.src, frame.dst,
                d.take)
            m.d.comb += desc.valid.eq(have & jobs.ready)
        fire = have & jobs.ready & (~d.closes | desc.ready)
        m.d.comb += i.ready.eq(fire & d.beat_done & ~cur.pad)
        with m.If(fire):
            m.d.sync += [
                cur.offset.eq(cur.offset + d.count),
                cur.left.eq(cur.left - d.count),
            ]
            ranks = Array(sizes.ranks)
            with m.If(d.close_mid):
                # The rest of the beat opens the next wire frame.
                m.d.sync += [
                    wire.is_open.eq(1),
                    wire.hdr.eq(cur.hdr),
                    wire.src.eq(cur.src),
                    wire.dst.eq(cur.dst),
                    wire.offset.eq(cur.offset + d.take),
                    wire.n.eq(d.count - d.take),
                    wire.k.eq(ranks[d.count] - ranks[d.take]),
                ]
            with m.Elif(d.close_end):
                m.d.sync += wire.is_open.eq(0)
            with m.Else():
                m.d.sync += [
                    wire.is_open.eq(1),
                    wire.hdr.eq(frame.hdr),
                    wire.src.eq(frame.src),
                    wire.dst.eq(frame.dst),
                    wire.offset.eq(frame.offset),
                    wire.n.eq(frame.n + d.count),
                    wire.k.eq(frame.k + ranks[d.count]),
                ]
            with m.If(d.closes):
                bump("wire_frames")
                with m.If(~d.all_fit):
                    bump("close_full")
                with m.Else():
                    bump("close_flush")
            with m.If(d.beat_done):
                m.d.sync += cur.shift.eq(0)
            with m.Else():
                m.d.sync += cur.shift.eq(cur.shift + d.count)
            with m.If(early_end):
                bump("size_errors")
                m.d.sync += cur.pad.eq(1)
            with m.If(d.beat_done & ends_frame):
                m.d.comb += frame_ended.eq(1)
                m.d.sync += cur.pad.eq(0)
                with m.If(late_end):
                    bump("size_errors")
                    m.next = "DRAIN"
                with m.Else():
                    m.next = "IDLE"
