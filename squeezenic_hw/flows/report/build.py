"""Synthesise a plugin's blocks (cached, in parallel) and sum them into the report."""

import time
from pathlib import Path

from squeezenic_hw.flows import synth
from squeezenic_hw.flows.timing import BUDGET_NS
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.scaling import LANE_GBPS, lanes_for

from .blocks import core_block, plugin_blocks
from .cache import (
    BlockSynthesisError,
    cached_record,
    default_cache_dir,
    peak_mib_estimate,
    synth_block,
)
from .policy import DEFAULT_HOST_BWS, WIRE_GBPS, codec_name, default_codec, ordered_codecs

U280_PART = "xcu280-fsvh2892-2L-e"


#: The paper's Table 6: U280 utilisation (%) by host bandwidth, whole design
#: *including the OpenNIC shell* (Vivado).
PAPER_TABLE6 = {
    400: {"LUT": 11.85, "FF": 11.28, "CLB": 26.53},
    800: {"LUT": 12.40, "FF": 11.81, "CLB": 26.91},
    1600: {"LUT": 13.60, "FF": 12.77, "CLB": 29.03},
    3200: {"LUT": 12.59, "FF": 12.55, "CLB": 28.07},
    6400: {"LUT": 19.31, "FF": 19.30, "CLB": 39.97},
}


#: U280 totals the percentages divide by (``CARRY``: one CARRY8 per CLB).
DEVICE_TOTALS = {"LUT": synth.U280_LUT, "FF": synth.U280_FF, "CARRY": synth.U280_CLB,
                 "DSP": synth.U280_DSP, "BRAM": synth.U280_BRAM36, "URAM": synth.U280_URAM,
                 "CLB": synth.U280_CLB}


#: The issue's must-hold growth per added 100 Gb/s lane (the paper's slopes: about 1.6 k
#: LUT, 97 k over the 60 lanes from 400 to 6400 Gb/s, and 3.3 k FF, Table 6's fit).
TARGET_PER_LANE = {"LUT": 1600, "FF": 3300}


#: What one added generator lane may cost, by its codec: the generator, its TX lane and
#: its share of what the lanes are merged by (the arbiter, or the frame bus and the
#: shared rings of narrow lanes). ``sign`` lanes are the paper's 1.6 k LUT; a ``fixed``
#: lane at a build-time width encodes 16 elements a beat, within 4 k LUT and 32 DSP.
ADDED_LANE_BUDGET = {"sign": {"LUT": 1600, "BRAM": 4},
                     "fixed": {"LUT": 4000, "DSP": 32, "BRAM": 4}}


METHOD = ("sum of out-of-context block syntheses (YoWASP Yosys synth_xilinx -family xcup), "
          "each distinct block synthesised once and multiplied by its instance count; no "
          "cross-block optimisation. SqueezeNIC core only: the paper's Table 6 is the whole "
          "design including the OpenNIC shell.")


_RESOURCES = ("LUT", "FF", "CARRY", "DSP", "BRAM", "URAM")


# Longest first, so that parallel jobs end together.
_COST_ORDER = ("plugin", "core", "tx_lane", "rx_lane", "gen_lane", "gen_tx_lane", "generator",
               "register_file", "arbiter", "frame_bus", "header_finisher", "ring_cluster",
               "checker", "distributor", "splitter")


def _synthesise(block, kwargs):
    """The task of one block (:func:`synth_block` named here, where a test may stand in for
    it)."""
    return synth_block(block, **kwargs)


