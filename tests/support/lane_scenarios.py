"""Traffic for the lane tests: tensor streams, bypass frames for every reason, and the check.

Everything is built with :mod:`squeezenic_hw.spec.frames` and compared with
:mod:`squeezenic_hw.reference.lane`, so the lanes are judged against the
numpy reference, frame for frame and byte for byte.
"""

import struct
from dataclasses import replace

import numpy as np

from squeezenic_hw.reference import lane as lr
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.lane import LaneSimulation
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, gradient_like
from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    ipv4_checksum,
)
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, FLAG_STOCHASTIC

from support.shared_duts import shared

__all__ = ["host_stream", "bad_frames", "mixed_traffic", "check_against_reference",
           "codec_params", "patch", "lane_simulation"]


def patch(frame, pos, data, fix_checksum=True):
    """``frame`` with bytes at ``pos`` replaced (IPv4 checksum fixed unless told not to)."""
    b = bytearray(frame)
    b[pos:pos + len(data)] = data
    if fix_checksum and len(b) >= 34:
        b[24:26] = struct.pack("!H", ipv4_checksum(bytes(b[14:34])))
    return bytes(b)


def codec_params(rng, codec):
    """A random valid (param, stochastic) for a codec."""
    info = codec_info(codec)
    param = int(rng.integers(2, 17)) if info.param_range and not info.variable else 0
    stochastic = bool(info.stochastic and rng.random() < 0.5)
    return param, stochastic


def _values(rng, n, edge_share=0.1):
    x = gradient_like(rng, n) * np.float32(rng.uniform(0.5, 50))
    edge = rng.random(n) < edge_share
    x[edge] = EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), int(edge.sum()))].view(
        np.float32)
    return x.astype(np.float32)


def host_stream(rng, codec, *, n_total, max_k=363, param=None, stochastic=None, offset=0,
                flush_rate=0.0, flush_last=False, header=None, lengths=None, values=None,
                scale=None):
    """Host frames carrying one tensor of ``n_total`` elements with contiguous offsets.

    ``values`` (float32, ``n_total`` of them) and ``scale`` replace the random ones.
    """
    p, s = codec_params(rng, codec)
    param = p if param is None else param
    stochastic = s if stochastic is None else stochastic
    base = header or Header()
    base = replace(base, codec=codec_info(codec).id, param=param,
                   scale_bits=f32_bits(np.float32(rng.uniform(0.5, 20))),
                   aux_bits=f32_bits(np.float32(rng.uniform(-1, 1))),
                   seed=int(rng.integers(0, 2**32)))
    if scale is not None:
        base = replace(base, scale_bits=f32_bits(np.float32(scale)))
    x = _values(rng, n_total) if values is None else np.asarray(values, dtype=np.float32)
    frames, pos, k = [], 0, 0
    while pos < n_total:
        n = lengths[k % len(lengths)] if lengths else int(rng.integers(1, max_k + 1))
        n = min(n, n_total - pos)
        last = pos + n == n_total
        flush = (flush_last and last) or rng.random() < flush_rate
        flags = (FLAG_STOCHASTIC if stochastic else 0) | (FLAG_FLUSH if flush else 0)
        h = replace(base, offset=(offset + pos) % 2**32, flags=flags)
        frames.append(build_host_frame(h, x[pos:pos + n]))
        pos += n
        k += 1
    return frames


def host_frame(**kw):
    """A host frame of four 1.0 values with header fields ``kw``."""
    return build_host_frame(Header(**kw), np.ones(4, np.float32))


#: A host frame every lane processes (fixed, 8 bits, 4 elements).
GOOD_HOST_FRAME = host_frame(codec=3, param=8)


def bad_host_frames():
    """One crafted frame per TX bypass reason."""
    R = BypassReason
    return {
        R.SHORT_FRAME: GOOD_HOST_FRAME[:63],
        R.NOT_IPV4: patch(GOOD_HOST_FRAME, 12, b"\x08\x06"),
        R.IP_OPTIONS: patch(GOOD_HOST_FRAME, 14, b"\x46"),
        R.FRAGMENTED: patch(GOOD_HOST_FRAME, 20, b"\x20\x00"),
        R.NOT_UDP: patch(GOOD_HOST_FRAME, 23, b"\x06"),
        R.OTHER_PORT: patch(GOOD_HOST_FRAME, 36, b"\x00\x35"),
        R.IP_CHECKSUM: patch(GOOD_HOST_FRAME, 24, b"\x12\x34", fix_checksum=False),
        R.IP_LENGTH: patch(GOOD_HOST_FRAME, 16, b"\x00\x10"),
        R.UDP_LENGTH: patch(GOOD_HOST_FRAME, 38, b"\x00\x10"),
        R.VERSION: patch(GOOD_HOST_FRAME, 42, b"\x02"),
        R.RESERVED_FLAGS: patch(GOOD_HOST_FRAME, 45, b"\x08"),
        R.ALREADY_ENCODED: patch(GOOD_HOST_FRAME, 45, b"\x01"),
        R.CODEC: host_frame(codec=7),
        R.PARAM: host_frame(codec=3, param=1),
        R.ZERO_N: build_host_frame(Header(codec=0), np.zeros(0, np.float32)),
        R.LENGTH: patch(GOOD_HOST_FRAME, 46, b"\x03\x00"),
    }


