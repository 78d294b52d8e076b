"""Host-bandwidth arrays: N generators → N TX lanes → one wire, and one wire →
M RX lanes → M checkers.

``host_bw`` in Gb/s (a multiple of 100 from 100 to 6400) gives
``N = host_bw / 100`` generator lanes of 512 bits at 250 MHz (:func:`lanes_for`).
The RX array has ``M`` ≤ N lanes (default N): a wire expands to as many lanes as
its codec's ratio asks (:func:`~squeezenic_hw.build.codec_choice.loopback_lanes`).

* :class:`TxArray`: lane ``k``'s :class:`GeneratorLane` (a
  :class:`~.arrays.generator.GradientGenerator` feeding a
  :class:`~.tx.lane.TxLane` made by :func:`generator_tx_lane`); a
  :class:`~squeezenic_hw.gateware.common.frame_arbiter.FrameArbiter`
  merges the lanes' wire frames onto one stream, round robin by frame, with no
  idle cycle between frames while any lane has one ready. Per-lane buffering
  is the lane's own: its wire ring holds two of the largest wire frames and its
  token FIFO 16 frames, so a lane keeps assembling while it waits for its
  turn; when the wire is the bottleneck, backpressure reaches the generator,
  which holds (its state advances only with beats sent, nothing is lost).
* :class:`RxArray`: a :class:`~.arrays.distributor.FrameDistributor` sends each
  SqueezeNIC wire frame to lane ``(UDP source port) mod M`` (other frames to
  lane 0), each :class:`~.rx.lane.RxLane` decodes, and a
  :class:`~.arrays.checker.FrameChecker` per lane counts and CRCs the result.

All generators share one :class:`GeneratorControl`; lane ``k`` differs by its
UDP source port ``src_port_base + k`` (``src_port_base`` a multiple of 64, so
the distributor maps TX lane ``k`` to RX lane ``k mod M``), its ``value_seed + k``
and its ``tuser_src = k``. With ``M`` < N an RX lane decodes the wire frames of
generators ``j, j + M, j + 2M, ...`` in the order the arbiter sent them: its
checker's ``frames``, ``elements``, ``bytes`` and ``bypass`` are the sums of those
generators', while ``gaps``, ``last_offset_end`` and ``crc`` follow the
interleaving (a switch between two generators' tensor streams counts as a gap).
"""

from dataclasses import replace

from amaranth import ClockSignal, Module, Mux, ResetSignal, Signal, unsigned
from amaranth.hdl import Instance
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.build.codec_choice import gen_lanes_trusted
from squeezenic_hw.gateware.common.frame_arbiter import FrameArbiter
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    axis_signature,
    frame_bus_signature,
    shared_ring_signature,
)
from squeezenic_hw.gateware.lane.control import close_when_idle
from squeezenic_hw.gateware.rx.controller import rx_counters_layout
from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.gateware.tx.controller import tx_counters_layout
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.gateware.tx.narrow import NarrowTxLane, narrow_lane_sizes
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.frames import Header, build_wire_frame
from squeezenic_hw.spec.generator import narrow_lane_settings
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    DEFAULT_PORT,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HDR,
)
from squeezenic_hw.spec.scaling import MAX_LANES, SRC_PORT_BASE, lanes_for

from .checker import FrameChecker
from .distributor import FrameDistributor
from .frame_bus import FrameBusArbiter
from .generator import GradientGenerator
from .header_finisher import HeaderFinisher
from .ring_cluster import RingCluster

__all__ = ["GeneratorControl", "CheckerCounters", "GeneratorLane", "generator_tx_lane",
           "generator_lane_options",
           "lane_codec_names", "TxArray", "RxArray"]

class GeneratorControl(data.Struct):
    """Settings shared by every generator of an array (see ``docs/generator.md``)."""
    start: unsigned(1)
    n_frames: unsigned(32)
    elements: unsigned(16)
    codec: unsigned(8)
    param: unsigned(8)
    stochastic: unsigned(1)
    scale: unsigned(32)
    aux: unsigned(32)
    seed: unsigned(32)
    value_seed: unsigned(32)
    offset: unsigned(32)
    flush_every: unsigned(16)
    rate_bytes_per_cycle: unsigned(16)   # Q8.8 bytes of frame per cycle


