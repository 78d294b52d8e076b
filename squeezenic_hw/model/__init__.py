"""Performance model of SqueezeNIC: when does in-NIC compression pay off?

The SqueezeNIC paper's section 3 model (alpha-beta costs, ring all-reduce,
equations (1)-(3)) with pipelining over K gradient partitions, hardware
costs from this project's hardware (:func:`hw_cost`) and GPU costs from the
paper's measurements. See ``docs/model.md``.

Modules: :mod:`.units` (quantities), :mod:`.hardware` (SqueezeNIC cost),
:mod:`.gpu` (GPU cost), :mod:`.compression` (codec and rate r),
:mod:`.workloads` (model presets), :mod:`.equations` (equations (1)-(3)),
:mod:`.pipeline` (overlap over K partitions), :mod:`.scenario` (a whole
iteration, every scheme), :mod:`.plot` (the Figure 3 plot).
"""

from .compression import Compression, resolve_compression, wire_rate
from .equations import RING_MODES, Cluster, Link, SyncBreakdown, t_app1, t_app2, t_baseline
from .gpu import GpuCost, gpu_cost
from .hardware import (
    CLOCK_HZ,
    HOST_BW_RANGE,
    HW_PIPELINE_LATENCY,
    LANE_BYTES_PER_CYCLE,
    HwCost,
    auto_host_bw,
    check_host_bw,
    hw_cost,
)
from .pipeline import partition_sizes, pipeline_makespan
from .scenario import SCHEMES, ModelConfig, ModelResult, SchemeResult, evaluate, iteration_time
from .units import GBIT, parse_bandwidth, parse_size, parse_time
from .workloads import WORKLOADS, Workload, workload

__all__ = [
    "CLOCK_HZ", "HOST_BW_RANGE", "HW_PIPELINE_LATENCY", "LANE_BYTES_PER_CYCLE", "HwCost",
    "auto_host_bw", "check_host_bw", "hw_cost",
    "GpuCost", "gpu_cost",
    "Compression", "resolve_compression", "wire_rate",
    "Workload", "WORKLOADS", "workload",
    "Cluster", "Link", "SyncBreakdown", "RING_MODES", "t_baseline", "t_app1", "t_app2",
    "partition_sizes", "pipeline_makespan",
    "SCHEMES", "ModelConfig", "ModelResult", "SchemeResult", "evaluate", "iteration_time",
    "GBIT", "parse_size", "parse_bandwidth", "parse_time",
]
