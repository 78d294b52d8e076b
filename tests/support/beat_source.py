"""A source for async testbenches: a list of beats offered on a stream, with random idle
cycles, through :class:`~squeezenic_hw.sim.streams.BeatSender`."""

from squeezenic_hw.sim.streams import BeatSender

__all__ = ["send_beats"]


async def send_beats(ctx, stream, words, *, idle=0.0, rng=None):
    """Offer ``words`` (payload integers) on ``stream`` in order, an idle cycle before each
    with probability ``idle``; returns the cycles they were taken."""
    sender = BeatSender(ctx, stream, idle=idle, rng=rng)
    taken = [await sender.send(w) for w in words]
    await sender.close()
    return taken
