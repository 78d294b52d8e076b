"""The TX lane's payload builder for codec 7, ``threshold`` (wire format section 4).

A ``threshold`` wire frame's payload is its layout — a bitmap of ``⌈n/8⌉``
bytes or an index list of ``2k`` bytes, whichever the controller picked when
the frame closed — followed by the ``k`` kept fp32 values. Both layouts are
built while the frame is assembled (the choice is only known at the close);
the closed frame is then read out as 512-bit beats with the values shifted
behind the layout.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    ELEMENTS_PER_BEAT,
    RingWrite,
)
from squeezenic_hw.gateware.common.stream import stage_enable
from squeezenic_hw.spec.header import HEADER_LEN, MAX_PKT_LEN
from squeezenic_hw.spec.threshold import payload_size

__all__ = ["SparseFrameBuilder", "sparse_builder_input_layout", "region_beats"]

#: Smallest MTU the sparse path takes: 16 kept values (a whole job) fit one frame.
SPARSE_MIN_MTU = HEADER_LEN + payload_size(ELEMENTS_PER_BEAT, ELEMENTS_PER_BEAT)
_BEAT = unsigned(8 * DATA_BYTES)
_LANES = ELEMENTS_PER_BEAT
_WORDS = 32         # 16-bit words (bitmap) or uint16 entries (index list) per beat


def sparse_builder_input_layout():
    """One compacted ``threshold`` job (see :class:`SparseFrameBuilder`)."""
    return data.StructLayout({
        "values": data.ArrayLayout(unsigned(32), _LANES),   # kept values, slots 0…kept-1
        "indices": data.ArrayLayout(unsigned(16), _LANES),  # frame-relative index per slot
        "kept": unsigned(5),        # kept values in the job, 0…16
        "kept_split": unsigned(5),  # with close_mid: slots of the closing frame
        "keep": unsigned(16),       # keep bit per element (bits >= count zero)
        "count": unsigned(5),       # elements in the job, 0…16
        "split": unsigned(5),       # with close_mid: elements of the closing frame (0…count-1)
        "close_mid": unsigned(1),
        "close_end": unsigned(1),
        "layout": unsigned(1),      # with a close: the closing frame's layout (1 index list)
    })


def _staged_layout():
    """A job in the builder's input registers, with what is decoded on the way in."""
    return data.StructLayout({
        "job": sparse_builder_input_layout(),
        "t_a": unsigned(5),         # elements for the open frame
        "k_a": unsigned(5),         # kept values for the open frame
        "t_b": unsigned(5),         # elements opening the next frame (close_mid)
        "k_b": unsigned(5),
        "bits_a": unsigned(16),     # keep bits of the open frame's elements
        "bits_b": unsigned(16),     # keep bits of the next frame's, from bit 0
        "mask_a": unsigned(_LANES),  # the low k_a set
        "mask_b": unsigned(_LANES),  # the low k_b set
        "nbm_a": unsigned(10),      # t_a + 32 k_a
        "six_a": unsigned(7),       # 6 k_a
    })


