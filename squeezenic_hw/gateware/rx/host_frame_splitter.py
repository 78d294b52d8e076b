"""Cut each decoded wire frame into host frames of at most ``max_host_elements`` (section 7).

Input: one :func:`~.rx.controller.wire_desc_layout` descriptor per RX input
frame, in order. Output: header-builder descriptors, one per output frame —
``⌈n / M⌉`` host frames for a wire frame (contiguous offsets, ``encoded``
cleared, ``flush`` only on the last one, length 64 + 4·m), or the bypassed
frame's descriptor passed through.
"""

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import token_tag_layout
from squeezenic_hw.gateware.lane.header_builder import header_request_layout
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    MAX_PKT_LEN,
)

from .controller import wire_desc_layout

__all__ = ["HostFrameSplitter", "check_max_host_elements"]


def check_max_host_elements(max_host_elements):
    """``max_host_elements`` if a host frame of that many fp32 elements fits
    ``MAX_PKT_LEN``, else ``ValueError`` naming it."""
    limit = (MAX_PKT_LEN - HEADER_LEN) // 4
    if isinstance(max_host_elements, bool) or not isinstance(max_host_elements, int) or not (
            1 <= max_host_elements <= limit):
        raise ValueError(f"max_host_elements must be from 1 to {limit}, "
                         f"got {max_host_elements!r}")
    return max_host_elements


class HostFrameSplitter(wiring.Component):
    """Turns wire-frame descriptors into host-frame header descriptors.

    Parameters
    ----------
    max_host_elements : int
        Most elements per host frame, 1…2384.

    Ports: ``i`` (:func:`~.rx.controller.wire_desc_layout`), ``o``
    (:func:`~squeezenic_hw.gateware.lane.header_builder.header_request_layout` with a
    :func:`~.common.layouts.token_tag_layout` tag), ``host_frames`` (count of
    host frames described).

    Latency: 1 cycle (registered output). Throughput: one descriptor per
    cycle; a wire frame of ``n`` elements takes ``⌈n/M⌉`` cycles. Backpressure:
    holds; ``i.ready`` is a mux of this block's registers and the input's
    ``single`` flag, and ``o.ready``. Only ``busy``, ``o.valid`` and the count
    are reset.
    """

    def __init__(self, *, max_host_elements=DEFAULT_HOST_ELEMENTS):
        self._max = check_max_host_elements(max_host_elements)
        super().__init__({
            "i": In(stream.Signature(wire_desc_layout())),
            "o": Out(stream.Signature(header_request_layout(token_tag_layout()))),
            "host_frames": Out(unsigned(32)),
        })

    def elaborate(self, platform):
        m = Module()
        M = self._max
        i, o = self.i, self.o
        busy = Signal()            # splitting the wire frame in i.payload
        left = Signal(16, reset_less=True)
        left_last = Signal(reset_less=True)    # left ≤ M
        offset = Signal(32, reset_less=True)

        # Elements of the next host frame, and whether it is the last one: from registers
        # (the controller says whether a wire frame fits one host frame), so i.ready is a
        # mux of flip-flops and o.ready.
        cur_left = Mux(busy, left, i.payload.n)
        cur_offset = Mux(busy, offset, i.payload.offset)
        last = Mux(busy, left_last, i.payload.single)
        count = Signal(16)
        m.d.comb += count.eq(Mux(last, cur_left, M))
        size = Signal(16)
        m.d.comb += size.eq(HEADER_LEN + (count << 2))
        flags = (i.payload.flags & FLAG_STOCHASTIC) | Mux(
            last, i.payload.flags & FLAG_FLUSH, Const(0, 8))

        can_load = ~o.valid | o.ready
        with m.If(o.valid & o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(can_load & i.valid):
            m.d.sync += [
                o.valid.eq(1),
                o.payload.template.eq(i.payload.template),
                o.payload.tag.built.eq(i.payload.built),
                o.payload.tag.src.eq(i.payload.src),
                o.payload.tag.dst.eq(i.payload.dst),
            ]
            with m.If(i.payload.built):
                m.d.sync += [
                    o.payload.n.eq(count),
                    o.payload.offset.eq(cur_offset),
                    o.payload.flags.eq(flags),
                    o.payload.size.eq(size),
                    o.payload.tag.size.eq(size),
                    self.host_frames.eq(self.host_frames + 1),
                ]
                with m.If(last):
                    m.d.comb += i.ready.eq(1)
                    m.d.sync += busy.eq(0)
                with m.Else():
                    m.d.sync += [busy.eq(1), left.eq(cur_left - M), left_last.eq(cur_left <= 2 * M),
                                 offset.eq(cur_offset + M)]
            with m.Else():
                m.d.sync += [o.payload.size.eq(i.payload.size),
                             o.payload.tag.size.eq(i.payload.size)]
                m.d.comb += i.ready.eq(1)
        return m