def bad_frames(lane):
    """One frame per bypass reason of ``lane`` ("tx" or "rx"), plus ARP and IPv6."""
    R = BypassReason
    # fp16: every lane under test builds it in, so each mutation hits its own reason
    h = Header(codec=1)
    if lane == "tx":
        good = build_host_frame(h, np.arange(5, dtype=np.float32))
    else:
        h = replace(h, flags=FLAG_ENCODED, n=5)
        good = build_wire_frame(h, bytes(range(10)))
    frames = {
        R.SHORT_FRAME: good[:40],
        R.NOT_IPV4: patch(good, 12, b"\x86\xdd"),
        R.IP_OPTIONS: patch(good, 14, b"\x46"),
        R.FRAGMENTED: patch(good, 20, b"\x20\x00"),
        R.NOT_UDP: patch(good, 23, b"\x06"),
        R.OTHER_PORT: patch(good, 36, b"\x00\x35"),
        R.IP_CHECKSUM: patch(good, 24, b"\x12\x34", fix_checksum=False),
        R.IP_LENGTH: patch(good, 16, b"\x00\x10"),
        R.UDP_LENGTH: patch(good, 38, b"\x00\x10"),
        R.VERSION: patch(good, 42, b"\x02"),
        R.RESERVED_FLAGS: patch(good, 45, bytes([good[45] | 0x08])),
        R.CODEC: patch(good, 43, b"\x07"),
        R.PARAM: patch(good, 44, b"\x01"),
        R.ZERO_N: (build_host_frame(h, np.zeros(0, np.float32))
                   if lane == "tx" else build_wire_frame(replace(h, n=0), b"")),
        R.LENGTH: patch(good, 46, b"\x03\x00"),
    }
    if lane == "tx":
        frames[R.ALREADY_ENCODED] = patch(good, 45, b"\x01")
    else:
        frames[R.NOT_ENCODED] = patch(good, 45, b"\x00")
    arp = bytes.fromhex("ffffffffffff020000000001" "0806") + bytes(46)
    frames["arp"] = arp
    return frames


def mixed_traffic(rng, codecs, *, n_streams=3, elements=(200, 1500), max_k=363,
                  bypass_rate=0.2, flush_rate=0.05, lane="tx"):
    """Interleaved host streams of random codecs with bypass frames sprinkled in.

    Streams are interleaved at frame granularity (which closes wire frames on
    mismatch); every frame has random ``tuser_src``/``tuser_dst``.
    """
    streams = []
    offset = int(rng.integers(0, 2**32))
    for s in range(n_streams):
        codec = codecs[int(rng.integers(len(codecs)))]
        hdr = Header(src_ip=bytes([10, 0, 0, 1 + s]))
        streams.append(host_stream(rng, codec, n_total=int(rng.integers(*elements)),
                                   max_k=max_k, offset=offset, flush_rate=flush_rate,
                                   header=hdr))
    return interleave(rng, streams, lane=lane, bypass_rate=bypass_rate)


def interleave(rng, streams, *, lane="tx", bypass_rate=0.2):
    """Frames of ``streams`` (lists of host frames, emptied) in runs of 1–4 frames per
    stream, with frames the lane bypasses sprinkled in at ``bypass_rate``; every frame
    an ``AxisFrame`` with random ``tuser_src``/``tuser_dst``."""
    bad = list(bad_frames(lane).values())
    out = []
    while any(streams):
        if rng.random() < bypass_rate:
            out.append(bad[int(rng.integers(len(bad)))])
            continue
        live = [s for s in streams if s]
        s = live[int(rng.integers(len(live)))]
        # runs of several frames from one stream, so that coalescing happens
        for _ in range(int(rng.integers(1, 5))):
            if s:
                out.append(s.pop(0))
    return [AxisFrame(f, src=int(rng.integers(0, 2**16)), dst=int(rng.integers(0, 2**16)))
            for f in out]


def check_against_reference(run, frames, lane, **ref_kwargs):
    """Assert the lane's output equals the reference's, frame for frame, and counters too.

    Returns the reference output frames.
    """
    data = [f.data if isinstance(f, AxisFrame) else bytes(f) for f in frames]
    fn = lr.tx if lane == "tx" else lr.rx
    expected, counters = fn(data, **ref_kwargs)
    got = [f.data for f in run.frames]
    assert len(got) == len(expected), (
        f"{len(got)} frames out, reference {len(expected)}; counters {run.counters} vs "
        f"{counters}")
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        if g != e:
            diff = next(i for i in range(min(len(g), len(e))) if g[i] != e[i]) if len(
                g) == len(e) else None
            raise AssertionError(f"frame {k}: {len(g)} bytes vs reference {len(e)}, first "
                                 f"difference at byte {diff}")
    for name, value in counters.items():
        assert run.counters[name] == value, f"counter {name}: {run.counters[name]} != {value}"
    assert run.counters["size_errors"] == 0
    return expected


