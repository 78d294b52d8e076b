"""The narrow TX lane: its parameters, ports and stages."""

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from squeezenic_hw.gateware.codecs.fixed_pow2 import POW2_FIXED_LATENCY
from squeezenic_hw.gateware.common.layouts import (
    ELEMENTS_PER_BEAT,
    frame_bus_signature,
    shared_ring_signature,
)
from squeezenic_hw.gateware.common.stream import SkidBuffer
from squeezenic_hw.spec.header import (
    DEFAULT_MTU,
    DEFAULT_PORT,
    HDR,
    HEADER_LEN,
    MAX_PKT_LEN,
    check_port,
)

from ..lane import tx_lane_signature
from .gearbox import Gearbox
from .held_fields import constant_key_bytes, constant_token_bits
from .input_stage import InputStage
from .layouts import KEY_BYTES, item_layout
from .output import OutputStage
from .ring import RingStage
from .sizes import NARROW_CODECS, ROW, narrow_codec, narrow_lane_sizes

__all__ = ["NarrowTxLane"]


class NarrowTxLane(InputStage, Gearbox, RingStage, OutputStage, wiring.Component):
    """One TX lane for a trusted source of host frames of one narrow codec.

    Parameters
    ----------
    codec : str
        ``"sign"``, or ``"fixed:2"``, ``"fixed:4"``, ``"fixed:8"`` (:data:`~.sizes.NARROW_CODECS`).
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

    Ports: as :class:`~squeezenic_hw.gateware.tx.lane.TxLane` with ``trusted=True``
    (``cfg_port`` and ``cfg_enable`` are ignored; ``bus`` in place of ``o`` when ``bare``).
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
        self._constant_bits = constant_token_bits(constant_fields)
        self._bare = bare
        self._codec_id, self._b = choice
        # the key bytes held: those the source holds, and what a trusted source of the
        # lane's codec sends (the codec; for ``fixed`` its width, ``stochastic`` clear)
        self._key_fixed = constant_key_bytes(constant_fields)
        self._key_fixed[HDR.CODEC[0]] = self._codec_id
        if self._b > 1:
            self._key_fixed[HDR.PARAM[0]] = self._b
        self._stochastic_held = self._b > 1
        self._key_bytes = [b for start, n in KEY_BYTES for b in range(start, start + n)
                           if b not in self._key_fixed]
        self._key_width = 8 * len(self._key_bytes) + (not self._stochastic_held)
        self._word = ELEMENTS_PER_BEAT * self._b           # code bits of a full beat
        self._slots = ROW // self._word                    # words per row
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
        skid = m.submodules.items = SkidBuffer(item_layout(self._word))
        host_in = self._input_stage(m, skid)
        ring_read, tokens = self._gearbox(m, skid.o, host_in)
        self._output(m, ring_read, tokens)
        return m