class CheckerCounters(data.Struct):
    frames: unsigned(64)
    elements: unsigned(64)
    bytes: unsigned(64)
    gaps: unsigned(64)
    last_offset_end: unsigned(32)
    bypass: unsigned(64)
    crc: unsigned(32)


def _check_src_port_base(base):
    if not isinstance(base, int) or base % 64 or not 0 <= base <= 2**16 - 64:
        raise ValueError(f"src_port_base must be a multiple of 64 from 0 to 65472, "
                         f"got {base!r}")


def lane_codec_names(codecs):
    """Codec names of codec specs (names, ids or ``"fixed:8"``: the parameter is a
    run-time register, the name is what a lane is built for), in id order; None stays
    None (every default codec)."""
    if codecs is None:
        return None
    if isinstance(codecs, (str, int)):
        codecs = [codecs]
    names = {codec_info(int(n) if n.isdigit() else n).name
             for n in (str(c).strip().partition(":")[0] for c in codecs)}
    return sorted(names, key=lambda n: codec_info(n).id)


def generator_lane_options(codecs):
    """The lean-lane options a generator's TX lane is to take: ``trusted`` (the generator
    is a trusted on-chip source) and ``code_bits``, the one code width the specs name
    (``"fixed:8"`` → 8; None when a parametrised codec is named without a width or
    with two widths, or none is parametrised).

    With them the generators must be run with one of these codecs (and that width):
    the lane does not check its frames. ``threshold`` needs the classifier (its keep
    mask), so a set with it is not trusted.
    """
    if isinstance(codecs, (str, int)):
        codecs = [codecs]
    widths = set()
    for spec in codecs or ():
        name, _, param = str(spec).strip().partition(":")
        info = codec_info(int(name) if name.isdigit() else name)
        if info.param_range and not info.variable:
            widths.add(int(param) if param else None)
    code_bits = widths.pop() if len(widths) == 1 else None
    if not gen_lanes_trusted(codecs or ()):
        return {"trusted": False, "code_bits": None}
    return {"trusted": True, "code_bits": code_bits}


def generator_tx_lane(codecs, *, mtu=DEFAULT_MTU, port=DEFAULT_PORT, idle_timeout=None,
                      bare=False, constant_fields=None, shared_ring=False,
                      generated_values=False):
    """The TX lane behind an on-chip generator: the one place its build options are chosen.

    ``codecs`` are codec specs (``["sign"]``, ``["fixed:8"]``; the Table 6 codec of a
    build by default). The lane is built for a trusted on-chip source: only those
    codecs, one width where the codec has a build-time width, no classifier or bypass
    path (:func:`generator_lane_options`). A lane of ``sign`` alone, or of ``fixed`` at a
    width of 2, 4 or 8 alone, is a :class:`~.narrow.lane.NarrowTxLane`, 16·b bits wide
    behind its input (b the code width); with ``bare=True`` it sends bare beats and
    leaves the headers' lengths and checksum, ``tkeep`` and ``tuser`` to a
    :class:`~.header_finisher.HeaderFinisher`; ``constant_fields`` are the header fields
    its source holds constant, ``shared_ring`` (with ``bare``) puts its ring in a
    :class:`~.ring_cluster.RingCluster`, and ``generated_values`` says that the source is a
    :class:`~.generator.GradientGenerator` whose values it need not read whole
    (:class:`~.narrow.lane.NarrowTxLane`; all three ignored by a ``TxLane``).
    """
    if lanes_finished(codecs):
        return NarrowTxLane(_narrow_spec(codecs), mtu=mtu, port=port,
                            idle_timeout=idle_timeout, bare=bare,
                            constant_fields=constant_fields, shared_ring=shared_ring,
                            generated_values=generated_values)
    names = lane_codec_names(codecs)
    return TxLane(codecs=names, mtu=mtu, port=port,
                  idle_timeout=idle_timeout, **generator_lane_options(codecs))


def lanes_finished(codecs):
    """Whether generator lanes of ``codecs`` are narrow and send bare beats, which the
    array's :class:`~.header_finisher.HeaderFinisher` completes."""
    return narrow_lane_settings(codecs) is not None


