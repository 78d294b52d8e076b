"""Which codec the generator lanes of a ``host_bw`` build take by default: the one whose
compression keeps the wire at 100 Gb/s, as the paper's Table 6 did; and how many
loopback RX lanes a wire needs to be expanded at that codec's ratio. These are the
defaults of :class:`~.params.PluginParams`; the report's policy
(``flows/report/policy.py``) re-exports them.
"""

import math
from dataclasses import dataclass

from squeezenic_hw.spec.codecs import CODECS, parse_codec_spec
from squeezenic_hw.spec.scaling import LANE_GBPS, lanes_for

__all__ = ["WIRE_GBPS", "CodecChoice", "codec_candidates", "default_codec",
           "gen_lanes_trusted", "spec_ratio", "loopback_lanes"]

#: Wire rate the default codec keeps (Gb/s): one 100 GbE port.
WIRE_GBPS = 100


@dataclass(frozen=True)
class CodecChoice:
    """A codec setting for ``host_bw`` Gb/s of host data onto a ``wire_gbps`` wire."""
    spec: str                       # "fixed:8", "sign", ...
    name: str
    param: int                      # 0 when the codec takes none
    ratio: float                    # 32 / bits per element
    needed: float                   # host_bw / wire_gbps
    wire_gbps_at_full_rate: float   # host_bw / ratio (payload; headers not counted)

    @property
    def fits_wire(self):
        """Whether the wire carries the host data at full rate (ratio ≥ needed)."""
        return self.ratio >= self.needed - 1e-9


def codec_candidates():
    """Every ``(spec, name, param, ratio)``, in the codec table's order, parameters by
    decreasing bit width (so increasing ratio)."""
    out = []
    for info in CODECS.values():
        if info.param_range:
            lo, hi = info.param_range
            out.extend((f"{info.name}:{b}", info.name, b, info.ratio(b))
                       for b in range(hi, lo - 1, -1))
        else:
            out.append((info.name, info.name, 0, info.ratio()))
    return out


def default_codec(host_bw, *, wire_gbps=WIRE_GBPS):
    """The codec whose ratio keeps the wire at ``wire_gbps`` for ``host_bw``, as the paper did.

    Chosen: the *cheapest* setting whose ratio reaches ``host_bw / wire_gbps``, cheapest
    meaning the least compression (the smallest sufficient ratio, so the least
    precision lost); a tie goes to the codec listed first in the codec table (lowest
    id: ``fixed`` before ``qsgd``, ``fp16`` before ``bf16``). When no setting reaches it
    (6400 Gb/s needs 64, the largest ratio is 32) the highest-ratio setting is
    returned and :attr:`CodecChoice.fits_wire` is false
    (``wire_gbps_at_full_rate`` > ``wire_gbps``).

    Examples: 100 → raw, 400 → fixed:8, 800 → fixed:4, 1600 → fixed:2, 3200 → sign,
    6400 → sign (200 Gb/s on the wire at full host rate).
    """
    lanes_for(host_bw)   # ValueError naming host_bw
    needed = host_bw / wire_gbps
    cands = codec_candidates()
    fitting = [c for c in cands if c[3] >= needed - 1e-9]
    if fitting:
        best = min(fitting, key=lambda c: c[3])          # min() keeps the first of a tie
    else:
        best = max(cands, key=lambda c: c[3])
    spec, name, param, ratio = best
    return CodecChoice(spec=spec, name=name, param=param, ratio=ratio, needed=needed,
                       wire_gbps_at_full_rate=host_bw / ratio)


def gen_lanes_trusted(specs):
    """Whether generator lanes of the codec ``specs`` are built for a trusted source (no
    classifier, no bypass): unless ``threshold`` is among them, whose keep mask the
    classifier computes."""
    return not any(parse_codec_spec(s)[0].variable for s in specs)


def spec_ratio(spec):
    """The largest compression ratio ``spec`` can run at: its own for ``"fixed:4"`` or a
    codec without parameter, the smallest width's for ``"fixed"`` (16), None for a codec
    whose payload size depends on the data (``threshold``)."""
    info, param = parse_codec_spec(spec)
    if info.variable:
        return None
    if param is None and info.param_range:
        return max(info.ratio(p) for p in range(info.param_range[0], info.param_range[1] + 1))
    return info.ratio(param)


def loopback_lanes(host_bw, specs, *, wire_gbps=WIRE_GBPS):
    """RX lanes (each with its checker) that expand a ``wire_gbps`` wire: the rule of the
    ``--loopback`` build.

    A wire frame of ratio ``r`` expands to ``r`` times its payload, and one RX lane
    delivers ``LANE_GBPS`` (100 Gb/s) of host frames, so a ``wire_gbps`` wire at ratio
    ``r`` needs ``ceil(r · wire_gbps / LANE_GBPS)`` lanes to keep up; ``r`` is the largest
    ratio the generator lanes' codecs (``specs``) can run at (:func:`spec_ratio`). More
    lanes than generators (``host_bw / 100``) would never be fed, so the count is capped
    there, and a codec of data-dependent size (``threshold``) takes one lane per
    generator. Examples on a 100 Gb/s wire: ``fixed:8`` (r = 4) → 4, ``sign`` (r = 32)
    at 6400 Gb/s → 32 of the 64 generators' lanes, ``fp16`` at 200 Gb/s → 2.
    """
    n = lanes_for(host_bw)
    ratios = [spec_ratio(s) for s in specs]
    if not ratios:
        raise ValueError("codecs must name at least one codec")
    if any(r is None for r in ratios):
        return n
    return max(1, min(n, math.ceil(max(ratios) * wire_gbps / LANE_GBPS - 1e-9)))
