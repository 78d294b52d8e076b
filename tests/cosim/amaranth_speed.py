"""The co-simulation's stream traffic in Amaranth's own simulator, for the speed table of
docs/cosim.md (not a test).

    python tests/cosim/amaranth_speed.py [--codecs raw,fp16,...] [--host-bw 100] [--seed 11]

Builds the same plugin as ``write_opennic_plugin`` would (``PluginParams``), drives the
same frames as ``cosim_streams.streams_full_rate`` (no idle, no backpressure) through
the OpenNIC ports with the project's own stream models, closes the open wire frame over
AXI-Lite, and prints the simulated 250 MHz cycles, the wall seconds and cycles per
second. The frames must equal the reference's (it says so if not).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from amaranth.sim import Simulator  # noqa: E402
from traffic import stream_test_traffic  # noqa: E402

from squeezenic_hw.build.params import PluginParams  # noqa: E402
from squeezenic_hw.gateware.opennic.plugin import OpenNicPlugin  # noqa: E402
from squeezenic_hw.reference import lane as lr  # noqa: E402
from squeezenic_hw.sim.axil import OKAY, axil_write  # noqa: E402
from squeezenic_hw.sim.axis import AxisFrame, FrameSink, FrameSource  # noqa: E402
from squeezenic_hw.sim.opennic import add_clocks, axil_bus, flat_stream, reset  # noqa: E402
from squeezenic_hw.spec.codecs import codec_info  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codecs", default=None, help="comma-separated (default: all, 0-6)")
    ap.add_argument("--host-bw", type=int, default=100)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    params = PluginParams(codecs=args.codecs.split(",") if args.codecs else None,
                          host_bw=args.host_bw)
    codecs = [codec_info(c).name for c in params.codecs]
    port, mtu, mhe = params.port, params.mtu, params.max_host_elements

    def tx_ref(frames):
        return lr.tx(frames, port=port, mtu=mtu, codecs=codecs)

    tx_in, rx_in = stream_test_traffic(args.seed, codecs, port=port, mtu=mtu,
                                       max_host_elements=mhe,
                                       tx_reference=lambda f: tx_ref(f)[0])
    want_tx = tx_ref([f for f, _ in tx_in])[0]
    want_c2h = lr.rx([f for f, _ in rx_in], port=port, max_host_elements=mhe, codecs=codecs)[0]

    top = OpenNicPlugin(params)
    rm = top.regmap
    bus = axil_bus(top)
    h2c = FrameSource(flat_stream(top, "s_axis_qdma_h2c"),
                      [AxisFrame(f, src=s, dst=0x1234) for f, s in tx_in])
    rx = FrameSource(flat_stream(top, "s_axis_adap_rx_250mhz"),
                     [AxisFrame(f, src=s, dst=0x4321) for f, s in rx_in])
    tx = FrameSink(flat_stream(top, "m_axis_adap_tx_250mhz"), n_frames=len(want_tx),
                   timeout=100_000)
    c2h = FrameSink(flat_stream(top, "m_axis_qdma_c2h"), n_frames=len(want_c2h), timeout=100_000)
    stats = {"t": 0}

    async def count(ctx):
        while True:
            await ctx.tick()
            stats["t"] += 1

    async def bench(ctx):
        await reset(ctx, top)
        stats["wall0"], t_start = time.perf_counter(), stats["t"]
        while h2c.done_cycle is None:
            await ctx.tick()
        await ctx.tick().repeat(4)
        assert await axil_write(ctx, bus, rm["tx_close"].offset, 1, domain="axil") == OKAY
        while len(tx.frames) < len(want_tx) or len(c2h.frames) < len(want_c2h):
            await ctx.tick()
        stats["cycles"] = stats["t"] - t_start
        stats["wall"] = time.perf_counter() - stats["wall0"]

    sim = Simulator(top)
    add_clocks(sim, top)
    sim.add_testbench(count, background=True)
    for model in (h2c, rx, tx, c2h):
        sim.add_testbench(model.run, background=True)
    sim.add_testbench(bench)
    t1 = time.perf_counter()
    sim.run()
    ok = [f.data for f in tx.frames] == want_tx and [f.data for f in c2h.frames] == want_c2h
    beats = sum(-(-len(f) // 64) for f, _ in tx_in + rx_in)
    print(f"codecs {','.join(codecs)}: {len(tx_in)} + {len(rx_in)} frames in ({beats} beats); "
          f"prepare + elaborate {t1 - t0:.1f} s; traffic {stats['cycles']} cycles in "
          f"{stats['wall']:.1f} s = {stats['cycles'] / stats['wall']:.1f} cycles/s; "
          f"frames {'equal the reference' if ok else 'DIFFER from the reference'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
