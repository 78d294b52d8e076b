"""Every codec of a lane in one pipeline: ``EncoderBank`` (TX) and ``DecoderBank`` (RX).

A lane carries frames of different codecs back to back, so it cannot route a
beat to one unit and hope the units' different latencies keep the order.
Instead a bank builds the datapath of every codec it is given inside *one*
pipeline with one shared stall (the units' ``datapath`` methods, see
:class:`~squeezenic_hw.gateware.codecs.unit.PipelinedBeatUnit`), delays the
shorter ones to the longest latency and selects the result by the beat's
codec id, zeroing invalid elements, into an output register (two cycles more
than the longest unit: each unit's results are registered once more, cleared
unless the beat is of its codec, and the output register takes their OR,
cleared where an element is invalid; the clears are the flip-flops'
synchronous resets, so the selection is an OR of a few flip-flops a bit, not a
multiplexer on the codec id). Beats therefore leave in order, one per cycle,
whatever the codec.

A beat is of one codec, so what several codecs need is built once
(:class:`~squeezenic_hw.gateware.codecs.unit.SharedParts`) and serves the beat's:
one random generator for every stochastic codec, one ``fixed``/``qsgd`` datapath
(its 16 fp32 multipliers) in each bank, which in the encoder bank also rounds
``fp16``'s subnormal range (:class:`~.fp16_levels.Fp16LevelEncoder`). The decoder bank
delays the input of its short decoders (one delay line) rather than their 32-bit results.

Codes travel as 32-bit fields (a codec's code in the low bits, zero above), so
the packer and unpacker see one layout for every codec.
"""

from functools import reduce
from operator import or_

from amaranth import Cat, Signal, unsigned
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT
from squeezenic_hw.gateware.common.stream import lutram_delay_each, split_like
from squeezenic_hw.spec.codecs import codec_info

from .bf16 import Bf16Decoder, Bf16Encoder
from .fixed import FixedDecoder, FixedEncoder
from .fp16 import Fp16Decoder, Fp16Encoder
from .fp16_levels import Fp16LevelEncoder
from .levels import fp16_on_levels
from .natural import NaturalDecoder, NaturalEncoder
from .qsgd import QsgdDecoder, QsgdEncoder
from .raw import RawDecoder, RawEncoder
from .sign import SignDecoder, SignEncoder
from .unit import (
    PipelinedBeatUnit,
    SharedParts,
    decoder_input_layout,
    decoder_output_layout,
    delay_taps,
    encoder_input_layout,
    encoder_output_layout,
)

__all__ = ["ENCODERS", "DECODERS", "bank_meta_layout", "EncoderBank", "DecoderBank",
           "codec_widths"]

#: Encoder unit class of each codec, by registry name.
ENCODERS = {"raw": RawEncoder, "fp16": Fp16Encoder, "bf16": Bf16Encoder, "fixed": FixedEncoder,
            "qsgd": QsgdEncoder, "sign": SignEncoder, "natural": NaturalEncoder}
#: Decoder unit class of each codec, by registry name.
DECODERS = {"raw": RawDecoder, "fp16": Fp16Decoder, "bf16": Bf16Decoder, "fixed": FixedDecoder,
            "qsgd": QsgdDecoder, "sign": SignDecoder, "natural": NaturalDecoder,
            # threshold: the RX lane's SparseExpander already put the kept values (or
            # +0.0) in the codes, so decoding is the identity
            "threshold": RawDecoder}


def codec_widths(codecs):
    """The set of code widths (bits per element) the codecs can use."""
    widths = set()
    for c in codecs:
        info = codec_info(c)
        if info.variable:
            continue   # threshold has no code width: it is not packed by the WirePacker
        if info.bits is not None:
            widths.add(info.bits)
        else:
            widths.update(range(info.param_range[0], info.param_range[1] + 1))
    return widths


def bank_meta_layout(user_shape):
    """The bank's ``meta``: the beat's codec id (selects the result) and the user's side-band."""
    return data.StructLayout({"codec": unsigned(3), "user": user_shape})


def _units_by_id(codecs, table):
    """``{codec id: unit class}`` for ``codecs`` (names or ids), in id order; ``ValueError``
    naming ``codecs`` for an unknown codec or one with no unit in ``table``."""
    infos = sorted({codec_info(c) for c in codecs}, key=lambda info: info.id)
    if not infos:
        raise ValueError("codecs: a bank needs at least one codec")
    missing = [info.name for info in infos if info.name not in table]
    if missing:
        raise ValueError(f"codecs: no hardware for codec(s) {missing}")
    return {info.id: table[info.name] for info in infos}