def wire_of(frames, **kw):
    """Wire frames from the TX reference (input for RX tests)."""
    return lr.tx([f.data if isinstance(f, AxisFrame) else f for f in frames], **kw)[0]


def wire_traffic(rng, codecs, mtu, bad_rate=0.2):
    """Input for RX tests: wire frames of the TX reference (``mtu``) from three interleaved
    host streams of ``codecs``, each with a random tuser, and after each, with probability
    ``bad_rate``, a frame of a random RX bypass reason."""
    host = mixed_traffic(rng, codecs, n_streams=3, elements=(100, 700), bypass_rate=0,
                         max_k=int(rng.choice([16, 100, 363])))
    bad = list(bad_frames("rx").values())
    frames = []
    for w in wire_of(host, mtu=mtu, codecs=codecs):
        frames.append(AxisFrame(w, src=int(rng.integers(0, 2**16)),
                                dst=int(rng.integers(0, 2**16))))
        if rng.random() < bad_rate:
            frames.append(AxisFrame(bad[int(rng.integers(len(bad)))], src=1, dst=2))
    return frames


__all__ += ["wire_of", "wire_traffic"]


def check_tuser(run, frames, lane):
    """Bypassed frames keep their tuser_src/dst; built frames take those of the frame they
    start from (TX: the host frame holding the wire frame's first element; RX: the wire
    frame). Streams must have distinct source IPs (as :func:`mixed_traffic` makes them)."""
    from squeezenic_hw.spec.frames import parse

    inputs = [f if isinstance(f, AxisFrame) else AxisFrame(bytes(f)) for f in frames]
    bypassed = iter([f for f in inputs if f.data in {o.data for o in run.frames}
                     and not _is_processed(f.data, lane)])
    spans = []
    for f in inputs:
        h = parse(f.data)
        if _is_processed(f.data, lane):
            spans.append((h.src_ip, h.offset, h.n, f))
    for out in run.frames:
        if not _is_built_output(out.data, lane):
            src = next(bypassed)
            assert src.data == out.data and (out.src, out.dst) == (src.src, src.dst)
            continue
        h = parse(out.data)
        owner = [f for ip, off, n, f in spans
                 if ip == h.src_ip and (h.offset - off) % 2**32 < n]
        assert owner, f"no input frame holds element {h.offset}"
        assert (out.src, out.dst) == (owner[0].src, owner[0].dst)


def _is_processed(data, lane):
    from squeezenic_hw.spec.frames import classify_host_frame, classify_wire_frame

    fn = classify_host_frame if lane == "tx" else classify_wire_frame
    return fn(data)[1] is None


def _is_built_output(data, lane):
    from squeezenic_hw.spec.frames import classify_host_frame, classify_wire_frame

    fn = classify_wire_frame if lane == "tx" else classify_host_frame
    return fn(data)[1] is None


__all__ += ["check_tuser"]


def idle_gap_traffic(rng, T, *, n_total=500, codec="fp16"):
    """Host frames of one ``codec`` tensor with bypass frames between some of them, and
    their arrival cycles: gaps of 0, 3, T-2, T-1, T, T+1 and 300 cycles (none below 0)
    after each frame's beats, either side of an idle timeout of ``T``. Returns
    ``(frames, times)``."""
    from squeezenic_hw.reference import lane as lr

    bad = list(bad_frames("tx").values())
    frames = []
    for f in host_stream(rng, codec, n_total=n_total, max_k=40):
        frames.append(f)
        if rng.random() < 0.2:
            frames.append(bad[int(rng.integers(len(bad)))])
    times, t = [], 5
    for f in frames:
        times.append(t)
        t += lr.frame_beats(f) + max(0, int(rng.choice([0, 3, T - 2, T - 1, T, T + 1, 300])))
    return frames, times


__all__ += ["idle_gap_traffic"]


def lane_simulation(kind, *args, **params):
    """A :class:`LaneSimulation` of ``TxLane(*args, **params)`` (``kind`` "tx"),
    ``RxLane(...)`` ("rx") or ``NarrowTxLane(...)`` ("narrow"), on the lane
    :func:`support.shared_duts.shared` keeps for this worker: setting a lane's simulation up takes
    seconds, and each run starts from reset."""
    from squeezenic_hw.gateware.rx.lane import RxLane
    from squeezenic_hw.gateware.tx.lane import TxLane
    from squeezenic_hw.gateware.tx.narrow import NarrowTxLane

    lane = {"tx": TxLane, "rx": RxLane, "narrow": NarrowTxLane}[kind]
    return LaneSimulation(shared(lane, *args, **params))
