"""``squeezenic-hw model``: iteration time and speedup of in-NIC compression.

Reproduces the SqueezeNIC paper's Figure 3 with the performance model of
:mod:`squeezenic_hw.model` (see ``docs/model.md``).
"""

import re

from . import CliError
from .output import add_format_option, render

NAME = "model"
HELP = ("performance model: per-iteration time and speedup of SqueezeNIC compression "
        "(Approach 1 / 2) against no compression and GPU compression, by node count")

COLUMNS = ["nodes", "scheme", "equation", "compress_on", "iteration_s", "sync_s",
           "gpu_work_s", "exposed_sync_s", "speedup", "speedup_vs_gpu"]

# Library parameter name -> the option that sets it, for error messages.
_OPTION = {
    "nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "inter_bw": "--inter-bw",
    "intra_bw": "--intra-bw", "alpha_inter": "--alpha", "alpha_intra": "--alpha-intra",
    "partition_bytes": "--partition-bytes", "model_bytes": "--model-bytes",
    "compute_time": "--compute-time", "backward_fraction": "--backward-fraction",
    "codec": "--codec", "param": "--param", "preset": "--preset", "rate": "--rate",
    "mtu": "--mtu", "host_bw": "--host-bw", "gpu_comp_time": "--gpu-comp-time",
    "gpu_decomp_time": "--gpu-decomp-time", "ring": "--ring", "model": "--model",
}


def add_arguments(parser):
    m = parser.add_argument_group("workload")
    m.add_argument("--model", default=None, metavar="NAME",
                   help="model preset: bert-large (default), resnet-50, or custom "
                        "(needs --model-bytes and --compute-time)")
    m.add_argument("--model-bytes", metavar="SIZE",
                   help="gradient bytes per GPU, z (e.g. 500MB, 1.36GB, 2GiB; bare = bytes); "
                        "alone it selects the custom model")
    m.add_argument("--compute-time", metavar="TIME",
                   help="forward+backward time per iteration per GPU (s, or 90ms; "
                        "default: the preset's, BERT-Large 3.3 s from paper Table 4)")
    m.add_argument("--backward-fraction", metavar="F",
                   help="share of the compute time that is the backward pass and overlaps "
                        "with gradient synchronisation (0..1, default 2/3)")
    c = parser.add_argument_group("cluster")
    c.add_argument("--nodes", default="2,4,8,16", metavar="N,N,...",
                   help="node counts N (default 2,4,8,16)")
    c.add_argument("--gpus-per-node", default="8", metavar="M",
                   help="GPUs per node M (default 8, a DGX-1 V100 node)")
    c.add_argument("--inter-bw", default="100", metavar="BW",
                   help="inter-node bandwidth B per direction (Gb/s, or 12.5GB/s; default 100)")
    c.add_argument("--intra-bw", default="150GB/s", metavar="BW",
                   help="intra-node bandwidth V per direction (Gb/s, or GB/s with the unit; "
                        "default 150GB/s, V100 NVLink 2)")
    c.add_argument("--alpha", default="10", metavar="TIME",
                   help="alpha of an inter-node message (us, or 0.01ms; default 10)")
    c.add_argument("--alpha-intra", default="5", metavar="TIME",
                   help="alpha of an intra-node message (us; default 5)")
    c.add_argument("--partition-bytes", default="25MiB", metavar="SIZE",
                   help="gradient partition (bucket) size |g| (default 25MiB)")
    c.add_argument("--ring", default="partition", metavar="MODE",
                   help="what one ring step carries: partition (the equations as printed, "
                        "default) or chunk (bandwidth-optimal ring, 1/N of it)")
    k = parser.add_argument_group("compression")
    k.add_argument("--preset", metavar="NAME",
                   help="codec preset: onebit (default), signsgd, terngrad, int8")
    k.add_argument("--codec", metavar="NAME",
                   help="codec instead of a preset: raw, fp16, bf16, fixed, qsgd, sign, natural")
    k.add_argument("--param", metavar="BITS",
                   help="codec parameter (fixed/qsgd: bits per element, 2..16)")
    k.add_argument("--rate", metavar="R",
                   help="compression rate r = compressed/original size, in (0, 1] "
                        "(default: from the codec)")
    k.add_argument("--mtu", default="1518", metavar="BYTES",
                   help="wire frame size for the header overhead in r (default 1518)")
    k.add_argument("--no-header-overhead", action="store_true",
                   help="r = bits/32 exactly, ignoring frame headers")
    k.add_argument("--host-bw", default="auto", metavar="GBPS",
                   help="SqueezeNIC host bandwidth (Gb/s, multiple of 100 from 100 to 6400; "
                        "default auto: smallest that keeps the wire full, B/r)")
    k.add_argument("--gpu-comp-time", metavar="TIME",
                   help="GPU time to compress the whole gradient (s; default paper Table 2)")
    k.add_argument("--gpu-decomp-time", metavar="TIME",
                   help="GPU time to decompress the whole gradient (s; default = compression)")
    k.add_argument("--no-gpu-contention", action="store_true",
                   help="let GPU (de)compression overlap with computation")
    add_format_option(parser)
    parser.add_argument("--plot", metavar="FILE.png",
                        help="also draw the Figure-3-like plot to this file")


