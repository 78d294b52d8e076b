"""The OpenNIC ``box_250mhz`` user plugin: OpenNIC's port names, clocks and reset.

The module has exactly the user-plugin ports of ``box_250mhz`` (OpenNIC shell,
``src/box_250mhz/box_250mhz.sv``) for ``NUM_QDMA`` = 1 and ``NUM_PHYS_FUNC`` =
``NUM_CMAC_PORT`` = ``num_intf`` (1 or 2): the AXI-Lite slave ``s_axil_*``, the
four 512-bit streams with ``tuser_size/src/dst`` (lanes concatenated, lane 0
in the low bits), ``mod_rstn[15:0]``/``mod_rst_done[15:0]``, ``axil_aclk``
(125 MHz), ``ref_clk_100mhz`` (unused) and ``axis_aclk`` (250 MHz). The box's
own ``box_rstn``/``box_rst_done`` stay in the box (its ``generic_reset``).

Clocks: the streams and every register live in ``axis_aclk`` (domain
``sync``); the AXI-Lite bus arrives in ``axil_aclk`` (domain ``axil``) and
crosses in an :class:`~.axil.clock_bridge.AxiLiteClockBridge` (toggle
handshake; correct for any clock relation).

Reset: ``mod_rstn[0]`` low resets the plugin (``mod_rstn[15:1]`` are ignored);
after it rises the ``axil`` domain leaves reset :data:`RESET_CYCLES` axil
cycles later, the ``sync`` domain 3–4 of its cycles after that
(``ResetSynchronizer``, then a register: each domain's reset is a register carrying the
``max_fanout`` attribute, for Vivado to copy for its thousands of loads), and
``mod_rst_done[0]`` rises :data:`DONE_CYCLES` axil cycles after ``mod_rstn[0]``;
``mod_rst_done[15:1]`` are tied to 1 as the shell's example plugin ties its unused bits.
While the ``sync`` domain is in reset the input streams' ``tready`` is low, so no beat is
taken and lost.
"""

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer, ResetSynchronizer
from amaranth.lib.wiring import In, Out

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.gateware.axil.bus import AXIL_SLAVE_PORTS, connect_flat_slave
from squeezenic_hw.gateware.axil.clock_bridge import AxiLiteClockBridge
from squeezenic_hw.gateware.common.stream import MAX_FANOUT

from .core import SqueezeNicCore

__all__ = ["OpenNicPlugin", "opennic_ports", "STREAMS", "RESET_CYCLES", "DONE_CYCLES",
           "MODULE_NAME"]

#: Name of the generated Verilog module.
MODULE_NAME = "squeezenic_250mhz"
#: axil cycles from ``mod_rstn[0]`` high to the end of the ``axil`` domain's reset.
RESET_CYCLES = 16
#: axil cycles from ``mod_rstn[0]`` high to ``mod_rst_done[0]``.
DONE_CYCLES = 24

#: (port prefix, direction of tvalid for the plugin, core member)
STREAMS = (("s_axis_qdma_h2c", "in", "h2c"), ("m_axis_qdma_c2h", "out", "c2h"),
           ("m_axis_adap_tx_250mhz", "out", "tx"), ("s_axis_adap_rx_250mhz", "in", "rx"))
_AXIS_FIELDS = (("tdata", "data", 512), ("tkeep", "keep", 64), ("tlast", "last", 1),
                ("tuser_size", "size", 16), ("tuser_src", "src", 16), ("tuser_dst", "dst", 16))


def opennic_ports(num_intf):
    """``[(name, direction, width)]`` of the plugin module, in port order."""
    ports = [(f"s_axil_{name}", d, w) for name, d, w in AXIL_SLAVE_PORTS]
    flip = {"in": "out", "out": "in"}
    for prefix, d, _ in STREAMS:
        ports.append((f"{prefix}_tvalid", d, num_intf))
        ports += [(f"{prefix}_{name}", d, w * num_intf) for name, _, w in _AXIS_FIELDS]
        ports.append((f"{prefix}_tready", flip[d], num_intf))
    ports += [("mod_rstn", "in", 16), ("mod_rst_done", "out", 16), ("axil_aclk", "in", 1),
              ("ref_clk_100mhz", "in", 1), ("axis_aclk", "in", 1)]
    return ports