def synthesize_blocks(blocks, *, jobs=1, scheduler=None, cache_dir=None, use_cache=True,
                      timeout=None, progress=None):
    """Synthesise each distinct block (through the cache); return ``{Block: record}``.

    Blocks found through the cache index are answered at once, with no cluster; the
    others are Dask tasks (:func:`squeezenic_hw.cluster.run_tasks`), longest first, on
    the cluster of ``scheduler`` or on a local one of ``jobs`` workers, each asking for
    the memory its block took in an earlier run (:func:`~.cache.peak_mib_estimate`).
    ``progress`` (a callable taking one line, e.g. a print to stderr) hears
    ``[start] tx_lane(sign)`` when a synthesis starts and ``[3/9] tx_lane(sign) 41.2 s``
    when a block is done. On a failure no further block is started, the running ones
    finish (and are cached), and :class:`~.cache.BlockSynthesisError` (or
    :class:`~squeezenic_hw.cluster.TaskFailed`, naming the block) is raised.

    ``cache_dir`` is resolved here: the workers of a scheduler's cluster write to the
    same path, which should be on a file system they share with this machine.
    """
    from squeezenic_hw.cluster import Task, run_tasks, where

    unique = list(dict.fromkeys(blocks))
    unique.sort(key=lambda b: _COST_ORDER.index(b.kind) if b.kind in _COST_ORDER else 99)
    total = len(unique)
    results = {}
    say = progress or (lambda line: None)

    def done(block, record):
        results[block] = record
        what = (f"cached (synth {record['synth_s']:.1f} s)" if record["cached"]
                else f"{record['elapsed_s']:.1f} s")
        say(f"[{len(results)}/{total}] {block.label} {what}")

    todo = []
    for block in unique:
        record = cached_record(block, cache_dir) if use_cache else None
        if record is None:
            todo.append(block)
        else:
            done(block, record)
    if not todo:
        return results
    if use_cache:
        cache_dir = Path(cache_dir or default_cache_dir()).resolve()
    jobs = max(1, min(jobs, len(todo)))
    say(f"{len(todo)} of {total} block(s) to synthesise, {where(scheduler, jobs)}"
        + (f" (cache {cache_dir})" if use_cache else " (no cache)"))
    kwargs = dict(cache_dir=cache_dir, use_cache=use_cache, timeout=timeout)
    peaks = peak_mib_estimate(todo, cache_dir if use_cache else None)
    tasks = [Task(block.label, _synthesise, (block, kwargs), memory_mib=peaks[block])
             for block in todo]
    for index, record in run_tasks(tasks, scheduler=scheduler, jobs=jobs,
                                   expected=(BlockSynthesisError,), progress=say,
                                   name="synth"):
        done(todo[index], record)
    return results


#: Columns of the summary rows (one per host bandwidth); meanings in docs/report.md.
SUMMARY_COLUMNS = [
    "host_bw", "lanes", "codec", "ratio", "wire_gbps_at_full_rate", "fits_wire", "codecs",
    "gen_codecs", "loopback", "rx_lanes",
    "LUT", "LUT_mem", "FF", "CARRY", "DSP", "BRAM", "URAM", "CLB_est",
    "LUT_pct", "FF_pct", "CARRY_pct", "DSP_pct", "BRAM_pct", "URAM_pct", "CLB_pct",
    "paper_LUT_pct", "paper_FF_pct", "paper_CLB_pct", "LUT_per_lane", "FF_per_lane",
    "added_lane_LUT", "added_lane_FF", "added_lane_DSP", "added_lane_BRAM",
    "lane_budget_LUT", "lane_within_budget",
    "depth", "est_ns", "blocks", "synth_s", "peak_mib", "cached",
]


#: Columns of the per-block rows (``--breakdown``): resources are count × one instance.
BLOCK_COLUMNS = [
    "host_bw", "block", "count", "LUT_each", "FF_each", "LUT", "LUT_mem", "FF", "CARRY",
    "DSP", "BRAM", "URAM", "LUT_share_pct", "depth", "est_ns", "fmax_mhz_est", "lut_levels",
    "max_lut_levels", "over_budget", "worst_path", "largest_nets", "synth_s", "peak_mib",
    "cached", "log",
]


