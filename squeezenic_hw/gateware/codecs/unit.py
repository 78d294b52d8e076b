"""Beat layouts and the pipeline base shared by every codec encoder/decoder unit.

A codec unit works on one 512-bit beat: 16 fp32 elements (element ``e`` is
bits ``32e+31 … 32e`` of ``tdata``), a per-element ``valid`` mask for partial
beats, and the frame's codec parameters. It is a stream component that takes
one beat per clock and gives one beat per clock after a fixed latency.

A ``meta`` field of any shape rides along unchanged with each beat, so that the
lanes can carry their own side-band (frame boundaries, header fields) through a
unit without a FIFO beside it.
"""

from amaranth import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import Stager, lutram_delay, stage_enable

__all__ = [
    "CodecParams", "SharedParts", "delay_taps",
    "encoder_input_layout", "encoder_output_layout",
    "decoder_input_layout", "decoder_output_layout",
    "PipelinedBeatUnit",
]


class CodecParams(data.Struct):
    """Per-frame codec parameters, as carried in the SqueezeNIC header."""
    param: unsigned(8)        # codec parameter (bits per element for fixed/qsgd)
    stochastic: unsigned(1)   # header flag bit 1
    scale: unsigned(32)       # fp32 bits
    aux: unsigned(32)         # fp32 bits
    seed: unsigned(32)


def _elements(width):
    return data.ArrayLayout(unsigned(width), ELEMENTS_PER_BEAT)


def encoder_input_layout(meta_shape=unsigned(1)):
    """One host beat into an encoder.

    ``offset`` is the tensor index of element 0 of *this beat*; element ``e``
    has tensor index ``offset + e`` (used by the random draws of section 5).
    """
    return data.StructLayout({
        "elements": _elements(32),
        "valid": unsigned(ELEMENTS_PER_BEAT),
        "offset": unsigned(32),
        "params": CodecParams,
        "meta": meta_shape,
    })


def encoder_output_layout(code_width, meta_shape=unsigned(1)):
    """Codes out of an encoder: code ``e`` in its low bits, upper bits zero.

    Codes of elements whose ``valid`` bit is clear are zero.
    """
    return data.StructLayout({
        "codes": _elements(code_width),
        "valid": unsigned(ELEMENTS_PER_BEAT),
        "meta": meta_shape,
    })


def decoder_input_layout(code_width, meta_shape=unsigned(1)):
    """Codes into a decoder; bits above the codec's width are ignored."""
    return data.StructLayout({
        "codes": _elements(code_width),
        "valid": unsigned(ELEMENTS_PER_BEAT),
        "params": CodecParams,
        "meta": meta_shape,
    })


def decoder_output_layout(meta_shape=unsigned(1)):
    """Decoded fp32 elements; elements whose ``valid`` bit is clear are zero."""
    return data.StructLayout({
        "elements": _elements(32),
        "valid": unsigned(ELEMENTS_PER_BEAT),
        "meta": meta_shape,
    })


def delay_taps(m, stager, value, taps, *, name, lutram=False, head=0):
    """``value`` delayed by each of ``taps`` (enabled cycles of ``stager``, each ≥ 1) on
    one delay line; returns ``{tap: delayed value}``. Every tap is a flip-flop.

    Synthesis turns a plain delay line of three or more registers into a shift register
    (an SRL), whose clock-to-out is slow (``lutram_read`` in ``docs/timing.md``): too slow
    in front of deep logic. A ``keep`` on the register two before the first tap ends the
    shift register there (Yosys' ``xilinx_srl`` takes no register whose input net is
    kept); the registers after it stay flip-flops.

    ``lutram``: the line from its ``head`` first registers (flip-flops, for logic that
    registers the same value beside the line to share) to the register before the first
    tap is a :func:`~squeezenic_hw.gateware.common.stream.lutram_delay` (a
    distributed-RAM ring, half a LUT a bit) instead of a shift register (a LUT a bit),
    when that is 2 cycles or more."""
    taps = sorted(set(taps))
    out = {}
    ram = taps[0] - 1 - head
    keep_at = taps[0] - 2 if taps[0] >= 3 else None
    if lutram and ram >= 2:
        keep_at = None
        for k in range(1, head + 1):
            value = stager.reg(value, name=f"{name}_d{k}")
        value = lutram_delay(m, stager, value, ram, name=f"{name}_ram")
    else:
        ram = head = 0
    for k in range(head + ram + 1, taps[-1] + 1):
        if k == keep_at:
            r = Signal(Signal.like(value).shape(), name=f"{name}_d{k}", reset_less=True,
                       attrs={"keep": 1})
            with m.If(stager.enable):
                m.d.sync += r.eq(value)
            value = r
        else:
            value = stager.reg(value, name=f"{name}_d{k}")
        if k in taps:
            out[k] = value
    return out


class SharedParts:
    """Datapath parts that the codecs of one pipeline share, each built once, on first use.

    A bank builds every codec's datapath inside one pipeline, and a beat is of one codec:
    where two codecs need the same part at the same stage (the random draws of every
    stochastic codec; the fp32 multipliers of ``fixed`` and ``qsgd``), the one built first
    serves them all, its per-codec inputs chosen by the beat's ``meta.codec``.

    Parameters
    ----------
    codecs : iterable of int
        Ids of the codecs built into the pipeline (a part serving several codecs chooses
        among these only).
    """

    def __init__(self, codecs):
        self.codecs = frozenset(codecs)
        self._parts = {}

    def get(self, key, build):
        """The part named ``key``, from ``build()`` (no arguments) the first time."""
        if key not in self._parts:
            self._parts[key] = build()
        return self._parts[key]

    def find(self, key):
        """The part named ``key`` if it was built, else ``None``."""
        return self._parts.get(key)


