"""Frames of every kind a SqueezeNIC sees, by the lane whose input they are: the fuzz
campaign's traffic (host frames, the reference TX lane's wire frames, the wire side's
malformed frames, the RX lane's host frames), a tensor of every codec, a malformed frame of
every bypass reason and codec for both lanes, the reference ring all-reduce's reduce frames
and malformed ones of every reason a frame alone decides (alone and in pairs), frames with
header bytes changed, whose several faults make the checks' order matter, and wire frames
with random payloads, whose codes take every value."""

import struct
from dataclasses import replace

import numpy as np

from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.reference.allreduce import allreduce
from squeezenic_hw.sim.traffic import (
    MALFORMED_KINDS,
    MalformedRecipe,
    draw_example,
    expected_rx,
    expected_tx,
    host_traffic,
    malformed_frame,
    traffic_recipes,
    wire_traffic,
)
from squeezenic_hw.spec.codecs import (
    KNOWN_CODECS,
    THRESHOLD_ID,
    codec_info,
    f32_bits,
    payload_bytes,
)
from squeezenic_hw.spec.frames import (
    Header,
    build_host_frame,
    build_wire_frame,
    classify_wire_frame,
    ipv4_checksum,
    parse,
)
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    FLAG_ENCODED,
    FLAG_STOCHASTIC,
    HDR,
    HEADER_LEN,
    VERSION,
)
from squeezenic_hw.spec.reduce import (
    FLOAT_CODECS,
    FRAME_REDUCE_REASONS,
    INTEGER_CODECS,
    MAX_NODES,
    REDUCE_FLAGS_RESERVED,
    ReduceFields,
    ReduceReason,
    classify_reduce_frame,
)

__all__ = ["ALL_CODEC_IDS", "fuzz_traffic", "every_codec", "malformed_of_every_reason",
           "reduce_frames", "malformed_reduce_frame", "malformed_reduce_frames", "header_noise",
           "payload_noise", "two_faults", "corpus"]

#: Every codec of the wire format, threshold included.
ALL_CODEC_IDS = sorted(KNOWN_CODECS)


def fuzz_traffic(frames, *, seed=0, codecs=ALL_CODEC_IDS, batch=200):
    """At least ``frames`` frames of the fuzz campaign's batches (``squeezenic-hw fuzz``'s
    strategies and seeds), by the lane whose input they are: ``{"tx": host frames (each
    batch's, and the reference RX lane's output), "rx": the RX lane's input (the reference
    TX lane's output among the wire side's malformed frames)}``."""
    strategy = traffic_recipes(codecs, frames=batch)
    out, k = {"tx": [], "rx": []}, 0
    while len(out["tx"]) + len(out["rx"]) < frames:
        recipe = draw_example(strategy, int(np.random.SeedSequence([seed, k]).generate_state(
            1)[0]))
        tx_in = host_traffic(recipe, codecs=codecs)
        rx_in = wire_traffic(recipe, expected_tx(tx_in, codecs=codecs).frames, codecs=codecs)
        rx_out = expected_rx(rx_in, codecs=codecs).frames
        out["tx"] += [f.data for f in tx_in + rx_out]
        out["rx"] += [f.data for f in rx_in]
        k += 1
    return out


