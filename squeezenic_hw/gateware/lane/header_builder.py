"""Header builder: a received 64-byte header rewritten for a new frame of the lane.

The TX lane writes each wire frame's header from the header of its first host
frame, and the RX lane each host frame's header from its wire frame's (wire
format sections 6 and 7, ``docs/frames.md``): same addresses, ports, TOS, TTL,
identification, codec fields, but a new length, ``flags``, ``n`` and
``offset``, hence new IPv4/UDP lengths and a new IPv4 header checksum.
"""

from amaranth import Cat, Const, Module, Shape, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from squeezenic_hw.gateware.common.layouts import field_be, header_bytes
from squeezenic_hw.gateware.common.stream import (
    MAX_FANOUT,
    LutramQueue,
    Stager,
    lutram_delay,
    stage_enable,
)
from squeezenic_hw.spec.header import HDR

__all__ = ["HeaderBuilder", "header_request_layout", "header_result_layout",
           "ones_complement_fold", "ipv4_checksum_stages"]

_IP_START, _IP_END = 14, 34   # IPv4 header bytes


def header_request_layout(tag_shape=unsigned(1)):
    """Input of :class:`HeaderBuilder`: a template header and the new frame's fields."""
    return data.StructLayout({
        "template": unsigned(512),   # received header, byte i in bits 8i+7…8i
        "size": unsigned(16),        # the new frame's length in bytes
        "n": unsigned(16),
        "offset": unsigned(32),
        "flags": unsigned(8),
        "tag": tag_shape,            # rides along unchanged
    })


def header_result_layout(tag_shape=unsigned(1)):
    """Output of :class:`HeaderBuilder`."""
    return data.StructLayout({
        "header": unsigned(512),
        "tag": tag_shape,
    })


def ones_complement_fold(m, total, name="csum_fold"):
    """A sum of 16-bit words (at most 20 bits) folded to 16 bits with its end-around
    carries: two adds, the first into a signal of ``name``."""
    fold = Signal(17, name=name)
    m.d.comb += fold.eq(total[:16] + total[16:])
    return (fold[:16] + fold[16])[:16]      # the second carry fits: fold < 2**16 + 15


def ipv4_checksum_stages(m, st, header, total_length):
    """The IPv4 header checksum of ``header`` (a beat's data, its checksum field ignored)
    with ``total_length`` in place of its own, over two stages of ``st``: two 4-word
    partial sums, then their 20-bit sum; returned as the complemented fold of that
    registered sum (two adds, for the stage after)."""
    words = [field_be(header, b, 2) for b in range(_IP_START, _IP_END, 2)
             if b not in (HDR.IP_TOTAL_LENGTH[0], HDR.IP_CHECKSUM[0])]
    tl1 = st.reg(total_length, name="total_length_s1")
    psum1 = [st.reg(words[k] + words[k + 1] + words[k + 2] + words[k + 3],
                    name=f"psum{k // 4}") for k in (0, 4)]     # < 2**18 each
    total2 = st.reg(psum1[0] + psum1[1] + tl1, name="csum_total")   # < 2**20
    return ~ones_complement_fold(m, total2)


def _be_bytes(value):
    """A 16-bit value as two header bytes in network order (byte ``start`` first)."""
    return [value[8:16], value[0:8]]


