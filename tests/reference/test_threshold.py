"""The numpy reference of codec 7 ``threshold``: keep rule, layouts, sizing, decode rule."""

import struct
from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.threshold import decode_payload, encode_payload, keep_mask
from squeezenic_hw.sim.vectors import EDGE_F32_BITS, sparse_gradient
from squeezenic_hw.spec.codecs import codec_info, f32_bits
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    classify_host_frame,
    classify_wire_frame,
    parse,
)
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, HEADER_LEN
from squeezenic_hw.spec.threshold import (
    BITMAP,
    INDEX_LIST,
    choose_layout,
    fits,
    payload_size,
    values_count,
)


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def test_registry():
    info = codec_info("threshold")
    assert info.id == 7 and codec_info(7) is info and info.variable
    with pytest.raises(ValueError, match="depends"):
        info.bits_per_element(0)


@pytest.mark.parametrize("scale_bits", [0x3F800000, 0x00000001, 0x80000000, 0x00000000,
                                        0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00001,
                                        0x7F7FFFFF])
def test_keep_mask_is_ieee_abs_greater(scale_bits):
    """abs(x) > scale over every edge value, compared in exact arithmetic (Python floats)."""
    x = np.concatenate([EDGE_F32_BITS, EDGE_F32_BITS ^ np.uint32(0x80000000),
                        np.array([scale_bits, scale_bits ^ 0x80000000, scale_bits + 1,
                                  (scale_bits - 1) & 0xFFFFFFFF], dtype=np.uint32)])
    xs = x.view(np.float32)
    s = f32([scale_bits])[0]
    expected = [(not np.isnan(v)) and (not np.isnan(s)) and abs(float(v)) > float(s)
                for v in xs]
    assert keep_mask(xs, s).tolist() == expected


def test_nan_never_kept_inf_kept():
    x = f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7F800000, 0xFF800000])
    assert keep_mask(x, np.float32(1e30)).tolist() == [False] * 4 + [True, True]
    assert not keep_mask(x, np.float32(np.nan)).any()


def test_layout_choice_and_tie():
    # n = 160: bitmap 20 bytes; k = 10: index 20 bytes -> tie picks the bitmap
    assert choose_layout(160, 10) == BITMAP
    assert choose_layout(160, 9) == INDEX_LIST
    assert choose_layout(1, 0) == INDEX_LIST   # k = 0: an empty index list
    assert payload_size(160, 9) == 18 + 36


@pytest.mark.parametrize("density", [0.0, 0.001, 0.01, 0.1, 0.5, 1.0])
def test_payload_round_trip(density):
    rng = np.random.default_rng(int(density * 1000))
    for n in [1, 7, 8, 9, 15, 16, 17, 100, 363, 1000, 5000]:
        x = sparse_gradient(rng, n, density)
        keep = keep_mask(x, 1.0)
        layout, payload = encode_payload(x, keep)
        assert layout == choose_layout(n, keep.sum())
        assert len(payload) == payload_size(n, keep.sum())
        assert values_count(n, layout, len(payload)) == keep.sum()
        d = decode_payload(payload, n, layout)
        assert not d.count_error and not d.layout_error
        assert np.array_equal(d.values.view(np.uint32),
                              np.where(keep, x.view(np.uint32), 0))


def test_decode_rule_for_inconsistent_payloads():
    v = np.array([1.5, -2.5, 3.5, 7.0], dtype="<f4")
    # bitmap: 3 set bits, 2 values -> the third set bit decodes to +0.0
    d = decode_payload(bytes([0b1011]) + v[:2].tobytes(), 4, BITMAP)
    assert d.values.tolist() == [1.5, -2.5, 0.0, 0.0] and d.count_error
    # bitmap: padding bit 5 set with n = 4: ignored, counted as a layout error
    d = decode_payload(bytes([0b100001]) + v[:1].tobytes(), 4, BITMAP)
    assert d.values.tolist() == [1.5, 0, 0, 0] and d.layout_error and not d.count_error
    # index list: 5, 2 (not above 5: unused), 9 (>= n: unused), 6 -> bits {5, 6}
    idx = struct.pack("<4H", 5, 2, 9, 6)
    d = decode_payload(idx + v.tobytes(), 8, INDEX_LIST)
    assert d.values.tolist() == [0, 0, 0, 0, 0, 1.5, -2.5, 0]
    assert d.layout_error and d.count_error


