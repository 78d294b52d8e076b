"""``squeezenic-hw frames``: cut a float32 tensor into SqueezeNIC host frames (a pcap)."""

import sys

import numpy as np

from squeezenic_hw.pcap import write_frames
from squeezenic_hw.spec.codecs import (
    PRESETS,
    codec_info,
    f32_bits,
    level_scale,
    preset_params,
    validate_param,
)
from squeezenic_hw.spec.frames import Header, build_host_frame
from squeezenic_hw.spec.header import (
    DEFAULT_HOST_ELEMENTS,
    DEFAULT_PORT,
    FLAG_FLUSH,
    FLAG_STOCHASTIC,
    HEADER_LEN,
    MAX_PKT_LEN,
)

from . import CliError
from .input_files import read_tensor
from .options import OptionType, codec_or_preset, option_message
from .output import add_format_option, render

NAME = "frames"
HELP = "cut a float32 tensor (.npy) into SqueezeNIC host frames (.pcap)"
COLUMNS = ["frames", "elements", "bytes", "codec", "param", "stochastic", "scale", "aux",
           "seed", "offset"]
MAX_ELEMENTS = (MAX_PKT_LEN - HEADER_LEN) // 4


def add_arguments(parser):
    parser.add_argument("tensor", metavar="TENSOR.npy", help="float32 tensor, any shape")
    parser.add_argument("--codec", required=True, type=OptionType("--codec", codec_or_preset),
                        help="codec name or id, or a preset (" + ", ".join(PRESETS) + ")")
    parser.add_argument("--param", type=int, help="codec parameter (fixed/qsgd: 2..16)")
    parser.add_argument("--scale", type=float, help="header scale (default 1.0; fixed/qsgd: "
                        "(2^(b-1)-1)/max|x|, said on stderr; presets derive it; threshold "
                        "keeps abs(x) > scale)")
    parser.add_argument("--keep-fraction", type=float, metavar="F",
                        help="threshold only: set scale so that about this fraction (0..1) of "
                        "the finite elements is kept")
    parser.add_argument("--aux", type=float, help="header aux (default 1.0; fixed/qsgd: 1/scale "
                        "when scale is derived; presets derive it)")
    parser.add_argument("--seed", type=int, default=0, help="uint32 seed (default 0)")
    parser.add_argument("--stochastic", action="store_true", help="set the stochastic flag")
    parser.add_argument("--elements-per-frame", type=int, default=DEFAULT_HOST_ELEMENTS,
                        metavar="K", help=f"elements per host frame, 1..{MAX_ELEMENTS} "
                        f"(default {DEFAULT_HOST_ELEMENTS})")
    parser.add_argument("--offset", type=int, default=0, help="tensor index of element 0")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="UDP destination port")
    parser.add_argument("-o", "--output", required=True, metavar="HOST.pcap")
    add_format_option(parser)


def resolve_codec(args, tensor):
    """``dict(codec id, param, stochastic, scale bits, aux bits)`` from the options."""
    if args.codec in PRESETS:
        if args.param is not None:
            raise CliError(f"--param: preset {args.codec!r} fixes the codec parameter")
        p = preset_params(args.codec, tensor, scale=args.scale, aux=args.aux)
        info = codec_info(p["codec"])
        return {"codec": info, "param": p["param"],
                "stochastic": p["stochastic"] or args.stochastic,
                "scale": p["scale"], "aux": p["aux"], "notes": []}
    try:
        info = codec_info(int(args.codec) if args.codec.isdigit() else args.codec)
        if info.variable:
            # the wire layout is the encoder's choice: host frames carry 0
            if args.param not in (None, 0):
                raise CliError(f"--param: codec {info.name!r} takes no parameter on host "
                               f"frames (the layout is chosen per wire frame)")
            param = 0
        elif info.param_range and args.param is None:
            lo, hi = info.param_range
            raise CliError(f"--param: codec {info.name!r} needs one: its bits per element, "
                           f"from {lo} to {hi} (--param 8, say)")
        else:
            param = validate_param(info.name,
                                   args.param if info.param_range else (args.param or 0))
    except ValueError as exc:
        raise CliError(option_message("--param", str(exc))) from None
    scale = np.float32(1.0 if args.scale is None else args.scale)
    keep_fraction = getattr(args, "keep_fraction", None)   # a frames option only
    if keep_fraction is not None:
        if not info.variable:
            raise CliError("--keep-fraction: only for the threshold codec")
        if args.scale is not None:
            raise CliError("--keep-fraction and --scale: give one of them")
        if not 0 <= keep_fraction <= 1:
            raise CliError(f"--keep-fraction must be from 0 to 1, got {keep_fraction}")
        scale = threshold_for_fraction(tensor, keep_fraction)
    aux = np.float32(1.0 if args.aux is None else args.aux)
    notes = []
    if info.name in ("fixed", "qsgd"):
        scale, aux, notes = _level_scale(tensor, param, args.scale, args.aux, scale, aux)
    return {"codec": info, "param": param, "stochastic": args.stochastic,
            "scale": scale, "aux": aux, "notes": notes}


