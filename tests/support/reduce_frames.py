"""Reduce frames for the tests of the receive checks (``docs/wire-format.md`` section 8.4):
the frames a node receives in a reference ring, and frames mutated to fail each check.

A mutation takes the next frame the node would take (a :class:`Frame`: header, payload
and what the node expects of its chunk) and changes it so that one check fails; applied
after a mutation of a later check, it is still the first to fail. :func:`node_stream`
mixes a node's ring frames with mutated frames and frames that are not reduce frames.
"""

import random
from dataclasses import dataclass, replace

import numpy as np
from amaranth.lib import data

from squeezenic_hw.gateware.common.layouts import AxisBeat
from squeezenic_hw.reference.allreduce import allreduce
from squeezenic_hw.reference.reduce_rx import ReduceReceiver
from squeezenic_hw.sim.vectors import EDGE_F32_BITS
from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.frames import Header, build_host_frame, build_wire_frame, parse
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, FLAG_STOCHASTIC
from squeezenic_hw.spec.reduce import (
    FLAG_GATHER,
    ContributionReason,
    ReduceFields,
    ReduceReason,
    chunk_bounds,
    chunk_size,
)

__all__ = ["by_chunk_and_phase", "frames_of_beats", "SETTINGS", "RingCase", "ring_case",
           "Frame", "MUTATIONS", "mutate",
           "not_reduce_frames", "node_stream", "template_of", "edge_tensors", "lane_config",
           "contribution_mutations"]

#: Codec settings of every reducible family (the codec is the name before any "-").
SETTINGS = {
    "raw": {}, "fp16": {}, "bf16": {}, "natural": {},
    "natural-stochastic": {"stochastic": True},
    "fixed": {"param": 8, "scale": 32.0, "aux": 1 / 32},
    "fixed-stochastic": {"param": 6, "scale": 8.0, "aux": 1 / 8, "stochastic": True},
    "qsgd": {"param": 4, "scale": 2.0, "aux": 0.5},
    "qsgd-stochastic": {"param": 4, "scale": 2.0, "aux": 0.5, "stochastic": True},
    "sign": {"scale": 1.0, "aux": -1.0},
}


@dataclass
class RingCase:
    """A reference ring: its settings and every link's frames."""
    case: str
    nodes: int
    elements: int
    links: list

    @property
    def codec(self):
        return self.case.split("-")[0]

    @property
    def settings(self):
        return SETTINGS[self.case]

    def receiver(self, rank, **kwargs):
        """Node ``rank``'s :class:`ReduceReceiver` for this ring."""
        return ReduceReceiver(self.nodes, rank, self.codec, elements=self.elements,
                              **self.settings, **kwargs)

    def received(self, rank):
        """The frames node ``rank`` receives, in the order its predecessor sends them."""
        return self.links[(rank - 1) % self.nodes]


def ring_case(case, nodes, elements, *, mtu=300, seed=0):
    """The ring of ``nodes`` random tensors of ``elements`` under ``SETTINGS[case]``."""
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=elements).astype(np.float32) for _ in range(nodes)]
    result = allreduce(xs, case.split("-")[0], mtu=mtu, seed=seed, **SETTINGS[case])
    return RingCase(case, nodes, elements, result.links)


@dataclass
class Frame:
    """A reduce frame taken apart, with what the receiving node knows of its chunk."""
    header: Header
    fields: ReduceFields
    payload: bytes
    nodes: int
    rank: int
    lo: int            # the chunk's bounds
    hi: int
    expected: int      # the offset the node expects next of the chunk and phase

    @classmethod
    def of(cls, frame, receiver):
        h = parse(frame)
        f = ReduceFields.of(h)
        lo, hi = chunk_bounds(receiver.elements, receiver.nodes, f.origin)
        return cls(h, f, frame[64:], receiver.nodes, receiver.rank, lo, hi,
                   receiver.expected(f.origin, f.gather))

    def but(self, header=None, fields=None, payload=None, **changes):
        h = replace(self.header, **changes) if header is None else header
        f = self.fields if fields is None else fields
        h = replace(h, seed=f.seed_word, flags=(h.flags & ~FLAG_GATHER)
                    | (FLAG_GATHER if f.gather else 0))
        return replace(self, header=h, fields=f,
                       payload=self.payload if payload is None else payload)

    def bytes(self):
        return build_wire_frame(self.header, self.payload)


def _bit(rng, width=32):
    return 1 << rng.randrange(width)


