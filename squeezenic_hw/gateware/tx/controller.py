"""The TX lane's frame controller: bypass or encode, coalesce, and decide where wire frames close.

It sits after the :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`
and turns host frames into three streams, all in the order the reference
(:func:`squeezenic_hw.reference.lane.tx`) emits frames:

* ``jobs`` — payload beats for the :class:`~squeezenic_hw.gateware.codecs.bank.EncoderBank`,
  each tagged with a :class:`~squeezenic_hw.gateware.common.layouts.PackMeta` that tells
  the packer how many codes it carries, their width and where the open wire frame closes;
* ``desc`` — one header request per output frame for the
  :class:`~squeezenic_hw.gateware.lane.header_builder.HeaderBuilder`: a wire frame
  (``built = 1``) when it closes, or a bypassed frame (``built = 0``) when its header
  arrives;
* ``bypass`` — the beats of bypassed frames, unchanged.

It is a pipeline of four blocks: the prep feeds the coalescer directly (its pipeline
enable is the coalescer's ``ready``, a gate from the registered readies of the FIFOs
behind it), FIFOs stand between the coalescer and the shaper and sizer, so that no ready
signal and no long path crosses further::

    i ─► TxBeatPrep ─► TxCoalescer ─┬─ job records ─► TxJobShaper ─► jobs
                                    ├─ records ─► TxCloseSizer ─► desc
                                    └─ bypass beats ──────────────► bypass

:class:`~.prep.TxBeatPrep` reads frames (element counts, the coalescing-key compare,
capacities, keep counts, ``tuser_size`` errors); :class:`~.coalescer.TxCoalescer` decides,
one beat per cycle from registers, where wire frames close; the shaper and the sizer turn
its decisions into encoder jobs and header requests.
"""

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.codecs.bank import bank_meta_layout, codec_widths
from squeezenic_hw.gateware.codecs.unit import encoder_input_layout
from squeezenic_hw.gateware.common.layouts import (
    PackMeta,
    axis_signature,
    token_tag_layout,
)
from squeezenic_hw.gateware.common.stream import LutramBuffer, fifo_between
from squeezenic_hw.gateware.lane.classifier import ClassifiedBeat
from squeezenic_hw.gateware.lane.header_builder import header_request_layout
from squeezenic_hw.gateware.sparse.frame_builder import SPARSE_MIN_MTU
from squeezenic_hw.spec.codecs import THRESHOLD_ID, resolve_codecs
from squeezenic_hw.spec.counters import TX_COUNTERS
from squeezenic_hw.spec.header import DEFAULT_MTU, HEADER_LEN, MAX_PKT_LEN
from squeezenic_hw.spec.threshold import MAX_N

from .close_sizer import TxCloseSizer
from .coalescer import TxCoalescer, tx_counters_layout
from .job_shaper import TxJobShaper
from .prep import TxBeatPrep

__all__ = ["TxController", "check_controller_parameters", "tx_counters_layout"]


