"""The build parameters of the OpenNIC plugin, checked and resolved once."""

from dataclasses import dataclass, field, fields

from squeezenic_hw.spec.codecs import codec_info, parse_codec_spec, resolve_codecs
from squeezenic_hw.spec.counters import TRUSTED_TX_COUNTERS, TX_COUNTERS
from squeezenic_hw.spec.generator import narrow_lane_settings
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT, MAX_PKT_LEN
from squeezenic_hw.spec.reduce import INTEGER_CODECS
from squeezenic_hw.spec.scaling import SRC_PORT_BASE, lanes_for

from .codec_choice import default_codec, loopback_lanes

__all__ = ["PluginParams", "INT_RANGES", "check_int", "check_param"]

#: The integer build parameters: name → (lowest, highest, unit words of the complaint).
INT_RANGES = {
    "num_intf": (1, 2, " (NUM_PHYS_FUNC = NUM_CMAC_PORT)"),
    "mtu": (68, MAX_PKT_LEN, " bytes"),
    "port": (1, 0xFFFF, ""),
    "max_host_elements": (1, (MAX_PKT_LEN - 64) // 4, ""),
    "idle_timeout": (0, 2**32 - 1, " cycles"),
}


def check_int(name, value, lo, hi, what=""):
    """``ValueError`` naming ``name`` unless ``value`` is an int (not a bool) in
    ``lo`` … ``hi``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an int from {lo} to {hi}{what}, got {value!r}")


def check_param(name, value):
    """:func:`check_int` of the build parameter ``name`` (:data:`INT_RANGES`)."""
    check_int(name, value, *INT_RANGES[name])


def _resolved():
    """A field :meth:`PluginParams.__post_init__` computes from the others."""
    return field(init=False, repr=False, compare=False)


@dataclass(frozen=True)
class PluginParams:
    """Build parameters of the OpenNIC plugin (the manifest's ``params``).

    ``num_intf`` is OpenNIC's ``NUM_PHYS_FUNC`` = ``NUM_CMAC_PORT`` (1 or 2;
    ``NUM_QDMA`` is 1). ``host_bw`` above 100 adds ``host_bw / 100`` on-chip
    generator lanes (generator → TX lane) on interface 0, merged onto its wire: the
    paper's Table 6 build, TX only. ``codecs`` are the host-facing lanes' codecs
    (default every codec, 0-6); ``gen_codecs`` the generator TX lanes' (codec specs:
    names, ids or ``"fixed:8"``; default the Table 6 codec of ``host_bw``,
    :func:`~.codec_choice.default_codec`). ``loopback`` adds the RX side:
    ``rx_lanes`` RX lanes, each ending in a frame checker, fed by the wire port
    (:func:`~.codec_choice.loopback_lanes`: as many as the wire needs at the
    generator codecs' ratio, at most one per generator). ``reduce`` (codec specs of the
    integer codecs ``fixed``, ``qsgd``, ``sign``; default none) puts the reduce lane of the
    ring all-reduce in front of interface 0's lanes.

    A bad parameter raises ``ValueError`` naming it. After construction ``codecs`` is
    the sorted tuple of codec ids and ``gen_codecs`` a tuple of codec specs, and the
    resolved attributes below hold what the flows and the gateware tops take.

    Attributes
    ----------
    gen_lanes : int
        On-chip generator lanes (0 when ``host_bw`` is 100).
    rx_lanes : int
        Loopback RX lanes (each with a checker): 0 without ``loopback`` or generators.
    codec_names : tuple of str
        Names of ``codecs``, in id order.
    gen_codec_ids, gen_codec_names : tuple
        Codec ids of the generator lanes (sorted), and their names in that order.
    gen_held : dict or None
        What the generator lanes hold whatever their registers say, when they are
        narrow (:func:`~squeezenic_hw.spec.generator.narrow_lane_settings`); None for
        wide lanes or none.
    gen_trusted : bool
        Whether the generator lanes are built for a trusted source (no classifier, no
        bypass: :func:`~.codec_choice.gen_lanes_trusted`).
    reduce_codecs, reduce_params : tuple
        The reduce lane's integer codecs (names, in ``fixed``, ``qsgd``, ``sign`` order;
        empty: no lane) and the ``fixed``/``qsgd`` bits it is built for (those ``reduce``
        gives, else 2 … 16).
    """
    num_intf: int = 1
    host_bw: int = 100
    codecs: tuple = field(default=None)
    gen_codecs: tuple = field(default=None)
    loopback: bool = False
    mtu: int = DEFAULT_MTU
    port: int = DEFAULT_PORT
    max_host_elements: int = DEFAULT_HOST_ELEMENTS
    idle_timeout: int = 0           # cycles; 0: never (the register can change it)
    src_port_base: int = SRC_PORT_BASE
    reduce: tuple = ()
    gen_lanes: int = _resolved()
    rx_lanes: int = _resolved()
    codec_names: tuple = _resolved()
    gen_codec_ids: tuple = _resolved()
    gen_codec_names: tuple = _resolved()
    gen_held: dict = _resolved()
    gen_trusted: bool = _resolved()
    reduce_codecs: tuple = _resolved()
    reduce_params: tuple = _resolved()

    def __post_init__(self):
        check_param("num_intf", self.num_intf)
        lanes = lanes_for(self.host_bw)        # raises naming host_bw
        gen_lanes = 0 if lanes == 1 else lanes
        codecs = tuple(sorted(resolve_codecs(self.codecs)))
        if not codecs:
            raise ValueError("codecs must name at least one codec")
        gen = self.gen_codecs
        if gen is None:
            gen = (default_codec(self.host_bw).spec,) if gen_lanes else ()
        elif isinstance(gen, (str, int)):
            gen = (gen,)
        gen = tuple(dict.fromkeys(str(s).strip() if isinstance(s, str) else s for s in gen))
        try:
            parsed = [parse_codec_spec(spec) for spec in gen]
        except ValueError as exc:
            raise ValueError(f"gen_codecs: {exc}") from None
        if gen_lanes and not gen:
            raise ValueError("gen_codecs must name at least one codec")
        if not isinstance(self.loopback, bool):
            raise ValueError(f"loopback must be a bool, got {self.loopback!r}")
        for name in ("mtu", "port", "max_host_elements", "idle_timeout"):
            check_param(name, getattr(self, name))
        if isinstance(self.src_port_base, bool) or not isinstance(self.src_port_base, int) \
                or self.src_port_base % 64 or not 0 <= self.src_port_base <= 0xFFC0:
            raise ValueError(f"src_port_base must be a multiple of 64 from 0 to 65472, "
                             f"got {self.src_port_base!r}")
        reduce_codecs, reduce_params = _reduce_build(self.reduce)
        gen_ids = tuple(sorted({info.id for info, _ in parsed}))
        resolved = {
            "codecs": codecs, "gen_codecs": gen, "gen_lanes": gen_lanes,
            "rx_lanes": loopback_lanes(self.host_bw, gen)
            if self.loopback and gen_lanes else 0,
            "codec_names": tuple(codec_info(c).name for c in codecs),
            "gen_codec_ids": gen_ids,
            "gen_codec_names": tuple(codec_info(c).name for c in gen_ids),
            "gen_held": narrow_lane_settings(gen) if gen_lanes else None,
            "gen_trusted": not any(info.variable for info, _ in parsed),
            "reduce": tuple(self.reduce) if not isinstance(self.reduce, str) else (
                self.reduce,),
            "reduce_codecs": reduce_codecs, "reduce_params": reduce_params,
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)

    @property
    def codec_mask(self):
        return sum(1 << c for c in self.codecs)

    @property
    def gen_codec_mask(self):
        return sum(1 << c for c in self.gen_codec_ids)

    @property
    def gen_tx_counters(self):
        """The generator lanes' TX counters in the register map: those a lane for a trusted
        source can move (:data:`TRUSTED_TX_COUNTERS`), or every one when ``threshold`` is
        among the generator codecs (such a lane checks its frames like a host lane)."""
        return TRUSTED_TX_COUNTERS if self.gen_trusted else TX_COUNTERS

    def as_dict(self):
        """The parameters as given (codecs resolved), then ``gen_lanes`` and ``rx_lanes``."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return given | {"codecs": list(self.codecs), "gen_codecs": list(self.gen_codecs),
                        "reduce": list(self.reduce), "gen_lanes": self.gen_lanes,
                        "rx_lanes": self.rx_lanes}


def _reduce_build(specs):
    """``(codecs, params)`` of the reduce lane for codec ``specs`` (names, ids or
    ``"fixed:8"``): the integer codecs named, in :data:`INTEGER_CODECS` order, and the
    ``fixed``/``qsgd`` bits to build for (those the specs give, else 2 … 16). Empty for
    no specs; ``ValueError`` naming ``reduce`` for a codec the lane cannot reduce."""
    if isinstance(specs, (str, int)):
        specs = (specs,)
    if not specs:
        return (), ()
    try:
        parsed = [parse_codec_spec(spec) for spec in specs]
    except ValueError as exc:
        raise ValueError(f"reduce: {exc}") from None
    names = {info.name for info, _ in parsed}
    others = sorted(names - set(INTEGER_CODECS))
    if others:
        raise ValueError(f"reduce: the reduce lane reduces {', '.join(INTEGER_CODECS)}, "
                         f"not {', '.join(others)}")
    bits = sorted({param for info, param in parsed if info.name != "sign" and param})
    params = tuple(bits) if bits else tuple(range(2, 17))
    return tuple(c for c in INTEGER_CODECS if c in names), params
