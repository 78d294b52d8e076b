"""The budget gate of ``squeezenic-hw report --check``: synthesise what a user builds and
fail on every figure over its budget.

What it synthesises (:func:`gate_blocks`): the blocks of the Table 6 sweep (the default
``report``), the host-facing TX and RX lanes of every default codec, and the whole plugin
as ``generate`` writes it (the default build; with ``builds="all"`` also ``--host-bw 200
--codecs sign``, ``--host-bw 6400`` and ``--host-bw 6400 --loopback``), and with ``abc9``
each whole plugin also with Yosys's default LUT mapping (ABC9) beside the project's, so
that no path passes only by how its LUTs were mapped.

What it checks (:func:`check_records`), each figure against its budget:

* every block and whole plugin: the longest path (``est_ns`` ≤
  :data:`~squeezenic_hw.flows.timing.BUDGET_NS`); with the project's mapping also the
  most LUTs on any path (≤ :data:`~squeezenic_hw.flows.timing.LUT_LEVELS_BUDGET`), no net
  over :data:`~squeezenic_hw.flows.timing.FANOUT_LIMIT` loads without a ``max_fanout``
  attribute, and no block RAM read feeding logic before a register;
* each row of the sweep: an added generator lane within its codec's budget
  (:data:`~.build.ADDED_LANE_BUDGET`), and the fitted growth per lane within the paper's
  (:data:`~.build.TARGET_PER_LANE`);
* the host TX and RX lanes of every default codec together within
  :data:`HOST_LANES_LUT_BUDGET`.

Each check is a row (:data:`CHECK_COLUMNS`): what was checked, its figure, its budget, the
margin (budget less figure: negative when over) and whether it holds.
"""

from dataclasses import dataclass

from squeezenic_hw.flows.timing import BUDGET_NS, LUT_LEVELS_BUDGET
from squeezenic_hw.spec.codecs import DEFAULT_CODECS, codec_info

from .blocks import Block, plugin_block, plugin_blocks
from .build import ADDED_LANE_BUDGET, TARGET_PER_LANE, build_report, synthesize_blocks
from .policy import DEFAULT_HOST_BWS, codec_name, ordered_codecs

__all__ = ["HOST_LANES_LUT_BUDGET", "CHECK_COLUMNS", "BUILDS", "GateBlock", "gate_blocks",
           "check_records", "run_gate"]

#: LUTs (with those used as memory) of the host-facing TX and RX lanes of every default
#: codec, together.
HOST_LANES_LUT_BUDGET = 40_000

#: Columns of a check row (the JSON keys of ``report --check --format json``'s ``checks``).
CHECK_COLUMNS = ["subject", "check", "figure", "budget", "margin", "ok", "detail"]

#: The whole-plugin builds of ``builds="all"``: ``generate`` options as PluginParams fields.
BUILDS = {
    "default": {},
    "200-sign": {"host_bw": 200, "codecs": ["sign"]},
    "6400": {"host_bw": 6400},
    "6400-loopback": {"host_bw": 6400, "loopback": True},
}


@dataclass(frozen=True)
class GateBlock:
    """A block the gate synthesises and which of its checks apply."""
    block: Block
    group: str            # "sweep", "host lanes", "plugin"
    full: bool = True     # every timing check (else the longest path only: ABC9 runs)


def _params(**fields):
    from squeezenic_hw.build.params import PluginParams
    return PluginParams(**fields)


def _sweep_params(host_bw):
    """The PluginParams of one row of the Table 6 sweep (as :func:`.build.build_report`)."""
    from .policy import default_codec
    choice = default_codec(host_bw)
    return _params(host_bw=host_bw, codecs=ordered_codecs([choice.name]),
                   gen_codecs=[choice.spec])


def gate_blocks(*, builds="default", abc9=False, host_bws=DEFAULT_HOST_BWS):
    """The blocks the gate synthesises (see the module docstring), sweep first."""
    out = []
    for bw in host_bws:
        out += [GateBlock(b, "sweep") for b, _ in plugin_blocks(_sweep_params(bw))]
    default = _params()
    out += [GateBlock(b, "host lanes") for b, _ in plugin_blocks(default)[:2]]
    names = ["default"] if builds == "default" else list(BUILDS)
    for name in names:
        params = _params(**BUILDS[name])
        out.append(GateBlock(plugin_block(params), "plugin"))
        if abc9:
            out.append(GateBlock(plugin_block(params, mapping="abc9"), "plugin", full=False))
    seen, unique = set(), []
    for g in out:
        if g.block not in seen:
            seen.add(g.block)
            unique.append(g)
    return unique


