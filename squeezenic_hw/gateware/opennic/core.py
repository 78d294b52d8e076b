"""The OpenNIC plugin's logic in one clock domain: host lanes, generator arrays, registers.

::

    h2c[i] ─► TxLane i ─────────────┬─(i = 0, arrays)─► FrameArbiter ─► tx[i]
                    TxArray (N gens) ┘                   (tuser_dst = 1 << (6 + i))
    rx[i] ─► (i = 0, loopback) SourcePortSplitter ─┬─► RxLane i ─► c2h[i]  (tuser_dst = 1 << i)
                                                   └─► RxArray (M lanes + checkers)
    axil ─► AxiLiteRegisterFile (map: squeezenic_hw.regmap.plugin)

With ``params.reduce``, interface 0 has a
:class:`~squeezenic_hw.gateware.reduce.lane.ReduceLane` in front of its lanes: ``h2c[0]``
into its host side (the frames it does not take on to TX lane 0), ``rx[0]`` into its ring
side (the frames it does not take on to the RX side); its frames for the successor share
``tx[0]`` with the TX side, and its result frames share ``c2h[0]`` with RX lane 0, a whole
frame at a time.

The host-facing lanes carry ``params.codecs`` (every codec by default); the N
generator lanes ``params.gen_codecs`` (the Table 6 codec of ``host_bw`` by
default). Without ``params.loopback`` the build is TX only, like the paper's Table
6: interface 0's wire input goes straight to its host RX lane.

:class:`~.opennic.plugin.OpenNicPlugin` wraps it with OpenNIC's port names, its
two clocks and its reset.
"""

from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.gateware.arrays.lane_arrays import GeneratorLane, RxArray, TxArray
from squeezenic_hw.gateware.arrays.source_port_splitter import SourcePortSplitter
from squeezenic_hw.gateware.axil.bus import AxiLiteSignature
from squeezenic_hw.gateware.axil.register_file import AxiLiteRegisterFile
from squeezenic_hw.gateware.common.frame_arbiter import FrameArbiter
from squeezenic_hw.gateware.common.layouts import axis_signature
from squeezenic_hw.gateware.lane.control import close_when_idle
from squeezenic_hw.gateware.reduce.lane import ReduceLane
from squeezenic_hw.gateware.rx.lane import RxLane
from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.regmap.plugin import (
    CHECKER_COUNTERS,
    GENERATOR_REGISTERS,
    REDUCE_REGISTERS,
    REDUCE_TEMPLATE_WORDS,
    build_constants,
    plugin_register_map,
)
from squeezenic_hw.spec.counters import (
    CONTRIBUTION_COUNTERS,
    REDUCE_COUNTERS,
    RX_COUNTERS,
    TX_COUNTERS,
)

__all__ = ["SqueezeNicCore", "generator_lane"]


def generator_lane(params):
    """A :class:`~squeezenic_hw.gateware.arrays.lane_arrays.GeneratorLane` as the
    generator array of a core of ``params`` builds each of its lanes: the module that
    ``gen_lane_module`` names."""
    return GeneratorLane(params.gen_codecs, mtu=params.mtu, port=params.port)


