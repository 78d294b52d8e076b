"""The ring all-reduce in the NICs, in numpy: what every node's host receives, the reduce
frames on every link, one node's hop of an integer codec (:func:`integer_hop`), and how
far the result may be from the exact sum (``docs/wire-format.md`` section 8,
:mod:`squeezenic_hw.spec.reduce`).

Integer codecs (``fixed``, ``qsgd``, ``sign``) sum their codes exactly; float codecs
(``raw``, ``fp16``, ``bf16``, ``natural``) decode, add in fp32 and encode again at every
hop. Node ``r`` encodes with seed ``seed + r``.
"""

import math
from dataclasses import dataclass, replace

import numpy as np

from squeezenic_hw.spec.codecs import codec_info, f32_bits, validate_param
from squeezenic_hw.spec.frames import Header, build_host_frame, build_wire_frame, parse
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_MTU,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    MAX_PKT_LEN,
)
from squeezenic_hw.spec.reduce import (
    REDUCE_VERSION,
    ReduceFields,
    check_nodes,
    chunk_bounds,
    contribution_fields,
    host_flags,
    host_segments,
    partial_width,
    reduce_family,
    result_fields,
    ring_order,
    sums_per_frame,
)

from .codecs import CANONICAL_NAN, decode, encode, from_bits, mul_f32, pack, unpack

__all__ = ["AllReduceResult", "allreduce", "signed_codes", "add_f32", "float_error_terms",
           "integer_hop", "integer_values", "contribution_frames", "result_frames"]


@dataclass(frozen=True)
class AllReduceResult:
    """The outcome of :func:`allreduce`.

    Attributes
    ----------
    results : list of numpy.ndarray
        What node ``r``'s host receives (float32, E elements); the same on every node.
    exact : numpy.ndarray
        The exact sum of the hosts' tensors (float64).
    bound : numpy.ndarray
        Per element, how far ``results`` may be from ``exact`` (section 8.2; float64);
        NaN where the codec has no bound (``sign``), a code clamps or a value is not
        finite.
    links : list of list of bytes
        ``links[r]``: the reduce frames node ``r`` sends to node ``r + 1``, step by step:
        its reduce-phase frames of chunks ``r``, ``r − 1``, …, then its gather-phase
        frames. Hardware may interleave chunks and phases differently; each frame's
        bytes are fixed.
    width : int
        Bits of a partial sum on the wire.
    """
    results: list
    exact: np.ndarray
    bound: np.ndarray
    links: list
    width: int


def signed_codes(codes, codec, param):
    """The integers a ``fixed``/``qsgd``/``sign`` node adds: the two's complement value,
    the signed level ±L, or the code bit (int64)."""
    name = codec_info(codec).name
    codes = np.asarray(codes, dtype=np.int64)
    if name == "fixed":
        return np.where(codes >= 1 << (param - 1), codes - (1 << param), codes)
    if name == "qsgd":
        level = codes & ((1 << (param - 1)) - 1)
        return np.where(codes >> (param - 1) & 1, -level, level)
    if name == "sign":
        return codes & 1
    raise ValueError(f"codec {name!r} has no integer codes to sum")


def integer_hop(frame, codes, *, header=None):
    """One reduce-phase hop of an integer codec: the frame a node sends its successor for a
    reduce frame it takes (section 8.1).

    The frame's sums, each plus the signed value of the node's code of the same offset
    (:func:`signed_codes`), at the frame's width w (the sum fits it: w is sized for N);
    ``contributions`` one more, and when that makes N the frame is the chunk's gather
    frame (``gather`` set). Offset, ``n`` and the codec fields are the frame's.

    Parameters
    ----------
    frame : bytes
        A reduce-phase frame of ``fixed``, ``qsgd`` or ``sign`` (section 8.3).
    codes : array_like
        The node's codes of the frame's ``n`` offsets, as its encoder makes them.
    header : Header, optional
        The node's addresses and ports (the frame's own if ``None``).

    Returns
    -------
    bytes
    """
    h = parse(frame)
    fields = ReduceFields.of(h)
    info = codec_info(h.codec)
    codes = np.asarray(codes).reshape(-1)
    if codes.size != h.n:
        raise ValueError(f"codes: the frame has {h.n} sums, got {codes.size} codes")
    mask = (1 << fields.width) - 1
    sums = unpack(frame[HEADER_LEN:], fields.width, h.n).astype(np.int64)
    sums = (sums + signed_codes(codes, info.name, h.param)) & mask
    k = fields.contributions + 1
    out = replace(fields, contributions=k, gather=k == fields.nodes)
    if header is not None:
        h = replace(header, version=h.version, codec=h.codec, param=h.param, n=h.n,
                    scale_bits=h.scale_bits, aux_bits=h.aux_bits, offset=h.offset)
    h = replace(h, flags=out.flags(h.flags & FLAG_STOCHASTIC), seed=out.seed_word)
    return build_wire_frame(h, pack(sums, fields.width))


