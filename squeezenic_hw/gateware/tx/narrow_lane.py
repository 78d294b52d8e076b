"""A TX lane for a trusted source of one narrow codec: ``sign``, or ``fixed`` at a
build-time width of 2, 4 or 8 bits.

The generator lanes of the host-bandwidth arrays send nothing but host frames of their
build's codec, each well formed. A host beat's 16 elements make 16·b code bits (b the
code width), so everything behind the encoder can be 16·b bits wide instead of 512::

    i ─► input stage ─► [encoder] ─► SkidBuffer ─► gearbox ─► row accumulator ─► ring ─┐
         (codes,         (fixed:     (items)      (16·b-bit   (512/16b slots)   (LUTRAM) │
          compares)       3 stages)                 words)                               ├► o
                               closes ─► token pipeline ─► token FIFO ───────────────────┘
                                         (sizes, sums)

* **Input stage.** Each accepted beat becomes an *item*: a header (with the coalescing
  compares made against the beat as it arrives: the key and the offset) or a payload
  beat's 16 codes, zero beyond its elements. ``sign`` codes are the sign bits, made as
  the beat comes in; ``fixed`` codes come out of a three-stage encoder that needs no
  multiplier, for the scale must be a power of two
  (:mod:`~squeezenic_hw.gateware.codecs.fixed_pow2`).
  The header's other fields wait beside the item: in registers (``sign``), or in a
  small FIFO that the encoder's stages cannot overrun (``fixed``).
* **Gearbox.** Appends each item's codes to the open wire frame, 16·b-bit words out, and
  decides where frames close (full, mismatch, flush, idle, end) exactly as
  :func:`squeezenic_hw.reference.lane.tx`.
* **Ring.** Words fill the slots of a 512-bit row register; a full row, or a closing
  frame's last, is written to a ring of rows (LUTRAM at the default MTU; with
  ``shared_ring``, the lane's region of a block RAM that a cluster of lanes shares,
  written a half row at a time in the lane's turns).
* **Output.** A token per closed frame leaves once its payload is in the ring: its header
  beat (the key fields from the key register, the rest from the token), then its rows;
  on ``o``, or with ``bare`` on a frame bus shared with other lanes
  (:mod:`~squeezenic_hw.gateware.arrays.frame_bus`).

The key fields (addresses, ports, codec, parameter, ``stochastic``, scale, aux, seed)
are held once, not per frame: when a header brings a new key, the frames of the old
key are sent first (the new key's headers wait; its payload does not).

The source must be trusted: every frame a host frame of the lane's codec (``fixed``:
parameter b, ``stochastic`` clear, a scale that is a power of two, ±0, ±inf or NaN) of a
valid header (section 6 of ``docs/wire-format.md``: EtherType, IPv4 version/IHL 0x45,
protocol 17, not fragmented, ``version`` 1, ``encoded`` 0) with ``n`` ≥ 1 and
``tuser_size`` 64 + 4n. Other frames give undefined output. This is what
:class:`~.lane.TxLane` with ``trusted=True`` does, in a fraction of the logic
(``docs/lanes.md``).
"""

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from squeezenic_hw.gateware.codecs.fixed_pow2 import (
    POW2_FIXED_LATENCY,
    POW2_WIDTHS,
    Pow2Scale,
    pow2_fixed_codes,
    pow2_scale_of,
)
from squeezenic_hw.gateware.common.layouts import (
    DATA_BYTES,
    ELEMENTS_PER_BEAT,
    RING_HALVES,
    frame_bus_signature,
    header_bytes,
    keep_through,
    shared_ring_signature,
)
from squeezenic_hw.gateware.common.stream import (
    LutramFifo,
    LutramQueue,
    SkidBuffer,
    Stager,
    stage_enable,
)
from squeezenic_hw.gateware.lane.header_builder import ones_complement_fold
from squeezenic_hw.spec.generator import (
    NARROW_LANE_CODECS,
    VALUE_EXPONENT_HIGH,
    narrow_lane_settings,
)
from squeezenic_hw.spec.header import (
    DEFAULT_MTU,
    DEFAULT_PORT,
    ETHERTYPE_IPV4,
    FLAG_ENCODED,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HDR,
    HEADER_LEN,
    IPV4_VIHL,
    MAX_PKT_LEN,
    PROTO_UDP,
    check_port,
)

from .lane import tx_lane_signature

__all__ = ["NarrowTxLane", "NARROW_CODECS", "narrow_codec", "narrow_lane_sizes"]

_ROW = 8 * DATA_BYTES
_MAX_N = 2**16 - 1

#: The codec specs a :class:`NarrowTxLane` is built for.
NARROW_CODECS = NARROW_LANE_CODECS
assert NARROW_CODECS == ("sign",) + tuple(f"fixed:{q}" for q in POW2_WIDTHS)


def narrow_codec(spec):
    """``(codec id, code bits)`` of a :data:`NARROW_CODECS` spec, else None."""
    settings = narrow_lane_settings([spec])
    return None if settings is None else (settings["codec"], settings["param"] or 1)


