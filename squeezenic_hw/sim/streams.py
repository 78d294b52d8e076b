"""Stream drivers for Amaranth async testbenches, with random idle and backpressure.

Every test of a stream component drives it through :func:`run_stream`: a source
that inserts random idle cycles between beats and a sink that withholds
``ready`` at random, both from a seeded ``random.Random`` so failures repeat.

Payloads are passed as plain integers (the packed bits of the stream's payload)
or as anything ``layout.const`` accepts (dicts for structs); results come back
as integers, which the tests unpack with :func:`unpack_fields`.

Setting a simulation up (elaborating the design and compiling it for the simulator)
often takes longer than a short run. A design passed to :func:`reuse_simulation` keeps
one :class:`ReusableSimulation`: each later run resets it (``Simulator.reset``) instead
of setting up another.
"""

import random
from dataclasses import dataclass, field

from amaranth.hdl import Value
from amaranth.lib import data
from amaranth.sim import Simulator

from squeezenic_hw.collector import collector_paused

__all__ = ["StreamRun", "BeatSender", "run_stream", "pack_payload", "unpack_fields",
           "probe_registered_ready", "ReusableSimulation", "reuse_simulation", "simulation_of"]


class ReusableSimulation:
    """An Amaranth simulation of ``dut`` (one 250 MHz ``sync`` clock), set up once and run
    many times, each run with its own testbenches.

    :meth:`run` resets the simulator (every signal and memory back to its initial value,
    time back to zero) before every run but the first. Testbenches run in the order given,
    as ``Simulator.add_testbench`` would run them.
    """

    def __init__(self, dut):
        self.dut = dut
        self._job = {}
        self._runs = 0
        with collector_paused():
            self._sim = Simulator(dut)
        self._sim.add_clock(4e-9)
        # The simulator's testbenches are slots, alternately background and foreground, that
        # run the current job's testbenches: any order of the two kinds maps onto them.
        self._slots = []
        self._grow(4)

    def _grow(self, pairs):
        for _ in range(pairs):
            for background in (True, False):
                self._sim.add_testbench(self._slot(len(self._slots)), background=background)
                self._slots.append(background)

    def _slot(self, k):
        async def slot(ctx):
            bench = self._job.get(k)
            if bench is not None:
                await bench(ctx)
        return slot

    def run(self, testbenches, *, vcd=None):
        """Run ``testbenches`` (``[(async function, background)]``, in order) until every
        foreground one returns."""
        if self._runs:
            self._sim.reset()     # (also what lets slots be added after a run)
        self._runs += 1
        job, k = {}, 0
        for bench, background in testbenches:
            while True:
                if k == len(self._slots):
                    self._grow(1)
                if self._slots[k] == bool(background):
                    break
                k += 1
            job[k] = bench
            k += 1
        self._job = job
        if vcd:
            with self._sim.write_vcd(vcd):
                self._sim.run()
        else:
            self._sim.run()


_REUSED = {}


def reuse_simulation(dut):
    """Keep ``dut``'s simulation once it is set up, for every later run of it
    (:func:`run_stream`, :func:`simulation_of`); returns ``dut``. The simulation, and so
    ``dut``, live as long as the process: for designs that are run many times."""
    _REUSED.setdefault(id(dut), (dut, None))
    return dut


def simulation_of(dut):
    """A :class:`ReusableSimulation` of ``dut``: the kept one when ``dut`` went through
    :func:`reuse_simulation`, else a new one."""
    # (the registry holds ``dut``, so no other live object has its id)
    kept = _REUSED.get(id(dut))
    if kept is None:
        return ReusableSimulation(dut)
    if kept[1] is None:
        kept = _REUSED[id(dut)] = (dut, ReusableSimulation(dut))
    return kept[1]


def pack_payload(layout, value):
    """Packed integer of ``value`` (an int, or what ``layout.const`` takes)."""
    if isinstance(value, int):
        return value
    return layout.const(value).as_value().value


def unpack_fields(layout, value):
    """Unpack a payload integer into a ``data.Const`` view (index it like the struct)."""
    return data.Const(layout, value)


@dataclass
class StreamRun:
    outputs: list = field(default_factory=list)   # payload integers, in order
    cycles: int = 0                                # from first input offered to last output
    first_output_cycle: int | None = None          # cycle of the first output beat
    first_input_cycle: int | None = None           # cycle the first input beat was accepted
    max_ready_streak: int = 0                      # longest run of back-to-back output beats

    @property
    def latency(self):
        """First-beat latency in cycles (input accepted -> output transferred)."""
        if self.first_output_cycle is None or self.first_input_cycle is None:
            return None
        return self.first_output_cycle - self.first_input_cycle

    @property
    def beats_per_cycle(self):
        return len(self.outputs) / self.cycles if self.cycles else 0.0