def _host(values, scale, **kw):
    return build_host_frame(Header(codec=7, scale_bits=f32_bits(np.float32(scale)), **kw),
                            values)


@pytest.mark.parametrize("mtu", [69, 130, 200, 1518, 9600])
@pytest.mark.parametrize("density", [0.0, 0.01, 0.3, 1.0])
def test_tx_frames_fit_and_are_full(mtu, density):
    """Every wire frame fits the MTU; a frame closed 'full' could not take its successor."""
    rng = np.random.default_rng([mtu, int(density * 100)])
    n = 20000 if density < 0.1 else 3000
    x = sparse_gradient(rng, n, density)
    keep = keep_mask(x, 1.0)
    host = [_host(x[i:i + 363], 1.0, offset=i) for i in range(0, n, 363)]
    out, counters = lr.tx(host, mtu=mtu, codecs=["threshold"])
    assert all(len(f) <= mtu for f in out)
    pos = 0
    for j, f in enumerate(out):
        h = parse(f)
        assert h.offset == pos and h.param == choose_layout(h.n, keep[pos:pos + h.n].sum())
        pos += h.n
        if j < len(out) - 1:   # no flush, one stream: all but the last close full
            k = keep[pos - h.n:pos + 1].sum()
            assert not fits(h.n + 1, k, mtu)   # the next element did not fit
    assert pos == n and counters["elements"] == n
    assert counters["close_full"] == len(out) - 1 and counters["close_end"] == 1
    back, _ = lr.rx(out, codecs=["threshold"])
    got = np.concatenate([np.frombuffer(b[HEADER_LEN:], dtype="<u4") for b in back])
    assert np.array_equal(got, np.where(keep, x.view(np.uint32), 0))


def test_tx_flush_straddle_and_mismatch():
    x = np.full(100, 5.0, dtype=np.float32)
    a = _host(x, 1.0, offset=0)
    b = _host(x, 1.0, offset=100, flags=FLAG_FLUSH)
    c = _host(x, 2.0, offset=200)              # other scale: mismatch
    out, counters = lr.tx([a, b, c], mtu=600, codecs=["threshold"])
    # 600-byte frames hold 129 kept values (17 + 516 = 533; 130 -> 17 + 520 = 537 fits too)
    ns = [parse(f).n for f in out]
    assert sum(ns) == 300 and counters["close_full"] >= 1 and counters["close_flush"] == 1
    assert [bool(parse(f).flush) for f in out].count(True) == 1


def test_tx_rejects_tiny_mtu_with_threshold():
    with pytest.raises(ValueError, match="mtu"):
        lr.tx([], mtu=68, codecs=["threshold"])


def test_classification():
    host = _host(np.ones(4, dtype=np.float32), 0.5)
    assert classify_host_frame(host, codecs_built_in={7})[1] is None
    assert classify_host_frame(host)[1] is BypassReason.CODEC          # not built by default
    bad = build_host_frame(replace(parse(host), param=1), np.ones(4, dtype=np.float32))
    assert classify_host_frame(bad, codecs_built_in={7})[1] is BypassReason.PARAM
    h = Header(codec=7, flags=FLAG_ENCODED, n=20)
    ok = build_wire_frame(h, bytes(3) + bytes(8))              # bitmap 3 bytes + 2 values
    assert classify_wire_frame(ok, codecs_built_in={7})[1] is None
    for payload, param in [(bytes(3) + bytes(7), 0), (bytes(2), 0), (bytes(7), 1)]:
        f = build_wire_frame(replace(h, param=param), payload)
        assert classify_wire_frame(f, codecs_built_in={7})[1] is BypassReason.LENGTH
    f = build_wire_frame(replace(h, param=2), bytes(3))
    assert classify_wire_frame(f, codecs_built_in={7})[1] is BypassReason.PARAM
    empty = build_wire_frame(replace(h, param=1), b"")          # index list, k = 0
    assert classify_wire_frame(empty, codecs_built_in={7})[1] is None