def generator_head_mask(codecs, *, port=DEFAULT_PORT):
    """The header bits that narrow generator lanes of ``codecs`` may set on their frame
    bus (an int, bit ``8·byte + i``), for :class:`~.frame_bus.FrameBusArbiter`: the
    fields a run can change (IPv4 identification, UDP source port, ``tuser_src`` in the
    UDP length field, ``n``, ``offset``, scale, aux, seed, the flush flag; ``param`` and
    the stochastic flag unless held), and the one bits of the rest, which the
    generator's template and the lane's held setting fix (IPv4 lengths and checksum are
    zero on a bare lane, ``tuser_dst`` is 0)."""
    settings = narrow_lane_settings(codecs)
    if settings is None:
        raise ValueError(f"codecs must be one narrow codec spec, got {codecs!r}")
    template = replace(Header(dst_port=port), codec=settings["codec"],
                       param=settings["param"] or 0, flags=FLAG_ENCODED, ip_id=0,
                       src_port=0, n=0, scale_bits=0, aux_bits=0, seed=0, offset=0)
    image = bytearray(build_wire_frame(template, b""))
    variable = [HDR.IP_ID, HDR.UDP_SRC, HDR.N, HDR.OFFSET, HDR.SCALE, HDR.AUX, HDR.SEED]
    for start, length in (HDR.IP_TOTAL_LENGTH, HDR.IP_CHECKSUM, HDR.UDP_LENGTH,
                          HDR.UDP_CHECKSUM):
        image[start:start + length] = bytes(length)
    variable.append(HDR.UDP_LENGTH)                   # tuser_src
    if settings["param"] is None:
        variable.append(HDR.PARAM)
    mask = int.from_bytes(image, "little")
    for start, length in variable:
        mask |= ((1 << 8 * length) - 1) << 8 * start
    flags = FLAG_FLUSH | (0 if settings["deterministic"] else FLAG_STOCHASTIC)
    return mask | flags << 8 * HDR.FLAGS[0]


#: Most narrow lanes to a shared ring: a 4:1 multiplexer of rows is one LUT6 a bit.
RING_CLUSTER = 4


#: Words a full wire frame must have for its lane to share a ring: a close then waits
#: for the closed row's turn (up to ``RING_CLUSTER + 3`` cycles), under 1 % of the frame.
SHARED_RING_MIN_WORDS = 100 * (RING_CLUSTER + 3)


def _narrow_spec(codecs):
    """The one codec spec of narrow generator lanes of ``codecs`` (:func:`lanes_finished`)."""
    spec = codecs if isinstance(codecs, (str, int)) else list(codecs)[0]
    return str(spec).strip()


def _sharing_lane(codecs, mtu):
    """``(ring_rows, cluster)`` of the narrow generator lanes of ``codecs`` when such lanes
    share rings (the rows of each lane's region, and the lanes to a ring: at most
    :data:`RING_CLUSTER` and the lane's ``max_cluster``), else None."""
    if not lanes_finished(codecs):
        return None
    capacity, ring_rows, max_cluster = narrow_lane_sizes(_narrow_spec(codecs), mtu)
    if capacity // ELEMENTS_PER_BEAT < SHARED_RING_MIN_WORDS:
        return None
    return ring_rows, min(RING_CLUSTER, max_cluster)


def ring_cluster_size(codecs, *, mtu=DEFAULT_MTU):
    """Lanes to a :class:`~.ring_cluster.RingCluster` in an array of narrow generator
    lanes of ``codecs`` (:data:`RING_CLUSTER`, at most the lane's ``max_cluster``), or
    None when their wire frames are too short for the wait after each close
    (:data:`SHARED_RING_MIN_WORDS`): those lanes keep rings of their own. At MTU 1518,
    ``sign`` lanes share (727 words a frame) and ``fixed`` lanes do not (363 words at
    2 bits, 91 at 8)."""
    sizes = _sharing_lane(codecs, mtu)
    return None if sizes is None else sizes[1]