class HeaderBuilder(wiring.Component):
    """Rewrites a template header for a new frame.

    ``header`` = ``template`` with

    * IPv4 total length (bytes 16–17, BE) = ``size`` − 14;
    * IPv4 header checksum (bytes 24–25, BE) recomputed per RFC 791 over bytes
      14…33 with the new total length (as :func:`squeezenic_hw.spec.frames.ipv4_checksum`);
    * UDP length (bytes 38–39, BE) = ``size`` − 34; UDP checksum (40–41) = 0;
    * ``flags`` (byte 45), ``n`` (bytes 46–47, LE), ``offset`` (bytes 60–63, LE);

    every other byte copied. This equals the header
    :func:`~squeezenic_hw.spec.frames.build_wire_frame` writes for a frame of
    ``size`` bytes when the template is an IPv4 header without options
    (byte 14 = 0x45, which the frame classifier guarantees); lengths wrap
    modulo 2**16 for ``size`` < 34.

    Parameters
    ----------
    tag_shape : shape-castable
        Shape of ``tag``, which rides along unchanged (default ``unsigned(1)``).
    depth : int or None
        With ``depth`` (2 or more), the builder is also the queue of ``depth`` results
        behind it (a lane's token FIFO): each request's header but the checksum is
        written into a distributed-RAM FIFO as it comes, the checksum into a 16-bit FIFO
        beside it three cycles later, and ``o`` reads both. The header then waits once
        (in the queue) instead of in a delay line and then in a FIFO. ``None``
        (default): a pipeline with an output register, as below.

    Attributes
    ----------
    i : In(stream.Signature(header_request_layout(tag_shape)))
    o : Out(stream.Signature(header_result_layout(tag_shape)))

    Notes
    -----
    Latency: ``LATENCY`` = 3 cycles (stage 1: new fields and two 4-word partial
    sums of the IPv4 header; stage 2: the 20-bit sum; stage 3: end-around-carry
    fold and complement into the checksum bytes), so no stage has more than two
    adders in series. With ``depth``: 4 (``latency``), the checksum written into its
    FIFO after the three stages; ``i.ready`` is then the header FIFO's room (a register,
    set while two entries were free in the cycle before), never ``o.ready``, and the
    checksum stages never stall.
    Throughput: one token per cycle. Backpressure: when
    ``o.valid & ~o.ready`` the whole pipeline holds
    (``i.ready = o.ready | ~o.valid``); nothing is dropped or reordered.
    Reset: only the three valid bits; the header, tag and checksum registers take none.
    Resources: the header's three stages in distributed RAM (:func:`lutram_delay`, about
    30 RAM32M16) beside the checksum's registers, the tag's three registers, and a handful
    of 16–20-bit adders. ``o.payload.header`` is that RAM's read but for the checksum
    bytes, a register.
    """

    LATENCY = 3

    def __init__(self, tag_shape=unsigned(1), *, depth=None):
        try:
            Shape.cast(tag_shape)
        except TypeError as e:
            raise ValueError(f"tag_shape must be a shape, got {tag_shape!r} ({e})") from None
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)
                                  or depth < 2):
            raise ValueError(f"depth must be None or an int of at least 2, got {depth!r}")
        self.tag_shape = tag_shape
        self.depth = depth
        super().__init__({
            "i": In(stream.Signature(header_request_layout(tag_shape))),
            "o": Out(stream.Signature(header_result_layout(tag_shape))),
        })

    @property
    def latency(self):
        return self.LATENCY if self.depth is None else self.LATENCY + 1

    def elaborate(self, platform):
        m = Module()
        enable = stage_enable()
        if self.depth is None:
            m.d.comb += [
                enable.eq(~self.o.valid | self.o.ready),
                self.i.ready.eq(enable),
            ]
        else:
            m.d.comb += enable.eq(1)      # the checksum stages never wait: the queue does
        st = Stager(m, enable, reset_less=True)   # data; the valid bits are reset
        p = self.i.payload
        t = p.template

        total_length = Signal(16, name="total_length")
        udp_length = Signal(16, name="udp_length")
        m.d.comb += [
            total_length.eq(p.size - 14),
            udp_length.eq(p.size - 34),
        ]
        new = [header_bytes(t, b, 1) for b in range(64)]

        def put(field, byte_values):
            start, length = field
            assert len(byte_values) == length
            new[start:start + length] = byte_values

        put(HDR.IP_TOTAL_LENGTH, _be_bytes(total_length))
        put(HDR.IP_CHECKSUM, [0, 0])      # filled in at stage 3
        put(HDR.UDP_LENGTH, _be_bytes(udp_length))
        put(HDR.UDP_CHECKSUM, [0, 0])
        put(HDR.FLAGS, [p.flags])
        put(HDR.N, [p.n[0:8], p.n[8:16]])
        put(HDR.OFFSET, [p.offset[8 * k:8 * k + 8] for k in range(4)])
        new = [Const(b, 8) if isinstance(b, int) else b for b in new]

        # stages 1 and 2 of the checksum: words of the template (but the total length,
        # a register input, and the checksum itself); stage 3 its fold
        checksum = ipv4_checksum_stages(m, st, t, total_length)

        start = HDR.IP_CHECKSUM[0]
        hdr = Cat(*new)
        if self.depth is not None:
            return self._queued(m, st, Cat(hdr[:8 * start], hdr[8 * (start + 2):]),
                                Value.cast(p.tag), checksum)

        # ---- stages 1-3: the header waits for its checksum in distributed RAM; the
        # checksum is registered beside it
        valid1 = st.reg(self.i.valid, name="valid_s1", reset_less=False)
        tag1 = st.reg(Value.cast(p.tag), name="tag_s1")
        valid2 = st.reg(valid1, name="valid_s2", reset_less=False)
        tag2 = st.reg(tag1, name="tag_s2")
        waited = lutram_delay(m, st, Cat(hdr[:8 * start], hdr[8 * (start + 2):]), 3,
                              name="header_delay")
        sum3 = st.reg(Cat(_be_bytes(checksum)[0], _be_bytes(checksum)[1]), name="checksum_s3")
        hdr3 = Cat(waited[:8 * start], sum3, waited[8 * start:])
        valid3 = st.reg(valid2, name="valid_s3", reset_less=False)
        tag3 = st.reg(tag2, name="tag_s3")

        m.d.comb += [
            self.o.valid.eq(valid3),
            self.o.payload.header.eq(hdr3),
            Value.cast(self.o.payload.tag).eq(tag3),
        ]
        return m

    def _queued(self, m, st, rest, tag, checksum):
        """With ``depth``: the header but its checksum (``rest``) and the ``tag`` into one
        FIFO now, the checksum (registered after the stages) into another; ``o`` reads
        both heads."""
        start = HDR.IP_CHECKSUM[0]
        m.submodules.header_fifo = headers = LutramQueue(width=len(rest) + len(tag),
                                                        depth=self.depth)
        m.submodules.checksum_fifo = sums = LutramQueue(width=16, depth=self.depth)
        # ``i.ready`` is a register, a cycle behind the level: set while two entries were
        # free (a write may land in between)
        room = Signal(init=1, name="room", attrs={"max_fanout": MAX_FANOUT})
        m.d.sync += room.eq(headers.level <= self.depth - 2)
        valid1 = st.reg(self.i.valid & room, name="valid_s1", reset_less=False)
        valid2 = st.reg(valid1, name="valid_s2", reset_less=False)
        valid3 = st.reg(valid2, name="valid_s3", reset_less=False)
        sum3 = st.reg(Cat(_be_bytes(checksum)[0], _be_bytes(checksum)[1]), name="checksum_s3")
        head = headers.r_data
        take = self.o.valid & self.o.ready
        m.d.comb += [
            self.i.ready.eq(room),
            headers.w_en.eq(self.i.valid & room),
            headers.w_data.eq(Cat(rest, tag)),
            # a checksum never finds its FIFO full: it holds no more than the headers'
            sums.w_en.eq(valid3),
            sums.w_data.eq(sum3),
            self.o.valid.eq(sums.r_rdy),
            self.o.payload.header.eq(Cat(head[:8 * start], sums.r_data,
                                         head[8 * start:len(rest)])),
            Value.cast(self.o.payload.tag).eq(head[len(rest):]),
            headers.r_en.eq(take),
            sums.r_en.eq(take),
        ]
        return m
