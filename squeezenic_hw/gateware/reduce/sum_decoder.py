"""The finishing node's delivery of the integer codecs (``docs/wire-format.md`` section
8.2): the finished sums of a chunk as the fp32 values its host receives."""

from amaranth import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.fp32_mul import Fp32Multiplier
from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import LutramFifo, Stager, lutram_delay
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.reduce import INTEGER_CODECS

from .layouts import ReduceConfig, integer_codecs, sums_job_layout

__all__ = ["SumDecoder", "decoded_sums_layout", "SIGN_TABLE_DEPTH"]

_FIXED, _QSGD, _SIGN = (codec_info(c).id for c in INTEGER_CODECS)
#: Entries of the ``sign`` table: a value for every count n1 = 0 … N (N ≤ 16).
SIGN_TABLE_DEPTH = 32
#: Stages before the multipliers: sign extension; magnitude; leading one; fp32 of S.
_TO_FLOAT = 4
_QUEUE = 32


def decoded_sums_layout():
    """Up to 16 host values: ``elements[0 … count−1]`` (fp32 bits, zero above);
    ``last``: the frame's last."""
    return data.StructLayout({
        "elements": data.ArrayLayout(unsigned(32), ELEMENTS_PER_BEAT),
        "count": unsigned(5), "last": unsigned(1)})