class PipelinedBeatUnit(wiring.Component):
    """Base class: a fixed-latency, fully pipelined beat transformer.

    Subclasses set ``LATENCY`` (cycles, at least 1) and implement
    ``datapath(m, stager, payload, shared=None)``, which must return the output
    payload's data field (``codes`` or ``elements``) registered exactly
    ``LATENCY`` times through ``stager.reg``; ``shared`` is the
    :class:`SharedParts` of the pipeline the datapath is built into (a bank),
    or ``None`` for a unit on its own. The base carries ``valid`` and ``meta`` alongside,
    zeroes invalid elements (an AND behind the last register; a subclass whose
    datapath zeroes them itself, before its last register, sets
    ``_ZEROES_INVALID``), and does the stream handshake.

    Latency: ``LATENCY`` cycles from an accepted input beat to its output beat.
    Throughput: one beat per cycle.
    Backpressure: when ``o.valid & ~o.ready`` the whole pipeline holds
    (``i.ready = o.ready | ~o.valid``); nothing is dropped or reordered, and
    bubbles inside the pipeline are squeezed out while the output waits. With
    ``registered_ready`` the pipeline advances exactly when ``o.ready`` is high
    (``i.ready = o.ready``): where ``o.ready`` is a register (a FIFO's room flag,
    :func:`~squeezenic_hw.gateware.common.stream.fifo_with_room`), so are the enable of
    every stage and ``i.ready``, and no ready chain crosses the unit; bubbles then wait
    with the beats.

    The enable carries the ``max_fanout`` attribute
    (:func:`~squeezenic_hw.gateware.common.stream.stage_enable`).
    """

    LATENCY = None
    #: In a bank, a unit shorter than the bank waits at its input (on the bank's one
    #: delay line of its input) rather than at its results: for units whose results are
    #: as wide as their input or wider.
    WAITS_AT_INPUT = False
    #: Delays of its input (enabled cycles) that the unit takes from the bank's delay
    #: line when the bank has one (``SharedParts.find("input_line")``, ``{tap: payload}``).
    INPUT_TAPS = ()
    #: Enabled cycles for which the unit's datapath registers its input unchanged (a
    #: bank's delay line of the input keeps as many flip-flops at its head, to share).
    HOLDS_INPUT = 0
    _OUT_FIELD = None        # "codes" (encoders) or "elements" (decoders)
    _ZEROES_INVALID = False  # the datapath's results are already zero where invalid

    def __init__(self, in_layout, out_layout, *, registered_ready=False):
        if not isinstance(self.LATENCY, int) or self.LATENCY < 1:
            raise TypeError(f"{type(self).__name__}.LATENCY must be a positive int")
        if not isinstance(registered_ready, bool):
            raise ValueError(f"registered_ready must be a bool, got {registered_ready!r}")
        self._registered_ready = registered_ready
        super().__init__({
            "i": In(stream.Signature(in_layout)),
            "o": Out(stream.Signature(out_layout)),
        })

    @property
    def latency(self):
        return self.LATENCY

    def datapath(self, m, stager, payload, shared=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def elaborate(self, platform):
        m = Module()
        enable = stage_enable()
        m.d.comb += [
            enable.eq(self.o.ready if self._registered_ready else ~self.o.valid | self.o.ready),
            self.i.ready.eq(enable),
        ]
        # Only the valid bits take a reset: the data behind a clear valid bit is never used.
        stager = Stager(m, enable, reset_less=True)
        valid = self.i.valid
        mask = self.i.payload.valid
        meta = self.i.payload.meta
        for k in range(self.LATENCY):
            # the last is ``o.valid``, which the enable of every stage reads: Vivado copies
            # it for every ``MAX_FANOUT`` loads
            valid = stager.reg(valid, name=f"valid_d{k + 1}", reset_less=False,
                               fanout=k == self.LATENCY - 1)
            mask = stager.reg(mask, name=f"mask_d{k + 1}")
            meta = stager.reg(meta, name=f"meta_d{k + 1}")
        result = self.datapath(m, stager, self.i.payload)
        out_field = getattr(self.o.payload, self._OUT_FIELD)
        m.d.comb += [
            self.o.valid.eq(valid),
            self.o.payload.valid.eq(mask),
            self.o.payload.meta.eq(meta),
        ]
        for e in range(ELEMENTS_PER_BEAT):
            if self._ZEROES_INVALID:
                m.d.comb += out_field[e].eq(result[e])
            else:
                with m.If(mask[e]):
                    m.d.comb += out_field[e].eq(result[e])
        return m


class EncoderUnit(PipelinedBeatUnit):
    """Base for encoders: ``datapath`` returns the 16 codes (a list or array)."""
    CODE_WIDTH = None
    _OUT_FIELD = "codes"

    def __init__(self, *, meta_shape=unsigned(1)):
        super().__init__(encoder_input_layout(meta_shape),
                         encoder_output_layout(self.CODE_WIDTH, meta_shape))


class DecoderUnit(PipelinedBeatUnit):
    """Base for decoders: ``datapath`` returns the 16 fp32 elements."""
    CODE_WIDTH = None
    _OUT_FIELD = "elements"

    def __init__(self, *, meta_shape=unsigned(1)):
        super().__init__(decoder_input_layout(self.CODE_WIDTH, meta_shape),
                         decoder_output_layout(meta_shape))


__all__ += ["EncoderUnit", "DecoderUnit"]
