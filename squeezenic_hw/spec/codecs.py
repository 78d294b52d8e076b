"""The codec set of wire format v1 (``docs/wire-format.md`` section 4).

This module is the single source of truth for codec names, ids, code widths,
parameter ranges and presets; the numpy reference (:mod:`.reference`), the
gateware and the CLI all read it.
"""

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CodecInfo", "CODECS", "SPARSE_CODECS", "ALL_CODECS", "THRESHOLD_ID", "PRESETS", "Preset",
    "DEFAULT_CODECS", "KNOWN_CODECS", "codec_info", "code_width", "validate_param",
    "preset_params", "level_scale", "f32_bits", "payload_bytes", "resolve_codecs",
    "parse_codec_spec",
]


@dataclass(frozen=True)
class CodecInfo:
    """Static facts about one codec.

    ``bits`` is the code width in bits, or ``None`` when the codec parameter
    gives it (``fixed``/``qsgd``: 2…16) or the size depends on the data
    (``variable``: ``threshold``, whose wire parameter is the payload layout).
    """
    name: str
    id: int
    bits: int | None
    param_range: tuple[int, int] | None  # inclusive range of the codec parameter
    stochastic: bool                     # whether the ``stochastic`` flag is honoured
    scale: str                           # meaning of the header's ``scale`` field
    aux: str                             # meaning of the header's ``aux`` field
    summary: str
    variable: bool = False               # payload size depends on the data (sparse)

    def bits_per_element(self, param=None):
        if self.variable:
            raise ValueError(f"codec {self.name!r} has no fixed bits per element: its "
                             f"payload size depends on how many elements are kept")
        if self.bits is not None:
            return self.bits
        validate_param(self.name, param)
        return int(param)

    def ratio(self, param=None):
        """Compression ratio of the payload against fp32 (32 / bits per element)."""
        return 32 / self.bits_per_element(param)


CODECS = {c.name: c for c in [
    CodecInfo("raw", 0, 32, None, False, "unused", "unused",
              "fp32 bits unchanged"),
    CodecInfo("fp16", 1, 16, None, False, "unused", "unused",
              "IEEE binary16, round to nearest even, as numpy astype(float16)"),
    CodecInfo("bf16", 2, 16, None, False, "unused", "unused",
              "bfloat16, round to nearest even, NaN -> 0x7FC0 with sign (as ml_dtypes)"),
    CodecInfo("fixed", 3, None, (2, 16), True,
              "quantisation levels per unit (x*scale is rounded)", "value of code 1",
              "two's complement integer of q bits, clamped symmetric"),
    CodecInfo("qsgd", 4, None, (2, 16), True,
              "levels per unit (x*scale is rounded)", "value of level 1",
              "sign-magnitude level of b bits (QSGD / TernGrad)"),
    CodecInfo("sign", 5, 1, None, False,
              "value decoded for bit 0 (x >= +0)", "value decoded for bit 1 (x <= -0)",
              "one sign bit per element"),
    CodecInfo("natural", 6, 9, None, True, "unused", "unused",
              "sign and power-of-two exponent (natural compression)"),
]}

#: Codec id of ``threshold`` (sparsification; variable payload size).
THRESHOLD_ID = 7

#: Codecs whose payload size depends on the data (not built into lanes by default).
SPARSE_CODECS = {c.name: c for c in [
    CodecInfo("threshold", THRESHOLD_ID, None, (0, 1), False,
              "keep elements with abs(x) > scale", "unused",
              "threshold sparsification: kept fp32 values + bitmap or index list",
              variable=True),
]}

#: Every codec of wire format v1, by name.
ALL_CODECS = {**CODECS, **SPARSE_CODECS}

_BY_ID = {c.id: c for c in ALL_CODECS.values()}

#: Codec ids built into the hardware by default (0–6; ``threshold``, 7, only on request).
DEFAULT_CODECS = frozenset(c.id for c in CODECS.values())
#: Every codec id of wire format v1 (0–7).
KNOWN_CODECS = frozenset(_BY_ID)


def codec_info(codec):
    """Look up a codec by name or id; raise ``ValueError`` naming it when unknown."""
    if isinstance(codec, CodecInfo):
        return codec
    if isinstance(codec, (int, np.integer)) and not isinstance(codec, bool):
        try:
            return _BY_ID[int(codec)]
        except KeyError:
            raise ValueError(f"codec id {int(codec)} is not a known codec "
                             f"(known: {sorted(_BY_ID)})") from None
    try:
        return ALL_CODECS[codec]
    except (KeyError, TypeError):
        raise ValueError(f"codec {codec!r} is not a known codec "
                         f"(known: {', '.join(ALL_CODECS)})") from None


