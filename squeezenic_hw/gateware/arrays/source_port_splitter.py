"""One AXI-Stream to two, a whole frame at a time: the on-chip generators' frames apart.

The OpenNIC plugin's wire port carries the host's traffic and, with
``--host-bw`` above 100, the frames of the on-chip generators (UDP source ports
``base … base + count − 1``). On RX those go to the checker array, the rest to
the host's RX lane.
"""

import struct

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    AxisBeat,
    axis_signature,
    field_be,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.spec.header import DEFAULT_PORT, HDR

from .distributor import looks_squeezenic, squeezenic_udp_match

__all__ = ["SourcePortSplitter", "is_generator_frame"]


def is_generator_frame(frame, base, count, *, port=DEFAULT_PORT):
    """``True`` when :class:`SourcePortSplitter` sends ``frame`` to ``o[1]``: the model."""
    frame = bytes(frame)
    return (looks_squeezenic(frame, port)
            and base <= struct.unpack_from("!H", frame, 34)[0] < base + count)


class SourcePortSplitter(wiring.Component):
    """Sends the SqueezeNIC frames of UDP source ports ``base…base+count−1`` to ``o[1]``.

    Parameters
    ----------
    base : int
        First generator source port, 0…65535.
    count : int
        Number of generator source ports, 1…64 (``base + count`` ≤ 65536).
    port : int
        The SqueezeNIC UDP destination port.

    Attributes
    ----------
    i : In(axis_signature())
    o : Out(axis_signature()).array(2)
        ``o[1]``: frames of :func:`is_generator_frame`; ``o[0]``: every other
        frame (ARP, other ports, host tensors, runts). Beats leave unchanged.

    Notes
    -----
    Latency: 1 cycle (the output register). Throughput: one beat per cycle,
    frames back to back. Backpressure: head of line: the beat in the output
    register waits for its own output's ``ready`` and holds ``i`` meanwhile. The
    output register is a :class:`~squeezenic_hw.gateware.common.stream.SkidBuffer`,
    so ``i.ready`` is a register (it falls one cycle after the output stalls; the
    beat taken in that cycle waits in the skid register): no ready path crosses
    the splitter. Reset: the valid bits and the frame state; the beat registers
    take none.
    """

    def __init__(self, base, count, *, port=DEFAULT_PORT):
        for name, value, lo, hi in (("base", base, 0, 0xFFFF), ("count", count, 1, 64),
                                    ("port", port, 0, 0xFFFF)):
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an int from {lo} to {hi}, got {value!r}")
        if base + count > 0x10000:
            raise ValueError(f"base + count must be at most 65536, got {base} + {count}")
        self.base, self.count, self.port = base, count, port
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(axis_signature()).array(2),
        })

    def elaborate(self, platform):
        m = Module()
        d = self.i.payload.data
        src = field_be(d, *HDR.UDP_SRC)
        match = Signal()
        m.d.comb += match.eq(squeezenic_udp_match(self.i.payload, self.port)
                             & (src >= self.base) & (src < self.base + self.count))

        m.submodules.out = out = SkidBuffer(
            data.StructLayout({"beat": AxisBeat, "to": unsigned(1)}))
        in_frame = Signal()          # beats of a frame taken, not yet its last
        frame_to = Signal()          # output of the frame in progress
        target = Signal()
        m.d.comb += target.eq(Mux(in_frame, frame_to, match))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [in_frame.eq(~self.i.payload.last), frame_to.eq(target)]
        to = out.o.payload.to
        m.d.comb += [
            out.i.valid.eq(self.i.valid),
            self.i.ready.eq(out.i.ready),
            out.i.payload.beat.eq(self.i.payload),
            out.i.payload.to.eq(target),
            out.o.ready.eq(Mux(to, self.o[1].ready, self.o[0].ready)),
        ]
        for k, o in enumerate(self.o):
            m.d.comb += [o.valid.eq(out.o.valid & (to == k)), o.payload.eq(out.o.payload.beat)]
        return m