def shared_rings(codecs, n, *, mtu=DEFAULT_MTU):
    """``(rows, sizes)`` of the shared rings of ``n`` narrow generator lanes of
    ``codecs``: each lane's rows, and the lanes of each
    :class:`~.ring_cluster.RingCluster` in order (:func:`ring_cluster_size`, the last
    cluster short when ``n`` is not a multiple); None when the lanes keep rings of their
    own."""
    sizes = _sharing_lane(codecs, mtu)
    if sizes is None:
        return None
    rows, g = sizes
    return rows, [min(g, n - c) for c in range(0, n, g)]


def finisher_code_bits(codecs):
    """The code width a :class:`~.header_finisher.HeaderFinisher` of ``codecs``'s lanes
    is built for."""
    settings = narrow_lane_settings(codecs)
    return settings["param"] or 1


def _generator_lane_signature(n_tx_counters_layout, bare, ring_rows=None):
    return wiring.Signature({
        "ctrl": In(GeneratorControl),
        "value_seed": In(32),
        "udp_src_port": In(16),
        "tuser_src": In(16),
        "close": In(1),
        **({"bus": Out(frame_bus_signature())} if bare else {"o": Out(axis_signature())}),
        **({"ring": Out(shared_ring_signature(ring_rows))} if ring_rows else {}),
        "frames_sent": Out(32),
        "tx_counters": Out(n_tx_counters_layout),
    })


class GeneratorLane(wiring.Component):
    """One on-chip generator and its TX lane: lane ``k`` of a :class:`TxArray`.

    Parameters
    ----------
    codecs : list of str or None
        Codec specs of the TX lane (:func:`generator_tx_lane`).
    mtu, port, idle_timeout :
        As :class:`~.tx.lane.TxLane`.
    max_elements : int
        Largest host frame the generator makes (elements).

    Ports: ``ctrl`` (:class:`GeneratorControl` but its ``value_seed``), ``value_seed``,
    ``udp_src_port``, ``tuser_src`` (the lane's own), ``close`` (a one-cycle pulse, held
    until the lane acts on it at its first idle cycle), ``o`` (wire frames; when the
    lane is narrow, ``bus`` in its place: its side of a frame bus of bare beats,
    :mod:`~.frame_bus`, and where :func:`ring_cluster_size` shares rings, ``ring``: its
    side of a ring shared with other lanes, :class:`~.ring_cluster.RingCluster`),
    ``frames_sent``, ``tx_counters``.

    A lane built narrow (:func:`~squeezenic_hw.spec.generator.narrow_lane_settings`)
    runs its generator at the lane's codec setting whatever ``ctrl`` says: codec and
    width, and for ``fixed`` nearest rounding and the scale's power of two.

    Latency, throughput and backpressure: the generator's then the lane's; ``o``'s
    backpressure holds the lane, then the generator.
    """

    def __init__(self, codecs=None, *, mtu=DEFAULT_MTU, port=DEFAULT_PORT, idle_timeout=None,
                 max_elements=DEFAULT_HOST_ELEMENTS):
        # a narrow lane's settings are held (the generator runs them), and it sends bare
        # beats, which the array's HeaderFinisher completes (one for all lanes)
        self._fixed = narrow_lane_settings(codecs)
        # the generators send to the lanes' port (the template's other fields are defaults);
        # what the template fixes of the fields a wire frame copies and of the key, and
        # tuser_dst (0), the lane need not carry
        template = Header(dst_port=port)
        # (a ring of its own where its frames are short: ring_cluster_size)
        self._shared = ring_cluster_size(codecs, mtu=mtu) is not None
        self._lane = generator_tx_lane(
            codecs, mtu=mtu, port=port, idle_timeout=idle_timeout,
            bare=self._fixed is not None, shared_ring=self._shared,
            constant_fields={"ip_tos": template.ip_tos, "ip_frag": template.ip_frag,
                             "ttl": template.ttl, "tuser_dst": 0,
                             "dst_mac": template.dst_mac, "src_mac": template.src_mac,
                             "src_ip": template.src_ip, "dst_ip": template.dst_ip,
                             "dst_port": template.dst_port},
            generated_values=True)
        # a sign lane reads nothing of a value but its sign; a fixed:q lane, rounding to
        # q-bit levels, its mantissa's top q bits (the lowest sticky)
        b = self._lane.code_bits if isinstance(self._lane, NarrowTxLane) else None
        self._gen = GradientGenerator(max_elements, template=template, signs_only=b == 1,
                                      mantissa_bits=b if b and b > 1 else None)
        super().__init__(_generator_lane_signature(
            tx_counters_layout(), bare=self._fixed is not None,
            ring_rows=self._lane.ring_rows if self._shared else None))

    @property
    def codecs(self):
        return self._lane.codecs

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen = gen = self._gen
        m.submodules.tx = lane = self._lane
        c = self.ctrl
        for name in ("start", "n_frames", "elements", "codec", "param", "stochastic",
                     "scale", "aux", "seed", "offset", "flush_every", "rate_bytes_per_cycle"):
            m.d.comb += getattr(gen, name).eq(getattr(c, name))
        # a narrow lane encodes one codec setting: the generator runs that one, whatever
        # the registers say (spec.generator.lane_run_config is the same rule)
        fixed = self._fixed
        if fixed is not None:
            m.d.comb += gen.codec.eq(fixed["codec"])
            if fixed["param"] is not None:
                m.d.comb += gen.param.eq(fixed["param"])
            if fixed["deterministic"]:
                m.d.comb += gen.stochastic.eq(0)
            if fixed["pow2_scale"]:
                nan = (c.scale[23:31] == 0xFF) & c.scale[:23].any()
                m.d.comb += gen.scale.eq(Mux(nan, c.scale, c.scale & 0xFF800000))
        m.d.comb += [
            gen.value_seed.eq(self.value_seed),
            gen.udp_src_port.eq(self.udp_src_port),
            gen.tuser_src.eq(self.tuser_src),
            self.frames_sent.eq(gen.frames_sent),
            self.tx_counters.eq(lane.counters),
        ]
        close_when_idle(m, lane, self.close)
        wiring.connect(m, gen.o, lane.i)
        if self._fixed is None:
            wiring.connect(m, lane.o, wiring.flipped(self.o))
        else:
            wiring.connect(m, lane.bus, wiring.flipped(self.bus))
            if self._shared:
                wiring.connect(m, lane.ring, wiring.flipped(self.ring))
        return m


