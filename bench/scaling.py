"""How the cost of the lane arrays grows with the lane count N: elaboration, Verilog export,
simulation speed and per-block synthesis, with least-squares fits.

Usage::

    python bench/scaling.py [--max-lanes 64] [--lanes 1,2,4,...] [--codec sign]
                            [--sim-cycles 200] [--sim-warmup 100] [--no-sim] [--no-synth] [--jobs N]
                            [--cache-dir build/synth-cache] [--format table|csv|json|markdown]

For each N in 1, 2, 4, 8, 16, 32, 64 (at most ``--max-lanes``), host_bw = 100·N:

* ``tx_build_s`` / ``rx_build_s``: constructing :class:`TxArray` / :class:`RxArray`
  (the lanes are made in the constructors);
* ``tx_elab_s`` / ``rx_elab_s``: elaboration to RTLIL (``amaranth.back.rtlil.convert``,
  pure Python);
* ``tx_export_s`` / ``rx_export_s``: Verilog export of that RTLIL (Amaranth's built-in
  Yosys, ``write_verilog``); ``tx_verilog_kib`` / ``rx_verilog_kib`` its size;
* ``sim_cycles_per_s``: Amaranth's Python simulator running TxArray → RxArray (the
  on-chip loopback, every generator at 100 Gb/s with ``--codec``, a wire frame
  flushed after every host frame so the RX side works too), timed over
  ``--sim-cycles`` cycles after ``--sim-warmup``; ``sim_frames_checked`` the host frames
  the checkers counted in the timed cycles; ``sim_build_s`` the simulator's set-up;
* ``synth_s``: the per-block approach of ``squeezenic-hw report`` for the two arrays
  (a generator, a TX lane, a FrameArbiter(N), a FrameDistributor(N), an RX lane,
  a checker: each distinct block synthesised once, through the report's cache,
  whose records keep each block's original Yosys time), ``synth_new_s`` the part
  that depends on N (arbiter and distributor), ``synth_peak_mib`` the largest
  Yosys process, and ``LUT`` / ``FF`` the arrays' summed resources.

Fits: for each measured column y(N), a power law ``y = c·N^k`` fitted by least squares
on log-log (reported: ``exponent`` k) and a line ``y = a + b·N`` (``slope`` b); ``r2_power``
and ``r2_linear`` are both computed on y itself (not its logarithm) so they compare,
and ``best`` is the one with the larger R². Fewer than three N give no R².

Cost: the simulator slows about linearly with N (8 lanes run ~150 cycles/s), and the
first synthesis of a TX/RX lane takes minutes; ``--max-lanes 4 --no-synth`` runs in
about a minute. The default (to 64 lanes) takes hours: run it on a quiet machine.
"""

import argparse
import math
import sys
import time

from amaranth import Module
from amaranth.back import rtlil, verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import Out
from amaranth.sim import Simulator

from squeezenic_hw.cli.output import render
from squeezenic_hw.flows.report import (
    DEFAULT_CACHE_DIR,
    Block,
    linear_fit,
    lut_mem,
    synthesize_blocks,
)
from squeezenic_hw.flows.throughput import codec_setting
from squeezenic_hw.gateware.arrays.lane_arrays import CheckerCounters, RxArray, TxArray
from squeezenic_hw.spec.generator import GeneratorConfig, config_values

LANES = (1, 2, 4, 8, 16, 32, 64)
CLOCK_HZ = 250e6
FIT_COLUMNS = ("tx_build_s", "tx_elab_s", "tx_export_s", "tx_verilog_kib", "rx_build_s",
               "rx_elab_s", "rx_export_s", "rx_verilog_kib", "sim_build_s", "sim_cycles_per_s",
               "synth_s", "synth_new_s", "synth_peak_mib", "LUT", "FF")


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _export(rtlil_text):
    """Verilog of RTLIL text, as ``amaranth.back.verilog.convert`` makes it."""
    return verilog._convert_rtlil_text(rtlil_text)   # private, but the exact export step


def measure_convert(make, name):
    dut, build = _timed(make)
    text, elab = _timed(lambda: rtlil.convert(dut, name=name))
    v, export = _timed(lambda: _export(text))
    return {"build_s": build, "elab_s": elab, "export_s": export, "verilog_kib": len(v) / 1024}


