"""Drive the OpenNIC plugin top (:class:`~squeezenic_hw.gateware.opennic.plugin.OpenNicPlugin`)
through its flat OpenNIC ports in an Amaranth simulation.

OpenNIC packs the streams of all interfaces into one wide port per signal
(``s_axis_qdma_h2c_tdata`` is ``512 · NUM_PHYS_FUNC`` bits); :func:`flat_stream`
gives one interface's slice as a stream object for :mod:`.axis`'s
``FrameSource``/``FrameSink``, :func:`axil_bus` the AXI-Lite slave for
:mod:`.axil`, :func:`add_clocks` the shell's two clocks and :func:`reset` the
``mod_rstn``/``mod_rst_done`` handshake.
"""

from types import SimpleNamespace

from amaranth import Cat

from squeezenic_hw.gateware.axil.bus import AXIL_SLAVE_PORTS
from squeezenic_hw.gateware.common.layouts import AxisBeat

__all__ = ["AXIL", "flat_stream", "axil_bus", "add_clocks", "reset"]

#: Signal names of the plugin's AXI-Lite slave (``s_axil_<name>``).
AXIL = [name for name, _, _ in AXIL_SLAVE_PORTS]


def flat_stream(top, prefix, i=0):
    """``valid``/``ready``/``payload`` of interface ``i`` of a flat OpenNIC stream."""
    def part(name, width):
        return getattr(top, f"{prefix}_{name}")[i * width:(i + 1) * width]
    payload = AxisBeat(Cat(part("tdata", 512), part("tkeep", 64), part("tlast", 1),
                           part("tuser_size", 16), part("tuser_src", 16),
                           part("tuser_dst", 16)))
    return SimpleNamespace(valid=part("tvalid", 1), ready=part("tready", 1), payload=payload)


def axil_bus(top):
    """The plugin's AXI-Lite slave signals by their short names (for ``sim.axil``)."""
    return SimpleNamespace(**{name: getattr(top, f"s_axil_{name}") for name in AXIL})


def add_clocks(sim, top):
    """axis_aclk 250 MHz and axil_aclk 125 MHz, phase aligned, as the shell makes them."""
    async def clocks(ctx):
        t = 0
        while True:
            ctx.set(top.axis_aclk, t % 2 == 0)
            if t % 2 == 0:           # axil_aclk changes every other step
                ctx.set(top.axil_aclk, t % 4 < 2)
            await ctx.delay(2e-9)
            t += 1
    sim.add_process(clocks)


async def reset(ctx, top):
    """Hold ``mod_rstn`` low for 8 axil cycles, release it, wait for ``mod_rst_done``;
    asserts that only bit 0 (the plugin) takes part in the handshake."""
    ctx.set(top.mod_rstn, 0)
    for _ in range(8):
        await ctx.tick("axil")
    assert ctx.get(top.mod_rst_done) == 0xFFFE
    ctx.set(top.mod_rstn, 0xFFFF)
    for _ in range(40):
        await ctx.tick("axil")
        if ctx.get(top.mod_rst_done) & 1:
            break
    assert ctx.get(top.mod_rst_done) == 0xFFFF
