"""The paper's alpha-beta cost model and its equations (1)-(3).

Notation (paper section 3, Table 1): N nodes of M GPUs; inter-node
bandwidth B and intra-node bandwidth V per direction; a gradient partition
g of |g| bytes; compressed form Q(g) of r|g| bytes. A point-to-point transfer
of z bytes costs ``T(z) = alpha + z / bandwidth`` (alpha-beta, beta = 1/bandwidth).
Synchronising one partition costs::

    (1) T_baseline = (M-1) T_intra(g) + 2(N-1) T_inter(g)
    (2) T_App1     = (M-1) T_intra(g) + 2(N-1) T_inter(Q(g))
                     + N T_comp^HW(g) + N T_decom^HW(Q(g))
    (3) T_App2     = (M-1) T_intra(Q(g)) + (M-1) T_comp^GPU(g) + (M-1) T_decom^GPU(Q(g))
                     + N T_decom^HW(Q(g)) + N T_comp^HW(g) + 2(N-1) T_inter(Q(g))

(M-1) is the intra-node ring ReduceScatter, 2(N-1) the inter-node ring
AllReduce (ReduceScatter + AllGather), after Patarasuk & Yuan. The
"On GPU" variants of (2) and (3) run the T^HW terms on a GPU instead.

What one ring step carries is the ``ring`` choice:

- ``"partition"`` (default): each step carries the whole partition (or its
  compressed form), exactly as the equations are printed: T_inter(g) with
  the full g. This reading is the one under which the paper's GPU
  compression overhead grows with N, as its Figure 3 discussion says.
- ``"chunk"``: the bandwidth-optimal ring of Patarasuk & Yuan, each step
  carries 1/M (intra) or 1/N (inter) of the partition, so the N (or M-1)
  compression operations each handle that chunk.
"""

from dataclasses import dataclass

from .units import check_count, check_nonnegative, check_positive

__all__ = ["Link", "Cluster", "SyncBreakdown", "RING_MODES",
           "t_baseline", "t_app1", "t_app2"]

RING_MODES = ("partition", "chunk")


@dataclass(frozen=True)
class Link:
    """An alpha-beta link: ``T(z) = alpha + z / bandwidth``.

    Attributes
    ----------
    alpha : float
        Per-message latency (s).
    bandwidth : float
        Effective bandwidth per direction (bytes/s), beta = 1 / bandwidth.
    """

    alpha: float
    bandwidth: float

    def time(self, nbytes):
        """Seconds to send ``nbytes`` over the link."""
        return self.alpha + nbytes / self.bandwidth


@dataclass(frozen=True)
class Cluster:
    """N nodes of M GPUs.

    Attributes
    ----------
    nodes : int
        N, nodes (one SqueezeNIC each).
    gpus_per_node : int
        M, GPUs per node.
    inter_bw : float
        B, inter-node effective bandwidth per direction (bytes/s).
    intra_bw : float
        V, intra-node effective bandwidth per direction (bytes/s).
    alpha_inter : float
        alpha of one inter-node message (s).
    alpha_intra : float
        alpha of one intra-node message (s).
    """

    nodes: int
    gpus_per_node: int
    inter_bw: float
    intra_bw: float
    alpha_inter: float = 10e-6
    alpha_intra: float = 5e-6

    def __post_init__(self):
        check_count(self.nodes, "nodes")
        check_count(self.gpus_per_node, "gpus_per_node")
        check_positive(self.inter_bw, "inter_bw")
        check_positive(self.intra_bw, "intra_bw")
        check_nonnegative(self.alpha_inter, "alpha_inter")
        check_nonnegative(self.alpha_intra, "alpha_intra")

    @property
    def inter(self):
        """The inter-node :class:`Link`."""
        return Link(self.alpha_inter, self.inter_bw)

    @property
    def intra(self):
        """The intra-node :class:`Link`."""
        return Link(self.alpha_intra, self.intra_bw)


@dataclass(frozen=True)
class SyncBreakdown:
    """Time to synchronise one partition, by term (all seconds).

    ``gpu_comp``/``gpu_decomp`` run on the GPUs, ``nic_comp``/``nic_decomp``
    on SqueezeNIC; ``intra``/``inter`` are communication.
    """

    intra: float = 0.0
    inter: float = 0.0
    nic_comp: float = 0.0
    nic_decomp: float = 0.0
    gpu_comp: float = 0.0
    gpu_decomp: float = 0.0

    @property
    def gpu_work(self):
        """Seconds of GPU compute spent on (de)compression."""
        return self.gpu_comp + self.gpu_decomp

    @property
    def total(self):
        """The equation's value: the sum of all terms."""
        return (self.intra + self.inter + self.nic_comp + self.nic_decomp
                + self.gpu_comp + self.gpu_decomp)


