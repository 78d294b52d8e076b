"""Counter names of the TX and RX lanes and of the reduce checks: the keys of the
reference's counters, the hardware's counter structs and the register map, in one order."""

from .frames import RX_REASONS, TX_REASONS
from .reduce import ContributionReason, ReduceReason

__all__ = ["CLOSE_REASONS", "tx_counter_names", "rx_counter_names", "TX_COUNTERS", "RX_COUNTERS",
           "TRUSTED_TX_COUNTERS", "reduce_counter_name", "REDUCE_COUNTERS",
           "contribution_counter_name", "CONTRIBUTION_COUNTERS"]

#: Reasons a TX wire frame closes (counter ``close_<reason>``).
CLOSE_REASONS = ("full", "mismatch", "flush", "idle", "end")


def tx_counter_names():
    """The stable counter keys of the reference TX lane, in order."""
    return (["host_frames", "wire_frames", "elements"]
            + [f"close_{r}" for r in CLOSE_REASONS]
            + ["bypass_frames"] + [f"bypass_{r.value}" for r in TX_REASONS])


def rx_counter_names():
    """The stable counter keys of the reference RX lane, in order."""
    return (["wire_frames", "host_frames", "elements", "bypass_frames"]
            + [f"bypass_{r.value}" for r in RX_REASONS]
            + ["sparse_count_errors", "sparse_layout_errors"])


#: Counter names of the TX lane hardware: the reference's keys, then ``size_errors``
#: (frames whose ``tuser_size`` disagrees with their length).
TX_COUNTERS = tuple(tx_counter_names()) + ("size_errors",)
#: Counter names of the RX lane hardware: the reference's keys, then ``size_errors``.
RX_COUNTERS = tuple(rx_counter_names()) + ("size_errors",)
#: The TX counters a lane fed by a trusted source can move (the generator lanes): a
#: trusted lane bypasses nothing and its source writes ``tuser_size`` right, so its
#: ``bypass_*`` and ``size_errors`` stay 0 and the register map leaves them out.
TRUSTED_TX_COUNTERS = tuple(tx_counter_names()[:3 + len(CLOSE_REASONS)])


def reduce_counter_name(reason):
    """The counter key of a :class:`~.reduce.ReduceReason`: ``reduce_taken`` for ``NONE``
    (frames taken), else ``reduce_<reason>`` (frames bypassed for it)."""
    return "reduce_taken" if reason is ReduceReason.NONE else f"reduce_{reason.name.lower()}"


#: Counter names of a node's reduce checks (``docs/wire-format.md`` section 8.4): the
#: frames taken, then one per :class:`~.reduce.ReduceReason` in check order.
REDUCE_COUNTERS = tuple(reduce_counter_name(r) for r in ReduceReason)


def contribution_counter_name(reason):
    """The counter key of a :class:`~.reduce.ContributionReason`: ``contribution_taken``
    for ``NONE``, else ``contribution_<reason>``."""
    return ("contribution_taken" if reason is ContributionReason.NONE
            else f"contribution_{reason.name.lower()}")


#: Counter names of a node's checks on its host's contribution frames (section 8.5).
CONTRIBUTION_COUNTERS = tuple(contribution_counter_name(r) for r in ContributionReason)