class _Bank(PipelinedBeatUnit):
    _TABLE = None
    # The input fields on the delay line of the units that wait at their input.
    _LINE_FIELDS = ()
    _ZEROES_INVALID = True   # the output register takes the selected, masked results

    def __init__(self, codecs, in_layout, out_layout, *, registered_ready=False):
        # The units' datapaths are built inside the bank's module: classes, not instances.
        self._units = self._choose(_units_by_id(codecs, self._TABLE))
        self._codecs = list(self._units)
        # An instance attribute: the base class reads ``self.LATENCY``. The last stage
        # selects by codec into the output register.
        self.LATENCY = max(u.LATENCY for u in self._units.values()) + 2
        super().__init__(in_layout, out_layout, registered_ready=registered_ready)

    @property
    def codecs(self):
        return tuple(self._codecs)

    @staticmethod
    def _choose(units):
        """``{codec id: unit class}`` as this bank builds them (the table's, by default)."""
        return units

    def _unit_input(self, m, unit, payload):
        return payload

    def _input_line(self, m, stager, payload, taps):
        """The input's ``_LINE_FIELDS`` delayed by each of ``taps`` on one delay line
        (every tap a flip-flop: logic follows), ``{tap: payload}`` in the input's
        layout, the other fields zero (the units' results are selected and masked by
        the bank's own delayed copies)."""
        fields = [getattr(payload, f) for f in self._LINE_FIELDS]
        # Flip-flops at the line's head (the rest is distributed RAM up to its first tap):
        # as many as a unit built here registers the same input for itself, which
        # synthesis then shares with the line.
        head = max(unit.HOLDS_INPUT for unit in self._units.values())
        line = delay_taps(m, stager, Cat(*fields), taps, name="input_line", lutram=True,
                          head=head)
        views = {}
        for tap, value in line.items():
            view = views[tap] = Signal(payload.shape(), name=f"input_d{tap}")
            for f, field in zip(self._LINE_FIELDS, split_like(value, fields), strict=True):
                m.d.comb += getattr(view, f).eq(field)
        return views

    def datapath(self, m, stager, payload):
        select_stage = self.LATENCY - 2
        codec = stager.delay(payload.meta.codec, select_stage, name="codec")
        mask = stager.delay(payload.valid, select_stage + 1, name="select_mask")
        # One datapath per unit class (raw serves threshold's decoding too); the parts
        # several codecs need (random draws, the fixed/qsgd multipliers) built once.
        shared = SharedParts(self._units)
        ids_of = {}
        for c, unit in self._units.items():
            ids_of.setdefault(unit, []).append(c)
        # Short units that wait at their input share one delay line, tapped where each
        # needs it (and where a unit takes delayed input of its own, INPUT_TAPS).
        waits = {unit: select_stage - unit.LATENCY for unit in ids_of
                 if unit.WAITS_AT_INPUT and unit.LATENCY < select_stage}
        line = {}
        if waits or any(unit.INPUT_TAPS for unit in ids_of):
            taps = set(waits.values()) | {t for unit in ids_of for t in unit.INPUT_TAPS}
            line = shared.get("input_line",
                              lambda: self._input_line(m, stager, payload, taps))
        results = []
        parts = []    # (ids, per element [(value, select)]): units that give their parts
        for unit, ids in ids_of.items():
            pad = select_stage - unit.LATENCY
            unit_payload = payload
            if unit in waits:
                unit_payload, pad = line[pad], 0
                if hasattr(unit, "datapath_parts"):
                    parts.append((ids, unit.datapath_parts(
                        m, stager, self._unit_input(m, unit, unit_payload))))
                    continue
            values = unit.datapath(m, stager, self._unit_input(m, unit, unit_payload), shared)
            c = ids[0]
            if pad >= 2:
                # the beat's results wait in distributed RAM (half a LUT a bit)
                values = lutram_delay_each(m, stager, values, pad, name=f"c{c}_pad")
            elif pad:
                values = [stager.reg(v, name=f"c{c}_e{e}_pad") for e, v in enumerate(values)]
            # units that share their results (the levels' codes) are one case
            for k, (others, shared_values) in enumerate(results):
                if shared_values is values:
                    results[k] = (others + ids, values)
                    break
            else:
                results.append((ids, values))
        # Each unit's results are registered once more, cleared (the flip-flops'
        # synchronous reset) unless the beat is of one of its codecs; the output register
        # takes their OR, cleared where the element is invalid: no multiplexer on the
        # codec id, an OR of a few flip-flops a bit.
        cleared = []
        for ids, values in results:
            ours = Cat(codec == c for c in ids).any()
            cleared.append([stager.reg(v, name=f"c{ids[0]}_r{e}", clear=~ours)
                            for e, v in enumerate(values)])
        # a unit's parts each in a register of its own, cleared unless it is the beat's
        # codec and the part's select is set (the element's multiplexer becomes the OR)
        for ids, unit_parts in parts:
            ours = Cat(codec == c for c in ids).any()
            for k in range(len(unit_parts[0])):
                cleared.append([stager.reg(element[k][0], name=f"c{ids[0]}_p{k}_r{e}",
                                           clear=~(ours & element[k][1]))
                                for e, element in enumerate(unit_parts)])
        return [stager.reg(reduce(or_, (vs[e] for vs in cleared), 0), name=f"result{e}",
                           clear=~mask[e])
                for e in range(ELEMENTS_PER_BEAT)]


