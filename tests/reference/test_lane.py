"""The numpy reference of the TX and RX lanes."""

from dataclasses import replace

import numpy as np
import pytest

from squeezenic_hw.reference.codecs import decode, encode
from squeezenic_hw.reference.lane import TxStepper, rx, tx, tx_input, wire_capacity
from squeezenic_hw.spec.codecs import PRESETS, f32_bits, preset_params
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    build_wire_frame,
    classify_wire_frame,
    parse,
)
from squeezenic_hw.spec.header import FLAG_ENCODED, FLAG_FLUSH, FLAG_STOCHASTIC

from support.lane_scenarios import bad_host_frames

RNG = np.random.default_rng(3)
X = RNG.standard_normal(3000).astype(np.float32) * 2
X[[5, 77]] = [np.nan, np.inf]

CASES = [("raw", 0, False), ("fp16", 0, False), ("bf16", 0, False), ("fixed", 5, True),
         ("fixed", 16, False), ("qsgd", 3, True), ("qsgd", 9, False), ("sign", 0, False),
         ("natural", 0, True), ("natural", 0, False)]


def host_frames(x, codec, param=0, *, k=363, scale=1.5, aux=0.25, seed=11, offset=0,
                stochastic=False, flush_last=True, **kw):
    from squeezenic_hw.spec.codecs import codec_info
    base = Header(codec=codec_info(codec).id, param=param, scale_bits=f32_bits(scale),
                  aux_bits=f32_bits(aux), seed=seed, **kw)
    out = []
    for s in range(0, x.size, k):
        flags = (FLAG_STOCHASTIC if stochastic else 0) | (
            FLAG_FLUSH if flush_last and s + k >= x.size else 0)
        out.append(build_host_frame(replace(base, flags=flags, offset=offset + s), x[s:s + k]))
    return out


def gather(frames):
    hs = [parse(f) for f in frames]
    order = np.argsort([h.offset for h in hs], kind="stable")
    return np.concatenate([np.frombuffer(frames[i][64:], "<u4") for i in order])


def expected(x, codec, param, stochastic, scale=1.5, aux=0.25, seed=11, offset=0):
    c = encode(x, codec, param=param, scale=scale, aux=aux, seed=seed, offset=offset,
               stochastic=stochastic)
    return decode(c, codec, param=param, scale=scale, aux=aux).view(np.uint32)


@pytest.mark.parametrize("mtu", [1518, 9600])
@pytest.mark.parametrize("codec,param,stochastic", CASES)
def test_round_trip_every_codec(codec, param, stochastic, mtu):
    frames = host_frames(X, codec, param, stochastic=stochastic, k=250, offset=100)
    wire, c = tx(frames, mtu=mtu)
    assert c["elements"] == X.size and c["bypass_frames"] == 0
    assert all(len(w) <= mtu for w in wire)
    assert sum(parse(w).n for w in wire) == X.size
    back, c2 = rx(wire)
    assert c2["elements"] == X.size and all(parse(f).n <= 363 for f in back)
    assert np.array_equal(gather(back), expected(X, codec, param, stochastic, offset=100))


@pytest.mark.parametrize("name", list(PRESETS))
def test_round_trip_presets(name):
    p = preset_params(name, X)
    frames = host_frames(X, p["codec"], p["param"], stochastic=p["stochastic"],
                         scale=p["scale"], aux=p["aux"])
    back, _ = rx(tx(frames)[0])
    assert np.array_equal(gather(back), expected(X, p["codec"], p["param"], p["stochastic"],
                                                 scale=p["scale"], aux=p["aux"]))


def test_coalescing_and_straddling_offsets():
    x = X[:1000]
    frames = host_frames(x, "fp16", k=100, offset=7)
    wire, c = tx(frames, mtu=64 + 2 * 300)  # 300 elements per wire frame
    hs = [parse(w) for w in wire]
    assert [h.n for h in hs] == [300, 300, 300, 100]
    assert [h.offset for h in hs] == [7, 307, 607, 907]
    assert [h.flush for h in hs] == [False, False, False, True]
    assert all(h.encoded for h in hs) and c["close_full"] == 3 and c["close_flush"] == 1
    frames = host_frames(x, "fp16", k=170)  # frames straddle wire frame boundaries
    hs = [parse(w) for w in tx(frames, mtu=64 + 2 * 300)[0]]
    assert [(h.offset, h.n) for h in hs] == [(0, 300), (300, 300), (600, 300), (900, 100)]


