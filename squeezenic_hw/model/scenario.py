"""One iteration of data-parallel training under each synchronisation scheme.

Schemes (the paper's Figure 3 bars, plus the GPU-only variants it compares
against):

========== ======== =====================================================
scheme     equation compression
========== ======== =====================================================
none       (1)      none (the no-compression baseline, speedup 1)
gpu-app1   (2)      on the GPUs ("On GPU Approach 1 baseline")
nic-app1   (2)      on SqueezeNIC (Approach 1, LR+INC)
gpu-app2   (3)      on the GPUs ("On GPU Approach 2 baseline")
nic-app2   (3)      GPUs before the local reduction, SqueezeNIC across
                    nodes (Approach 2, CTLR+INC)
========== ======== =====================================================

For each partition the scheme's equation gives the synchronisation stage
time; the backward pass gives the compute stage time (its share of the
gradient bytes); :func:`~squeezenic_hw.model.pipeline.pipeline_makespan`
overlaps the two over the K partitions, and the forward pass comes first.

GPU contention (default on): GPU (de)compression runs on the GPU that is
computing, so it cannot overlap with computation (the paper, section 5: such
methods "fail to overlap compression and computation due to resource
contention"; Table 3: the kernels use 7-77 % of the GPU). It is moved from
the synchronisation stage to the compute stage of its partition. SqueezeNIC
work stays in the synchronisation stage. With ``gpu_contention=False``
everything in the equation is synchronisation, as the paper groups it.
"""

from dataclasses import dataclass, field

from .compression import Compression, resolve_compression
from .equations import RING_MODES, Cluster, t_app1, t_app2, t_baseline
from .gpu import GpuCost, gpu_cost
from .hardware import HwCost, auto_host_bw, hw_cost
from .pipeline import partition_sizes, pipeline_makespan
from .units import GBIT, check_count, check_nonnegative, check_positive
from .workloads import WORKLOADS, Workload

__all__ = ["SCHEMES", "ModelConfig", "SchemeResult", "ModelResult", "evaluate",
           "iteration_time"]

#: scheme -> (equation, where the compression runs)
SCHEMES = {
    "none": ("(1)", "-"),
    "gpu-app1": ("(2)", "gpu"),
    "nic-app1": ("(2)", "nic"),
    "gpu-app2": ("(3)", "gpu"),
    "nic-app2": ("(3)", "gpu+nic"),
}


@dataclass(frozen=True)
class ModelConfig:
    """Every parameter of the model (SI units: bytes, bytes/s, seconds).

    Attributes
    ----------
    work : Workload
        Model preset (gradient size z, compute time, GPU costs).
    nodes : tuple of int
        Node counts N to evaluate.
    gpus_per_node : int
        M.
    inter_bw : float
        B, bytes/s per direction (default 100 Gb/s: the U280's and
        ConnectX-5's 100 GbE port).
    intra_bw : float
        V, bytes/s per direction (default 150 GB/s: V100 NVLink 2, six
        links of 25 GB/s each way).
    alpha_inter, alpha_intra : float
        Per-message latency (s) of an inter-/intra-node transfer.
    partition_bytes : float
        Partition (bucket) size |g| (default 25 MiB, PyTorch DDP's
        ``bucket_cap_mb=25``, the paper's "25 MB").
    compression : Compression
        Codec and compression rate r (default the ``onebit`` preset).
    host_bw : int or None
        SqueezeNIC host-side bandwidth (Gb/s); None picks the smallest that
        keeps the wire full (B / r), as the paper's Table 6 does.
    gpu_comp_time, gpu_decomp_time : float or None
        GPU seconds to (de)compress the whole gradient; None takes Table 2.
    ring : {"partition", "chunk"}
        What one ring step carries (see :mod:`.equations`).
    gpu_contention : bool
        GPU (de)compression blocks GPU computation.
    """

    work: Workload = field(default_factory=lambda: WORKLOADS["bert-large"])
    nodes: tuple = (2, 4, 8, 16)
    gpus_per_node: int = 8
    inter_bw: float = 100 * GBIT
    intra_bw: float = 150e9
    alpha_inter: float = 10e-6
    alpha_intra: float = 5e-6
    partition_bytes: float = 25 * 2**20
    compression: Compression = field(default_factory=resolve_compression)
    host_bw: int | None = None
    gpu_comp_time: float | None = None
    gpu_decomp_time: float | None = None
    ring: str = "partition"
    gpu_contention: bool = True

    def __post_init__(self):
        if not isinstance(self.work, Workload):
            raise ValueError(f"work: must be a Workload, got {self.work!r}")
        if isinstance(self.nodes, (str, bytes)) or not hasattr(self.nodes, "__iter__"):
            raise ValueError(f"nodes: must be a list of node counts, got {self.nodes!r}")
        nodes = tuple(check_count(n, "nodes") for n in self.nodes)
        if not nodes:
            raise ValueError("nodes: needs at least one node count")
        object.__setattr__(self, "nodes", nodes)
        check_count(self.gpus_per_node, "gpus_per_node")
        check_positive(self.inter_bw, "inter_bw")
        check_positive(self.intra_bw, "intra_bw")
        check_nonnegative(self.alpha_inter, "alpha_inter")
        check_nonnegative(self.alpha_intra, "alpha_intra")
        check_positive(self.partition_bytes, "partition_bytes")
        if not isinstance(self.compression, Compression):
            raise ValueError(f"compression: must be a Compression, got {self.compression!r}")
        if self.ring not in RING_MODES:
            raise ValueError(f"ring: must be one of {', '.join(RING_MODES)}, got {self.ring!r}")
        if not isinstance(self.gpu_contention, bool):
            raise ValueError(f"gpu_contention: must be True or False, got {self.gpu_contention!r}")

    def cluster(self, nodes):
        """The :class:`Cluster` of ``nodes`` nodes."""
        return Cluster(nodes, self.gpus_per_node, self.inter_bw, self.intra_bw,
                       self.alpha_inter, self.alpha_intra)

    def resolved_host_bw(self):
        """``host_bw`` in Gb/s, choosing it from B / r when not given."""
        if self.host_bw is None:
            return auto_host_bw(self.inter_bw, self.compression.rate)
        return self.host_bw

    def hw(self):
        """The :class:`HwCost` of the configured codec and host bandwidth."""
        c = self.compression
        return hw_cost(c.codec, c.param, self.resolved_host_bw())

    def gpu(self):
        """The :class:`GpuCost` of the configured codec on this workload."""
        c = self.compression
        return gpu_cost(self.work, c.codec, c.param,
                        comp_time=self.gpu_comp_time, decomp_time=self.gpu_decomp_time)


