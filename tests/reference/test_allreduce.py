"""The numpy reference of the ring all-reduce (docs/wire-format.md section 8)."""

import numpy as np
import pytest

from squeezenic_hw.reference.allreduce import add_f32, allreduce, integer_hop, signed_codes
from squeezenic_hw.reference.codecs import decode, encode, from_bits, mul_f32, unpack
from squeezenic_hw.spec.frames import parse
from squeezenic_hw.spec.reduce import (
    REDUCE_FLAGS_RESERVED,
    REDUCE_VERSION,
    ReduceFields,
    chunk_bounds,
    partial_width,
    reduce_frame_length,
    ring_order,
    sums_per_frame,
)

from support.reduce_frames import SETTINGS


def _codec(case):
    return case.split("-")[0]


def _tensors(rng, nodes, elements, spread=1.0):
    return [(rng.normal(size=elements) * spread).astype(np.float32) for _ in range(nodes)]


def _bits(x):
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def test_chunks_cover_the_tensor_in_ring_order():
    assert [chunk_bounds(5, 4, c) for c in range(4)] == [(0, 2), (2, 4), (4, 5), (5, 5)]
    assert [chunk_bounds(2, 3, c) for c in range(3)] == [(0, 1), (1, 2), (2, 2)]
    assert ring_order(1, 4) == [1, 0, 3, 2]


def test_partial_width_is_what_the_sum_needs():
    assert partial_width("fixed", 8, 4) == 10 and partial_width("qsgd", 2, 2) == 3
    assert partial_width("fixed", 16, 16) == 20 and partial_width("fixed", 8, 5) == 11
    assert [partial_width("sign", 0, n) for n in (2, 3, 4, 7, 8, 16)] == [2, 2, 3, 3, 4, 5]
    assert partial_width("raw", 0, 8) == 32 and partial_width("natural", 0, 3) == 9
    assert sums_per_frame(10, 1518) == 1163


@pytest.mark.parametrize("nodes", [2, 3, 4, 8])
@pytest.mark.parametrize("elements", [1, 3, 1000, 1001])
def test_raw_is_the_fp32_sum_in_ring_order(nodes, elements):
    rng = np.random.default_rng(nodes * 7 + elements)
    xs = _tensors(rng, nodes, elements)
    result = allreduce(xs, "raw")
    expected = np.zeros(elements, dtype=np.float32)
    for c in range(nodes):
        lo, hi = chunk_bounds(elements, nodes, c)
        acc = xs[c][lo:hi]
        for k in range(1, nodes):
            acc = add_f32(acc, xs[(c + k) % nodes][lo:hi])
        expected[lo:hi] = acc
    for r in range(nodes):
        assert np.array_equal(_bits(result.results[r]), _bits(expected))


@pytest.mark.parametrize("case", ["fixed", "fixed-stochastic", "qsgd", "qsgd-stochastic"])
@pytest.mark.parametrize("nodes", [2, 3, 8])
def test_integer_sums_do_not_depend_on_chunks(case, nodes):
    """The codes summed are each node's encode of its whole tensor (seed + rank): the sum
    is that of the codes, whatever the chunking, and the host gets fl32(S · aux)."""
    kw = SETTINGS[case]
    rng = np.random.default_rng(nodes)
    xs = _tensors(rng, nodes, 777, spread=2.0)
    result = allreduce(xs, _codec(case), seed=1234, **kw)
    total = sum(signed_codes(encode(x, _codec(case), seed=1234 + r, **kw), _codec(case),
                             kw["param"]) for r, x in enumerate(xs))
    expected = from_bits(mul_f32(total.astype(np.float32), np.float32(kw["aux"])))
    assert np.array_equal(_bits(result.results[0]), _bits(expected))
    # a different seed draws differently (stochastic) or not at all (deterministic)
    other = allreduce(xs, _codec(case), seed=99, **kw)
    assert np.array_equal(other.results[0], result.results[0]) != kw.get("stochastic", False)


