"""Host-bandwidth arrays: N generators → N TX lanes → one wire, and one wire →
N RX lanes → N checkers.

``host_bw`` in Gb/s (a multiple of 100 from 100 to 6400) gives
``N = host_bw / 100`` lanes of 512 bits at 250 MHz (:func:`lanes_for`).

* :class:`TxArray`: lane ``k``'s :class:`~.gradient_generator.GradientGenerator`
  feeds its :class:`~.tx_lane.TxLane`; a :class:`~.frame_arbiter.FrameArbiter`
  merges the lanes' wire frames onto one stream, round robin by frame, with no
  idle cycle between frames while any lane has one ready. Per-lane buffering
  is the lane's own: its wire ring holds two of the largest wire frames and its
  token FIFO 16 frames, so a lane keeps assembling while it waits for its
  turn; when the wire is the bottleneck, backpressure reaches the generator,
  which holds (its values are a pure function of the index, nothing is lost).
* :class:`RxArray`: a :class:`~.frame_distributor.FrameDistributor` sends each
  SqueezeNIC wire frame to lane ``(UDP source port) mod N`` (other frames to
  lane 0), each :class:`~.rx_lane.RxLane` decodes, and a
  :class:`~.frame_checker.FrameChecker` per lane counts and CRCs the result.

All generators share one :class:`GeneratorControl`; lane ``k`` differs by its
UDP source port ``src_port_base + k`` (``src_port_base`` a multiple of 64, so
the distributor maps TX lane ``k`` to RX lane ``k``), its ``value_seed + k``
and its ``tuser_src = k``.
"""

from amaranth import Module, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.lane.control import close_when_idle
from squeezenic_hw.gateware.rx.controller import rx_counters_layout
from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.gateware.tx.controller import tx_counters_layout
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.spec.frames import Header
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT
from squeezenic_hw.spec.scaling import SRC_PORT_BASE, lanes_for

from .arbiter import FrameArbiter
from .checker import FrameChecker
from .distributor import FrameDistributor
from .generator import GradientGenerator

__all__ = ["GeneratorControl", "CheckerCounters", "TxArray", "RxArray"]

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


class TxArray(wiring.Component):
    """N lane-replicated generators and TX lanes, merged onto one wire stream.

    Parameters
    ----------
    host_bw : int
        Gb/s, a multiple of 100 from 100 to 6400 (N = host_bw / 100 lanes).
    codecs, mtu, port, idle_timeout :
        As :class:`~.tx_lane.TxLane`, for every lane.
    max_elements : int
        Largest host frame a generator makes (elements).
    src_port_base : int
        UDP source port of lane 0 (lane k: + k), a multiple of 64.

    Ports: ``ctrl`` (:class:`GeneratorControl`, shared), ``close`` (every
    lane; a one-cycle pulse is held per lane until that lane acts on it),
    ``o`` (the wire stream), ``frames_sent`` (per lane),
    ``tx_counters`` (per lane, :data:`~.tx_controller.TX_COUNTERS`).

    Latency: a lane's; the arbiter adds a cycle. Throughput: one wire beat per
    cycle whenever any lane has a wire frame ready; each generator runs at its
    programmed rate while the wire keeps up. Backpressure on ``o`` holds the
    lanes, then the generators; nothing is dropped.
    """

    def __init__(self, host_bw, *, codecs=None, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                 idle_timeout=None, max_elements=DEFAULT_HOST_ELEMENTS,
                 src_port_base=SRC_PORT_BASE):
        self._n = lanes_for(host_bw)
        _check_src_port_base(src_port_base)
        self._base = src_port_base
        # the generators send to the lanes' port (the template's other fields are defaults)
        template = Header(dst_port=port)
        self._gens = [GradientGenerator(max_elements, template=template)
                      for _ in range(self._n)]
        self._lanes = [TxLane(codecs=codecs, mtu=mtu, port=port, idle_timeout=idle_timeout)
                       for _ in range(self._n)]
        self._arbiter = FrameArbiter(self._n)
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
        c = self.ctrl
        for k, (gen, lane) in enumerate(zip(self._gens, self._lanes, strict=True)):
            m.submodules[f"gen{k}"] = gen
            m.submodules[f"tx{k}"] = lane
            for name in ("start", "n_frames", "elements", "codec", "param", "stochastic",
                         "scale", "aux", "seed", "offset", "flush_every",
                         "rate_bytes_per_cycle"):
                m.d.comb += getattr(gen, name).eq(getattr(c, name))
            # ``value_seed + k`` is registered, so its adder stays off the RNG's first
            # stage: the settings are set by the cycle ``start`` rises, and the first
            # payload beat (whose draws use the seed) issues 3 cycles later at the earliest.
            value_seed = Signal(32, name=f"value_seed{k}", reset_less=True)
            m.d.sync += value_seed.eq(c.value_seed + k)
            m.d.comb += [
                gen.value_seed.eq(value_seed),
                gen.udp_src_port.eq(self._base + k),
                gen.tuser_src.eq(k),
                self.frames_sent[k].eq(gen.frames_sent),
                self.tx_counters[k].eq(lane.counters),
            ]
            # a one-cycle ``close`` reaches every lane: each acts at its own first idle cycle
            close_when_idle(m, lane, self.close, name=f"close_pending{k}")
            wiring.connect(m, gen.o, lane.i)
            wiring.connect(m, lane.o, arbiter.i[k])
        wiring.connect(m, arbiter.o, wiring.flipped(self.o))
        return m


class RxArray(wiring.Component):
    """One wire stream distributed to N RX lanes, each checked by a frame checker.

    Parameters
    ----------
    host_bw : int
        Gb/s, a multiple of 100 from 100 to 6400 (N lanes).
    codecs, max_host_elements, port :
        As :class:`~.rx_lane.RxLane`, for every lane.

    Ports: ``i`` (the wire stream), ``checkers`` (per lane,
    :class:`CheckerCounters`), ``rx_counters`` (per lane).

    Latency: the distributor's plus a lane's. Throughput: the wire at one beat
    per cycle when the frames are spread over enough lanes (a lane decodes
    ``32/b`` host beats per wire beat). Backpressure: a lane that cannot take
    its frame stalls the distributor (head of line); the checkers are always
    ready.
    """

    def __init__(self, host_bw, *, codecs=None, max_host_elements=DEFAULT_HOST_ELEMENTS,
                 port=DEFAULT_PORT):
        self._n = lanes_for(host_bw)
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