#: (ε, η) of section 8.2: relative and absolute rounding of one encode, by codec (and
#: stochastic for ``natural``).
_ROUNDING = {
    ("raw", False): (0.0, 0.0), ("fp16", False): (2.0**-11, 2.0**-25),
    ("bf16", False): (2.0**-8, 2.0**-134), ("natural", False): (1 / 3, 2.0**-127),
    ("natural", True): (1.0, 2.0**-126),
}


def add_f32(a, b):
    """``fl32(a + b)``: numpy float32 sum, a NaN result the canonical NaN (section 8.2)."""
    with np.errstate(all="ignore"):
        total = np.asarray(a, dtype=np.float32) + np.asarray(b, dtype=np.float32)
    return np.where(np.isnan(total), from_bits(CANONICAL_NAN), total).astype(np.float32)


def float_error_terms(codec, stochastic):
    """(ε, η) of one encode of a float codec (section 8.2)."""
    name = codec_info(codec).name
    return _ROUNDING[(name, bool(stochastic) and name == "natural")]


def allreduce(tensors, codec, *, param=0, scale=1.0, aux=1.0, seed=0, stochastic=False,
              mtu=DEFAULT_MTU, header=None):
    """Run the ring all-reduce of ``tensors`` (one per node, each E float32 elements).

    Parameters
    ----------
    tensors : sequence of array_like
        Node ``r``'s host tensor; 2 … 16 of them, all of one length E ≥ 0.
    codec, param, scale, aux, seed, stochastic :
        The codec settings every node shares (section 4); node ``r`` draws with
        ``seed + r`` (mod 2**32).
    mtu : int
        Largest reduce frame in bytes: a chunk's frames hold
        :func:`~squeezenic_hw.spec.reduce.sums_per_frame` sums.
    header : Header, optional
        Addresses and ports of the frames (``Header()`` if ``None``); the SqueezeNIC
        fields are set here.

    Returns
    -------
    AllReduceResult
    """
    with np.errstate(invalid="ignore", over="ignore"):
        return _allreduce(tensors, codec, param, scale, aux, seed, stochastic, mtu, header)


def _check_mtu(mtu):
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= MAX_PKT_LEN:
        raise ValueError(f"mtu must be an int from 68 to {MAX_PKT_LEN}, got {mtu!r}")
    return mtu