@pytest.mark.parametrize("nodes", [2, 3, 4, 8])
def test_sign_counts_the_ones(nodes):
    rng = np.random.default_rng(nodes)
    xs = _tensors(rng, nodes, 100)
    xs[0][:4] = [0.0, -0.0, np.inf, -np.inf]
    result = allreduce(xs, "sign", scale=0.25, aux=-0.75)
    n1 = sum(np.signbit(x).astype(np.int64) for x in xs)
    n0 = nodes - n1
    expected = (n0 * 0.25 - n1 * 0.75).astype(np.float32)   # exact in fp32 here
    assert np.array_equal(result.results[0], expected)
    assert np.isnan(result.bound).all()


@pytest.mark.parametrize("case", list(SETTINGS))
@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_results_within_the_documented_bound(case, nodes):
    rng = np.random.default_rng(len(case) * 31 + nodes)
    xs = _tensors(rng, nodes, 513)
    result = allreduce(xs, _codec(case), seed=7, **SETTINGS[case])
    error = np.abs(result.results[0].astype(np.float64) - result.exact)
    has_bound = ~np.isnan(result.bound)
    if _codec(case) != "sign":
        assert has_bound.mean() > 0.9
    assert (error[has_bound] <= result.bound[has_bound]).all()
    if _codec(case) == "raw":
        assert (result.bound <= 2.0**-24 * (nodes - 1) * np.max(np.abs(result.exact)) * 4).all()


@pytest.mark.parametrize("case", ["raw", "fp16", "natural-stochastic", "fixed", "sign"])
def test_link_frames_carry_the_partial_sums(case):
    """Every link frame is a version 2 frame of the ring's width; a reduce-phase frame's
    origin plus its contributions is its receiver; the gather frames decode to the
    result; a chunk's frames are contiguous and no longer than the MTU."""
    nodes, elements, mtu = 4, 1500, 512
    kw = SETTINGS[case]
    codec = _codec(case)
    rng = np.random.default_rng(3)
    xs = _tensors(rng, nodes, elements)
    result = allreduce(xs, codec, seed=5, mtu=mtu, **kw)
    width = result.width
    gathered = {}
    for sender, frames in enumerate(result.links):
        seen = {}
        for frame in frames:
            assert len(frame) <= mtu
            h = parse(frame)
            f = ReduceFields.of(h)
            assert h.version == REDUCE_VERSION and h.encoded and f.nodes == nodes
            assert f.width == width == partial_width(codec, kw.get("param", 0), nodes)
            assert len(frame) == reduce_frame_length(width, h.n)
            assert h.flags & REDUCE_FLAGS_RESERVED == 0
            lo, hi = chunk_bounds(elements, nodes, f.origin)
            assert lo <= h.offset and h.offset + h.n <= hi
            key = (f.origin, f.gather)
            assert h.offset == seen.get(key, lo)            # in offset order, contiguous
            seen[key] = h.offset + h.n
            if f.gather:
                assert f.contributions == nodes
                assert (sender + 1) % nodes != (f.origin - 1) % nodes
                gathered.setdefault(f.origin, []).append(
                    (h.offset, unpack(frame[64:], width, h.n)))
            else:
                assert 1 <= f.contributions < nodes
                assert (f.origin + f.contributions) % nodes == (sender + 1) % nodes
        assert all(seen[key] == chunk_bounds(elements, nodes, key[0])[1] for key in seen)
    # every chunk's gather is on N − 1 links; its payload is what the hosts decode
    for parts in gathered.values():
        assert len({o for o, _ in parts}) * (nodes - 1) == len(parts)
        for offset, codes in parts:
            if codec in ("fixed", "qsgd"):
                s = np.where(codes >= 1 << (width - 1), codes.astype(np.int64) - (1 << width),
                             codes)
                values = from_bits(mul_f32(s.astype(np.float32), np.float32(kw["aux"])))
            elif codec == "sign":
                n1 = codes.astype(np.float32)
                values = (np.float32(nodes) - n1) * np.float32(kw["scale"]) + n1 * np.float32(
                    kw["aux"])
            else:
                values = decode(codes, codec, **{k: v for k, v in kw.items()
                                                 if k != "stochastic"})
            got = result.results[0][offset:offset + codes.size]
            assert np.array_equal(_bits(values), _bits(got))


