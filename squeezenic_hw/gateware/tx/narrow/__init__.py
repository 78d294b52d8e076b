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
:class:`~squeezenic_hw.gateware.tx.lane.TxLane` with ``trusted=True`` does, in a fraction
of the logic (``docs/lanes.md``).

The files follow the diagram: :mod:`.input_stage` (beats to items, the encoder),
:mod:`.gearbox` (words and closes), :mod:`.ring` (rows into the ring),
:mod:`.output` (headers and rows out), :mod:`.lane` (the component that joins them);
:mod:`.layouts` holds what moves between the stages, :mod:`.held_fields` the fields a
source holds constant, :mod:`.sizes` the codecs and the sizes that follow from them.
"""

from .lane import NarrowTxLane
from .sizes import NARROW_CODECS, narrow_codec, narrow_lane_sizes

__all__ = ["NarrowTxLane", "NARROW_CODECS", "narrow_codec", "narrow_lane_sizes"]
