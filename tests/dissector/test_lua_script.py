"""The Lua dissector (``squeezenic_hw/dissector/lua_script.py``) in the real tshark: every
field of every frame against the reference's parse of the header, the payload's layout and
first elements against the reference lanes, and the bypass reason, expert info included,
against the reference's classification, on pcaps of ``reference``, ``simulate`` and a fuzz
corpus of every codec and every bypass reason."""

import math
import subprocess

import numpy as np
import pytest

from squeezenic_hw.cli import main
from squeezenic_hw.dissector.lua_script import (
    BYPASS_TEXT,
    DEFAULT_ELEMENTS,
    NODE_REDUCE_REASONS,
    PROTO,
    lua_script,
    spec_table,
)
from squeezenic_hw.pcap import read_frames, write_frames
from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.reference.threshold import decode_payload
from squeezenic_hw.spec.codecs import (
    ALL_CODECS,
    DEFAULT_CODECS,
    KNOWN_CODECS,
    codec_info,
    payload_bytes,
    validate_param,
)
from squeezenic_hw.spec.frames import (
    TRANSPORT_REASONS,
    BypassReason,
    classify_host_frame,
    classify_wire_frame,
    parse,
)
from squeezenic_hw.spec.header import (
    DEFAULT_PORT,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    FLAGS_RESERVED,
    HDR,
    HEADER_LEN,
)
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    FLOAT_CODECS,
    FRAME_REDUCE_REASONS,
    INTEGER_CODECS,
    REDUCE_FLAGS_RESERVED,
    REDUCE_HDR,
    REDUCE_VERSION,
    ReduceFields,
    ReduceReason,
    classify_reduce_frame,
    reduce_frame_length,
)
from squeezenic_hw.spec.threshold import BITMAP, layout_bytes, values_count

from support.nic_corpus import ALL_CODEC_IDS, corpus, ring_streams
from support.tshark import TSHARK, dissect, needs_tshark

pytestmark = needs_tshark

#: The dissected buffer starts at the SqueezeNIC fields (the UDP payload).
START = HDR.VERSION[0]
#: tshark's options that build every codec in and judge every frame of a capture.
ALL_BUILT = ("-o", f"{PROTO}.codecs:{','.join(str(c) for c in ALL_CODEC_IDS)}",
             "-o", f"{PROTO}.judge_all:TRUE")
_LAYOUT_NAMES = spec_table()["threshold_layout_names"]


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("dissector") / "squeezenic.lua"
    path.write_text(lua_script())
    return path


# ---- what the reference says of a frame ------------------------------------------------

def expected_verdict(frame, *, port=DEFAULT_PORT, codecs=DEFAULT_CODECS, lane="auto"):
    """``(lane, reason)``: whose rules judge ``frame`` (``None`` when it fails a transport
    check) and the first check it fails, by the reference's classifiers; ``lane`` is the
    dissector's preference."""
    h = parse(frame)
    if h is not None and h.version == REDUCE_VERSION and lane != "tx":
        _, reason = classify_reduce_frame(frame, port=port)
        return (None if reason in TRANSPORT_REASONS else "reduce"), reason
    if lane == "auto":
        lane = "rx" if h is not None and h.flags & FLAG_ENCODED else "tx"
    classify = classify_host_frame if lane == "tx" else classify_wire_frame
    _, reason = classify(frame, port=port, codecs_built_in=codecs)
    return (None if reason in TRANSPORT_REASONS else lane), reason


def _float_text(value):
    """How tshark shows a float field's value (``%.6g``; a NaN's sign aside)."""
    v = float(np.float32(value))
    return "nan" if math.isnan(v) else f"{v:.6g}"


def _same_float(text, value):
    want = _float_text(value)
    return text.lstrip("-") == want if want == "nan" else text == want


