"""What configures an on-chip data generator run: its parameters, their ranges and their
encoding as the generator's control inputs (``docs/generator.md``). The values it emits
are defined by :mod:`squeezenic_hw.reference.generator`."""

from dataclasses import dataclass, field, replace

import numpy as np

from .codecs import codec_info
from .frames import Header
from .header import DEFAULT_HOST_ELEMENTS, DEFAULT_PORT, FLAG_STOCHASTIC, HEADER_LEN, MAX_PKT_LEN

__all__ = ["MAX_ELEMENTS", "DEFAULT_RATE", "rate_to_q8_8", "GeneratorConfig",
           "config_values", "NARROW_LANE_CODECS", "narrow_lane_settings", "pow2_scale_bits",
           "lane_run_config", "VALUE_EXPONENT_HIGH"]

#: Most elements in one host frame: 64 + 4·2384 = 9600 bytes = ``MAX_PKT_LEN``.
MAX_ELEMENTS = (MAX_PKT_LEN - HEADER_LEN) // 4
#: The upper nibble of every generated value's biased exponent (``112 + g``, ``g`` < 16,
#: :mod:`squeezenic_hw.reference.generator`): what a consumer of the generator's values
#: may take as given.
VALUE_EXPONENT_HIGH = 0b0111
#: Default rate: 100 Gb/s of frame bytes at 250 MHz = 50 bytes per cycle.
DEFAULT_RATE = 50.0


def rate_to_q8_8(rate):
    """A rate in bytes per cycle as the Q8.8 word of the gateware (nearest 1/256).

    Raises ``ValueError`` outside 0 … 255.996.
    """
    q = round(float(rate) * 256)
    if not 0 <= q < 1 << 16:
        raise ValueError(f"rate_bytes_per_cycle must be in [0, 256), got {rate}")
    return q


@dataclass(frozen=True)
class GeneratorConfig:
    """What one generator run emits (the gateware's control inputs, plus its template).

    ``template`` supplies every header field the generator does not set itself
    (MACs, IPv4 addresses, TOS, TTL, DF, protocol, UDP destination port,
    version); in the gateware they are the ``template`` constructor argument,
    all the other fields are control inputs. ``tuser_src``/``tuser_dst`` and
    ``rate_bytes_per_cycle`` do not change the frame bytes.
    """
    codec: int = 0
    param: int = 0
    stochastic: bool = False
    scale_bits: int = 0x3F800000      # 1.0
    aux_bits: int = 0x3F800000        # 1.0
    seed: int = 0                     # the header's codec seed
    value_seed: int = 0               # seed of the generated values
    offset: int = 0                   # tensor index of element 0 of frame 0
    elements: int = DEFAULT_HOST_ELEMENTS
    flush_every: int = 0              # flush flag on every K-th frame; 0 = never
    udp_src_port: int = DEFAULT_PORT
    template: Header = field(default_factory=Header)
    tuser_src: int = 0
    tuser_dst: int = 0
    rate_bytes_per_cycle: float = DEFAULT_RATE

    def __post_init__(self):
        bits = {"codec": 8, "param": 8, "scale_bits": 32, "aux_bits": 32, "seed": 32,
                "value_seed": 32, "offset": 32, "flush_every": 16, "udp_src_port": 16,
                "tuser_src": 16, "tuser_dst": 16}
        for name, width in bits.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) \
                    or not 0 <= v < 1 << width:
                raise ValueError(f"{name} must be an integer in [0, 2**{width}), got {v!r}")
        if isinstance(self.elements, bool) or not isinstance(self.elements, (int, np.integer)) \
                or not 1 <= self.elements <= MAX_ELEMENTS:
            raise ValueError(f"elements must be in 1…{MAX_ELEMENTS}, got {self.elements!r}")
        if self.stochastic not in (0, 1):
            raise ValueError(f"stochastic must be a bool, got {self.stochastic!r}")
        if not isinstance(self.template, Header):
            raise ValueError(f"template must be a frames.Header, got {self.template!r}")
        rate_to_q8_8(self.rate_bytes_per_cycle)

    @property
    def frame_length(self):
        """Bytes per frame: 64 + 4·elements."""
        return HEADER_LEN + 4 * self.elements

    @property
    def flags(self):
        """Header flags of a frame without ``flush``."""
        return FLAG_STOCHASTIC if self.stochastic else 0


def config_values(config):
    """Control-input values for a :class:`GeneratorConfig`.

    Returns ``{port name: int}`` for every control input but ``start`` and
    ``n_frames`` (the template is a constructor argument, not a port). In a
    testbench: ``for name, v in config_values(cfg).items(): ctx.set(getattr(dut, name), v)``.
    """
    return {
        "elements": config.elements,
        "codec": config.codec,
        "param": config.param,
        "stochastic": int(config.stochastic),
        "scale": config.scale_bits,
        "aux": config.aux_bits,
        "seed": config.seed,
        "value_seed": config.value_seed,
        "offset": config.offset,
        "flush_every": config.flush_every,
        "udp_src_port": config.udp_src_port,
        "tuser_src": config.tuser_src,
        "tuser_dst": config.tuser_dst,
        "rate_bytes_per_cycle": rate_to_q8_8(config.rate_bytes_per_cycle),
    }


#: Codec specs whose generator lanes are built narrow, for that codec alone
#: (``NarrowTxLane``, ``docs/lanes.md``).
NARROW_LANE_CODECS = ("sign", "fixed:2", "fixed:4", "fixed:8")


def narrow_lane_settings(codecs):
    """What a generator lane built for ``codecs`` (codec specs) holds fixed, whatever its
    control registers say: ``{"codec": id, "param": q or None, "deterministic": bool,
    "pow2_scale": bool}`` for one :data:`NARROW_LANE_CODECS` spec, else None.

    A narrow lane encodes nothing else: ``fixed:q`` rounds to nearest (``stochastic``
    clear) and takes scales that are powers of two, so the generator's scale keeps only
    its sign and exponent (:func:`pow2_scale_bits`).
    """
    specs = [codecs] if isinstance(codecs, (str, int)) else list(codecs or ())
    if len(specs) != 1 or str(specs[0]).strip() not in NARROW_LANE_CODECS:
        return None
    name, _, q = str(specs[0]).strip().partition(":")
    fixed = bool(q)
    return {"codec": codec_info(name).id, "param": int(q) if fixed else None,
            "deterministic": fixed, "pow2_scale": fixed}


def pow2_scale_bits(bits):
    """An fp32 scale rounded down in magnitude to a power of two (its fraction bits
    cleared; a subnormal becomes ±0); NaNs stay as they are."""
    bits = int(bits)
    if (bits >> 23) & 0xFF == 0xFF and bits & 0x7FFFFF:
        return bits
    return bits & 0xFF800000


def lane_run_config(config, codecs):
    """The run a generator lane built for ``codecs`` makes of ``config``
    (:func:`narrow_lane_settings`; ``config`` itself for other lanes)."""
    fixed = narrow_lane_settings(codecs)
    if fixed is None:
        return config
    out = replace(config, codec=fixed["codec"])
    if fixed["param"] is not None:
        out = replace(out, param=fixed["param"])
    if fixed["deterministic"]:
        out = replace(out, stochastic=False)
    if fixed["pow2_scale"]:
        out = replace(out, scale_bits=pow2_scale_bits(config.scale_bits))
    return out
