"""Random lane traffic: hypothesis strategies, the frames they stand for, and what the
lanes must make of them.

Hypothesis draws *recipes*, small records of what a batch of traffic holds (which codec,
parameter, flags and scale kinds each tensor stream has, how many frames, which
malformations, with numpy seeds for everything bulky); :func:`host_traffic` and
:func:`wire_traffic` materialise a recipe into frames with numpy, so that a batch of
hundreds of frames costs hypothesis a few hundred choices and shrinks to a small one.

* :func:`stream_recipes`: one tensor stream of host frames of a built-in codec with any
  parameter, lengths of 1…363 elements (partial last beats included), random or edge
  scales and aux values, any seed, stochastic and flush flags, values with a share of
  fp32 edge values (±0, subnormals, ±inf, NaN payloads) and rounding ties, contiguous
  offsets (wrapping at 2³², with gaps);
* :func:`malformed_recipes`: a frame the lane must pass unchanged, one kind per
  ``BypassReason`` of the lane (:data:`MALFORMED_KINDS`), ARP, IPv6 and VLAN-tagged
  frames among the not-IPv4 ones;
* :func:`traffic_recipes`: a batch of exactly ``frames`` host frames: streams whose keys
  differ in one field, interleaved in runs so that coalescing starts and stops,
  malformed frames between them, frames whose ``tuser_size`` is wrong, random
  ``tuser_src``/``tuser_dst``; and for the RX lane, wire-side malformed frames and
  wrong sizes.

:func:`expected_tx` and :func:`expected_rx` give the frames (with ``tuser``) and counters
(``size_errors`` included) a hardware lane must produce, from the numpy reference
(:mod:`squeezenic_hw.reference.lane`); :func:`differences` compares a run with them, and
:func:`round_trip` runs a batch through a TX and an RX lane and compares both. The
campaign of ``squeezenic-hw fuzz`` and the property tests both use them
(``docs/fuzz.md``).
"""

import bisect
import struct
import time
from dataclasses import dataclass, field, replace

import hypothesis
import numpy as np
from hypothesis import strategies as st
from hypothesis.internal.conjecture.providers import AVAILABLE_PROVIDERS, HypothesisProvider

from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.spec.codecs import THRESHOLD_ID, codec_info, f32_bits, resolve_codecs
from squeezenic_hw.spec.frames import (
    RX_REASONS,
    TX_REASONS,
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    classify_host_frame,
    classify_wire_frame,
    ipv4_checksum,
    parse,
)
from squeezenic_hw.spec.generator import NARROW_LANE_CODECS
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    DEFAULT_PORT,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HDR,
    HEADER_LEN,
)

from .axis import AxisFrame
from .vectors import EDGE_F32_BITS, gradient_like, random_f32_bits, sparse_gradient

__all__ = [
    "MAX_ELEMENTS", "MAX_STREAM_FRAMES", "SCALE_KINDS", "VALUE_KINDS", "LENGTH_KINDS",
    "OFFSET_KINDS", "IDENTITY_FIELDS", "MALFORMED_KINDS", "StreamRecipe", "MalformedRecipe",
    "TrafficRecipe", "IDLE_TIMEOUTS", "stream_recipes", "malformed_recipes", "traffic_recipes",
    "draw_example", "stream_frames", "malformed_frame", "host_traffic", "arrival_times",
    "wire_traffic", "lane_view",
    "LaneExpectation", "expected_tx", "expected_rx", "Difference", "differences", "LaneCheck",
    "round_trip", "lane_builders", "narrow_spec", "NARROW_SCALE_KINDS",
]

#: Most elements of a host frame drawn (a host frame of 1516 bytes fits MTU 1518).
MAX_ELEMENTS = DEFAULT_HOST_ELEMENTS
#: How a stream's ``scale`` and ``aux`` are chosen: fitted to the data (the presets'
#: way), a power of two (so that ``x·scale`` lands on exact ties), random magnitude and
#: sign, or an fp32 edge value (0, subnormal, inf, NaN…).
SCALE_KINDS = ("fitted", "pow2", "random", "edge")
#: The scales a narrow ``fixed`` lane takes (``NarrowTxLane``): powers of two, and the
#: fp32 zeros, infinities and NaNs (``special``).
NARROW_SCALE_KINDS = ("pow2", "special")
#: How a stream's values are drawn: gradient-like, uniformly random bit patterns,
#: rounding ties of every codec, or sparse around the threshold.
VALUE_KINDS = ("gradient", "bits", "ties", "sparse")
#: Frame lengths in elements: random 1…363, one beat or less (1…16), long (300…363),
#: one length for the whole stream, or next to a beat boundary (16k−1, 16k, 16k+1).
LENGTH_KINDS = ("random", "short", "long", "one_length", "beat_edges")
#: Where a stream's offsets start: random, 0, or just below 2³² (they wrap).
OFFSET_KINDS = ("random", "zero", "wrap")
#: The coalescing-key field that sets a stream apart from the batch's other streams
#: (``shared``: none; codec, parameter, flags, scale, aux and seed are drawn anyway).
IDENTITY_FIELDS = ("shared", "src_ip", "dst_ip", "src_mac", "dst_mac", "src_port")
#: Frames a lane must pass unchanged, by lane: one kind per bypass reason (its value)
#: and ARP, IPv6 and VLAN-tagged frames (reason ``not_ipv4``; an ARP frame of fewer than
#: 64 bytes, ``short_frame``).
MALFORMED_KINDS = {
    "tx": tuple(r.value for r in TX_REASONS) + ("arp", "ipv6", "vlan"),
    "rx": tuple(r.value for r in RX_REASONS) + ("arp", "ipv6", "vlan"),
}
_NOT_IPV4_KINDS = ("arp", "ipv6", "vlan")
#: Malformed frames carry an IPv4 identification with its top bit set, streams' frames
#: one without: a frame a lane builds never equals a malformed one.
_MARK = 0x8000
_U32 = 2**32


# ---- recipes ----------------------------------------------------------------------

@dataclass(frozen=True)
class StreamRecipe:
    """One tensor stream of host frames: the header fields that are drawn, and numpy's
    seed (``data_seed``) for its values, lengths, offsets and per-frame fields."""
    codec: int
    param: int
    stochastic: bool
    seed: int                  # the header's seed field
    scale_kind: str            # SCALE_KINDS
    values: str                # VALUE_KINDS
    edge_share: float          # share of elements replaced by fp32 edge values
    lengths: str               # LENGTH_KINDS
    frames: int
    flush_rate: float
    gap_rate: float            # share of frames whose offset does not continue the last
    offsets: str               # OFFSET_KINDS
    identity: str              # IDENTITY_FIELDS
    header_noise: bool         # IP identification, TTL, TOS and DF vary frame by frame
    data_seed: int


@dataclass(frozen=True)
class MalformedRecipe:
    """A frame the lane passes unchanged: its kind (:data:`MALFORMED_KINDS`), the codec of
    the frame it is made from, and numpy's seed for the rest."""
    kind: str
    codec: int
    data_seed: int


@dataclass(frozen=True)
class TrafficRecipe:
    """A batch: streams and host-side malformed frames (exactly ``frames`` host frames in
    all), how many stream frames get a wrong ``tuser_size``, the longest run of frames
    of one stream, and the wire side's own malformed frames and wrong sizes."""
    streams: tuple
    malformed: tuple
    size_errors: int
    run_length: int
    wire_malformed: tuple
    wire_size_errors: int
    seed: int
    #: A timed batch: the TX lane closes wire frames after this many idle cycles, and the
    #: host frames arrive at the cycles :func:`arrival_times` gives (``None``: back to back,
    #: no timeout).
    idle_timeout: int | None = None

    @property
    def frames(self):
        """Host frames of the batch."""
        return sum(s.frames for s in self.streams) + len(self.malformed)


