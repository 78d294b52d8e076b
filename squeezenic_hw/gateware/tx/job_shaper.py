"""The TX controller's jobs: decided beats in, encoder jobs with their packing side-band out.

A beat that closes two wire frames (it straddles a frame boundary and ends a host frame
with ``flush``) becomes two jobs: the elements before the boundary closing the first
frame, then the rest, moved to lane 0, closing the second. Every other decided beat is
one job. A job that closes a ``threshold`` frame carries the frame's layout (the shorter
of bitmap and index list, a tie picking the bitmap: wire format section 4).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import bank_meta_layout
from squeezenic_hw.gateware.codecs.unit import encoder_input_layout
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT, PackMeta
from squeezenic_hw.gateware.common.stream import Stager
from squeezenic_hw.spec.threshold import INDEX_LIST

from .coalescer import Cut, job_record_layout

__all__ = ["TxJobShaper", "index_layout_shorter"]


def index_layout_shorter(n, k):
    """The index list is strictly shorter than the bitmap: ``2k < ⌈n/8⌉``, which for
    integers is ``16k < n`` (one compare, no add in front of it)."""
    return (k << 4) < n


class TxJobShaper(wiring.Component):
    """Turns the coalescer's job records into encoder jobs (see the module docstring).

    Parameters
    ----------
    width : int or None
        The one code width built in, when there is one: every job's ``width`` is this
        constant; ``None``: each record's ``width``.

    Attributes
    ----------
    i : In(stream.Signature(job_record_layout()))
    o : Out(stream.Signature(encoder_input_layout(bank_meta_layout(PackMeta))))
        ``meta.codec`` selects the encoder; ``meta.user`` tells the packer (dense) or the
        sparse compactor (threshold) how many codes the job has and where frames close.

    Notes
    -----
    Latency: 3 cycles (stage 0: the record and where it cuts; stage 1: the job's fields, a
    second job's elements moved to lane 0; stage 2: the closing frame's layout, the job's
    tensor offset). Throughput: one job per
    cycle; a record that closes two frames takes two. Backpressure: the pipeline holds
    while ``o.valid & ~o.ready``; nothing is dropped.
    """

    LATENCY = 3

    def __init__(self, *, width=None):
        if width is not None and (isinstance(width, bool) or not isinstance(width, int)
                                  or not 1 <= width <= 32):
            raise ValueError(f"width must be None or an int 1..32, got {width!r}")
        self._width = width
        super().__init__({
            "i": In(stream.Signature(job_record_layout())),
            "o": Out(stream.Signature(encoder_input_layout(bank_meta_layout(PackMeta)))),
        })

    def elaborate(self, platform):
        m = Module()
        enable = Signal()
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)
        st = Stager(m, enable, reset_less=True)

        # ---- stage 0: the record and where it cuts ------------------------------------
        rec_valid = Signal()
        rec = Signal(job_record_layout(), reset_less=True)
        incoming = Cut(m, self.i.payload, "in")
        cut_fields = {"take": incoming.take, "rest": incoming.rest,
                      "close1": incoming.close1, "rest_opens": incoming.rest_opens,
                      "close2": incoming.close2, "prefix_take": incoming.prefix_take,
                      "suffix_take": incoming.suffix_take, "keep_taken": incoming.keep_taken}
        cut = {name: Signal.like(value, name=f"cut_{name}", reset_less=True)
               if isinstance(value, Signal) else Signal(len(value), name=f"cut_{name}",
                                                        reset_less=True)
               for name, value in cut_fields.items()}

        # ---- stage 1: which job of the record, its fields ------------------------------
        second = Signal()           # the second job of a record that closes two frames
        double = cut["close2"]      # (a second close implies the first and a rest)
        last_of_record = ~double | second
        load = enable & (~rec_valid | last_of_record)
        m.d.comb += self.i.ready.eq(load)
        with m.If(load):
            m.d.sync += [rec_valid.eq(self.i.valid), rec.eq(self.i.payload),
                         *[cut[name].eq(value) for name, value in cut_fields.items()]]
        with m.If(enable & rec_valid):
            m.d.sync += second.eq(~last_of_record)

        take = cut["take"]
        rest = cut["rest"]
        count = Signal(5)
        count_mask = Signal(ELEMENTS_PER_BEAT)
        split = Signal(5)
        close_mid = Signal()
        close_end = Signal()
        base = Signal(16)
        n_close = Signal(16)        # the closing frame's elements, kept elements
        k_close = Signal(16)
        shift = Signal(5)           # lanes the job's elements move down

        def mask(c):
            return Cat(Const(e, 5) < c for e in range(ELEMENTS_PER_BEAT))

        with m.If(second):
            m.d.comb += [count.eq(rest), split.eq(rest), close_end.eq(1),
                         base.eq(0), n_close.eq(rest), k_close.eq(cut["suffix_take"]),
                         shift.eq(take), count_mask.eq(mask(rest))]
        with m.Elif(double):
            m.d.comb += [count.eq(take), split.eq(take), close_end.eq(1),
                         base.eq(rec.n_before), n_close.eq(rec.n_before + take),
                         k_close.eq(rec.k_before + cut["prefix_take"]),
                         count_mask.eq(mask(take))]
        with m.Else():
            m.d.comb += [count.eq(rec.v), split.eq(take), count_mask.eq(mask(rec.v)),
                         close_mid.eq(cut["close1"] & cut["rest_opens"]),
                         close_end.eq(cut["close1"] & ~cut["rest_opens"]),
                         base.eq(rec.n_before), n_close.eq(rec.n_before + take),
                         k_close.eq(rec.k_before + cut["prefix_take"])]
        elements = Signal(32 * ELEMENTS_PER_BEAT)
        keep = Signal(ELEMENTS_PER_BEAT)
        shifted = Signal(32 * ELEMENTS_PER_BEAT)
        shifted_keep = Signal(ELEMENTS_PER_BEAT)
        with m.Switch(take):
            for t in range(ELEMENTS_PER_BEAT):
                with m.Case(t):
                    m.d.comb += [shifted.eq(rec.elements.as_value() >> (32 * t)),
                                 shifted_keep.eq(rec.keep >> t)]
        # the record's keep bits stop at v, so the second job's need no mask
        m.d.comb += [
            elements.eq(Mux(second, shifted, rec.elements.as_value())),
            keep.eq(Mux(second, shifted_keep, Mux(double, cut["keep_taken"], rec.keep))),
        ]

        s1_valid = st.reg(rec_valid, name="s1_valid", reset_less=False)
        s1 = {name: st.reg(value, name=f"s1_{name}") for name, value in {
            "elements": elements, "mask": count_mask, "keep": keep,
            "count": count, "split": split, "close_mid": close_mid, "close_end": close_end,
            "base": base, "n_close": n_close, "k_close": k_close, "shift": shift,
            "offset": rec.offset, "codec": rec.codec, "params": rec.params,
            "width": rec.width}.items()}

        # ---- stage 2: layout, offset ---------------------------------------------------
        job = Signal.like(self.o.payload)
        user = job.meta.user
        m.d.comb += [
            job.elements.as_value().eq(s1["elements"]),
            job.valid.eq(s1["mask"]),
            job.offset.eq(s1["offset"] + s1["shift"]),
            job.params.eq(s1["params"]),
            job.meta.codec.eq(s1["codec"]),
            user.width.eq(s1["width"] if self._width is None else self._width),
            user.count.eq(s1["count"]),
            user.split.eq(s1["split"]),
            user.close_mid.eq(s1["close_mid"]),
            user.close_end.eq(s1["close_end"]),
            user.keep.eq(s1["keep"]),
            user.base.eq(s1["base"]),
            user.layout.eq(Mux(index_layout_shorter(s1["n_close"], s1["k_close"]),
                               INDEX_LIST, 0)),
        ]
        m.d.comb += [
            self.o.valid.eq(st.reg(s1_valid, name="s2_valid", reset_less=False)),
            self.o.payload.eq(st.reg(job, name="s2_job")),
        ]
        return m
