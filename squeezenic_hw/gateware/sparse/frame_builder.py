"""The TX lane's payload builder for codec 7, ``threshold`` (wire format section 4).

A ``threshold`` wire frame's payload is its layout — a bitmap of ``⌈n/8⌉``
bytes or an index list of ``2k`` bytes, whichever the controller picked when
the frame closed — followed by the ``k`` kept fp32 values. Both layouts are
built while the frame is assembled (the choice is only known at the close);
the closed frame is then read out as 512-bit beats with the values shifted
behind the layout.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    ELEMENTS_PER_BEAT,
    RingWrite,
)
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

    Latency: 5 cycles (``LATENCY``) from the accepted closing job (cycle
    ``t``) to the frame's first beat on ``o`` (cycle ``t + 5``) when the reader
    is idle: input register; memory write and close; read issue; read data
    selected and masked; rotation, merge and output register.

    Throughput: one job per cycle in and one beat per cycle out; a frame's beats
    come back to back, and a frame that closed while the previous one was being
    read out follows its last beat with no gap. A job waits only when the slot
    it must write still holds a closed frame (i.e. both slots hold closed
    frames): the first job after a close waits until the frame before the
    closing one has left the reader. A ``close_mid`` job whose next slot is
    still busy closes its frame at once and keeps its remainder (the next
    frame's start) in the input register until that slot is free. A frame with
    ``P = 0`` takes one reader cycle (its commit-only item). ``i.ready`` depends
    on registers only.

    Backpressure: while ``o.valid & ~o.ready`` the reader holds (``o.payload``
    is stable); the writer keeps accepting jobs into the open slot, so input
    stops only when both slots hold closed frames. Nothing is dropped.

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

        # ---- input register ----------------------------------------------
        s_valid = Signal()
        s = Signal(sparse_builder_input_layout())
        go = Signal()               # the job's part for the open slot is written now
        b_now = Signal()            # close_mid: the next frame's start is written now too
        defer = Signal()            # close_mid, next slot still busy: the start waits in `s`
        m.d.comb += [
            go.eq(s_valid & ~Mux(wslot, busy[1], busy[0])),
            b_now.eq(s.close_mid & ~Mux(wslot, busy[0], busy[1])),
            defer.eq(s.close_mid & ~b_now),
            self.i.ready.eq(~s_valid | (go & ~defer)),
        ]
        # The job's counts per frame, decoded on the way in (off the writer's paths).
        t_a = Signal(5)             # elements for the open frame
        k_a = Signal(5)             # kept values for the open frame
        t_b = Signal(5)             # elements opening the next frame (close_mid)
        k_b = Signal(5)
        job = self.i.payload
        with m.If(self.i.ready):
            m.d.sync += s_valid.eq(self.i.valid)
            with m.If(self.i.valid):
                m.d.sync += [
                    s.eq(job),
                    t_a.eq(Mux(job.close_mid, job.split, job.count)),
                    k_a.eq(Mux(job.close_mid, job.kept_split, job.kept)),
                    t_b.eq(Mux(job.close_mid, job.count - job.split, 0)),
                    k_b.eq(Mux(job.close_mid, job.kept - job.kept_split, 0)),
                ]

        # ---- writer: the closing/continuing part A and the next frame's part B ----
        close = s.close_mid | s.close_end
        mask_a = Signal(_LANES)
        mask_b = Signal(_LANES)
        m.d.comb += [mask_a.eq(_prefix_mask(k_a, _LANES)), mask_b.eq(_prefix_mask(k_b, _LANES))]
        values = Cat(s.values[e] for e in range(_LANES))
        indices = Cat(s.indices[e] for e in range(_LANES))

        # Bitmap A: the partial word plus the new bits, 32 bits at words w, w+1.
        bits_a = Signal(16)
        chunk = Signal(32)
        m.d.comb += [
            bits_a.eq(s.keep & _prefix_mask(t_a, 16)),
            chunk.eq(part | (bits_a << n[:4])),
        ]
        word = n[4:9]               # word of bit n within its beat
        bm_data = Signal(_BEAT)
        m.d.comb += bm_data.eq(_rotate(Cat(chunk, Const(0, 512 - 32)), word, 16))
        bm_en = Signal(2 * _WORDS)
        m.d.comb += bm_en.eq(Const(0b11, 2) << word)
        bm_a = (n[9:], bm_data, bm_en[:_WORDS], bm_en[_WORDS:])

        # Index list A: entries kc … kc+k_a-1 (entry kc % 32 of beat kc // 32).
        ix_en = Signal(2 * _WORDS)
        m.d.comb += ix_en.eq(mask_a << kc[:5])
        ix_data = Signal(_BEAT)
        m.d.comb += ix_data.eq(_rotate(Cat(indices, Const(0, 256)), kc[:5], 16))
        ix_a = (kc[5:], ix_data, ix_en[:_WORDS], ix_en[_WORDS:])

        # Values A: lanes kc … kc+k_a-1 (lane kc % 16 of beat kc // 16).
        va_en = Signal(2 * _LANES)
        m.d.comb += va_en.eq(mask_a << kc[:4])
        va_data = Signal(_BEAT)
        m.d.comb += va_data.eq(_rotate(values, kc[:4], 32))
        va_a = (kc[4:], va_data, va_en[:_LANES], va_en[_LANES:])

        # Part B: everything from element split / slot kept_split on, to position 0.
        bits_b = Signal(16)
        m.d.comb += bits_b.eq((s.keep >> s.split) & _prefix_mask(t_b, 16))
        ix_b = Signal(_BEAT)
        va_b = Signal(_BEAT)
        m.d.comb += [
            ix_b.eq(_rotate(indices, s.kept_split[:4], 16, right=True)),
            va_b.eq(_rotate(values, s.kept_split[:4], 32, right=True)),
        ]
        # The next frame's start is up to 16 elements / kept values (16 when the TX
        # controller closes a frame at a beat's first element, split = 0): the bits of
        # those lanes need a mux between the two parts.
        b_parts = {
            "bitmap": (bits_b, Const(1, _WORDS), 16),
            "index": (ix_b, mask_b, 16 * _LANES),
            "values": (va_b, mask_b, 32 * _LANES),
        }
        a_parts = {"bitmap": bm_a, "index": ix_a, "values": va_a}

        for region in ("bitmap", "index", "values"):
            beat, a_data, en_lo, en_hi = a_parts[region]
            b_data, b_en, b_bits = b_parts[region]
            depth = slots[0].regions[region][0]
            for b in range(2):
                here = beat[0] == b          # beat `beat` is in this bank, else beat+1 is
                addr = Signal(len(beat), name=f"w_{region}{b}_addr")
                m.d.comb += addr.eq(Mux(here, beat >> 1, (beat + 1) >> 1))
                a_en = Signal(len(en_lo), name=f"w_{region}{b}_en")
                # Past the region's end: dropped (never chosen, see the class docstring).
                m.d.comb += a_en.eq(Mux(go & (addr < depth), Mux(here, en_lo, en_hi), 0))
                for sl, slot in enumerate(slots):
                    wport = slot.regions[region][1][b][0]
                    is_open = wslot == sl
                    # data matters only where `en` is set: no default, no zeroing
                    if b == 0:
                        m.d.comb += [
                            wport.addr.eq(Mux(is_open, addr, 0)),
                            wport.data.eq(Cat(Mux(is_open, a_data[:b_bits], b_data[:b_bits]),
                                              a_data[b_bits:])),
                            wport.en.eq(Mux(is_open, a_en, Mux(go & b_now, b_en, 0))),
                        ]
                    else:
                        m.d.comb += [
                            wport.addr.eq(addr),
                            wport.data.eq(a_data),
                            wport.en.eq(Mux(is_open, a_en, 0)),
                        ]

        # ---- frame state and the close ------------------------------------
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
            n_end.eq(n + t_a),
            k_end.eq(kc + k_a),
            nbm_end.eq(nbm + t_a + (k_a << 5)),
            six_end.eq(six + Array(Const(6 * c, 7) for c in range(32))[k_a]),
            n7_end.eq(n7 + t_a),
        ]
        # Per slot, set at its close and counted down by the reader: full layout beats
        # left, next layout/value beat to read, values left, beats left; tail bytes
        # r = L mod 64, the layout, whether the value beats have begun.
        rd = [{"lrem": Signal(12, name=f"lrem{sl}"), "lbeat": Signal(12, name=f"lbeat{sl}"),
               "vbeat": Signal(13, name=f"vbeat{sl}"), "vrem": Signal(17, name=f"vrem{sl}"),
               "brem": Signal(14, name=f"brem{sl}"), "r": Signal(6, name=f"r{sl}"),
               "layout": Signal(name=f"layout{sl}"), "vstarted": Signal(name=f"vstarted{sl}")}
              for sl in range(2)]
        with m.If(go):
            with m.If(close):
                m.d.sync += [
                    n.eq(Mux(b_now, t_b, 0)),
                    kc.eq(Mux(b_now, k_b, 0)),
                    # 16 bits fill word 0: the partial word is then word 1, empty
                    part.eq(Mux(b_now & ~t_b[4], bits_b, 0)),
                    nbm.eq(Mux(b_now, t_b + (k_b << 5), 0) + 511),
                    six.eq(Mux(b_now, k_b * 6, 0) + 63),
                    n7.eq(Mux(b_now, t_b, 0) + 7),
                    wslot.eq(~wslot),
                ]
                with m.If(defer):
                    # The frame closes now (its reader need not wait); the rest of the
                    # job stays in `s` as a plain job of the next frame, compacted to 0.
                    m.d.sync += [
                        s.values.eq(va_b),
                        s.indices.eq(ix_b[:256]),
                        s.keep.eq(bits_b),
                        s.close_mid.eq(0),
                        t_a.eq(t_b),
                        k_a.eq(k_b),
                        t_b.eq(0),
                        k_b.eq(0),
                    ]
                for sl in range(2):
                    with m.If(wslot == sl):
                        m.d.sync += [
                            busy[sl].eq(1),
                            rd[sl]["lrem"].eq(Mux(s.layout, k_end >> 5, n7_end >> 9)),
                            rd[sl]["lbeat"].eq(0),
                            rd[sl]["vbeat"].eq(0),
                            rd[sl]["vrem"].eq(k_end),
                            rd[sl]["brem"].eq(Mux(s.layout, six_end >> 6, nbm_end >> 9)),
                            rd[sl]["r"].eq(Mux(s.layout, k_end[:5] << 1, n7_end[3:9])),
                            rd[sl]["layout"].eq(s.layout),
                            rd[sl]["vstarted"].eq(0),
                        ]
            with m.Else():
                m.d.sync += [
                    n.eq(n_end),
                    kc.eq(k_end),
                    nbm.eq(nbm_end),
                    six.eq(six_end),
                    n7.eq(n7_end),
                    # the partial word moves on when the bits reach the next word
                    part.eq(Mux(n[:4] + t_a >= 16, chunk[16:], chunk[:16])),
                ]

        # ---- reader, stage 0: issue the reads for the next beat of slot rslot ----
        enable = Signal()
        o_valid = Signal()
        m.d.comb += [
            enable.eq(~o_valid | self.o.ready),
            self.o.valid.eq(o_valid),
        ]
        rslot = Signal()
        act = Mux(rslot, busy[1], busy[0])
        cur = {key: Mux(rslot, rd[1][key], rd[0][key]) for key in rd[0]}
        lay_full = Signal()         # a whole layout beat
        lay_part = Signal()         # the layout's tail (r bytes) with the first values
        vlanes = Signal(5)          # values from this value beat
        done = Signal()             # the frame's last beat (or a frame with none)
        many = cur["vrem"][4:] != 0
        m.d.comb += [
            lay_full.eq(cur["lrem"] != 0),
            lay_part.eq(~lay_full & ~cur["vstarted"]),
            vlanes.eq(Mux(lay_full, 0, Mux(many, 16, cur["vrem"][:4]))),
            done.eq(cur["brem"] <= 1),
        ]
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
                    m.d.sync += rd[sl]["brem"].eq(cur["brem"] - 1)
                    with m.If(lay_full):
                        m.d.sync += [rd[sl]["lrem"].eq(cur["lrem"] - 1),
                                     rd[sl]["lbeat"].eq(cur["lbeat"] + 1)]
                    with m.Else():
                        m.d.sync += [rd[sl]["vstarted"].eq(1),
                                     rd[sl]["vbeat"].eq(cur["vbeat"] + 1),
                                     rd[sl]["vrem"].eq(Mux(many, cur["vrem"] - 16, 0))]

        r1 = {}
        for name, value in (("valid", act), ("empty", cur["brem"] == 0), ("commit", done),
                            ("lay_full", lay_full), ("lay_part", lay_part), ("r", cur["r"]),
                            ("vlanes", vlanes), ("layout", cur["layout"]), ("slot", rslot),
                            ("lpar", cur["lbeat"][0]), ("vpar", cur["vbeat"][0])):
            r1[name] = Signal.like(value, name=f"r1_{name}") if isinstance(value, Signal) \
                else Signal(len(value), name=f"r1_{name}")
            with m.If(enable):
                m.d.sync += r1[name].eq(value)

        # ---- reader, stage 1: the read data, selected and masked to L and k ----
        def pick(region, par):
            def bank_data(sl):
                banks = slots[sl].regions[region][1]
                return Mux(par, banks[1][1].data, banks[0][1].data)
            return Mux(r1["slot"], bank_data(1), bank_data(0))

        lay = Signal(_BEAT)
        lo1 = Signal(_BEAT)         # bytes below r
        m.d.comb += [
            lay.eq(Mux(r1["layout"], pick("index", r1["lpar"]), pick("bitmap", r1["lpar"]))),
            lo1.eq(_prefix_mask(r1["r"], DATA_BYTES, 8)),
        ]
        r2 = {}
        for name, value in (
                ("lay", Mux(r1["lay_full"], lay, Mux(r1["lay_part"], lay & lo1, 0))),
                ("vals", pick("values", r1["vpar"]) & _prefix_mask(r1["vlanes"], _LANES, 32)),
                ("valid", r1["valid"]), ("empty", r1["empty"]), ("commit", r1["commit"]),
                ("r", r1["r"])):
            r2[name] = Signal(len(value), name=f"r2_{name}")
            with m.If(enable):
                m.d.sync += r2[name].eq(value)

        # ---- reader, stage 2: values rotated by r bytes behind the layout's tail ----
        lo = Signal(_BEAT)          # bytes below r: the carry into the next beat
        rot = Signal(_BEAT)
        m.d.comb += [
            lo.eq(_prefix_mask(r2["r"], DATA_BYTES, 8)),
            rot.eq(_rotate(r2["vals"], r2["r"], 8)),
        ]
        carry = Signal(_BEAT)       # values shifted past the previous output beat
        out = Signal(_BEAT)
        m.d.comb += out.eq(r2["lay"] | carry | (rot & ~lo))
        o_payload = Signal(RingWrite)
        m.d.comb += self.o.payload.eq(o_payload)
        with m.If(enable):
            m.d.sync += o_valid.eq(r2["valid"])
            with m.If(r2["valid"]):
                m.d.sync += [
                    o_payload.beats[0].eq(out),
                    # a frame with no payload: a commit with no beat (the ring and
                    # the lane count one commit per frame)
                    o_payload.count.eq(~r2["empty"]),
                    o_payload.commit.eq(r2["commit"]),
                    carry.eq(Mux(r2["commit"], 0, rot & lo)),
                ]
        return m