def _payload_for(frame, width, rng):
    return rng.randbytes((frame.header.n * width + 7) // 8)


def _other_width(frame, rng):
    w = frame.fields.width
    return rng.choice([v for v in (w - 1, w + 1, 2 * w, 1, 33) if v != w and 0 < v < 256])


def _reduce_phase(frame):
    return not frame.fields.gather


def _k_off_by_one(f, rng):
    k = f.fields.contributions
    return f.but(fields=replace(f.fields, contributions=k - 1 if f.fields.gather else k + 1))


def _wrong_origin(f, rng):
    n = f.nodes
    if f.fields.gather:
        # the finishing node's own gather: it never receives it
        return f.but(fields=replace(f.fields, origin=(f.rank + 1) % n))
    return f.but(fields=replace(f.fields, origin=(f.fields.origin + 1) % n))


def _offset_ahead(f, rng):
    """An offset inside the chunk beyond the expected one (or past the chunk's end)."""
    n = f.header.n
    if f.expected + 1 + n <= f.hi:
        return f.but(offset=f.expected + 1 + rng.randrange(f.hi - f.expected - n))
    return f.but(offset=f.hi - n + 1)


def _offset_before_chunk(f, rng):
    return f.but(offset=f.lo - 1 if f.lo else 2**32 - 1)


def _repeat(f, rng):
    """Sums already taken: an offset below the expected one (the chunk's first frame has
    none)."""
    if f.expected == f.lo:
        return None
    return f.but(offset=max(f.lo, f.expected - f.header.n - rng.randrange(2)))


#: Per reason, the mutations that make a frame fail that check first (``None``: the
#: mutation does not apply to this frame).
MUTATIONS = {
    ReduceReason.LENGTH: [
        lambda f, rng: f.but(payload=f.payload + bytes([rng.randrange(256)])),
        lambda f, rng: f.but(payload=f.payload[:-1]),
        lambda f, rng: f.but(n=f.header.n + 8),
        lambda f, rng: f.but(n=0),
    ],
    ReduceReason.FLAGS: [
        lambda f, rng: f.but(flags=f.header.flags | FLAG_FLUSH),
        lambda f, rng: f.but(flags=f.header.flags | 0x10 << rng.randrange(4)),
        lambda f, rng: f.but(flags=f.header.flags & ~FLAG_ENCODED),
    ],
    ReduceReason.SETTINGS: [
        lambda f, rng: f.but(codec=rng.choice([c for c in range(9) if c != f.header.codec])),
        lambda f, rng: f.but(param=f.header.param ^ _bit(rng, 3)),
        lambda f, rng: f.but(flags=f.header.flags ^ FLAG_STOCHASTIC),
        lambda f, rng: f.but(scale_bits=f.header.scale_bits ^ _bit(rng)),
        lambda f, rng: f.but(aux_bits=f.header.aux_bits ^ _bit(rng)),
    ],
    ReduceReason.NODES: [
        lambda f, rng: f.but(fields=replace(f.fields, nodes=f.nodes ^ _bit(rng, 8))),
    ],
    ReduceReason.WIDTH: [
        lambda f, rng: (lambda w: f.but(fields=replace(f.fields, width=w),
                                        payload=_payload_for(f, w, rng)))(
            _other_width(f, rng)),
    ],
    ReduceReason.PHASE: [
        _k_off_by_one,
        lambda f, rng: f.but(fields=replace(f.fields, gather=not f.fields.gather)),
        lambda f, rng: f.but(fields=replace(f.fields, origin=f.fields.origin + f.nodes)),
        _wrong_origin,
        lambda f, rng: f.but(fields=replace(f.fields, contributions=0, origin=f.rank))
        if _reduce_phase(f) else None,
    ],
    ReduceReason.OFFSET: [
        _offset_ahead,
        _offset_before_chunk,
        lambda f, rng: f.but(offset=f.hi - f.header.n + 1),
    ],
    ReduceReason.DUPLICATE: [_repeat],
}


def mutate(frame, reasons, rng):
    """``frame`` (a :class:`Frame`) with one random mutation of each of ``reasons``,
    latest check first; ``None`` when one does not apply."""
    for reason in sorted(reasons, reverse=True):
        frame = rng.choice(MUTATIONS[reason])(frame, rng)
        if frame is None:
            return None
    return frame.bytes()


def not_reduce_frames(frame, rng):
    """Frames built from the reduce frame ``frame`` (bytes) that are not reduce frames: a
    version 1 frame, another port, a wrong IPv4 checksum, a short frame."""
    h = parse(frame)
    bad_checksum = bytearray(frame)
    bad_checksum[25] ^= 1 << rng.randrange(8)
    return [build_wire_frame(replace(h, version=1), frame[64:]),
            build_wire_frame(replace(h, dst_port=h.dst_port ^ 1), frame[64:]),
            bytes(bad_checksum), frame[:rng.randrange(1, 64)]]


def node_stream(ring, rank, rng, *, mutated=0.5, combined=0.1, other=0.05):
    """What node ``rank`` receives: its ring frames in order, each preceded, with
    probability ``mutated``, by a mutated copy failing a check (the checks in turns, in a
    random order; with probability ``combined`` a later check too), and with ``other`` by
    a frame that is not a reduce frame. Returns ``[(frame, intended)]``: ``intended`` is
    the reason the mutation aims at, ``None`` for a frame that is not a reduce frame and
    ``ReduceReason.NONE`` for a ring frame."""
    receiver = ring.receiver(rank)
    turns = []
    out = []
    for frame in ring.received(rank):
        if rng.random() < mutated:
            if not turns:
                turns = rng.sample(list(MUTATIONS), len(MUTATIONS))
            picked = [turns[0]]
            later = [r for r in MUTATIONS if r > turns[0]]
            if later and rng.random() < combined:
                picked.append(rng.choice(later))      # the turn's check still fails first
            bad = mutate(Frame.of(frame, receiver), picked, rng)
            if bad is not None:          # else the check's turn waits for the next frame
                turns.pop(0)
                out.append((bad, min(picked)))
        if rng.random() < other:
            out.append((rng.choice(not_reduce_frames(frame, rng)), None))
        out.append((frame, ReduceReason.NONE))
        receiver.receive(frame)
    return out


def rng_of(*key):
    """A ``random.Random`` seeded from ``key`` (ints and strings)."""
    return random.Random(repr(key))


#: Header bytes the frame-out writes itself: lengths, checksums, flags, n, 56–63.
_WRITTEN = [16, 17, 24, 25, 38, 39, 40, 41, 45, 46, 47, *range(56, 64)]


def template_of(frame, rng):
    """The frame's header with the bytes the frame-out writes made garbage."""
    header = bytearray(frame[:64])
    for b in _WRITTEN:
        header[b] = rng.randrange(256)
    return int.from_bytes(header, "little")


def edge_tensors(rng, nodes, elements, codec, param):
    """Random tensors with a share of edge values (±0, subnormals, ±inf, NaN) and values
    beyond the largest level (clamped codes)."""
    xs = []
    for _ in range(nodes):
        x = rng.normal(size=elements).astype(np.float32)
        edge = rng.random(elements) < 0.15
        x[edge] = EDGE_F32_BITS[rng.integers(0, len(EDGE_F32_BITS), int(edge.sum()))].view(
            np.float32)
        big = rng.random(elements) < 0.1
        x[big] = np.float32(1e6) * np.sign(rng.normal(size=int(big.sum())))
        xs.append(x)
    return xs


def lane_config(case, nodes, rank=0, elements=0, *, seed=0, enable=True):
    """The reduce lane's ``cfg`` (its stages') for node ``rank`` of a ring of ``case`` whose
    base seed is ``seed``, as software writes it."""
    s = SETTINGS[case]
    chunk = chunk_size(elements, nodes)
    return {"enable": int(enable), "nodes": nodes, "rank": rank,
            "codec": codec_info(case.split("-")[0]).id, "param": s.get("param", 0),
            "stochastic": int(s.get("stochastic", False)),
            "scale": f32_bits(s.get("scale", 1.0)), "aux": f32_bits(s.get("aux", 1.0)),
            "elements": elements, "chunk": chunk,
            "chunks": -(-elements // chunk) if chunk else 0, "seed": (seed + rank) % 2**32}


def contribution_mutations(frame):
    """The contribution frame ``frame`` made to fail each check of section 8.5 (but
    ``disabled``): ``{ContributionReason: [frames]}``, each frame failing that check first
    (``length``: an ``n`` its length disagrees with, and ``n`` = 0 in a header alone)."""
    h = parse(frame)
    fields = ReduceFields.of(h)
    values = np.frombuffer(frame[64:], np.float32)

    def build(**kw):
        return build_host_frame(replace(h, **kw), values)
    return {
        ContributionReason.LENGTH: [
            frame[:46] + (h.n + 1).to_bytes(2, "little") + frame[48:],
            build_host_frame(h, np.zeros(0, np.float32))],
        ContributionReason.FLAGS: [build(flags=h.flags | FLAG_FLUSH),
                                   build(flags=h.flags | FLAG_GATHER)],
        ContributionReason.SETTINGS: [build(aux_bits=h.aux_bits ^ 1),
                                      build(param=h.param ^ 1)],
        ContributionReason.NODES: [build(seed=replace(fields, nodes=fields.nodes + 1)
                                         .seed_word)],
        ContributionReason.FIELDS: [build(seed=replace(fields, width=31).seed_word),
                                    build(seed=replace(fields, contributions=1).seed_word)],
        ContributionReason.OFFSET: [build(offset=h.offset + 1),
                                    build(seed=replace(fields, origin=fields.origin ^ 1)
                                          .seed_word)],
    }


_LAST_AT = data.Layout.cast(AxisBeat)["last"].offset


def by_chunk_and_phase(frames):
    """Ring frames (bytes) by their chunk and phase, ``(origin, gather)``, in order within
    each: what a link must carry, frames of different ones alternating as they may."""
    out = {}
    for f in frames:
        g = ReduceFields.of(parse(f))
        out.setdefault((g.origin, g.gather), []).append(f)
    return out


def frames_of_beats(beats):
    """A stream's beats (ints of :data:`AxisBeat`) cut into frames at ``last``; none may be
    left unfinished."""
    frames, frame = [], []
    for b in beats:
        frame.append(b)
        if (b >> _LAST_AT) & 1:
            frames.append(frame)
            frame = []
    assert frame == [], "a frame left unfinished"
    return frames
