"""What moves between the stages of the reduce lane, and its configuration.

* :class:`ReduceCheck` — the outcome of the receive checks on a frame: the hardware twin
  of :class:`squeezenic_hw.spec.reduce.ReduceReason` (same values), plus ``NOT_REDUCE``.
* :class:`ReduceFrameInfo` — the fields of a reduce frame's header the lane works with.
* :class:`CheckedBeat` — a received beat with its frame's check and fields.
* :class:`ContributionCheck`, :class:`ContributionBeat` — the same for the host's
  contribution frames (section 8.5).
* :func:`sums_job_layout` — up to 16 partial sums of a frame, after the add.
* :class:`ReduceConfig` — a node's reduce configuration (its registers).
"""

from amaranth import unsigned
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT, AxisBeat, derived_enum
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.counters import CONTRIBUTION_COUNTERS, REDUCE_COUNTERS
from squeezenic_hw.spec.reduce import INTEGER_CODECS, ContributionReason, ReduceReason

__all__ = ["ReduceCheck", "check_of", "ReduceFrameInfo", "CheckedBeat", "ReduceConfig",
           "reduce_counters_layout", "contribution_counters_layout", "sums_job_layout",
           "integer_codecs", "ContributionCheck", "ContributionBeat"]


#: The hardware twin of :class:`~squeezenic_hw.spec.reduce.ReduceReason`, derived from it
#: (the same values), with ``NOT_REDUCE`` after the reasons.
ReduceCheck = derived_enum(
    "ReduceCheck", __name__,
    "Outcome of the receive checks: :class:`~squeezenic_hw.spec.reduce.ReduceReason` by "
    "value (``NONE``: taken), and ``NOT_REDUCE``: not a reduce frame.",
    {r.name: r.value for r in ReduceReason} | {"NOT_REDUCE": len(ReduceReason)})


def check_of(reason):
    """The :class:`ReduceCheck` of a :class:`~squeezenic_hw.spec.reduce.ReduceReason`, or
    ``NOT_REDUCE`` for ``None`` (the reference's verdict on a frame that is not a reduce
    frame)."""
    return ReduceCheck.NOT_REDUCE if reason is None else ReduceCheck[reason.name]


#: The hardware twin of :class:`~squeezenic_hw.spec.reduce.ContributionReason` (same
#: values), with ``NOT_CONTRIBUTION`` after the reasons.
ContributionCheck = derived_enum(
    "ContributionCheck", __name__,
    "Outcome of the contribution checks: :class:`~squeezenic_hw.spec.reduce."
    "ContributionReason` by value (``NONE``: taken), and ``NOT_CONTRIBUTION``.",
    {r.name: r.value for r in ContributionReason}
    | {"NOT_CONTRIBUTION": len(ContributionReason)})


class ReduceFrameInfo(data.Struct):
    """A reduce frame's header fields (section 8.3), cut to the widths a taken frame's
    values fit: on any other frame they are the low bits of its bytes."""
    gather: unsigned(1)           # flags bit 3: the gather phase
    contributions: unsigned(5)    # k, 1 … 16
    origin: unsigned(4)           # the chunk, 0 … 15
    width: unsigned(6)            # bits per sum, 2 … 32
    n: unsigned(16)               # sums in the frame
    offset: unsigned(32)          # tensor index of the first sum


class CheckedBeat(data.Struct):
    """A received beat, unchanged, with its frame's check (on every beat) and, on its first
    beat, its header's fields."""
    beat: AxisBeat
    first: unsigned(1)            # the frame's first beat (its header)
    check: ReduceCheck            # the frame's outcome
    info: ReduceFrameInfo         # first beat: the header's fields; other beats: don't care


class ContributionBeat(data.Struct):
    """A beat of a contribution frame taken, unchanged; ``first``: its header beat."""
    beat: AxisBeat
    first: unsigned(1)


def sums_job_layout(sum_width):
    """A job of partial sums: ``sums[0 … count−1]`` of a frame of ``width`` bits per sum,
    each in the low ``width`` of its ``sum_width`` bits (zero above); ``last``: the frame's
    last job."""
    return data.StructLayout({
        "sums": data.ArrayLayout(unsigned(sum_width), ELEMENTS_PER_BEAT),
        "count": unsigned(5), "width": unsigned(6), "last": unsigned(1)})


class ReduceConfig(data.Struct):
    """A node's reduce configuration, as software writes it (``docs/wire-format.md``
    section 8.4); written while ``enable`` is 0."""
    enable: unsigned(1)           # 0: every reduce frame is bypassed, expected offsets forgotten
    nodes: unsigned(5)            # N, 2 … 16
    rank: unsigned(4)             # r, 0 … N − 1
    codec: unsigned(8)            # the codec id (a reducible codec built in)
    param: unsigned(8)            # its parameter as frames carry it (fixed/qsgd bits, else 0)
    stochastic: unsigned(1)       # the flag as frames carry it (0 without stochastic rounding)
    scale: unsigned(32)           # fp32 bits
    aux: unsigned(32)             # fp32 bits
    elements: unsigned(32)        # E, the tensor's elements
    chunk: unsigned(32)           # C = ⌈E / N⌉, which software divides out
    chunks: unsigned(5)           # K = ⌈E / C⌉, the non-empty chunks (0 when E = 0)
    seed: unsigned(32)            # the node's encode seed, seed + r (section 8.5)


def reduce_counters_layout():
    """The counters of the receive checks: :data:`~squeezenic_hw.spec.counters.REDUCE_COUNTERS`,
    32 bits each."""
    return data.StructLayout({name: unsigned(32) for name in REDUCE_COUNTERS})


def contribution_counters_layout():
    """The counters of the contribution checks:
    :data:`~squeezenic_hw.spec.counters.CONTRIBUTION_COUNTERS`, 32 bits each."""
    return data.StructLayout({name: unsigned(32) for name in CONTRIBUTION_COUNTERS})


def integer_codecs(codecs):
    """The integer codecs (``fixed``, ``qsgd``, ``sign``, in that order) among a build's
    ``codecs`` (names or ids); ``ValueError`` naming ``codecs`` when there is none or a
    name is not a codec."""
    if isinstance(codecs, (str, bytes)) or not hasattr(codecs, "__iter__"):
        raise ValueError(f"codecs: expected an iterable of codec names or ids, got {codecs!r}")
    try:
        names = {codec_info(c).name for c in codecs}
    except ValueError as e:
        raise ValueError(f"codecs: {e}") from None
    ints = tuple(c for c in INTEGER_CODECS if c in names)
    if not ints:
        raise ValueError(f"codecs: none of {sorted(names)} is an integer codec "
                         f"({', '.join(INTEGER_CODECS)})")
    return ints