def _messages(g, cluster, ring):
    if ring not in RING_MODES:
        raise ValueError(f"ring: must be one of {', '.join(RING_MODES)}, got {ring!r}")
    check_nonnegative(g, "partition_bytes")
    if ring == "partition":
        return g, g
    return g / cluster.gpus_per_node, g / cluster.nodes


def _check_rate(rate):
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 2:
        raise ValueError(f"rate: compression rate r must be in (0, 2], got {rate!r}")


def _check_where(where):
    if where not in ("nic", "gpu"):
        raise ValueError(f"where: must be 'nic' or 'gpu', got {where!r}")


def t_baseline(g, cluster, ring="partition"):
    """Equation (1): no compression.

    Parameters
    ----------
    g : float
        Partition size |g| in bytes.
    cluster : Cluster
    ring : {"partition", "chunk"}
        What one ring step carries (module docstring).

    Returns
    -------
    SyncBreakdown
    """
    m_intra, m_inter = _messages(g, cluster, ring)
    n, m = cluster.nodes, cluster.gpus_per_node
    return SyncBreakdown(intra=(m - 1) * cluster.intra.time(m_intra),
                         inter=2 * (n - 1) * cluster.inter.time(m_inter))


def t_app1(g, cluster, rate, compressor, ring="partition", where="nic"):
    """Equation (2): Approach 1, LR+INC (local reduction, then compressed global ring).

    Parameters
    ----------
    g : float
        Partition size |g| in bytes.
    cluster : Cluster
    rate : float
        Compression rate r.
    compressor
        Object with ``comp_time(nbytes)`` and ``decomp_time(nbytes)`` (seconds
        to compress ``nbytes`` of fp32, and to decompress back to them), e.g.
        :class:`~squeezenic_hw.model.hardware.HwCost`.
    ring : {"partition", "chunk"}
    where : {"nic", "gpu"}
        Device running ``compressor``: ``"gpu"`` is the paper's
        "On GPU Approach 1" baseline.

    Returns
    -------
    SyncBreakdown
    """
    _check_rate(rate)
    _check_where(where)
    m_intra, m_inter = _messages(g, cluster, ring)
    n, m = cluster.nodes, cluster.gpus_per_node
    comp = n * compressor.comp_time(m_inter)
    decomp = n * compressor.decomp_time(m_inter)
    key = "nic" if where == "nic" else "gpu"
    return SyncBreakdown(intra=(m - 1) * cluster.intra.time(m_intra),
                         inter=2 * (n - 1) * cluster.inter.time(rate * m_inter),
                         **{f"{key}_comp": comp, f"{key}_decomp": decomp})


def t_app2(g, cluster, rate, gpu, compressor, ring="partition", where="nic"):
    """Equation (3): Approach 2, CTLR+INC (GPUs compress before the local reduction).

    Parameters
    ----------
    g : float
        Partition size |g| in bytes.
    cluster : Cluster
    rate : float
        Compression rate r (same codec intra and inter node).
    gpu
        GPU compressor (``comp_time``, ``decomp_time``) of the (M-1) terms.
    compressor
        Compressor of the N terms.
    ring : {"partition", "chunk"}
    where : {"nic", "gpu"}
        Device running ``compressor``: ``"gpu"`` is the paper's
        "On GPU Approach 2" baseline.

    Returns
    -------
    SyncBreakdown
    """
    _check_rate(rate)
    _check_where(where)
    m_intra, m_inter = _messages(g, cluster, ring)
    n, m = cluster.nodes, cluster.gpus_per_node
    comp = n * compressor.comp_time(m_inter)
    decomp = n * compressor.decomp_time(m_inter)
    gpu_comp = (m - 1) * gpu.comp_time(m_intra)
    gpu_decomp = (m - 1) * gpu.decomp_time(m_intra)
    if where == "gpu":
        gpu_comp, gpu_decomp = gpu_comp + comp, gpu_decomp + decomp
        comp = decomp = 0.0
    return SyncBreakdown(intra=(m - 1) * cluster.intra.time(rate * m_intra),
                         inter=2 * (n - 1) * cluster.inter.time(rate * m_inter),
                         nic_comp=comp, nic_decomp=decomp,
                         gpu_comp=gpu_comp, gpu_decomp=gpu_decomp)
