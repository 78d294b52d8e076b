"""Beat and side-band layouts shared by the blocks of the TX and RX lanes.

* :class:`AxisBeat` — one beat of an OpenNIC AXI-Stream (``tdata`` 512,
  ``tkeep`` 64, ``tlast``, ``tuser_size``/``tuser_src``/``tuser_dst``).
* :class:`Reason` — why a frame bypasses a lane (0 = it does not); the
  hardware twin of :class:`squeezenic_hw.spec.frames.BypassReason`, same order.
* :class:`PackMeta` — what the TX controller tells the packer about a beat of
  codes (how many, their width, where the open wire frame closes).
* Header byte helpers: the first beat of a frame is the whole 64-byte header;
  byte ``i`` is ``tdata[8i + 7 : 8i]``.
"""

import types

from amaranth import Cat, Const, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.spec.frames import BypassReason

__all__ = [
    "DATA_BYTES", "BEAT_BITS", "ELEMENTS_PER_BEAT", "CODES_PER_JOB", "AxisBeat",
    "axis_signature", "derived_enum", "Reason", "reason_of", "PackMeta",
    "header_bytes", "field_be", "field_le", "narrow_span",
]


#: Bytes per 512-bit beat.
DATA_BYTES = 64
#: Bits per beat.
BEAT_BITS = 8 * DATA_BYTES
#: fp32 elements per beat.
ELEMENTS_PER_BEAT = BEAT_BITS // 32
#: Codes per codec job: one beat of fp32 elements.
CODES_PER_JOB = ELEMENTS_PER_BEAT


def narrow_span(widths):
    """The low bits of a packed beat that a job's codes of ``widths`` can reach, counting
    only the widths that are not a multiple of 32: ``16·w`` for the largest of them (0
    without any).

    A frame of a width that is a multiple of 32 starts on a beat and takes whole words,
    so it never sits off a 32-bit boundary: the packer's and the unpacker's shifts by a
    bit position below 32 need to cover only this span."""
    return CODES_PER_JOB * max((w for w in widths if w % 32), default=0)


class AxisBeat(data.Struct):
    """One beat of OpenNIC's 512-bit AXI-Stream (``tvalid``/``tready`` are the stream's)."""
    data: unsigned(512)   # tdata, byte 0 in bits 7:0
    keep: unsigned(64)    # tkeep, holes only on the last beat
    last: unsigned(1)     # tlast
    size: unsigned(16)    # tuser_size: frame length in bytes, valid from the first beat
    src: unsigned(16)     # tuser_src, passed through
    dst: unsigned(16)     # tuser_dst, passed through


def axis_signature():
    """``stream.Signature`` of :class:`AxisBeat` (use with ``In``/``Out``)."""
    return stream.Signature(AxisBeat)


def keep_through(last_byte):
    """``tkeep`` of a beat whose bytes 0 … ``last_byte`` are valid (a 6-bit value)."""
    return Cat(Const(1, 1), *[last_byte >= e for e in range(1, DATA_BYTES)])


class BareBeat(data.Struct):
    """One beat of a wire frame whose header a
    :class:`~squeezenic_hw.gateware.arrays.header_finisher.HeaderFinisher` completes:
    ``tdata`` and ``tlast`` only. The header's IPv4 total length and checksum are zero,
    its UDP length field holds ``tuser_src`` and its UDP checksum field ``tuser_dst``
    (both big-endian); ``tkeep`` and ``tuser_size`` follow from the header's ``n``."""
    data: unsigned(512)
    last: unsigned(1)


def bare_signature():
    """``stream.Signature`` of :class:`BareBeat`."""
    return stream.Signature(BareBeat)


def frame_bus_signature():
    """One lane's side of a frame bus (the lane's view;
    :class:`~squeezenic_hw.gateware.arrays.frame_bus.FrameBusArbiter` takes ``N``).

    Every lane drives ``show``, ``penult`` and ``beat`` to zero but while it shows a beat
    of a frame, so the bus is the OR of the lanes. ``ready``: a frame waits to be sent.
    ``grant``: the lane may start its next frame (the arbiter's register). ``en``: the
    beat shown is taken this cycle, and the lanes move on (the arbiter's register).
    ``penult``: the beat shown is its frame's last but one. The beat shown is the OR
    of ``head`` (a header's bits, zero on other beats) and ``beat`` (a
    :class:`BareBeat`): two inputs of the bus's OR tree rather than an OR gate per bit
    in every lane.
    """
    return wiring.Signature({
        "ready": Out(1),
        "grant": In(1),
        "en": In(1),
        "show": Out(1),
        "penult": Out(1),
        "head": Out(BEAT_BITS),
        "beat": Out(BareBeat),
    })


#: Row halves a shared ring writes separately (its write port's enables).
RING_HALVES = 2


def shared_ring_signature(rows):
    """One lane's side of a ring shared by a cluster of lanes (the lane's view;
    :class:`~squeezenic_hw.gateware.arrays.ring_cluster.RingCluster` takes ``G``), each
    lane a region of ``rows`` rows.

    ``w_data``: the lane's row register. ``w_en``: its halves waiting to be written to
    row ``w_addr`` (registers). ``w_turn``: the cluster writes them this cycle (the
    cluster's register; one lane's turn a cycle, in rotation). ``r_addr``: the row to
    read, for the cycle after, when ``r_en``; the lane leaves it ``rows - 1`` when not
    (a row it never writes).
    """
    return wiring.Signature({
        "w_data": Out(BEAT_BITS),
        "w_en": Out(RING_HALVES),
        "w_addr": Out(range(rows)),
        "w_turn": In(1),
        "r_addr": Out(range(rows)),
        "r_en": Out(1),
    })


