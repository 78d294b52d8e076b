"""The narrow lane's input stage: host beats to items, the coalescing compares
made as a header arrives, and the idle count."""

from amaranth import Cat, Const, Mux, Signal
from amaranth.lib import data

from squeezenic_hw.gateware.codecs.fixed_pow2 import Pow2Scale, pow2_fixed_codes, pow2_scale_of
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT, header_bytes
from squeezenic_hw.gateware.common.stream import LutramFifo, Stager, stage_enable
from squeezenic_hw.spec.generator import VALUE_EXPONENT_HIGH
from squeezenic_hw.spec.header import FLAG_FLUSH, FLAG_STOCHASTIC, HDR

from .layouts import COPIED_BYTES, HeaderFields, Kind, thermometer


class InputStage:
    """The input stage of a :class:`~.lane.NarrowTxLane` (whose parameters its
    methods read)."""

    def _value_read(self, x):
        """What the encoder reads of a value ``x``: all of it; or of a generator's value
        (``generated_values``), its sign, the low nibble of its exponent and the top b bits
        of its mantissa, the lowest sticky, for the rest is known."""
        if not self._generated_values:
            return x
        p = 23 - self._b                          # the sticky bit
        return Cat(Const(0, p), x[p:27], Const(VALUE_EXPONENT_HIGH, 4), x[31])

    def _key_of(self, beat_data):
        """The key bits of a header beat that are not held: its bytes in
        :data:`~.layouts.KEY_BYTES` order, then ``stochastic``."""
        parts = [header_bytes(beat_data, b, 1) for b in self._key_bytes]
        if not self._stochastic_held:
            parts.append(header_bytes(beat_data, HDR.FLAGS[0], 1)[
                FLAG_STOCHASTIC.bit_length() - 1])
        return Cat(*parts)

    def _input_stage(self, m, skid):
        """Items into ``skid``; returns the header fields beside them (a
        :class:`~.layouts.HeaderFields` view the gearbox reads when it takes a header's item)."""
        beat = self.i.payload
        first = Signal(init=1)                 # the next beat is a header
        rem = Signal(16, reset_less=True)      # elements of the host frame still to come
        key_in = Signal(self._key_width, reset_less=True)
        prev_end = Signal(32, reset_less=True)  # offset + n of the header before
        self._key_pending = key_pending = Signal()   # key_in is not yet the output's key
        self._key_in = key_in
        since = Signal(32)                     # cycles since the last beat of a host frame
        late = Signal()                        # since ≥ cfg_idle_timeout (and it is set)

        # a header waits while the previous key change is being sent
        hold = first & key_pending
        if self._latency:
            # the encoder's stages move together, whenever the last one can move on
            out_valid = Signal()
            enable = stage_enable()
            m.d.comb += [enable.eq(~out_valid | skid.i.ready),
                         self.i.ready.eq(enable & ~hold)]
        else:
            m.d.comb += self.i.ready.eq(skid.i.ready & ~hold)
        accept = self.i.valid & self.i.ready

        n = header_bytes(beat.data, HDR.N[0], 2)
        offset = header_bytes(beat.data, HDR.OFFSET[0], 4)
        key = self._key_of(beat.data)
        key_eq = Signal()
        m.d.comb += key_eq.eq(key == key_in)
        k_full = rem[4:] != 0
        k = Mux(k_full, ELEMENTS_PER_BEAT, rem[:4])
        last = ~k_full | (rem == ELEMENTS_PER_BEAT)
        elements = Mux(first, 0, Mux(k_full, Const(2**ELEMENTS_PER_BEAT - 1, ELEMENTS_PER_BEAT),
                                     thermometer(rem[:4], ELEMENTS_PER_BEAT)))
        fields = Signal(HeaderFields)
        m.d.comb += [
            fields.n.eq(n),
            fields.offset.eq(offset),
            fields.flush.eq(header_bytes(beat.data, HDR.FLAGS[0], 1)[
                FLAG_FLUSH.bit_length() - 1]),
            fields.host.copied.eq(Cat(*[header_bytes(beat.data, b, 1)
                                        for b in COPIED_BYTES])),
            fields.host.src.eq(beat.src),
            fields.host.dst.eq(beat.dst),
            fields.coalesce.eq(key_eq & (offset == prev_end)),
            fields.key_new.eq(~key_eq),
            fields.idle.eq(late),
        ]
        item = skid.i.payload
        meta = Cat(first, k, last)       # kind (HEADER = 0 when first), k, last
        if self._latency:
            # the fields wait in a FIFO: headers behind this one may come in before the
            # encoder hands on its item (a FIFO of 8 covers the 3 stages and the skid)
            hf = m.submodules.header_fields = LutramFifo(
                width=len(fields.as_value()), depth=8)
            m.d.comb += [hf.w_data.eq(fields), hf.w_en.eq(accept & first)]
            host_in = data.View(HeaderFields, hf.r_data)
            self._header_pop = hf.r_en
            frame = Signal(Pow2Scale, reset_less=True)
            stager = Stager(m, enable, reset_less=True)
            codes = pow2_fixed_codes(
                m, stager, [self._value_read(beat.data[32 * e:32 * e + 32])
                            for e in range(ELEMENTS_PER_BEAT)],
                elements, frame, self._b)
            valid = accept
            stages = []
            for _ in range(self._latency):
                valid = stager.reg(valid, reset_less=False)
                stages.append(valid)
            meta = stager.delay(meta, self._latency, name="meta")
            m.d.comb += [out_valid.eq(valid), skid.i.valid.eq(valid),
                         item.bits.eq(Cat(*codes))]
            self._in_flight = Cat(*stages).any()
        else:
            host_in = Signal(HeaderFields, reset_less=True)
            # (a header's item is taken before the next header can come in)
            with m.If(accept & first):
                m.d.sync += host_in.eq(fields)
            self._header_pop = None
            signs = Cat(*[beat.data[32 * e + 31] for e in range(ELEMENTS_PER_BEAT)])
            m.d.comb += [skid.i.valid.eq(self.i.valid & ~hold),
                         item.bits.eq(signs & elements)]
            self._in_flight = Const(0)
        m.d.comb += [
            item.kind.eq(Mux(meta[0], Kind.HEADER, Kind.PAYLOAD)),
            item.k.eq(meta[1:6]),
            item.last.eq(meta[6]),
        ]
        with m.If(accept):
            with m.If(first):
                m.d.sync += [
                    first.eq(0),
                    rem.eq(n),
                    key_in.eq(key),
                    prev_end.eq(offset + n),
                ]
                if self._latency:
                    m.d.sync += frame.eq(pow2_scale_of(header_bytes(beat.data, HDR.SCALE[0], 4),
                                                       self._b))
                with m.If(~key_eq):
                    m.d.sync += key_pending.eq(1)
            with m.Else():
                m.d.sync += [first.eq(last), rem.eq(rem - ELEMENTS_PER_BEAT)]

        # idle: counted from the cycle after a host frame's last beat, as the reference
        # counts from the end of the frame, up to the cycle the next header is offered (a
        # header this lane holds back, behind a key change or a full encoder, is a host
        # frame that has come: its wait is not idle time)
        timeout = self.cfg_idle_timeout
        frame_ends = accept & ~first & last
        offered = self.i.valid & first
        nxt = Signal(32)
        m.d.comb += nxt.eq(Mux(frame_ends, 0,
                               Mux((since == 2**32 - 1) | offered, since, since + 1)))
        # since + 1 ≥ timeout, from registers (after a frame's end ``since`` is 0 and the
        # timeout, when set, is at least 1)
        ahead = Signal(34)
        m.d.comb += ahead.eq(since + 1 - timeout)
        m.d.sync += [since.eq(nxt), late.eq((timeout != 0) & ~frame_ends & ~ahead[-1])]
        self._late = late
        self._between_frames = first
        return host_in
