"""The OpenNIC ``box_322mhz`` user plugin of a SqueezeNIC build: a pass-through.

SqueezeNIC works in the 250 MHz box; the 322 MHz box (the CMAC side) only has
to connect the packet adapters to the CMACs. This module has the user-plugin
ports of ``box_322mhz`` for ``NUM_CMAC_PORT`` = ``num_intf``: the adapter's TX
stream goes to the CMAC and the CMAC's RX stream to the adapter, wire for
wire (combinational: each port stays in its own ``cmac_clk``). Its AXI-Lite
slave holds two read-only words, the plugin ID at offset 0 and the version at
4; every other address answers ``SLVERR``.
"""

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.axil.bus import AXIL_SLAVE_PORTS, connect_flat_slave
from squeezenic_hw.gateware.axil.register_file import AxiLiteRegisterFile
from squeezenic_hw.regmap.plugin import PLUGIN_ID, version_word
from squeezenic_hw.regmap.registers import RegisterMap

__all__ = ["OpenNic322PassThrough", "opennic_322_ports", "MODULE_NAME_322"]

MODULE_NAME_322 = "squeezenic_322mhz"
#: (source prefix, sink prefix, source has tready)
_PATHS = (("s_axis_adap_tx_322mhz", "m_axis_cmac_tx", True),
          ("s_axis_cmac_rx", "m_axis_adap_rx_322mhz", False))
_FIELDS = (("tdata", 512), ("tkeep", 64), ("tlast", 1), ("tuser_err", 1))


def opennic_322_ports(num_intf):
    """``[(name, direction, width)]`` of the 322 MHz plugin module, in port order."""
    n = num_intf
    ports = [(f"s_axil_{name}", d, w) for name, d, w in AXIL_SLAVE_PORTS]

    def stream(prefix, d, with_ready):
        out = [(f"{prefix}_tvalid", d, n)] + [(f"{prefix}_{f}", d, w * n) for f, w in _FIELDS]
        if with_ready:
            out.append((f"{prefix}_tready", "out" if d == "in" else "in", n))
        return out

    ports += stream("s_axis_adap_tx_322mhz", "in", True)
    ports += stream("m_axis_adap_rx_322mhz", "out", False)
    ports += stream("m_axis_cmac_tx", "out", True)
    ports += stream("s_axis_cmac_rx", "in", False)
    ports += [("mod_rstn", "in", 8), ("mod_rst_done", "out", 8), ("axil_aclk", "in", 1),
              ("cmac_clk", "in", n)]
    return ports


class OpenNic322PassThrough(wiring.Component):
    """``box_322mhz`` user plugin: adapter ↔ CMAC wires and an ID register.

    Parameters
    ----------
    num_intf : int
        ``NUM_CMAC_PORT``, 1 or 2.

    Notes
    -----
    Latency 0 cycles (wires); throughput one beat per cycle; backpressure:
    the CMAC's ``tready`` is the adapter's (the RX direction has none in
    OpenNIC). Reset: ``mod_rstn[0]`` resets the AXI-Lite slave;
    ``mod_rst_done[0]`` follows it two axil cycles later, ``[7:1]`` are 1.
    """

    def __init__(self, num_intf=1):
        if isinstance(num_intf, bool) or num_intf not in (1, 2):
            raise ValueError(f"num_intf must be 1 or 2, got {num_intf!r}")
        self.num_intf = num_intf
        self.regmap = RegisterMap()
        self.regmap.add("id", access="ro", offset=0, doc='0x53515A4E, ASCII "SQZN"')
        self.regmap.add("version", access="ro", doc="squeezenic-hw version, as in box_250mhz")
        super().__init__({name: (In if d == "in" else Out)(w)
                          for name, d, w in opennic_322_ports(num_intf)})

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.d.comb += ClockSignal("sync").eq(self.axil_aclk)
        rstn = Signal()
        m.submodules.rstn_sync = FFSynchronizer(self.mod_rstn[0], rstn, init=0,
                                                reset_less=True)
        m.d.comb += [ResetSignal("sync").eq(~rstn),
                     self.mod_rst_done.eq(0xFE | rstn)]
        m.submodules.regs = regs = AxiLiteRegisterFile(self.regmap)
        m.d.comb += [regs.ro.id.eq(PLUGIN_ID), regs.ro.version.eq(version_word())]
        connect_flat_slave(m, self, regs.axil)

        for src, dst, has_ready in _PATHS:
            m.d.comb += getattr(self, f"{dst}_tvalid").eq(getattr(self, f"{src}_tvalid"))
            for f, _ in _FIELDS:
                m.d.comb += getattr(self, f"{dst}_{f}").eq(getattr(self, f"{src}_{f}"))
            if has_ready:
                m.d.comb += getattr(self, f"{src}_tready").eq(getattr(self, f"{dst}_tready"))
        return m
