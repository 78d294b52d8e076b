"""One AXI-Stream to N, a whole frame at a time, routed on the UDP source port.

The RX array expands the one wire port to N RX lanes with this distributor.
The TX generator of lane ``k`` sends with UDP source port ``base + k``, so
routing SqueezeNIC frames to output ``source port mod N`` brings each TX
lane's frames to one RX lane (lane ``k`` to output ``k`` when ``base`` is a
multiple of N, e.g. of 64) and keeps every tensor stream in order.
"""

import struct

from amaranth import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import (
    AxisBeat,
    axis_signature,
    field_be,
    header_bytes,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.spec.header import DEFAULT_PORT, ETHERTYPE_IPV4, HDR, IPV4_VIHL, PROTO_UDP

__all__ = ["FrameDistributor", "route_frame", "looks_squeezenic", "squeezenic_udp_match",
           "MAX_OUTPUTS", "ROUTE_MIN_BYTES"]

#: Largest number of outputs (64 RX lanes).
MAX_OUTPUTS = 64
#: A frame needs bytes 0…37 (Ethernet, IPv4 without options, UDP ports) to be routed on them.
ROUTE_MIN_BYTES = 38



def _check_port(port):
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 2**16:
        raise ValueError(f"port must be an int from 0 to 65535, got {port!r}")


def route_frame(frame, n_outputs, *, port=DEFAULT_PORT):
    """The output :class:`FrameDistributor` sends ``frame`` (``bytes``) to: the model.

    A frame "looks SqueezeNIC" when it has at least 38 bytes, EtherType 0x0800,
    byte 14 = 0x45 (IPv4, IHL 5), IP protocol 17 (UDP) and UDP destination port
    ``port``; it then goes to output ``UDP source port mod n_outputs``. Any other
    frame goes to output 0.
    """
    frame = bytes(frame)
    if looks_squeezenic(frame, port):
        return struct.unpack_from("!H", frame, 34)[0] % n_outputs
    return 0


def looks_squeezenic(frame, port=DEFAULT_PORT):
    """At least 38 bytes, EtherType 0x0800, IPv4 without options, UDP, destination
    ``port``: the model of :func:`squeezenic_udp_match`."""
    return (len(frame) >= ROUTE_MIN_BYTES
            and struct.unpack_from("!H", frame, 12)[0] == ETHERTYPE_IPV4
            and frame[14] == IPV4_VIHL and frame[23] == PROTO_UDP
            and struct.unpack_from("!H", frame, 36)[0] == port)


def squeezenic_udp_match(beat, port):
    """The first ``beat`` (an ``AxisBeat`` view) of a frame :func:`looks_squeezenic`."""
    d = beat.data
    return (beat.keep[ROUTE_MIN_BYTES - 1]
            & (field_be(d, *HDR.ETHERTYPE) == ETHERTYPE_IPV4)
            & (header_bytes(d, *HDR.IP_VIHL) == IPV4_VIHL)
            & (header_bytes(d, *HDR.IP_PROTO) == PROTO_UDP)
            & (field_be(d, *HDR.UDP_DST) == port))


class FrameDistributor(wiring.Component):
    """Routes each whole frame of one AXI-Stream to one of ``n_outputs`` streams.

    Parameters
    ----------
    n_outputs : int
        Number of outputs, 1…64.
    port : int
        The SqueezeNIC UDP destination port (default 21329).

    Attributes
    ----------
    i : In(axis_signature())
    o : Out(axis_signature()).array(n_outputs)
        The outputs ``o[0] … o[n-1]`` (flattened port names ``o__<k>__valid`` etc.).
        Beats leave unchanged (``tdata``/``tkeep``/``tlast``/``tuser``).

    Notes
    -----
    Routing, decided on a frame's first beat (the rule of :func:`route_frame`):
    a frame with ``tkeep`` covering bytes 0…37 of its first beat, EtherType
    0x0800, byte 14 = 0x45 (IPv4 without options), protocol 17 (UDP) and UDP
    destination port ``port`` goes to output ``UDP source port mod n_outputs``;
    every other frame (ARP, IPv6, other ports, runts) goes to output 0. Every
    beat of the frame follows its first, up to ``tlast``.

    Latency: 2 cycles: a beat taken on ``i`` in cycle ``t`` is on its output in
    cycle ``t + 2`` (one stage compares the header and looks the source port up
    in two 256-entry residue tables; the second reduces mod n, picks the output
    and is the output register).

    Throughput: one beat per cycle, frames back to back.

    Backpressure: head of line. The beat in the output register waits for the
    ``ready`` of its own output only; while it waits the whole pipeline stalls.
    The first stage is a :class:`~squeezenic_hw.gateware.common.stream.SkidBuffer`,
    so ``i.ready`` is a register (it falls one cycle after the pipeline stalls; the
    beat taken in that cycle waits in the skid register): no ready path crosses the
    distributor. A stalled output holds up the input only when the frame in flight
    is for it; frames for other outputs pass while it is idle. The RX array must
    give each output enough buffering (its RX lane) for a slow lane not to stall
    the others.

    Reset: the valid bits and the frame state; beat registers take none.

    Resources: three 625-bit beat registers (stage 1, its skid, the output), two
    256 x 6-bit residue tables (none when n is a power of two), a 7-bit adder and
    compare, an n-bit one-hot target.
    """

    def __init__(self, n_outputs, *, port=DEFAULT_PORT):
        if isinstance(n_outputs, bool) or not isinstance(n_outputs, int) \
                or not 1 <= n_outputs <= MAX_OUTPUTS:
            raise ValueError(
                f"n_outputs must be an int from 1 to {MAX_OUTPUTS}, got {n_outputs!r}")
        _check_port(port)
        self.n_outputs = n_outputs
        self.port = port
        super().__init__({
            "i": In(axis_signature()),
            "o": Out(axis_signature()).array(n_outputs),
        })

    @property
    def latency(self):
        """Cycles from a beat taken on ``i`` to the same beat on its output."""
        return 2

    def elaborate(self, platform):
        m = Module()
        n = self.n_outputs
        width = max(1, (n - 1).bit_length())      # bits of an output index

        enable = Signal()           # stage 1 advances into the output register this cycle

        # ---- stage 0 (combinational on i): first beat, header match, residues ----
        d = self.i.payload.data
        src_hi = header_bytes(d, HDR.UDP_SRC[0], 1)
        src_lo = header_bytes(d, HDR.UDP_SRC[0] + 1, 1)
        stage1 = data.StructLayout({
            "beat": AxisBeat,
            "first": unsigned(1),
            "match": unsigned(1),
            "partial": unsigned(width + 1),      # hi*256 mod n + lo mod n  (< 2n - 1)
        })
        m.submodules.stage1 = s1 = SkidBuffer(stage1)
        in_frame = Signal()         # beats of a frame have been taken, not yet its last
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += in_frame.eq(~self.i.payload.last)
        m.d.comb += [
            s1.i.valid.eq(self.i.valid),
            self.i.ready.eq(s1.i.ready),
            s1.i.payload.beat.eq(self.i.payload),
            s1.i.payload.first.eq(~in_frame),
            s1.i.payload.match.eq(squeezenic_udp_match(self.i.payload, self.port)),
            s1.o.ready.eq(enable),
        ]
        if n & (n - 1) == 0:
            m.d.comb += s1.i.payload.partial.eq(src_lo[:width] if n > 1 else 0)
        else:
            hi_res = Array(Const((h * 256) % n, width) for h in range(256))
            lo_res = Array(Const(low % n, width) for low in range(256))
            m.d.comb += s1.i.payload.partial.eq(hi_res[src_hi] + lo_res[src_lo])

        # ---- stage 1 ------------------------------------------------------------
        s1_valid = s1.o.valid
        s1_first = s1.o.payload.first
        s1_partial = s1.o.payload.partial
        routed = Signal(width)      # the first beat's output
        reduced = Signal(width)
        m.d.comb += reduced.eq(Mux(s1_partial >= n, s1_partial - n, s1_partial))
        m.d.comb += routed.eq(Mux(s1.o.payload.match, reduced, 0))
        frame_target = Signal(width)    # output of the frame whose beats are in stage 1
        target = Signal(width)
        m.d.comb += target.eq(Mux(s1_first, routed, frame_target))
        with m.If(enable & s1_valid & s1_first):
            m.d.sync += frame_target.eq(routed)

        # ---- stage 2: the output register, shared by all outputs ---------------
        s2_valid = Signal()
        s2_beat = Signal(AxisBeat, reset_less=True)
        s2_onehot = Signal(n, reset_less=True)
        with m.If(enable):
            m.d.sync += [
                s2_valid.eq(s1_valid),
                s2_beat.eq(s1.o.payload.beat),
                s2_onehot.eq((Const(1, n) << target)[:n]),
            ]
        readys = Cat(o.ready for o in self.o)
        m.d.comb += enable.eq(~s2_valid | (s2_onehot & readys).any())
        for k, o in enumerate(self.o):
            m.d.comb += [o.valid.eq(s2_valid & s2_onehot[k]), o.payload.eq(s2_beat)]
        return m
