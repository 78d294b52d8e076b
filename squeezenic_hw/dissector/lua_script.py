"""The Lua dissector's script: the ``SPEC`` table made from :mod:`squeezenic_hw.spec`, then
the dissector's code (``body.lua``), which reads every wire-format fact from that table.

The code names no field offset, codec, width, flag or bypass reason of its own, so the
script a user installs says what the Python spec says; ``tests/dissector`` runs it in
tshark against the reference's parse of every frame of a fuzz corpus.
"""

from importlib import resources

import numpy as np

from squeezenic_hw.spec.codecs import ALL_CODECS, DEFAULT_CODECS, codec_info, resolve_codecs
from squeezenic_hw.spec.counters import reduce_counter_name, rx_counter_names, tx_counter_names
from squeezenic_hw.spec.frames import (
    RX_REASONS,
    TRANSPORT_REASONS,
    TX_REASONS,
    BypassReason,
)
from squeezenic_hw.spec.header import (
    DEFAULT_PORT,
    ETHERTYPE_IPV4,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    FLAGS_RESERVED,
    HDR,
    HEADER_LEN,
    IPV4_FRAGMENT_MASK,
    IPV4_VIHL,
    PROTO_UDP,
    VERSION,
    check_port,
)
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    FRAME_REDUCE_REASONS,
    MAX_NODES,
    MIN_NODES,
    REDUCE_FLAGS_RESERVED,
    REDUCE_HDR,
    REDUCE_VERSION,
    ReduceReason,
    partial_width,
    reduce_family,
)
from squeezenic_hw.spec.threshold import BITMAP, INDEX_LIST

__all__ = ["PROTO", "INSTALL_DIR", "DEFAULT_ELEMENTS", "BYPASS_TEXT", "REDUCE_TEXT",
           "NODE_REDUCE_REASONS",
           "spec_table", "lua_literal", "lua_script"]

#: The protocol's name: its filter name and every field's prefix (``squeezenic.codec``).
PROTO = "squeezenic"
#: Where Wireshark and tshark load a user's Lua plugins from.
INSTALL_DIR = "~/.local/lib/wireshark/plugins/"
#: Elements of a frame the dissector decodes unless its preference says otherwise.
DEFAULT_ELEMENTS = 8

#: What each bypass reason means, as the expert info says it.
BYPASS_TEXT = {
    BypassReason.SHORT_FRAME: "fewer than 64 bytes, no complete header",
    BypassReason.NOT_IPV4: "EtherType is not IPv4 (0x0800) at byte 12",
    BypassReason.IP_OPTIONS: "IP version is not 4 or the header has options (byte 14 is "
                             "not 0x45)",
    BypassReason.FRAGMENTED: "an IPv4 fragment (MF set or a fragment offset)",
    BypassReason.NOT_UDP: "IP protocol is not UDP",
    BypassReason.OTHER_PORT: "UDP destination port is not the SqueezeNIC port",
    BypassReason.IP_CHECKSUM: "IPv4 header checksum is wrong",
    BypassReason.IP_LENGTH: "IPv4 total length is not the frame length - 14",
    BypassReason.UDP_LENGTH: "UDP length is not the frame length - 34",
    BypassReason.VERSION: "version is not 1",
    BypassReason.RESERVED_FLAGS: "reserved flag bits 3-7 are set",
    BypassReason.ALREADY_ENCODED: "the TX lane's input is already encoded",
    BypassReason.NOT_ENCODED: "the RX lane's input is not encoded",
    BypassReason.CODEC: "the codec is not built into the lane (preference codecs)",
    BypassReason.PARAM: "the parameter is not valid for the codec",
    BypassReason.ZERO_N: "n is 0",
    BypassReason.LENGTH: "the frame length disagrees with n and the codec (host frame: "
                         "64 + 4n; wire frame: 64 + the packed payload)",
}

#: What each reason a node bypasses a reduce frame for means (wire format section 8.4).
REDUCE_TEXT = {
    ReduceReason.DISABLED: "the node's reduce is disabled: every reduce frame is bypassed",
    ReduceReason.LENGTH: "the frame length is not 64 + ceil(n*width/8), or n is 0",
    ReduceReason.FLAGS: "reserved flags or flush set, or encoded clear",
    ReduceReason.SETTINGS: "codec, param, stochastic, scale or aux is not the ring's (or "
                           "no ring's: a codec that cannot be reduced, a parameter not valid "
                           "for it, stochastic for a codec that rounds to nearest)",
    ReduceReason.NODES: f"nodes is not the ring's N (or not {MIN_NODES} to {MAX_NODES})",
    ReduceReason.WIDTH: "width is not the partial sums' width for the codec, parameter "
                        "and nodes",
    ReduceReason.PHASE: "origin is not below N, or contributions k and origin do not fit "
                        "the phase at this node (gather: k = N, not the node after the "
                        "finishing one; reduce: 1 <= k <= N - 1, origin + k = rank mod N)",
    ReduceReason.OFFSET: "the sums are not inside chunk origin, or start past the offset "
                         "the node expects next (a frame lost or reordered)",
    ReduceReason.DUPLICATE: "the sums start below the offset the node expects next: "
                            "taken already",
}