def _allreduce(tensors, codec, param, scale, aux, seed, stochastic, mtu, header):
    xs = [np.ascontiguousarray(np.asarray(t, dtype=np.float32)).reshape(-1) for t in tensors]
    nodes = check_nodes(len(xs))
    if len({x.size for x in xs}) != 1:
        raise ValueError(f"tensors must have one length, got {[x.size for x in xs]}")
    info = codec_info(codec)
    family = reduce_family(info)
    param = validate_param(info.name, param)
    stochastic = bool(stochastic) and info.stochastic
    _check_mtu(mtu)
    width = partial_width(info, param, nodes)
    elements = xs[0].size
    settings = dict(param=param, scale=scale, aux=aux)
    base = replace(Header() if header is None else header, version=REDUCE_VERSION,
                   codec=info.id, param=param, scale_bits=f32_bits(scale),
                   aux_bits=f32_bits(aux))

    def node_codes(r, lo, hi, values):
        return encode(values, info.name, seed=(seed + r) % 2**32, offset=lo,
                      stochastic=stochastic, **settings)

    def frames(codes, lo, k, origin, gather):
        fields = ReduceFields(contributions=k, width=width, nodes=nodes, origin=origin,
                              gather=gather)
        out = []
        step = sums_per_frame(width, mtu)
        for start in range(0, codes.size, step):
            part = codes[start:start + step]
            h = replace(base, flags=fields.flags(stochastic), n=part.size,
                        seed=fields.seed_word, offset=lo + start)
            out.append(build_wire_frame(h, pack(part, width)))
        return out

    result = np.zeros(elements, dtype=np.float32)
    bound = np.full(elements, np.nan)
    reduce_frames = {}      # (sender, chunk) -> frames of the reduce phase
    gather = {}             # chunk -> the frames of its gather phase (on every link)
    for c in range(nodes):
        lo, hi = chunk_bounds(elements, nodes, c)
        if lo == hi:
            continue
        order = [(c + k) % nodes for k in range(nodes)]
        if family == "integer":
            total = np.zeros(hi - lo, dtype=np.int64)
            clamped = np.zeros(hi - lo, dtype=bool)
            for k, r in enumerate(order):
                s = signed_codes(node_codes(r, lo, hi, xs[r][lo:hi]), info.name, param)
                total += s
                if info.name != "sign":
                    # beyond the largest level by more than the rounding: clamped
                    y = np.abs(xs[r][lo:hi].astype(np.float64)) * float(np.float32(scale))
                    clamped |= y > 2 ** (param - 1) - 1 + (0.0 if stochastic else 0.5)
                if k < nodes - 1:
                    reduce_frames[r, c] = frames(total & ((1 << width) - 1), lo, k + 1, c,
                                                 False)
            gather[c] = frames(total & ((1 << width) - 1), lo, nodes, c, True)
            result[lo:hi], bound[lo:hi] = _integer_result(
                info.name, total, clamped, [x[lo:hi] for x in xs], nodes, scale, aux,
                stochastic)
        else:
            eps, eta = float_error_terms(info.name, stochastic)
            r = order[0]
            value = xs[r][lo:hi]
            p = node_codes(r, lo, hi, value)
            err = eps * np.abs(value.astype(np.float64)) + eta
            for k, r in enumerate(order[1:], start=1):
                reduce_frames[order[k - 1], c] = frames(p, lo, k, c, False)
                value = add_f32(decode(p, info.name, **settings), xs[r][lo:hi])
                err += 2.0**-24 * np.abs(value.astype(np.float64))
                err += eps * np.abs(value.astype(np.float64)) + eta
                p = node_codes(r, lo, hi, value)
            gather[c] = frames(p, lo, nodes, c, True)
            result[lo:hi] = decode(p, info.name, **settings)
            bound[lo:hi] = err
    exact = _exact_sum(xs)
    with np.errstate(invalid="ignore"):
        bound[~np.isfinite(exact) | ~np.isfinite(result.astype(np.float64))] = np.nan

    links = []
    for r in range(nodes):
        sent = []
        for c in ring_order(r, nodes)[:nodes - 1]:        # reduce phase: r, r−1, …
            sent += reduce_frames.get((r, c), [])
        for s in range(nodes - 1):                        # gather phase: r+1, r, …
            sent += gather.get((r + 1 - s) % nodes, [])
        links.append(sent)
    return AllReduceResult(results=[result.copy() for _ in range(nodes)], exact=exact,
                           bound=bound, links=links, width=width)


