"""Frame-level AXI-Stream drivers: whole frames in and out of a 512-bit OpenNIC stream.

:func:`frame_beats` cuts a frame (``bytes``) into :class:`AxisBeat` values,
:class:`FrameSource` sends frames at given arrival cycles with random idle
cycles between beats, and :class:`FrameSink` collects frames under random
backpressure and checks the AXI-Stream rules on the way (``tkeep`` a prefix
and only short on ``tlast``; ``tuser_*`` constant within a frame;
``tuser_size`` equal to the bytes delivered). All randomness comes from seeded
``random.Random`` objects, so a failing run repeats.

Cycle numbers count clock edges from time zero in each testbench; a source
and a sink built on the same simulator agree on them.
"""

import functools
import random
import types
from dataclasses import dataclass

from amaranth.hdl import Shape
from amaranth.lib.data import Layout

from squeezenic_hw.gateware.common.layouts import DATA_BYTES, AxisBeat

from .streams import BeatSender

__all__ = ["AxisFrame", "frame_beats", "field_slices", "FrameSource", "FrameAssembler",
           "FrameSink"]


@dataclass
class AxisFrame:
    """A frame with its OpenNIC side-band and, once collected, its timing."""
    data: bytes
    src: int = 0
    dst: int = 0
    size: int | None = None          # tuser_size; default len(data)
    first_cycle: int | None = None   # cycle the first beat was transferred
    last_cycle: int | None = None    # cycle the last beat was transferred