def instance_of(module_name, iface):
    """An :class:`~amaranth.hdl.Instance` of the Verilog module ``module_name`` (a
    :class:`GeneratorLane` converted on its own) wired to ``iface``, an object of its
    signature: each port is named as Amaranth names a top-level component's ports
    (the member path joined by ``__``), and ``clk``/``rst`` are the ``sync`` domain's."""
    ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
    for path, member, value in iface.signature.flatten(iface):
        prefix = "i_" if member.flow == In else "o_"
        ports[prefix + "__".join(str(p) for p in path)] = value
    return Instance(module_name, **ports)


class TxArray(wiring.Component):
    """N on-chip generator lanes, merged onto one wire stream.

    Parameters
    ----------
    host_bw : int, optional
        Gb/s, a multiple of 100 from 100 to 6400 (N = host_bw / 100 lanes).
    lanes : int, optional
        N itself, 1 to :data:`~squeezenic_hw.spec.scaling.MAX_LANES`, in place of
        ``host_bw`` (a build's ``PluginParams.gen_lanes``).
    codecs : list of str, optional
        The generator lanes' codec specs (:func:`generator_tx_lane`; default every
        codec, 0-6).
    mtu, port, idle_timeout :
        As :class:`~.tx.lane.TxLane`, for every lane.
    max_elements : int
        Largest host frame a generator makes (elements).
    src_port_base : int
        UDP source port of lane 0 (lane k: + k), a multiple of 64.
    lane_module : str, optional
        When given, each lane is an instance of the Verilog module of that name instead
        of its own :class:`GeneratorLane`: the caller supplies the module (one
        :class:`GeneratorLane` converted once, ports as Amaranth names them), which is
        how ``squeezenic-hw generate`` writes 64 lanes without elaborating 64. Not
        simulable in Amaranth.

    Ports: ``ctrl`` (:class:`GeneratorControl`, shared), ``close`` (every
    lane; a one-cycle pulse is held per lane until that lane acts on it),
    ``o`` (the wire stream), ``frames_sent`` (per lane),
    ``tx_counters`` (per lane, :data:`~squeezenic_hw.spec.counters.TX_COUNTERS`).

    Narrow lanes share a frame bus (:class:`~.frame_bus.FrameBusArbiter`, an OR of the
    lanes) instead of a
    :class:`~squeezenic_hw.gateware.common.frame_arbiter.FrameArbiter`, then a
    :class:`~.header_finisher.HeaderFinisher`; and where their wire frames are long,
    rings, in clusters of :func:`ring_cluster_size` lanes
    (:class:`~.ring_cluster.RingCluster`).

    Latency: a lane's; the arbiter adds a cycle (the frame bus of narrow lanes two, and
    the :class:`~.header_finisher.HeaderFinisher` 3 more). Throughput: one wire beat per
    cycle whenever any lane has a wire frame ready; each generator runs at its
    programmed rate while the wire keeps up. Backpressure on ``o`` holds the
    lanes, then the generators; nothing is dropped.
    """

    def __init__(self, host_bw=None, *, lanes=None, codecs=None, mtu=DEFAULT_MTU,
                 port=DEFAULT_PORT, idle_timeout=None, max_elements=DEFAULT_HOST_ELEMENTS,
                 src_port_base=SRC_PORT_BASE, lane_module=None):
        if (host_bw is None) == (lanes is None):
            raise ValueError("give host_bw or lanes, not both")
        if lanes is None:
            lanes = lanes_for(host_bw)
        elif isinstance(lanes, bool) or not isinstance(lanes, int) \
                or not 1 <= lanes <= MAX_LANES:
            raise ValueError(f"lanes must be an int from 1 to {MAX_LANES}, got {lanes!r}")
        self._n = lanes
        _check_src_port_base(src_port_base)
        if lane_module is not None and not (isinstance(lane_module, str)
                                            and lane_module.isidentifier()):
            raise ValueError(f"lane_module must be a Verilog identifier, got {lane_module!r}")
        self._base = src_port_base
        self._lane_module = lane_module
        lane_args = dict(mtu=mtu, port=port, idle_timeout=idle_timeout,
                         max_elements=max_elements)
        finished = lanes_finished(codecs)
        rows, sizes = shared_rings(codecs, self._n, mtu=mtu) or (None, [])
        if lane_module is None:
            self._lanes = [GeneratorLane(codecs, **lane_args) for _ in range(self._n)]
        else:
            sig = _generator_lane_signature(tx_counters_layout(), bare=finished,
                                            ring_rows=rows)
            self._lanes = [sig.create(path=(f"lane{k}",)) for k in range(self._n)]
        self._codecs = tuple(lane_codec_names(codecs) or ())
        if finished:
            self._rings = [RingCluster(size, rows) for size in sizes]
            self._arbiter = FrameBusArbiter(self._n, shared_rows=len(self._rings),
                                            head_mask=generator_head_mask(codecs, port=port))
            self._finisher = HeaderFinisher(finisher_code_bits(codecs))
        else:
            self._rings = []
            self._arbiter = FrameArbiter(self._n)
            self._finisher = None
        super().__init__({
            "ctrl": In(GeneratorControl),
            "close": In(1),
            "o": Out(axis_signature()),
            "frames_sent": Out(data.ArrayLayout(unsigned(32), self._n)),
            "tx_counters": Out(data.ArrayLayout(tx_counters_layout(), self._n)),
        })

    @property
    def n_lanes(self):
        return self._n

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter = arbiter = self._arbiter
        for k, lane in enumerate(self._lanes):
            if self._lane_module is None:
                m.submodules[f"lane{k}"] = lane
            else:
                m.submodules[f"lane{k}"] = instance_of(self._lane_module, lane)
            m.d.comb += lane.ctrl.eq(self.ctrl)
            # ``value_seed + k`` is registered, so its adder stays off the generator's
            # warm-up: the settings are set by the cycle ``start`` rises, and the seed is
            # first read 2 cycles later.
            value_seed = Signal(32, name=f"value_seed{k}", reset_less=True)
            m.d.sync += value_seed.eq(self.ctrl.value_seed + k)
            m.d.comb += [
                lane.value_seed.eq(value_seed),
                lane.udp_src_port.eq(self._base + k),
                lane.tuser_src.eq(k),
                lane.close.eq(self.close),
                self.frames_sent[k].eq(lane.frames_sent),
                self.tx_counters[k].eq(lane.tx_counters),
            ]
            if self._finisher is None:
                wiring.connect(m, lane.o, arbiter.i[k])
            else:
                wiring.connect(m, lane.bus, arbiter.lanes[k])
        first = 0
        for c, ring in enumerate(self._rings):
            m.submodules[f"ring{c}"] = ring
            for j in range(ring.n_lanes):
                wiring.connect(m, self._lanes[first + j].ring, ring.lanes[j])
            first += ring.n_lanes
            m.d.comb += [arbiter.rows[c].eq(ring.o), ring.en.eq(arbiter.en)]
        if self._finisher is None:
            wiring.connect(m, arbiter.o, wiring.flipped(self.o))
        else:
            m.submodules.finisher = finisher = self._finisher
            wiring.connect(m, arbiter.o, finisher.i)
            wiring.connect(m, finisher.o, wiring.flipped(self.o))
        return m