def _header_fields(h, reduce):
    """``{field: ((header offset, length), value shown)}`` of the dissector's header
    fields (a float's value as a number)."""
    f = ReduceFields.of(h)
    flags = h.flags
    fields = {
        "version": (HDR.VERSION, str(h.version)),
        "codec": (HDR.CODEC, str(h.codec)),
        "param": (HDR.PARAM, str(h.param)),
        "flags": (HDR.FLAGS, f"0x{flags:02x}"),
        "flags.encoded": (HDR.FLAGS, str(int(bool(flags & FLAG_ENCODED)))),
        "flags.stochastic": (HDR.FLAGS, str(int(bool(flags & FLAG_STOCHASTIC)))),
        "n": (HDR.N, str(h.n)),
        "scale": (HDR.SCALE, h.scale),
        "aux": (HDR.AUX, h.aux),
        "offset": (HDR.OFFSET, str(h.offset)),
    }
    if reduce:
        fields["flags.gather"] = (HDR.FLAGS, str(int(bool(flags & FLAG_GATHER))))
        fields["flags.reduce_reserved"] = (HDR.FLAGS, _masked(flags, REDUCE_FLAGS_RESERVED))
        for name in ("contributions", "width", "nodes", "origin"):
            fields[name] = (getattr(REDUCE_HDR, name.upper()), str(getattr(f, name)))
    else:
        fields["flags.flush"] = (HDR.FLAGS, str(int(bool(flags & FLAG_FLUSH))))
        fields["flags.reserved"] = (HDR.FLAGS, _masked(flags, FLAGS_RESERVED))
        fields["seed"] = (HDR.SEED, str(h.seed))
    return fields


def _masked(value, mask):
    """A bit field as tshark shows it: the masked bits shifted down, in hex."""
    shift = (mask & -mask).bit_length() - 1
    return f"0x{(value & mask) >> shift:02x}"


def _decoded(frame, lane, port, codecs, count):
    """The first ``count`` elements of a frame the lane takes: a host frame's values, or
    what the reference RX lane decodes of a wire frame."""
    if lane == "tx":
        values = np.frombuffer(frame, "<f4", offset=HEADER_LEN)
    else:
        out, _ = lane_reference.rx([frame], port=port, codecs=codecs)
        values = np.concatenate([np.frombuffer(f, "<f4", offset=HEADER_LEN) for f in out])
    return values[:count]


# ---- the comparison --------------------------------------------------------------------