def frame_beats(frame, layout=AxisBeat):
    """The beats of ``frame`` (an :class:`AxisFrame` or ``bytes``) as ints of ``layout``
    (:class:`AxisBeat`, or a layout with some of its fields, such as ``BareBeat``)."""
    if not isinstance(frame, AxisFrame):
        frame = AxisFrame(bytes(frame))
    data = frame.data
    size = len(data) if frame.size is None else frame.size
    fields = field_slices(layout)

    def place(name, value):
        at = fields.get(name)
        return 0 if at is None else (value & at[1]) << at[0]

    n = max(1, -(-len(data) // DATA_BYTES))
    # what ``layout.const`` packs, field by field, about 25 times faster: every beat of a
    # bulk campaign goes through here
    user = place("size", size) | place("src", frame.src) | place("dst", frame.dst)
    full = place("keep", (1 << DATA_BYTES) - 1)
    beats = []
    for k in range(n):
        chunk = data[k * DATA_BYTES:(k + 1) * DATA_BYTES]
        keep = full if len(chunk) == DATA_BYTES else place("keep", (1 << len(chunk)) - 1)
        beats.append(place("data", int.from_bytes(chunk, "little")) | keep
                     | place("last", int(k == n - 1)) | user)
    return beats


@functools.cache
def field_slices(layout):
    """``{name: (offset, mask)}`` of every field of ``layout``, all of them unsigned: a
    value goes in as ``(value & mask) << offset`` (truncated to the field's width, as
    ``layout.const`` does) and comes out of a packed int as ``(word >> offset) & mask``."""
    fields = {}
    for name, field in Layout.cast(layout):
        shape = Shape.cast(field.shape)
        if shape.signed:
            raise TypeError(f"field {name!r} of {layout!r} is signed")
        fields[name] = (field.offset, (1 << shape.width) - 1)
    return types.MappingProxyType(fields)   # one per layout, shared: read-only


class FrameSource:
    """Drives frames into a stream (``valid``/``ready``/``payload`` of ``AxisBeat``).

    Parameters
    ----------
    stream : the DUT's input stream interface
    frames : list of AxisFrame or bytes
    times : list of int, optional
        Earliest cycle for each frame's first beat (frames never overlap; a
        frame that cannot start on time starts as soon as it can).
    idle : float
        Probability of an idle cycle before each beat.
    """

    def __init__(self, stream, frames, *, times=None, idle=0.0, seed=0):
        self.stream = stream
        self.frames = [f if isinstance(f, AxisFrame) else AxisFrame(bytes(f)) for f in frames]
        self.times = times
        self.idle = idle
        self.rng = random.Random(seed * 7919 + 1)
        self.accepted_cycles = []   # cycle each frame's first beat was accepted
        self.done_cycle = None      # cycle after the last beat was accepted
        self._sender = None         # the run's BeatSender, once it runs

    @property
    def stalls(self):
        """Cycles a beat was offered and not taken."""
        return 0 if self._sender is None else self._sender.stalls

    async def run(self, ctx):
        layout = self.stream.payload.shape()
        sender = self._sender = BeatSender(ctx, self.stream, idle=self.idle, rng=self.rng)
        for k, frame in enumerate(self.frames):
            if self.times is not None:
                await sender.wait_until(self.times[k])
            for b, beat in enumerate(frame_beats(frame, layout)):
                t = await sender.send(beat)
                if b == 0:
                    self.accepted_cycles.append(t)
        await sender.close()
        self.done_cycle = sender.t


class FrameAssembler:
    """Output beats into :class:`AxisFrame` s, checking the AXI-Stream rules on the way:
    ``tkeep`` a prefix and only short on ``tlast``, ``tuser_*`` constant within a frame,
    ``tuser_size`` equal to the bytes delivered (``AssertionError`` otherwise)."""

    def __init__(self):
        self._chunks, self._head = [], None

    def add(self, cycle, data, keep, last, user):
        """One transferred beat (``user`` = ``(size, src, dst)``); the frame it ends, or
        ``None``."""
        if self._head is None:
            self._head = (user, cycle)
        elif user != self._head[0]:
            raise AssertionError(f"tuser changed within a frame: {self._head[0]} then {user}")
        n = keep.bit_length()
        if keep != (1 << n) - 1 or (not last and n != DATA_BYTES):
            raise AssertionError(f"bad tkeep {keep:#x} (last={last})")
        self._chunks.append(data.to_bytes(DATA_BYTES, "little")[:n])
        if not last:
            return None
        payload = b"".join(self._chunks)
        (size, src, dst), first = self._head
        self._chunks, self._head = [], None
        if size != len(payload):
            raise AssertionError(f"tuser_size {size} but {len(payload)} bytes")
        return AxisFrame(payload, src=src, dst=dst, size=size, first_cycle=first,
                         last_cycle=cycle)


class FrameSink:
    """Collects frames from a stream under random backpressure.

    Stops after ``n_frames`` frames or, when ``n_frames`` is ``None``, after
    ``quiet`` cycles without a beat once ``source`` (a :class:`FrameSource`)
    has finished. Raises ``AssertionError`` on an AXI-Stream rule broken and
    ``TimeoutError`` after ``timeout`` cycles.
    """

    def __init__(self, stream, *, n_frames=None, backpressure=0.0, seed=0, quiet=200,
                 source=None, timeout=1_000_000):
        self.stream = stream
        self.n_frames = n_frames
        self.backpressure = backpressure
        self.rng = random.Random(seed * 7919 + 2)
        self.quiet = quiet
        self.source = source
        self.timeout = timeout
        self.frames = []
        self.beats = 0
        self.cycles = 0
        self.max_streak = 0   # longest run of back-to-back beats
        self.gaps = 0         # cycles inside a frame with ready high and no beat

    def _done(self, t, last_beat):
        if self.n_frames is not None:
            return len(self.frames) >= self.n_frames
        if self.source is not None:
            if self.source.done_cycle is None:
                return False
            last_beat = max(last_beat, self.source.done_cycle)
        return t - last_beat >= self.quiet

    async def run(self, ctx):
        s, t, last_beat, streak = self.stream, 0, 0, 0
        assembler, in_frame = FrameAssembler(), False
        # the ports, looked up once, and the payload sampled as one int (no view of it made
        # each cycle): this loop runs every cycle of a run
        ready_port, valid_port, payload_port = s.ready, s.valid, s.payload.as_value()
        fields = field_slices(s.payload.shape())
        data_at, keep_at, last_at, size_at, src_at, dst_at = (
            fields[name] for name in ("data", "keep", "last", "size", "src", "dst"))
        backpressure, rng = self.backpressure, self.rng
        driven = None      # what ``ready`` was last set to: set again only when it changes
        # one trigger for every clock edge of the run, not one made and registered per edge
        # (closed when the loop ends; a run that ends first leaves it to lapse at the next
        # edge: closing it there, while it waits, is an error)
        edges = aiter(ctx.tick().sample(valid_port, payload_port))
        while not self._done(t, last_beat):
            ready = not (backpressure and rng.random() < backpressure)
            if ready != driven:
                ctx.set(ready_port, ready)
                driven = ready
            _, _, valid, payload = await anext(edges)
            t += 1
            if t > self.timeout:
                raise TimeoutError(f"{len(self.frames)} frames after {t} cycles")
            if not (valid and ready):
                streak = 0
                if ready and in_frame:
                    self.gaps += 1
                continue
            streak += 1
            self.max_streak = max(self.max_streak, streak)
            self.beats += 1
            last_beat = t
            frame = assembler.add(
                t, (payload >> data_at[0]) & data_at[1],
                (payload >> keep_at[0]) & keep_at[1], (payload >> last_at[0]) & last_at[1],
                tuple((payload >> at) & mask for at, mask in (size_at, src_at, dst_at)))
            in_frame = frame is None
            if frame is not None:
                self.frames.append(frame)
        await edges.aclose()
        ctx.set(s.ready, 0)
        self.cycles = t