class RxArray(wiring.Component):
    """One wire stream distributed to N RX lanes, each checked by a frame checker.

    Parameters
    ----------
    host_bw : int
        Gb/s, a multiple of 100 from 100 to 6400 (N generator lanes).
    codecs, max_host_elements, port :
        As :class:`~.rx.lane.RxLane`, for every lane.
    lanes : int, optional
        RX lanes M, 1 to N (default N); TX lane ``k``'s frames reach RX lane ``k mod M``.

    Ports: ``i`` (the wire stream), ``checkers`` (per RX lane,
    :class:`CheckerCounters`), ``rx_counters`` (per lane).

    Latency: the distributor's plus a lane's. Throughput: the wire at one beat
    per cycle when the frames are spread over enough lanes (a lane decodes
    ``32/b`` host beats per wire beat). Backpressure: a lane that cannot take
    its frame stalls the distributor (head of line); the checkers are always
    ready.
    """

    def __init__(self, host_bw, *, codecs=None, max_host_elements=DEFAULT_HOST_ELEMENTS,
                 port=DEFAULT_PORT, lanes=None):
        n = lanes_for(host_bw)
        if lanes is None:
            lanes = n
        if isinstance(lanes, bool) or not isinstance(lanes, int) or not 1 <= lanes <= n:
            raise ValueError(f"lanes must be an int from 1 to {n} (host_bw / 100), "
                             f"got {lanes!r}")
        self._n = lanes
        codecs = lane_codec_names(codecs)
        self._distributor = FrameDistributor(self._n, port=port)
        self._lanes = [RxLane(codecs=codecs, max_host_elements=max_host_elements, port=port)
                       for _ in range(self._n)]
        self._checkers = [FrameChecker(port=port) for _ in range(self._n)]
        super().__init__({
            "i": In(axis_signature()),
            "checkers": Out(data.ArrayLayout(CheckerCounters, self._n)),
            "rx_counters": Out(data.ArrayLayout(rx_counters_layout(), self._n)),
        })

    @property
    def n_lanes(self):
        return self._n

    def elaborate(self, platform):
        m = Module()
        m.submodules.distributor = dist = self._distributor
        wiring.connect(m, wiring.flipped(self.i), dist.i)
        for k, (lane, chk) in enumerate(zip(self._lanes, self._checkers, strict=True)):
            m.submodules[f"rx{k}"] = lane
            m.submodules[f"check{k}"] = chk
            wiring.connect(m, dist.o[k], lane.i)
            wiring.connect(m, lane.o, chk.i)
            out = self.checkers[k]
            m.d.comb += [getattr(out, name).eq(getattr(chk, name))
                         for name in ("frames", "elements", "bytes", "gaps",
                                      "last_offset_end", "bypass", "crc")]
            m.d.comb += self.rx_counters[k].eq(lane.counters)
        return m