class EncoderBank(_Bank):
    """The TX lane's encoders: host beats of any built-in codec in, 32-bit codes out.

    Parameters
    ----------
    codecs : iterable of str or int
        Codecs to build (ids 0–6).
    meta_shape : shape
        The user side-band (``meta.user``) carried with each beat.
    registered_ready : bool
        Advance on ``o.ready`` alone (:class:`~.unit.PipelinedBeatUnit`): for a consumer
        whose ready is a register, so that ``i.ready`` is one too.

    Ports: ``i`` takes :func:`encoder_input_layout` with ``meta`` =
    :func:`bank_meta_layout`; ``o`` gives :func:`encoder_output_layout` of
    width 32 with the same ``meta``. The beat's ``meta.codec`` chooses the codec.

    Latency: ``LATENCY``, two more than the longest latency of the codecs built
    (16 cycles with ``fixed`` or ``qsgd``, 14 with ``natural``, else 3–5).
    ``fixed``, ``qsgd`` and ``natural`` share one random generator, ``fixed`` and
    ``qsgd`` (and with either, ``fp16``) one datapath of 16 multipliers and one code
    register. Throughput: one
    beat per cycle, codecs mixed freely. Backpressure: the whole pipeline holds
    (``i.ready = o.ready | ~o.valid``; with ``registered_ready``, ``i.ready = o.ready``);
    nothing is dropped or reordered. The output payload is a register.
    """
    _TABLE = ENCODERS
    _OUT_FIELD = "codes"
    _LINE_FIELDS = ("elements",)

    def __init__(self, codecs, *, meta_shape=unsigned(1), registered_ready=False):
        meta = bank_meta_layout(meta_shape)
        super().__init__(codecs, encoder_input_layout(meta), encoder_output_layout(32, meta),
                         registered_ready=registered_ready)

    @staticmethod
    def _choose(units):
        # with fixed or qsgd, fp16 rounds its subnormals on their multipliers
        if fp16_on_levels(units):
            units = {c: Fp16LevelEncoder if u is Fp16Encoder else u for c, u in units.items()}
        return units


class DecoderBank(_Bank):
    """The RX lane's decoders: 32-bit codes of any built-in codec in, fp32 beats out.

    Parameters
    ----------
    codecs : iterable of str or int
        Codecs to build (ids 0–6).
    meta_shape : shape
        The user side-band (``meta.user``) carried with each beat.
    registered_ready : bool
        As :class:`EncoderBank`'s.

    Ports: ``i`` takes :func:`decoder_input_layout` of width 32 with ``meta`` =
    :func:`bank_meta_layout`; ``o`` gives :func:`decoder_output_layout`.
    Each codec sees only its own code width (the bits above are ignored).

    Latency: ``LATENCY``, two more than the longest latency of the decoders
    built (11 cycles with ``fixed`` or ``qsgd``, else 3). ``fixed`` and ``qsgd``
    share one datapath of 16 products; the 1-cycle decoders take their input
    from one delay line. Throughput: one beat per cycle.
    Backpressure: the whole pipeline holds (``i.ready = o.ready | ~o.valid``; with
    ``registered_ready``, ``i.ready = o.ready``). The output payload is a register.
    """
    _TABLE = DECODERS
    _OUT_FIELD = "elements"
    _LINE_FIELDS = ("codes", "params")

    def __init__(self, codecs, *, meta_shape=unsigned(1), registered_ready=False):
        meta = bank_meta_layout(meta_shape)
        super().__init__(codecs, decoder_input_layout(32, meta), decoder_output_layout(meta),
                         registered_ready=registered_ready)

    def _unit_input(self, m, unit, payload):
        # Truncate the codes to the unit's width: the view the unit was written for.
        layout = decoder_input_layout(unit.CODE_WIDTH, payload.meta.shape())
        view = Signal(layout, name=f"{unit.__name__.lower()}_in")
        m.d.comb += [
            view.valid.eq(payload.valid),
            view.params.eq(payload.params),
            view.meta.eq(payload.meta),
        ]
        for e in range(ELEMENTS_PER_BEAT):
            m.d.comb += view.codes[e].eq(payload.codes[e])
        return view