def _row(subject, check, figure, budget, *, over_when="above", detail=""):
    """A check row; ``over_when="above"``: the figure must not exceed the budget."""
    margin = budget - figure
    return {"subject": subject, "check": check,
            "figure": round(figure, 3) if isinstance(figure, float) else figure,
            "budget": budget, "margin": round(margin, 3) if isinstance(margin, float) else margin,
            "ok": margin >= -1e-9, "detail": detail}


def timing_rows(label, record, *, full=True):
    """The timing checks of one synthesised block (its cache record)."""
    rows = [_row(label, "est_ns", float(record.get("est_ns") or 0.0), BUDGET_NS,
                 detail=record.get("worst_path", ""))]
    if not full:
        return rows
    rows.append(_row(label, "lut_levels", int(record.get("max_lut_levels", 0)),
                     LUT_LEVELS_BUDGET, detail=record.get("deepest_path", "")))
    over = record.get("nets_over_fanout_limit", [])
    rows.append(_row(label, "nets_over_fanout_limit", len(over), 0,
                     detail=", ".join(over[:4]) or
                     f"largest: {', '.join(record.get('largest_nets', [])[:2])}"))
    brams = record.get("bram_reads_into_logic", [])
    rows.append(_row(label, "bram_reads_into_logic", len(brams), 0,
                     detail=", ".join(brams[:4])))
    return rows


def check_records(gated, records, report=None):
    """Every check row (:data:`CHECK_COLUMNS`) of the gate's blocks, from their records
    (``{Block: record}``) and the sweep's ``report`` (:func:`.build.build_report`)."""
    rows = []
    for g in gated:
        rows += timing_rows(g.block.label, records[g.block], full=g.full)
    host = [g.block for g in gated if g.group == "host lanes"]
    if host:
        lut = sum(records[b]["lut"] + records[b]["lut_mem"] for b in host)
        rows.append(_row(" + ".join(b.label for b in host), "LUT", lut,
                         HOST_LANES_LUT_BUDGET))
    for r in (report or {}).get("rows", []):
        if not r["lanes"] > 1:
            continue
        names = {codec_name(c) for c in r["gen_codecs"].split("+")}
        budget = ADDED_LANE_BUDGET.get(names.pop()) if len(names) == 1 else None
        for res, limit in (budget or {}).items():
            rows.append(_row(f"added lane at {r['host_bw']} Gb/s ({r['codec']})", res,
                             float(r[f"added_lane_{res}"]), limit))
    for g in (report or {}).get("growth", []):
        target = TARGET_PER_LANE.get(g["resource"])
        if target is not None and g["ours_per_lane"] is not None:
            rows.append(_row("growth per added lane (fit over the sweep)", g["resource"],
                             float(g["ours_per_lane"]), target))
    return rows


def run_gate(*, gated=None, builds="default", abc9=False, jobs=1, scheduler=None,
             cache_dir=None, timeout=None, progress=None):
    """Synthesise the gate's blocks (through the cache, ``jobs`` at a time or on the
    cluster of ``scheduler``: :func:`~.build.synthesize_blocks`) and check them.

    Returns ``{"checks": [row, ...], "failed": [row, ...], "blocks": n}``. ``gated``
    replaces the blocks of :func:`gate_blocks` (a test's design over budget)."""
    gated = gate_blocks(builds=builds, abc9=abc9) if gated is None else list(gated)
    records = synthesize_blocks([g.block for g in gated], jobs=jobs, scheduler=scheduler,
                                cache_dir=cache_dir, timeout=timeout, progress=progress)
    report = None
    if any(g.group == "sweep" for g in gated):
        # every block of the sweep is in the cache now: the sums take no synthesis
        report = build_report(DEFAULT_HOST_BWS, jobs=1, cache_dir=cache_dir)
    checks = check_records(gated, records, report)
    return {"checks": checks, "failed": [c for c in checks if not c["ok"]],
            "blocks": len(gated),
            "default_codecs": [codec_info(c).name for c in sorted(DEFAULT_CODECS)]}
