"""Training workloads: gradient size, compute time and measured GPU compression cost.

All GPU figures are from the SqueezeNIC paper (Rebai et al., NAIC '24),
measured on NVIDIA Tesla V100 (32 GB) with the HiPress GPU kernels:

- Table 2, "time to compress one model gradient tensor in seconds" (GPU):
  BERT: TernGrad 0.122, DGC 0.180, TBQ 0.154, GradDrop 0.190, 1-Bit 0.062;
  ResNet: TernGrad 0.097, DGC 0.133, TBQ 0.106, GradDrop 0.140, 1-Bit 0.035.
- Table 4, "iteration time per batch" (s), single V100: BERT 3.300 with no
  compression, 7.396 with 1-Bit, 7.734 with TernGrad, 7.926 with TBQ;
  DeepLight 0.024 / 0.106 (1-Bit).

Gradient sizes: BERT-Large has 340 M parameters (Devlin et al. 2018, the
paper's [18]), 1.36 GB in fp32; ResNet-50 has 25.6 M parameters (He et al.
2016, the paper's [23]; torchvision counts 25,557,032), 102.2 MB in fp32.
Table 2's "ResNet" is taken to be ResNet-50 (the paper does not say).
"""

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from .units import check_nonnegative, check_positive

__all__ = ["Workload", "WORKLOADS", "GPU_TABLE2_CODEC", "workload", "gpu_compress_seconds"]


@dataclass(frozen=True)
class Workload:
    """One model's training step, per GPU.

    Attributes
    ----------
    name : str
        Preset name.
    gradient_bytes : float
        z: gradient bytes per GPU per iteration (fp32).
    compute_time : float
        Forward + backward time of one iteration on one GPU (s); constant
        under weak scaling.
    backward_fraction : float
        Share of ``compute_time`` that is the backward pass, which produces
        the gradient partitions and can overlap with their synchronisation;
        the rest (forward pass) cannot. Default 2/3: the backward pass costs
        about twice the forward pass.
    gpu_compress : Mapping[str, float]
        Seconds to compress the whole model gradient on one GPU, by Table 2
        column (``onebit``, ``terngrad``, ...).
    source : str
        Where the figures come from.
    """

    name: str
    gradient_bytes: float
    compute_time: float
    backward_fraction: float = 2 / 3
    gpu_compress: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    source: str = ""

    def __post_init__(self):
        check_positive(self.gradient_bytes, "model_bytes")
        check_nonnegative(self.compute_time, "compute_time")
        f = self.backward_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f <= 1:
            raise ValueError(f"backward_fraction: must be in [0, 1], got {f!r}")

    @property
    def forward_time(self):
        """Compute time that cannot overlap with gradient synchronisation (s)."""
        return self.compute_time * (1 - self.backward_fraction)

    @property
    def backward_time(self):
        """Compute time that produces the gradient partitions (s)."""
        return self.compute_time * self.backward_fraction


_BERT_TABLE2 = MappingProxyType({
    "terngrad": 0.122, "dgc": 0.180, "tbq": 0.154, "graddrop": 0.190, "onebit": 0.062})
_RESNET_TABLE2 = MappingProxyType({
    "terngrad": 0.097, "dgc": 0.133, "tbq": 0.106, "graddrop": 0.140, "onebit": 0.035})

#: Model presets. ``custom`` is BERT-Large's GPU cost per byte applied to a
#: user-given size (see :func:`workload`).
WORKLOADS = MappingProxyType({
    "bert-large": Workload(
        "bert-large", 340e6 * 4, 3.300, gpu_compress=_BERT_TABLE2,
        source="340M fp32 params (Devlin et al.); compute 3.300 s (paper Table 4); "
               "GPU compression paper Table 2 (BERT)"),
    "resnet-50": Workload(
        "resnet-50", 25.6e6 * 4, 0.090, gpu_compress=_RESNET_TABLE2,
        source="25.6M fp32 params (He et al.); compute 0.090 s = batch 32 at 356 img/s "
               "(NVIDIA DeepLearningExamples, ResNet-50 v1.5 FP32 on one V100 32GB); "
               "GPU compression paper Table 2 (ResNet)"),
})

#: Table 2 column whose kernel does the same job as a codec of this project.
#: Codecs with no measured kernel use the 1-Bit column (the cheapest kernel
#: measured: a lower bound on GPU cost); the result says so.
GPU_TABLE2_CODEC = MappingProxyType({
    ("sign", 0): "onebit",
    ("qsgd", 2): "terngrad",
})


def workload(name="bert-large", *, model_bytes=None, compute_time=None,
             backward_fraction=None):
    """A workload preset, optionally with its figures overridden.

    Parameters
    ----------
    name : str
        ``bert-large``, ``resnet-50`` or ``custom``. ``custom`` needs
        ``model_bytes`` and ``compute_time`` and uses BERT-Large's GPU
        compression cost per byte.
    model_bytes : float, optional
        Gradient bytes per GPU (z).
    compute_time : float, optional
        Forward + backward seconds per iteration.
    backward_fraction : float, optional
        Overlappable share of ``compute_time``.

    Returns
    -------
    Workload
    """
    if name == "custom":
        if model_bytes is None or compute_time is None:
            raise ValueError("model: the custom model needs model_bytes and compute_time")
        bert = WORKLOADS["bert-large"]
        scale = check_positive(model_bytes, "model_bytes") / bert.gradient_bytes
        base = Workload(
            "custom", model_bytes, compute_time,
            gpu_compress=MappingProxyType({k: v * scale for k, v in bert.gpu_compress.items()}),
            source="user-given size and compute time; GPU compression at BERT-Large's "
                   "Table 2 cost per byte")
    else:
        try:
            base = WORKLOADS[name]
        except (KeyError, TypeError):
            raise ValueError(f"model: {name!r} is not a known model "
                             f"(known: {', '.join(WORKLOADS)}, custom)") from None
    changes = {}
    if model_bytes is not None and name != "custom":
        scale = check_positive(model_bytes, "model_bytes") / base.gradient_bytes
        changes["gradient_bytes"] = model_bytes
        changes["gpu_compress"] = MappingProxyType(
            {k: v * scale for k, v in base.gpu_compress.items()})
    if compute_time is not None:
        changes["compute_time"] = compute_time
    if backward_fraction is not None:
        changes["backward_fraction"] = backward_fraction
    if changes and name != "custom":
        changes["source"] = base.source + "; overridden: " + ", ".join(sorted(
            k for k in changes if k != "gpu_compress"))
    return replace(base, **changes) if changes else base


def gpu_compress_seconds(work, codec, param=0):
    """Table 2 GPU seconds to compress ``work``'s whole gradient with ``codec``.

    Returns
    -------
    seconds : float
    source : str
        The Table 2 column used, marked "assumed" when the codec has no
        measured GPU kernel of its own.
    """
    column = GPU_TABLE2_CODEC.get((codec, param or 0))
    if column is None:
        column, note = "onebit", f" (assumed for {codec}: no measured kernel)"
    else:
        note = ""
    seconds = work.gpu_compress.get(column)
    if seconds is None or not math.isfinite(seconds):
        raise ValueError(f"model: no GPU compression figure for {work.name!r}")
    return seconds, f"paper Table 2 {column}{note}"