def region_beats(mtu):
    """``(layout_beats, value_beats)`` of one frame slot's regions for ``mtu``.

    ``layout_beats`` holds ``⌊B/3⌋`` bytes (the largest layout ever chosen),
    ``value_beats`` ``⌊B/4⌋`` values (``B = mtu − 64``), both rounded up to an
    even number of beats (two banks).
    """
    b = mtu - HEADER_LEN
    layout = -(-(b // 3) // DATA_BYTES)
    values = -(-(b // 4) // _LANES)
    return layout + layout % 2, values + values % 2


def _rotate(value, amount, unit, *, right=False):
    """``value`` rotated by ``amount · unit`` bits (``amount · unit`` < its width)."""
    width = len(value)
    twice = Cat(value, value)
    if right:
        return (twice >> (amount * unit))[:width]
    return (twice << (amount * unit))[width:2 * width]


def _prefix_mask(count, n, unit=1):
    """``n · unit`` bits, the low ``count · unit`` set (``count`` ≤ ``n``): a shifter,
    not a ``2**x − 1`` subtractor (whose carry chain would be ``n · unit`` long)."""
    width = n * unit
    return ~(Const(2**width - 1, width) << (count * unit))[:width]


def _datapath(shape, name):
    """A register of data: no reset."""
    return Signal(shape, name=name, reset_less=True)


class _Slot:
    """One frame slot: bitmap, index-list and value regions, each two banks (even/odd
    beats) with one write port (16/16/32-bit enables) and one read port."""

    def __init__(self, m, s, layout_beats, value_beats):
        self.regions = {}
        for region, beats, gran in (("bitmap", layout_beats, 16), ("index", layout_beats, 16),
                                    ("values", value_beats, 32)):
            banks = []
            for b in range(2):
                mem = Memory(shape=_BEAT, depth=beats // 2, init=[])
                m.submodules[f"slot{s}_{region}{b}"] = mem
                banks.append((mem.write_port(granularity=gran), mem.read_port()))
            self.regions[region] = (beats // 2, banks)


class SparseFrameBuilder(wiring.Component):
    """Builds the payload beats of ``threshold`` wire frames from compacted jobs.

    Each accepted job adds elements to the open wire frame: ``take = split``
    with ``close_mid``, else ``count``, elements (their ``keep`` bits, LSB
    first, to the bitmap) and ``kept_split`` resp. ``kept`` kept values (their
    ``indices`` to the index list, ``values`` to the value list). With
    ``close_mid`` the rest (elements ``split…count-1``, slots
    ``kept_split…kept-1``) opens the next frame; with ``close_end`` the frame
    closes after the job (``count = 0``: a close with no new elements).

    Per closed frame of ``n`` elements, ``k`` kept, ``layout`` from its closing
    job: payload = ``L`` layout bytes (bitmap ``⌈n/8⌉`` bytes, element ``i`` in
    bit ``i%8`` of byte ``i//8``, padding bits zero; or index list ``2k`` bytes,
    uint16 LE) then ``4k`` value bytes (LE); ``P = L + 4k``. It leaves as
    ``⌈P/64⌉`` :class:`RingWrite` items of one beat each (``count = 1``,
    payload byte 0 in bits 7:0 of the first beat), ``commit = 1`` on the last;
    bytes past ``P`` in the last beat are **zero**. ``P = 0`` (index list,
    ``k = 0``) gives one item with ``count = 0`` and ``commit = 1``: one commit
    per frame, which the ring and the lane's token gate count.

    Trusted (the TX controller guarantees them): every frame has ``n ≥ 1``,
    ``n ≤ 65535``, ``P ≤ B``, chosen ``L ≤ ⌊B/3⌋``, ``4k ≤ B``
    (``B = mtu − 64``); ``kept``/``kept_split`` match ``keep``. The layout
    that is not chosen may outgrow its region while a frame is assembled: the
    writes past a region's end are dropped (they touch nothing else).
    Value and index slots ``≥ kept`` and keep bits ``≥ count`` are ignored.

    Parameters
    ----------
    mtu : int
        Wire frame MTU, 130…9600 bytes.

    Attributes
    ----------
    i : In(stream.Signature(sparse_builder_input_layout()))
        Compacted jobs, one per cycle.
    o : Out(stream.Signature(RingWrite))
        Payload beats for the frame ring; ``beats[1]`` is always zero.

    Notes
    -----
    Architecture: two frame slots (ping-pong). The open slot receives every
    job's bitmap bits, indices and values at once (no state but the element
    and kept counts and the bitmap's partial 16-bit word); a close hands it to
    the reader and opens the other slot (``close_mid`` writes the next frame's
    start into it in the same cycle). The reader emits the layout beats, then
    the value beats rotated by ``L mod 64`` bytes behind the layout's tail
    (masked to ``L`` and ``k``, so stale memory never leaks out).

    Timing: what the writer needs of a job (per-frame counts, keep bits and
    masks, size increments) is decoded on the way into the input register; the
    write enables are windows rotated into a ring of two beats (bank = beat
    parity), the write data rotated by ``kc mod 16`` (the bitmap's two words
    swapped by parity), so every write port is a few LUTs from registers. The
    reader's per-slot flags (layout beats left, 16 values left, last beat, no
    beat) are set at the close from small saturated counts and slacks (no wide
    adder) and kept beside the counts; its value rotation is split over its
    two data stages (8-byte units, then bytes). Datapath registers (input job,
    read pipeline, output) take no reset.

    Latency: 5 cycles (``LATENCY``) from the accepted closing job (cycle
    ``t``) to the frame's first beat on ``o`` (cycle ``t + 5``) when the reader
    is idle: input register; memory write and close; read issue; read data
    selected, masked and rotated by whole 8-byte units; rotation by the rest,
    merge and output register.

    Throughput: one job per cycle in and one beat per cycle out; a frame's beats
    come back to back, and a frame that closed while the previous one was being
    read out follows its last beat with no gap. A job waits only when the slot
    it must write still holds a closed frame (i.e. both slots hold closed
    frames): the first job after a close waits until the frame before the
    closing one has left the reader. A ``close_mid`` job whose next slot is
    still busy closes its frame at once and keeps its remainder (the next
    frame's start) in the input register until that slot is free. A frame with
    ``P = 0`` takes one reader cycle (its commit-only item).

    Backpressure: while ``o.valid & ~o.ready`` the reader holds (``o.payload``
    is stable); the writer keeps accepting jobs into the open slot, so input
    stops only when both slots hold closed frames. Nothing is dropped.
    ``i.ready`` is a register: the next cycle's "the input register is empty or
    its job can leave", computed from the next state; ``o.ready`` only selects
    between the two versions of it (the reader freeing a slot in this cycle or
    not), one LUT before the flip-flop.

    Memory (:func:`region_beats`): per slot a bitmap and an index-list region
    of ``⌈⌊B/3⌋/64⌉`` beats and a value region of ``⌈⌊B/4⌋/16⌉`` beats (each
    rounded up to even, in two ``Memory`` banks of 512-bit words); two slots.
    MTU 1518: 2 × (8 + 8 + 24) beats = 80 × 512 bits; MTU 9600: 2 × (50 + 50
    + 150) = 500 × 512 bits.
    """

    LATENCY = 5

    def __init__(self, mtu):
        if isinstance(mtu, bool) or not isinstance(mtu, int) \
                or not SPARSE_MIN_MTU <= mtu <= MAX_PKT_LEN:
            raise ValueError(f"mtu must be an int from {SPARSE_MIN_MTU} to {MAX_PKT_LEN}, "
                             f"got {mtu!r}")
        self._mtu = mtu
        self._layout_beats, self._value_beats = region_beats(mtu)
        super().__init__({
            "i": In(stream.Signature(sparse_builder_input_layout())),
            "o": Out(stream.Signature(RingWrite)),
        })

    @property
    def mtu(self):
        return self._mtu

    @property
    def latency(self):
        """Cycles from the accepted closing job to the frame's first beat on ``o``."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        slots = [_Slot(m, s, self._layout_beats, self._value_beats) for s in range(2)]

        busy = [Signal(name=f"busy{s}") for s in range(2)]   # closed, not yet read out
        wslot = Signal()            # the open slot
        n = Signal(17)              # elements of the open frame
        kc = Signal(17)             # kept values of the open frame
        part = Signal(16)           # bitmap bits of word n // 16 below bit n % 16

        # ---- input: a job and its per-frame counts and masks, decoded on the way in ----
        job = self.i.payload
        decoded = self._decode(m, job)

        # its job leaves", computed from the next state (below).
        ready = Signal(init=1)
        s_valid = Signal()
        st = _datapath(_staged_layout(), "s")
        s = st.job
        go = Signal()               # the job's part for the open slot is written now
        b_now = Signal()            # close_mid: the next frame's start is written now too
        defer = Signal()            # close_mid, next slot still busy: the start waits in `s`
        close = Signal()
        leave = Signal()            # the job leaves `s`
        load = Signal()
        m.d.comb += [
            close.eq(s.close_mid | s.close_end),
            go.eq(s_valid & ~Mux(wslot, busy[1], busy[0])),
            b_now.eq(s.close_mid & ~Mux(wslot, busy[0], busy[1])),
            defer.eq(s.close_mid & ~b_now),
            leave.eq(go & ~defer),
            self.i.ready.eq(ready),
            load.eq(self.i.valid & ready),
        ]
        m.d.sync += s_valid.eq(load | (s_valid & ~leave))
        with m.If(load):
            m.d.sync += st.eq(decoded)

        chunk, b_parts = self._writer(m, slots, st, n=n, kc=kc, part=part, wslot=wslot, go=go,
                                      b_now=b_now)
        rd = self._frame_state(m, st, n=n, kc=kc, part=part, chunk=chunk, b_parts=b_parts,
                               wslot=wslot, busy=busy, go=go, close=close, b_now=b_now,
                               defer=defer)

        # ---- reader, stage 0: issue the reads for the next beat of slot rslot ----------
        enable = stage_enable()
        o_valid = Signal()
        m.d.comb += [
            enable.eq(~o_valid | self.o.ready),
            self.o.valid.eq(o_valid),
        ]
        rslot = Signal()
        act = Mux(rslot, busy[1], busy[0])
        cur = {key: Mux(rslot, rd[1][key], rd[0][key]) for key in rd[0]}
        lay_full = cur["lnz"]                           # a whole layout beat
        lay_part = ~cur["lnz"] & ~cur["vstarted"]       # the layout's tail with the first values
        done = cur["blast"]                             # the frame's last beat (or none)

        # i.ready of the next cycle: s empty, or its job can leave (the slot it writes
        # free, and with close_mid the other one free or the start deferred). From the
        # next state, with and without the reader freeing its slot this cycle; o.ready
        # only picks one of the two.
        # Case by case, in terms of the open slot's and the other slot's busy flags:
        own_busy = Mux(wslot, busy[1], busy[0])
        other_busy = Mux(wslot, busy[0], busy[1])
        frees = act & done

        def ready_next(own_frees, other_frees):
            own = own_busy & ~own_frees
            other = other_busy & ~other_frees
            # a new job: into the same open slot, or (after a close) into the other one
            fresh = Mux(~s_valid | ~close, ~own & ~(job.close_mid & other),
                        ~other & ~job.close_mid)
            # no new job: `s` empties, or its job waits for its slot, or it deferred
            # its start (the other slot is then the open one, the job no close_mid)
            kept = ~s_valid | leave | Mux(go, defer & ~other, ~own & ~(s.close_mid & other))
            return Mux(load, fresh, kept)

        m.d.sync += ready.eq(Mux(enable, ready_next(frees & (rslot == wslot),
                                                    frees & (rslot != wslot)),
                                 ready_next(0, 0)))
        for slot in slots:
            for region, (depth, banks) in slot.regions.items():
                beat = cur["vbeat"] if region == "values" else cur["lbeat"]
                for _, rport in banks:
                    m.d.comb += [
                        # out of range only if the controller broke its guarantees
                        rport.addr.eq(Mux((beat >> 1) < depth, beat >> 1, 0)),
                        rport.en.eq(enable),
                    ]
        with m.If(enable & act):
            with m.If(done):
                m.d.sync += rslot.eq(~rslot)
            for sl in range(2):
                with m.If(rslot == sl):
                    with m.If(done):
                        m.d.sync += busy[sl].eq(0)
                    m.d.sync += [
                        rd[sl]["brem"].eq(cur["brem"] - 1),
                        rd[sl]["blast"].eq(cur["brem"] <= 2),
                        rd[sl]["bzero"].eq(0),
                    ]
                    with m.If(lay_full):
                        m.d.sync += [rd[sl]["lrem"].eq(cur["lrem"] - 1),
                                     rd[sl]["lnz"].eq(cur["lrem"] != 1),
                                     rd[sl]["lbeat"].eq(cur["lbeat"] + 1)]
                    with m.Else():
                        m.d.sync += [rd[sl]["vstarted"].eq(1),
                                     rd[sl]["vbeat"].eq(cur["vbeat"] + 1),
                                     rd[sl]["vrem"].eq(Mux(cur["vmany"], cur["vrem"] - 16, 0)),
                                     rd[sl]["vmany"].eq(cur["vrem"][5:] != 0)]

        # Stage 1's byte mask of the layout beat and lane mask of the value beat.
        lay_mask = Cat(lay_full | (lay_part & (i < cur["r"])) for i in range(DATA_BYTES))
        val_mask = Cat(~lay_full & (cur["vmany"] | (i < cur["vrem"][:4])) for i in range(_LANES))
        r1 = {}
        for name, value in (("valid", act), ("empty", cur["bzero"]), ("commit", done),
                            ("lay_mask", lay_mask), ("val_mask", val_mask), ("r", cur["r"]),
                            ("layout", cur["layout"]), ("slot", rslot),
                            ("lpar", cur["lbeat"][0]), ("vpar", cur["vbeat"][0])):
            r1[name] = Signal(len(value), name=f"r1_{name}", reset_less=name != "valid")
            with m.If(enable):
                m.d.sync += r1[name].eq(value)

        self._read_out(m, slots, r1, enable, o_valid)
        return m

    def _decode(self, m, job):
        """The input: a job and its per-frame counts and masks, decoded on the way in."""
        t_a = Mux(job.close_mid, job.split, job.count)             # elements, open frame
        k_a = Mux(job.close_mid, job.kept_split, job.kept)         # kept values, open frame
        t_b = Mux(job.close_mid, (job.count - job.split)[:5], 0)   # next frame (close_mid)
        k_b = Mux(job.close_mid, (job.kept - job.kept_split)[:5], 0)
        decoded = Signal(_staged_layout())
        m.d.comb += [
            decoded.job.eq(job),
            decoded.t_a.eq(t_a), decoded.k_a.eq(k_a), decoded.t_b.eq(t_b), decoded.k_b.eq(k_b),
            decoded.bits_a.eq(job.keep & _prefix_mask(t_a, 16)),
            decoded.bits_b.eq((job.keep >> job.split) & _prefix_mask(t_b, 16)),
            decoded.mask_a.eq(_prefix_mask(k_a, _LANES)),
            decoded.mask_b.eq(_prefix_mask(k_b, _LANES)),
            decoded.nbm_a.eq(t_a + (k_a << 5)),
            decoded.six_a.eq(Array(Const(6 * c, 7) for c in range(32))[k_a]),
        ]

        return decoded

    def _writer(self, m, slots, st, *, n, kc, part, wslot, go, b_now):
        """The writer: the closing/continuing part A of the job in ``st`` and the next
        frame's part B; returns the bitmap chunk and part B's data, enables and widths."""
        s = st.job
        # Part A (the open frame) goes to the open slot; part B (close_mid: the next
        # frame's first elements, at position 0) to bank 0, beat 0 of the other slot.
        chunk = Signal(32)          # bitmap: the partial word plus the new bits
        m.d.comb += chunk.eq(part | (st.bits_a << n[:4]))
        values = Cat(s.values[e] for e in range(_LANES))
        indices = Cat(s.indices[e] for e in range(_LANES))
        # Writes only go where the enables are set, so the data need not be zeroed
        # elsewhere: the bitmap's two words w, w + 1 are the pair swapped when w is odd,
        # repeated; entry kc + j (j < 16) of the index beat pair is at (kc + j) mod 32,
        # so the 16 entries rotated by kc mod 16, twice; values lane (kc + j) mod 16.
        a_data = {
            "bitmap": Mux(n[4], Cat(chunk[16:], chunk[:16]), chunk).replicate(_WORDS // 2),
            "index": _rotate(indices, kc[:4], 16).replicate(2),
            "values": _rotate(values, kc[:4], 32),
        }
        ks = s.kept_split[:4]
        b_parts = {
            "bitmap": (st.bits_b, Const(1, _WORDS), 16),
            "index": (_rotate(indices, ks, 16, right=True), st.mask_b, 16 * _LANES),
            "values": (_rotate(values, ks, 32, right=True), st.mask_b, 32 * _LANES),
        }
        # Per region: the two beats from the first position, as a ring of 2 x width
        # positions (beat b in bank b % 2): the enables are a window (two bitmap words;
        # k_a entries or lanes) rotated to the first position, kc or n mod 2 x width, and
        # bank b's part of the ring its enables. Bank 1 holds beat // 2 either way, bank
        # 0 (beat + 1) // 2. Past a region's end: dropped (never chosen, see the class
        # docstring).
        regions = {
            "bitmap": (n[9:], Const(0b11, 2), n[4:10], _WORDS),
            "index": (kc[5:], st.mask_a, kc[:6], _WORDS),
            "values": (kc[4:], st.mask_a, kc[:5], _LANES),
        }
        for region, (beat, window, first, width) in regions.items():
            depth = slots[0].regions[region][0]
            half = beat >> 1
            ring = _rotate(Cat(window, Const(0, 2 * width - len(window))), first, 1)
            b_data, b_en, b_bits = b_parts[region]
            for b in range(2):
                # the address, half + (b == 0 and beat odd), below depth
                in_range = Mux(beat[0] & (b == 0), half < depth - 1, half < depth)
                a_en = Signal(width, name=f"w_{region}{b}_en")
                addr = Signal(len(half), name=f"w_{region}{b}_addr")
                m.d.comb += [
                    a_en.eq(Mux(in_range, ring[width * b:width * (b + 1)], 0)),
                    addr.eq(half + (beat[0] if b == 0 else 0)),
                ]
                for sl, slot in enumerate(slots):
                    wport = slot.regions[region][1][b][0]
                    is_open = wslot == sl
                    # data matters only where `en` is set: no default, no zeroing
                    if b == 0:
                        m.d.comb += [
                            wport.addr.eq(Mux(is_open, addr, 0)),
                            wport.data.eq(Cat(Mux(is_open, a_data[region][:b_bits], b_data),
                                              a_data[region][b_bits:])),
                            wport.en.eq(Mux(go, Mux(is_open, a_en, Mux(b_now, b_en, 0)), 0)),
                        ]
                    else:
                        m.d.comb += [
                            wport.addr.eq(addr),
                            wport.data.eq(a_data[region]),
                            wport.en.eq(Mux(go & is_open, a_en, 0)),
                        ]
        return chunk, b_parts

    def _frame_state(self, m, st, *, n, kc, part, chunk, b_parts, wslot, busy, go, close,
                     b_now, defer):
        """The open frame's state and the close, which sets the closed slot's reader
        registers (returned, one dict per slot)."""
        s = st.job
        # Beats of the frame if it closed now, kept as running sums so that the close
        # needs one adder: bitmap ⌈(⌈n/8⌉ + 4k)/64⌉ = ⌈(n + 32k)/512⌉, index list
        # ⌈6k/64⌉; `nbm` = n + 32k + 511, `six` = 6k + 63.
        nbm = Signal(23, init=511)
        six = Signal(21, init=63)
        n7 = Signal(17, init=7)     # n + 7
        n_end = Signal(17)
        k_end = Signal(17)
        nbm_end = Signal(23)
        six_end = Signal(21)
        n7_end = Signal(17)         # n_end + 7: the bitmap has n7_end >> 3 bytes
        m.d.comb += [
            n_end.eq(n + st.t_a),
            k_end.eq(kc + st.k_a),
            nbm_end.eq(nbm + st.nbm_a),
            six_end.eq(six + st.six_a),
            n7_end.eq(n7 + st.t_a),
        ]
        lrem_init = Signal(12)
        brem_init = Signal(14)
        m.d.comb += [
            lrem_init.eq(Mux(s.layout, k_end >> 5, n7_end >> 9)),
            brem_init.eq(Mux(s.layout, six_end >> 6, nbm_end >> 9)),
        ]
        # The reader's flags of a closing frame compare n and k with small numbers: from
        # kc saturated at 63, and two slacks counted down by each job (512 − n − 32k:
        # the bitmap's beats, at most one while t_a + 32 k_a ≤ it; 505 − n: a full bitmap
        # beat once t_a ≥ it). No wide adder on their path.
        kc_sat = Signal(6)
        bm_slack = Signal(signed(12), init=512)
        lz_slack = Signal(signed(11), init=505)
        k_end_sat = Signal(7)
        m.d.comb += k_end_sat.eq(kc_sat + st.k_a)
        flags = {
            # layout beats: index k ≥ 32, bitmap n + 7 ≥ 512
            "lnz": Mux(s.layout, k_end_sat[5:] != 0,
                       lz_slack[-1] | ((lz_slack[5:] == 0) & (lz_slack[:5] <= st.t_a))),
            "vmany": k_end_sat[4:] != 0,                    # k ≥ 16
            # beats ≤ 1: index 6k + 63 < 128 (k ≤ 10), bitmap n + 32k + 511 < 1024
            "blast": Mux(s.layout, k_end_sat <= 10,
                         ~bm_slack[-1] & (bm_slack[:11] >= st.nbm_a)),
            "bzero": s.layout & (k_end_sat == 0),           # an empty index-list payload
        }
        # Per slot, set at its close and counted down by the reader: full layout beats
        # left, next layout/value beat to read, values left, beats left; tail bytes
        # r = L mod 64, the layout, whether the value beats have begun; and flags kept
        # beside the counts: layout beats left, 16 values or more left, at most one beat
        # left, no beat at all.
        rd = [{"lrem": Signal(12, name=f"lrem{sl}"), "lbeat": Signal(12, name=f"lbeat{sl}"),
               "vbeat": Signal(13, name=f"vbeat{sl}"), "vrem": Signal(17, name=f"vrem{sl}"),
               "brem": Signal(14, name=f"brem{sl}"), "r": Signal(6, name=f"r{sl}"),
               "layout": Signal(name=f"layout{sl}"), "vstarted": Signal(name=f"vstarted{sl}"),
               "lnz": Signal(name=f"lnz{sl}"), "vmany": Signal(name=f"vmany{sl}"),
               "blast": Signal(name=f"blast{sl}"), "bzero": Signal(name=f"bzero{sl}")}
              for sl in range(2)]
        with m.If(go):
            with m.If(close):
                m.d.sync += [
                    n.eq(Mux(b_now, st.t_b, 0)),
                    kc.eq(Mux(b_now, st.k_b, 0)),
                    # 16 bits fill word 0: the partial word is then word 1, empty
                    part.eq(Mux(b_now & ~st.t_b[4], st.bits_b, 0)),
                    nbm.eq(Mux(b_now, st.t_b + (st.k_b << 5), 0) + 511),
                    six.eq(Mux(b_now, st.k_b * 6, 0) + 63),
                    n7.eq(Mux(b_now, st.t_b, 0) + 7),
                    kc_sat.eq(Mux(b_now, st.k_b, 0)),
                    bm_slack.eq(512 - Mux(b_now, st.t_b + (st.k_b << 5), 0)),
                    lz_slack.eq(505 - Mux(b_now, st.t_b, 0)),
                    wslot.eq(~wslot),
                ]
                with m.If(defer):
                    # The frame closes now (its reader need not wait); the rest of the
                    # job stays in `s` as a plain job of the next frame, compacted to 0.
                    m.d.sync += [
                        s.values.eq(b_parts["values"][0]),
                        s.indices.eq(b_parts["index"][0]),
                        s.keep.eq(st.bits_b),
                        s.close_mid.eq(0),
                        st.t_a.eq(st.t_b),
                        st.k_a.eq(st.k_b),
                        st.bits_a.eq(st.bits_b),
                        st.mask_a.eq(st.mask_b),
                        st.nbm_a.eq(st.t_b + (st.k_b << 5)),
                        st.six_a.eq(st.k_b * 6),
                    ]
                for sl in range(2):
                    with m.If(wslot == sl):
                        m.d.sync += [
                            busy[sl].eq(1),
                            rd[sl]["lrem"].eq(lrem_init),
                            rd[sl]["lbeat"].eq(0),
                            rd[sl]["vbeat"].eq(0),
                            rd[sl]["vrem"].eq(k_end),
                            rd[sl]["brem"].eq(brem_init),
                            rd[sl]["r"].eq(Mux(s.layout, k_end[:5] << 1, n7_end[3:9])),
                            rd[sl]["layout"].eq(s.layout),
                            rd[sl]["vstarted"].eq(0),
                            rd[sl]["lnz"].eq(flags["lnz"]),
                            rd[sl]["vmany"].eq(flags["vmany"]),
                            rd[sl]["blast"].eq(flags["blast"]),
                            rd[sl]["bzero"].eq(flags["bzero"]),
                        ]
            with m.Else():
                m.d.sync += [
                    n.eq(n_end),
                    kc.eq(k_end),
                    nbm.eq(nbm_end),
                    six.eq(six_end),
                    n7.eq(n7_end),
                    kc_sat.eq(Mux(k_end_sat[6], 63, k_end_sat)),
                    bm_slack.eq(Mux(bm_slack[-1], bm_slack, bm_slack - st.nbm_a)),
                    lz_slack.eq(Mux(lz_slack[-1], lz_slack, lz_slack - st.t_a)),
                    # the partial word moves on when the bits reach the next word
                    part.eq(Mux(n[:4] + st.t_a >= 16, chunk[16:], chunk[:16])),
                ]
        return rd

    def _read_out(self, m, slots, r1, enable, o_valid):
        """Reader stages 1 and 2: the read data of the beat that stage 0 issued (``r1``),
        selected, masked and rotated into the output beat."""
        # ---- reader, stage 1: the read data, selected and masked to L and k; the values
        # rotated by the multiple of 8 bytes in r ----
        def pick(region, par):
            def bank_data(sl):
                banks = slots[sl].regions[region][1]
                return Mux(par, banks[1][1].data, banks[0][1].data)
            return Mux(r1["slot"], bank_data(1), bank_data(0))

        lay = Signal(_BEAT)
        vals = Signal(_BEAT)
        m.d.comb += [
            lay.eq(Mux(r1["layout"], pick("index", r1["lpar"]), pick("bitmap", r1["lpar"]))
                   & Cat(r1["lay_mask"][i].replicate(8) for i in range(DATA_BYTES))),
            vals.eq(pick("values", r1["vpar"])
                    & Cat(r1["val_mask"][i].replicate(32) for i in range(_LANES))),
        ]
        r2 = {}
        for name, value in (
                ("lay", lay), ("vals", _rotate(vals, r1["r"][3:], 64)),
                ("lo", _prefix_mask(r1["r"], DATA_BYTES, 1)),
                ("valid", r1["valid"]), ("empty", r1["empty"]), ("commit", r1["commit"]),
                ("r_lo", r1["r"][:3])):
            r2[name] = Signal(len(value), name=f"r2_{name}", reset_less=name != "valid")
            with m.If(enable):
                m.d.sync += r2[name].eq(value)

        # ---- reader, stage 2: values rotated by the rest of r, behind the layout's tail ----
        lo = Cat(r2["lo"][i].replicate(8) for i in range(DATA_BYTES))   # bytes below r
        rot = Signal(_BEAT)
        m.d.comb += rot.eq(_rotate(r2["vals"], r2["r_lo"], 8))
        carry = _datapath(_BEAT, "carry")    # values shifted past the previous output beat
        carry_live = Signal()               # carry belongs to the frame being output
        out = Signal(_BEAT)
        m.d.comb += out.eq(r2["lay"] | (carry & carry_live.replicate(8 * DATA_BYTES))
                           | (rot & ~lo))
        o_payload = _datapath(RingWrite, "o_payload")
        m.d.comb += self.o.payload.eq(o_payload)
        with m.If(enable):
            m.d.sync += o_valid.eq(r2["valid"])
            with m.If(r2["valid"]):
                m.d.sync += [
                    o_payload.beats[0].eq(out),
                    o_payload.beats[1].eq(0),
                    # a frame with no payload: a commit with no beat (the ring and
                    # the lane count one commit per frame)
                    o_payload.count.eq(~r2["empty"]),
                    o_payload.commit.eq(r2["commit"]),
                    carry.eq(rot & lo),
                    carry_live.eq(~r2["commit"]),
                ]