def _option_error(exc):
    msg = str(exc)
    m = re.match(r"(\w+): (.*)", msg, re.S)
    if m and m.group(1) in _OPTION:
        msg = f"{_OPTION[m.group(1)]}: {m.group(2)}"
    return CliError(msg.splitlines()[0])


def _int(text, option):
    try:
        return int(str(text).strip())
    except ValueError:
        raise CliError(f"{option}: must be an integer, got {text!r}") from None


def _float(text, option):
    try:
        return float(str(text).strip())
    except ValueError:
        raise CliError(f"{option}: must be a number, got {text!r}") from None


def build_config(args):
    """Turn parsed options into a :class:`~squeezenic_hw.model.ModelConfig`."""
    from squeezenic_hw.model import ModelConfig, parse_bandwidth, parse_size, parse_time
    from squeezenic_hw.model.compression import resolve_compression
    from squeezenic_hw.model.workloads import workload

    nodes = [_int(n, "--nodes") for n in str(args.nodes).split(",") if n.strip()]
    if not nodes:
        raise CliError("--nodes: needs at least one node count")
    if any(n < 1 for n in nodes):
        raise CliError(f"--nodes: node counts must be >= 1, got {args.nodes!r}")
    model = args.model or ("custom" if args.model_bytes is not None else "bert-large")
    if model == "custom" and (args.model_bytes is None or args.compute_time is None):
        raise CliError("--model custom (implied by --model-bytes alone) needs --model-bytes and "
                       "--compute-time; to resize a preset give --model bert-large or resnet-50")
    work = workload(
        model,
        model_bytes=None if args.model_bytes is None else parse_size(args.model_bytes,
                                                                      "model_bytes"),
        compute_time=None if args.compute_time is None else parse_time(args.compute_time,
                                                                        "compute_time"),
        backward_fraction=None if args.backward_fraction is None else _float(
            args.backward_fraction, "--backward-fraction"))
    if args.param is not None and args.codec is None:
        raise CliError("--param: needs --codec")
    compression = resolve_compression(
        codec=args.codec,
        param=None if args.param is None else _int(args.param, "--param"),
        preset=args.preset,
        rate=None if args.rate is None else _float(args.rate, "--rate"),
        header_overhead=not args.no_header_overhead,
        mtu=_int(args.mtu, "--mtu"))
    host_bw = None if str(args.host_bw).strip().lower() == "auto" else _int(
        args.host_bw, "--host-bw")
    config = ModelConfig(
        work=work, nodes=tuple(nodes),
        gpus_per_node=_int(args.gpus_per_node, "--gpus-per-node"),
        inter_bw=parse_bandwidth(args.inter_bw, "inter_bw"),
        intra_bw=parse_bandwidth(args.intra_bw, "intra_bw"),
        alpha_inter=parse_time(args.alpha, "alpha_inter", default_unit="us"),
        alpha_intra=parse_time(args.alpha_intra, "alpha_intra", default_unit="us"),
        partition_bytes=parse_size(args.partition_bytes, "partition_bytes"),
        compression=compression, host_bw=host_bw,
        gpu_comp_time=None if args.gpu_comp_time is None else parse_time(
            args.gpu_comp_time, "gpu_comp_time"),
        gpu_decomp_time=None if args.gpu_decomp_time is None else parse_time(
            args.gpu_decomp_time, "gpu_decomp_time"),
        ring=args.ring, gpu_contention=not args.no_gpu_contention)
    config.hw()  # validate host_bw and the codec's hardware figures now
    return config