# ---- strategies -------------------------------------------------------------------

_SEEDS = st.integers(0, _U32 - 1)
#: Most host frames of one stream.
MAX_STREAM_FRAMES = 64
# Shrinks towards long streams: a batch of few streams is the simpler one.
_FRAMES_PER_STREAM = st.integers(0, MAX_STREAM_FRAMES - 1).map(
    lambda k: MAX_STREAM_FRAMES - k)


def _codec_ids(codecs):
    return sorted(resolve_codecs(codecs))


@st.composite
def stream_recipes(draw, codecs=None, code_bits=None, narrow=False):
    """Recipes of one tensor stream of a codec of ``codecs`` (default 0–6) with 1…
    :data:`MAX_STREAM_FRAMES` host frames (:func:`stream_frames` makes them). With
    ``code_bits``, the codecs whose parameter is their code width (``fixed``, ``qsgd``)
    take that one (a lane built with ``code_bits`` takes no other). With ``narrow``, the
    streams a narrow lane takes (``NarrowTxLane``): ``fixed`` rounds to nearest
    (``stochastic`` clear) at scales of :data:`NARROW_SCALE_KINDS`."""
    codec = draw(st.sampled_from(_codec_ids(codecs)))
    info = codec_info(codec)
    param = draw(st.integers(*info.param_range)) if (info.param_range
                                                    and not info.variable) else 0
    if code_bits is not None and info.param_range and not info.variable:
        param = code_bits
    stochastic = draw(st.booleans())
    held = narrow and info.name == "fixed"
    return StreamRecipe(
        codec=codec, param=param, stochastic=stochastic and not held, seed=draw(_SEEDS),
        scale_kind=draw(st.sampled_from(NARROW_SCALE_KINDS if held else SCALE_KINDS)),
        values=draw(st.sampled_from(VALUE_KINDS)),
        edge_share=draw(st.sampled_from((0.0, 0.02, 0.2, 1.0))),
        lengths=draw(st.sampled_from(LENGTH_KINDS)),
        frames=draw(_FRAMES_PER_STREAM),
        flush_rate=draw(st.sampled_from((0.0, 0.05, 0.5, 1.0))),
        gap_rate=draw(st.sampled_from((0.0, 0.05, 0.5))),
        offsets=draw(st.sampled_from(OFFSET_KINDS)),
        identity=draw(st.sampled_from(IDENTITY_FIELDS)),
        header_noise=draw(st.booleans()),
        data_seed=draw(_SEEDS))


def _check_lane(lane):
    if lane not in MALFORMED_KINDS:
        raise ValueError(f"lane must be 'tx' or 'rx', got {lane!r}")


def malformed_recipes(lane, codecs=None):
    """Recipes of frames ``lane`` (``"tx"`` or ``"rx"``) must pass unchanged, every kind of
    :data:`MALFORMED_KINDS` made from a frame of a codec of ``codecs``."""
    _check_lane(lane)
    return st.builds(MalformedRecipe, kind=st.sampled_from(MALFORMED_KINDS[lane]),
                     codec=st.sampled_from(_codec_ids(codecs)), data_seed=_SEEDS)


#: Idle timeouts of the timed batches.
IDLE_TIMEOUTS = (1, 2, 5, 16, 50, 200)


@st.composite
def traffic_recipes(draw, codecs=None, *, frames=100, timed=False, trusted=False,
                    code_bits=None, narrow=False):
    """Recipes of a batch of exactly ``frames`` host frames (:class:`TrafficRecipe`).

    With ``timed``, one batch in four is timed: an idle timeout from
    :data:`IDLE_TIMEOUTS`, and no host frame with a wrong ``tuser_size`` (its beats on the
    bus would not be the ones the reference's clock counts). Without, nothing about
    timing is drawn: the batches are those of earlier versions.

    With ``trusted``, the host frames are those a trusted TX lane takes (``TxLane(...,
    trusted=True, code_bits=code_bits)``): only tensor streams, no malformed frame and no
    wrong ``tuser_size``; with ``code_bits``, ``fixed`` and ``qsgd`` frames carry it. The
    wire side keeps its malformed frames (the RX lane is host-facing). ``narrow`` (which
    implies ``trusted``) draws the streams a narrow lane takes (:func:`stream_recipes`)."""
    if frames < 1:
        raise ValueError(f"frames must be at least 1, got {frames}")
    share = draw(st.sampled_from((0.0, 0.02, 0.1, 0.3)))
    wire_bad = min(frames - 1, round(frames * share))
    trusted = trusted or narrow
    bad = 0 if trusted else wire_bad
    good = frames - bad
    streams, one_stream = [], stream_recipes(codecs, code_bits, narrow)
    while good > 0:
        stream = draw(one_stream)
        if stream.frames > good:
            stream = replace(stream, frames=good)
        streams.append(stream)
        good -= stream.frames
    recipe = TrafficRecipe(
        streams=tuple(streams),
        malformed=tuple(draw(st.lists(malformed_recipes("tx", codecs),
                                      min_size=bad, max_size=bad))),
        size_errors=0 if trusted else draw(st.integers(0, min(frames - bad,
                                                               1 + frames // 50))),
        run_length=draw(st.sampled_from((1, 2, 4, 16))),
        wire_malformed=tuple(draw(st.lists(malformed_recipes("rx", codecs),
                                           min_size=wire_bad, max_size=wire_bad))),
        wire_size_errors=draw(st.integers(0, 1 + frames // 50)),
        seed=draw(_SEEDS))
    if timed and draw(st.sampled_from((False, False, False, True))):
        recipe = replace(recipe, size_errors=0,
                         idle_timeout=draw(st.sampled_from(IDLE_TIMEOUTS)))
    return recipe


class _SeededProvider(HypothesisProvider):
    """Hypothesis's own choices, less the constants it lifts from the source of whatever
    modules are loaded and not installed in site-packages (5 % of its draws): those make
    a seed's example depend on what the process has imported, on whether this package is
    installed editable, and on every literal in it. (``backend`` and the provider class
    are Hypothesis's documented hooks for other backends; the method overridden is not,
    and ``tests/sim/test_traffic.py`` fails if it stops taking effect.)"""

    def _maybe_draw_constant(self, choice_type, constraints, *, p=0.05):
        return None


#: The Hypothesis backend of :func:`draw_example` (``settings(backend=...)``).
SEEDED_BACKEND = "squeezenic-seeded"


def draw_example(strategy, seed):
    """One example of ``strategy`` drawn at random, the same one for the same ``seed`` (and
    the same hypothesis), whatever else the process has imported and however this package
    is installed.

    Hypothesis's generation phase runs outside a test, with no example database, no
    shrinking and no health checks, for two examples: the first is the strategy's
    simplest, the second a random draw, which is returned. (A longer run would mutate
    earlier examples into near copies, which a test wants and a campaign of independent
    batches does not.) The draw runs on :data:`SEEDED_BACKEND`: Hypothesis's choices
    without the constants it takes from the loaded modules' source. On it the second
    example is a plain random draw; Hypothesis's own backend makes it differ from the
    first in its first choices, so that a strategy's simplest first choice never came up.
    """
    AVAILABLE_PROVIDERS.setdefault(SEEDED_BACKEND, f"{__name__}._SeededProvider")
    examples = []

    @hypothesis.settings(max_examples=2, database=None, deadline=None,
                         phases=[hypothesis.Phase.generate], backend=SEEDED_BACKEND,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.seed(seed)
    @hypothesis.given(strategy)
    def collect(example):
        examples.append(example)

    collect()
    return examples[-1]


# ---- materialising: values, scales, streams ------------------------------------------

def _f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _usable(scale):
    """``|scale|`` when it is a positive normal number, else 1.0."""
    s = np.float32(abs(scale))
    return s if np.isfinite(s) and s >= np.finfo(np.float32).tiny else np.float32(1)


def _tie_values(rng, n, scale):
    """Rounding ties of every codec: ``(k + ½)/scale`` (``fixed``, ``qsgd``), fp16 and
    bf16 half-way mantissas, ``natural``'s rounding point ``m = 2²²``."""
    kind = rng.integers(0, 4, n)
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    s = _usable(scale)
    k = rng.integers(0, 2**15, n).astype(np.float32)
    levels = ((k + np.float32(0.5)) / s).astype(np.float32).view(np.uint32)
    fp16 = (rng.integers(103, 143, n).astype(np.uint32) << 23) | (
        rng.integers(0, 2**10, n).astype(np.uint32) << 13) | np.uint32(0x1000)
    bf16 = (rng.integers(1, 255, n).astype(np.uint32) << 23) | (
        rng.integers(0, 2**7, n).astype(np.uint32) << 16) | np.uint32(0x8000)
    natural = (rng.integers(1, 255, n).astype(np.uint32) << 23) | np.uint32(0x400000)
    bits = np.choose(kind, [levels, fp16, bf16, natural]).astype(np.uint32)
    return _f32(bits | sign)


def _values(rng, recipe, n, scale):
    magnitude = np.float32(10.0 ** rng.uniform(-4, 4))
    if recipe.values == "bits":
        x = _f32(random_f32_bits(rng, n))
    elif recipe.values == "ties":
        x = _tie_values(rng, n, scale)
    elif recipe.values == "sparse":
        x = sparse_gradient(rng, n, float(rng.choice([0.0, 0.01, 0.1, 0.5, 1.0])),
                            scale=float(_usable(scale)))
    else:
        x = gradient_like(rng, n) * magnitude
    x = np.array(x, dtype=np.float32)
    edge = rng.random(n) < recipe.edge_share
    x[edge] = _f32(EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), int(edge.sum()))])
    return x


#: The edge values that are zeros, infinities and NaNs.
_SPECIAL_F32_BITS = EDGE_F32_BITS[(EDGE_F32_BITS & 0x7FFFFFFF == 0)
                                  | (EDGE_F32_BITS & 0x7F800000 == 0x7F800000)]


def _scale_aux(rng, recipe):
    """``scale`` and ``aux`` before the values are known (``fitted`` is refined after)."""
    kind = recipe.scale_kind
    if kind == "edge":
        return tuple(_f32(EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), 2)]))
    if kind == "special":
        return tuple(_f32(_SPECIAL_F32_BITS[rng.integers(0, len(_SPECIAL_F32_BITS), 2)]))
    if kind == "pow2":
        e = rng.integers(-20, 21, 2).astype(np.float32)
        signs = np.where(rng.random(2) < 0.2, -1, 1).astype(np.float32)
        return tuple(np.float32(2) ** e * signs)
    if kind == "random":
        return tuple((10.0 ** rng.uniform(-6, 6, 2) * np.where(
            rng.random(2) < 0.3, -1, 1)).astype(np.float32))
    return np.float32(1), np.float32(1)


