"""The TX lane's frame controller: bypass or encode, coalesce, and decide where wire frames close.

It sits after the :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`
and turns host frames into three streams, all in the order the reference
(:func:`squeezenic_hw.reference.lane.tx`) emits frames:

* ``jobs`` — payload beats for the :class:`~.codec_bank.EncoderBank`, each
  tagged with a :class:`~.lane_layouts.PackMeta` that tells the packer how
  many codes it carries, their width and where the open wire frame closes;
* ``desc`` — one descriptor per output frame for the
  :class:`~.header_builder.HeaderBuilder`: a wire frame (``built = 1``) when it
  closes, or a bypassed frame (``built = 0``) when its header arrives;
* ``bypass`` — the beats of bypassed frames, unchanged.

Wire frames close (section 6, ``docs/frames.md``) when full, on a mismatch
(the next SqueezeNIC host frame has another coalescing key or is not
contiguous), after a host frame with ``flush``, after ``idle_timeout`` cycles
without a host frame, or when ``close`` is raised while no frame is arriving
(the reference's ``end``).
"""

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
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import TX_COUNTERS
from squeezenic_hw.spec.frames import TX_REASONS
from squeezenic_hw.spec.header import DEFAULT_MTU, HDR, HEADER_LEN, MAX_PKT_LEN

__all__ = ["TxController", "tx_counters_layout"]