def differences(frame, fields, verdict, *, port=DEFAULT_PORT, codecs=DEFAULT_CODECS,
                elements=DEFAULT_ELEMENTS):
    """Where tshark's dissection ``fields`` of ``frame`` differs from the reference, whose
    ``verdict`` is ``(lane, reason)`` (:func:`expected_verdict`): a list of strings, empty
    when every field agrees."""
    diffs = []

    def want(key, value):
        got = fields.get(f"{PROTO}.{key}")
        if got != value:
            diffs.append(f"{key}: tshark {got}, reference {value}")

    if fields is None:
        return ["no SqueezeNIC layer"]
    judged_by, reason = verdict
    want("lane", None if judged_by is None else [judged_by])
    experts = {k for k in fields if k.startswith(f"{PROTO}.") and fields[k] == [""]}
    if isinstance(reason, BypassReason):
        want("bypass", [reason.value])
        want("reduce_bypass", None)
        expert = {f"{PROTO}.bypass.{reason.value}"}
        if not any(m.startswith(f"bypass_{reason.value}: ")
                   for m in fields.get("_ws.expert.message", [])):
            diffs.append(f"no expert message naming bypass_{reason.value}")
    elif isinstance(reason, ReduceReason):
        want("bypass", None)
        want("reduce_bypass", [reason.name.lower()])
        expert = {f"{PROTO}.reduce_bypass.{reason.name.lower()}"}
    else:
        want("bypass", None)
        want("reduce_bypass", None)
        expert = set()
    if f"{PROTO}.version" not in fields:
        # only a frame the NIC would not read as SqueezeNIC may miss Wireshark's UDP port
        if reason not in TRANSPORT_REASONS:
            diffs.append("a SqueezeNIC frame not dissected")
        if experts != expert:
            diffs.append(f"expert info {sorted(experts)}, reference {sorted(expert)}")
        return diffs

    # the header as the dissected buffer has it (behind a VLAN tag or IPv6 too)
    at, seen = fields[f"{PROTO}_raw"][0][1], fields[f"{PROTO}_raw"][0][2]
    base = frame[at - START:]
    h = parse(base.ljust(HEADER_LEN, b"\0"))
    for key, ((offset, length), value) in _header_fields(h, h.version == REDUCE_VERSION).items():
        present = offset - START + length <= seen
        got = fields.get(f"{PROTO}.{key}")
        if not present:
            if got is not None:
                diffs.append(f"{key} shown beyond the buffer")
            continue
        if got is None or len(got) != 1:
            diffs.append(f"{key}: tshark {got}, reference {value}")
            continue
        if isinstance(value, str) and got[0] != value or not isinstance(value, str) and (
                not _same_float(got[0], value)):
            diffs.append(f"{key}: tshark {got[0]}, reference {value}")
        raw = fields[f"{PROTO}.{key}_raw"][0]
        if raw[1] != at + offset - START or raw[2] != length:
            diffs.append(f"{key} at {raw[1]}+{raw[2]}, reference {at + offset - START}")
        elif not raw[3] and raw[0] != base[offset:offset + length].hex():
            diffs.append(f"{key} bytes {raw[0]}, reference {base[offset:offset + length].hex()}")
    if HDR.CODEC[0] - START < seen:
        want("codec_name", [codec_info(h.codec).name if h.codec in KNOWN_CODECS
                            else "unknown"])

    if reason not in TRANSPORT_REASONS:
        diffs += _payload_differences(frame, fields, judged_by, reason, port, codecs,
                                      elements)
    experts.discard(f"{PROTO}.sparse_count_errors")
    experts.discard(f"{PROTO}.sparse_layout_errors")
    if experts != expert:
        diffs.append(f"expert info {sorted(experts)}, reference {sorted(expert)}")
    return diffs


def _payload_differences(frame, fields, lane, reason, port, codecs, elements):
    diffs = []

    def want(key, value):
        got = fields.get(f"{PROTO}.{key}")
        if got != value:
            diffs.append(f"{key}: tshark {got}, reference {value}")

    h = parse(frame)
    payload = frame[HEADER_LEN:]
    want("payload_length", [str(len(payload))])
    info = codec_info(h.codec) if h.codec in KNOWN_CODECS else None
    dense = info is not None and not info.variable
    if lane == "tx":
        bits, length = 32, HEADER_LEN + 4 * h.n
    elif lane == "reduce":
        f = ReduceFields.of(h)
        bits, length = f.width, reduce_frame_length(f.width, h.n)
    elif dense and not _param_error(info, h.param):
        bits = info.bits_per_element(h.param)
        length = HEADER_LEN + payload_bytes(info, h.param, h.n)
    else:
        bits = length = None
    want("bits", None if bits is None else [str(bits)])
    want("expected_length", None if length is None else [str(length)])

    takes = reason is None and lane in ("tx", "rx")
    sparse = lane == "rx" and info is not None and info.variable
    want("layout", [_LAYOUT_NAMES.get(h.param, "?")] if sparse else None)
    shown = np.array([], np.float32)
    if takes:
        shown = _decoded(frame, lane, port, codecs, min(h.n, elements))
    got = fields.get(f"{PROTO}.element", [])
    if len(got) != shown.size or not all(_same_float(t, v) for t, v in zip(got, shown,
                                                                            strict=False)):
        diffs.append(f"elements: tshark {got}, reference {[_float_text(v) for v in shown]}")
    if sparse and takes:
        k = values_count(h.n, h.param, len(payload))
        want("kept", [str(k)])
        head = layout_bytes(h.n, k, h.param)
        count = min(k, elements)
        values = np.frombuffer(payload, "<f4", count=k, offset=head)[:count]
        got = fields.get(f"{PROTO}.value", [])
        if len(got) != values.size or not all(_same_float(t, v) for t, v in zip(
                got, values, strict=False)):
            diffs.append(f"kept values: tshark {got}, reference {values}")
        if h.param == BITMAP:
            if fields.get(f"{PROTO}.bitmap_raw", [[None]])[0][0] != payload[:head].hex():
                diffs.append("bitmap bytes differ")
            want("index", None)
        else:
            indices = np.frombuffer(payload, "<u2", count=k)[:count]
            want("index", [str(i) for i in indices] or None)
        decoded = decode_payload(payload, h.n, h.param)
        for counter, error in (("sparse_count_errors", decoded.count_error),
                               ("sparse_layout_errors", decoded.layout_error)):
            if (f"{PROTO}.{counter}" in fields) != error:
                diffs.append(f"{counter}: reference {error}")
    else:
        want("kept", None)
    return diffs