def narrow_lane_sizes(codec, mtu=DEFAULT_MTU):
    """``(capacity, ring_rows, max_cluster)`` of ``NarrowTxLane(codec, mtu=mtu)`` (its
    :attr:`~NarrowTxLane.capacity`, :attr:`~NarrowTxLane.ring_rows` and
    :attr:`~NarrowTxLane.max_cluster`), without building one; ``codec`` and ``mtu`` as
    the lane checks them."""
    b = narrow_codec(codec)[1]
    capacity = min(_MAX_N, (mtu - HEADER_LEN) * 8 // b)
    max_rows = -(-capacity * b // _ROW)
    # the largest frame and the rows in flight behind it (a row per 32/b beats, so one
    # frame is sent long before the next fills the rest); 32 at least, the depth of a
    # LUTRAM cell, for the small frames of a small MTU
    ring_rows = max(32, 1 << (max_rows + 7 - 1).bit_length())
    # a shared ring is written a half row at a time, while the other half fills: a half's
    # turn comes within G cycles of its filling, before the other half fills (so the
    # older half is never still waiting when the next one fills)
    max_cluster = _ROW // (ELEMENTS_PER_BEAT * b) // RING_HALVES
    return capacity, ring_rows, max_cluster


# Header bytes that make the coalescing key (docs/wire-format.md section 6): MACs, IPv4
# addresses, UDP ports, codec, parameter, scale, aux, seed; and the flags' stochastic bit.
_KEY_BYTES = [(0, 12), (HDR.SRC_IP[0], 12), (HDR.CODEC[0], 2), (HDR.SCALE[0], 12)]
# Header bytes that may differ between the host frames of one wire frame and are copied
# from its first one: TOS, identification, flags/fragment offset, TTL.
_COPIED_BYTES = [HDR.IP_TOS[0]] + list(range(HDR.IP_ID[0], HDR.IP_TTL[0] + 1))
# Key fields a source may hold constant (``constant_fields``): their header bytes, and
# whether the value is ``bytes`` (addresses, as in ``Header``) or an int (big-endian).
_KEY_FIELDS = {"dst_mac": (HDR.DST_MAC, bytes), "src_mac": (HDR.SRC_MAC, bytes),
               "src_ip": (HDR.SRC_IP, bytes), "dst_ip": (HDR.DST_IP, bytes),
               "dst_port": (HDR.UDP_DST, int)}


def _constant_key_bytes(fields):
    """``{header byte: value}`` of the key fields ``fields`` (``constant_fields``) fix."""
    out = {}
    for name, value in (fields or {}).items():
        if name not in _KEY_FIELDS:
            continue
        (start, length), kind = _KEY_FIELDS[name]
        if kind is bytes:
            if not isinstance(value, bytes) or len(value) != length:
                raise ValueError(f"constant_fields[{name!r}] must be {length} bytes, "
                                 f"got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, int) \
                    or not 0 <= value < 1 << 8 * length:
                raise ValueError(f"constant_fields[{name!r}] must be an int of "
                                 f"{8 * length} bits, got {value!r}")
            value = value.to_bytes(length, "big")
        out.update({start + i: byte for i, byte in enumerate(value)})
    return out


class _Kind:
    HEADER = 0
    PAYLOAD = 1


def _item_layout(word):
    """One input beat, reduced."""
    return data.StructLayout({
        "kind": unsigned(1),
        "bits": unsigned(word),    # payload: codes of elements 0…k-1, zero above
        "k": unsigned(5),          # payload: elements in the beat, 1…16
        "last": unsigned(1),       # payload: the host frame's last beat
    })


class _HostFields(data.Struct):
    """What a wire frame takes from the host frame it starts in."""
    copied: unsigned(8 * len(_COPIED_BYTES))
    src: unsigned(16)
    dst: unsigned(16)


class _HeaderFields(data.Struct):
    """A header's fields and compares, for the gearbox."""
    n: unsigned(16)
    offset: unsigned(32)
    flush: unsigned(1)
    host: _HostFields
    coalesce: unsigned(1)      # same key, contiguous offset
    key_new: unsigned(1)       # a key other than the header's before
    idle: unsigned(1)          # idle_timeout or more cycles after the last


class _Token(data.Struct):
    """A closed wire frame (``frame``), or the point where the key changes (``switch``
    with ``frame`` = 0), in output order."""
    frame: unsigned(1)
    switch: unsigned(1)        # after this frame's header, the output takes the new key
    flush: unsigned(1)
    n: unsigned(16)
    offset: unsigned(32)
    host: _HostFields
    rows: unsigned(8)          # payload beats
    last_bytes: unsigned(6)    # bytes in the last payload beat, minus one
    size: unsigned(16)
    ip_sum: unsigned(19)       # the token's IPv4 header words, summed (not folded)


_TOKEN_BITS = data.Layout.cast(_Token).size
_HOST_OFFSET = data.Layout.cast(_Token)["host"].offset


def _token_field_bits():
    """Where the fields a source may hold constant sit in a token: {name: [(start bit,
    width, shift of the field's value that gives those bits)]}."""
    layout = data.Layout.cast(_Token)
    host = layout["host"].offset
    host_layout = data.Layout.cast(_HostFields)
    copied = host + host_layout["copied"].offset
    byte = {b: copied + 8 * i for i, b in enumerate(_COPIED_BYTES)}
    return {
        "ip_tos": [(byte[HDR.IP_TOS[0]], 8, 0)],
        "ip_frag": [(byte[HDR.IP_FRAG[0]], 8, 8), (byte[HDR.IP_FRAG[0] + 1], 8, 0)],
        "ttl": [(byte[HDR.IP_TTL[0]], 8, 0)],
        "tuser_dst": [(host + host_layout["dst"].offset, 16, 0)],
    }


_TOKEN_FIELD_BITS = _token_field_bits()
_FIELD_WIDTHS = {name: sum(n for _, n, _ in spots) for name, spots in _TOKEN_FIELD_BITS.items()}


def _constant_token_bits(fields):
    """``[(start bit, Const)]`` of the token bits ``fields`` (``constant_fields``) fix,
    in order."""
    if fields is None:
        return []
    names = [*_FIELD_WIDTHS, *_KEY_FIELDS]
    if not isinstance(fields, dict) or not set(fields) <= set(names):
        raise ValueError(f"constant_fields must be a dict of {', '.join(names)}, "
                         f"got {fields!r}")
    out = []
    for name, value in fields.items():
        if name in _KEY_FIELDS:
            continue
        width = _FIELD_WIDTHS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << width:
            raise ValueError(f"constant_fields[{name!r}] must be an int of {width} bits, "
                             f"got {value!r}")
        out += [(start, Const(value >> shift & (1 << n) - 1, n))
                for start, n, shift in _TOKEN_FIELD_BITS[name]]
    return sorted(out, key=lambda item: item[0])


def _held(value, constants, offset):
    """``value``, the token's bits from ``offset`` on, with the bits ``constants`` fix
    there put in."""
    parts, at = [], 0
    for start, fixed in constants:
        if 0 <= start - offset < len(value):
            parts += [value[at:start - offset], fixed]
            at = start - offset + len(fixed)
    return Cat(*parts, value[at:])


def _pack(token, constants):
    """``token``'s bits less those ``constants`` fix."""
    parts, at = [], 0
    for start, value in constants:
        parts.append(token[at:start])
        at = start + len(value)
    return Cat(*parts, token[at:])


def _unpack(bits, constants):
    """A token from :func:`_pack`'s bits, the fixed bits put back."""
    parts, at, taken = [], 0, 0
    for start, value in constants:
        parts += [bits[taken:taken + start - at], value]
        taken += start - at
        at = start + len(value)
    return Cat(*parts, bits[taken:taken + _TOKEN_BITS - at])


def _thermometer(count, width):
    """``width`` bits, bit ``e`` set when ``e < count`` (a constant 0 where ``count``
    cannot exceed ``e``)."""
    top = 2 ** len(count) - 1
    return Cat(*[count > e if e < top else Const(0, 1) for e in range(width)])


def _spread(mask, b):
    """Each bit of ``mask`` ``b`` times: an element mask as a mask of code bits."""
    return Cat(*[bit.replicate(b) for bit in mask]) if b > 1 else mask


class _SharedRead:
    """A shared ring's read, as the lane sees it: the address it drives; the data goes
    to the frame bus from the cluster, not through the lane."""

    def __init__(self, addr):
        self.addr = addr
        self.data = Const(0, 8 * DATA_BYTES)


class NarrowTxLane(wiring.Component):
    """One TX lane for a trusted source of host frames of one narrow codec.

    Parameters
    ----------
    codec : str
        ``"sign"``, or ``"fixed:2"``, ``"fixed:4"``, ``"fixed:8"`` (:data:`NARROW_CODECS`).
    mtu : int
        Largest wire frame in bytes, 68…9600 (default 1518).
    port : int
        SqueezeNIC UDP destination port (only checked here: the source is trusted).
    idle_timeout : int or None
        Initial ``cfg_idle_timeout``: cycles without a host frame after which the open
        wire frame closes (``None`` or 0: never).
    token_depth : int
        Closed wire frames waiting for the output (at least 8).
    constant_fields : dict, optional
        Header fields the trusted source sends with one value in every host frame,
        mapped to that value: ``ip_tos``, ``ip_frag``, ``ttl`` (ints: the bytes a wire
        frame copies from its first host frame) and ``tuser_dst``, which are then not
        carried in the lane's token FIFO; and the key fields ``dst_mac``, ``src_mac``,
        ``src_ip``, ``dst_ip`` (``bytes``, as in :class:`~squeezenic_hw.spec.frames.Header`)
        and ``dst_port`` (an int), which are then neither held per key nor compared.
        Every wire frame has the values given. (A generator's template fixes them:
        :class:`~squeezenic_hw.gateware.arrays.lane_arrays.GeneratorLane`.) The codec
        byte, and for ``fixed`` the parameter and ``stochastic``, are held whatever this
        says: the source is trusted to send the lane's codec.
    bare : bool
        Show the frames on a frame bus (``bus``, in place of ``o``;
        :class:`~squeezenic_hw.gateware.arrays.frame_bus.FrameBusArbiter`) as
        :class:`~squeezenic_hw.gateware.common.layouts.BareBeat` beats (``tdata`` and
        ``tlast``) for a :class:`~squeezenic_hw.gateware.arrays.header_finisher.HeaderFinisher`
        further on, which completes the headers and ``tkeep``/``tuser`` once for many
        lanes: the IPv4 total length and checksum are left zero, the UDP length and
        checksum fields carry ``tuser_src`` and ``tuser_dst``. The lane then has no
        header-or-row select: its header is shown from a register that is zero but
        while shown, its rows straight from the ring, which reads a row never written
        (zero) while none is shown. Default ``False``: whole frames on ``o``.
    shared_ring : bool
        With ``bare``: the ring is the lane's region of a block RAM shared with other
        lanes (:class:`~squeezenic_hw.gateware.arrays.ring_cluster.RingCluster`, ``ring``
        port) in place of the lane's LUTRAM. The row register's halves are written in the
        lane's turns, one half while the other fills; after a close the gearbox waits
        until the closed frame's last row is written (at most the cluster's size and 3
        cycles), and that frame's header waits for it too. The rows go to the frame bus
        from the cluster, not through the lane (``bus.beat.data`` is 0). Default
        ``False``.

    Ports: as :class:`~.tx_lane.TxLane` with ``trusted=True`` (``cfg_port`` and
    ``cfg_enable`` are ignored; ``bus`` in place of ``o`` when ``bare``).
    ``counters``: ``bypass_*`` and ``size_errors`` stay 0.

    Latency: a wire frame's header leaves 7 cycles after the host beat that closes it
    (``docs/lanes.md``), 10 for ``fixed`` (the encoder's three stages). Throughput: one
    host beat per cycle, but for one cycle after a frame that closes with a word and a
    part word to write, and for the headers that arrive while a key change is being sent
    (the frames of the old key leave first); host frames of 1…199 elements back to
    back go in at ≥ 0.99 beats per cycle (the tests); with ``shared_ring`` each wire
    frame closed costs up to G + 3 more cycles (G lanes to the ring). Backpressure:
    ``i.ready`` is made of registers only (the skid buffer's ready, and for ``fixed``
    the encoder's last valid bit); ``o`` stalls the output, then the ring and tokens
    fill and the input stops; nothing is dropped. With ``bare`` the header is shown on
    ``bus`` in the cycle it would be on ``o`` once the lane owns the bus, and ``bus.en``
    low holds the lane as ``o.ready`` low does.
    """

    def __init__(self, codec="sign", *, mtu=DEFAULT_MTU, port=DEFAULT_PORT,
                 idle_timeout=None, token_depth=16, constant_fields=None, bare=False,
                 shared_ring=False, generated_values=False):
        choice = narrow_codec(codec)
        if choice is None:
            raise ValueError(f"codec must be one of {', '.join(NARROW_CODECS)}, got {codec!r}")
        # the gearbox needs room for two beats in a frame: 32 elements of b bits
        min_mtu = HEADER_LEN + 4 * choice[1]
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not (
                min_mtu <= mtu <= MAX_PKT_LEN):
            raise ValueError(f"mtu must be an int from {min_mtu} to {MAX_PKT_LEN} for "
                             f"{codec}, got {mtu!r}")
        check_port(port)
        if idle_timeout is not None and (isinstance(idle_timeout, bool)
                                         or not isinstance(idle_timeout, int)
                                         or not 0 <= idle_timeout < 2**32):
            raise ValueError(f"idle_timeout must be None or an int from 0 to 2**32 - 1, "
                             f"got {idle_timeout!r}")
        # (the closes in flight when the FIFO is seen to fill need 5 places)
        if isinstance(token_depth, bool) or not isinstance(token_depth, int) or token_depth < 8:
            raise ValueError(f"token_depth must be an int of at least 8 frames, "
                             f"got {token_depth!r}")
        if not isinstance(bare, bool):
            raise ValueError(f"bare must be a bool, got {bare!r}")
        if not isinstance(shared_ring, bool) or (shared_ring and not bare):
            raise ValueError(f"shared_ring must be a bool, and True only with bare=True, "
                             f"got {shared_ring!r}")
        if not isinstance(generated_values, bool):
            raise ValueError(f"generated_values must be a bool, got {generated_values!r}")
        self._generated_values = generated_values
        self._constant_bits = _constant_token_bits(constant_fields)
        self._bare = bare
        self._codec_id, self._b = choice
        # the key bytes held: those the source holds, and what a trusted source of the
        # lane's codec sends (the codec; for ``fixed`` its width, ``stochastic`` clear)
        self._key_fixed = _constant_key_bytes(constant_fields)
        self._key_fixed[HDR.CODEC[0]] = self._codec_id
        if self._b > 1:
            self._key_fixed[HDR.PARAM[0]] = self._b
        self._stochastic_held = self._b > 1
        self._key_bytes = [b for start, n in _KEY_BYTES for b in range(start, start + n)
                           if b not in self._key_fixed]
        self._key_width = 8 * len(self._key_bytes) + (not self._stochastic_held)
        self._word = ELEMENTS_PER_BEAT * self._b           # code bits of a full beat
        self._slots = _ROW // self._word                    # words per row
        self._latency = 0 if self._b == 1 else POW2_FIXED_LATENCY
        self._mtu = mtu
        self._capacity, self._ring_depth, self._max_cluster = narrow_lane_sizes(codec, mtu)
        self._token_depth = token_depth
        signature = tx_lane_signature(port=port, idle_timeout=idle_timeout)
        self._shared_ring = shared_ring
        if bare:
            members = {k: v for k, v in signature.members.items() if k != "o"}
            members["bus"] = Out(frame_bus_signature())
            if shared_ring:
                members["ring"] = Out(shared_ring_signature(self._ring_depth))
            signature = wiring.Signature(members)
        super().__init__(signature)

    @property
    def codecs(self):
        return (self._codec_id,)

    @property
    def code_bits(self):
        return self._b

    @property
    def trusted(self):
        return True

    @property
    def bare(self):
        """Whether the lane shows its frames on a frame bus (``bus``)."""
        return self._bare

    @property
    def shared_ring(self):
        """Whether the lane's ring is a region of a cluster's (``ring``)."""
        return self._shared_ring

    @property
    def ring_rows(self):
        """Rows in the lane's ring (its region of a shared ring)."""
        return self._ring_depth

    @property
    def max_cluster(self):
        """Most lanes a shared ring may serve: turns come every so many cycles, and half
        a row's words must take at least as many."""
        return self._max_cluster

    @property
    def capacity(self):
        """Elements a wire frame holds at most."""
        return self._capacity

    def elaborate(self, platform):
        m = Module()
        skid = m.submodules.items = SkidBuffer(_item_layout(self._word))
        host_in = self._input_stage(m, skid)
        ring_read, tokens = self._gearbox(m, skid.o, host_in)
        self._output(m, ring_read, tokens)
        return m

    def _value_read(self, x):
        """What the encoder reads of a value ``x``: all of it; or of a generator's value
        (``generated_values``), its sign, the low nibble of its exponent and the top b bits
        of its mantissa, the lowest sticky, for the rest is known."""
        if not self._generated_values:
            return x
        p = 23 - self._b                          # the sticky bit
        return Cat(Const(0, p), x[p:27], Const(VALUE_EXPONENT_HIGH, 4), x[31])

    def _key_of(self, beat_data):
        """The key bits of a header beat that are not held: its bytes in
        :data:`_KEY_BYTES` order, then ``stochastic``."""
        parts = [header_bytes(beat_data, b, 1) for b in self._key_bytes]
        if not self._stochastic_held:
            parts.append(header_bytes(beat_data, HDR.FLAGS[0], 1)[
                FLAG_STOCHASTIC.bit_length() - 1])
        return Cat(*parts)

    def _key_byte(self, key, b):
        """Header byte ``b`` of a key from :meth:`_key_of` (a constant when held)."""
        if b in self._key_fixed:
            return Const(self._key_fixed[b], 8)
        i = self._key_bytes.index(b)
        return key[8 * i:8 * i + 8]

    # ---- input: beats to items -------------------------------------------------------

    def _input_stage(self, m, skid):
        """Items into ``skid``; returns the header fields beside them (a
        :class:`_HeaderFields` view the gearbox reads when it takes a header's item)."""
        beat = self.i.payload
        first = Signal(init=1)                 # the next beat is a header
        rem = Signal(16, reset_less=True)      # elements of the host frame still to come
        key_in = Signal(self._key_width, reset_less=True)
        prev_end = Signal(32, reset_less=True)  # offset + n of the header before
        self._key_pending = key_pending = Signal()   # key_in is not yet the output's key
        self._key_in = key_in
        since = Signal(32)                     # cycles since the last beat of a host frame
        late = Signal()                        # since ≥ cfg_idle_timeout (and it is set)

        # a header waits while the previous key change is being sent
        hold = first & key_pending
        if self._latency:
            # the encoder's stages move together, whenever the last one can move on
            out_valid = Signal()
            enable = stage_enable()
            m.d.comb += [enable.eq(~out_valid | skid.i.ready),
                         self.i.ready.eq(enable & ~hold)]
        else:
            m.d.comb += self.i.ready.eq(skid.i.ready & ~hold)
        accept = self.i.valid & self.i.ready

        n = header_bytes(beat.data, HDR.N[0], 2)
        offset = header_bytes(beat.data, HDR.OFFSET[0], 4)
        key = self._key_of(beat.data)
        key_eq = Signal()
        m.d.comb += key_eq.eq(key == key_in)
        k_full = rem[4:] != 0
        k = Mux(k_full, ELEMENTS_PER_BEAT, rem[:4])
        last = ~k_full | (rem == ELEMENTS_PER_BEAT)
        elements = Mux(first, 0, Mux(k_full, Const(2**ELEMENTS_PER_BEAT - 1, ELEMENTS_PER_BEAT),
                                     _thermometer(rem[:4], ELEMENTS_PER_BEAT)))
        fields = Signal(_HeaderFields)
        m.d.comb += [
            fields.n.eq(n),
            fields.offset.eq(offset),
            fields.flush.eq(header_bytes(beat.data, HDR.FLAGS[0], 1)[
                FLAG_FLUSH.bit_length() - 1]),
            fields.host.copied.eq(Cat(*[header_bytes(beat.data, b, 1)
                                        for b in _COPIED_BYTES])),
            fields.host.src.eq(beat.src),
            fields.host.dst.eq(beat.dst),
            fields.coalesce.eq(key_eq & (offset == prev_end)),
            fields.key_new.eq(~key_eq),
            fields.idle.eq(late),
        ]
        item = skid.i.payload
        meta = Cat(first, k, last)       # kind (HEADER = 0 when first), k, last
        if self._latency:
            # the fields wait in a FIFO: headers behind this one may come in before the
            # encoder hands on its item (a FIFO of 8 covers the 3 stages and the skid)
            hf = m.submodules.header_fields = LutramFifo(
                width=len(fields.as_value()), depth=8)
            m.d.comb += [hf.w_data.eq(fields), hf.w_en.eq(accept & first)]
            host_in = data.View(_HeaderFields, hf.r_data)
            self._header_pop = hf.r_en
            frame = Signal(Pow2Scale, reset_less=True)
            stager = Stager(m, enable, reset_less=True)
            codes = pow2_fixed_codes(
                m, stager, [self._value_read(beat.data[32 * e:32 * e + 32])
                            for e in range(ELEMENTS_PER_BEAT)],
                elements, frame, self._b)
            valid = accept
            stages = []
            for _ in range(self._latency):
                valid = stager.reg(valid, reset_less=False)
                stages.append(valid)
            meta = stager.delay(meta, self._latency, name="meta")
            m.d.comb += [out_valid.eq(valid), skid.i.valid.eq(valid),
                         item.bits.eq(Cat(*codes))]
            self._in_flight = Cat(*stages).any()
        else:
            host_in = Signal(_HeaderFields, reset_less=True)
            # (a header's item is taken before the next header can come in)
            with m.If(accept & first):
                m.d.sync += host_in.eq(fields)
            self._header_pop = None
            signs = Cat(*[beat.data[32 * e + 31] for e in range(ELEMENTS_PER_BEAT)])
            m.d.comb += [skid.i.valid.eq(self.i.valid & ~hold),
                         item.bits.eq(signs & elements)]
            self._in_flight = Const(0)
        m.d.comb += [
            item.kind.eq(Mux(meta[0], _Kind.HEADER, _Kind.PAYLOAD)),
            item.k.eq(meta[1:6]),
            item.last.eq(meta[6]),
        ]
        with m.If(accept):
            with m.If(first):
                m.d.sync += [
                    first.eq(0),
                    rem.eq(n),
                    key_in.eq(key),
                    prev_end.eq(offset + n),
                ]
                if self._latency:
                    m.d.sync += frame.eq(pow2_scale_of(header_bytes(beat.data, HDR.SCALE[0], 4),
                                                       self._b))
                with m.If(~key_eq):
                    m.d.sync += key_pending.eq(1)
            with m.Else():
                m.d.sync += [first.eq(last), rem.eq(rem - ELEMENTS_PER_BEAT)]

        # idle: counted from the cycle after a host frame's last beat, as the reference
        # counts from the end of the frame, up to the cycle the next header is offered (a
        # header this lane holds back, behind a key change or a full encoder, is a host
        # frame that has come: its wait is not idle time)
        timeout = self.cfg_idle_timeout
        frame_ends = accept & ~first & last
        offered = self.i.valid & first
        nxt = Signal(32)
        m.d.comb += nxt.eq(Mux(frame_ends, 0,
                               Mux((since == 2**32 - 1) | offered, since, since + 1)))
        # since + 1 ≥ timeout, from registers (after a frame's end ``since`` is 0 and the
        # timeout, when set, is at least 1)
        ahead = Signal(34)
        m.d.comb += ahead.eq(since + 1 - timeout)
        m.d.sync += [since.eq(nxt), late.eq((timeout != 0) & ~frame_ends & ~ahead[-1])]
        self._late = late
        self._between_frames = first
        return host_in

    # ---- the gearbox: frames, words, rows, closes ----------------------------------

    def _gearbox(self, m, items, host_in):
        cap = self._capacity
        W, b, E = self._word, self._b, ELEMENTS_PER_BEAT
        log_b = b.bit_length() - 1                # b is a power of two

        def times_b(count):
            """``count`` elements as a number of code bits."""
            return Cat(Const(0, log_b), count) if log_b else count

        item = items.payload
        open_ = Signal()                          # a wire frame is open
        room = Signal(17, init=cap)               # elements the open frame can still take
        room_big = Signal(init=int(cap > E))      # room > 16
        part = Signal(W, reset_less=True)         # codes not yet a whole word
        plen = Signal(4)                          # how many (elements)
        slot = Signal(range(self._slots))         # next word's slot in the row
        tail = Signal(W, reset_less=True)         # a closed frame's last word, next cycle
        tail_len = Signal(4, reset_less=True)     # its codes
        tail_valid = Signal()
        cur = Signal(_HostFields, reset_less=True)   # the host frame being cut
        cur_flush = Signal(reset_less=True)
        at = Signal(32, reset_less=True)          # offset of the next element
        frame = Signal(_HostFields, reset_less=True)  # the open frame's first host frame's
        frame_offset = Signal(32, reset_less=True)

        # ring and tokens: room for what one decision writes
        depth = self._ring_depth
        if self._shared_ring:
            # the cluster's block RAM, read a cycle after it is addressed
            self._deep_ring = True
            wr = None
            rd = _SharedRead(self.ring.r_addr)
        else:
            m.submodules.ring = ring = Memory(shape=unsigned(8 * DATA_BYTES), depth=depth,
                                              init=[])
            wr = ring.write_port()
            # a shallow ring is LUTRAM read as it is addressed; a deep one (jumbo MTUs)
            # is block RAM, whose read is registered: it is addressed a cycle ahead
            self._deep_ring = depth > 64
            rd = ring.read_port(domain="sync" if self._deep_ring else "comb")
        wptr = Signal(range(depth))
        self._rptr = rptr = Signal(range(depth))
        ring_tight = Signal()
        # a bare lane reads its last row, never written (zero), while it sends no row:
        # its side of the frame bus is then zero without a gate
        self._rows = rows = depth - 1 if self._bare else depth
        self._next_row = lambda ptr: (Mux(ptr == rows - 1, 0, ptr + 1) if self._bare
                                      else (ptr + 1)[:len(ptr)])
        level = Signal(range(depth))
        if self._bare:
            m.d.comb += level.eq(Mux(wptr >= rptr, wptr - rptr, wptr + rows - rptr))
        else:
            m.d.comb += level.eq(wptr - rptr)
        # unbuffered: the output's token register ``tq`` takes the LUTRAM's read directly
        tokens = m.submodules.tokens = LutramQueue(
            width=_TOKEN_BITS - sum(len(v) for _, v in self._constant_bits),
            depth=self._token_depth)
        tokens_tight = Signal()
        m.d.sync += [
            ring_tight.eq(level >= rows - 6),
            tokens_tight.eq(tokens.level >= self._token_depth - 5),
        ]

        # A host frame with ``flush`` whose last beat is split closes two frames: the full
        # one now, the one its rest opens (a flush close) in the next free cycle.
        flush_pending = Signal()
        busy = tail_valid | flush_pending         # a cycle for the frame before
        # a shared ring: from a close until the closed frame's last row is written (the
        # next frame's words would fill the half that waits for its turn)
        row_wait = Signal()
        self._row_wait = row_wait
        decide = Signal()
        m.d.comb += [decide.eq(items.valid & ~busy & ~ring_tight & ~tokens_tight & ~row_wait),
                     items.ready.eq(decide)]

        # What this cycle does. The data below is worked out from the item whether or not
        # it is taken (from registers only); ``decide`` gates only what is stored.
        pay = items.valid & (item.kind == _Kind.PAYLOAD) & ~busy
        is_payload = decide & pay
        is_header = decide & ~pay
        # a beat takes its k elements, or when it fills the frame the room there is
        room5 = room[:5]
        full_c = Signal()
        split_c = Signal()
        m.d.comb += [
            full_c.eq(pay & ~room_big & (item.k >= room5)),
            split_c.eq(full_c & (item.k > room5)),
        ]
        full = decide & full_c
        split = decide & split_c
        # The beat's codes rotated to the open word's fill, code i to element
        # (plen + i) mod 16: those that fit the word follow its ``plen`` codes, the rest
        # are a word that begins with them. Two levels of 4:1 multiplexers, where a shift
        # into a window of two words and the shift of a split's rest were four.
        rot1 = Signal(W)
        rot = Signal(W)
        with m.Switch(plen[:2]):
            for n in range(4):
                with m.Case(n):
                    m.d.comb += rot1.eq(item.bits.rotate_left(n * b))
        with m.Switch(plen[2:]):
            for n in range(4):
                with m.Case(n):
                    m.d.comb += rot.eq(rot1.rotate_left(4 * n * b))
        # plen + the elements taken, its two sums made from registers beside the full
        # compare
        total = Signal(6)
        m.d.comb += total.eq(Mux(full_c, plen + room5, Mux(pay, plen + item.k, plen)))
        whole_c = total[4]                        # a whole word is made
        flush_c = pay & item.last & cur_flush & ~full_c
        header_close_c = ~pay & open_ & (host_in["idle"] | ~host_in["coalesce"])
        flush_close = decide & flush_c
        header_close = decide & header_close_c
        end_close = Signal()
        idle_close = Signal()
        late_flush = Signal()
        m.d.comb += late_flush.eq(flush_pending & ~tail_valid & ~ring_tight & ~tokens_tight
                                  & ~row_wait)
        with m.If(split & item.last & cur_flush):
            m.d.sync += flush_pending.eq(1)
        with m.Elif(late_flush):
            m.d.sync += flush_pending.eq(0)
        closes = Signal()
        m.d.comb += closes.eq((decide & (full_c | flush_c | header_close_c))
                              | end_close | idle_close | late_flush)
        rest_len = total[:4]

        # the word made this cycle: a tail's first ``tail_len`` codes; or the part word's
        # ``plen`` codes and the rotated beat's after them (a whole word, or a closing
        # frame's last). An element takes one of three sources or none, so a code bit is
        # one LUT. Codes past a frame's end are zero: the beat's are zero beyond its
        # elements, and where the open frame ends inside this word (room ≤ 16 and
        # plen < c, c = capacity mod 16: it ends at element c) the word takes none from
        # c on, which a split would fill with the next frame's.
        c = cap % E
        in_part = Signal(E)
        ends_here = Signal()
        from_part = Signal(E)
        from_beat = Signal(E)
        from_tail = Signal(E)
        m.d.comb += [
            in_part.eq(_thermometer(plen, E)),
            ends_here.eq(~room_big & (plen < c) if c else 0),
            from_part.eq(in_part & ~tail_valid.replicate(E)),
            from_beat.eq(~in_part & pay.replicate(E)
                         & ~Cat(Const(0, c), ends_here.replicate(E - c))),
            from_tail.eq(_thermometer(tail_len, E) & tail_valid.replicate(E)),
        ]
        word = Signal(W)
        word_valid = Signal()
        m.d.comb += [
            word.eq((_spread(from_tail, b) & tail) | (_spread(from_part, b) & part)
                    | (_spread(from_beat, b) & rot)),
            word_valid.eq(tail_valid | (decide & whole_c) | (closes & (rest_len != 0))),
        ]
        # the frame's last word: now, or next cycle when a whole word is made as well
        tail_next = closes & whole_c & (rest_len != 0)
        m.d.sync += [tail_valid.eq(tail_next), tail.eq(rot), tail_len.eq(rest_len)]
        last_word_now = (closes & ~tail_next) | tail_valid

        # the row stage, a cycle later: words into slots, rows into the ring
        word_q = Signal(W, reset_less=True)
        word_valid_q = Signal()
        last_q = Signal()
        m.d.sync += [word_q.eq(word), word_valid_q.eq(word_valid), last_q.eq(last_word_now)]
        row = Signal(8 * DATA_BYTES, reset_less=True)
        for s in range(self._slots):
            with m.If(word_valid_q & (slot == s)):
                m.d.sync += row[W * s:W * (s + 1)].eq(word_q)
        # a row is done when its last slot fills, and when its frame's last word is in
        # (or the frame closes with a row partly filled and nothing left to add)
        row_done = ((word_valid_q & (slot == self._slots - 1))
                    | (last_q & (word_valid_q | (slot != 0))))
        if self._shared_ring:
            self._shared_row_stage(m, row, slot, wptr, word_valid_q, last_q, row_done,
                                   closes, row_wait)
        else:
            write_row = Signal()
            m.d.sync += write_row.eq(row_done)
            m.d.comb += [wr.addr.eq(wptr), wr.data.eq(row), wr.en.eq(write_row)]
            with m.If(write_row):
                m.d.sync += wptr.eq(self._next_row(wptr))
        with m.If(last_q):
            m.d.sync += slot.eq(0)
        with m.Elif(word_valid_q):
            m.d.sync += slot.eq(slot + 1)

        # the state of the open frame
        taken_room = Signal(17)
        m.d.comb += taken_room.eq(Mux(full_c, 0, room - Mux(pay, item.k, 0)))
        # with a split the old frame takes ``room`` elements, the next one the rest: rotated
        # to plen + room, which is the capacity mod 16 (the frame's elements so far are
        # capacity - room, and its part word holds them mod 16), so a constant turn puts
        # them first
        split_bits = rot.rotate_right(c * b)
        split_len = Signal(4)
        m.d.comb += split_len.eq(Mux(split_c, item.k - room5, 0))
        # room > 16 after a beat, from registers only: with room ≤ 16 it stays so, and a
        # fresh frame has more (the capacity is at least 32 less 15 split elements)
        big_after_all = Signal()
        m.d.comb += big_after_all.eq(room - item.k > E)
        assert cap - (E - 1) > E
        with m.If(closes):
            m.d.sync += [open_.eq(split), room.eq(Mux(split_c, cap - (item.k - room5), cap)),
                         room_big.eq(1),
                         part.eq(split_bits), plen.eq(split_len)]
        with m.Elif(is_payload):
            m.d.sync += [open_.eq(1), room.eq(taken_room), room_big.eq(room_big & big_after_all),
                         part.eq(Mux(whole_c, rot, word)), plen.eq(rest_len)]
        with m.If(is_payload & (~open_ | split)):
            m.d.sync += [frame.eq(cur), frame_offset.eq(Mux(split_c, at + room5, at))]
        with m.If(is_header):
            m.d.sync += [cur.eq(host_in["host"]), cur_flush.eq(host_in["flush"]),
                         at.eq(host_in["offset"])]
        with m.Elif(is_payload):
            m.d.sync += at.eq(at + item.k)

        # idle and end closes: between frames, nothing waiting
        quiet = (self._between_frames & ~self.i.valid & ~self._in_flight & ~items.valid & ~busy
                 & ~ring_tight & ~tokens_tight & ~row_wait)
        m.d.comb += [
            idle_close.eq(quiet & open_ & self._late),
            end_close.eq(quiet & open_ & ~self._late & self.close),
            self.close_done.eq(quiet & self.close),
        ]

        # the token of a closing frame, or of a key change with no frame open: t0 takes
        # what the gearbox knows (n, offset, first host frame, the IPv4 words it copies,
        # summed), t1 the sizes that follow from n, and goes into the FIFO
        switch_only = is_header & host_in["key_new"] & ~open_
        t0 = Signal(_Token, reset_less=True)
        t0_valid = Signal()
        opened_now = is_payload & ~open_      # opened and closed by the same beat
        first_host = Signal(_HostFields)
        # (with the fields the source holds put in, so the IPv4 sum is of what is sent)
        m.d.comb += first_host.eq(_held(Mux(opened_now, cur, frame), self._constant_bits,
                                        _HOST_OFFSET))
        copied = first_host.copied
        tos, ip_id, frag, ttl = copied[:8], copied[8:24], copied[24:40], copied[40:48]
        be16 = lambda v: Cat(v[8:16], v[:8])          # noqa: E731  (two header bytes, BE)
        m.d.sync += t0_valid.eq(closes | switch_only)
        m.d.sync += [
            t0.frame.eq(closes),
            t0.switch.eq(is_header & host_in["key_new"]),
            t0.flush.eq(Mux(full, cur_flush & item.last & ~split, flush_close | late_flush)),
            t0.offset.eq(Mux(opened_now, at, frame_offset)),
            t0.host.eq(first_host),
            t0.n.eq(cap - taken_room),
            t0.ip_sum.eq(tos + be16(ip_id) + be16(frag) + Cat(Const(0, 8), ttl)),
        ]
        t1 = Signal(_Token, reset_less=True)
        t1_valid = Signal()
        payload_bytes = Signal(14)
        m.d.comb += payload_bytes.eq((times_b(t0.n) + 7) >> 3)
        m.d.sync += [
            t1_valid.eq(t0_valid), t1.eq(t0),
            t1.rows.eq((times_b(t0.n) + _ROW - 1) >> 9),
            t1.size.eq(payload_bytes + HEADER_LEN),
            t1.last_bytes.eq(payload_bytes - 1),
            # the IPv4 total length, size - 14, joins the sum
            t1.ip_sum.eq(t0.ip_sum + payload_bytes + (HEADER_LEN - 14)),
        ]
        m.d.comb += [tokens.w_data.eq(_pack(t1.as_value(), self._constant_bits)),
                     tokens.w_en.eq(t1_valid)]
        # while the gearbox waits for a closed row to be written no token is made, so a
        # token with others behind it is not of the frame that waits
        self._newest_token = ~t0_valid & ~t1_valid & ~tokens.r_rdy
        if self._header_pop is not None:
            m.d.comb += self._header_pop.eq(is_header)

        # counters: events registered, added a cycle later
        c = self.counters
        events = {
            "host_frames": is_header,
            "wire_frames": closes,
            "close_full": full,
            "close_mismatch": header_close & ~host_in["idle"],
            "close_flush": flush_close | late_flush,
            "close_idle": idle_close | (header_close & host_in["idle"]),
            "close_end": end_close,
        }
        for name, event in events.items():
            q = Signal(name=f"event_{name}")
            m.d.sync += [q.eq(event), c[name].eq(c[name] + q)]
        elements = Signal(16, name="event_elements")
        m.d.sync += [elements.eq(Mux(is_header, host_in["n"], 0)),
                     c["elements"].eq(c["elements"] + elements)]
        return rd, tokens

    def _shared_row_stage(self, m, row, slot, wptr, word_valid_q, last_q, row_done, closes,
                          row_wait):
        """The row register's halves, each written to the cluster's ring in a turn of
        the lane's once it is filled (or its frame closes), while words fill the other
        half; after a close the gearbox waits until the closed row is written."""
        ring = self.ring
        half = self._slots // RING_HALVES
        pend = [Signal(name=f"pend{h}") for h in range(RING_HALVES)]
        pend_row = [Signal(range(self._ring_depth), name=f"pend_row{h}", reset_less=True)
                    for h in range(RING_HALVES)]
        same_row = Signal()      # both halves pending are of one row
        closing = last_q & (word_valid_q | (slot != 0))
        # the half a word fills, or a close's last slot (the one before when no word comes
        # with it; a half filled just before is pending already) is in
        now = [(word_valid_q & (slot == half - 1))
               | (closing & Mux(word_valid_q, slot < half, (slot != 0) & (slot < half))),
               (word_valid_q & (slot == self._slots - 1))
               | (closing & Mux(word_valid_q, slot >= half, slot > half))]
        # the older half first: a row's second half is older than the next row's first
        w_first = pend[0] & (~pend[1] | same_row)
        m.d.comb += [ring.w_data.eq(row), ring.w_en.eq(Cat(w_first, pend[1])),
                     ring.w_addr.eq(Mux(pend[1], pend_row[1], pend_row[0]))]
        written = [ring.w_turn & w_first, ring.w_turn & pend[1]]
        for h in range(RING_HALVES):
            with m.If(now[h]):
                m.d.sync += [pend[h].eq(1), pend_row[h].eq(wptr)]
            with m.Elif(written[h]):
                m.d.sync += pend[h].eq(0)
        with m.If(now[1]):
            m.d.sync += same_row.eq(1)
        with m.Elif(now[0]):
            m.d.sync += same_row.eq(0)
        with m.If(row_done):
            m.d.sync += wptr.eq(self._next_row(wptr))
        # the close in flight to this stage (its last word comes a cycle or two later)
        close_flight = Signal()
        with m.If(closes):
            m.d.sync += [close_flight.eq(1), row_wait.eq(1)]
        with m.Else():
            with m.If(last_q):
                m.d.sync += close_flight.eq(0)
            # (falls as the last half is written)
            with m.If(~close_flight & (~pend[0] | written[0]) & (~pend[1] | written[1])):
                m.d.sync += row_wait.eq(0)

    # ---- output: header beat, then the frame's rows -----------------------------------

    def _output(self, m, rd, tokens):
        """The next frame's token and its header, then the beats: a beat register
        (``o``), or in ``bare`` mode the lane's side of a frame bus."""
        tq = Signal(_Token, reset_less=True)     # the next frame's token
        tq_valid = Signal()
        ready_q = Signal()                       # its checksum is in ``checksum``
        checksum = Signal(16, reset_less=True)
        key_out = Signal(self._key_width, reset_less=True)
        key_sum_in = Signal(19, reset_less=True)   # the key's IPv4 words, summed
        key_sum = Signal(19, reset_less=True)
        issue_header = Signal()                  # the header of ``tq`` goes out

        key_in = self._key_in
        key_byte = self._key_byte

        def be_word(key, b):
            return Cat(key_byte(key, b + 1), key_byte(key, b))

        ip_words = [be_word(key_in, b) for b in range(HDR.SRC_IP[0], HDR.DST_IP[0] + 4, 2)]
        m.d.sync += key_sum_in.eq(sum(ip_words) + (IPV4_VIHL << 8) + PROTO_UDP)

        switch = Signal()
        m.d.comb += switch.eq((issue_header & tq.switch) | (tq_valid & ~tq.frame))
        with m.If(switch):
            m.d.sync += [key_out.eq(key_in), key_sum.eq(key_sum_in),
                         self._key_pending.eq(0)]
        pop = issue_header | (tq_valid & ~tq.frame)
        load = (~tq_valid | pop) & tokens.r_rdy
        m.d.comb += tokens.r_en.eq(load)
        # the IPv4 sum of the token loaded now: its words and its key's (the new key's
        # when the key changes as it loads: a token after a switch has the new key)
        tq_sum = Signal(20, reset_less=True)
        head = Signal(_Token)
        m.d.comb += head.eq(_unpack(tokens.r_data, self._constant_bits))
        with m.If(load):
            m.d.sync += [tq.eq(head), tq_valid.eq(1),
                         tq_sum.eq(Mux(switch, key_sum_in, key_sum) + head.ip_sum)]
        with m.Elif(pop):
            m.d.sync += tq_valid.eq(0)
        ip_length = Signal(16, reset_less=True)
        udp_length = Signal(16, reset_less=True)
        m.d.sync += [ready_q.eq(tq_valid & ~pop), checksum.eq(~ones_complement_fold(m, tq_sum)),
                     ip_length.eq(tq.size - 14), udp_length.eq(tq.size - 34)]

        hb = [None] * DATA_BYTES

        def put(start, value, big_endian=False):
            n = len(value) // 8
            for i in range(n):
                byte = value[8 * i:8 * i + 8]
                hb[start + (n - 1 - i if big_endian else i)] = byte

        for start, count in _KEY_BYTES:
            for b in range(start, start + count):
                hb[b] = key_byte(key_out, b)
        put(HDR.ETHERTYPE[0], Const(ETHERTYPE_IPV4, 16), big_endian=True)
        put(HDR.IP_VIHL[0], Const(IPV4_VIHL, 8))
        for i, b in enumerate(_COPIED_BYTES):
            hb[b] = tq.host.copied[8 * i:8 * i + 8]
        udp_checksum = Const(0, 16)
        if self._bare:
            # (what only the sums read is then left out by synthesis)
            ip_length = checksum = Const(0, 16)
            udp_length, udp_checksum = tq.host.src, tq.host.dst
        put(HDR.IP_TOTAL_LENGTH[0], ip_length, big_endian=True)
        put(HDR.IP_PROTO[0], Const(PROTO_UDP, 8))
        put(HDR.IP_CHECKSUM[0], checksum, big_endian=True)
        put(HDR.UDP_LENGTH[0], udp_length, big_endian=True)
        put(HDR.UDP_CHECKSUM[0], udp_checksum, big_endian=True)
        put(HDR.VERSION[0], Const(1, 8))
        stochastic = Const(0, 1) if self._stochastic_held else key_out[-1]
        put(HDR.FLAGS[0], Cat(Const(FLAG_ENCODED, 1), stochastic, tq.flush, Const(0, 5)))
        put(HDR.N[0], tq.n)
        put(HDR.OFFSET[0], tq.offset)
        assert all(x is not None for x in hb)
        header = Signal(8 * DATA_BYTES)
        m.d.comb += header.eq(Cat(*hb))

        frame_ready = tq_valid & tq.frame & ready_q
        if self._shared_ring:
            # the newest frame's last row may wait for the lane's turn to be written;
            # registered, as ``ready_q`` (a close makes a newer token, so a frame found
            # not waiting a cycle ago does not wait now)
            blocked = Signal()
            m.d.sync += blocked.eq(self._row_wait & self._newest_token)
            frame_ready = frame_ready & ~blocked
        if self._bare:
            self._bus_beats(m, rd, tq, frame_ready, header, issue_header)
        else:
            self._stream_beats(m, rd, tq, frame_ready, header, issue_header)

    def _stream_beats(self, m, rd, tq, frame_ready, header, issue_header):
        """``o``: a beat register loaded with the header, then with the rows."""
        o = self.o
        advance = ~o.valid | o.ready
        # the beat register takes no reset (only o.valid does): the header's constant
        # bytes become the flip-flops' synchronous set and reset instead of a select
        beat = Signal.like(o.payload, reset_less=True)
        m.d.comb += o.payload.eq(beat)
        rptr = self._rptr
        issue_row = Signal()
        if self._deep_ring:
            m.d.comb += rd.addr.eq(Mux(issue_row, self._next_row(rptr), rptr))
        else:
            m.d.comb += rd.addr.eq(rptr)
        beats_left = Signal(8)
        beats_none = Signal(init=1)              # beats_left == 0
        beats_one = Signal()                     # beats_left == 1
        last_keep = Signal(DATA_BYTES, reset_less=True)
        m.d.comb += issue_header.eq(advance & beats_none & frame_ready)
        with m.If(advance):
            with m.If(~beats_none):
                m.d.comb += issue_row.eq(1)
                m.d.sync += [o.valid.eq(1), beat.data.eq(rd.data),
                             beat.last.eq(beats_one),
                             beat.keep.eq(Mux(beats_one, last_keep, -1)),
                             beats_left.eq(beats_left - 1), rptr.eq(self._next_row(rptr)),
                             beats_none.eq(beats_one), beats_one.eq(beats_left == 2)]
            with m.Elif(issue_header):
                m.d.sync += [o.valid.eq(1), beat.data.eq(header),
                             beat.last.eq(0), beat.keep.eq(-1),
                             beat.size.eq(tq.size), beat.src.eq(tq.host.src),
                             beat.dst.eq(tq.host.dst),
                             beats_left.eq(tq.rows), beats_none.eq(0),
                             beats_one.eq(tq.rows == 1),
                             last_keep.eq(keep_through(tq.last_bytes))]
            with m.Else():
                m.d.sync += o.valid.eq(0)

    def _bus_beats(self, m, rd, tq, frame_ready, header, issue_header):
        """``bus``: the header from a register that is zero but while it is shown, the
        rows straight from the ring (its zero row while none is shown)."""
        bus = self.bus
        rptr = self._rptr
        # zero but while the header is shown; no reset (the clear is then the flip-flops'
        # synchronous reset, with no gate): the first cycle of a reset clears it, ``en``
        # being high while the arbiter's output register is reset
        hdr = Signal(8 * DATA_BYTES, reset_less=True)
        show_hdr = Signal()
        show_row = Signal()
        rows_left = Signal(8)                    # rows to show, the one shown included
        rows_one = Signal()                      # rows_left == 1
        rows_two = Signal()                      # rows_left == 2
        taken = bus.en & (show_hdr | show_row)
        last_taken = bus.en & show_row & rows_one
        # the next frame starts as the last row of this one is taken, or on an idle bus
        m.d.comb += issue_header.eq(bus.en & bus.grant & frame_ready
                                    & ((~show_hdr & ~show_row) | last_taken))
        show_row_next = Signal()
        rptr_next = Signal.like(rptr)
        m.d.comb += [
            show_row_next.eq(Mux(bus.en & show_hdr, 1, Mux(last_taken, 0, show_row))),
            rptr_next.eq(Mux(bus.en & show_row, self._next_row(rptr), rptr)),
        ]
        with m.If(bus.en):
            m.d.sync += hdr.eq(Mux(issue_header, header, 0))
        m.d.sync += [show_row.eq(show_row_next), rptr.eq(rptr_next)]
        with m.If(issue_header):
            m.d.sync += [show_hdr.eq(1), rows_left.eq(tq.rows), rows_one.eq(tq.rows == 1),
                         rows_two.eq(tq.rows == 2)]
        with m.Elif(taken):
            m.d.sync += show_hdr.eq(0)
        with m.If(bus.en & show_row & ~issue_header):
            m.d.sync += [rows_left.eq(rows_left - 1), rows_one.eq(rows_two),
                         rows_two.eq(rows_left == 3)]
        if self._deep_ring:
            # block RAM: its read is registered, so it is addressed a cycle ahead
            m.d.comb += rd.addr.eq(Mux(show_row_next, rptr_next, self._rows))
            if self._shared_ring:
                m.d.comb += self.ring.r_en.eq(show_row_next)
        else:
            m.d.comb += rd.addr.eq(Mux(show_row, rptr, self._rows))
        m.d.comb += [
            bus.show.eq(show_hdr | show_row),
            bus.penult.eq((show_hdr & rows_one) | (show_row & rows_two)),
            bus.head.eq(hdr),
            bus.beat.data.eq(rd.data),
            bus.beat.last.eq(show_row & rows_one),
            bus.ready.eq(frame_ready),
        ]