#: The RX lane's counters of inconsistent threshold payloads and what they count.
_SPARSE_TEXT = {
    "sparse_count_errors": "the set bits or used index entries are not the kept values' "
                           "count",
    "sparse_layout_errors": "bitmap padding bits set, or an index entry not used (not "
                            "below n, or not above every earlier used one)",
}

#: The reasons an enabled node bypasses a reduce frame for, in check order: every one
#: but ``disabled``, the node's state, not the frame's.
NODE_REDUCE_REASONS = tuple(r for r in ReduceReason
                            if r not in (ReduceReason.NONE, ReduceReason.DISABLED))
#: Every reason a node bypasses a reduce frame for: a disabled node's, then the checks.
_REDUCE_BYPASS_REASONS = (ReduceReason.DISABLED, *NODE_REDUCE_REASONS)

#: The reasons of a frame that is no SqueezeNIC frame to the NIC at all: a note, where the
#: others are warnings of a malformed frame.
_NOT_SQUEEZENIC = (BypassReason.NOT_IPV4, BypassReason.IP_OPTIONS, BypassReason.FRAGMENTED,
                   BypassReason.NOT_UDP, BypassReason.OTHER_PORT)

_COUNTER_PREFIX = "bypass_"


def _counter_prefix():
    """The prefix of a bypass reason's counter (``bypass_length``), checked against the
    counter names of both lanes."""
    names = set(tx_counter_names()) | set(rx_counter_names())
    missing = [r.value for r in BypassReason if _COUNTER_PREFIX + r.value not in names]
    if missing:
        raise ValueError(f"no counter {_COUNTER_PREFIX}<reason> for {', '.join(missing)}")
    return _COUNTER_PREFIX


def _sparse_counters():
    counters = [c for c in rx_counter_names() if c.startswith("sparse_")]
    if sorted(counters) != sorted(_SPARSE_TEXT):
        raise ValueError(f"sparse counters {counters} are not those described")
    return {"count": "sparse_count_errors", "layout": "sparse_layout_errors"}


def _fields():
    """Every header field of :class:`~squeezenic_hw.spec.header.HDR` as ``{name: {offset,
    length}}``; those a reduce frame has in bytes 56-59
    (:class:`~squeezenic_hw.spec.reduce.REDUCE_HDR`); and the latter's names in order."""
    def places(spec):
        named = [(place, name) for name, place in vars(spec).items() if name.isupper()]
        return {name.lower(): {"offset": place[0], "length": place[1]}
                for place, name in sorted(named)}
    reduce_fields = places(REDUCE_HDR)
    return places(HDR), reduce_fields, list(reduce_fields)


def _codecs():
    out = []
    for info in ALL_CODECS.values():
        params = range(info.param_range[0], info.param_range[1] + 1) if info.param_range \
            else [0]
        entry = {"id": info.id, "name": info.name, "variable": info.variable,
                 "stochastic": info.stochastic}
        if info.param_range:
            entry["param_range"] = list(info.param_range)
        if not info.variable:
            entry["bits"] = {p: info.bits_per_element(p) for p in params}
        out.append(entry)
    return out


def _reduce_widths():
    """``{codec id: {param: {nodes: width}}}`` of every reducible codec."""
    widths = {}
    for info in ALL_CODECS.values():
        try:
            reduce_family(info)
        except ValueError:
            continue
        params = range(info.param_range[0], info.param_range[1] + 1) if info.param_range \
            else [0]
        widths[info.id] = {p: {n: partial_width(info, p, n)
                               for n in range(MIN_NODES, MAX_NODES + 1)} for p in params}
    return widths


