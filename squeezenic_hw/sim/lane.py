"""Simulate a TX or RX lane on whole frames: the engine of ``squeezenic-hw simulate``.

:func:`simulate_lane` drives frames (with their arrival cycles, ``tuser_src``
and ``tuser_dst``) into a :class:`~squeezenic_hw.gateware.tx.lane.TxLane` or
:class:`~squeezenic_hw.gateware.rx.lane.RxLane` under random idle cycles and
backpressure, collects every output frame, and reads the lane's counters at
the end. For TX, once the last input frame is in and no frame is arriving,
``close`` is raised, so the open wire frame closes as the reference's ``end``
close does.
"""

import math
import time
from dataclasses import dataclass, field

from .axis import AxisFrame, FrameSink, FrameSource
from .streams import simulation_of

__all__ = ["LaneRun", "simulate_lane", "LaneSimulation", "default_quiet", "check_idle_timeout"]


@dataclass
class LaneRun:
    """What a lane simulation produced, with its timing."""
    frames: list                       # AxisFrame outputs, in order
    counters: dict                     # counter name -> value at the end
    cycles: int = 0                    # first input beat to last output beat
    beats_in: int = 0
    beats_out: int = 0
    first_beat_latency: int | None = None   # first input beat -> first output beat
    max_out_streak: int = 0            # longest run of back-to-back output beats
    gaps_in_frames: int = 0            # output cycles inside a frame, ready high, no beat
    input_cycles: int = 0              # cycles the source took to deliver all beats
    input_stalls: int = 0              # cycles the input offered a beat the lane did not take
    wall_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def beats_per_cycle_in(self):
        return self.beats_in / self.input_cycles if self.input_cycles else 0.0

    @property
    def beats_per_cycle_out(self):
        return self.beats_out / self.cycles if self.cycles else 0.0

    @property
    def sim_cycles_per_second(self):
        return self.extra.get("sim_cycles", 0) / self.wall_seconds if self.wall_seconds else 0.0

    def time_from(self, accepted_cycles, input_done):
        """Set ``first_beat_latency``, ``cycles`` and ``input_cycles`` from the cycles the
        input frames' first beats were accepted and the cycle the input was done (``None``
        while it was not), and the output frames' cycles."""
        if not accepted_cycles:
            return
        first_in = accepted_cycles[0]
        if self.frames:
            self.first_beat_latency = self.frames[0].first_cycle - first_in
            self.cycles = self.frames[-1].last_cycle - first_in + 1
        if input_done is not None:
            self.input_cycles = input_done - first_in + 1

    def as_dict(self):
        return {
            "cycles": self.cycles,
            "beats_in": self.beats_in,
            "beats_out": self.beats_out,
            "frames_out": len(self.frames),
            "beats_per_cycle_in": round(self.beats_per_cycle_in, 4),
            "beats_per_cycle_out": round(self.beats_per_cycle_out, 4),
            "first_beat_latency": self.first_beat_latency,
            "sim_cycles_per_second": round(self.sim_cycles_per_second, 1),
            "counters": dict(self.counters),
        }


def simulate_lane(lane, frames, *, times=None, idle=0.0, backpressure=0.0, seed=0,
                  vcd=None, quiet=None, timeout=2_000_000, close_at_end=True, progress=None,
                  idle_timeout=None):
    """Run ``lane`` (a TxLane or RxLane) on ``frames``.

    Parameters
    ----------
    frames : list of AxisFrame or bytes
    times : list of int, optional
        Earliest arrival cycle of each frame's first beat (default back to back).
    idle, backpressure : float
        Probability of an idle input cycle before each beat / of ``ready`` low
        at the output in a cycle.
    vcd : str, optional
        Write a waveform file.
    quiet : int, optional
        Cycles without output, after the input is done, that end the run
        (default: enough for the lane's pipeline to drain, :func:`default_quiet`).
    close_at_end : bool
        TX only: raise ``close`` after the last frame is in.
    progress : callable, optional
        Called as ``progress(cycle, frames_in, frames_out)`` every 2000 cycles.
    idle_timeout : int, optional
        TX only: written to ``cfg_idle_timeout`` before the first cycle (0: never), in
        place of the lane's initial value.
    """
    return LaneSimulation(lane).run(frames, times=times, idle=idle, backpressure=backpressure,
                                    seed=seed, vcd=vcd, quiet=quiet, timeout=timeout,
                                    close_at_end=close_at_end, progress=progress,
                                    idle_timeout=idle_timeout)


