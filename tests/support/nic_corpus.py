"""Frames of every kind a SqueezeNIC sees, by the lane whose input they are: the fuzz
campaign's traffic (host frames, the reference TX lane's wire frames, the wire side's
malformed frames, the RX lane's host frames), a tensor of every codec, a malformed frame of
every bypass reason and codec for both lanes, what the nodes of reference rings receive
(their reduce frames, mutated ones failing each check, alone or with a later one, and
frames that are not reduce frames), frames with header bytes changed, whose several faults
make the checks' order matter, and wire frames with random payloads, whose codes take every
value."""

import struct
from dataclasses import replace

import numpy as np

from squeezenic_hw.reference import lane as lane_reference
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
    FLAG_STOCHASTIC,
    HDR,
    HEADER_LEN,
    VERSION,
)
from squeezenic_hw.spec.reduce import MAX_NODES, classify_reduce_frame

from support.reduce_frames import SETTINGS, node_stream, ring_case, rng_of

__all__ = ["ALL_CODEC_IDS", "fuzz_traffic", "every_codec", "malformed_of_every_reason",
           "ring_streams", "header_noise", "payload_noise", "corpus"]

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


def ring_streams(seed, max_nodes=MAX_NODES):
    """What every node of a reference ring of each codec setting of
    :data:`support.reduce_frames.SETTINGS` receives, at a random ring size up to
    ``max_nodes``, tensor length and MTU: its predecessor's frames in order with mutated
    frames failing each of the node's checks, alone or with a later one, and frames that
    are not reduce frames among them (:func:`support.reduce_frames.node_stream`). A list of
    ``(ring, rank, frames)``."""
    out = []
    for case in SETTINGS:
        rng = rng_of("nic_corpus", seed, case)
        nodes = rng.randint(2, max_nodes)
        ring = ring_case(case, nodes, rng.randint(nodes, 150 * nodes),
                         mtu=rng.randint(100, 400), seed=rng.randrange(2**32))
        for rank in range(nodes):
            stream = node_stream(ring, rank, rng, mutated=0.6, combined=0.3, other=0.1)
            out.append((ring, rank, [frame for frame, _ in stream]))
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


def corpus(frames, *, seed=0, codecs=ALL_CODEC_IDS):
    """A corpus of at least ``frames`` frames by the lane whose input they are,
    ``{"tx": [...], "rx": [...]}``: a tensor of every codec, the fuzz traffic, a malformed
    frame of every reason and codec, what the nodes of reference rings receive (RX), a
    tenth more frames of each lane with noise in their headers, and a fifth more wire
    frames with random payloads."""
    rng = np.random.default_rng(seed)
    good = every_codec(rng, codecs)
    out = {lane: good[lane] + malformed_of_every_reason(lane, codecs, seed)
           for lane in ("tx", "rx")}
    # rings of every size in a large corpus; a small one keeps them small
    rings = [frame for _, _, stream in ring_streams(seed, MAX_NODES if frames >= 5000 else 4)
             for frame in stream]
    out["rx"] += rings
    # a batch of the campaign's traffic at least, however small the corpus
    made = len(out["tx"]) + len(out["rx"])
    rest = max(frames - made - frames // 10, frames // 4)
    traffic = fuzz_traffic(rest, seed=seed, codecs=codecs, batch=min(rest, 200))
    for lane in ("tx", "rx"):
        out[lane] += traffic[lane]
        out[lane] += header_noise(out[lane], rng, frames // 10)
    wire = good["rx"] + [f for f in traffic["rx"] + rings if classify_wire_frame(
        f, codecs_built_in=codecs)[1] is None or classify_reduce_frame(f)[1] is None]
    out["rx"] += payload_noise(wire, rng, frames // 5)
    return out