def every_codec(rng, codecs=ALL_CODEC_IDS):
    """A tensor of each codec, at a random parameter and rounding, as host frames, the
    reference TX lane's wire frames and the reference RX lane's host frames: ``{"tx": the
    host frames of both, "rx": the wire frames}``."""
    out = {"tx": [], "rx": []}
    for codec in codecs:
        info = codec_info(codec)
        param = int(rng.integers(2, 17)) if info.param_range and not info.variable else 0
        base = Header(codec=codec, param=param, seed=int(rng.integers(0, 2**32)),
                      flags=FLAG_STOCHASTIC if rng.random() < 0.5 else 0,
                      # threshold keeps a few elements (|x| > scale), the others' levels
                      # spread over several codes
                      scale_bits=f32_bits(rng.uniform(1.5, 3) if info.variable else
                                          rng.uniform(0.5, 8)),
                      aux_bits=f32_bits(rng.uniform(-1, 1)))
        host = []
        for start in range(0, 3 * DEFAULT_HOST_ELEMENTS, DEFAULT_HOST_ELEMENTS):
            values = rng.standard_normal(int(rng.integers(1, DEFAULT_HOST_ELEMENTS + 1)))
            host.append(build_host_frame(replace(base, offset=start),
                                         values.astype(np.float32)))
        wire, _ = lane_reference.tx(host, codecs=codecs)
        back, _ = lane_reference.rx(wire, codecs=codecs)
        out["tx"] += host + back
        out["rx"] += wire
    return out


def malformed_of_every_reason(lane, codecs=ALL_CODEC_IDS, seed=0):
    """A malformed frame of every kind (bypass reason, ARP, IPv6, VLAN) of ``lane``, made
    from a frame of each codec."""
    return [malformed_frame(MalformedRecipe(kind, codec, seed * 1000 + k), lane, codecs=codecs)
            for k, kind in enumerate(MALFORMED_KINDS[lane]) for codec in codecs]


def reduce_frames(rng, max_nodes=MAX_NODES):
    """The reduce frames of a ring all-reduce of each reducible codec, at a random ring
    size up to ``max_nodes``, tensor length, parameter and rounding."""
    frames = []
    for name in INTEGER_CODECS + FLOAT_CODECS:
        info = codec_info(name)
        nodes = int(rng.integers(2, max_nodes + 1))
        elements = int(rng.integers(nodes, 40 * nodes))
        param = int(rng.integers(2, 17)) if info.param_range else 0
        tensors = [rng.standard_normal(elements).astype(np.float32) for _ in range(nodes)]
        result = allreduce(tensors, name, param=param, scale=8.0, aux=0.125,
                           seed=int(rng.integers(0, 2**32)),
                           stochastic=bool(rng.integers(2)), mtu=int(rng.integers(100, 1519)))
        frames += [f for link in result.links for f in link]
    return frames


def _other(rng, avoid, lo, hi):
    while True:
        v = int(rng.integers(lo, hi))
        if v not in avoid:
            return v