def validate_param(codec, param):
    """Check the codec parameter; raise ``ValueError`` naming ``param`` when invalid."""
    info = codec_info(codec)
    if info.param_range is None:
        if param not in (None, 0):
            raise ValueError(f"param: codec {info.name!r} takes no parameter "
                             f"(must be 0), got {param!r}")
        return 0
    lo, hi = info.param_range
    if isinstance(param, bool) or not isinstance(param, (int, np.integer)) or not (
            lo <= param <= hi):
        what = "payload layout on the wire" if info.variable else "bits per element"
        raise ValueError(f"param: codec {info.name!r} needs a parameter from {lo} to {hi} "
                         f"({what}), got {param!r}")
    return int(param)


def f32_bits(value):
    """The uint32 bits (a Python int) of ``value`` as float32; NaN payloads of np.float32 kept."""
    return int(np.float32(value).view(np.uint32))


def payload_bytes(codec, param, n):
    """Wire payload bytes for ``n`` elements: ``ceil(n·b / 8)``."""
    b = codec_info(codec).bits_per_element(param)
    return (int(n) * b + 7) // 8


def resolve_codecs(codecs):
    """Codec ids from ``None`` (the default set, 0–6) or an iterable of names/ids;
    ``ValueError`` for an unknown one."""
    if codecs is None:
        return DEFAULT_CODECS
    return frozenset(codec_info(c).id for c in codecs)


def parse_codec_spec(spec):
    """``(CodecInfo, param or None)`` of ``"fixed:4"``, ``"fixed"``, ``"sign"`` or an id;
    ``ValueError`` naming the codec or its parameter."""
    if not isinstance(spec, str):
        return codec_info(spec), None
    text = spec.strip()
    name, _, param = text.partition(":")
    info = codec_info(int(name) if name.isdigit() else name)
    if not param:
        return info, None
    if not info.param_range:
        raise ValueError(f"codec {info.name!r} takes no parameter, got {text!r}")
    try:
        p = int(param)
    except ValueError:
        raise ValueError(f"codec parameter must be an integer, got {text!r}") from None
    info.bits_per_element(p)
    return info, p


def code_width(codec, param=None):
    """Bits per element on the wire."""
    return codec_info(codec).bits_per_element(param)


@dataclass(frozen=True)
class Preset:
    name: str
    codec: str
    param: int
    stochastic: bool
    summary: str
    scale: str
    aux: str


PRESETS = {p.name: p for p in [
    Preset("terngrad", "qsgd", 2, True, "TernGrad: stochastic ternary {-1, 0, +1}·max|g|",
           "1 / max|g|", "max|g|"),
    Preset("signsgd", "sign", 0, False, "signSGD: ±scale",
           "1.0 unless given", "-scale"),
    Preset("onebit", "sign", 0, False, "1-bit SGD: mean of each sign's elements",
           "mean of the non-negative elements", "mean of the negative elements"),
    Preset("int8", "fixed", 8, False, "8-bit symmetric integer, max|g| maps to 127",
           "127 / max|g|", "max|g| / 127"),
]}


def level_scale(tensor, levels):
    """``(scale, aux)`` that put the largest finite magnitude of ``tensor`` on level
    ``levels`` (float32: ``levels / max|x|`` and ``max|x| / levels``); ``(0, 0)`` for a
    tensor without a non-zero finite element, so that every element encodes to 0."""
    g = np.asarray(tensor, dtype=np.float32).ravel()
    g = g[np.isfinite(g)]
    amax = np.float32(np.max(np.abs(g))) if g.size else np.float32(0)
    if not amax > 0:
        return np.float32(0), np.float32(0)
    return np.float32(levels) / amax, amax / np.float32(levels)


def preset_params(name, tensor=None, *, scale=None, aux=None):
    """Resolve a preset into ``dict(codec, param, stochastic, scale, aux)``.

    ``scale``/``aux`` given explicitly win over the values derived from
    ``tensor``. Statistics use the finite elements only; an all-zero (or empty)
    tensor gives ``scale = aux = 0`` so that every element encodes to 0.
    """
    try:
        p = PRESETS[name]
    except KeyError:
        raise ValueError(f"preset {name!r} is not a known preset "
                         f"(known: {', '.join(PRESETS)})") from None
    g = np.asarray(tensor if tensor is not None else [], dtype=np.float32).ravel()
    g = g[np.isfinite(g)]
    if p.name in ("terngrad", "int8"):
        d_scale, d_aux = level_scale(g, 1 if p.name == "terngrad" else 127)
    elif p.name == "signsgd":
        d_scale = np.float32(1.0)
        d_aux = None
    else:  # onebit
        pos, neg = g[~np.signbit(g)], g[np.signbit(g)]
        d_scale = np.float32(pos.mean(dtype=np.float64)) if pos.size else np.float32(0)
        d_aux = np.float32(neg.mean(dtype=np.float64)) if neg.size else np.float32(0)
    s = np.float32(d_scale if scale is None else scale)
    if p.name == "signsgd":
        a = np.float32(-s if aux is None else aux)
    else:
        a = np.float32(d_aux if aux is None else aux)
    return {"codec": p.codec, "param": p.param, "stochastic": p.stochastic,
            "scale": s, "aux": a}
