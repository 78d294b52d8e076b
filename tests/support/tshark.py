"""tshark with the SqueezeNIC dissector: each frame's SqueezeNIC fields, their raw bytes and
expert info as Python values. Tests that run it skip where tshark is not installed."""

import json
import os
import shutil
import subprocess

import pytest

from squeezenic_hw.dissector.lua_script import PROTO

__all__ = ["TSHARK", "needs_tshark", "dissect", "flatten"]

TSHARK = shutil.which("tshark")
#: Marks a test that runs tshark.
needs_tshark = pytest.mark.skipif(TSHARK is None,
                                  reason="tshark not installed (apt-get install tshark)")


def flatten(node, out=None):
    """A packet's JSON layer as ``{field: [values]}``, subtrees walked; a field's raw bytes
    (tshark's ``-x``) are under ``field + "_raw"`` as ``[hex, position, length, ...]``."""
    out = {} if out is None else out
    for key, value in node.items():
        if isinstance(value, dict):
            flatten(value, out)
        elif key.endswith("_raw"):
            raws = value if value and isinstance(value[0], list) else [value]
            out.setdefault(key, []).extend(raws)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                flatten(item, out)
        elif isinstance(value, list):
            out.setdefault(key, []).extend(value)
        else:
            out.setdefault(key, []).append(value)
    return out


def dissect(script, pcap, *options):
    """Every frame of ``pcap`` as tshark with ``script`` loaded dissects it: a list, in
    frame order, of ``None`` (no SqueezeNIC layer) or the layer's fields (:func:`flatten`,
    the layer's own raw bytes under ``PROTO + "_raw"``). ``options`` go to tshark as
    given (``-o squeezenic.port:4000``, ``-d udp.port==4000,squeezenic``)."""
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    cmd = [TSHARK, "-n", "-X", f"lua_script:{script}", "-r", str(pcap), "-T", "json", "-x",
           "--no-duplicate-keys", "-J", PROTO, *options]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    errors = [line for line in run.stderr.splitlines() if "Lua" in line or "rror" in line]
    assert run.returncode == 0 and not errors, f"tshark failed: {run.stderr}"
    frames = []
    for packet in json.loads(run.stdout or "[]"):
        layers = packet["_source"]["layers"]
        if PROTO not in layers:
            frames.append(None)
            continue
        fields = flatten(layers[PROTO])
        fields[PROTO + "_raw"] = [layers.get(PROTO + "_raw")]
        frames.append(fields)
    return frames