def _param_error(info, param):
    try:
        validate_param(info, param)
    except ValueError:
        return True
    return False


def check_pcap(script, frames, tmp_path, *options, port=DEFAULT_PORT,
               codecs=DEFAULT_CODECS, lane="auto", elements=DEFAULT_ELEMENTS, judge=None):
    """Write ``frames`` to a pcap, dissect it and compare every frame with the reference's
    verdict on it, ``judge(frame)`` (by default :func:`expected_verdict` with ``port``,
    ``codecs`` and ``lane``), called on the frames in order; returns ``(fields of each
    frame, the verdict on each)``."""
    if judge is None:
        def judge(frame):
            return expected_verdict(frame, port=port, codecs=codecs, lane=lane)
    pcap = tmp_path / "frames.pcap"
    write_frames(pcap, frames)
    dissected = dissect(script, pcap, *options)
    assert len(dissected) == len(frames)
    verdicts = [judge(frame) for frame in frames]
    bad = []
    for k, (frame, fields, verdict) in enumerate(zip(frames, dissected, verdicts,
                                                     strict=True)):
        diffs = differences(frame, fields, verdict, port=port, codecs=codecs,
                            elements=elements)
        if diffs:
            bad.append(f"frame {k + 1} {verdict}: " + "; ".join(diffs))
    assert not bad, f"{len(bad)} of {len(frames)} frames differ:\n" + "\n".join(bad[:20])
    return dissected, verdicts


# ---- the tests -------------------------------------------------------------------------

def _installed(tmp_path, text):
    """A home directory with ``text`` installed as the dissector, where ``--help`` says."""
    plugins = tmp_path / "home" / ".local" / "lib" / "wireshark" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "squeezenic.lua").write_text(text)
    return tmp_path / "home"


def _glossary(home, report):
    run = subprocess.run([TSHARK, "-G", report], capture_output=True, text=True,
                         env={"HOME": str(home), "LC_ALL": "C.UTF-8"}, check=True)
    return [line.split("\t") for line in run.stdout.splitlines() if PROTO in line]


def _preferences(home):
    prefs = {}
    for row in _glossary(home, "defaultprefs"):
        key, _, value = row[0].lstrip("#").partition(": ")
        prefs[key] = value
    return prefs