class Loopback(wiring.Component):
    """TxArray → RxArray: the on-chip loopback of the paper's set-up."""

    def __init__(self, host_bw, codecs):
        self.tx = TxArray(host_bw, codecs=codecs)
        self.rx = RxArray(host_bw, codecs=codecs)
        super().__init__({"checkers": Out(CheckerCounters).array(self.tx.n_lanes)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = self.tx, self.rx
        wiring.connect(m, self.tx.o, self.rx.i)
        for k in range(self.tx.n_lanes):
            m.d.comb += self.checkers[k].eq(self.rx.checkers[k])
        return m


def measure_sim(n, codec_spec, cycles, warmup):
    _, cid, param = codec_setting(codec_spec)
    dut = Loopback(100 * n, [cid])
    # flush every host frame, so that wire frames leave at once and the RX side works too
    cfg = GeneratorConfig(codec=cid, param=param, scale_bits=0x3F800000, aux_bits=0xBF800000,
                          flush_every=1)
    res = {}

    def checked(ctx):
        return sum(int(ctx.get(dut.checkers[k].frames)) for k in range(n))

    async def bench(ctx):
        c = dut.tx.ctrl
        for key, value in config_values(cfg).items():
            if hasattr(c, key):
                ctx.set(getattr(c, key), value)
        ctx.set(c.start, 1)
        await ctx.tick().repeat(warmup)
        before = checked(ctx)
        start = time.perf_counter()
        for _ in range(cycles):
            await ctx.tick()
        res["wall"] = time.perf_counter() - start
        res["frames"] = checked(ctx) - before

    sim, build = _timed(lambda: Simulator(dut))
    sim.add_clock(1 / CLOCK_HZ)
    sim.add_testbench(bench)
    sim.run()
    return {"sim_build_s": build, "sim_cycles_per_s": cycles / res["wall"],
            "sim_frames_checked": res["frames"]}


def array_blocks(n, codec_name):
    """``[(Block, count)]`` of TxArray(100·n) and RxArray(100·n) (the report's blocks)."""
    from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

    codecs = (codec_name,)
    return [
        (Block.of("tx_lane", codecs=codecs, mtu=DEFAULT_MTU, port=DEFAULT_PORT), n),
        (Block.of("rx_lane", codecs=codecs, max_host_elements=DEFAULT_HOST_ELEMENTS,
                  port=DEFAULT_PORT), n),
        (Block.of("generator", max_elements=DEFAULT_HOST_ELEMENTS, port=DEFAULT_PORT), n),
        (Block.of("checker", port=DEFAULT_PORT), n),
        (Block.of("arbiter", n=n), 1),
        (Block.of("distributor", n=n, port=DEFAULT_PORT), 1),
    ]


def measure_synth(n, codec_name, *, jobs, cache_dir, progress):
    pairs = array_blocks(n, codec_name)
    recs = synthesize_blocks([b for b, _ in pairs], jobs=jobs, cache_dir=cache_dir,
                             progress=progress)
    new = [recs[b] for b, _ in pairs if b.kind in ("arbiter", "distributor")]
    return {
        "synth_s": sum(r["synth_s"] for r in recs.values()),
        "synth_new_s": sum(r["synth_s"] for r in new),
        "synth_peak_mib": max(r["peak_mib"] for r in recs.values()),
        "LUT": sum(c * (recs[b]["lut"] + lut_mem(recs[b]["cells"])) for b, c in pairs),
        "FF": sum(c * recs[b]["ff"] for b, c in pairs),
    }


def fit(ns, ys):
    """Power law on log-log and a line, both scored by R² on y (see the module docstring)."""
    out = {"exponent": None, "coefficient": None, "r2_power": None, "intercept": None,
           "slope": None, "r2_linear": None, "best": None}
    pts = [(n, y) for n, y in zip(ns, ys, strict=True) if y is not None]
    if len(pts) < 2:
        return out
    xs, vs = [p[0] for p in pts], [p[1] for p in pts]
    a, b, _ = linear_fit(xs, vs)
    out.update(intercept=a, slope=b)
    if all(v > 0 for v in vs):
        la, k, _ = linear_fit([math.log(x) for x in xs], [math.log(v) for v in vs])
        out.update(exponent=k, coefficient=math.exp(la))
    if len(pts) >= 3:
        mean = sum(vs) / len(vs)
        ss_tot = sum((v - mean) ** 2 for v in vs) or 1e-300

        def r2(pred):
            return 1 - sum((v - p) ** 2 for v, p in zip(vs, pred, strict=True)) / ss_tot

        out["r2_linear"] = r2([a + b * x for x in xs])
        if out["exponent"] is not None:
            out["r2_power"] = r2([out["coefficient"] * x ** out["exponent"] for x in xs])
        cands = [(out["r2_linear"], "linear")]
        if out["r2_power"] is not None:
            cands.append((out["r2_power"], "power"))
        out["best"] = max(cands)[1]
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", default=",".join(map(str, LANES)), metavar="N,...",
                    help="lane counts (default %(default)s)")
    ap.add_argument("--max-lanes", type=int, default=64, help="drop lane counts above this")
    ap.add_argument("--codec", default="sign",
                    help="codec of the lanes and the simulated generators (default sign)")
    ap.add_argument("--sim-cycles", type=int, default=200, help="timed simulated cycles per N")
    ap.add_argument("--sim-warmup", type=int, default=100,
                    help="cycles simulated before the timing starts (default 100)")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulation")
    ap.add_argument("--no-synth", action="store_true", help="skip the synthesis")
    ap.add_argument("--jobs", type=int, default=1, help="parallel syntheses")
    ap.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR,
                    help="the report's synthesis cache (default %(default)s)")
    ap.add_argument("--format", choices=("table", "csv", "json", "markdown"), default="table")
    args = ap.parse_args(argv)
    lanes = [int(x) for x in args.lanes.split(",") if x.strip()]
    lanes = [n for n in lanes if 1 <= n <= min(args.max_lanes, 64)]
    if not lanes:
        ap.error("no lane count left (check --lanes and --max-lanes)")
    codec_name = codec_setting(args.codec)[0].partition(":")[0]

    def progress(line):
        print(f"  {line}", file=sys.stderr, flush=True)

    rows = []
    for n in lanes:
        print(f"N = {n} ({100 * n} Gb/s) ...", file=sys.stderr, flush=True)
        row = {"lanes": n, "host_bw": 100 * n}
        for side, cls in (("tx", TxArray), ("rx", RxArray)):
            r = measure_convert(lambda cls=cls, n=n: cls(100 * n, codecs=[codec_name]),
                                f"{side}_array")
            row.update({f"{side}_{k}": round(v, 3) for k, v in r.items()})
        if not args.no_sim:
            r = measure_sim(n, args.codec, args.sim_cycles, args.sim_warmup)
            row.update({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()})
        if not args.no_synth:
            row.update({k: round(v, 2) if isinstance(v, float) else v for k, v in
                        measure_synth(n, codec_name, jobs=args.jobs, cache_dir=args.cache_dir,
                                      progress=progress).items()})
        rows.append(row)
        print(f"  {row}", file=sys.stderr, flush=True)

    columns = list(dict.fromkeys(k for r in rows for k in r))
    fits = []
    for col in FIT_COLUMNS:
        if col in columns:
            fits.append({"metric": col, **fit([r["lanes"] for r in rows],
                                             [r.get(col) for r in rows])})
    fit_cols = ["metric", "exponent", "coefficient", "r2_power", "intercept", "slope",
                "r2_linear", "best"]
    if args.format == "json":
        import json
        print(json.dumps({"codec": args.codec, "rows": rows, "fits": fits}, indent=2))
        return
    titles = (f"array costs by lane count (codec {args.codec})",
              "fits: y = c*N^k (log-log) and y = a + b*N; R2 on y")
    if args.format == "markdown":
        from squeezenic_hw.cli.report_cmd import markdown_table
        print(f"**{titles[0]}**\n\n{markdown_table(rows, columns)}\n"
              f"**{titles[1]}**\n\n{markdown_table(fits, fit_cols)}", end="")
        return
    print(render(rows, columns, args.format, title=titles[0]), end="")
    if args.format == "table":
        print()
    print(render(fits, fit_cols, args.format, title=titles[1]), end="")


if __name__ == "__main__":
    main()