#: Columns of the ``--whole`` rows (the whole core against the sum of its blocks).
WHOLE_COLUMNS = [
    "host_bw", "codecs", "LUT", "FF", "CARRY", "DSP", "BRAM", "URAM", "depth",
    "sum_LUT", "sum_FF", "LUT_whole_over_sum", "FF_whole_over_sum", "synth_s", "peak_mib",
    "cached", "log",
]


#: Columns of the growth rows: least-squares line count = a + b·lanes, and the largest
#: per-lane cost of a row (``ours_max_per_lane``, at ``max_at_host_bw``).
GROWTH_COLUMNS = ["resource", "ours_per_lane", "ours_max_per_lane", "max_at_host_bw",
                  "paper_per_lane", "target_per_lane", "meets_target", "ours_at_0", "ours_r2",
                  "paper_at_0", "paper_r2", "points"]


def _pct(used, total):
    return round(100.0 * used / total, 4)


def _each(record):
    """One instance's figures in report terms."""
    return {"LUT": record["lut"] + record["lut_mem"], "LUT_mem": record["lut_mem"],
            "FF": record["ff"], "CARRY": record["carry"], "DSP": record["dsp"],
            "BRAM": record["bram"], "URAM": record["uram"]}


def _sum_blocks(pairs, records):
    """Totals of ``[(Block, count)]``."""
    tot = dict.fromkeys(("LUT", "LUT_mem", *_RESOURCES[1:]), 0)
    for block, count in pairs:
        for k, v in _each(records[block]).items():
            tot[k] += count * v
    return tot


