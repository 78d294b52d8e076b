"""The host's contribution frames made into the codes the reduce-phase hop adds
(``docs/wire-format.md`` sections 8.2 and 8.5): each taken frame's fp32 values encoded with
the ring's settings and the node's seed, in the order they came."""

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import EncoderBank
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT, field_le
from squeezenic_hw.gateware.common.stream import fifo_with_room
from squeezenic_hw.spec.header import HDR

from .code_aligner import check_code_width, host_codes_layout
from .layouts import ContributionBeat, ReduceConfig, integer_codecs

__all__ = ["ContributionEncoder"]

#: Entries of the codes' queue behind the encoders (its room is their one enable).
_QUEUE_DEPTH = 4


class ContributionEncoder(wiring.Component):
    """Encodes the payload of each contribution frame taken: beats of up to 16 fp32 values
    in, beats of as many codes out (the frame's last beat holds the rest).

    The frame's header gives ``n`` and ``offset``; each payload beat goes through an
    :class:`~squeezenic_hw.gateware.codecs.bank.EncoderBank` of the integer codecs with
    ``cfg``'s codec, ``param``, ``stochastic``, ``scale``, ``aux`` and ``seed`` (the
    node's, ``seed`` + r) and the tensor index of its first element, so its codes are
    :func:`~squeezenic_hw.reference.codecs.encode`'s of the same values.

    Parameters
    ----------
    codecs : iterable of str or int
        The codecs built in; the integer ones (at least one) get an encoder.
    code_width : int
        Bits of a code on ``o`` (1 … 16): the adder's ``code_width``; a code is its
        low ``code_width`` bits.

    Attributes
    ----------
    i : In(stream.Signature(ContributionBeat))
        The beats of the contribution frames taken, header beat first.
    o : Out(stream.Signature(host_codes_layout(code_width)))
        The codes, ``count`` (1 … 16) a beat, in tensor order of each frame.
    cfg : In(ReduceConfig)
        ``codec``, ``param``, ``stochastic``, ``scale``, ``aux`` and ``seed`` are read
        on every beat.

    Notes
    -----
    Latency: the encoder bank's ``LATENCY`` (16 cycles with ``fixed`` or ``qsgd``, 5 with
    ``sign`` alone), then the codes' queue's two. Throughput: one beat per cycle; a
    frame's header beat gives no codes. Backpressure: ``i.ready`` is the codes' queue's
    room, a register, and the bank's one enable; ``o`` holds its beat while not ready.
    Nothing is dropped or reordered. Only valid bits and the queue's pointers are reset.
    """

    def __init__(self, *, codecs, code_width):
        self.codecs = integer_codecs(codecs)
        self.code_width = check_code_width(code_width)
        self._bank = EncoderBank(self.codecs, meta_shape=unsigned(5), registered_ready=True)
        super().__init__({
            "i": In(stream.Signature(ContributionBeat)),
            "o": Out(stream.Signature(host_codes_layout(self.code_width))),
            "cfg": In(ReduceConfig),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.encoders = bank = self._bank
        c = self.cfg
        beat = self.i.payload.beat
        header = self.i.payload.first

        # the frame's elements left and the next beat's tensor index, from its header
        left = Signal(16, name="elements_left")
        index = Signal(32, name="beat_index")
        moves = self.i.valid & self.i.ready
        with m.If(moves & header):
            m.d.sync += [left.eq(field_le(beat.data, *HDR.N)),
                         index.eq(field_le(beat.data, *HDR.OFFSET))]
        with m.Elif(moves):
            m.d.sync += [left.eq(left - ELEMENTS_PER_BEAT),
                         index.eq(index + ELEMENTS_PER_BEAT)]
        full = left[4:] != 0
        count = Mux(full, ELEMENTS_PER_BEAT, left[:4])
        # the first ``count`` elements are valid: a thermometer of ``left``
        valid_mask = Signal(ELEMENTS_PER_BEAT, name="valid_mask")
        m.d.comb += valid_mask.eq(Mux(full, Const(-1, ELEMENTS_PER_BEAT),
                                      (Const(1, ELEMENTS_PER_BEAT + 1) << left[:4]) - 1))
        p = bank.i.payload
        m.d.comb += [
            self.i.ready.eq(bank.i.ready),
            bank.i.valid.eq(self.i.valid & ~header),
            p.elements.eq(beat.data),
            p.valid.eq(valid_mask),
            p.offset.eq(index),
            p.params.param.eq(c.param),
            p.params.stochastic.eq(c.stochastic),
            p.params.scale.eq(c.scale),
            p.params.aux.eq(c.aux),
            p.params.seed.eq(c.seed),
            p.meta.codec.eq(c.codec),
            p.meta.user.eq(count),
        ]

        # the codes, narrowed, into a queue whose room is the bank's enable
        codes = stream.Signature(host_codes_layout(self.code_width)).create(path=("codes",))
        out = bank.o.payload
        m.d.comb += [
            codes.valid.eq(bank.o.valid),
            bank.o.ready.eq(codes.ready),
            codes.payload.count.eq(out.meta.user),
        ]
        for e in range(ELEMENTS_PER_BEAT):
            m.d.comb += codes.payload.codes[e].eq(out.codes[e][:self.code_width])
        fifo_with_room(m, "codes_queue", codes, self.o, _QUEUE_DEPTH)
        return m