def check_controller_parameters(*, codecs, mtu, idle_timeout, trusted, widths,
                                input_buffer):
    """:class:`TxController`'s parameters checked (``ValueError`` naming the first bad
    one), before anything is built: ``(codec ids, code widths)``, both sorted."""
    if not isinstance(trusted, bool):
        raise ValueError(f"trusted must be a bool, got {trusted!r}")
    if not isinstance(input_buffer, bool):
        raise ValueError(f"input_buffer must be a bool, got {input_buffer!r}")
    if not HEADER_LEN + 4 <= mtu <= MAX_PKT_LEN:
        raise ValueError(f"mtu must be from {HEADER_LEN + 4} to {MAX_PKT_LEN} bytes, "
                         f"got {mtu!r}")
    if idle_timeout is not None and not 1 <= idle_timeout < 2**32:
        raise ValueError(f"idle_timeout must be None or 1…2**32-1 cycles, "
                         f"got {idle_timeout!r}")
    codecs = sorted(resolve_codecs(codecs))
    if THRESHOLD_ID in codecs and mtu < SPARSE_MIN_MTU:
        raise ValueError(f"mtu must be at least {SPARSE_MIN_MTU} bytes with threshold "
                         f"built in (16 kept values per wire frame), got {mtu!r}")
    built = codec_widths(codecs)
    if widths is not None:
        try:
            widths = set(widths)
        except TypeError:
            raise ValueError(f"widths must be None or a set of code widths, "
                             f"got {widths!r}") from None
        if not widths or not widths <= built:
            raise ValueError(f"widths must be a non-empty subset of the codecs' code "
                             f"widths {sorted(built)}, got {sorted(widths)!r}")
        built = widths
    return codecs, sorted(built) or [32]


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
        (counted from the cycle after the last beat of the last host frame put in it,
        as the reference counts); ``None``: never. The port ``cfg_idle_timeout`` (init
        this value, 0 = never) sets it at run time.
    widths : set of int, optional
        The code widths built for (default: every width of ``codecs``); frames of other
        widths must not arrive. With one width (e.g. ``sign`` alone) the width and the
        capacity are constants and ``n·b`` a constant product.
    trusted : bool
        The input never holds a frame to bypass (``i.payload.bypass`` is 0 on every
        beat: a trusted on-chip source behind no classifier). ``bypass`` is then never
        valid and its buffer is left out.
    input_buffer : bool
        Take the input through a buffer of four beats (distributed RAM; ``i.ready`` a
        compare of its level), default ``True``. ``False`` where the source already is
        such a queue (a lane's :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier`
        built with ``depth``): ``i.ready`` is then the first stage's, from registers.

    Notes
    -----
    Latency: a host beat's job leaves ``LATENCY_JOBS`` cycles after the beat is accepted
    (input buffer 1, prep 2, coalescer 2, FIFO 2, shaper 3; one less without the input
    buffer, ``input_buffer=False``); a closing frame's header
    request ``LATENCY_DESC`` cycles after its last beat (the sizer takes 5).
    Throughput: one input beat per cycle, closes included (a beat that closes two frames
    becomes two jobs and two requests, which the FIFOs absorb); idle/``close`` closes take
    a cycle with no beat; wire frames of fewer than 16 codes (tiny MTUs) take a cycle per
    piece of a beat; threshold frames below an MTU of
    :data:`~.coalescer.SPARSE_SPECULATION_MTU` take two cycles a beat.
    Backpressure: the input (a
    :class:`~squeezenic_hw.gateware.common.stream.LutramBuffer` of four beats read through
    a register, or the classifier's queue: ``i.ready`` a flip-flop of its level, never of
    anything downstream)
    and the jobs and header requests are buffered (FIFOs). ``bypass`` is the coalescer's
    output register, whose ``ready`` the coalescer reads: the lane's bypass FIFO, whose
    ``w_rdy`` is a register. Nothing is dropped.
    Frames whose beats end before ``tuser_size`` says are padded with zero elements, extra
    beats are discarded; both count in ``size_errors``.
    """

    LATENCY_JOBS = 1 + TxBeatPrep.LATENCY + 2 + 2 + TxJobShaper.LATENCY
    LATENCY_DESC = 1 + TxBeatPrep.LATENCY + 2 + 2 + TxCloseSizer.LATENCY

    def __init__(self, *, codecs=None, mtu=DEFAULT_MTU, idle_timeout=None, trusted=False,
                 widths=None, input_buffer=True):
        self._codecs, self._widths = check_controller_parameters(
            codecs=codecs, mtu=mtu, idle_timeout=idle_timeout, trusted=trusted,
            widths=widths, input_buffer=input_buffer)
        self._trusted = trusted
        self._input_buffer = input_buffer
        self._sparse = THRESHOLD_ID in self._codecs
        self._mtu = mtu
        self._idle_timeout = idle_timeout
        super().__init__({
            "i": In(stream.Signature(ClassifiedBeat)),
            "jobs": Out(stream.Signature(encoder_input_layout(bank_meta_layout(PackMeta)))),
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
        # one code width (and no threshold): width, capacity and n·b are constants
        single = self._widths[0] if len(self._widths) == 1 and not self._sparse else None
        m.submodules.prep = prep = TxBeatPrep(capacity=self.capacity, widths=self._widths,
                                              sparse=self._sparse)
        m.submodules.coalescer = coal = TxCoalescer(
            mtu=self._mtu, sparse=self._sparse, idle_timeout=self._idle_timeout,
            cap=None if single is None else self.capacity(single))
        m.submodules.shaper = shaper = TxJobShaper(width=single)
        m.submodules.sizer = sizer = TxCloseSizer(width=single, sparse=self._sparse)

        # whole beats wait in LUTRAM buffers (half the LUTs of a skid buffer's two
        # registers and multiplexer, a third of its flip-flops)
        if self._input_buffer:
            m.submodules.in_skid = in_skid = LutramBuffer(ClassifiedBeat)
            wiring.connect(m, wiring.flipped(self.i), in_skid.i)
            wiring.connect(m, in_skid.o, prep.i)
        else:
            wiring.connect(m, wiring.flipped(self.i), prep.i)
        wiring.connect(m, prep.o, coal.i)
        # FIFOs rather than skid buffers in front of the shaper and the sizer: a beat that
        # closes two frames costs them a cycle more, which these absorb
        fifo_between(m, "job_fifo", coal.jobs, shaper.i, 4)
        fifo_between(m, "record_fifo", coal.records, sizer.i, 4)
        if self._trusted:
            m.d.comb += [coal.bypass.ready.eq(1), self.bypass.valid.eq(0)]
        else:
            # the coalescer's registered bypass beat goes straight out: the lane's bypass
            # FIFO behind it has a registered ready
            wiring.connect(m, coal.bypass, wiring.flipped(self.bypass))
        wiring.connect(m, shaper.o, wiring.flipped(self.jobs))
        wiring.connect(m, sizer.o, wiring.flipped(self.desc))

        m.d.comb += [
            coal.close.eq(self.close),
            self.close_done.eq(coal.close_done),
            coal.cfg_idle_timeout.eq(self.cfg_idle_timeout),
        ]
        for name in TX_COUNTERS:
            source = prep.size_errors if name == "size_errors" else coal.counters[name]
            m.d.comb += self.counters[name].eq(source)
        return m