@dataclass(frozen=True)
class SchemeResult:
    """One scheme at one node count (times per iteration, seconds).

    Attributes
    ----------
    nodes : int
    scheme : str
    equation : str
    compress_on : str
    iteration_time : float
        Forward pass + pipelined backward/synchronisation.
    sync_time : float
        Sum over the K partitions of the scheme's equation (not overlapped).
    gpu_work : float
        GPU seconds spent on (de)compression in the iteration.
    exposed_sync : float
        ``iteration_time`` minus the compute time: what synchronisation adds.
    speedup : float
        Iteration time of ``none`` / this one.
    speedup_vs_gpu : float or None
        For ``nic-appX``: iteration time of ``gpu-appX`` / this one.
    """

    nodes: int
    scheme: str
    equation: str
    compress_on: str
    iteration_time: float
    sync_time: float
    gpu_work: float
    exposed_sync: float
    speedup: float = 1.0
    speedup_vs_gpu: float | None = None


@dataclass(frozen=True)
class ModelResult:
    """Result of :func:`evaluate`: the configuration, derived costs and rows."""

    config: ModelConfig
    hw: HwCost
    gpu: GpuCost
    partitions: int
    rows: tuple

    def row(self, nodes, scheme):
        """The :class:`SchemeResult` of ``scheme`` at ``nodes`` nodes."""
        for r in self.rows:
            if r.nodes == nodes and r.scheme == scheme:
                return r
        raise KeyError((nodes, scheme))


def _breakdown(scheme, g, cluster, rate, hw, gpu, ring):
    if scheme == "none":
        return t_baseline(g, cluster, ring)
    if scheme == "gpu-app1":
        return t_app1(g, cluster, rate, gpu, ring, where="gpu")
    if scheme == "nic-app1":
        return t_app1(g, cluster, rate, hw, ring, where="nic")
    if scheme == "gpu-app2":
        return t_app2(g, cluster, rate, gpu, gpu, ring, where="gpu")
    if scheme == "nic-app2":
        return t_app2(g, cluster, rate, gpu, hw, ring, where="nic")
    raise ValueError(f"scheme: must be one of {', '.join(SCHEMES)}, got {scheme!r}")


def iteration_time(config, nodes, scheme, *, hw=None, gpu=None):
    """Iteration time of ``scheme`` on ``nodes`` nodes.

    Returns
    -------
    iteration : float
        Seconds per iteration.
    sync : float
        Sum of the scheme's equation over the partitions (s).
    gpu_work : float
        GPU (de)compression seconds in the iteration.
    """
    hw = config.hw() if hw is None else hw
    gpu = config.gpu() if gpu is None else gpu
    work = config.work
    cluster = config.cluster(nodes)
    sizes = partition_sizes(work.gradient_bytes, config.partition_bytes)
    compute, sync = [], []
    sync_total = gpu_total = 0.0
    for g in sizes:
        b = _breakdown(scheme, g, cluster, config.compression.rate, hw, gpu, config.ring)
        c = work.backward_time * g / work.gradient_bytes
        s = b.total
        if config.gpu_contention:
            c, s = c + b.gpu_work, s - b.gpu_work
        compute.append(c)
        sync.append(s)
        sync_total += b.total
        gpu_total += b.gpu_work
    return (float(work.forward_time + pipeline_makespan(compute, sync)),
            float(sync_total), float(gpu_total))


def evaluate(config=None):
    """Evaluate every scheme at every node count of ``config``.

    Parameters
    ----------
    config : ModelConfig, optional
        Defaults to the paper's Figure 3 setup (BERT-Large, 1-bit, 25 MB
        partitions, B = 100 Gb/s).

    Returns
    -------
    ModelResult
    """
    config = ModelConfig() if config is None else config
    hw, gpu = config.hw(), config.gpu()
    rows = []
    for n in config.nodes:
        times = {s: iteration_time(config, n, s, hw=hw, gpu=gpu) for s in SCHEMES}
        base = times["none"][0]
        for s, (eq, where) in SCHEMES.items():
            it, sync, gw = times[s]
            vs_gpu = None
            if s.startswith("nic-"):
                vs_gpu = times["gpu-" + s[4:]][0] / it
            rows.append(SchemeResult(
                nodes=n, scheme=s, equation=eq, compress_on=where, iteration_time=it,
                sync_time=sync, gpu_work=gw, exposed_sync=it - config.work.compute_time,
                speedup=base / it, speedup_vs_gpu=vs_gpu))
    k = len(partition_sizes(config.work.gradient_bytes, config.partition_bytes))
    return ModelResult(config, hw, gpu, k, tuple(rows))