def result_rows(result):
    """Rows (dicts keyed by :data:`COLUMNS`) of a :class:`~.scenario.ModelResult`."""
    return [{
        "nodes": r.nodes, "scheme": r.scheme, "equation": r.equation,
        "compress_on": r.compress_on, "iteration_s": r.iteration_time, "sync_s": r.sync_time,
        "gpu_work_s": r.gpu_work, "exposed_sync_s": r.exposed_sync, "speedup": r.speedup,
        "speedup_vs_gpu": r.speedup_vs_gpu,
    } for r in result.rows]


def result_json(result, rows):
    """The documented JSON object of ``squeezenic-hw model --format json``."""
    cfg, hw, gpu = result.config, result.hw, result.gpu
    c, w = cfg.compression, cfg.work
    return {
        "model": {"name": w.name, "gradient_bytes": w.gradient_bytes,
                  "compute_s": w.compute_time, "backward_fraction": w.backward_fraction,
                  "source": w.source},
        "parameters": {
            "nodes": list(cfg.nodes), "gpus_per_node": cfg.gpus_per_node,
            "inter_bw_Bps": cfg.inter_bw, "intra_bw_Bps": cfg.intra_bw,
            "alpha_inter_s": cfg.alpha_inter, "alpha_intra_s": cfg.alpha_intra,
            "partition_bytes": cfg.partition_bytes, "partitions": result.partitions,
            "ring": cfg.ring, "gpu_contention": cfg.gpu_contention,
        },
        "compression": {"label": c.label, "codec": c.codec, "param": c.param,
                        "bits": c.bits, "rate": c.rate, "rate_source": c.rate_source},
        "hardware": {"host_bw_gbps": hw.host_bw_gbps, "lanes": hw.lanes,
                     "clock_hz": hw.clock_hz, "bytes_per_cycle": hw.bytes_per_cycle,
                     "tx_latency_cycles": hw.tx_latency_cycles,
                     "rx_latency_cycles": hw.rx_latency_cycles,
                     "throughput_Bps": hw.throughput},
        "gpu": {"comp_s": gpu.comp_s_per_byte * w.gradient_bytes,
                "decomp_s": gpu.decomp_s_per_byte * w.gradient_bytes,
                "source": gpu.source},
        "rows": rows,
    }


def _title(result):
    cfg, c, w, hw, gpu = (result.config, result.config.compression, result.config.work,
                          result.hw, result.gpu)
    z = w.gradient_bytes
    return "\n".join([
        f"{w.name}: z = {z / 1e9:.4g} GB per GPU, compute {w.compute_time:g} s per iteration "
        f"(backward share {w.backward_fraction:.3g}), K = {result.partitions} partitions "
        f"of {cfg.partition_bytes / 2**20:.4g} MiB",
        f"{c.label}: r = {c.rate:.4g}; SqueezeNIC host_bw = {hw.host_bw_gbps} Gb/s "
        f"({hw.lanes} lanes), latency TX {hw.tx_latency_cycles} / RX {hw.rx_latency_cycles} "
        f"cycles; GPU {gpu.comp_s_per_byte * z:.4g} s / {gpu.decomp_s_per_byte * z:.4g} s "
        "per gradient (comp / decomp)",
        f"M = {cfg.gpus_per_node} GPUs per node, B = {cfg.inter_bw * 8 / 1e9:.4g} Gb/s, "
        f"V = {cfg.intra_bw / 1e9:.4g} GB/s, alpha = {cfg.alpha_inter * 1e6:.4g} / "
        f"{cfg.alpha_intra * 1e6:.4g} us, ring = {cfg.ring}, "
        f"GPU contention {'on' if cfg.gpu_contention else 'off'}",
        "speedup = no-compression time / time; speedup_vs_gpu = time of the same approach "
        "on GPU / time on SqueezeNIC",
    ])


def run(args):
    from squeezenic_hw.model import evaluate

    try:
        config = build_config(args)
        result = evaluate(config)
    except ValueError as exc:
        raise _option_error(exc) from None
    rows = result_rows(result)
    if args.plot:
        from squeezenic_hw.model.plot import plot_result
        try:
            plot_result(result, args.plot)
        except (OSError, ValueError) as exc:
            raise CliError(f"--plot: cannot write {args.plot!r}: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                           ) from None
    print(render(rows, COLUMNS, args.format, title=_title(result),
                 json_obj=result_json(result, rows)), end="")
    return 0