def _fitted(info, param, x, rng):
    """``scale``/``aux`` as a caller of the codec would set them from the data."""
    finite = np.abs(x[np.isfinite(x)])
    amax = np.float32(finite.max()) if finite.size else np.float32(0)
    if info.param_range and not info.variable:           # fixed, qsgd
        levels = np.float32(2 ** (param - 1) - 1)
        if amax == 0:
            return np.float32(0), np.float32(0)
        return np.float32(levels / amax), np.float32(amax / levels)
    if info.name == "sign":                              # the onebit preset
        v = x[np.isfinite(x)]
        pos, neg = v[~np.signbit(v)], v[np.signbit(v)]
        return (np.float32(pos.mean(dtype=np.float64)) if pos.size else np.float32(0),
                np.float32(neg.mean(dtype=np.float64)) if neg.size else np.float32(0))
    if info.variable:                                    # threshold at a quantile
        q = float(rng.choice([0.0, 0.5, 0.9, 0.99, 1.0]))
        return (np.float32(np.quantile(finite, q)) if finite.size else np.float32(0),
                np.float32(1))
    return np.float32(1), np.float32(1)


def _lengths(rng, recipe):
    n, kind = recipe.frames, recipe.lengths
    if kind == "short":
        return rng.integers(1, 17, n)
    if kind == "long":
        return rng.integers(300, MAX_ELEMENTS + 1, n)
    if kind == "one_length":
        one = int(rng.choice([1, 2, 15, 16, 17, 31, 32, 33, 100, 181, 362, MAX_ELEMENTS,
                              int(rng.integers(1, MAX_ELEMENTS + 1))]))
        return np.full(n, one)
    if kind == "beat_edges":
        k = rng.integers(1, MAX_ELEMENTS // 16 + 1, n)
        return np.clip(16 * k + rng.integers(-1, 2, n), 1, MAX_ELEMENTS)
    return rng.integers(1, MAX_ELEMENTS + 1, n)


def _start_offset(rng, kind):
    if kind == "zero":
        return 0
    if kind == "wrap":
        return _U32 - int(rng.integers(1, 2000))
    return int(rng.integers(0, _U32))


def _batch_header(rng, port):
    """The addresses a batch's streams share (each stream may change one of them)."""
    return Header(dst_mac=b"\x02" + rng.bytes(5), src_mac=b"\x02" + rng.bytes(5),
                  src_ip=bytes([10]) + rng.bytes(3), dst_ip=bytes([10]) + rng.bytes(3),
                  src_port=int(rng.integers(1024, 65536)), dst_port=port)


def _identity(base, field_name, k):
    """``base`` with its ``field_name`` made the ``k``-th stream's own."""
    tag = struct.pack(">H", k + 1)
    if field_name == "src_ip":
        return replace(base, src_ip=b"\x0a\x01" + tag)
    if field_name == "dst_ip":
        return replace(base, dst_ip=b"\x0a\x02" + tag)
    if field_name == "src_mac":
        return replace(base, src_mac=b"\x02\x00\x01\x00" + tag)
    if field_name == "dst_mac":
        return replace(base, dst_mac=b"\x02\x00\x02\x00" + tag)
    if field_name == "src_port":
        return replace(base, src_port=(base.src_port + k + 1) % 65536 or 1)
    return base


def stream_frames(recipe, base=None, k=0):
    """The host frames (``bytes``) of a :class:`StreamRecipe`.

    Parameters
    ----------
    recipe : StreamRecipe
    base : Header, optional
        The addresses and port the batch's streams share (default :class:`Header`).
    k : int
        The stream's index in its batch: its own value of ``recipe.identity``.
    """
    rng = np.random.default_rng(recipe.data_seed)
    info = codec_info(recipe.codec)
    lengths = _lengths(rng, recipe)
    # edge scales make infinities and NaNs on the way: wanted, not warned about
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale, aux = _scale_aux(rng, recipe)
        x = _values(rng, recipe, int(lengths.sum()), scale)
        if recipe.scale_kind == "fitted":
            scale, aux = _fitted(info, recipe.param, x, rng)
    h = replace(_identity(base or Header(), recipe.identity, k), codec=recipe.codec,
                param=recipe.param, seed=recipe.seed, scale_bits=f32_bits(scale),
                aux_bits=f32_bits(aux), ip_id=0)
    stochastic = FLAG_STOCHASTIC if recipe.stochastic else 0
    offset = _start_offset(rng, recipe.offsets)
    frames, pos = [], 0
    for n in lengths.tolist():
        flags = stochastic | (FLAG_FLUSH if rng.random() < recipe.flush_rate else 0)
        fh = replace(h, offset=offset, flags=flags)
        if recipe.header_noise:
            fh = replace(fh, ip_id=int(rng.integers(0, _MARK)), ttl=int(rng.integers(1, 256)),
                         ip_tos=int(rng.integers(0, 256)),
                         ip_frag=int(rng.choice([0, 0x4000])))
        frames.append(build_host_frame(fh, x[pos:pos + n]))
        pos += n
        offset = (offset + n) % _U32
        if rng.random() < recipe.gap_rate:
            offset = (offset + int(rng.integers(1, 1 << 20))) % _U32
    return frames


# ---- materialising: malformed frames ------------------------------------------------

def _patch(frame, pos, data, *, fix_checksum=True):
    """``frame`` with bytes at ``pos`` replaced, its IPv4 checksum rewritten unless told
    not to."""
    b = bytearray(frame)
    b[pos:pos + len(data)] = data
    if fix_checksum and len(b) >= 34:
        b[24:26] = struct.pack("!H", ipv4_checksum(bytes(b[14:34])))
    return bytes(b)


def _at(name):
    return getattr(HDR, name)[0]


def _other_than(rng, avoid, lo, hi):
    """A random int of [lo, hi) not in ``avoid``."""
    while True:
        v = int(rng.integers(lo, hi))
        if v not in avoid:
            return v


def _good_frame(lane, codec, rng, built, port):
    """A frame ``lane`` processes, of ``codec`` (a TX host frame, or the wire frame the
    reference TX makes of one), marked as the base of a malformed frame."""
    info = codec_info(codec)
    param = int(rng.integers(2, 17)) if info.param_range and not info.variable else 0
    h = Header(codec=codec, param=param, dst_port=port, ip_id=_MARK | int(rng.integers(0, _MARK)),
               seed=int(rng.integers(0, _U32)), offset=int(rng.integers(0, _U32)),
               flags=FLAG_STOCHASTIC if rng.random() < 0.5 else 0,
               scale_bits=f32_bits(np.float32(rng.uniform(0.1, 10))),
               aux_bits=f32_bits(np.float32(rng.uniform(-1, 1))))
    host = build_host_frame(h, (rng.standard_normal(int(rng.integers(1, 40))) * 3).astype(
        np.float32))
    if lane == "tx":
        return host
    return lane_reference.tx([host], port=port, codecs=built)[0][0]


def _ipv6_frame(good, rng, port):
    payload = good[42:]
    udp = struct.pack("!HHHH", int(rng.integers(1024, 65536)), port, 8 + len(payload), 0)
    ip6 = struct.pack("!IHBB", 6 << 28, len(udp) + len(payload), 17, 64) + rng.bytes(32)
    return good[:12] + b"\x86\xdd" + ip6 + udp + payload


def _arp_frame(rng):
    mac, ip = b"\x02" + rng.bytes(5), bytes([10]) + rng.bytes(3)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac + ip + bytes(6) + (
        bytes([10]) + rng.bytes(3))
    # padded to the 60 bytes of a minimal Ethernet frame (short: no complete header) or
    # longer (not IPv4)
    return (b"\xff" * 6 + mac + b"\x08\x06" + arp).ljust(int(rng.integers(60, 128)), b"\0")


def _length_mismatch(good, lane, rng, port, built):
    """``good`` with an ``n`` its length does not fit, or a payload 1–3 bytes shorter or
    longer (a threshold index list's length does not depend on ``n``)."""
    h = parse(good)
    if rng.random() < 0.5:
        for _ in range(8):
            n = _other_than(rng, {0, h.n}, 1, 65536)
            frame = _patch(good, _at("N"), struct.pack("<H", n))
            if _reason(frame, lane, port, built) is BypassReason.LENGTH:
                return frame
    payload, change = good[HEADER_LEN:], int(rng.integers(1, 4))
    if len(payload) > change and rng.random() < 0.5:
        return build_wire_frame(h, payload[:-change])
    return build_wire_frame(h, payload + rng.bytes(change))


def _bad_param(codec, lane, rng):
    info = codec_info(codec)
    if info.variable:
        return int(rng.integers(1 if lane == "tx" else 2, 256))
    if info.param_range:
        lo, hi = info.param_range
        return int(rng.choice([*range(lo), *range(hi + 1, 256)]))
    return int(rng.integers(1, 256))


def _mutate(kind, good, lane, rng, port, built):
    h = parse(good)
    R = BypassReason
    if kind == "arp":
        return _arp_frame(rng)
    if kind == "ipv6":
        return _ipv6_frame(good, rng, port)
    if kind == "vlan":
        return good[:12] + b"\x81\x00" + struct.pack("!H", int(rng.integers(0, 4096))) + good[12:]
    reason = R(kind)
    if reason is R.SHORT_FRAME:
        return good[:int(rng.integers(1, HEADER_LEN))]
    if reason is R.NOT_IPV4:
        return _patch(good, 12, struct.pack("!H", _other_than(rng, {0x0800}, 0, 65536)))
    if reason is R.IP_OPTIONS:
        return _patch(good, 14, bytes([_other_than(rng, {0x45}, 0, 256)]))
    if reason is R.FRAGMENTED:
        frag = int(rng.choice([0, 0x4000])) | int(rng.integers(1, 0x4000))
        return _patch(good, _at("IP_FRAG"), struct.pack("!H", frag))
    if reason is R.NOT_UDP:
        return _patch(good, _at("IP_PROTO"), bytes([_other_than(rng, {17}, 0, 256)]))
    if reason is R.OTHER_PORT:
        return _patch(good, _at("UDP_DST"), struct.pack("!H", _other_than(rng, {port}, 0,
                                                                          65536)))
    if reason is R.IP_CHECKSUM:
        wrong = h.ip_checksum ^ int(rng.integers(1, 65536))
        return _patch(good, _at("IP_CHECKSUM"), struct.pack("!H", wrong), fix_checksum=False)
    if reason is R.IP_LENGTH:
        return _patch(good, _at("IP_TOTAL_LENGTH"), struct.pack(
            "!H", _other_than(rng, {len(good) - 14}, 0, 65536)))
    if reason is R.UDP_LENGTH:
        return _patch(good, _at("UDP_LENGTH"), struct.pack(
            "!H", _other_than(rng, {len(good) - 34}, 0, 65536)))
    if reason is R.VERSION:
        return _patch(good, _at("VERSION"), bytes([_other_than(rng, {1}, 0, 256)]))
    if reason is R.RESERVED_FLAGS:
        return _patch(good, _at("FLAGS"), bytes([h.flags | int(rng.integers(1, 32)) << 3]))
    if reason is R.ALREADY_ENCODED:
        return _patch(good, _at("FLAGS"), bytes([h.flags | FLAG_ENCODED]))
    if reason is R.NOT_ENCODED:
        return _patch(good, _at("FLAGS"), bytes([h.flags & ~FLAG_ENCODED]))
    if reason is R.CODEC:
        return _patch(good, _at("CODEC"), bytes([_other_than(rng, set(built), 0, 256)]))
    if reason is R.PARAM:
        return _patch(good, _at("PARAM"), bytes([_bad_param(h.codec, lane, rng)]))
    if reason is R.ZERO_N:
        return _patch(good, _at("N"), b"\0\0")
    return _length_mismatch(good, lane, rng, port, built)


def _reason(frame, lane, port, built, tuser_size=None):
    classify = classify_host_frame if lane == "tx" else classify_wire_frame
    return classify(frame, port=port, codecs_built_in=built, tuser_size=tuser_size)[1]


def malformed_frame(recipe, lane, *, codecs=None, port=DEFAULT_PORT):
    """The frame of a :class:`MalformedRecipe`: one that ``lane`` (``"tx"`` or ``"rx"``),
    built with ``codecs`` and ``port``, passes unchanged, for the reason its kind names.

    Raises ``ValueError`` naming ``recipe`` when the kind is not one of ``lane``'s or its
    codec is not built in."""
    _check_lane(lane)
    built = resolve_codecs(codecs)
    if recipe.kind not in MALFORMED_KINDS[lane]:
        raise ValueError(f"recipe: kind {recipe.kind!r} is not one of the {lane} lane's "
                         f"({', '.join(MALFORMED_KINDS[lane])})")
    if recipe.codec not in built:
        raise ValueError(f"recipe: codec {recipe.codec} is not built in")
    rng = np.random.default_rng(recipe.data_seed)
    good = _good_frame(lane, recipe.codec, rng, built, port)
    frame = _mutate(recipe.kind, good, lane, rng, port, built)
    if len(frame) < HEADER_LEN:
        want = BypassReason.SHORT_FRAME
    elif recipe.kind in _NOT_IPV4_KINDS:
        want = BypassReason.NOT_IPV4
    else:
        want = BypassReason(recipe.kind)
    got = _reason(frame, lane, port, built)
    if got is not want:
        raise RuntimeError(f"malformed frame of kind {recipe.kind!r} classifies as {got}")
    return frame


# ---- materialising: batches ---------------------------------------------------------

def _interleave(rng, streams, run_length):
    """The frames of ``streams`` in runs of 1…``run_length`` frames of one stream."""
    queues = [list(s) for s in streams]
    heads = [0] * len(queues)
    live = [k for k, q in enumerate(queues) if q]
    out = []
    while live:
        k = live[int(rng.integers(len(live)))]
        take = int(rng.integers(1, run_length + 1))
        out.extend(queues[k][heads[k]:heads[k] + take])
        heads[k] += take
        if heads[k] >= len(queues[k]):
            live.remove(k)
    return out


def _wrong_size(rng, frame):
    """``frame`` as an :class:`AxisFrame` whose beats end early or go on past its
    ``tuser_size`` (at least the 64-byte header is kept)."""
    data = frame.data
    if rng.random() < 0.5 and len(data) > HEADER_LEN:
        cut = int(rng.integers(HEADER_LEN, len(data)))
        return replace(frame, data=data[:cut], size=len(data))
    return replace(frame, data=data + rng.bytes(int(rng.integers(1, 200))), size=len(data))


def _insert(rng, frames, extra):
    for f in extra:
        frames.insert(int(rng.integers(len(frames) + 1)), f)


def _tuser(rng, data):
    return AxisFrame(data, src=int(rng.integers(0, 65536)), dst=int(rng.integers(0, 65536)))


def host_traffic(recipe, *, codecs=None, port=DEFAULT_PORT):
    """The TX lane's input of a :class:`TrafficRecipe`: :class:`AxisFrame` s in order.

    ``codecs`` and ``port`` are the lane's build; the recipe's codecs must be built in."""
    rng = np.random.default_rng([recipe.seed, 0])
    base = _batch_header(rng, port)
    streams = [stream_frames(s, base, k) for k, s in enumerate(recipe.streams)]
    frames = [_tuser(rng, f) for f in _interleave(rng, streams, recipe.run_length)]
    for k in rng.choice(len(frames), size=min(recipe.size_errors, len(frames)),
                        replace=False).tolist():
        frames[k] = _wrong_size(rng, frames[k])
    _insert(rng, frames, [_tuser(rng, malformed_frame(m, "tx", codecs=codecs, port=port))
                          for m in recipe.malformed])
    return frames


def arrival_times(recipe, frames):
    """The cycles at which ``frames`` (the batch's :func:`host_traffic`) start to arrive in
    a timed batch, or ``None`` (back to back). After each frame's beats comes a gap of 0,
    1, T−1, T, T+1 or 2T+7 cycles (T the idle timeout): every side of the timeout."""
    if recipe.idle_timeout is None:
        return None
    T = recipe.idle_timeout
    gaps = [g for g in (0, 1, T - 1, T, T + 1, 2 * T + 7) if g >= 0]
    rng = np.random.default_rng([recipe.seed, 2])
    times, t = [], 5
    for f in frames:
        times.append(t)
        t += _beats(len(f.data)) + int(rng.choice(gaps))
    return times


def wire_traffic(recipe, tx_output, *, codecs=None, port=DEFAULT_PORT):
    """The RX lane's input of a :class:`TrafficRecipe`: ``tx_output`` (what the TX lane
    sends, :class:`AxisFrame` s with their ``tuser``) with the recipe's wire-side
    malformed frames among them and some of its wire frames' ``tuser_size`` wrong."""
    rng = np.random.default_rng([recipe.seed, 1])
    built = resolve_codecs(codecs)
    frames = list(tx_output)
    wire = [k for k, f in enumerate(frames) if _reason(f.data, "rx", port, built) is None]
    for k in rng.choice(wire, size=min(recipe.wire_size_errors, len(wire)),
                        replace=False).tolist():
        frames[k] = _wrong_size(rng, frames[k])
    _insert(rng, frames, [_tuser(rng, malformed_frame(m, "rx", codecs=codecs, port=port))
                          for m in recipe.wire_malformed])
    return frames


# ---- what the lanes must produce ----------------------------------------------------

def _beats(length):
    return max(1, -(-length // 64))


def _size(frame):
    return len(frame.data) if frame.size is None else frame.size


def _axis(frame):
    return frame if isinstance(frame, AxisFrame) else AxisFrame(bytes(frame))


def lane_view(frame):
    """The bytes a lane reads of ``frame``: ``tuser_size`` of them, zeros where the beats
    ended early (what the lanes do with a frame whose ``tuser_size`` is wrong)."""
    frame = _axis(frame)
    size = _size(frame)
    return (frame.data + bytes(max(0, size - len(frame.data))))[:size]


@dataclass
class LaneExpectation:
    """What a hardware lane must produce: output frames in order with their ``tuser``
    (:class:`AxisFrame`), and its counters (the reference's and ``size_errors``)."""
    frames: list
    counters: dict


def _lane_inputs(frames, lane, port, built):
    """The frames as :class:`AxisFrame` s, what the lane reads of each, and whether it
    processes it; ``ValueError`` for a bypassed frame whose ``tuser_size`` is wrong."""
    frames = [_axis(f) for f in frames]
    views = [lane_view(f) for f in frames]
    processed = [_reason(v, lane, port, built) is None for v in views]
    for k, (f, p) in enumerate(zip(frames, processed, strict=True)):
        if not p and _size(f) != len(f.data):
            raise ValueError(f"frames: frame {k} is passed unchanged but its tuser_size "
                             f"({_size(f)}) is not its length ({len(f.data)})")
    errors = sum(p and _beats(len(f.data)) != _beats(_size(f))
                 for f, p in zip(frames, processed, strict=True))
    return frames, views, processed, errors


def expected_tx(frames, *, codecs=None, port=DEFAULT_PORT, mtu=DEFAULT_MTU, idle_timeout=None,
                times=None, close_at_end=True):
    """What a ``TxLane(codecs=codecs, port=port, mtu=mtu)`` must send for ``frames``
    (:class:`AxisFrame` s or ``bytes``, back to back, or each starting at its cycle of
    ``times``), with its idle timeout ``idle_timeout`` (``None``: never). With
    ``close_at_end`` false the lane's ``close`` is never raised: the wire frame open after
    the last host frame closes on the idle timeout instead (``close_idle``, not
    ``close_end``), which then must be set.

    Frames and counters are :func:`squeezenic_hw.reference.lane.tx`'s on what the lane
    reads (:func:`lane_view`); ``size_errors`` counts processed frames whose beats
    disagree with their ``tuser_size``. A bypassed frame keeps its ``tuser``, a wire
    frame takes that of the host frame holding its first element.

    Returns
    -------
    LaneExpectation
    """
    return _TxBatch(frames, codecs, port).expected(mtu=mtu, idle_timeout=idle_timeout,
                                                   times=times, close_at_end=close_at_end)


class _TxBatch:
    """Frames as a TX lane reads, classifies and encodes them: what :func:`expected_tx`
    makes once and coalesces on any arrival cycles (:meth:`expected`)."""

    def __init__(self, frames, codecs, port):
        self.codecs, self.port = codecs, port
        self.frames, self.views, self.processed, self.errors = _lane_inputs(
            frames, "tx", port, resolve_codecs(codecs))
        self.input = lane_reference.tx_input(self.views, port=port, codecs=codecs)
        self.hosts = [(parse(v).n, f) for v, f, p in
                      zip(self.views, self.frames, self.processed, strict=True) if p]
        self.ends = np.cumsum([n for n, _ in self.hosts]).tolist()
        self.bypassed = [(v, f) for v, f, p in
                         zip(self.views, self.frames, self.processed, strict=True) if not p]

    def expected(self, *, mtu, idle_timeout, times, close_at_end):
        if not close_at_end and idle_timeout is None:
            raise ValueError("close_at_end: without close, an idle timeout must close the "
                             "last wire frame")
        out, counters = lane_reference.tx(self.input, port=self.port, mtu=mtu,
                                          codecs=self.codecs, idle_timeout=idle_timeout,
                                          times=times)
        return self.expectation(out, counters, close_at_end=close_at_end)

    def expectation(self, out, counters, *, close_at_end):
        """The :class:`LaneExpectation` of the reference's ``out`` and ``counters``."""
        counters = dict(counters)
        if not close_at_end and counters["close_end"]:
            counters["close_end"] -= 1
            counters["close_idle"] += 1
        counters["size_errors"] = self.errors
        hosts, ends, bypassed = self.hosts, self.ends, self.bypassed
        expected, next_bypassed, element = [], 0, 0
        for data in out:
            # A built frame never equals a bypassed one in the strategies' traffic (their
            # IPv4 identifications differ): the bypassed frames are the outputs that equal
            # them.
            if next_bypassed < len(bypassed) and data == bypassed[next_bypassed][0]:
                src = bypassed[next_bypassed][1]
                next_bypassed += 1
            else:
                src = hosts[bisect.bisect_right(ends, element)][1]
                element += parse(data).n
            expected.append(AxisFrame(data, src=src.src, dst=src.dst))
        return LaneExpectation(expected, counters)


def expected_rx(frames, *, codecs=None, port=DEFAULT_PORT,
                max_host_elements=DEFAULT_HOST_ELEMENTS):
    """What an ``RxLane(codecs=codecs, port=port, max_host_elements=...)`` must send for
    ``frames``: :func:`squeezenic_hw.reference.lane.rx`'s frames and counters on what the
    lane reads, ``size_errors`` as in :func:`expected_tx`; every frame out takes the
    ``tuser`` of the frame it came from.

    Returns
    -------
    LaneExpectation
    """
    built = resolve_codecs(codecs)
    frames, views, processed, errors = _lane_inputs(frames, "rx", port, built)
    out, counters = lane_reference.rx(views, port=port, codecs=codecs,
                                      max_host_elements=max_host_elements)
    counters["size_errors"] = errors
    sources = []
    for v, f, p in zip(views, frames, processed, strict=True):
        sources += [f] * (-(-parse(v).n // max_host_elements) if p else 1)
    if len(sources) != len(out):
        raise RuntimeError(f"{len(out)} frames from the reference RX for {len(sources)} "
                           f"expected")
    return LaneExpectation([AxisFrame(d, src=s.src, dst=s.dst)
                            for d, s in zip(out, sources, strict=True)], counters)


@dataclass(frozen=True)
class Difference:
    """One way a lane's run differs from its expectation: the lane, the output frame
    (``None`` for frame counts, counters and runs that did not finish) and what."""
    lane: str
    frame: int | None
    what: str


_FIELDS = sorted((*span, name.lower()) for name, span in vars(HDR).items()
                 if not name.startswith("_"))


def _byte_name(k):
    for start, length, name in _FIELDS:
        if start <= k < start + length:
            return name
    return f"payload byte {k - HEADER_LEN}"


def _describe(got, want):
    if len(got) != len(want):
        return f"{len(got)} bytes, expected {len(want)}"
    k = next(i for i in range(len(got)) if got[i] != want[i])
    return f"byte {k} ({_byte_name(k)}): got {got[k]:#04x}, expected {want[k]:#04x}"


def differences(lane, frames, counters, expected):
    """Every way a run (``frames``: :class:`AxisFrame` s out, ``counters``) differs from
    ``expected`` (:class:`LaneExpectation`), first difference first; empty when equal."""
    found = []
    for k, (got, want) in enumerate(zip(frames, expected.frames, strict=False)):
        if got.data != want.data:
            found.append(Difference(lane, k, _describe(got.data, want.data)))
        elif (got.src, got.dst) != (want.src, want.dst):
            found.append(Difference(lane, k, f"tuser src/dst ({got.src}, {got.dst}), expected "
                                             f"({want.src}, {want.dst})"))
    if len(frames) != len(expected.frames):
        found.append(Difference(lane, min(len(frames), len(expected.frames)),
                                f"{len(frames)} frames out, expected {len(expected.frames)}"))
    return found + _counter_differences(lane, counters, expected.counters)


def _counter_differences(lane, counters, expected):
    return [Difference(lane, None, f"counter {name}: {counters.get(name)}, expected {value}")
            for name, value in expected.items() if counters.get(name) != value]


def _shorter_cut(got, want):
    """The element count of ``got`` when it is ``want`` (a wire frame) closed earlier: the
    same tensor stream and first offset, fewer elements (a threshold frame's layout may
    differ); else ``None``."""
    g, w = parse(got), parse(want)
    if g is None or w is None or not g.flags & FLAG_ENCODED:
        return None
    if w.codec == THRESHOLD_ID:
        g = replace(g, param=w.param)     # a threshold frame's param is its layout
    if (g.coalesce_key(), g.offset) != (w.coalesce_key(), w.offset) or not 0 < g.n < w.n:
        return None
    return g.n


def expected_tx_stalled(frames, got, got_counters, *, codecs=None, port=DEFAULT_PORT,
                        mtu=DEFAULT_MTU, idle_timeout):
    """What a TX lane with idle timeout ``idle_timeout`` must send for ``frames`` when
    stalls (idle cycles, backpressure) moved their beats, so that when an idle timeout
    fell is the lane's to say; ``got`` and ``got_counters`` are what it sent
    (:class:`AxisFrame` s) and counted.

    The lane may close the open wire frame for idleness before any frame, and nowhere
    else: every other byte and counter is the reference's. The expectation is
    :func:`expected_tx` with ``close_at_end`` false, on arrival cycles that put a gap of
    ``idle_timeout`` cycles before exactly the frames the lane's output shows an idle close
    before. Those are found from the first wire frame out that is the expectation's
    frame closed after fewer elements, at the start of a host frame: the gap goes before
    the first frame after the host frame before it. This repeats until no wire frame is
    such a cut; what still differs then is for :func:`differences_stalled` to report.
    (Frames the lane passes through are told from built ones by their bytes: the
    strategies' built and passed-through frames never share them.) A frame whose key
    differs closes the open frame anyway, and so does a threshold frame whose first
    element does not fit the open one, so a timeout before it shows only in the
    counters: expected ``close_mismatch`` (and, with threshold frames, ``close_full``)
    closes count as idle closes when ``got_counters`` says so.

    Returns
    -------
    (LaneExpectation, list of int)
        The expectation and the indices of the frames an idle close came before.
    """
    batch = _TxBatch(frames, codecs, port)
    views, processed = batch.views, batch.processed
    back_to_back = lane_reference.back_to_back_times(views)
    host_index = [k for k, p in enumerate(processed) if p]
    starts = np.cumsum([0] + [parse(views[k]).n for k in host_index]).tolist()
    passed = {v for v, p in zip(views, processed, strict=True) if not p}
    got_wire = [f.data for f in got if f.data not in passed]
    hosts = batch.input.frames
    lane = lane_reference.TxStepper(port=port, mtu=mtu, codecs=codecs,
                                    idle_timeout=idle_timeout)
    # One pass over the frames, comparing each built wire frame with the lane's as it
    # closes. An idle close found before frame f takes the reference back to its state
    # before f (nothing earlier depends on f's cycle), exactly as running it again on the
    # new cycles would; ``saved[f]`` is that state, with the built frames compared and
    # their elements.
    before, saved = [], []
    judging, checked, elements = True, 0, 0
    j = 0
    while j <= len(hosts):
        if len(saved) == j:
            saved.append((lane.save(), checked, elements))
        seen = len(lane.out)
        if j < len(hosts):
            lane.feed(hosts[j], back_to_back[j] + idle_timeout * bisect.bisect_right(before, j))
        else:
            lane.finish()
        frame = None
        for data in lane.out[seen:]:
            if data in passed:
                continue
            k, n_want = checked, parse(data).n
            checked, elements = checked + 1, elements + n_want
            if not judging or k >= len(got_wire) or got_wire[k] == data:
                continue
            n = _shorter_cut(got_wire[k], data)
            element = elements - n_want + (n or 0)
            host = bisect.bisect_left(starts, element)
            if n is None or host >= len(host_index) or starts[host] != element:
                judging = False              # not an idle close: a difference
                continue
            # the gap goes right after the host frame that ends at ``element``
            frame = host_index[host - 1] + 1
            if frame in before:
                judging, frame = False, None
                continue
            break
        if frame is None:
            j += 1
            continue
        bisect.insort(before, frame)
        # (a gap after frame j changes nothing up to it: step j again finds the same
        # difference, now one that ends the judging, as a run on the new cycles would)
        j = min(frame, j)
        state, checked, elements = saved[j]
        lane.restore(state)
        del saved[j + 1:]
    expected = batch.expectation(lane.out, lane.counters, close_at_end=False)
    if judging:
        _idle_in_place_of(expected.counters, got_counters,
                          _encodes_threshold(views, processed))
    return expected, before


def _idle_in_place_of(counters, got, threshold):
    """Count as idle closes the expected closes that a timeout before the next frame
    would have made instead (key mismatches; with ``threshold``, full closes too, which a
    threshold frame makes when the next frame's first element arrives and does not fit)
    when ``got``'s counters say exactly that happened."""
    kinds = ["close_mismatch"] + (["close_full"] if threshold else [])
    fewer = {name: counters[name] - got.get(name, 0) for name in kinds}
    moved = got.get("close_idle", 0) - counters["close_idle"]
    if moved > 0 and min(fewer.values()) >= 0 and sum(fewer.values()) == moved:
        counters["close_idle"] += moved
        for name, n in fewer.items():
            counters[name] -= n


def holds_threshold(frames, *, codecs=None, port=DEFAULT_PORT):
    """Whether the TX lane encodes a ``threshold`` frame of ``frames``. Such a frame may
    hold the lane's decision stage a few cycles after its input took the beats (its wire
    frame's payload is written once the frame has closed, and the dense frames behind it
    wait in order), so an idle close can fall later than the input's clock says, as under
    stalls: a timed batch that holds one is judged by :func:`expected_tx_stalled`."""
    built = resolve_codecs(codecs)
    if THRESHOLD_ID not in built:
        return False
    _, views, processed, _ = _lane_inputs(frames, "tx", port, built)
    return _encodes_threshold(views, processed)


def _encodes_threshold(views, processed):
    return any(p and parse(v).codec == THRESHOLD_ID
               for v, p in zip(views, processed, strict=True))


def differences_stalled(lane, frames, counters, expected, inputs, *, port=DEFAULT_PORT,
                        codecs=None):
    """:func:`differences` where the order of built and passed-through frames is not
    compared (a passed-through frame may overtake a wire frame that stalls hold): the
    built frames in order, the passed-through ones (those equal to a frame of ``inputs``
    that the lane does not process) in order, and the counters. A difference's ``frame``
    is its index in ``frames``."""
    built = resolve_codecs(codecs)
    _, views, processed, _ = _lane_inputs(inputs, "tx", port, built)
    passed = {v for v, p in zip(views, processed, strict=True) if not p}
    found = []
    for through in (False, True):
        got = [k for k, f in enumerate(frames) if (f.data in passed) == through]
        want = [f for f in expected.frames if (f.data in passed) == through]
        part = differences(lane, [frames[k] for k in got], {}, LaneExpectation(want, {}))
        kind = "passed-through" if through else "built"
        found += [Difference(lane, got[d.frame] if d.frame is not None and d.frame < len(got)
                             else len(frames), f"{kind} frame: {d.what}") for d in part]
    found.sort(key=lambda d: d.frame)
    return found + _counter_differences(lane, counters, expected.counters)


# ---- a batch through both lanes -------------------------------------------------------

@dataclass
class LaneCheck:
    """One lane's run of a batch: its input, the expectation, the run (``None`` when it
    did not finish), the differences, and where the time went."""
    lane: str
    inputs: list
    expected: LaneExpectation
    run: object = None
    differences: list = field(default_factory=list)
    reference_seconds: float = 0.0
    model_seconds: float = 0.0
    #: a timed TX run, not stalled, whose lane held its input back: judged as stalled
    held: bool = False


def _run_and_compare(lane, inputs, expected, run_lane, reference_seconds, judge=None,
                     **timing):
    """``judge(run)``, when given, makes the expectation from the run and compares:
    ``(expected, differences)``."""
    check = LaneCheck(lane, inputs, expected, reference_seconds=reference_seconds)
    start = time.perf_counter()
    try:
        check.run = run_lane(lane, inputs, **timing)
    except TimeoutError as exc:
        check.differences = [Difference(lane, None, f"the lane hung: {exc}")]
    except AssertionError as exc:    # the output broke an AXI-Stream rule
        check.differences = [Difference(lane, None, f"AXI-Stream rule broken: {exc}")]
    check.model_seconds = time.perf_counter() - start
    if check.run is not None and judge is not None:
        start = time.perf_counter()
        check.expected, check.differences = judge(check.run)
        check.reference_seconds += time.perf_counter() - start
    elif check.run is not None:
        check.differences = differences(lane, check.run.frames, check.run.counters, expected)
    return check


def round_trip(recipe, run_lane, *, codecs=None, port=DEFAULT_PORT, mtu=DEFAULT_MTU,
               max_host_elements=DEFAULT_HOST_ELEMENTS, stalled=False, exact_idle=True):
    """A batch through the TX lane, then the RX lane, each compared with the reference.

    The RX lane is fed the *reference's* TX output (the TX expectation, ``tuser``
    included), with the recipe's wire-side frames among it: RX is judged on the same
    input whatever the TX hardware did, and when the TX lane matches, that input is
    also what the hardware sent.

    Parameters
    ----------
    recipe : TrafficRecipe
    run_lane : callable
        ``run_lane(lane, frames)`` with ``lane`` ``"tx"`` or ``"rx"``: the run
        (:class:`~squeezenic_hw.sim.lane.LaneRun`) of that lane, built with ``codecs``
        and ``port`` (TX: ``mtu``; RX: ``max_host_elements``), on the :class:`AxisFrame` s
        ``frames``. ``TimeoutError`` (the
        lane hung) and ``AssertionError`` (its output broke an AXI-Stream rule) become
        differences. A timed batch's TX run is ``run_lane("tx", frames, times=...,
        idle_timeout=..., close_at_end=False)``: the frames arrive at those cycles, the
        lane's idle timeout is set, ``close`` is never raised (the timeout closes the last
        wire frame), and neither idle cycles nor backpressure may move the frames' beats
        (the reference's clock counts the beats at their times). With ``stalled`` it is
        ``run_lane("tx", frames, times=..., idle_timeout=..., close_at_end=False,
        stalled=True)``: the run keeps its idle cycles and backpressure, and is judged by
        :func:`expected_tx_stalled` and :func:`differences_stalled` (when an idle timeout
        fell is the lane's to say). So is an unstalled timed run whose lane held its input
        back (``LaneRun.input_stalls``: its wire is slower than its input, as at a small
        MTU, so the frames went in later than their times); its check is ``held``.
    stalled : bool
        Whether a timed batch's TX run is stalled (no effect on other batches). A timed
        batch whose TX lane encodes ``threshold`` frames is judged as stalled either way
        (:func:`holds_threshold`).
    exact_idle : bool
        Whether the TX lane's idle closes are cycle-exact when it is not stalled (a
        ``NarrowTxLane``'s are not: ``docs/lanes.md``). When false, every timed batch is
        judged as stalled.

    Returns
    -------
    dict
        ``{"tx": LaneCheck, "rx": LaneCheck}``.
    """
    start = time.perf_counter()
    tx_in = host_traffic(recipe, codecs=codecs, port=port)
    times = arrival_times(recipe, tx_in)
    timing = {} if times is None else {"times": times, "idle_timeout": recipe.idle_timeout,
                                       "close_at_end": False}
    tx_expected = expected_tx(tx_in, codecs=codecs, port=port, mtu=mtu, **timing)
    judge = None
    if times is not None and stalled:
        timing["stalled"] = True

    def stalled_judge(run):
        expected, _ = expected_tx_stalled(tx_in, run.frames, run.counters, codecs=codecs,
                                          port=port, mtu=mtu, idle_timeout=recipe.idle_timeout)
        return expected, differences_stalled("tx", run.frames, run.counters, expected, tx_in,
                                             port=port, codecs=codecs)

    def held_or_exact(run):
        # A lane that held its input back (a wire slower than its input: a small MTU)
        # took frames later than their times: when its idle timeouts fell is its own.
        if run.input_stalls:
            return stalled_judge(run)
        return tx_expected, differences("tx", run.frames, run.counters, tx_expected)

    if times is not None:
        judge = stalled_judge if (stalled or not exact_idle or holds_threshold(
            tx_in, codecs=codecs, port=port)) else held_or_exact
    tx = _run_and_compare("tx", tx_in, tx_expected, run_lane, time.perf_counter() - start,
                          judge, **timing)
    tx.held = bool(judge is held_or_exact and tx.run is not None and tx.run.input_stalls)
    start = time.perf_counter()
    rx_in = wire_traffic(recipe, tx.expected.frames, codecs=codecs, port=port)
    rx_expected = expected_rx(rx_in, codecs=codecs, port=port,
                              max_host_elements=max_host_elements)
    rx = _run_and_compare("rx", rx_in, rx_expected, run_lane, time.perf_counter() - start)
    return {"tx": tx, "rx": rx}


def narrow_spec(codecs, code_bits):
    """The ``NarrowTxLane`` codec spec of ``codecs`` and ``code_bits`` (``"sign"``, or
    ``"fixed:b"`` for b of 2, 4, 8); ``ValueError`` when they make no narrow lane."""
    names = [codec_info(c).name for c in _codec_ids(codecs)]
    spec = "sign" if names == ["sign"] and code_bits is None else (
        f"fixed:{code_bits}" if names == ["fixed"] else None)
    if spec not in NARROW_LANE_CODECS:
        raise ValueError("narrow: a narrow lane is of one codec, sign (without code_bits) "
                         "or fixed with code_bits 2, 4 or 8; got codecs "
                         f"{', '.join(names)}, code_bits {code_bits}")
    return spec


def lane_builders(codecs=None, *, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                  max_host_elements=DEFAULT_HOST_ELEMENTS, trusted=False, code_bits=None,
                  narrow=False):
    """``{"tx": (build, key), "rx": (build, key)}``: functions of no arguments that build
    the ``TxLane`` (``mtu``, ``port``, ``trusted``, ``code_bits``) and ``RxLane``
    (``port``, ``max_host_elements``) of ``codecs`` (default 0–6), and keys that name those
    builds for the compiled model's cache. With ``narrow`` the TX lane is the
    ``NarrowTxLane`` of :func:`narrow_spec`. (A bad parameter is the lanes' ``ValueError``
    when they are built.)"""
    from squeezenic_hw.gateware.rx.lane import RxLane
    from squeezenic_hw.gateware.tx.lane import TxLane
    from squeezenic_hw.gateware.tx.narrow import NarrowTxLane

    ids = _codec_ids(codecs)
    tx = dict(codecs=ids, mtu=mtu, port=port)
    if trusted:
        tx |= dict(trusted=True, code_bits=code_bits)
    rx = dict(codecs=ids, port=port, max_host_elements=max_host_elements)
    # the keys of the default build name it as before, so its cached models are found
    tx_args = ", ".join(f"{k}={v}" for k, v in tx.items())
    tx_key = f"TxLane(codecs={ids})" if (mtu, port, trusted) == (
        DEFAULT_MTU, DEFAULT_PORT, False) else f"TxLane({tx_args})"
    rx_key = f"RxLane(codecs={ids})" if (port, max_host_elements) == (
        DEFAULT_PORT, DEFAULT_HOST_ELEMENTS) else \
        f"RxLane(codecs={ids}, port={port}, max_host_elements={max_host_elements})"
    rx_build = (lambda: RxLane(**rx), rx_key)
    if narrow:
        spec = narrow_spec(codecs, code_bits)
        return {"tx": (lambda: NarrowTxLane(spec, mtu=mtu, port=port),
                       f"NarrowTxLane({spec!r}, mtu={mtu}, port={port})"), "rx": rx_build}
    return {"tx": (lambda: TxLane(**tx), tx_key), "rx": rx_build}