class OpenNicPlugin(wiring.Component):
    """The SqueezeNIC user plugin of OpenNIC's ``box_250mhz`` (ports: :func:`opennic_ports`).

    Parameters
    ----------
    params : PluginParams
        Build parameters.
    gen_lane_module : str, optional
        The Verilog module of the generator lanes, as :class:`~.core.SqueezeNicCore`'s.

    Attributes
    ----------
    core : SqueezeNicCore
    regmap : RegisterMap

    Notes
    -----
    Latency, throughput and backpressure are the core's
    (:class:`~.opennic.core.SqueezeNicCore`): one beat per cycle per
    stream, ``tready`` low holds the stream, nothing is dropped. A register
    access costs the bridge's crossing (see ``docs/registers.md``).
    """

    def __init__(self, params=None, *, gen_lane_module=None):
        self.core = SqueezeNicCore(params if params is not None else PluginParams(),
                                   gen_lane_module=gen_lane_module)
        self.params = self.core.params
        self.regmap = self.core.regmap
        members = {}
        for name, d, width in opennic_ports(self.params.num_intf):
            members[name] = (In if d == "in" else Out)(width)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        n = self.params.num_intf
        m.domains.sync = ClockDomain("sync")
        m.domains.axil = ClockDomain("axil")
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += [ClockSignal("sync").eq(self.axis_aclk),
                     ClockSignal("axil").eq(self.axil_aclk),
                     ClockSignal("por").eq(self.axil_aclk)]

        # ---- reset: mod_rstn[0] (axil domain in the shell) → both domains ----------
        rstn = Signal()
        m.submodules.rstn_sync = FFSynchronizer(self.mod_rstn[0], rstn, o_domain="por",
                                                init=0)
        count = Signal(range(DONE_CYCLES + 1))
        with m.If(~rstn):
            m.d.por += count.eq(0)
        with m.Elif(count != DONE_CYCLES):
            m.d.por += count.eq(count + 1)
        # each domain's reset is a register with the max_fanout attribute: it reaches
        # every control register of its domain, and Vivado copies it for its loads
        in_reset = Signal(attrs={"max_fanout": MAX_FANOUT})
        m.d.por += in_reset.eq(~rstn | (count < RESET_CYCLES))
        m.d.comb += ResetSignal("axil").eq(in_reset)
        m.domains.sync_reset = ClockDomain("sync_reset")
        m.d.comb += ClockSignal("sync_reset").eq(self.axis_aclk)
        m.submodules.sync_reset = ResetSynchronizer(in_reset, domain="sync_reset")
        sync_rst = Signal(init=1, attrs={"max_fanout": MAX_FANOUT})
        m.d.sync_reset += sync_rst.eq(0)
        m.d.comb += ResetSignal("sync").eq(sync_rst)
        m.d.comb += self.mod_rst_done.eq(0xFFFE | (count == DONE_CYCLES))

        # ---- AXI-Lite: axil_aclk → axis_aclk ------------------------------------------
        m.submodules.core = core = self.core
        m.submodules.axil_bridge = bridge = AxiLiteClockBridge(s_domain="axil",
                                                               m_domain="sync")
        connect_flat_slave(m, self, bridge.s)
        wiring.connect(m, bridge.m, core.axil)

        # ---- streams: flat, lanes concatenated -----------------------------------------
        for prefix, d, member in STREAMS:
            for i in range(n):
                s = getattr(core, member)[i]
                valid = getattr(self, f"{prefix}_tvalid")[i]
                ready = getattr(self, f"{prefix}_tready")[i]
                if d == "in":
                    # take nothing while in reset: a beat taken then would be lost
                    m.d.comb += [s.valid.eq(valid & ~ResetSignal("sync")),
                                 ready.eq(s.ready & ~ResetSignal("sync"))]
                else:
                    m.d.comb += [valid.eq(s.valid), s.ready.eq(ready)]
                for port_name, field, width in _AXIS_FIELDS:
                    flat = getattr(self, f"{prefix}_{port_name}")[i * width:(i + 1) * width]
                    value = getattr(s.payload, field)
                    m.d.comb += (value.eq(flat) if d == "in" else flat.eq(value))
        return m