class LaneSimulation:
    """A lane's Amaranth simulation, set up once and run on many inputs.

    Setting a simulation up (elaborating the lane and compiling it for the simulator)
    takes seconds, often longer than a short run; :meth:`run` resets the simulator
    (``Simulator.reset``: every signal and memory back to its initial value) and runs
    the next input, so a test that runs one lane many times pays for it once. The
    simulation is :func:`~.streams.simulation_of` the lane: the one kept for it when the
    lane went through :func:`~.streams.reuse_simulation`.

    Parameters
    ----------
    lane : TxLane or RxLane
    """

    def __init__(self, lane):
        self.lane = lane
        self._job = None
        self._sim = simulation_of(lane)

    async def _source(self, ctx):
        job = self._job
        if job["idle_timeout"] is not None:
            ctx.set(self.lane.cfg_idle_timeout, job["idle_timeout"])
        await job["source"].run(ctx)
        # Raise `close` once the input is done and the classifier has drained (here, not in
        # a testbench of its own: one that waited for the source would tick every cycle).
        if job["close_at_end"] and hasattr(self.lane, "close"):
            for _ in range(16):
                await ctx.tick()
            ctx.set(self.lane.close, 1)

    async def _bench(self, ctx):
        job = self._job
        await job["sink"].run(ctx)
        for name, _field in self.lane.counters.shape():
            job["counters"][name] = int(ctx.get(self.lane.counters[name]))

    async def _reporter(self, ctx):
        job = self._job
        cycle = 0
        while True:
            for _ in range(2000):
                await ctx.tick()
            cycle += 2000
            job["progress"](cycle, len(job["source"].accepted_cycles), len(job["sink"].frames))

    def run(self, frames, *, times=None, idle=0.0, backpressure=0.0, seed=0, vcd=None,
            quiet=None, timeout=2_000_000, close_at_end=True, progress=None,
            idle_timeout=None):
        """Run the lane from its initial state on ``frames``; the arguments and the result
        are :func:`simulate_lane`'s."""
        lane = self.lane
        if idle_timeout is not None and not hasattr(lane, "cfg_idle_timeout"):
            raise ValueError(NO_IDLE_TIMEOUT)
        check_idle_timeout(idle_timeout)
        frames = [f if isinstance(f, AxisFrame) else AxisFrame(bytes(f)) for f in frames]
        source = FrameSource(lane.i, frames, times=times, idle=idle, seed=seed)
        if quiet is None:
            quiet = default_quiet(backpressure, idle_timeout)
        sink = FrameSink(lane.o, backpressure=backpressure, seed=seed, quiet=quiet,
                         source=source, timeout=timeout)
        self._job = {"source": source, "sink": sink, "counters": {}, "progress": progress,
                     "close_at_end": close_at_end, "idle_timeout": idle_timeout}
        benches = [(self._source, True), (self._bench, False)]
        if progress is not None:
            benches.append((self._reporter, True))
        start = time.perf_counter()
        self._sim.run(benches, vcd=vcd)
        wall = time.perf_counter() - start
        beats_in = sum(max(1, -(-len(f.data) // 64)) for f in frames)
        run = LaneRun(frames=sink.frames, counters=self._job["counters"], beats_in=beats_in,
                      beats_out=sink.beats, max_out_streak=sink.max_streak,
                      gaps_in_frames=sink.gaps, input_stalls=source.stalls, wall_seconds=wall,
                      extra={"sim_cycles": sink.cycles,
                             "input_first_cycles": list(source.accepted_cycles)})
        run.time_from(source.accepted_cycles, source.done_cycle)
        return run


#: What a run given an idle timeout says of a lane that has none.
NO_IDLE_TIMEOUT = "idle_timeout: this lane has no idle timeout (an RX lane)"


def check_idle_timeout(idle_timeout):
    """``ValueError`` unless ``idle_timeout`` (a run-time ``cfg_idle_timeout``) is ``None``
    or fits its 32 bits."""
    if idle_timeout is not None and not 0 <= idle_timeout < 2**32:
        raise ValueError(f"idle_timeout must be in [0, 2**32), not {idle_timeout}")


def default_quiet(backpressure, idle_timeout=None):
    """Cycles without output, after the input is done, that end a run by default.

    200 cycles for the lane's pipeline (the longest wait for an output beat once the input
    was done, over the test suite's lane runs at every backpressure, is 51 cycles); plus a
    run of not-ready cycles that ``backpressure`` draws with a probability under 10⁻⁹ (59
    cycles at 0.7); plus an idle timeout set at run time, which closes the last wire frame.
    A quiet too short cuts the run before its last frames: the check against the reference
    then fails, it does not pass."""
    streak = math.ceil(math.log(1e-9) / math.log(backpressure)) if backpressure > 0 else 0
    return 200 + streak + (idle_timeout or 0)