def spec_table(*, port=DEFAULT_PORT, codecs=None):
    """The ``SPEC`` table of the script, as Python values.

    Parameters
    ----------
    port : int
        The default of the port preference.
    codecs : iterable of str or int, optional
        The default of the built-in codecs preference (default: the hardware's default,
        :data:`~squeezenic_hw.spec.codecs.DEFAULT_CODECS`).

    Returns
    -------
    dict
    """
    check_port(port)
    built = DEFAULT_CODECS if codecs is None else resolve_codecs(codecs)
    fields, reduce_fields, reduce_order = _fields()
    for reasons, texts in ((BypassReason, BYPASS_TEXT), (_REDUCE_BYPASS_REASONS, REDUCE_TEXT)):
        missing = [r.name for r in reasons if r not in texts]
        if missing:
            raise ValueError(f"no text for the reasons {', '.join(missing)}")
    transport = len(TRANSPORT_REASONS)
    return {
        "proto": PROTO,
        "default_port": port,
        "default_codecs": [codec_info(c).name for c in sorted(built)],
        "default_elements": DEFAULT_ELEMENTS,
        "header_len": HEADER_LEN,
        "version": VERSION,
        "reduce_version": REDUCE_VERSION,
        "ethertype_ipv4": ETHERTYPE_IPV4,
        "ipv4_vihl": IPV4_VIHL,
        "fragment_mask": IPV4_FRAGMENT_MASK,
        "proto_udp": PROTO_UDP,
        "f32_bytes": np.dtype(np.float32).itemsize,
        "index_bytes": np.dtype(np.uint16).itemsize,
        "fields": fields,
        "reduce_fields": reduce_fields,
        "reduce_field_order": reduce_order,
        "flags": {"encoded": FLAG_ENCODED, "stochastic": FLAG_STOCHASTIC, "flush": FLAG_FLUSH,
                  "reserved": FLAGS_RESERVED, "gather": FLAG_GATHER,
                  "reduce_reserved": REDUCE_FLAGS_RESERVED},
        "codecs": _codecs(),
        "threshold": {"bitmap": BITMAP, "index_list": INDEX_LIST},
        "threshold_layout_names": {BITMAP: "bitmap", INDEX_LIST: "index list"},
        "reasons": {"transport": [r.value for r in TRANSPORT_REASONS],
                    "tx": [r.value for r in TX_REASONS[transport:]],
                    "rx": [r.value for r in RX_REASONS[transport:]]},
        "reason_text": {r.value: text for r, text in BYPASS_TEXT.items()},
        "not_squeezenic": {r.value: True for r in _NOT_SQUEEZENIC},
        "counter_prefix": _counter_prefix(),
        "reduce_reasons": [r.name.lower() for r in FRAME_REDUCE_REASONS],
        "node_reduce_reasons": [r.name.lower() for r in NODE_REDUCE_REASONS],
        "reduce_disabled": ReduceReason.DISABLED.name.lower(),
        "reduce_bypass_reasons": [r.name.lower() for r in _REDUCE_BYPASS_REASONS],
        "reduce_counters": {"taken": reduce_counter_name(ReduceReason.NONE),
                            **{r.name.lower(): reduce_counter_name(r)
                               for r in _REDUCE_BYPASS_REASONS}},
        "reduce_reason_text": {r.name.lower(): REDUCE_TEXT[r] for r in _REDUCE_BYPASS_REASONS},
        "reduce_width": _reduce_widths(),
        "nodes": [MIN_NODES, MAX_NODES],
        "sparse_counters": _sparse_counters(),
        "sparse_error_text": dict(_SPARSE_TEXT),
    }


_WIDTH = 96


def _lua_key(key):
    if isinstance(key, str) and key.isidentifier():
        return key
    return f"[{lua_literal(key)}]"


def lua_literal(value, indent=""):
    """``value`` (a dict, list, str, int, bool) as a Lua expression; dicts keep their
    order, lists are Lua sequences (indexed from 1)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    inner = indent + "    "
    if isinstance(value, dict):
        items = [f"{_lua_key(k)} = {lua_literal(v, inner)}" for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [lua_literal(v, inner) for v in value]
    else:
        raise TypeError(f"no Lua literal for {type(value).__name__}")
    flat = "{" + ", ".join(items) + "}"
    if len(flat) + len(indent) <= _WIDTH:
        return flat
    lines = []
    for item in items:            # short items share lines, long ones have their own
        if lines and "\n" not in item and "\n" not in lines[-1] and (
                len(inner) + len(lines[-1]) + len(item) + 3 <= _WIDTH):
            lines[-1] += f", {item}"
        else:
            lines.append(item)
    return "{\n" + "".join(f"{inner}{line},\n" for line in lines) + indent + "}"


_HEAD = """\
-- SqueezeNIC frames in Wireshark and tshark (docs/wireshark.md in squeezenic-hw): every
-- header field of the wire format by name, the payload's layout, its first elements
-- decoded, and why the NIC would bypass a frame (expert info named as its counters).
--
-- Written by `squeezenic-hw dissector`. Install: copy it into {install}
-- (Wireshark and tshark load it at start), or for one run:
--   tshark -X lua_script:squeezenic.lua -r FRAMES.pcap
-- Another port: -o {proto}.port:N, or Decode As: -d udp.port==N,{proto}.
"""


def lua_script(*, port=DEFAULT_PORT, codecs=None):
    """The dissector's whole Lua script.

    Parameters
    ----------
    port : int
        The default of its port preference (the SqueezeNIC UDP port).
    codecs : iterable of str or int, optional
        The default of its built-in codecs preference (default: codecs 0-6).

    Returns
    -------
    str
    """
    table = spec_table(port=port, codecs=codecs)
    body = resources.files(__package__).joinpath("body.lua").read_text(encoding="utf-8")
    return (_HEAD.format(install=INSTALL_DIR, proto=PROTO)
            + "\n-- The facts of squeezenic_hw/spec the code below reads.\n"
            + f"local SPEC = {lua_literal(table)}\n\n" + body)
