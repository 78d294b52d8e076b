"""A stream sink for async testbenches that withholds ``ready`` at random and checks the
stream's rule on the way: a beat offered and not taken is offered again, unchanged, in the
next cycle."""

from amaranth.hdl import Value

__all__ = ["CheckedSink", "max_streak", "take_beats"]


class CheckedSink:
    """Takes beats from ``stream`` one clock cycle at a time (:meth:`cycle`).

    ``ready`` is withheld with probability ``backpressure`` (drawn from ``rng``, once per
    cycle that would otherwise be ready). ``beat`` turns the payload's bits into what is
    compared and returned (default: the integer); ``also`` are signals sampled beside it.
    ``t`` counts the clock edges waited so far, as :class:`~squeezenic_hw.sim.streams.
    BeatSender` does. With ``holds`` false the rule is not checked: for a block whose
    output may withdraw a beat (a controller whose ``valid`` waits on the ``ready`` of its
    other outputs, into FIFOs).
    """

    def __init__(self, ctx, stream, *, backpressure=0.0, rng=None, beat=None, also=(),
                 holds=True):
        if backpressure and rng is None:
            raise ValueError("rng: backpressure is drawn from it, so it must be given")
        self._ctx, self._ready = ctx, stream.ready
        self._edges = aiter(ctx.tick().sample(stream.valid, Value.cast(stream.payload), *also))
        self._backpressure, self._rng = backpressure, rng
        self._beat = beat or int
        self._held = None
        self._holds = holds
        self.t = 0

    async def cycle(self, ready=True):
        """One clock cycle, ``ready`` unless withheld (or ``ready`` false): returns the beat
        taken at its edge (``None``: none) and the values of ``also`` there."""
        ready = ready and not (self._backpressure and self._rng.random() < self._backpressure)
        self._ctx.set(self._ready, ready)
        _, _, valid, payload, *also = await anext(self._edges)
        self.t += 1
        beat = self._beat(payload)
        if self._held is not None:
            assert valid and beat == self._held, \
                f"a beat offered and not taken changed or left at cycle {self.t}"
        self._held = beat if valid and not ready and self._holds else None
        return (beat if valid and ready else None), also

    async def close(self):
        """Release the run's trigger and lower ``ready``."""
        await self._edges.aclose()
        self._ctx.set(self._ready, 0)


def max_streak(cycles):
    """The longest run of consecutive cycles in ``cycles`` (a sink's output cycles, in
    order): how many beats in a row left at one beat per cycle."""
    best = streak = 0
    for k, c in enumerate(cycles):
        streak = streak + 1 if k and c == cycles[k - 1] + 1 else 1
        best = max(best, streak)
    return best


async def take_beats(sink, count, *, timeout, quiet=20):
    """Take ``count`` beats from ``sink`` (a :class:`CheckedSink`) within ``timeout``
    cycles, then check that no more leaves in ``quiet`` cycles and close it; returns the
    beats and the cycles they left."""
    beats, cycles = [], []
    while len(beats) < count:
        beat, _ = await sink.cycle()
        assert sink.t < timeout, f"{len(beats)} of {count} beats after {sink.t} cycles"
        if beat is not None:
            beats.append(beat)
            cycles.append(sink.t)
    for _ in range(quiet):
        beat, _ = await sink.cycle()
        assert beat is None, "a beat more than expected"
    await sink.close()
    return beats, cycles
