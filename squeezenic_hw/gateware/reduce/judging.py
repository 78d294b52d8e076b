"""What the reduce lane's two frame judges share: the ring's frames from the wire
(:class:`~.checker.ReduceChecker`) and the host's contribution frames
(:class:`~.contribution_checker.ContributionChecker`) are both checked from their header
beat while their beats wait in a queue, then leave with their verdict."""

from amaranth import Mux, Signal

from squeezenic_hw.gateware.common.layouts import Reason, field_le
from squeezenic_hw.gateware.common.stream import LutramFifo
from squeezenic_hw.gateware.lane.classifier import FrameClassifier
from squeezenic_hw.spec.header import FLAG_STOCHASTIC, HDR

__all__ = ["MIN_DEPTH", "check_depth", "header_byte", "header_flag", "settings_compares",
           "queued_input", "first_failing", "count_verdicts", "leave_by_verdict"]

#: The smallest input queue of a judge at one beat per cycle: the beats its checks'
#: latency holds.
MIN_DEPTH = 12


def check_depth(depth):
    """``depth`` if it is an int from :data:`MIN_DEPTH` to 64, else ``ValueError`` naming
    it."""
    if isinstance(depth, bool) or not isinstance(depth, int) or not MIN_DEPTH <= depth <= 64:
        raise ValueError(f"depth must be an int from {MIN_DEPTH} to 64, got {depth!r}")
    return depth


def header_byte(value, start):
    """Byte ``start`` of a header beat's data."""
    return field_le(value, start, 1)


def header_flag(flags, mask):
    """The bit of ``flags`` that the one-bit ``mask`` selects."""
    return flags[mask.bit_length() - 1]


def settings_compares(data, cfg):
    """The five compares of check ``settings`` (the header's codec, param, stochastic flag,
    scale and aux against ``cfg``'s), as a list of one-bit values."""
    flags = header_byte(data, HDR.FLAGS[0])
    return [
        header_byte(data, HDR.CODEC[0]) == cfg.codec,
        header_byte(data, HDR.PARAM[0]) == cfg.param,
        header_flag(flags, FLAG_STOCHASTIC) == cfg.stochastic,
        field_le(data, *HDR.SCALE) == cfg.scale,
        field_le(data, *HDR.AUX) == cfg.aux,
    ]


def queued_input(m, i, *, port, depth, cfg_port, hold=None):
    """The input of a judge: every beat of stream ``i`` into a beat queue of ``depth`` as it
    is accepted (``i.ready`` is the queue's room, a flip-flop, and not ``hold``, a
    flip-flop too when given), and into a
    :class:`~squeezenic_hw.gateware.lane.classifier.FrameClassifier` without codecs (section
    7's checks before ``version``) beside it, which never stalls. Returns the queue and the
    classifier, whose output is five stages behind the input."""
    m.submodules.beat_queue = beats = LutramFifo(width=len(i.payload.as_value()), depth=depth)
    m.submodules.classifier = classifier = FrameClassifier("rx", port=port, codecs=())
    accept = Signal()
    ready = beats.w_rdy if hold is None else beats.w_rdy & ~hold
    m.d.comb += [
        i.ready.eq(ready),
        beats.w_en.eq(i.valid & ready),
        beats.w_data.eq(i.payload),
        accept.eq(i.valid & ready),
        classifier.i.valid.eq(accept),
        classifier.i.payload.eq(i.payload),
        classifier.o.ready.eq(1),
        classifier.cfg_port.eq(cfg_port),
    ]
    return beats, classifier


def first_failing(m, classifier, is_kind, failed, check_enum, not_kind, *, name):
    """The check of a frame's header (at the classifier's output stage): ``not_kind`` when
    section 7's checks fail or ``is_kind`` is false, else the first reason of ``failed``
    (``{reason: failure bit}``, in check order) whose bit is set, else ``NONE``, as a
    ``check_enum`` signal."""
    cls = classifier.o
    pre = Signal(check_enum, name=name)
    with m.If((cls.payload.reason != Reason.VERSION) | ~is_kind):
        m.d.comb += pre.eq(not_kind)
    for reason, bit in failed.items():
        with m.Elif(bit):
            m.d.comb += pre.eq(check_enum[reason.name])
    return pre


def count_verdicts(m, counters, header, check, reasons, check_enum, name_of):
    """A frame counts once its check is known (``header``: its header's verdict cycle):
    ``counters[name_of(reason)]`` for its ``check``."""
    for reason in reasons:
        name = name_of(reason)
        with m.If(header & (check == check_enum[reason.name])):
            m.d.sync += counters[name].eq(counters[name] + 1)


def leave_by_verdict(m, beats, tags, valid, depth, take, other):
    """Queue each beat's ``tags`` as its verdict comes (``valid``), bit 0 the frame being
    taken; a beat leaves the FIFO ``beats`` with its tags onto ``take`` or ``other`` when
    that output takes it. Drives both outputs' ``valid`` and the queues' reads; returns
    the tags at the head but bit 0, and the beat at the head, for the outputs' payloads.

    Backpressure: a stalled output holds the head; the queues fill behind it."""
    m.submodules.tag_queue = tag_queue = LutramFifo(width=len(tags), depth=depth)
    taken = tag_queue.r_data[0]
    leave = tag_queue.r_rdy & Mux(taken, take.ready, other.ready)
    m.d.comb += [
        tag_queue.w_en.eq(valid),
        tag_queue.w_data.eq(tags),
        take.valid.eq(tag_queue.r_rdy & taken),
        other.valid.eq(tag_queue.r_rdy & ~taken),
        tag_queue.r_en.eq(leave),
        beats.r_en.eq(leave),
    ]
    return tag_queue.r_data[1:], beats.r_data