_MAX_N = 2**16 - 1
#: Smallest MTU with ``threshold`` built in: 16 kept values (a whole beat) fit one frame.
SPARSE_MIN_MTU = HEADER_LEN + 2 + 4 * 16


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
    b = lambda start, length: hdr[8 * start:8 * (start + length)]  # noqa: E731
    return Cat(b(0, 12), b(26, 12), b(43, 2), hdr[8 * 45 + 1], b(48, 12))


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
        return min(_MAX_N, (self._mtu - HEADER_LEN) * 8 // width)

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
            s_n.eq(_MAX_N - eff_n),
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

    def elaborate(self, platform):
        m = Module()
        beat = self.i.payload.beat
        reason = self.i.payload.reason
        hdr = beat.data

        # ---- the current host frame ---------------------------------------------
        cur_hdr = Signal(512)
        cur_src = Signal(16)
        cur_dst = Signal(16)
        cur_offset = Signal(32)    # tensor index of its next element
        cur_left = Signal(16)      # its elements not yet sent as jobs
        cur_flush = Signal()
        cur_codec = Signal(3)
        cur_params = Signal(CodecParams)
        cur_width = Signal(6)
        cur_cap = Signal(16)
        cur_sparse = Signal()      # threshold: size depends on the kept elements
        shift = Signal(range(ELEMENTS_PER_BEAT))  # elements of this beat already sent
        pad = Signal()             # truncated frame: send zeros, consume nothing

        # ---- the open wire frame ------------------------------------------------
        is_open = Signal()
        o_hdr = Signal(512)
        o_src = Signal(16)
        o_dst = Signal(16)
        o_offset = Signal(32)
        o_n = Signal(16)
        o_k = Signal(16)           # threshold: kept elements in it

        counters = self.counters
        jobs, desc, byp = self.jobs, self.desc, self.bypass

        # Header fields of the incoming beat.
        h_codec = field_le(hdr, *HDR.CODEC)
        h_param = field_le(hdr, *HDR.PARAM)
        h_flags = field_le(hdr, *HDR.FLAGS)
        h_n = field_le(hdr, *HDR.N)
        h_offset = field_le(hdr, *HDR.OFFSET)
        h_width = Signal(6)
        m.d.comb += h_width.eq(code_width_of(h_codec, h_param))
        h_cap = Signal(16)
        with m.Switch(h_width):
            for w in self._widths:
                with m.Case(w):
                    m.d.comb += h_cap.eq(self.capacity(w))
        matches = (_keep_key(hdr) == _keep_key(o_hdr)) & (h_offset == cur_offset)

        # ---- idle timer -----------------------------------------------------------
        idle_due = Signal()
        since = Signal(32)
        frame_ended = Signal()     # the last job of a host frame fires this cycle
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

        # ---- wire descriptors for a closing frame ----------------------------------
        def close_desc(template, offset, n, flush, src, dst, at=0):
            """The descriptor of the frame closing after element ``at`` of the job."""
            size = Signal(16, name="close_size")
            bits = n * cur_width
            dense_size = HEADER_LEN + ((bits + 7) >> 3)
            if self._sparse:
                # the dense size too from a table over j: no multiplier after `take`,
                # which with threshold built in comes late (after the fit logic)
                dense_size = (Array(dense_size_at)[at] if not isinstance(at, int)
                              else dense_size_at[at])
                # threshold: the shorter of bitmap ⌈n/8⌉ and index list 2k, then 4k values;
                # the layout goes into the header's codec parameter
                layout = Array(sparse_lay)[at] if not isinstance(at, int) else sparse_lay[at]
                sparse_size = (Array(sparse_size_at)[at] if not isinstance(at, int)
                               else sparse_size_at[at])
                m.d.comb += [size.eq(Mux(cur_sparse, sparse_size, dense_size)),
                             close_layout.eq(layout)]
                p0, plen = HDR.PARAM
                template = Mux(cur_sparse,
                               Cat(template[:8 * p0], layout, Const(0, 7),
                                   template[8 * (p0 + plen):]),
                               template)
            else:
                m.d.comb += size.eq(dense_size)
            flags = Cat(Const(1, 1), field_le(template, *HDR.FLAGS)[1], flush, Const(0, 5))
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

        close_layout = Signal()    # layout of the frame closing this cycle (threshold)

        def bump(name, amount=1):
            field = counters[name]
            m.d.sync += field.eq(field + amount)

        def close_only_job():
            # No codes, just "close the open frame" (its width for the size).
            return [
                jobs.valid.eq(1),
                jobs.payload.valid.eq(0),
                jobs.payload.meta.codec.eq(cur_codec),
                jobs.payload.meta.user.width.eq(cur_width),
                jobs.payload.meta.user.count.eq(0),
                jobs.payload.meta.user.split.eq(0),
                jobs.payload.meta.user.close_mid.eq(0),
                jobs.payload.meta.user.close_end.eq(1),
                jobs.payload.meta.user.layout.eq(close_layout),
                jobs.payload.meta.user.base.eq(o_n),
            ]

        # ---- the job of a payload beat (PAYLOAD state) -----------------------------
        elements = Signal(512)
        m.d.comb += elements.eq(Mux(pad, 0, hdr) >> Cat(Const(0, 5), shift))
        avail = Signal(range(ELEMENTS_PER_BEAT + 1))
        m.d.comb += avail.eq(ELEMENTS_PER_BEAT - shift)
        v = Signal(range(ELEMENTS_PER_BEAT + 1))
        m.d.comb += v.eq(Mux(cur_left < avail, cur_left, avail))
        eff_n = Mux(is_open, o_n, 0)
        eff_hdr = Mux(is_open, o_hdr, cur_hdr)
        eff_offset = Mux(is_open, o_offset, cur_offset)
        eff_src = Mux(is_open, o_src, cur_src)
        eff_dst = Mux(is_open, o_dst, cur_dst)
        room = Signal(17)
        dense_room = Signal(17)
        m.d.comb += dense_room.eq(cur_cap - eff_n)
        eff_k = Mux(is_open, o_k, 0)
        kept = Signal(16)          # threshold: keep bits of this beat's v elements
        ranks = [Signal(5, name=f"kept_before{j}") for j in range(ELEMENTS_PER_BEAT + 1)]
        sparse_lay = [Signal(name=f"sparse_layout{j}") for j in range(ELEMENTS_PER_BEAT + 1)]
        sparse_size_at = [Signal(16, name=f"sparse_size{j}")
                          for j in range(ELEMENTS_PER_BEAT + 1)]
        dense_size_at = [Signal(16, name=f"dense_size{j}")
                         for j in range(ELEMENTS_PER_BEAT + 1)]
        if self._sparse:
            # the first v elements, as a thermometer of compares (no carry chain)
            first_v = Cat(*[Const(e, 5) < v for e in range(ELEMENTS_PER_BEAT)])
            m.d.comb += kept.eq((self.i.payload.keep >> shift) & first_v)
            fit = self._sparse_tables(m, eff_n, eff_k, kept, v, ranks, sparse_lay,
                                      sparse_size_at)
            n_bits = Signal(22, name="open_bits")        # registers only: early
            m.d.comb += n_bits.eq(eff_n * cur_width)
            for j, size_j in enumerate(dense_size_at):
                m.d.comb += size_j.eq(HEADER_LEN + ((n_bits + j * cur_width + 7) >> 3))
            fitting = Signal(range(ELEMENTS_PER_BEAT + 1))
            m.d.comb += fitting.eq(_popcount(fit))
            # fit is a thermometer (fits_j implies fits_i for i < j, and is 0 past v), so
            # "all v fit" is one bit of it: a mux, not the count and a compare
            sparse_all_fit = Signal()
            m.d.comb += sparse_all_fit.eq(Array(fit)[v - 1])
            # All v fit: no close (a threshold frame closes only when an element does
            # not fit, or on flush/mismatch/idle/end), so room must exceed v.
            m.d.comb += room.eq(Mux(cur_sparse, Mux(sparse_all_fit, ELEMENTS_PER_BEAT + 1,
                                                    fitting),
                                    dense_room))
        else:
            m.d.comb += room.eq(cur_cap - eff_n)
        ends_frame = v == cur_left
        flush_end = ends_frame & cur_flush
        take = Signal(range(ELEMENTS_PER_BEAT + 1))   # codes into the frame open now
        count = Signal(range(ELEMENTS_PER_BEAT + 1))  # codes in this job
        close_mid = Signal()
        close_end = Signal()
        beat_done = Signal()       # the job finishes the current input beat
        # The branch conditions, each from the fast (register-based) dense room or the
        # late threshold fit count, not from their mux: `room` itself is only a count.
        all_fit = Signal()         # every element of the job goes into the open frame
        exact_fit = Signal()       # and fills it (dense codecs: a full close)
        rest_fits = Signal()       # the rest of the beat fits one new frame
        if self._sparse:
            m.d.comb += [
                all_fit.eq(Mux(cur_sparse, sparse_all_fit, v < dense_room)),
                exact_fit.eq(~cur_sparse & (v == dense_room)),
                rest_fits.eq(cur_sparse | ((v - dense_room) < cur_cap)),
            ]
        else:
            m.d.comb += [all_fit.eq(v < room), exact_fit.eq(v == room),
                         rest_fits.eq((v - room) < cur_cap)]
        with m.If(all_fit):
            m.d.comb += [take.eq(v), count.eq(v), close_end.eq(flush_end), beat_done.eq(1)]
        with m.Elif(exact_fit):
            m.d.comb += [take.eq(v), count.eq(v), close_end.eq(1), beat_done.eq(1)]
        # (threshold: room can be 0, the first element of the beat does not fit; the
        # job then closes the frame with none of its elements, split = 0, and opens
        # the next one with all of them: no extra cycle)
        with m.Elif(rest_fits & ~flush_end):
            m.d.comb += [take.eq(room), count.eq(v), close_mid.eq(1), beat_done.eq(1)]
        with m.Else():
            # The rest of the beat closes another frame: send it next cycle.
            m.d.comb += [take.eq(room), count.eq(room), close_end.eq(1)]
        closes = close_mid | close_end

        m.d.comb += [
            jobs.payload.elements.as_value().eq(elements),
            jobs.payload.valid.eq((Const(1, ELEMENTS_PER_BEAT + 1) << count) - 1),
            jobs.payload.offset.eq(cur_offset),
            jobs.payload.params.eq(cur_params),
            jobs.payload.meta.codec.eq(cur_codec),
            jobs.payload.meta.user.width.eq(cur_width),
            jobs.payload.meta.user.count.eq(count),
            jobs.payload.meta.user.split.eq(take),
            jobs.payload.meta.user.close_mid.eq(close_mid),
            jobs.payload.meta.user.close_end.eq(close_end),
            jobs.payload.meta.user.keep.eq(
                kept & ((Const(1, ELEMENTS_PER_BEAT + 1) << count) - 1)),
            jobs.payload.meta.user.base.eq(eff_n),
            jobs.payload.meta.user.layout.eq(close_layout),
        ]

        # tuser_size says where the frame ends; the beats may disagree.
        early_end = beat.last & ~pad & beat_done & ~ends_frame
        late_end = ~beat.last & ~pad & beat_done & ends_frame

        with m.FSM(name="tx_ctrl"):
            with m.State("IDLE"):
                m.d.comb += self.close_done.eq(self.close & ~self.i.valid & ~is_open)
                with m.If(is_open & (idle_due | (self.close & ~self.i.valid))):
                    m.d.comb += close_only_job()
                    m.d.comb += close_desc(o_hdr, o_offset, o_n, 0, o_src, o_dst)
                    m.d.comb += [jobs.valid.eq(desc.ready), desc.valid.eq(jobs.ready)]
                    with m.If(jobs.ready & desc.ready):
                        m.d.sync += is_open.eq(0)
                        m.d.comb += self.close_done.eq(self.close & ~self.i.valid)
                        bump("wire_frames")
                        with m.If(idle_due):
                            bump("close_idle")
                        with m.Else():
                            bump("close_end")
                with m.Elif(self.i.valid & (reason != Reason.NONE)):
                    # Bypass: a token now (order), the frame's beats to the bypass FIFO.
                    bypass_first_beat(m, self.i, desc, byp, built=desc.payload.tag.built,
                                      size=desc.payload.tag.size, reasons=TX_REASONS,
                                      bump=bump)
                with m.Elif(self.i.valid):
                    mismatch = is_open & ~matches
                    with m.If(mismatch):
                        m.d.comb += close_only_job()
                        m.d.comb += close_desc(o_hdr, o_offset, o_n, 0, o_src, o_dst)
                        m.d.comb += [jobs.valid.eq(desc.ready), desc.valid.eq(jobs.ready)]
                    ok = ~mismatch | (jobs.ready & desc.ready)
                    m.d.comb += self.i.ready.eq(ok)
                    with m.If(ok):
                        with m.If(mismatch):
                            m.d.sync += is_open.eq(0)
                            bump("wire_frames")
                            bump("close_mismatch")
                        bump("host_frames")
                        bump("elements", h_n)
                        m.d.sync += [
                            cur_hdr.eq(hdr),
                            cur_src.eq(beat.src),
                            cur_dst.eq(beat.dst),
                            cur_offset.eq(h_offset),
                            cur_left.eq(h_n),
                            cur_flush.eq(h_flags[2]),
                            cur_codec.eq(h_codec),
                            *codec_params_of(cur_params, hdr),
                            cur_width.eq(h_width),
                            cur_cap.eq(Mux(h_codec == THRESHOLD_ID, _MAX_N, h_cap)),
                            cur_sparse.eq(h_codec == THRESHOLD_ID),
                            shift.eq(0),
                            pad.eq(beat.last),
                        ]
                        with m.If(beat.last):
                            bump("size_errors")
                        m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                have = self.i.valid | pad
                m.d.comb += [
                    jobs.valid.eq(have & (~closes | desc.ready)),
                ]
                with m.If(closes):
                    n_closed = Signal(16)
                    m.d.comb += n_closed.eq(eff_n + take)
                    # flush only on the frame that carries the host frame's last element
                    m.d.comb += close_desc(eff_hdr, eff_offset, n_closed,
                                           close_end & cur_flush & (count == cur_left),
                                           eff_src, eff_dst, take)
                    m.d.comb += desc.valid.eq(have & jobs.ready)
                fire = have & jobs.ready & (~closes | desc.ready)
                m.d.comb += self.i.ready.eq(fire & beat_done & ~pad)
                with m.If(fire):
                    m.d.sync += [
                        cur_offset.eq(cur_offset + count),
                        cur_left.eq(cur_left - count),
                    ]
                    with m.If(close_mid):
                        # The rest of the beat opens the next wire frame.
                        m.d.sync += [
                            is_open.eq(1),
                            o_hdr.eq(cur_hdr),
                            o_src.eq(cur_src),
                            o_dst.eq(cur_dst),
                            o_offset.eq(cur_offset + take),
                            o_n.eq(count - take),
                            o_k.eq(Array(ranks)[count] - Array(ranks)[take]),
                        ]
                    with m.Elif(close_end):
                        m.d.sync += is_open.eq(0)
                    with m.Else():
                        m.d.sync += [
                            is_open.eq(1),
                            o_hdr.eq(eff_hdr),
                            o_src.eq(eff_src),
                            o_dst.eq(eff_dst),
                            o_offset.eq(eff_offset),
                            o_n.eq(eff_n + count),
                            o_k.eq(eff_k + Array(ranks)[count]),
                        ]
                    with m.If(closes):
                        bump("wire_frames")
                        with m.If(~all_fit):
                            bump("close_full")
                        with m.Else():
                            bump("close_flush")
                    with m.If(beat_done):
                        m.d.sync += shift.eq(0)
                    with m.Else():
                        m.d.sync += shift.eq(shift + count)
                    with m.If(early_end):
                        bump("size_errors")
                        m.d.sync += pad.eq(1)
                    with m.If(beat_done & ends_frame):
                        m.d.comb += frame_ended.eq(1)
                        m.d.sync += pad.eq(0)
                        with m.If(late_end):
                            bump("size_errors")
                            m.next = "DRAIN"
                        with m.Else():
                            m.next = "IDLE"

            bypass_and_drain_states(m, self.i, byp)
        return m