def _level_scale(tensor, param, given_scale, given_aux, scale, aux):
    """``fixed``/``qsgd``: ``(scale, aux, notes)``. Without ``--scale``, the largest level
    at the tensor's largest finite magnitude (``aux`` that magnitude over the level unless
    given), as the ``int8`` preset (:func:`~squeezenic_hw.spec.codecs.level_scale`): a
    1e-3-sized gradient would otherwise decode to zeros. With it, a warning when most
    elements quantise to zero or clamp."""
    levels = 2 ** (param - 1) - 1
    if given_scale is None:
        scale, derived_aux = level_scale(tensor, levels)
        aux = derived_aux if given_aux is None else aux
        return scale, aux, [f"scale {float(scale):.6g} and aux {float(aux):.6g} derived from "
                            "the tensor's largest magnitude (give --scale and --aux to set "
                            "them)"]
    finite = np.abs(tensor[np.isfinite(tensor)]).astype(np.float64)
    nonzero = finite[finite > 0]
    y = nonzero * float(scale)
    notes = []
    if nonzero.size and np.mean(y < 0.5) > 0.5:
        notes.append(f"warning: {np.mean(y < 0.5):.0%} of the non-zero elements quantise "
                     f"to 0 at scale {float(scale):g}")
    if nonzero.size and np.mean(y > levels + 0.5) > 0.5:
        notes.append(f"warning: {np.mean(y > levels + 0.5):.0%} of the non-zero elements "
                     f"clamp to ±{levels} at scale {float(scale):g}")
    return scale, aux, notes


def threshold_for_fraction(tensor, fraction):
    """The largest fp32 scale with ``abs(x) > scale`` for at least ``fraction`` of the finite
    elements (``+inf`` keeps nothing when the fraction is 0)."""
    a = np.sort(np.abs(tensor[np.isfinite(tensor)]).astype(np.float32))[::-1]
    want = int(np.ceil(fraction * a.size))
    if want == 0 or a.size == 0:
        return np.float32(np.inf)
    # just below the want-th largest magnitude, so that it (and all above) are kept
    return np.nextafter(a[want - 1], np.float32(-np.inf), dtype=np.float32)


def run(args):
    k = args.elements_per_frame
    if not 1 <= k <= MAX_ELEMENTS:
        raise CliError(f"--elements-per-frame must be from 1 to {MAX_ELEMENTS} "
                       f"(a host frame is at most {MAX_PKT_LEN} bytes), got {k}")
    if not 0 <= args.seed < 2**32:
        raise CliError(f"--seed must be a uint32, got {args.seed}")
    if not 0 <= args.port < 2**16:
        raise CliError(f"--port must be 0..65535, got {args.port}")
    tensor = read_tensor(args.tensor)
    if tensor.size == 0:
        raise CliError(f"{args.tensor}: tensor is empty")
    if not 0 <= args.offset or args.offset + tensor.size > 2**32:
        raise CliError(f"--offset {args.offset}: the tensor's indices must fit uint32")
    c = resolve_codec(args, tensor)
    for note in c["notes"]:
        print(f"squeezenic-hw frames: {note}", file=sys.stderr)
    base = Header(dst_port=args.port, codec=c["codec"].id, param=c["param"],
                  scale_bits=f32_bits(c["scale"]), aux_bits=f32_bits(c["aux"]), seed=args.seed)
    frames = []
    for start in range(0, tensor.size, k):
        last = start + k >= tensor.size
        flags = (FLAG_STOCHASTIC if c["stochastic"] else 0) | (FLAG_FLUSH if last else 0)
        h = Header(**{**base.__dict__, "flags": flags, "offset": args.offset + start})
        frames.append(build_host_frame(h, tensor[start:start + k]))
    write_frames(args.output, frames)
    row = {"frames": len(frames), "elements": int(tensor.size),
           "bytes": sum(len(f) for f in frames), "codec": c["codec"].name,
           "param": c["param"], "stochastic": bool(c["stochastic"]),
           "scale": float(c["scale"]), "aux": float(c["aux"]), "seed": args.seed,
           "offset": args.offset}
    print(render([row], COLUMNS, args.format, json_obj=row), end="")
    return 0
