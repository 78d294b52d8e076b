# amaranth: UnusedElaboratable=no
"""The traffic strategies of ``sim/traffic/``: every malformed kind bypasses for its
reason, recipes make exactly their frames, the reference TX → RX round trip keeps its
promises on them, the expectations (``tuser``, wrong ``tuser_size``) and the comparison;
and the compiled lanes driven by the strategies."""

import importlib
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from squeezenic_hw.reference import lane as lr
from squeezenic_hw.reference.codecs import decode, encode
from squeezenic_hw.reference.threshold import keep_mask
from squeezenic_hw.sim import traffic
from squeezenic_hw.sim.axis import AxisFrame
from squeezenic_hw.sim.compiled import compiled_available, simulate_lane_compiled
from squeezenic_hw.sim.lane import LaneRun
from squeezenic_hw.spec.codecs import codec_info
from squeezenic_hw.spec.frames import (
    BypassReason,
    Header,
    build_host_frame,
    classify_host_frame,
    classify_wire_frame,
    parse,
)
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, FLAG_FLUSH, HEADER_LEN

from support.lane_scenarios import lane_simulation

#: Fast property runs: no deadline, no example database, a modest number of examples.
QUICK = settings(max_examples=30, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ALL_CODECS = list(range(8))


def _small_batches(codecs=None, most=40):
    return st.integers(1, most).flatmap(lambda n: traffic.traffic_recipes(codecs, frames=n))


@pytest.mark.parametrize("lane", ["tx", "rx"])
@pytest.mark.parametrize("codecs", [None, ALL_CODECS, ["raw"]])
@QUICK
@given(data=st.data())
def test_every_malformed_kind_bypasses_for_its_reason(lane, codecs, data):
    recipe = data.draw(traffic.malformed_recipes(lane, codecs))
    frame = traffic.malformed_frame(recipe, lane, codecs=codecs)   # raises if not
    classify = classify_host_frame if lane == "tx" else classify_wire_frame
    built = {codec_info(c).id for c in codecs} if codecs else set(range(7))
    _, reason = classify(frame, codecs_built_in=built)
    if recipe.kind in ("ipv6", "vlan"):
        assert reason is BypassReason.NOT_IPV4
    elif recipe.kind == "arp":
        assert reason in (BypassReason.NOT_IPV4, BypassReason.SHORT_FRAME)
    else:
        assert reason is BypassReason(recipe.kind)


@pytest.mark.parametrize("lane", ["tx", "rx"])
def test_every_malformed_kind_of_every_codec(lane):
    """Each kind made from a frame of each codec (threshold's bitmap and index-list wire
    frames among them), a few seeds each: ``malformed_frame`` checks the reason."""
    for kind in traffic.MALFORMED_KINDS[lane]:
        for codec in ALL_CODECS:
            for seed in range(4):
                traffic.malformed_frame(traffic.MalformedRecipe(kind, codec, seed), lane,
                                        codecs=ALL_CODECS)


def test_malformed_kinds_are_every_bypass_reason():
    for lane, kinds in traffic.MALFORMED_KINDS.items():
        reasons = {BypassReason(k) for k in kinds if k not in ("arp", "ipv6", "vlan")}
        assert reasons == set(BypassReason) - {
            BypassReason.NOT_ENCODED if lane == "tx" else BypassReason.ALREADY_ENCODED}
    with pytest.raises(ValueError, match="recipe"):
        traffic.malformed_frame(traffic.MalformedRecipe("not_encoded", 0, 1), "tx")
    with pytest.raises(ValueError, match="lane"):
        traffic.malformed_recipes("wire")


@QUICK
@given(recipe=_small_batches(ALL_CODECS))
def test_a_recipe_makes_exactly_its_frames(recipe):
    frames = traffic.host_traffic(recipe, codecs=ALL_CODECS)
    assert len(frames) == recipe.frames
    views = [traffic.lane_view(f) for f in frames]
    processed = [classify_host_frame(v, codecs_built_in=set(ALL_CODECS))[1] is None
                 for v in views]
    assert sum(processed) == sum(s.frames for s in recipe.streams)
    assert sum(f.size is not None and f.size != len(f.data) for f in frames) == min(
        recipe.size_errors, sum(processed))
    for f, v, p in zip(frames, views, processed, strict=True):
        if p:
            assert 1 <= parse(v).n <= traffic.MAX_ELEMENTS and parse(v).ip_id < 0x8000
        else:
            assert f.size is None


def _decoded(view):
    """What RX must return of a host frame the TX lane encodes: the codec's reference
    decode of its encode (threshold: the kept values, +0 elsewhere), as bits."""
    h = parse(view)
    x = np.frombuffer(view, dtype="<u4", count=h.n, offset=HEADER_LEN).view(np.float32)
    info = codec_info(h.codec)
    if info.variable:
        return np.where(keep_mask(x, h.scale), x, np.float32(0)).view(np.uint32)
    codes = encode(x, info, param=h.param, scale=h.scale, aux=h.aux, seed=h.seed,
                   offset=h.offset, stochastic=h.stochastic)
    return decode(codes, info, param=h.param, scale=h.scale, aux=h.aux).view(np.uint32)


@QUICK
@given(recipe=_small_batches(ALL_CODECS), codecs=st.sampled_from([None, ALL_CODECS]))
def test_reference_round_trip(recipe, codecs):
    """Through the reference TX then RX: bypassed frames come out unchanged and in order,
    every element comes back as its codec's decode of its encode, and the counters add
    up."""
    built = set(codecs or range(7))
    recipe = replace(recipe, streams=tuple(s for s in recipe.streams if s.codec in built),
                     malformed=tuple(m for m in recipe.malformed if m.codec in built))
    frames = traffic.host_traffic(recipe, codecs=codecs)
    views = [traffic.lane_view(f) for f in frames]
    processed = [classify_host_frame(v, codecs_built_in=built)[1] is None for v in views]
    out, tx = lr.tx(views, codecs=codecs)
    # a frame the lane builds is a wire frame without the malformed frames' mark
    built_out = [o for o in out if classify_wire_frame(o, codecs_built_in=built)[1] is None
                 and parse(o).ip_id < 0x8000]
    passed = [o for o in out if o not in built_out]
    assert passed == [v for v, p in zip(views, processed, strict=True) if not p]
    assert len(built_out) == tx["wire_frames"]
    assert tx["host_frames"] + tx["bypass_frames"] == len(frames)
    assert tx["wire_frames"] == sum(tx[k] for k in tx if k.startswith("close_"))
    assert tx["bypass_frames"] == sum(tx[k] for k in tx if k.startswith("bypass_")) - tx[
        "bypass_frames"]
    assert tx["elements"] == sum(parse(v).n for v, p in zip(views, processed, strict=True) if p)

    host, rx = lr.rx(built_out, codecs=codecs)
    assert rx["bypass_frames"] == 0 and rx["wire_frames"] == len(built_out)
    assert rx["elements"] == tx["elements"] and rx["host_frames"] == len(host)
    assert rx["host_frames"] == sum(-(-parse(w).n // DEFAULT_HOST_ELEMENTS) for w in built_out)
    got = [np.frombuffer(h, "<u4", offset=HEADER_LEN) for h in host]
    want = [_decoded(v) for v, p in zip(views, processed, strict=True) if p]
    if want:
        assert np.array_equal(np.concatenate(got), np.concatenate(want))


def _host(offset, n, **kw):
    return build_host_frame(Header(codec=1, offset=offset, **kw),
                            np.linspace(-1, 1, n, dtype=np.float32))


def test_expected_tx_tuser_and_wrong_sizes():
    """A wire frame takes the tuser of the host frame holding its first element, a
    bypassed frame keeps its own; a frame that ends early reads as zeros, and it and one
    whose beats go on are counted in size_errors."""
    a, b, c = _host(0, 40), _host(40, 60, flags=FLAG_FLUSH), _host(100, 30)
    bad = b"\x01" * 70
    frames = [AxisFrame(a[:100], src=1, dst=2, size=len(a)),
              AxisFrame(bad, src=3, dst=4),
              AxisFrame(b + bytes(130), src=5, dst=6, size=len(b)),
              AxisFrame(c, src=7, dst=8)]
    e = traffic.expected_tx(frames)
    repaired = [a[:100] + bytes(len(a) - 100), bad, b, c]
    assert [f.data for f in e.frames] == lr.tx(repaired)[0]
    assert [(f.src, f.dst) for f in e.frames] == [(3, 4), (1, 2), (7, 8)]
    assert e.counters["size_errors"] == 2
    with pytest.raises(ValueError, match="frames: frame 0"):
        traffic.expected_tx([AxisFrame(bad, size=80)])


def test_expected_rx_tuser():
    wire = lr.tx([_host(0, 363), _host(363, 363)], mtu=9600)[0]
    assert len(wire) == 1
    e = traffic.expected_rx([AxisFrame(wire[0], src=9, dst=10), AxisFrame(b"\0" * 60, src=1)])
    assert [(f.src, f.dst) for f in e.frames] == [(9, 10), (9, 10), (1, 0)]


def test_differences_name_what_differs():
    e = traffic.expected_rx([AxisFrame(_host(0, 4), src=1)])
    same = [AxisFrame(f.data, src=f.src, dst=f.dst) for f in e.frames]
    assert traffic.differences("rx", same, e.counters, e) == []
    frame = bytearray(same[0].data)
    frame[46] ^= 1
    got = [AxisFrame(bytes(frame), src=1)]
    found = traffic.differences("rx", got, {**e.counters, "elements": 99}, e)
    assert found[0] == traffic.Difference("rx", 0, "byte 46 (n): got 0x05, expected 0x04")
    assert found[1].frame is None and found[1].what.startswith("counter")
    assert traffic.differences("rx", [AxisFrame(same[0].data, src=2)], e.counters, e)[0].what \
        == "tuser src/dst (2, 0), expected (1, 0)"
    assert traffic.differences("rx", [], e.counters, e)[0].what == "0 frames out, expected 1"


def test_draw_example_is_the_same_for_a_seed():
    strategy = traffic.traffic_recipes(frames=50)
    first = traffic.draw_example(strategy, 11)
    assert first == traffic.draw_example(strategy, 11) != traffic.draw_example(strategy, 12)
    assert first.frames == 50
    assert traffic.host_traffic(first) == traffic.host_traffic(first)


def test_draw_example_does_not_depend_on_the_modules_loaded(tmp_path, monkeypatch):
    """A seed's example stays the same after the process loads a module of its own, full
    of constants a recipe could take (Hypothesis lifts constants from the source of
    modules outside site-packages): a campaign's seed gives the same traffic in the CLI,
    in a script, and from an editable or a wheel install."""
    strategy = traffic.traffic_recipes(frames=200, timed=True)
    before = [traffic.draw_example(strategy, seed) for seed in range(12)]
    module = tmp_path / "campaign_constants_probe.py"
    module.write_text("SHARES = " + repr([0.0, 0.02, 0.1, 0.3, 0.5, 1.0]) + "\n"
                      "NUMBERS = " + repr(list(range(400)) + [2**k - 1 for k in range(33)])
                      + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("campaign_constants_probe")
        after = [traffic.draw_example(strategy, seed) for seed in range(12)]
    finally:
        sys.modules.pop("campaign_constants_probe", None)   # not left to the tests after
    assert after == before


def test_draw_example_draws_the_simplest_choices_too():
    """A campaign's batch is a random draw, not one made to differ from the strategy's
    simplest example: batches without malformed frames (its first choice at its
    simplest) come up as often as each other share."""
    strategy = traffic.traffic_recipes(frames=100)
    shares = {len(traffic.draw_example(strategy, seed).malformed) for seed in range(40)}
    assert shares == {0, 2, 10, 30}


@pytest.mark.skipif(not compiled_available(), reason="no Verilator or C++ compiler")
def test_compiled_lanes_on_drawn_traffic(cache):
    """The compiled TX and RX lanes (codecs 0–6) equal the reference on batches drawn by
    the strategies, with random idle cycles and backpressure."""
    builders = traffic.lane_builders()

    def run_lane(lane, frames, **timing):
        build, key = builders[lane]
        stalls = {} if timing else {"idle": 0.2, "backpressure": 0.3}
        return simulate_lane_compiled(build, frames, seed=len(frames), key=key,
                                      cache_dir=cache, **stalls, **timing)

    @settings(QUICK, max_examples=6)
    @given(recipe=_small_batches(most=120))
    def check(recipe):
        for lane_check in traffic.round_trip(recipe, run_lane).values():
            assert lane_check.differences == []

    check()


def test_timed_batches():
    """A timed batch: no wrong ``tuser_size`` on the TX side, arrival cycles with gaps on
    every side of the timeout after each frame's beats, and the reference's idle closes."""
    strategy = traffic.traffic_recipes(frames=60, timed=True)
    recipes = [traffic.draw_example(strategy, seed) for seed in range(40)]
    timed = [r for r in recipes if r.idle_timeout is not None]
    assert 0 < len(timed) < len(recipes)
    untimed = traffic.traffic_recipes(frames=60)
    assert all(traffic.draw_example(untimed, seed).idle_timeout is None for seed in range(10))
    assert all(r.size_errors == 0 and r.idle_timeout in traffic.IDLE_TIMEOUTS for r in timed)
    recipe = replace(timed[0], idle_timeout=16)
    frames = traffic.host_traffic(recipe)
    times = traffic.arrival_times(recipe, frames)
    assert traffic.arrival_times(recipe, frames) == times
    gaps = {b - a - max(1, -(-len(f.data) // 64))
            for a, b, f in zip(times, times[1:], frames, strict=False)}
    assert gaps <= {0, 1, 15, 16, 17, 39} and {15, 16, 17} <= gaps
    assert traffic.arrival_times(replace(recipe, idle_timeout=None), frames) is None
    timed_out = traffic.expected_tx(frames, times=times, idle_timeout=16)
    back_to_back = traffic.expected_tx(frames)
    assert timed_out.counters["close_idle"] > 0 == back_to_back.counters["close_idle"]
    # without close, the timeout closes the last wire frame
    no_close = traffic.expected_tx(frames, times=times, idle_timeout=16, close_at_end=False)
    assert [f.data for f in no_close.frames] == [f.data for f in timed_out.frames]
    assert no_close.counters["close_end"] == 0
    assert no_close.counters["close_idle"] == (timed_out.counters["close_idle"]
                                               + timed_out.counters["close_end"])
    with pytest.raises(ValueError, match="close_at_end"):
        traffic.expected_tx(frames, close_at_end=False)


def _idle_closed_before(frames, late, T, codecs=None):
    """The reference TX output of ``frames`` with an idle close (a gap of ``T``) before each
    frame of ``late``: a stalled lane's legitimate output."""
    times = [t + T * sum(k >= j for j in late)
             for k, t in enumerate(lr.back_to_back_times(traffic.lane_view(f) for f in frames))]
    return traffic.expected_tx(frames, codecs=codecs, times=times, idle_timeout=T,
                               close_at_end=False)


def _stalled_recipe():
    """A batch with passed-through frames, many wire frames that an idle close would cut,
    and full closes."""
    for seed in range(300):
        r = traffic.draw_example(traffic.traffic_recipes(frames=80), seed)
        if not r.malformed or r.size_errors:
            continue
        frames = traffic.host_traffic(r)
        if len(traffic.expected_tx(frames).frames) < 50 and _idle_closed_before(
                frames, range(2, len(frames), 3), 7).counters["close_full"]:
            return r
    raise AssertionError("no such batch among the seeds")


def _stalled_batch():
    """A timed batch with many wire frames that an idle close would cut, and the output of
    a stalled lane that closed for idleness before a third of its frames."""
    frames = traffic.host_traffic(_stalled_recipe())
    late = list(range(2, len(frames), 3))
    return frames, _idle_closed_before(frames, late, 7)


def _judge(frames, got, counters=None):
    counters = got.counters if counters is None else counters
    expected, before = traffic.expected_tx_stalled(frames, got.frames, counters, idle_timeout=7)
    # what the judge's one pass gives is the reference run on the cycles it found
    again = _idle_closed_before(frames, before, 7)
    assert [(f.data, f.src, f.dst) for f in expected.frames] == \
        [(f.data, f.src, f.dst) for f in again.frames]
    return before, traffic.differences_stalled("tx", got.frames, counters, expected, frames)


def test_stalled_expectation_takes_the_lanes_idle_closes():
    """Judged as stalled, an output with idle closes where the arrival cycles put none
    matches, and the closes found are where they were made; judged on the arrival cycles,
    it would not match."""
    frames, got = _stalled_batch()
    strict = traffic.differences("tx", got.frames, got.counters,
                                 _idle_closed_before(frames, [], 7))
    assert strict
    before, found = _judge(frames, got)
    assert found == [] and before
    # each close found is one made, or the same close moved in front of passed-through
    # frames (which may go either side of it)
    made = range(2, len(frames), 3)
    passed = [classify_host_frame(traffic.lane_view(f))[1] is not None for f in frames]
    assert all(any(k <= j and all(passed[k:j]) for j in made) for k in before)
    # a timeout before a frame of another key shows only in the counters
    assert got.counters["close_mismatch"] > 0
    counters = dict(got.counters, close_idle=got.counters["close_idle"] + 1,
                    close_mismatch=got.counters["close_mismatch"] - 1)
    assert _judge(frames, got, counters)[1] == []
    # a passed-through frame may overtake a wire frame held by stalls
    kinds = [f.data not in {traffic.lane_view(x) for x in frames} for f in got.frames]
    k = next(k for k in range(1, len(kinds)) if kinds[k - 1] and not kinds[k])
    swapped = got.frames[:k - 1] + [got.frames[k], got.frames[k - 1]] + got.frames[k + 1:]
    assert _judge(frames, replace(got, frames=swapped))[1] == []


def test_stalled_threshold_frames_and_their_layouts():
    """Threshold frames cut short by idle closes (their layout, in ``param``, may change
    with their size) are found as such; and a timed batch holding threshold frames is
    judged as stalled."""
    codecs = [0, 7]
    strategy = traffic.traffic_recipes(codecs, frames=80)
    recipe = traffic.draw_example(strategy, 42)     # a cut that changes a frame's layout
    assert 7 in [s.codec for s in recipe.streams] and not recipe.size_errors
    frames = traffic.host_traffic(recipe, codecs=codecs)
    got = _idle_closed_before(frames, list(range(1, len(frames), 2)), 3, codecs)
    assert traffic.differences("tx", got.frames, got.counters,
                               _idle_closed_before(frames, [], 3, codecs))
    expected, before = traffic.expected_tx_stalled(frames, got.frames, got.counters,
                                                   codecs=codecs, idle_timeout=3)
    assert before and traffic.differences_stalled("tx", got.frames, got.counters, expected,
                                                  frames, codecs=codecs) == []
    # a threshold frame that would close full at the next frame's first element may close
    # for idleness before it instead
    assert got.counters["close_full"] > 0
    counters = dict(got.counters, close_full=got.counters["close_full"] - 1,
                    close_idle=got.counters["close_idle"] + 1)
    expected, _ = traffic.expected_tx_stalled(frames, got.frames, counters, codecs=codecs,
                                              idle_timeout=3)
    assert traffic.differences_stalled("tx", got.frames, counters, expected, frames,
                                       codecs=codecs) == []
    assert traffic.holds_threshold(frames, codecs=codecs)
    assert not traffic.holds_threshold(frames, codecs=[0])       # not built: bypassed
    assert not traffic.holds_threshold(traffic.host_traffic(
        traffic.draw_example(traffic.traffic_recipes([0], frames=30), 1)), codecs=codecs)


def test_timed_batches_of_a_lane_whose_idle_closes_are_not_exact():
    """``exact_idle=False`` (a narrow lane's): an unstalled timed batch is judged by where
    the lane's idle closes fell; with the default, the same output differs."""
    recipe = replace(_stalled_recipe(), idle_timeout=7)

    def run_lane(lane, frames, times=None, idle_timeout=None, close_at_end=True):
        if lane == "rx":
            expected = traffic.expected_rx(frames)
        else:
            assert times is not None and idle_timeout == 7 and not close_at_end
            expected = _idle_closed_before(frames, list(range(2, len(frames), 3)), 7)
        return LaneRun(frames=expected.frames, counters=expected.counters, wall_seconds=0)

    loose = traffic.round_trip(recipe, run_lane, exact_idle=False)
    assert loose["tx"].differences == [] == loose["rx"].differences
    assert traffic.round_trip(recipe, run_lane)["tx"].differences


def test_timed_batch_whose_lane_held_its_input_is_judged_as_stalled():
    """An unstalled timed run whose lane held its input back (``input_stalls``: frames
    went in later than their times) is judged by where the lane's idle closes fell, and
    its check says so; the same output from a lane that took every beat on time differs."""
    recipe = replace(_stalled_recipe(), idle_timeout=7)

    def run_lane(held):
        def run(lane, frames, times=None, idle_timeout=None, close_at_end=True):
            if lane == "rx":
                expected = traffic.expected_rx(frames)
                return LaneRun(frames=expected.frames, counters=expected.counters)
            expected = _idle_closed_before(frames, list(range(2, len(frames), 3)), 7)
            return LaneRun(frames=expected.frames, counters=expected.counters,
                           input_stalls=held)
        return run

    held = traffic.round_trip(recipe, run_lane(12))
    assert held["tx"].held and held["tx"].differences == [] == held["rx"].differences
    on_time = traffic.round_trip(recipe, run_lane(0))
    assert not on_time["tx"].held and on_time["tx"].differences
    # a stalled run is counted as stalled, not as held
    stalled = traffic.round_trip(recipe, lambda lane, frames, stalled=False, **timing:
                                 run_lane(12)(lane, frames, **timing), stalled=True)
    assert not stalled["tx"].held and stalled["tx"].differences == []


def test_stalled_expectation_still_finds_differences():
    """What no idle close explains is a difference: a flipped byte, a lost or a doubled
    wire frame, two wire frames swapped, a wire frame cut inside a host frame, a lost
    passed-through frame, and an idle close counted that no frame shows."""
    frames, got = _stalled_batch()
    built = [k for k, f in enumerate(got.frames)
             if f.data not in {traffic.lane_view(x) for x in frames}]
    passed = [k for k in range(len(got.frames)) if k not in built]

    def changed(frames_out):
        return replace(got, frames=frames_out)

    k = built[len(built) // 2]
    flipped = got.frames[k].data[:-1] + bytes([got.frames[k].data[-1] ^ 1])
    cases = {
        "flipped": changed(got.frames[:k] + [AxisFrame(flipped, src=got.frames[k].src,
                                                       dst=got.frames[k].dst)]
                           + got.frames[k + 1:]),
        "lost": changed(got.frames[:k] + got.frames[k + 1:]),
        "doubled": changed(got.frames[:k + 1] + got.frames[k:]),
        "swapped": changed(got.frames[:built[0]] + [got.frames[built[1]], got.frames[built[0]]]
                           + got.frames[built[1] + 1:]),
        "passed lost": changed(got.frames[:passed[0]] + got.frames[passed[0] + 1:]),
        # the same frames with a smaller MTU: wire frames close full inside host frames
        "cut inside": traffic.expected_tx(frames, mtu=300, times=lr.back_to_back_times(
            traffic.lane_view(f) for f in frames), idle_timeout=7, close_at_end=False),
    }
    for name, run in cases.items():
        assert _judge(frames, run, got.counters)[1], name
    # a dense frame closes full at its last element, so no timeout comes before that
    assert got.counters["close_full"]
    counters = dict(got.counters, close_full=got.counters["close_full"] - 1,
                    close_idle=got.counters["close_idle"] + 1)
    assert _judge(frames, got, counters)[1]
    counters = dict(got.counters, close_idle=got.counters["close_idle"] + 1)
    found = _judge(frames, got, counters)[1]
    assert found and all(d.frame is None and d.what.startswith("counter close_")
                         for d in found)
    assert any(d.what.startswith(f"counter close_idle: {counters['close_idle']},")
               for d in found)


@QUICK
@given(n=st.integers(1, 60), codecs=st.sampled_from([None, ["sign"], ["fixed", "qsgd", "raw"]]),
       code_bits=st.sampled_from([None, 2, 8, 16]), data=st.data())
def test_trusted_batches_are_what_a_trusted_lane_takes(n, codecs, code_bits, data):
    """A trusted batch: exactly its host frames, every one a stream frame the reference TX
    lane encodes (none bypasses, no wrong ``tuser_size``), ``fixed`` and ``qsgd`` at
    ``code_bits``; the wire side keeps its malformed frames."""
    recipe = data.draw(traffic.traffic_recipes(codecs, frames=n, trusted=True,
                                               code_bits=code_bits))
    assert recipe.malformed == () and recipe.size_errors == 0 and recipe.frames == n
    frames = traffic.host_traffic(recipe, codecs=codecs)
    assert len(frames) == n and all(f.size is None for f in frames)
    expected = traffic.expected_tx(frames, codecs=codecs)
    assert expected.counters["bypass_frames"] == 0 and expected.counters["host_frames"] == n
    if code_bits is not None:
        assert {parse(f.data).param for f in frames
                if parse(f.data).codec in (3, 4)} <= {code_bits}


def test_trusted_recipes_keep_the_wire_sides_malformed_frames():
    strategy = traffic.traffic_recipes(frames=50, trusted=True)
    recipes = [traffic.draw_example(strategy, seed) for seed in range(20)]
    assert any(r.wire_malformed for r in recipes)
    assert all(not r.malformed and r.size_errors == 0 for r in recipes)


@pytest.mark.skipif(not compiled_available(), reason="no Verilator or C++ compiler")
def test_compiled_tx_lane_on_timed_batches(cache):
    """The compiled TX lane (codecs 0–6) with its idle timeout set at run time equals the
    reference on timed batches, timeouts of 1 to 200 cycles; and, stalled, the reference
    with the idle closes it made."""
    builders = traffic.lane_builders()
    seen = []

    def run_lane(lane, frames, stalled=False, **timing):
        build, key = builders[lane]
        stalls = {} if timing and not stalled else {"idle": 0.2, "backpressure": 0.5}
        run = simulate_lane_compiled(build, frames, seed=3, key=key, cache_dir=cache,
                                     **stalls, **timing)
        if timing:
            seen.append(run.counters["close_idle"])
            moved.append(traffic.differences(lane, run.frames, run.counters,
                                             traffic.expected_tx(frames, **timing)) != [])
        return run

    base = traffic.draw_example(traffic.traffic_recipes(frames=80), 4)
    for T in (1, 5, 50, 200):
        recipe = replace(base, size_errors=0, idle_timeout=T)
        for stalled in (False, True):
            moved = []
            for lane_check in traffic.round_trip(recipe, run_lane, stalled=stalled).values():
                assert lane_check.differences == []
            # stalled, the lane's idle closes fell elsewhere than the arrival cycles say
            assert moved == [stalled]
    assert len(seen) == 8 and all(n > 0 for n in seen)


def _narrow_scale(bits):
    """A scale a narrow ``fixed`` lane takes: a normal power of two, a zero, an infinity
    or a NaN."""
    exponent, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    return mantissa == 0 or exponent == 255       # (a zero: exponent and mantissa 0)


@QUICK
@given(n=st.integers(1, 60), spec=st.sampled_from([("sign", None), ("fixed", 2), ("fixed", 8)]),
       data=st.data())
def test_narrow_batches_are_what_a_narrow_lane_takes(n, spec, data):
    """A narrow batch is a trusted one, and its ``fixed`` frames are at the lane's width,
    rounded to nearest, at scales that are powers of two, zeros, infinities or NaNs."""
    codec, bits = spec
    recipe = data.draw(traffic.traffic_recipes([codec], frames=n, code_bits=bits,
                                               narrow=True))
    assert recipe.malformed == () and recipe.size_errors == 0
    heads = [parse(f.data) for f in traffic.host_traffic(recipe, codecs=[codec])]
    assert len(heads) == n and all(h.codec == codec_info(codec).id for h in heads)
    if codec == "fixed":
        assert all(h.param == bits and not h.stochastic and _narrow_scale(h.scale_bits)
                   for h in heads)


def test_narrow_specs_and_builders():
    assert traffic.narrow_spec(["sign"], None) == "sign"
    assert traffic.narrow_spec([3], 4) == "fixed:4"
    for codecs, bits in ((["sign"], 8), (["fixed"], 16), (["fixed"], None),
                         (["sign", "fixed"], 8), (None, None)):
        with pytest.raises(ValueError, match="narrow: a narrow lane is of one codec"):
            traffic.narrow_spec(codecs, bits)
    builders = traffic.lane_builders(["fixed"], code_bits=8, narrow=True, mtu=200)
    assert builders["tx"][1] == "NarrowTxLane('fixed:8', mtu=200, port=21329)"
    assert builders["rx"][1] == "RxLane(codecs=[3])"


def test_narrow_lane_on_narrow_traffic_and_not_on_other():
    """The narrow fixed:4 lane (Amaranth) equals the reference on narrow batches; on
    trusted batches of fixed:4, whose scales are not powers of two and whose frames may be
    stochastic, it does not: what the narrow recipes leave out matters."""
    builders = traffic.lane_builders(["fixed"], code_bits=4, narrow=True)
    lane = lane_simulation("narrow", "fixed:4", mtu=1518)

    def run_tx(frames):
        run = lane.run(frames, idle=0.2, backpressure=0.3, seed=1)
        return traffic.differences("tx", run.frames, run.counters,
                                   traffic.expected_tx(frames, codecs=["fixed"]))

    assert builders["tx"][1] == "NarrowTxLane('fixed:4', mtu=1518, port=21329)"
    for seed in (1, 2):
        narrow = traffic.draw_example(traffic.traffic_recipes(
            ["fixed"], frames=40, code_bits=4, narrow=True), seed)
        assert run_tx(traffic.host_traffic(narrow, codecs=["fixed"])) == []
    trusted = traffic.draw_example(traffic.traffic_recipes(
        ["fixed"], frames=40, code_bits=4, trusted=True), 1)
    assert run_tx(traffic.host_traffic(trusted, codecs=["fixed"])) != []
