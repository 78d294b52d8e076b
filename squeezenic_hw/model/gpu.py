"""Cost of compression and decompression on a GPU.

The paper measures GPU compression of a whole model gradient (Table 2); the
model assumes the cost is proportional to the bytes compressed, so a chunk of
x bytes costs ``x / z * T_table2``. The paper gives no decompression figure:
by default decompression costs the same as compression (the HiPress kernels
of Table 2 are of similar work each way).
"""

from dataclasses import dataclass

from .units import check_nonnegative, check_positive
from .workloads import gpu_compress_seconds

__all__ = ["GpuCost", "gpu_cost"]


@dataclass(frozen=True)
class GpuCost:
    """Linear GPU (de)compression cost.

    Attributes
    ----------
    comp_s_per_byte : float
        Seconds per fp32 byte compressed.
    decomp_s_per_byte : float
        Seconds per fp32 byte produced by decompression.
    source : str
        Where the figures come from.
    """

    comp_s_per_byte: float
    decomp_s_per_byte: float
    source: str = ""

    def __post_init__(self):
        check_nonnegative(self.comp_s_per_byte, "gpu_comp_time")
        check_nonnegative(self.decomp_s_per_byte, "gpu_decomp_time")

    def comp_time(self, nbytes):
        """Seconds to compress ``nbytes`` of fp32 gradient."""
        return nbytes * self.comp_s_per_byte

    def decomp_time(self, nbytes):
        """Seconds to decompress back to ``nbytes`` of fp32 gradient."""
        return nbytes * self.decomp_s_per_byte


def gpu_cost(work, codec, param=0, *, comp_time=None, decomp_time=None):
    """GPU cost for ``work`` and ``codec``.

    Parameters
    ----------
    work : Workload
    codec : str
    param : int
    comp_time : float, optional
        Seconds to compress the whole gradient; default from paper Table 2.
    decomp_time : float, optional
        Seconds to decompress the whole gradient; default ``comp_time``.

    Returns
    -------
    GpuCost
    """
    z = check_positive(work.gradient_bytes, "model_bytes")
    if comp_time is None:
        comp_time, source = gpu_compress_seconds(work, codec, param)
    else:
        comp_time, source = check_nonnegative(comp_time, "gpu_comp_time"), "given"
    if decomp_time is None:
        decomp_time, dsource = comp_time, "decompression = compression (assumed)"
    else:
        decomp_time, dsource = check_nonnegative(decomp_time, "gpu_decomp_time"), "given"
    return GpuCost(comp_time / z, decomp_time / z, f"{source}; {dsource}")
