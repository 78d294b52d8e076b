"""Where a TX coalescer record cuts wire frames, in Python: the meaning of its decision's
inputs (``squeezenic_hw.gateware.tx.coalescer``'s frame fields), for the tests of the
coalescer and of the stages that read its records."""

from dataclasses import dataclass

from squeezenic_hw.gateware.common.layouts import ELEMENTS_PER_BEAT

__all__ = ["Cut", "cut_of", "below"]


def below(v):
    """The mask of elements ``0 … v-1``."""
    return (1 << v) - 1


@dataclass(frozen=True)
class Cut:
    """The open frame takes elements ``0 … take-1`` and closes after them with ``close1``
    (with the flush flag: ``flush1``); with ``rest_opens`` elements ``take … v-1`` open the
    next frame, which ``close2`` closes too (a flush). ``prefix``/``suffix``: kept
    elements of a threshold beat among the first ``take`` and the rest."""

    take: int
    rest: int
    close1: bool
    flush1: bool
    rest_opens: bool
    close2: bool
    prefix: int
    suffix: int


def cut_of(rec):
    """The :class:`Cut` of record ``rec`` (a dict of the frame fields): a close between
    beats takes nothing and closes the open frame; a beat takes what fits (all of a beat
    that fits; ``room`` of a dense beat that does not, closing the frame it fills; the
    ``fit`` thermometer of a threshold beat) and closes the frame at its end with a
    flush."""
    v = rec["v"]
    if rec["close_only"]:
        return Cut(0, 0, True, False, False, False, 0, 0)
    if rec["sparse"]:
        take = bin(rec["fit"]).count("1")
        fills = straddles = take < v
    elif rec["room_big"] or v < rec["room_low"]:
        take, fills, straddles = v, False, False
    else:
        take, fills, straddles = rec["room_low"], True, v > rec["room_low"]
    flush = bool(rec["flush_end"])
    kept = rec["keep"] if rec["sparse"] else 0
    return Cut(take=take, rest=v - take, close1=fills or flush,
               flush1=flush and not straddles, rest_opens=straddles,
               close2=straddles and flush,
               prefix=bin(kept & below(take)).count("1"),
               suffix=bin(kept & ~below(take) & below(ELEMENTS_PER_BEAT)).count("1"))
