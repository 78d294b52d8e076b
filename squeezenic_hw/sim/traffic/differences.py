"""How a lane's run differs from its expectation."""

from dataclasses import dataclass

from squeezenic_hw.spec.header import HDR, HEADER_LEN

__all__ = ["Difference", "differences"]


@dataclass(frozen=True)
class Difference:
    """One way a lane's run differs from its expectation: the lane, the output frame
    (``None`` for frame counts, counters and runs that did not finish) and what."""
    lane: str
    frame: int | None
    what: str


_FIELDS = sorted((*span, name.lower()) for name, span in vars(HDR).items()
                 if not name.startswith("_"))


def _byte_name(k):
    for start, length, name in _FIELDS:
        if start <= k < start + length:
            return name
    return f"payload byte {k - HEADER_LEN}"


def _describe(got, want):
    if len(got) != len(want):
        return f"{len(got)} bytes, expected {len(want)}"
    k = next(i for i in range(len(got)) if got[i] != want[i])
    return f"byte {k} ({_byte_name(k)}): got {got[k]:#04x}, expected {want[k]:#04x}"


def differences(lane, frames, counters, expected):
    """Every way a run (``frames``: :class:`~.axis.AxisFrame` s out, ``counters``) differs from
    ``expected`` (:class:`~.expected.LaneExpectation`), first difference first; empty when equal."""
    found = []
    for k, (got, want) in enumerate(zip(frames, expected.frames, strict=False)):
        if got.data != want.data:
            found.append(Difference(lane, k, _describe(got.data, want.data)))
        elif (got.src, got.dst) != (want.src, want.dst):
            found.append(Difference(lane, k, f"tuser src/dst ({got.src}, {got.dst}), expected "
                                             f"({want.src}, {want.dst})"))
    if len(frames) != len(expected.frames):
        found.append(Difference(lane, min(len(frames), len(expected.frames)),
                                f"{len(frames)} frames out, expected {len(expected.frames)}"))
    return found + counter_differences(lane, counters, expected.counters)


def counter_differences(lane, counters, expected):
    return [Difference(lane, None, f"counter {name}: {counters.get(name)}, expected {value}")
            for name, value in expected.items() if counters.get(name) != value]
