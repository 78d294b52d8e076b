"""The TX controller's jobs: decided beats in, encoder jobs with their packing side-band out.

A beat that closes two wire frames (it straddles a frame boundary and ends a host frame
with ``flush``) becomes two jobs: the beat as a ``close_mid`` job (the elements before the
boundary close the first frame, the rest open the second, as for any straddling beat),
then a job with no elements that closes the second frame. Every other decided beat is one
job. A job that closes a ``threshold`` frame carries the frame's layout (the shorter
of bitmap and index list, a tie picking the bitmap: wire format section 4). A job with no
elements keeps none (``keep`` 0): the sparse compactor counts every ``keep`` bit it is
given, and a close between frames would otherwise carry the last beat's mask.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import bank_meta_layout
from squeezenic_hw.gateware.codecs.unit import encoder_input_layout
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT, PackMeta
from squeezenic_hw.gateware.common.stream import Stager, stage_enable
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
    Latency: 3 cycles (stage 0: the record and where it cuts; stage 1: the job's fields;
    stage 2: the closing frame's layout). Throughput: one job per
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
        enable = stage_enable()
        m.d.comb += enable.eq(~self.o.valid | self.o.ready)
        st = Stager(m, enable, reset_less=True)

        # ---- stage 0: the record and where it cuts ------------------------------------
        rec_valid = Signal()
        rec = Signal(job_record_layout(), reset_less=True)
        incoming = Cut(m, self.i.payload, "in")
        cut_fields = {"take": incoming.take, "rest": incoming.rest,
                      "close1": incoming.close1, "rest_opens": incoming.rest_opens,
                      "close2": incoming.close2, "prefix_take": incoming.prefix_take,
                      "suffix_take": incoming.suffix_take}
        cut = {name: Signal.like(value, name=f"cut_{name}", reset_less=True)
               if isinstance(value, Signal) else Signal(len(value), name=f"cut_{name}",
                                                        reset_less=True)
               for name, value in cut_fields.items()}

        # ---- stage 1: which job of the record, its fields ------------------------------
        second = Signal()           # the second job of a record that closes two frames
        double = cut["close2"]      # (a second close implies the first and a rest)
        last_of_record = ~double | second
        load = stage_enable("load")     # the record registers' enable (wide)
        m.d.comb += [load.eq(enable & (~rec_valid | last_of_record)), self.i.ready.eq(load)]
        with m.If(load):
            m.d.sync += [rec_valid.eq(self.i.valid), rec.eq(self.i.payload),
                         *[cut[name].eq(value) for name, value in cut_fields.items()]]
        with m.If(enable & rec_valid):
            m.d.sync += second.eq(~last_of_record)

        take = cut["take"]
        rest = cut["rest"]
        count = Signal(5)
        split = Signal(5)
        close_mid = Signal()
        close_end = Signal()
        base = Signal(16)
        n_close = Signal(16)        # the closing frame's elements, kept elements
        k_close = Signal(16)

        with m.If(second):
            # no elements: the first job's close_mid already put the second frame's
            # `rest` elements in place; this one closes it
            m.d.comb += [count.eq(0), split.eq(0), close_end.eq(1), base.eq(rest),
                         n_close.eq(rest), k_close.eq(cut["suffix_take"])]
        with m.Else():
            m.d.comb += [count.eq(rec.v), split.eq(take),
                         close_mid.eq(cut["close1"] & cut["rest_opens"]),
                         close_end.eq(cut["close1"] & ~cut["rest_opens"]),
                         base.eq(rec.n_before), n_close.eq(rec.n_before + take),
                         k_close.eq(rec.k_before + cut["prefix_take"])]
        count_mask = Mux(second, 0, Cat(Const(e, 5) < rec.v for e in range(ELEMENTS_PER_BEAT)))

        s1_valid = st.reg(rec_valid, name="s1_valid", reset_less=False)
        s1 = {name: st.reg(value, name=f"s1_{name}") for name, value in {
            "elements": rec.elements.as_value(), "mask": count_mask,
            "keep": Mux(second | rec.close_only, 0, rec.keep),
            "count": count, "split": split, "close_mid": close_mid, "close_end": close_end,
            "base": base, "n_close": n_close, "k_close": k_close,
            "offset": rec.offset, "codec": rec.codec, "params": rec.params,
            "width": rec.width}.items()}

        # ---- stage 2: layout -----------------------------------------------------------
        job = Signal.like(self.o.payload)
        user = job.meta.user
        m.d.comb += [
            job.elements.as_value().eq(s1["elements"]),
            job.valid.eq(s1["mask"]),
            job.offset.eq(s1["offset"]),
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