def test_installed_plugin_registers_the_specs_facts(tmp_path):
    """Installed where ``--help`` says, the script registers the spec's codec names, flag
    bits, an expert info per bypass reason named as its counter, and the preferences'
    defaults: what the loaded plugin says cannot drift from the spec."""
    home = _installed(tmp_path / "default", lua_script())
    fields = {row[2]: row for row in _glossary(home, "fields") if row[0] == "F"}
    names = {int(row[2]): row[3] for row in _glossary(home, "values")
             if row[1] == f"{PROTO}.codec"}
    assert names == {c.id: c.name for c in ALL_CODECS.values()}
    masks = {"encoded": FLAG_ENCODED, "stochastic": FLAG_STOCHASTIC, "flush": FLAG_FLUSH,
             "gather": FLAG_GATHER, "reserved": FLAGS_RESERVED,
             "reduce_reserved": REDUCE_FLAGS_RESERVED}
    for name, mask in masks.items():
        assert int(fields[f"{PROTO}.flags.{name}"][6], 16) == mask
    for reason in BypassReason:
        label = fields[f"{PROTO}.bypass.{reason.value}"][1]
        assert label == f"bypass_{reason.value}: {BYPASS_TEXT[reason]}"
    for reason in FRAME_REDUCE_REASONS:
        assert f"{PROTO}.reduce_bypass.{reason.name.lower()}" in fields
    prefs = _preferences(home)
    assert prefs[f"{PROTO}.port"] == str(DEFAULT_PORT)
    assert prefs[f"{PROTO}.codecs"] == ",".join(codec_info(c).name
                                                for c in sorted(DEFAULT_CODECS))
    prefs = _preferences(_installed(tmp_path / "other", lua_script(port=4000,
                                                                   codecs=[7, "raw"])))
    assert (prefs[f"{PROTO}.port"], prefs[f"{PROTO}.codecs"]) == ("4000", "raw,threshold")


def _cli(capsys, *argv):
    assert main(list(map(str, argv))) == 0, capsys.readouterr().err
    capsys.readouterr()


def _tensor_pcaps(tmp_path, capsys, codec, *extra, codecs="0,1,2,3,4,5,6,7", size=900):
    """``frames`` of a random tensor, then ``reference tx`` and ``rx``: the three pcaps'
    frames (host, wire, host)."""
    g = np.random.default_rng(len(codec)).standard_normal(size).astype(np.float32)
    np.save(tmp_path / "g.npy", g)
    _cli(capsys, "frames", tmp_path / "g.npy", "--codec", codec, *extra,
         "-o", tmp_path / "host.pcap")
    _cli(capsys, "reference", "tx", tmp_path / "host.pcap", "-o", tmp_path / "wire.pcap",
         "--codecs", codecs)
    _cli(capsys, "reference", "rx", tmp_path / "wire.pcap", "-o", tmp_path / "back.pcap",
         "--codecs", codecs)
    return [read_frames(tmp_path / f"{name}.pcap")[0] for name in ("host", "wire", "back")]


#: Codecs and presets with their options, as ``frames`` takes them.
REFERENCE_CASES = [
    ("raw",), ("fp16",), ("bf16",), ("fixed", "--param", "5"),
    ("qsgd", "--param", "3", "--stochastic"), ("terngrad", "--seed", "7"), ("signsgd",),
    ("onebit",), ("natural", "--stochastic"), ("int8",),
    ("threshold", "--keep-fraction", "0.2"), ("threshold", "--keep-fraction", "0.01")]


def test_reference_pcaps(script, tmp_path, capsys):
    """Every field of every frame ``reference tx`` and ``rx`` write, of every codec and
    preset: the header, the payload's layout and its first 24 elements decoded; the TX lane
    takes each host frame and the RX lane each wire frame."""
    frames, lanes = [], []
    for k, (codec, *extra) in enumerate(REFERENCE_CASES):
        (tmp_path / str(k)).mkdir()
        host, wire, back = _tensor_pcaps(tmp_path / str(k), capsys, codec, *extra)
        frames += host + wire + back
        lanes += [("tx", None)] * len(host) + [("rx", None)] * len(wire) + [None] * len(back)
    _, verdicts = check_pcap(script, frames, tmp_path, *ALL_BUILT,
                             "-o", f"{PROTO}.elements:24", codecs=set(ALL_CODEC_IDS),
                             elements=24)
    assert all(want is None or got == want for got, want in zip(verdicts, lanes, strict=True))


def test_default_build_bypasses_threshold(script, tmp_path, capsys):
    """With the preferences' default codecs (the hardware's default build, 0-6), a
    threshold frame is bypassed as the reference lanes built so bypass it."""
    host, wire, _ = _tensor_pcaps(tmp_path, capsys, "threshold", "--keep-fraction", "0.1")
    _, verdicts = check_pcap(script, host + wire, tmp_path)
    assert {v for v in verdicts} == {("tx", BypassReason.CODEC), ("rx", BypassReason.CODEC)}


