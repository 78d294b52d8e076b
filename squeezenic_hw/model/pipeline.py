"""Pipelining over K gradient partitions (paper section 2.2, "Further optimizations").

The gradient of z bytes is cut into K partitions of ``partition_bytes``
(the last one smaller). The iteration is a two-stage pipeline: stage 1
computes partition k (its share of the backward pass, on the GPUs), stage 2
synchronises it (communication, compression, decompression). Stage 2 of
partition k starts when both its stage 1 and stage 2 of partition k-1 are
done, so computation of later partitions overlaps synchronisation of earlier
ones. With stage times c_k and s_k::

    C_k = C_{k-1} + c_k
    S_k = max(C_k, S_{k-1}) + s_k
    iteration = t_forward + S_K

(a two-machine flow shop; for equal stages S_K = min(c, s) + K max(c, s)).
"""

import math

import numpy as np

from .units import check_positive

__all__ = ["partition_sizes", "pipeline_makespan"]


def partition_sizes(total_bytes, partition_bytes):
    """Sizes of the K partitions of ``total_bytes`` (the last may be smaller).

    Returns
    -------
    numpy.ndarray
        K = ceil(total / partition) sizes in bytes, summing to ``total_bytes``.
    """
    total = check_positive(total_bytes, "model_bytes")
    part = check_positive(partition_bytes, "partition_bytes")
    k = max(1, math.ceil(total / part - 1e-9))
    sizes = np.full(k, part, dtype=float)
    sizes[-1] = total - part * (k - 1)
    return sizes


def pipeline_makespan(compute, sync):
    """Finish time of the two-stage pipeline (module docstring).

    Parameters
    ----------
    compute : sequence of float
        Stage-1 time of each partition, in production order (s).
    sync : sequence of float
        Stage-2 time of each partition (s).

    Returns
    -------
    float
        Time from the start of the first partition's computation to the end
        of the last partition's synchronisation (s).
    """
    compute = np.asarray(compute, dtype=float)
    sync = np.asarray(sync, dtype=float)
    if compute.shape != sync.shape or compute.ndim != 1:
        raise ValueError("sync: needs one time per partition, like compute")
    c_done = s_done = 0.0
    for c, s in zip(compute, sync, strict=True):
        c_done += c
        s_done = max(c_done, s_done) + s
    return float(s_done)
