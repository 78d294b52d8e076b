"""Which codec a report uses at each host bandwidth: the one whose compression keeps the
wire at 100 Gb/s."""

from dataclasses import dataclass

from squeezenic_hw.spec.codecs import CODECS, codec_info
from squeezenic_hw.spec.scaling import lanes_for

#: Wire rate the default codec keeps (Gb/s): one 100 GbE port.
WIRE_GBPS = 100


#: Host bandwidths of the default report (the paper's Table 6).
DEFAULT_HOST_BWS = (400, 800, 1600, 3200, 6400)


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


def codec_name(spec):
    """Codec name of ``"fixed:4"``, ``"fixed"``, ``"sign"`` or an id; validates a parameter."""
    text = str(spec).strip()
    name, _, param = text.partition(":")
    info = codec_info(int(name) if name.isdigit() else name)
    if param:
        if not info.param_range:
            raise ValueError(f"codec {info.name!r} takes no parameter, got {text!r}")
        try:
            p = int(param)
        except ValueError:
            raise ValueError(f"codec parameter must be an integer, got {text!r}") from None
        info.bits_per_element(p)
    return info.name


def ordered_codecs(names):
    return tuple(sorted(set(names), key=lambda n: codec_info(n).id))
