"""How host bandwidth maps to lanes: one 512-bit lane at 250 MHz per 100 Gb/s, and the
UDP source ports of the on-chip generators."""

__all__ = ["LANE_GBPS", "MAX_LANES", "SRC_PORT_BASE", "lanes_for"]

#: Host bandwidth of one 512-bit, 250 MHz lane in the array (Gb/s).
LANE_GBPS = 100
#: Most lanes of an array (6400 Gb/s).
MAX_LANES = 64
#: Default UDP source port of lane 0's generator (a multiple of 64).
SRC_PORT_BASE = 0x5000


def lanes_for(host_bw):
    """Lanes for ``host_bw`` Gb/s; ``ValueError`` naming ``host_bw`` unless 100…6400 by 100."""
    if isinstance(host_bw, bool) or not isinstance(host_bw, int) \
            or host_bw % LANE_GBPS or not LANE_GBPS <= host_bw <= MAX_LANES * LANE_GBPS:
        raise ValueError(f"host_bw must be a multiple of {LANE_GBPS} from {LANE_GBPS} to "
                         f"{MAX_LANES * LANE_GBPS} Gb/s, got {host_bw!r}")
    return host_bw // LANE_GBPS