def derived_enum(name, module, doc, members):
    """An ``amaranth.lib.enum.Enum`` class ``name`` of ``members`` (``{name: value}``),
    unsigned and as wide as its largest value, documented as a class of ``module``: the
    hardware twin of a ``spec`` enumeration, derived from it."""
    def body(namespace):
        # an enum's namespace takes its members one by one
        for key, value in {"__module__": module, "__qualname__": name, "__doc__": doc,
                           **members}.items():
            namespace[key] = value
    shape = unsigned(max(members.values()).bit_length())
    return types.new_class(name, (enum.Enum,), {"shape": shape}, body)


#: The hardware twin of :class:`~squeezenic_hw.spec.frames.BypassReason`, derived from it:
#: ``NONE`` = 0, then every reason in check order.
Reason = derived_enum(
    "Reason", __name__,
    "Bypass reason code: 0 (``NONE``) = processed, else "
    ":class:`~squeezenic_hw.spec.frames.BypassReason` in check order, from 1.",
    {"NONE": 0} | {r.name: code for code, r in enumerate(BypassReason, start=1)})


def reason_of(bypass_reason):
    """The :class:`Reason` for a :class:`~squeezenic_hw.spec.frames.BypassReason` (or ``None``)."""
    return Reason.NONE if bypass_reason is None else Reason[bypass_reason.name]


class PackMeta(data.Struct):
    """Side-band of one beat of codes on its way to the packer.

    The beat's codes ``0 … count-1`` are valid (a prefix); each is ``width``
    bits in the low bits of its 32-bit field, zero above.

    * ``close_mid``: the open wire frame closes after code ``split - 1``
      (``1 ≤ split < count``); codes ``split … count-1`` open the next one.
    * ``close_end``: the open wire frame closes after code ``count - 1`` (with
      ``count = 0`` this is a close with no new codes). Never together with
      ``close_mid``.
    * ``keep``/``base``/``layout``: ``threshold`` jobs only (see
      :class:`~.sparse.compactor.SparseCompactor`); zero otherwise.
    """
    width: unsigned(6)      # bits per code, 1…32
    count: unsigned(5)      # valid codes, 0…16
    split: unsigned(5)      # with close_mid: codes in the closing frame, 1…count-1 (0: threshold)
    close_mid: unsigned(1)
    close_end: unsigned(1)
    # threshold only (the sparse path; the packer ignores them):
    keep: unsigned(16)      # element e of the job is kept (e < count)
    base: unsigned(16)      # index of element 0 within the open wire frame
    layout: unsigned(1)     # with a close: the closing frame's layout (0 bitmap, 1 index list)


def header_bytes(value, start, length):
    """Bytes ``start … start+length-1`` of a beat's data, byte ``start`` lowest."""
    return value[8 * start:8 * (start + length)]


def field_le(value, start, length):
    """A little-endian header field (the SqueezeNIC fields)."""
    return header_bytes(value, start, length)


def field_be(value, start, length):
    """A big-endian header field (Ethernet/IP/UDP): byte ``start`` is the most significant."""
    return Cat(*[value[8 * b:8 * b + 8] for b in reversed(range(start, start + length))])


class RingWrite(data.Struct):
    """Up to two payload beats of a wire frame, from the packer into the frame ring.

    ``beats[0 … count-1]`` are the next payload beats, in order. ``commit``: the
    wire frame being written closes after them (all of its beats are in).
    """
    beats: data.ArrayLayout(unsigned(512), 2)
    count: unsigned(2)      # 0…2
    commit: unsigned(1)


class RingRead(data.Struct):
    """A payload beat held on one of the TX ring's two read ports: ``banks[bank]``.

    Both ports' outputs travel, so that the reader selects the bank in the same LUT as
    its own choice of source (the frame merger: one 4:1 multiplexer a bit)."""
    banks: data.ArrayLayout(unsigned(512), 2)
    bank: unsigned(1)


class FrameToken(data.Struct):
    """One output frame of a lane, in output order, for the frame merger.

    ``built = 1``: the merger sends ``header`` as the first beat, then
    ``⌈(size − 64)/64⌉`` beats from its payload stream (``tkeep`` of the last
    one from ``size``). ``built = 0``: the merger forwards the next whole frame
    (up to ``tlast``) of its bypass stream unchanged, and ``header``/``size``
    /``src``/``dst`` are ignored.
    """
    built: unsigned(1)
    header: unsigned(512)
    size: unsigned(16)
    src: unsigned(16)
    dst: unsigned(16)


__all__ += ["RingWrite", "RingRead", "FrameToken", "token_tag_layout"]


def token_tag_layout():
    """What rides through the header builder with each descriptor, to become a FrameToken."""
    return data.StructLayout({"built": unsigned(1), "size": unsigned(16),
                              "src": unsigned(16), "dst": unsigned(16)})
