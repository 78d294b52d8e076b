"""Which codec a report uses at each host bandwidth: the one whose compression keeps the
wire at 100 Gb/s (:mod:`squeezenic_hw.build.codec_choice`, the default of
``PluginParams.gen_codecs``), and how many loopback RX lanes a build gets."""

from squeezenic_hw.build.codec_choice import (
    WIRE_GBPS,
    CodecChoice,
    codec_candidates,
    default_codec,
    loopback_lanes,
    spec_ratio,
)
from squeezenic_hw.spec.codecs import codec_info, parse_codec_spec

__all__ = ["WIRE_GBPS", "DEFAULT_HOST_BWS", "CodecChoice", "codec_candidates", "default_codec",
           "codec_name", "ordered_codecs", "loopback_lanes", "spec_ratio"]

#: Host bandwidths of the default report (the paper's Table 6).
DEFAULT_HOST_BWS = (400, 800, 1600, 3200, 6400)


def codec_name(spec):
    """Codec name of ``"fixed:4"``, ``"fixed"``, ``"sign"`` or an id; validates a parameter."""
    return parse_codec_spec(spec)[0].name


def ordered_codecs(names):
    return tuple(sorted(set(names), key=lambda n: codec_info(n).id))