@pytest.mark.parametrize("case", ["raw", "fp16", "bf16", "natural", "fixed", "qsgd"])
def test_edge_values(case):
    """±0, subnormals, ±inf and NaN: NaN sums are the canonical NaN; no bound where the
    sum is not finite; codes that clamp have no bound."""
    specials = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-40, np.inf, -np.inf, np.nan,
                         3.0e38, -3.0e38, 65504.0, 1e9], dtype=np.float32)
    xs = [specials, specials[::-1].copy(), -specials]
    result = allreduce(xs, _codec(case), **SETTINGS[case])
    out = result.results[1]
    nan = np.isnan(out)
    assert (_bits(out)[nan] == 0x7FC00000).all()
    assert np.isnan(result.bound[~np.isfinite(result.exact)]).all()
    if _codec(case) == "raw":
        assert nan[[5, 6, 7]].all() or nan[7]
    error = np.abs(out.astype(np.float64) - result.exact)
    ok = ~np.isnan(result.bound)
    assert (error[ok] <= result.bound[ok]).all()


def test_fewer_elements_than_nodes_and_empty_chunks():
    xs = [np.array([1.0, 2.0], dtype=np.float32) * (r + 1) for r in range(3)]
    result = allreduce(xs, "raw")
    assert result.results[2].tolist() == [6.0, 12.0]
    # chunk 2 is empty: no frame of it on any link
    assert all(ReduceFields.of(parse(f)).origin != 2 for frames in result.links
               for f in frames)
    assert allreduce([np.zeros(0, np.float32)] * 2, "fp16").results[0].size == 0


@pytest.mark.parametrize("bad, match", [
    (dict(codec="threshold"), "cannot be reduced"),
    (dict(nodes=1), "nodes"),
    (dict(nodes=17), "nodes"),
    (dict(codec="fixed", param=1), "param"),
    (dict(mtu=67), "mtu"),
])
def test_bad_parameters_are_named(bad, match):
    nodes = bad.pop("nodes", 2)
    codec = bad.pop("codec", "raw")
    xs = [np.ones(4, np.float32)] * nodes
    with pytest.raises(ValueError, match=match):
        allreduce(xs, codec, **bad)
    with pytest.raises(ValueError, match="one length"):
        allreduce([np.ones(4, np.float32), np.ones(5, np.float32)], "raw")


@pytest.mark.parametrize("case", ["fixed", "fixed-stochastic", "qsgd", "qsgd-stochastic",
                                  "sign"])
@pytest.mark.parametrize("nodes, elements", [(2, 1), (3, 2), (4, 1001), (8, 203)])
def test_a_ring_of_hops_sends_the_links_frames(case, nodes, elements):
    """Every frame a node sends but its own chunk's first ones is a hop of a frame it
    receives, with its own codes of those offsets; the finishing node's hop is the gather
    frame."""
    rng = np.random.default_rng(nodes * 31 + elements)
    xs = _tensors(rng, nodes, elements, spread=4.0)
    xs[0][:1] = np.float32(1e30)               # a clamped code
    settings = SETTINGS[case]
    codec = _codec(case)
    result = allreduce(xs, codec, seed=9, mtu=90, **settings)
    for r in range(nodes):
        sent = {}
        for f in result.links[r]:
            fields = ReduceFields.of(parse(f))
            sent[fields.origin, fields.gather, parse(f).offset] = f
        made = 0
        for f in result.links[(r - 1) % nodes]:
            h = parse(f)
            fields = ReduceFields.of(h)
            if fields.gather:
                continue
            codes = encode(xs[r][h.offset:h.offset + h.n], codec, seed=9 + r,
                           offset=h.offset, **settings)
            out = integer_hop(f, codes)
            key = (fields.origin, fields.contributions + 1 == nodes, h.offset)
            assert out == sent[key]
            made += 1
        # not hops: the own chunk's first frames and the gather frames forwarded
        started = sum(1 for (origin, gather, _) in sent
                      if (origin != (r + 1) % nodes if gather else origin == r))
        assert made == len(sent) - started


def test_a_hop_takes_the_frames_codes():
    result = allreduce(_tensors(np.random.default_rng(1), 3, 10), "sign")
    frame = result.links[0][0]
    with pytest.raises(ValueError, match="codes"):
        integer_hop(frame, np.zeros(parse(frame).n + 1, dtype=np.uint32))