class SqueezeNicCore(wiring.Component):
    """Every stream and register of the OpenNIC plugin, in the ``sync`` (250 MHz) domain.

    Parameters
    ----------
    params : PluginParams
        Build parameters (interfaces, host_bw, codecs, MTU, port, ...).
    gen_lane_module : str, optional
        When given, the generator lanes are instances of the Verilog module of that name
        (:class:`~squeezenic_hw.gateware.arrays.lane_arrays.TxArray`'s ``lane_module``),
        which the caller supplies (:func:`generator_lane` converted once):
        ``flows/opennic.py`` does so to write one lane's Verilog instead of N.

    Attributes
    ----------
    axil : In(AxiLiteSignature())
        The register file (map: :func:`~squeezenic_hw.regmap.plugin.plugin_register_map`).
    h2c, rx : In(axis_signature()).array(num_intf)
        Host frames from QDMA; wire frames from the packet adapter.
    c2h, tx : Out(axis_signature()).array(num_intf)
        Host frames to QDMA; wire frames to the packet adapter.
    regmap : RegisterMap

    Notes
    -----
    Latency: a TX lane's (plus 1 cycle for the arbiter when the generator
    arrays are built); an RX lane's (plus 1 for the splitter). Throughput: one
    beat per cycle per stream (the lanes'). Backpressure: each stream's
    ``ready`` holds its lane; on interface 0 with arrays, a stalled ``tx`` holds
    the arbiter and so both the host lane and the generators; a stalled host
    ``c2h`` holds the splitter (head of line), hence the checker lanes too.
    Nothing is dropped.
    """

    def __init__(self, params=None, *, gen_lane_module=None):
        self.params = params = PluginParams() if params is None else params
        if not isinstance(params, PluginParams):
            raise ValueError(f"params must be a PluginParams, got {type(params).__name__}")
        self.regmap = plugin_register_map(params)
        self._gen_lane_module = gen_lane_module
        n = params.num_intf
        super().__init__({
            "axil": In(AxiLiteSignature()),
            "h2c": In(axis_signature()).array(n),
            "c2h": Out(axis_signature()).array(n),
            "tx": Out(axis_signature()).array(n),
            "rx": In(axis_signature()).array(n),
        })

    def elaborate(self, platform):
        p = self.params
        m = Module()
        m.submodules.regs = regs = AxiLiteRegisterFile(self.regmap)
        wiring.connect(m, wiring.flipped(self.axil), regs.axil)
        for name, value in build_constants(p).items():
            m.d.comb += getattr(regs.ro, name).eq(value)

        lane_args = dict(codecs=p.codecs, port=p.port)
        arrays = p.gen_lanes > 0
        for i in range(p.num_intf):
            tx = m.submodules[f"host_tx{i}"] = TxLane(mtu=p.mtu, idle_timeout=None,
                                                      **lane_args)
            rx = m.submodules[f"host_rx{i}"] = RxLane(
                max_host_elements=p.max_host_elements, **lane_args)
            m.d.comb += [
                tx.cfg_port.eq(regs.rw.udp_port), tx.cfg_enable.eq(regs.rw.enable),
                tx.cfg_idle_timeout.eq(regs.rw.idle_timeout),
                rx.cfg_port.eq(regs.rw.udp_port), rx.cfg_enable.eq(regs.rw.enable),
            ]
            # tx_close is a one-cycle pulse; the lane acts at its first idle cycle
            close_when_idle(m, tx, regs.pulse.tx_close[i], name=f"close_pending{i}")
            for name in TX_COUNTERS:
                m.d.comb += getattr(regs.ro, f"host{i}_tx_{name}").eq(tx.counters[name])
            for name in RX_COUNTERS:
                m.d.comb += getattr(regs.ro, f"host{i}_rx_{name}").eq(rx.counters[name])

            host_in, wire_out, wire_in, host_out = tx.i, tx.o, rx.i, rx.o
            if i == 0 and arrays:
                wire_out, wire_in = self._arrays(m, regs, tx.o, rx.i)
            if i == 0 and p.reduce_codecs:
                host_in, wire_out, wire_in, host_out = self._reduce(
                    m, regs, host_in, wire_out, wire_in, host_out)
            wiring.connect(m, wiring.flipped(self.h2c[i]), host_in)
            # The packet adapter drops a frame without bit 6 + port of tuser_dst.
            out = self.tx[i]
            m.d.comb += [out.valid.eq(wire_out.valid), wire_out.ready.eq(out.ready),
                         out.payload.eq(wire_out.payload),
                         out.payload.dst.eq(1 << (6 + i))]
            wiring.connect(m, wiring.flipped(self.rx[i]), wire_in)
            host = self.c2h[i]
            m.d.comb += [host.valid.eq(host_out.valid), host_out.ready.eq(host.ready),
                         host.payload.eq(host_out.payload), host.payload.dst.eq(1 << i)]
        return m

    def _reduce(self, m, regs, host_in, wire_out, wire_in, host_out):
        """The reduce lane in front of interface 0's lanes: returns the streams the
        interface's ports now connect to (host in, wire out, wire in, host out)."""
        p = self.params
        lane = m.submodules.reduce = ReduceLane(
            codecs=p.reduce_codecs, params=p.reduce_params, mtu=p.mtu, port=p.port,
            max_host_elements=p.max_host_elements)
        for name, _, _ in REDUCE_REGISTERS:
            m.d.comb += getattr(lane.cfg, name).eq(getattr(regs.rw, f"reduce_{name}"))
        m.d.comb += [
            lane.cfg_port.eq(regs.rw.udp_port),
            lane.template.eq(Cat(*(getattr(regs.rw, f"reduce_template{k}")
                                   for k in range(REDUCE_TEMPLATE_WORDS)))),
            lane.table_addr.eq(regs.rw.reduce_table_addr),
            lane.table_data.eq(regs.rw.reduce_table_data),
            lane.table_we.eq(regs.pulse.reduce_table_write),
            regs.ro.count_reduce_overflows.eq(lane.overflows),
        ]
        for name in REDUCE_COUNTERS:
            m.d.comb += getattr(regs.ro, f"count_{name}").eq(lane.counters[name])
        for name in CONTRIBUTION_COUNTERS:
            m.d.comb += getattr(regs.ro, f"count_{name}").eq(
                lane.contribution_counters[name])
        wiring.connect(m, lane.host_other, host_in)
        wiring.connect(m, lane.bypass, wire_in)
        m.submodules.reduce_wire_arbiter = wire = FrameArbiter(2)
        wiring.connect(m, wire.i[0], wire_out)
        wiring.connect(m, wire.i[1], lane.o)
        m.submodules.reduce_host_arbiter = host = FrameArbiter(2)
        wiring.connect(m, host.i[0], host_out)
        wiring.connect(m, host.i[1], lane.results)
        return lane.host, wire.o, lane.i, host.o

    def _arrays(self, m, regs, host_tx, host_rx):
        """Generator lanes (and with ``loopback`` the checker lanes) on interface 0;
        returns (wire out, wire in)."""
        p = self.params
        txa = m.submodules.tx_array = TxArray(
            lanes=p.gen_lanes, codecs=p.gen_codecs, mtu=p.mtu, port=p.port,
            src_port_base=p.src_port_base, lane_module=self._gen_lane_module)
        m.d.comb += txa.ctrl.start.eq(regs.rw.gen_start)
        for name, _, _ in GENERATOR_REGISTERS:
            m.d.comb += getattr(txa.ctrl, name).eq(getattr(regs.rw, f"gen_{name}"))
        m.d.comb += txa.close.eq(regs.pulse.gen_close)
        for k in range(p.gen_lanes):
            m.d.comb += getattr(regs.ro, f"lane{k}_frames_sent").eq(txa.frames_sent[k])
            for name in p.gen_tx_counters:
                m.d.comb += getattr(regs.ro, f"lane{k}_tx_{name}").eq(
                    txa.tx_counters[k][name])

        m.submodules.wire_arbiter = arb = FrameArbiter(2)
        wiring.connect(m, host_tx, arb.i[0])
        wiring.connect(m, txa.o, arb.i[1])
        if not p.rx_lanes:            # TX only: the wire input is the host RX lane's
            return arb.o, host_rx
        rxa = m.submodules.rx_array = RxArray(
            p.host_bw, codecs=p.gen_codecs, max_host_elements=p.max_host_elements,
            port=p.port, lanes=p.rx_lanes)
        for k in range(p.rx_lanes):
            for name in RX_COUNTERS:
                m.d.comb += getattr(regs.ro, f"lane{k}_rx_{name}").eq(
                    rxa.rx_counters[k][name])
            for name, _ in CHECKER_COUNTERS:
                m.d.comb += getattr(regs.ro, f"lane{k}_chk_{name}").eq(
                    getattr(rxa.checkers[k], name))
        m.submodules.wire_splitter = split = SourcePortSplitter(
            p.src_port_base, p.gen_lanes, port=p.port)
        wiring.connect(m, split.o[0], host_rx)
        wiring.connect(m, split.o[1], rxa.i)
        return arb.o, split.i