class BeatSender:
    """Offers beats on ``stream`` (its ``valid``, ``ready`` and ``payload``) from an async
    testbench: before each beat an idle cycle with probability ``idle`` (drawn from
    ``rng``, again after each idle cycle), then the beat until ``ready`` takes it.

    Every cycle of a run goes through here, so it does little per cycle: ``valid`` is set
    only when it changes, the payload is set as one integer, and one trigger serves every
    clock edge of the run (:meth:`close` releases it and lowers ``valid``). ``t`` counts
    the clock edges waited so far, ``stalls`` the cycles a beat was offered and not taken.

    A source is a background testbench, which the simulation may leave waiting on an edge
    when it ends: :meth:`close` is for a source that has sent everything (not for a
    ``finally``: a trigger left behind lapses at the next edge by itself).
    """

    def __init__(self, ctx, stream, *, idle=0.0, rng=None):
        if idle and rng is None:
            raise ValueError("rng: idle cycles are drawn from it, so it must be given")
        self._ctx = ctx
        self._valid, self._payload = stream.valid, Value.cast(stream.payload)
        self._edges = aiter(ctx.tick().sample(stream.ready))
        self._idle, self._rng = idle, rng
        self._driven = None      # what ``valid`` was last set to
        self.t = 0
        self.stalls = 0

    def _drive(self, valid):
        if self._driven != valid:
            self._ctx.set(self._valid, valid)
            self._driven = valid

    async def wait_until(self, t):
        """Idle (``valid`` low) until clock edge ``t``."""
        while self.t < t:
            self._drive(0)
            await anext(self._edges)
            self.t += 1

    async def send(self, value):
        """Offer ``value`` (the payload's bits) after the idle cycles drawn; returns the
        clock edge that took it."""
        idle, rng = self._idle, self._rng
        while idle and rng.random() < idle:
            self._drive(0)
            await anext(self._edges)
            self.t += 1
        self._ctx.set(self._payload, value)
        self._drive(1)
        while True:
            _, _, ready = await anext(self._edges)
            self.t += 1
            if ready:
                return self.t
            self.stalls += 1

    async def close(self):
        """Release the run's trigger and lower ``valid``."""
        await self._edges.aclose()
        self._ctx.set(self._valid, 0)


def run_stream(dut, inputs, *, n_outputs=None, idle=0.0, backpressure=0.0, seed=0,
               timeout=None, i_name="i", o_name="o", vcd=None, extra_testbenches=()):
    """Simulate ``dut`` feeding ``inputs`` on stream ``i`` and collecting ``o``.

    Parameters
    ----------
    inputs : list
        Input payloads (ints or ``layout.const`` values).
    n_outputs : int
        Output beats to wait for (default: ``len(inputs)``).
    idle : float
        Probability that the source idles a cycle before offering each beat.
    backpressure : float
        Probability that the sink withholds ``ready`` in a given cycle.
    timeout : int
        Cycle limit; the run fails with ``TimeoutError`` past it.
    """
    i_stream = getattr(dut, i_name)
    o_stream = getattr(dut, o_name)
    in_layout = i_stream.payload.shape()
    packed = [pack_payload(in_layout, v) for v in inputs]
    expected = len(packed) if n_outputs is None else n_outputs
    if timeout is None:
        slack = 1 + 4 * (idle + backpressure) / max(1e-9, 1 - max(idle, backpressure))
        timeout = int((len(packed) + expected) * (1 + slack)) + 2000
    rng_src = random.Random(seed * 2 + 1)
    rng_snk = random.Random(seed * 2 + 2)
    result = StreamRun()
    # the ports, looked up once: the sink's loop runs every cycle
    o_valid, o_ready, o_payload = o_stream.valid, o_stream.ready, Value.cast(o_stream.payload)

    # Each testbench counts its own clock edges from time zero, so cycle numbers
    # agree between them without a shared counter (whose update order would race).
    async def source(ctx):
        sender = BeatSender(ctx, i_stream, idle=idle, rng=rng_src)
        for k, value in enumerate(packed):
            t = await sender.send(value)
            if k == 0:
                result.first_input_cycle = t
        await sender.close()

    async def sink(ctx):
        t = 0
        streak = 0
        driven = None      # what ``ready`` was last set to: set again only when it changes
        edges = aiter(ctx.tick().sample(o_valid, o_payload))
        while len(result.outputs) < expected:
            ready = not (backpressure and rng_snk.random() < backpressure)
            if ready != driven:
                ctx.set(o_ready, ready)
                driven = ready
            _, _, valid, payload = await anext(edges)
            t += 1
            if t > timeout:
                raise TimeoutError(
                    f"{type(dut).__name__}: {len(result.outputs)} of {expected} output "
                    f"beats after {timeout} cycles")
            if ready and valid:
                if result.first_output_cycle is None:
                    result.first_output_cycle = t
                result.outputs.append(_as_int(payload))
                streak += 1
                result.max_ready_streak = max(result.max_ready_streak, streak)
            else:
                streak = 0
        await edges.aclose()
        ctx.set(o_ready, 0)
        result.cycles = t - (result.first_input_cycle or 1) + 1

    benches = [(source, True), (sink, False)] + [(tb, True) for tb in extra_testbenches]
    simulation_of(dut).run(benches, vcd=vcd)
    return result


def _as_int(value):
    if isinstance(value, int):
        return value
    if isinstance(value, data.Const):
        return value.as_value().value
    return int(value)


def probe_registered_ready(dut, inputs, outputs, *, cycles=60, seed=0):
    """Random valids, payloads and readys for ``cycles`` cycles; in each, every input's
    ``ready`` is read for several settings of the inputs' ``valid`` and the outputs'
    ``ready``, and must not move (it is a register, or a function of registers only).
    Returns the ``ready`` values seen, per cycle."""
    rng = random.Random(seed)
    seen = []

    async def bench(ctx):
        for _ in range(cycles):
            for s in inputs:
                ctx.set(s.payload.as_value(), rng.getrandbits(len(s.payload.as_value())))
            values = []
            for _ in range(6):
                for s in inputs:
                    ctx.set(s.valid, rng.random() < 0.7)
                for s in outputs:
                    ctx.set(s.ready, rng.random() < 0.5)
                values.append(tuple(ctx.get(s.ready) for s in inputs))
            assert len(set(values)) == 1, values
            seen.append(values[0])
            await ctx.tick()

    with collector_paused():
        sim = Simulator(dut)
    sim.add_clock(4e-9)
    sim.add_testbench(bench)
    sim.run()
    return seen
