"""Cost of compression and decompression on the SqueezeNIC hardware.

This module is the ONE place where the model learns what the hardware costs.
A codec lane is a fully pipelined 512-bit AXI-Stream datapath at 250 MHz: one
64-byte beat per cycle per lane after a fixed pipeline latency. ``host_bw``
(Gb/s, a multiple of 100 from 100 to 6400) is the host-side bandwidth the NIC
is built for, one lane per 100 Gb/s (as the paper's Table 6 instantiates one
100 Gb/s generator per 100 Gb/s of host bandwidth). So::

    T_comp^HW(g)      = L_tx / f + |g| / (lanes * 64 B * f)
    T_decom^HW(Q(g))  = L_rx / f + |g| / (lanes * 64 B * f)

with f = 250 MHz and |g| the uncompressed bytes of the partition: the encoder
reads |g| fp32 bytes on the host side, the decoder writes |g| fp32 bytes back
to the host side, and both move one host-side beat per lane per cycle.

The pipeline latencies below (``HW_PIPELINE_LATENCY``) are the first-beat
latencies measured on the generated lanes (``python bench/lanes.py``,
``docs/figures.md``): TX from a one-element host frame's first beat to its
wire frame's first beat (31–44 cycles by codec), RX from a wire frame's first
beat to its first host frame's (16 cycles). Update them here when the lanes
change; nothing else in the model hard-codes a hardware figure. At 250 MHz
they are 64–176 ns: negligible next to the
milliseconds a 25 MB partition spends on a 100 Gb/s wire, as the paper says
("a few to tens of clock cycles ... negligible").
"""

from dataclasses import dataclass
from types import MappingProxyType

from squeezenic_hw.spec.codecs import validate_param

from .compression import lookup_codec
from .units import GBIT

__all__ = [
    "CLOCK_HZ", "LANE_BYTES_PER_CYCLE", "LANE_GBPS", "HOST_BW_RANGE",
    "HW_PIPELINE_LATENCY", "HwCost", "hw_cost", "check_host_bw", "auto_host_bw",
]

CLOCK_HZ = 250e6
"""Clock of the OpenNIC 250 MHz user box (AXI-Stream domain)."""

LANE_BYTES_PER_CYCLE = 64
"""One 512-bit beat per cycle per lane."""

LANE_GBPS = 100
"""Host bandwidth one lane is provisioned for (Gb/s); 64 B x 250 MHz = 128 Gb/s raw."""

HOST_BW_RANGE = (100, 6400)
"""Allowed ``host_bw`` (Gb/s), in steps of ``LANE_GBPS`` (the paper's Table 6 range)."""

#: First-beat latency in clock cycles of each codec's (TX lane, RX lane), measured by
#: ``python bench/lanes.py`` (columns ``tx_encode_1`` and ``rx_decode``).
HW_PIPELINE_LATENCY = MappingProxyType({
    "raw": (33, 16), "fp16": (35, 16), "bf16": (34, 16), "fixed": (46, 16),
    "qsgd": (46, 16), "sign": (33, 16), "natural": (44, 16),
})


@dataclass(frozen=True)
class HwCost:
    """Hardware cost figures of one codec at one ``host_bw``.

    Attributes
    ----------
    codec : str
        Codec name (``squeezenic_hw.spec.codecs.CODECS``).
    param : int
        Codec parameter (0 when the codec takes none).
    host_bw_gbps : int
        Host-side bandwidth the NIC is built for (Gb/s).
    lanes : int
        Parallel 512-bit lanes, ``host_bw_gbps / 100``.
    tx_latency_cycles, rx_latency_cycles : int
        Pipeline latency of the encoder and decoder paths (cycles).
    clock_hz : float
        Clock frequency (Hz).
    bytes_per_cycle : int
        Bytes per cycle per lane.
    """

    codec: str
    param: int
    host_bw_gbps: int
    lanes: int
    tx_latency_cycles: int
    rx_latency_cycles: int
    clock_hz: float = CLOCK_HZ
    bytes_per_cycle: int = LANE_BYTES_PER_CYCLE

    @property
    def throughput(self):
        """Host-side throughput of all lanes together (bytes/s)."""
        return self.lanes * self.bytes_per_cycle * self.clock_hz

    def comp_time(self, nbytes):
        """Seconds to compress ``nbytes`` of fp32 gradient on the TX path."""
        return self.tx_latency_cycles / self.clock_hz + nbytes / self.throughput

    def decomp_time(self, nbytes):
        """Seconds to decompress back to ``nbytes`` of fp32 gradient on the RX path."""
        return self.rx_latency_cycles / self.clock_hz + nbytes / self.throughput


def check_host_bw(host_bw):
    """Return ``host_bw`` (Gb/s) as int; ``ValueError`` unless a multiple of 100 in 100..6400."""
    lo, hi = HOST_BW_RANGE
    ok = (not isinstance(host_bw, bool) and isinstance(host_bw, (int, float))
          and float(host_bw).is_integer() and lo <= host_bw <= hi
          and int(host_bw) % LANE_GBPS == 0)
    if not ok:
        raise ValueError(f"host_bw: must be a multiple of {LANE_GBPS} Gb/s from {lo} to {hi}, "
                         f"got {host_bw!r}")
    return int(host_bw)


def auto_host_bw(inter_bw, rate):
    """Smallest valid ``host_bw`` (Gb/s) that keeps the wire full: ``inter_bw / rate``.

    This is how the paper's Table 6 sizes its designs ("matched with a
    compression ratio to achieve 100 Gbps network-side throughput"), capped
    at 6400 Gb/s.

    Parameters
    ----------
    inter_bw : float
        Inter-node (wire) bandwidth B in bytes/s.
    rate : float
        Compression rate r (compressed / original size).
    """
    need = inter_bw / GBIT / rate
    lo, hi = HOST_BW_RANGE
    lanes = -(-round(need, 6) // LANE_GBPS)  # ceil, tolerant of float noise
    return int(min(hi, max(lo, lanes * LANE_GBPS)))


def hw_cost(codec, param=None, host_bw=400):
    """Hardware compression/decompression cost of ``codec`` at ``host_bw``.

    Parameters
    ----------
    codec : str
        Codec name.
    param : int, optional
        Codec parameter (bits for ``fixed``/``qsgd``; none for the others).
    host_bw : int
        Host-side bandwidth in Gb/s, multiple of 100 from 100 to 6400.

    Returns
    -------
    HwCost
    """
    info = lookup_codec(codec)
    param = validate_param(info.name, param)
    host_bw = check_host_bw(host_bw)
    tx, rx = HW_PIPELINE_LATENCY[info.name]
    return HwCost(codec=info.name, param=param, host_bw_gbps=host_bw,
                  lanes=host_bw // LANE_GBPS, tx_latency_cycles=tx, rx_latency_cycles=rx)
