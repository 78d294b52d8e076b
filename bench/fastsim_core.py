"""Compiled simulation of the OpenNIC plugin's core (``sim/core_model.py``): build time and
cycles per second against Amaranth, on the loopback build with its generators running.

Run from the repository root (the package must be installed, ``pip install -e .``)::

    python bench/fastsim_core.py                       # host_bw 200 and 800, loopback
    python bench/fastsim_core.py --host-bw 400 --frames 2000 --format json

Each point is ``PluginParams(host_bw=B, loopback=True)`` (the host lanes with every codec,
the generator lanes and their checkers with the Table 6 codec of B) with the wire looped
back. The register script starts every generator for ``--frames`` frames of 363 elements
at 100 Gb/s each, while ``--host-frames`` host frames of every codec go in at H2C; then it
closes, waits for every checker and reads its frame count. ``build_cold_s`` is a build in
a fresh cache (Verilog export and the generator lane's library included),
``build_cached_s`` a second build; ``sim_cycles_per_s`` is the bench's own loop. The
Amaranth column runs the same script with ``--amaranth-frames`` generator frames.
Every run checks each checker's frame count and the C2H frames against the reference.
"""

import argparse
import sys
import tempfile
import time

from squeezenic_hw.build.params import PluginParams
from squeezenic_hw.cli.output import render
from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.array import array_reference
from squeezenic_hw.regmap.plugin import generator_settings, plugin_register_map
from squeezenic_hw.sim import core_model as cm
from squeezenic_hw.sim.traffic import draw_example, stream_frames, stream_recipes
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.generator import GeneratorConfig

COLUMNS = ["backend", "host_bw", "gen_lanes", "frames", "build_cold_s", "build_cached_s",
           "cycles", "sim_cycles_per_s", "checked"]


def scenario(params, frames, host_frames):
    """``(script, inputs, back, checkers, want)``: the register script, the H2C frames,
    the C2H frames the run must give, the checkers' frame-count registers and their sum
    by the reference."""
    rm = plugin_register_map(params)
    codec = params.gen_codecs[0]
    cfg = GeneratorConfig(codec=codec_info(codec.split(":")[0]).id, elements=363,
                          seed=3, value_seed=11, rate_bytes_per_cycle=12.5)
    script = [cm.write(rm[name].offset, value)
              for name, value in generator_settings(cfg, frames).items()]
    script.append(cm.write(rm["gen_start"].offset, 1))
    script += [cm.poll(rm[f"lane{k}_frames_sent"].offset, frames, every=500)
               for k in range(params.gen_lanes)]
    script += [cm.inputs_done(), cm.write(rm["gen_close"].offset, 1),
               cm.write(rm["tx_close"].offset, 1)]
    host, k = [], 0
    while len(host) < host_frames:          # tensor streams of every codec, one after another
        host += stream_frames(draw_example(stream_recipes(), k), k=k)
        k += 1
    host = host[:host_frames]
    back = lr.rx(lr.tx(host, codecs=params.codecs)[0], codecs=params.codecs)[0]
    # the generators' last wire frames are still on their way to the checkers
    script += [cm.output_frames(0, len(back)), cm.wait(2000)]
    checkers = [rm[f"lane{k}_chk_frames_lo"].offset for k in range(params.rx_lanes)]
    script += [cm.read(addr) for addr in checkers]
    # the checkers share the generators' streams among them: their frames add up
    want = sum(lane["checker"]["frames"] for lane in array_reference(
        params.gen_lanes, cfg, frames, codecs=params.gen_codecs, mtu=params.mtu,
        port=params.port, max_host_elements=params.max_host_elements,
        src_port_base=params.src_port_base))
    return script, {"h2c0": host}, back, checkers, want


def measure(backend, host_bw, frames, host_frames, cache):
    params = PluginParams(host_bw=host_bw, loopback=True)
    script, inputs, back, checkers, want = scenario(params, frames, host_frames)
    row = {"backend": backend, "host_bw": host_bw, "gen_lanes": params.gen_lanes,
           "frames": frames}
    if backend == "compiled":
        run = cm.simulate_core_compiled(params, inputs, script, looped=True, cache_dir=cache)
        again = time.perf_counter()
        cm.build_core_model(params, looped=True, cache_dir=cache)
        row |= {"build_cold_s": run.extra["build"]["build_s"],
                "build_cached_s": round(time.perf_counter() - again, 2)}
    else:
        run = cm.simulate_core(params, inputs, script, looped=True)
    reads = run.reads()
    checked = sum(reads[addr] for addr in checkers)
    if [f.data for f in run.outputs["c2h0"]] != back or checked != want:
        raise SystemExit(f"{backend} host_bw {host_bw}: C2H frames or checker counts differ "
                         f"from the reference")
    row |= {"cycles": run.cycles, "sim_cycles_per_s": round(run.cycles / run.wall_seconds),
            "checked": checked}
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host-bw", default="200,800", help="points (default 200,800)")
    p.add_argument("--frames", type=int, default=500,
                   help="generator frames per lane, compiled (default 500)")
    p.add_argument("--amaranth-frames", type=int, default=5,
                   help="generator frames per lane on Amaranth (default 5; 0: skip)")
    p.add_argument("--host-frames", type=int, default=40, help="H2C frames (default 40)")
    p.add_argument("--backends", default="compiled,amaranth",
                   help="which to run (default compiled,amaranth)")
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="fastsim_core.") as cache:
        backends = {b.strip() for b in a.backends.split(",")}
        for bw in [int(x) for x in a.host_bw.split(",") if x.strip()]:
            if "compiled" in backends:
                print(f"host_bw {bw}: compiled ...", file=sys.stderr, flush=True)
                rows.append(measure("compiled", bw, a.frames, a.host_frames, cache))
            if a.amaranth_frames and "amaranth" in backends:
                print(f"host_bw {bw}: amaranth ...", file=sys.stderr, flush=True)
                rows.append(measure("amaranth", bw, a.amaranth_frames, a.host_frames, cache))
    print(render(rows, COLUMNS, a.format), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