def integer_values(sums, codec, nodes, scale, aux):
    """What a host receives for finished integer sums (section 8.2): fl32(S · ``aux``)
    (``fixed``, ``qsgd``; S the signed sums), or fl32(fl32(n0 · ``scale``) + fl32(n1 ·
    ``aux``)) (``sign``; n1 the sums, n0 = N − n1); every NaN the canonical NaN. Float32.
    """
    name = codec_info(codec).name
    scale32, aux32 = np.float32(scale), np.float32(aux)
    sums = np.asarray(sums, dtype=np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        if name == "sign":
            n1 = sums.astype(np.float32)
            n0 = np.float32(nodes) - n1
            return add_f32(from_bits(mul_f32(n0, scale32)), from_bits(mul_f32(n1, aux32)))
        return from_bits(mul_f32(sums.astype(np.float32), aux32))


def _exact_sum(xs):
    """The sum of the tensors element by element, correctly rounded to float64
    (``math.fsum``: a plain float64 sum loses 1e-45 beside 3e38)."""
    if not xs[0].size:
        return np.zeros(0)
    rows = np.stack([x.astype(np.float64) for x in xs], axis=1)
    finite = np.isfinite(rows).all(axis=1)
    with np.errstate(invalid="ignore"):
        out = rows.sum(axis=1)                      # ±inf and NaN as they come
    out[finite] = [math.fsum(row) for row in rows[finite].tolist()]
    return out


def _integer_result(name, total, clamped, xs, nodes, scale, aux, stochastic):
    """The host values of an integer sum and their bound (section 8.2)."""
    scale32, aux32 = np.float32(scale), np.float32(aux)
    value = integer_values(total, name, nodes, scale, aux)
    if name == "sign":
        return value, np.full(total.size, np.nan)
    delta = 1.0 if stochastic else 0.5
    magnitude = np.sum(np.stack([np.abs(x.astype(np.float64)) for x in xs]), axis=0)
    bound = (nodes * delta * float(aux32) + 2.0**-22 * magnitude
             + 2.0**-24 * np.abs(value.astype(np.float64)))
    # the bound assumes aux = 1/scale and no clamped code
    reciprocal = abs(float(aux32) * float(scale32) - 1.0) <= 2.0**-22
    bound = np.where(clamped | (not reciprocal), np.nan, bound)
    return value, bound


def contribution_frames(tensor, rank, nodes, codec, *, param=0, scale=1.0, aux=1.0,
                        stochastic=False, max_host_elements=DEFAULT_HOST_ELEMENTS,
                        mtu=DEFAULT_MTU, header=None):
    """The contribution frames node ``rank``'s host sends (section 8.5): its ``tensor``
    segment by segment in the host's order
    (:func:`~squeezenic_hw.spec.reduce.host_segments` of the ring's reduce frames at
    ``mtu``), ``max_host_elements`` values a frame at most (a segment's last frame the
    rest).

    ``codec``, ``param``, ``scale``, ``aux`` and ``stochastic`` are the ring's settings
    (``stochastic`` cleared for a codec without stochastic rounding, as
    :func:`allreduce`); ``header`` gives the addresses and ports (``Header()`` if
    ``None``)."""
    x = np.ascontiguousarray(np.asarray(tensor, dtype=np.float32)).reshape(-1)
    nodes = check_nodes(nodes)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < nodes:
        raise ValueError(f"rank must be an int from 0 to {nodes - 1}, got {rank!r}")
    step = _check_host_elements(max_host_elements)
    base = _host_header(codec, param, scale, aux, header)
    stochastic = bool(stochastic) and codec_info(codec).stochastic
    per_frame = sums_per_frame(partial_width(codec, param, nodes), _check_mtu(mtu))
    out = []
    for c, lo, hi in host_segments(x.size, nodes, rank, per_frame):
        fields = contribution_fields(nodes, c)
        for start in range(lo, hi, step):
            part = x[start:min(start + step, hi)]
            h = replace(base, flags=host_flags(fields, stochastic), seed=fields.seed_word,
                        offset=start)
            out.append(build_host_frame(h, part))
    return out


def result_frames(result, rank, codec, *, param=0, scale=1.0, aux=1.0, stochastic=False,
                  max_host_elements=DEFAULT_HOST_ELEMENTS, header=None):
    """The result frames node ``rank``'s host receives (section 8.5) in the ring of
    ``result`` (an :class:`AllReduceResult` of these settings): for every gather frame
    the node makes (the chunk it finishes), then every one it takes, in the order of its
    links, its values in frames of at most ``max_host_elements``; ``header`` gives the
    node's addresses and ports (``Header()`` if ``None``, as :func:`allreduce`)."""
    nodes = len(result.links)
    step = _check_host_elements(max_host_elements)
    stochastic = bool(stochastic) and codec_info(codec).stochastic
    values = result.results[rank]
    base = _host_header(codec, param, scale, aux, header)
    taken = [f for f in result.links[(rank - 1) % nodes] if ReduceFields.of(parse(f)).gather]
    made = [f for f in result.links[rank]
            if (lambda g: g.gather and g.origin == (rank + 1) % nodes)(
                ReduceFields.of(parse(f)))]
    out = []
    for f in made + taken:
        h = parse(f)
        fields = result_fields(nodes, ReduceFields.of(h).origin)
        frame_header = replace(base, flags=host_flags(fields, stochastic),
                               seed=fields.seed_word)
        for start in range(h.offset, h.offset + h.n, step):
            part = values[start:min(start + step, h.offset + h.n)]
            out.append(build_host_frame(replace(frame_header, offset=start), part))
    return out


def _check_host_elements(value):
    most = (MAX_PKT_LEN - HEADER_LEN) // 4        # a host frame fits the longest frame
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(f"max_host_elements must be an int from 1 to {most}, got {value!r}")
    return value


def _host_header(codec, param, scale, aux, header):
    info = codec_info(codec)
    return replace(Header() if header is None else header, version=REDUCE_VERSION,
                   codec=info.id, param=validate_param(info.name, param),
                   scale_bits=f32_bits(scale), aux_bits=f32_bits(aux))