def test_simulate_pcaps(script, tmp_path, capsys):
    """The frames the simulated hardware lanes write (``simulate tx`` and ``rx``)."""
    g = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    np.save(tmp_path / "g.npy", g)
    _cli(capsys, "frames", tmp_path / "g.npy", "--codec", "signsgd", "-o",
         tmp_path / "host.pcap")
    for lane, src, dst in [("tx", "host", "wire"), ("rx", "wire", "back")]:
        _cli(capsys, "simulate", lane, tmp_path / f"{src}.pcap", "-o", tmp_path / f"{dst}.pcap",
             "--codecs", "sign", "--backend", "amaranth")
    frames = [f for name in ("wire", "back") for f in read_frames(tmp_path / f"{name}.pcap")[0]]
    _, verdicts = check_pcap(script, frames, tmp_path)
    assert {lane for lane, _ in verdicts} == {"tx", "rx"}
    assert {reason for _, reason in verdicts} == {None}


def test_other_port_by_decode_as_or_preference(script, tmp_path, capsys):
    """Frames to port 4000: bypassed (``other_port``) by a NIC on the default port, taken
    when Decode As or the port preference says 4000."""
    host, wire, back = _tensor_pcaps(tmp_path, capsys, "fixed", "--param", "6", "--port",
                                     "4000", codecs="3")
    _cli(capsys, "reference", "tx", tmp_path / "host.pcap", "-o", tmp_path / "wire.pcap",
         "--codecs", "fixed", "--port", "4000")
    frames = host + read_frames(tmp_path / "wire.pcap")[0]
    _, verdicts = check_pcap(script, frames, tmp_path)
    assert {reason for _, reason in verdicts} == {BypassReason.OTHER_PORT}
    for option in (("-d", f"udp.port==4000,{PROTO}"), ("-o", f"{PROTO}.port:4000")):
        _, verdicts = check_pcap(script, frames, tmp_path, *option, port=4000)
        assert {reason for _, reason in verdicts} == {None}
    # with the preference on 4000, frames to the default port go to no SqueezeNIC port
    dissected = dissect(script, tmp_path / "frames.pcap", "-o", f"{PROTO}.port:4000")
    assert all(f is not None for f in dissected)
    write_frames(tmp_path / "default.pcap", _tensor_pcaps(tmp_path, capsys, "raw")[0])
    assert dissect(script, tmp_path / "default.pcap", "-o", f"{PROTO}.port:4000") == [None] * 3


@pytest.mark.parametrize("lane,reason", [("tx", BypassReason.ALREADY_ENCODED),
                                         ("rx", BypassReason.NOT_ENCODED)])
def test_lane_preference(script, tmp_path, capsys, lane, reason):
    """Judged as one lane, the other lane's frames are bypassed for its reason."""
    host, wire, _ = _tensor_pcaps(tmp_path, capsys, "qsgd", "--param", "4")
    _, verdicts = check_pcap(script, host + wire, tmp_path, "-o", f"{PROTO}.lane:{lane}",
                             lane=lane)
    assert {v for v in verdicts} == {(lane, None), (lane, reason)}


def _check_corpus(script, sides, tmp_path, elements):
    """Each lane's frames judged as that lane: every frame agrees, every bypass reason and
    every reason every node makes alike comes up, and each lane takes frames of every
    codec."""
    reasons, taken = set(), set()
    for lane, frames in sides.items():
        _, verdicts = check_pcap(script, frames, tmp_path, *ALL_BUILT,
                                 "-o", f"{PROTO}.elements:{elements}", "-o",
                                 f"{PROTO}.lane:{lane}", codecs=set(ALL_CODEC_IDS),
                                 lane=lane, elements=elements)
        reasons |= {reason for _, reason in verdicts}
        taken |= {(judged, parse(f).codec) for f, (judged, reason) in zip(
            frames, verdicts, strict=True) if reason is None}
    assert set(BypassReason) <= reasons
    assert set(FRAME_REDUCE_REASONS) <= reasons
    for lane in ("tx", "rx"):
        assert {codec for judged, codec in taken if judged == lane} == set(ALL_CODEC_IDS)
    assert {codec for judged, codec in taken if judged == "reduce"} == {
        codec_info(name).id for name in INTEGER_CODECS + FLOAT_CODECS}