def test_flush_closes_and_flush_only_on_its_wire_frame():
    x = X[:40]
    frames = host_frames(x[:20], "raw", k=10) + host_frames(x[20:], "raw", k=10, offset=20)
    wire, c = tx(frames)
    assert [(parse(w).offset, parse(w).n, parse(w).flush) for w in wire] == [
        (0, 20, True), (20, 20, True)]
    assert c["close_flush"] == 2
    frames = host_frames(x, "raw", k=30)  # flush frame straddles: only the last gets it
    wire, _ = tx(frames, mtu=64 + 4 * 25)
    assert [parse(w).flush for w in wire] == [False, True]


@pytest.mark.parametrize("change", [dict(seed=12), dict(scale=2.0), dict(codec="bf16"),
                                    dict(offset=51), dict(aux=3.0), dict(stochastic=True),
                                    dict(dst_port_src=1)])
def test_mismatch_closes(change):
    a = host_frames(X[:50], "fp16", flush_last=False)
    kw = dict(offset=50)
    if "dst_port_src" in change:
        kw["src_port"] = 1
    else:
        kw.update(change)
    codec = kw.pop("codec", "fp16")
    b = host_frames(X[50:100], codec, **kw)
    wire, c = tx(a + b)
    assert len(wire) == 2 and c["close_mismatch"] == 1
    assert parse(wire[0]).n == 50 and not parse(wire[0]).flush