def malformed_reduce_frame(frame, reason, rng):
    """The reduce frame ``frame`` made to fail the check ``reason`` of
    :data:`~squeezenic_hw.spec.reduce.FRAME_REDUCE_REASONS` (and none before it)."""
    h, payload = parse(frame), frame[HEADER_LEN:]
    f = ReduceFields.of(h)
    R = ReduceReason

    def rebuild(fields=f, **changes):
        return replace(h, seed=fields.seed_word, **changes)

    if reason is R.LENGTH:
        choice = int(rng.integers(3))
        if choice == 0:           # no sums: a length of 64 would be right for n = 0
            return build_wire_frame(rebuild(n=0), b"" if rng.random() < 0.5 else payload)
        if choice == 1:
            return build_wire_frame(h, payload + rng.bytes(int(rng.integers(1, 4))))
        n = h.n + int(rng.integers(8 // f.width + 1, 100))
        return build_wire_frame(rebuild(n=n), payload)
    if reason is R.FLAGS:
        if rng.random() < 0.3:
            return build_wire_frame(rebuild(flags=h.flags & ~FLAG_ENCODED), payload)
        bits = [b for b in range(8) if REDUCE_FLAGS_RESERVED >> b & 1]
        return build_wire_frame(rebuild(flags=h.flags | 1 << int(rng.choice(bits))), payload)
    if reason is R.SETTINGS:
        info = codec_info(h.codec)
        choices = ["codec", "param"] + ([] if info.stochastic else ["stochastic"])
        what = str(rng.choice(choices))
        if what == "codec":
            codec = int(rng.choice([THRESHOLD_ID, _other(rng, set(ALL_CODEC_IDS), 0, 256)]))
            return build_wire_frame(rebuild(codec=codec), payload)
        if what == "param":
            lo, hi = info.param_range or (0, 0)
            return build_wire_frame(rebuild(param=_other(rng, set(range(lo, hi + 1)), 0, 256)),
                                    payload)
        return build_wire_frame(rebuild(flags=h.flags | FLAG_STOCHASTIC), payload)
    if reason is R.NODES:
        nodes = int(rng.choice([0, 1, MAX_NODES + 1,
                                _other(rng, set(range(MAX_NODES + 1)), 0, 256)]))
        return build_wire_frame(rebuild(replace(f, nodes=nodes)), payload)
    if reason is R.WIDTH:
        width = _other(rng, {f.width, 0}, 1, 64)
        size = (h.n * width + 7) // 8
        body = (payload + rng.bytes(max(0, size - len(payload))))[:size]
        return build_wire_frame(rebuild(replace(f, width=width)), body)
    if reason is R.PHASE:
        if f.gather:
            k = _other(rng, {f.nodes}, 0, 256)
        else:
            k = int(rng.choice([0, _other(rng, set(range(1, f.nodes)), f.nodes, 256)]))
        return build_wire_frame(rebuild(replace(f, contributions=k)), payload)
    assert reason is R.OFFSET
    origin = int(rng.integers(f.nodes, 256))
    return build_wire_frame(rebuild(replace(f, origin=origin)), payload)


def malformed_reduce_frames(frames, rng, per_reason):
    """``per_reason`` malformed frames of each reason a reduce frame alone decides, made
    from ``frames``; each checked to fail for its reason."""
    out = []
    for reason in FRAME_REDUCE_REASONS:
        for _ in range(per_reason):
            frame = malformed_reduce_frame(frames[int(rng.integers(len(frames)))], reason, rng)
            got = classify_reduce_frame(frame)[1]
            assert got is reason, f"a frame made to fail {reason} fails {got}"
            out.append(frame)
    return out


#: The header bytes some check reads: EtherType, IPv4 version and length, total length,
#: fragment word, protocol, checksum, UDP destination port and length, and the SqueezeNIC
#: fields but ``scale`` and ``aux``.
_CHECKED_BYTES = [at for name in ("ETHERTYPE", "IP_VIHL", "IP_TOTAL_LENGTH", "IP_FRAG",
                                  "IP_PROTO", "IP_CHECKSUM", "UDP_DST", "UDP_LENGTH",
                                  "VERSION", "CODEC", "PARAM", "FLAGS", "N", "SEED")
                  for at in range(getattr(HDR, name)[0], sum(getattr(HDR, name)))]


def header_noise(frames, rng, count):
    """``count`` frames of ``frames`` (of those with a whole header) with 1-3 header bytes
    changed (to 0, 1, 255, one bit or one off, or at random), mostly bytes some check
    reads, a fifth of them with their length changed too; half of them with the IPv4
    checksum made right again, so that the checks after it see the changes."""
    whole = [f for f in frames if len(f) >= HEADER_LEN]
    out = []
    for _ in range(count):
        frame = bytearray(whole[int(rng.integers(len(whole)))])
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.choice(_CHECKED_BYTES)) if rng.random() < 0.8 else int(
                rng.integers(HDR.ETHERTYPE[0], HEADER_LEN))
            old = frame[at]
            frame[at] = int(rng.choice([0, 1, 0xFF, old ^ 1 << int(rng.integers(8)),
                                        (old + 1) % 256, (old - 1) % 256,
                                        int(rng.integers(256))]))
        if rng.random() < 0.2:
            change = int(rng.integers(1, 4))
            frame = frame[:-change] if rng.random() < 0.5 else frame + rng.bytes(change)
        if rng.random() < 0.5:
            at = HDR.IP_CHECKSUM[0]
            frame[at:at + 2] = struct.pack("!H", ipv4_checksum(bytes(frame[14:34])))
        out.append(bytes(frame))
    return out


def payload_noise(frames, rng, count):
    """``count`` frames of ``frames``, of each codec in turn, with random payload bytes
    (:func:`_edgy_bytes`) of the same length (``fixed`` and ``qsgd``: of a random
    parameter, 2-4 likelier): codes of every value (the most negative ``fixed`` code, a
    ``qsgd`` −0, ``natural`` ±inf, fp16 and bf16 NaNs and subnormals) and inconsistent
    ``threshold`` payloads."""
    by_codec = {}
    for frame in frames:
        by_codec.setdefault(parse(frame).codec, []).append(frame)
    groups = list(by_codec.values())
    out = []
    for k in range(count):
        group = groups[k % len(groups)]
        frame = group[int(rng.integers(len(group)))]
        h = parse(frame)
        info = codec_info(h.codec)
        if h.version == VERSION and info.param_range and not info.variable:
            h = replace(h, param=int(rng.choice([2, 3, 4, int(rng.integers(2, 17))])))
            out.append(build_wire_frame(h, _edgy_bytes(rng, payload_bytes(info, h.param, h.n))))
        else:
            out.append(frame[:HEADER_LEN] + _edgy_bytes(rng, len(frame) - HEADER_LEN))
    return out


def _edgy_bytes(rng, count):
    """Random bytes, a third of them 0 and a sixth 255: zero and all-ones exponents
    (subnormals, infinities, NaNs) and repeated index entries come up often."""
    pick = rng.random(count)
    return np.where(pick < 1 / 3, 0, np.where(pick < 1 / 2, 0xFF, rng.integers(
        0, 256, count))).astype(np.uint8).tobytes()


def two_faults(frames, rng):
    """A reduce frame of ``frames`` made to fail each pair of the reduce checks (the first
    of them in check order decides)."""
    out = []
    for i, first in enumerate(FRAME_REDUCE_REASONS):
        for second in FRAME_REDUCE_REASONS[i + 1:]:
            frame = frames[int(rng.integers(len(frames)))]
            for reason in (second, first) if rng.random() < 0.5 else (first, second):
                frame = malformed_reduce_frame(frame, reason, rng)
            out.append(frame)
    return out


def corpus(frames, *, seed=0, codecs=ALL_CODEC_IDS):
    """A corpus of at least ``frames`` frames by the lane whose input they are,
    ``{"tx": [...], "rx": [...]}``: a tensor of every codec, the fuzz traffic, a malformed
    frame of every reason and codec, reduce frames and malformed ones of every reason (RX,
    some with two faults), a tenth more frames of each lane with noise in their headers,
    and a fifth more wire frames with random payloads."""
    rng = np.random.default_rng(seed)
    good = every_codec(rng, codecs)
    out = {lane: good[lane] + malformed_of_every_reason(lane, codecs, seed)
           for lane in ("tx", "rx")}
    # rings of every size in a large corpus; a small one keeps them small (2N(N-1) frames)
    reduce = reduce_frames(rng, MAX_NODES if frames >= 5000 else 5)
    out["rx"] += reduce + malformed_reduce_frames(reduce, rng, per_reason=max(2, frames // 400))
    out["rx"] += two_faults(reduce, rng)
    # a batch of the campaign's traffic at least, however small the corpus
    made = len(out["tx"]) + len(out["rx"])
    rest = max(frames - made - frames // 10, frames // 4)
    traffic = fuzz_traffic(rest, seed=seed, codecs=codecs, batch=min(rest, 200))
    for lane in ("tx", "rx"):
        out[lane] += traffic[lane]
        out[lane] += header_noise(out[lane], rng, frames // 10)
    wire = good["rx"] + [f for f in traffic["rx"] if classify_wire_frame(
        f, codecs_built_in=codecs)[1] is None]
    out["rx"] += payload_noise(wire + reduce, rng, frames // 5)
    return out