def test_fuzz_corpus(script, tmp_path):
    """A corpus of several hundred frames, every codec and every bypass reason: fuzz
    traffic, a malformed frame of every reason, what ring nodes receive, header noise and
    random payloads; judged as each lane (the default, by the ``encoded`` flag, is
    :func:`test_reference_pcaps`' and the preference tests')."""
    _check_corpus(script, corpus(400, seed=1), tmp_path, elements=64)


def _check_ring_nodes(script, streams, tmp_path, enabled=True):
    """Each node's stream judged as that node judges it (the ring preferences): every
    frame against a :class:`~squeezenic_hw.reference.reduce_rx.ReduceReceiver` fed the
    frames in order, the node's reduce ``enabled`` or not. The reasons that come up."""
    seen = set()
    for ring, rank, frames in streams:
        receiver = ring.receiver(rank)
        receiver.enabled = enabled

        def judge(frame, receiver=receiver):
            reason = receiver.receive(frame).reason
            if reason is None:                       # not a reduce frame
                return expected_verdict(frame)
            return "reduce", None if reason is ReduceReason.NONE else reason

        options = {"nodes": receiver.nodes, "rank": receiver.rank,
                   "elements": receiver.elements,
                   "codec": f"{receiver.codec}:{receiver.param}",
                   "scale": hex(receiver.scale_bits), "aux": hex(receiver.aux_bits),
                   "stochastic": str(receiver.stochastic).upper(),
                   "enabled": str(enabled).upper()}
        prefs = [arg for key, value in options.items()
                 for arg in ("-o", f"{PROTO}.ring_{key}:{value}")]
        _, verdicts = check_pcap(script, frames, tmp_path, "-o", f"{PROTO}.judge_all:TRUE",
                                 *prefs, judge=judge)
        seen |= {reason for lane, reason in verdicts if lane == "reduce"}
    return seen


def test_reduce_frames_as_a_node_judges_them(script, tmp_path):
    """What a node of a ring of each codec family receives, its ring's frames among frames
    made to fail each check: judged as that node, frame by frame, taking each frame it
    takes and following its expected offsets; every reason comes up."""
    streams = [(ring, rank, frames) for k, (ring, rank, frames) in enumerate(
        ring_streams(3, max_nodes=5)) if rank == k % ring.nodes and ring.case in (
            "fixed-stochastic", "qsgd", "sign", "natural-stochastic", "bf16")]
    seen = _check_ring_nodes(script, streams, tmp_path)
    assert seen == {None, *NODE_REDUCE_REASONS}


def test_reduce_frames_at_a_disabled_node(script, tmp_path):
    """A node whose reduce is disabled (the ring preference ``enabled`` off) bypasses
    every reduce frame that passes the transport checks as ``disabled``."""
    streams = [s for s in ring_streams(5, max_nodes=4) if s[0].case in ("sign", "bf16")][:2]
    seen = _check_ring_nodes(script, streams, tmp_path, enabled=False)
    assert ReduceReason.DISABLED in seen and seen <= {ReduceReason.DISABLED, None}


@pytest.mark.slow
def test_reduce_frames_as_every_node_judges_them(script, tmp_path):
    """The same for every node of rings up to 16 nodes."""
    seen = _check_ring_nodes(script, ring_streams(4), tmp_path)
    assert seen == {None, *NODE_REDUCE_REASONS}


@pytest.mark.slow
def test_fuzz_corpus_10k(script, tmp_path):
    """The same on 10⁴ frames, each judged as its lane."""
    sides = corpus(10_000, seed=2)
    assert len(sides["tx"]) + len(sides["rx"]) >= 10_000
    _check_corpus(script, sides, tmp_path, elements=8)