def test_idle_timeout_and_end_of_input():
    frames = host_frames(X[:30], "raw", k=10, flush_last=False)
    beats = [-(-len(f) // 64) for f in frames]
    times = [0, beats[0], beats[0] + beats[1] + 100]
    wire, c = tx(frames, idle_timeout=100, times=times)
    assert [parse(w).n for w in wire] == [20, 10]
    assert c["close_idle"] == 1 and c["close_end"] == 1
    wire, c = tx(frames, idle_timeout=101, times=times)
    assert [parse(w).n for w in wire] == [30]
    assert [parse(w).n for w in tx(frames, times=times)[0]] == [30]


def test_frames_classified_once_coalesce_as_the_frames_on_any_times():
    """``tx_input`` does what does not depend on time once; ``tx`` on it gives what it
    gives on the frames, for every set of arrival cycles (timeouts fall elsewhere)."""
    rng = np.random.default_rng(8)
    frames = (host_frames(X[:900], "qsgd", 5, k=90, flush_last=False)
              + host_frames(X[:700], "threshold", k=70, flush_last=False)
              + list(bad_host_frames().values()) + host_frames(X[:400], "sign", k=40))
    frames = [frames[k] for k in rng.permutation(len(frames))]
    codecs = ["qsgd", "sign", "threshold"]
    once = tx_input(frames, codecs=codecs)
    beats = np.array([-(-len(f) // 64) for f in frames])
    for _ in range(6):
        steps = beats + rng.choice([0, 0, 0, 7, 8, 9, 40], size=len(frames))
        times = (np.cumsum(steps) - steps).tolist()
        want = tx(frames, codecs=codecs, idle_timeout=8, times=times, mtu=700)
        assert tx(once, codecs=codecs, idle_timeout=8, times=times, mtu=700) == want
        assert want[1]["close_idle"] > 0
    assert tx(once, codecs=codecs) == tx(frames, codecs=codecs)
    # one frame at a time, going back to a saved state and on with other cycles after it
    lane = TxStepper(codecs=codecs, idle_timeout=8, mtu=700)
    middle = len(frames) // 2
    for host, t in zip(once.frames[:middle], times, strict=False):
        lane.feed(host, t)
    saved = lane.save()
    for host, t in zip(once.frames[middle:], times[middle:], strict=True):
        lane.feed(host, t)
    lane.finish()
    assert (lane.out, lane.counters) == want
    lane.restore(saved)
    later = times[:middle] + [t + 50 for t in times[middle:]]
    for host, t in zip(once.frames[middle:], later[middle:], strict=True):
        lane.feed(host, t)
    lane.finish()
    assert (lane.out, lane.counters) == tx(frames, codecs=codecs, idle_timeout=8,
                                           times=later, mtu=700)
    with pytest.raises(ValueError, match="another port or other codecs"):
        tx(once, codecs=["qsgd", "sign"])
    with pytest.raises(ValueError, match="another port or other codecs"):
        tx(once, codecs=codecs, port=5000)


def test_every_bypass_reason_passes_unchanged_and_overtakes():
    bad = bad_host_frames()
    good = host_frames(X[:20], "raw", k=10, flush_last=False)
    frames = [good[0]] + list(bad.values()) + [good[1]]
    out, c = tx(frames)
    assert out[:-1] == list(bad.values())  # bypassed frames leave before the open wire frame
    assert parse(out[-1]).n == 20
    for reason in bad:
        assert c[f"bypass_{reason.value}"] == 1
    assert c["bypass_frames"] == len(bad)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 100, 255, 362, 363])
def test_every_host_frame_length(n):
    x = X[:n]
    for codec, param in [("sign", 0), ("natural", 0), ("qsgd", 7)]:
        wire, _ = tx(host_frames(x, codec, param))
        assert len(wire) == 1 and len(wire[0]) == 64 + -(-n * wire_capacity_bits(codec, param)
                                                         // 8)
        assert np.array_equal(gather(rx(wire)[0]), expected(x, codec, param, False))


def wire_capacity_bits(codec, param):
    from squeezenic_hw.spec.codecs import codec_info
    return codec_info(codec).bits_per_element(param)


def test_wire_capacity_caps_n():
    assert wire_capacity("sign", 0, 9600) == 65535
    assert wire_capacity("raw", 0, 1518) == 363


def test_rx_splits_contiguous():
    x = X[:2000]
    wire, _ = tx(host_frames(x, "sign", k=500), mtu=9600)
    assert len(wire) == 1
    back, c = rx(wire, max_host_elements=300)
    hs = [parse(f) for f in back]
    assert [h.n for h in hs] == [300] * 6 + [200]
    assert [h.offset for h in hs] == list(range(0, 2000, 300))
    assert [h.flush for h in hs] == [False] * 6 + [True]
    assert not any(h.encoded for h in hs) and c["host_frames"] == 7
    assert all(len(f) == 64 + 4 * h.n and h.ip_total_length == len(f) - 14
               for f, h in zip(back, hs, strict=True))


def test_rx_bypass_reasons():
    h = Header(codec=3, param=4, n=5, flags=FLAG_ENCODED)
    good = build_wire_frame(h, b"\0" * 3)
    frames = {
        BypassReason.NOT_ENCODED: host_frames(X[:4], "raw")[0],
        BypassReason.LENGTH: build_wire_frame(h, b"\0" * 4),
        BypassReason.PARAM: build_wire_frame(replace(h, param=17), b"\0" * 3),
        BypassReason.CODEC: build_wire_frame(replace(h, codec=7), b"\0" * 3),
        BypassReason.SHORT_FRAME: b"\0" * 10,
    }
    for reason, f in frames.items():
        assert classify_wire_frame(f)[1] is reason
    out, c = rx(list(frames.values()) + [good])
    assert out[:-1] == list(frames.values()) and parse(out[-1]).n == 5
    for reason in frames:
        assert c[f"bypass_{reason.value}"] == 1
    assert rx([good], codecs=["raw"])[1]["bypass_codec"] == 1


def test_bad_arguments():
    with pytest.raises(ValueError):
        tx([], mtu=60)
    with pytest.raises(ValueError):
        rx([], max_host_elements=0)