class SumDecoder(wiring.Component):
    """Turns jobs of finished sums into the host's fp32 values, bit-exact with
    :func:`~squeezenic_hw.reference.allreduce.integer_values`.

    * ``fixed``, ``qsgd``: S, the sum as two's complement of the job's width w, made an
      fp32 exactly (|S| < 2**20: a leading-one search and a left shift), then fl32(S ·
      ``aux``) on an :class:`~squeezenic_hw.gateware.codecs.fp32_mul.Fp32Multiplier`
      (two DSP48E2 with registered ports; a NaN result is the canonical NaN).
    * ``sign``: the value of count n1 is read from a table of the N + 1 values
      fl32(fl32(n0 · ``scale``) + fl32(n1 · ``aux``)) that software writes (through
      ``table_*``) when it configures the ring: the sum of two products is fixed by N,
      ``scale`` and ``aux``, so the table replaces an fp32 adder per element. One
      32-entry distributed RAM a value lane (16 copies), each read into a register.

    Parameters
    ----------
    codecs : iterable of str or int
        The codecs built in; the integer ones among them get logic.
    sum_width : int
        Bits of a sum on ``i`` (the widest w of the build), 2 … 20.

    Attributes
    ----------
    i : In(stream.Signature(sums_job_layout(sum_width)))
        The finished sums, by jobs of up to 16.
    o : Out(stream.Signature(decoded_sums_layout()))
        Their values, job for job.
    cfg : In(ReduceConfig)
        ``codec`` and ``aux`` are read (into registers, a cycle later).
    table_addr, table_data, table_we : In(5), In(32), In(1)
        The ``sign`` table's write port: entry n1 = ``table_addr`` takes ``table_data``.

    Notes
    -----
    Latency: ``latency`` cycles from a job accepted to its values in the output queue,
    ``_TO_FLOAT`` + 7 (the multiplier) with ``fixed`` or ``qsgd`` built, else 1 (the
    table's read); the ``sign`` counts wait in a distributed-RAM delay line beside the
    multipliers. Then the queue's two. Throughput: one job per cycle. Backpressure: the
    stages never stall; ``i.ready`` is a register, set while the output queue has room
    for every job in flight; ``o`` reads the queue. Only valid bits, the queue's
    pointers and ``i.ready`` are reset.

    Resources, measured with ``python -c "from squeezenic_hw.flows import synth; from
    squeezenic_hw.gateware.reduce.sum_decoder import SumDecoder;
    print(synth.synthesize(SumDecoder(), timing=True).summary())"``: 9 171 LUT, 101 LUTRAM
    and 70 SRL, 10 499 FF, 0 BRAM, 32 DSP (two a multiplier); estimated 2.57 ns, at most
    4 LUT levels. ``SumDecoder(codecs=["sign"], sum_width=5)``: 545 LUT, 85 LUTRAM (the
    16 tables, the output queue), 1 062 FF, 0 DSP, 2.05 ns, 3 levels.
    """

    def __init__(self, *, codecs=INTEGER_CODECS, sum_width=20):
        self.codecs = integer_codecs(codecs)
        if isinstance(sum_width, bool) or not isinstance(sum_width, int) or not (
                2 <= sum_width <= 20):
            raise ValueError(f"sum_width must be an int from 2 to 20, got {sum_width!r}")
        self.sum_width = sum_width
        self.multiplies = bool(set(self.codecs) - {"sign"})
        self.latency = _TO_FLOAT + Fp32Multiplier.LATENCY if self.multiplies else 1
        super().__init__({
            "i": In(stream.Signature(sums_job_layout(sum_width))),
            "o": Out(stream.Signature(decoded_sums_layout())),
            "cfg": In(ReduceConfig),
            "table_addr": In(5),
            "table_data": In(32),
            "table_we": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        sw = self.sum_width
        job = self.i.payload
        out_layout = decoded_sums_layout()
        queue = m.submodules.queue = LutramFifo(width=data.Layout.cast(out_layout).size,
                                                depth=_QUEUE)
        room = Signal(init=1)
        m.d.sync += room.eq(queue.level <= _QUEUE - self.latency - 3)
        accept = Signal()
        m.d.comb += [self.i.ready.eq(room), accept.eq(self.i.valid & room)]
        st = Stager(m, 1, reset_less=True)
        valid = accept
        for k in range(self.latency):
            valid = st.reg(valid, name=f"valid{k + 1}", reset_less=False)
        side = st.delay(Cat(job.count, job.last), self.latency, name="side")

        is_sign = Signal()
        aux = Signal(32)
        m.d.sync += [is_sign.eq((self.cfg.codec == _SIGN) if "sign" in self.codecs else 0),
                     aux.eq(self.cfg.aux)]

        if "sign" in self.codecs:
            counts = [job.sums[e][:5] for e in range(ELEMENTS_PER_BEAT)]
            if self.latency > 1:
                counts = [lutram_delay(m, st, c, self.latency - 1, name=f"count{e}")
                          for e, c in enumerate(counts)]
            # one copy of the table a lane, each with its one read port (distributed RAM)
            signs = []
            for e in range(ELEMENTS_PER_BEAT):
                table = m.submodules[f"sign_table{e}"] = Memory(
                    shape=unsigned(32), depth=SIGN_TABLE_DEPTH, init=[])
                wp = table.write_port()
                rp = table.read_port()
                m.d.comb += [wp.addr.eq(self.table_addr), wp.data.eq(self.table_data),
                             wp.en.eq(self.table_we), rp.addr.eq(counts[e])]
                signs.append(rp.data)
        if self.multiplies:
            # stage 1: S sign-extended from the job's width
            top = Cat(job.width == b + 1 for b in range(sw))         # bit w − 1
            above = Cat(job.width <= b for b in range(sw))           # bits from w up
            products = []
            for e in range(ELEMENTS_PER_BEAT):
                s = job.sums[e]
                negative = (s & top).any()
                ext1 = st.reg(s | Mux(negative, above, 0), name=f"s{e}")
                neg1 = st.reg(negative, name=f"neg{e}_1")
                # stage 2: its magnitude (|S| ≤ 2**19)
                mag2 = st.reg(Mux(neg1, -ext1, ext1)[:sw], name=f"mag{e}")
                neg2 = st.reg(neg1, name=f"neg{e}_2")
                # stage 3: the leading one's position (0 when S = 0)
                lead = 0
                for b in range(1, sw):
                    lead = Mux(mag2[b], b, lead)
                lead3 = st.reg(lead, name=f"lead{e}")
                mag3 = st.reg(mag2, name=f"mag{e}_3")
                neg3 = st.reg(neg2, name=f"neg{e}_3")
                # stage 4: fp32 of S, exactly: the magnitude shifted to the hidden bit
                shifted = (mag3 << 23) >> lead3
                f32 = Cat(shifted[:23], (127 + lead3)[:8], neg3)
                a4 = st.reg(Mux(mag3 == 0, 0, f32), name=f"f32_{e}")     # S = 0: +0.0
                mul = m.submodules[f"mul{e}"] = Fp32Multiplier()
                m.d.comb += [mul.a.eq(a4), mul.b.eq(aux), mul.en.eq(1)]
                products.append(mul.p)
        out = Signal(out_layout)
        for e in range(ELEMENTS_PER_BEAT):
            if "sign" in self.codecs and self.multiplies:
                value = Mux(is_sign, signs[e], products[e])
            elif self.multiplies:
                value = products[e]
            else:
                value = signs[e]
            m.d.comb += out.elements[e].eq(Mux(e < out.count, value, 0))
        m.d.comb += [
            Cat(out.count, out.last).eq(side),
            queue.w_en.eq(valid), queue.w_data.eq(out),
            self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data),
            queue.r_en.eq(self.o.ready),
        ]
        return m
