"""A lane's Amaranth simulation run many times from reset gives what a fresh one gives."""

import numpy as np

from squeezenic_hw.gateware.tx.lane import TxLane
from squeezenic_hw.sim.lane import LaneSimulation, simulate_lane

from support.lane_scenarios import bad_frames, check_against_reference, host_stream


def _timed(run):
    return [(f.data, f.src, f.dst, f.first_cycle, f.last_cycle) for f in run.frames]


def test_each_run_starts_from_reset():
    rng = np.random.default_rng(3)
    sim = LaneSimulation(TxLane(codecs=["raw", "sign"], idle_timeout=40))
    inputs = [
        (host_stream(rng, "sign", n_total=300, max_k=40), 0.0, 0.0),
        # bypassed frames between two tensors; the second run's first frame opens a wire
        # frame the first run's last must not have left open
        (host_stream(rng, "raw", n_total=200, max_k=30) + list(bad_frames("tx").values())[:4]
         + host_stream(rng, "sign", n_total=100, max_k=64), 0.3, 0.4),
        (host_stream(rng, "raw", n_total=363 * 8, lengths=[363]), 0.1, 0.8),
    ]
    stalls = []
    for k, (frames, idle, backpressure) in enumerate(inputs):
        again = sim.run(frames, idle=idle, backpressure=backpressure, seed=k)
        fresh = simulate_lane(TxLane(codecs=["raw", "sign"], idle_timeout=40), frames,
                              idle=idle, backpressure=backpressure, seed=k)
        check_against_reference(again, frames, "tx", codecs=["raw", "sign"], idle_timeout=40)
        assert _timed(again) == _timed(fresh)
        assert again.counters == fresh.counters and again.cycles == fresh.cycles
        assert again.input_stalls == fresh.input_stalls
        stalls.append(again.input_stalls)
    # sign frames at full rate are never held back; raw ones (no smaller on the wire), more
    # than the lane holds, into a wire that takes a beat in five are
    assert stalls[0] == 0 and stalls[2] > 0


def test_idle_timeout_set_at_run_time():
    """A timeout given to a run is the lane's for that run only: the same frames and
    counters as a lane built with it, then none in the next run."""
    from support.lane_scenarios import idle_gap_traffic

    T = 30
    frames, times = idle_gap_traffic(np.random.default_rng(8), T, n_total=250)
    sim = LaneSimulation(TxLane(codecs=["fp16"]))
    timed = sim.run(frames, times=times, idle_timeout=T)
    built = simulate_lane(TxLane(codecs=["fp16"], idle_timeout=T), frames, times=times)
    check_against_reference(timed, frames, "tx", codecs=["fp16"], idle_timeout=T, times=times)
    assert _timed(timed) == _timed(built) and timed.counters == built.counters
    assert timed.counters["close_idle"] > 0
    again = sim.run(frames, times=times)
    check_against_reference(again, frames, "tx", codecs=["fp16"], times=times)
    assert again.counters["close_idle"] == 0