def linear_fit(xs, ys):
    """Least-squares ``y = a + b·x``: ``(a, b, r2)``; r2 is None with fewer than 3 points
    (a line through two points says nothing of its fit)."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return None, None, None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = None if n < 3 else (1.0 if ss_tot == 0 else 1 - ss_res / ss_tot)
    return a, b, r2


def _per_lane(pairs, records, params, tot):
    """What one generator lane costs in a build: the total less the host-facing lanes and
    the wire arbiter(2), over the N lanes (so the arbiter(N), the register file and, with
    loopback, the RX side are shared out among the lanes)."""
    n = params.gen_lanes
    if n < 1:
        return {"LUT": None, "FF": None}
    fixed = dict.fromkeys(("LUT", "FF"), 0)
    host = [b for b, _ in pairs[:2]]           # plugin_blocks: host TX lane, host RX lane
    wire = [b for b, _ in pairs if b.kind == "arbiter" and b.args["n"] == 2][:1]
    for block, count in [(b, params.num_intf) for b in host] + [(b, 1) for b in wire]:
        each = _each(records[block])
        for k in fixed:
            fixed[k] += count * each[k]
    return {k: round((tot[k] - fixed[k]) / n, 1) for k in fixed}


def _added_lane(pairs, records, params):
    """What one more generator lane adds to a build: the generator lane itself and its
    share (1/N) of the arbiter(N), or of the frame bus and the shared rings; with the
    budget of its codec (:data:`ADDED_LANE_BUDGET`) and whether it keeps within it.

    The header finisher, the wire arbiter(2), the host-facing lanes and the register file
    are there once a wire whatever N is (the register file's per-lane counters are in the
    fitted growth, not here)."""
    n = params.gen_lanes
    keys = ("LUT", "FF", "DSP", "BRAM")
    out = {f"added_lane_{k}": None for k in keys}
    out.update(lane_budget_LUT=None, lane_within_budget=None)
    if n < 1:
        return out
    cost = dict.fromkeys(keys, 0.0)
    for block, count in pairs:
        if block.kind in ("gen_lane", "frame_bus", "ring_cluster"):
            share = count / n
        elif block.kind == "arbiter" and block.args["n"] == n:
            share = 1 / n     # the array's (at N = 2 counted with the wire's arbiter(2))
        else:
            continue
        each = _each(records[block])
        for k in keys:
            cost[k] += share * each[k]
    out.update({f"added_lane_{k}": round(v, 1) for k, v in cost.items()})
    names = {codec_name(c) for c in params.gen_codecs}
    budget = ADDED_LANE_BUDGET.get(names.pop()) if len(names) == 1 else None
    if budget is not None:
        out["lane_budget_LUT"] = budget["LUT"]
        out["lane_within_budget"] = all(cost[k] <= limit for k, limit in budget.items())
    return out


def _growth(rows):
    """LUT/FF/CLB per added 100 Gb/s lane: ours (rows with lanes) and the paper's.

    ``meets_target`` needs the fitted slope within the target, and for LUTs also every
    row's added lane within its codec's budget (``lane_within_budget``): over a sweep
    whose codec changes with the bandwidth (costlier ``fixed`` lanes at 400-1600, cheap
    ``sign`` lanes above) the slope alone can come out small or negative while each lane
    is far over. ``ours_max_per_lane`` is the largest ``LUT_per_lane`` (``FF_per_lane``),
    the build's whole cost over its lanes with the host lanes taken out: an average that
    includes the parts built once a wire.
    """
    ours = [r for r in rows if r["lanes"] > 1]
    paper = sorted(PAPER_TABLE6.items())
    out = []
    for res, total in (("LUT", synth.U280_LUT), ("FF", synth.U280_FF),
                       ("CLB", synth.U280_CLB)):
        key = "CLB_est" if res == "CLB" else res
        a, b, r2 = linear_fit([r["lanes"] for r in ours], [r[key] for r in ours])
        pa, pb, pr2 = linear_fit([bw // LANE_GBPS for bw, _ in paper],
                                 [v[res] / 100 * total for _, v in paper])
        target = TARGET_PER_LANE.get(res)
        costs = [(r[f"{res}_per_lane"], r["host_bw"]) for r in ours
                 if r.get(f"{res}_per_lane") is not None]
        worst, worst_at = max(costs) if costs else (None, None)
        meets = None
        if b is not None and target is not None:
            meets = b <= target
            if res == "LUT":
                meets = meets and all(r.get("lane_within_budget") is not False for r in ours)
        out.append({"resource": res,
                    "ours_per_lane": None if b is None else round(b, 1),
                    "ours_max_per_lane": worst, "max_at_host_bw": worst_at,
                    "paper_per_lane": round(pb, 1),
                    "target_per_lane": target,
                    "meets_target": meets,
                    "ours_at_0": None if a is None else round(a, 1),
                    "ours_r2": None if r2 is None else round(r2, 4),
                    "paper_at_0": round(pa, 1), "paper_r2": round(pr2, 4),
                    "points": len(ours)})
    return out


def build_report(host_bws=DEFAULT_HOST_BWS, *, extra_codecs=(), num_intf=1, loopback=False,
                 jobs=1, scheduler=None, cache_dir=None, use_cache=True, whole=False,
                 timeout=None, progress=None):
    """Resources of the plugin at each host bandwidth (see the module docstring).

    Parameters
    ----------
    host_bws : iterable of int
        Gb/s, multiples of 100 from 100 to 6400.
    extra_codecs : iterable of str
        Codecs built into every lane besides the default one (names, ids or
        ``name:param``; the parameter is a run-time register and does not change the
        hardware).
    num_intf : int
        Host/wire interfaces of the plugin (1 or 2).
    loopback : bool
        Also the RX side of the generator lanes (RX lanes and checkers, as many as the
        wire needs); by default the build is TX only, as the paper's Table 6.
    jobs, scheduler, cache_dir, use_cache, timeout, progress :
        As :func:`synthesize_blocks`.
    whole : bool
        Also synthesise the whole core of each host bandwidth (slow).

    Returns
    -------
    dict
        ``{"schema", "method", "device", "yosys", "rows", "blocks", "growth", "whole",
        "totals", "paper_table6"}``; keys in ``docs/report.md``.

    Raises
    ------
    ValueError
        For a bad host bandwidth, codec or interface count (naming it).
    BlockSynthesisError
        When a synthesis fails.
    TaskFailed
        When a synthesis's task fails otherwise (its worker died each time it ran it).
    SchedulerUnreachable
        When ``scheduler`` does not answer.
    """
    from squeezenic_hw.build.params import PluginParams

    host_bws = list(dict.fromkeys(host_bws))
    if not host_bws:
        raise ValueError("host_bw: give at least one host bandwidth")
    extras = [codec_name(c) for c in extra_codecs]
    extra_specs = [str(c).strip() for c in extra_codecs]
    builds = []
    for bw in host_bws:
        choice = default_codec(bw)
        params = PluginParams(num_intf=num_intf, host_bw=bw,
                              codecs=ordered_codecs([choice.name, *extras]),
                              gen_codecs=[choice.spec, *extra_specs], loopback=loopback)
        builds.append((bw, choice, params, plugin_blocks(params)))
    wanted = [b for *_, pairs in builds for b, _ in pairs]
    if whole:
        wanted += [core_block(p) for _, _, p, _ in builds]
    start = time.monotonic()
    records = synthesize_blocks(wanted, jobs=jobs, scheduler=scheduler, cache_dir=cache_dir,
                                use_cache=use_cache, timeout=timeout, progress=progress)
    elapsed = time.monotonic() - start

    rows, block_rows, whole_rows = [], [], []
    for bw, choice, params, pairs in builds:
        tot = _sum_blocks(pairs, records)
        clbs = synth.estimated_clbs(tot["LUT"], tot["FF"])
        recs = [records[b] for b, _ in pairs]
        paper = PAPER_TABLE6.get(bw, {})
        row = {
            "host_bw": bw, "lanes": lanes_for(bw), "codec": choice.spec,
            "ratio": round(choice.ratio, 4),
            "wire_gbps_at_full_rate": round(choice.wire_gbps_at_full_rate, 2),
            "fits_wire": choice.fits_wire,
            "codecs": "+".join(ordered_codecs(codec_info(c).name for c in params.codecs)),
            "gen_codecs": "+".join(params.gen_codecs), "loopback": params.loopback,
            "rx_lanes": params.rx_lanes,
            **{k: tot[k] for k in ("LUT", "LUT_mem", "FF", "CARRY", "DSP", "BRAM", "URAM")},
            "CLB_est": clbs,
            **{f"{k}_pct": _pct(tot[k], DEVICE_TOTALS[k]) for k in _RESOURCES},
            "CLB_pct": _pct(clbs, DEVICE_TOTALS["CLB"]),
            **{f"paper_{k}_pct": paper.get(k) for k in ("LUT", "FF", "CLB")},
            **{f"{k}_per_lane": v for k, v in _per_lane(pairs, records, params, tot).items()},
            **_added_lane(pairs, records, params),
            "depth": max(r["depth"] for r in recs),
            "est_ns": max((r.get("est_ns") or 0.0 for r in recs), default=0.0),
            "blocks": len(recs),
            "synth_s": round(sum(r["synth_s"] for r in recs), 1),
            "peak_mib": max(r["peak_mib"] for r in recs),
            "cached": all(r["cached"] for r in recs),
        }
        rows.append(row)
        for block, count in pairs:
            rec = records[block]
            each = _each(rec)
            block_rows.append({
                "host_bw": bw, "block": block.label, "count": count,
                "LUT_each": each["LUT"], "FF_each": each["FF"],
                **{k: count * each[k] for k in ("LUT", "LUT_mem", "FF", "CARRY", "DSP",
                                                "BRAM", "URAM")},
                "LUT_share_pct": round(100.0 * count * each["LUT"] / tot["LUT"], 2)
                if tot["LUT"] else 0.0,
                "depth": rec["depth"],
                **{k: rec.get(k) for k in ("est_ns", "fmax_mhz_est", "lut_levels",
                                           "max_lut_levels", "over_budget", "worst_path")},
                # the three largest nets, "name:loads" (">64": with max_fanout)
                "largest_nets": ", ".join(rec.get("largest_nets", [])[:3]),
                "synth_s": rec["synth_s"], "peak_mib": rec["peak_mib"],
                "cached": rec["cached"], "log": rec["log"], "key": rec["key"],
                "spec": rec["spec"], "ff_wrapper": rec.get("ff_wrapper", 0),
            })
        if whole:
            rec = records[core_block(params)]
            each = _each(rec)
            whole_rows.append({
                "host_bw": bw, "codecs": row["codecs"],
                **{k: each[k] for k in ("LUT", "FF", "CARRY", "DSP", "BRAM", "URAM")},
                "depth": rec["depth"], "sum_LUT": tot["LUT"], "sum_FF": tot["FF"],
                "LUT_whole_over_sum": round(each["LUT"] / tot["LUT"], 4) if tot["LUT"] else None,
                "FF_whole_over_sum": round(each["FF"] / tot["FF"], 4) if tot["FF"] else None,
                "synth_s": rec["synth_s"], "peak_mib": rec["peak_mib"],
                "cached": rec["cached"], "log": rec["log"]})

    distinct = list(records.values())
    versions = sorted({r["yosys_version"] for r in distinct})
    return {
        "schema": 1,
        "method": METHOD,
        "device": {"part": U280_PART, **DEVICE_TOTALS},
        "yosys": versions[0] if len(versions) == 1 else versions,
        "rows": rows,
        "blocks": block_rows,
        "growth": _growth(rows),
        "loopback": loopback,
        "whole": whole_rows,
        "totals": {"distinct_blocks": len(distinct),
                   "cached_blocks": sum(r["cached"] for r in distinct),
                   "synth_s": round(sum(r["synth_s"] for r in distinct), 1),
                   "peak_mib": max(r["peak_mib"] for r in distinct),
                   "elapsed_s": round(elapsed, 1)},
        "paper_table6": {str(k): v for k, v in PAPER_TABLE6.items()},
    }


def notes(report):
    """Plain-text remarks for the table/markdown output."""
    out = ["Totals are a sum of out-of-context block syntheses (Yosys synth_xilinx -family "
           "xcup; no cross-block optimisation), SqueezeNIC core only. The paper's Table 6 "
           "(paper_*_pct) is the whole design INCLUDING the OpenNIC shell."]
    if report.get("loopback"):
        out.append("With --loopback: the RX side of the generator lanes (RX lanes and "
                   "checkers, rx_lanes of them) is included; the paper's Table 6 is TX only.")
    else:
        out.append("TX only, as the paper's Table 6: generators -> TX lanes -> arbiter -> "
                   "wire (--loopback adds the RX lanes and checkers).")
    for r in report["rows"]:
        if not r["fits_wire"]:
            out.append(f"{r['host_bw']} Gb/s needs a ratio of {r['host_bw'] / WIRE_GBPS:g}; "
                       f"the best codec, {r['codec']}, gives {r['ratio']:g}: the wire would "
                       f"carry {r['wire_gbps_at_full_rate']:g} Gb/s at full host rate.")
    late = sorted({(b["block"], b["est_ns"]) for b in report["blocks"]
                   if (b.get("est_ns") or 0) > BUDGET_NS})
    if late:
        out.append(f"Over the {BUDGET_NS} ns timing budget (docs/timing.md): "
                   + ", ".join(f"{name} {ns:g} ns" for name, ns in late) + ".")
    t = report["totals"]
    out.append(f"{t['distinct_blocks']} distinct blocks ({t['cached_blocks']} from the cache); "
               f"synthesis {t['synth_s']:g} s in all, peak {t['peak_mib']:g} MiB per Yosys "
               f"process; this run {t['elapsed_s']:g} s.")
    return out
