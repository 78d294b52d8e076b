"""``squeezenic-hw tensor``: gather decoded host frames back into a float32 tensor."""

import numpy as np

from squeezenic_hw.spec.codecs import THRESHOLD_ID
from squeezenic_hw.spec.frames import BypassReason, classify_host_frame
from squeezenic_hw.spec.header import DEFAULT_PORT, HEADER_LEN

from . import CliError
from .input_files import read_pcap
from .output import add_format_option, render

NAME = "tensor"
HELP = "gather decoded SqueezeNIC host frames (encoded = 0) into a float32 tensor (.npy)"
COLUMNS = ["frames", "ignored", "elements", "first_offset", "gaps", "missing"]


def add_arguments(parser):
    parser.add_argument("input", metavar="HOST.pcap")
    parser.add_argument("-o", "--output", required=True, metavar="TENSOR.npy")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="SqueezeNIC UDP port")
    parser.add_argument("--allow-gaps", action="store_true",
                        help="zero-fill missing elements instead of failing (overlaps "
                             "still fail)")
    add_format_option(parser)


def gather(frames, *, port=DEFAULT_PORT, allow_gaps=False):
    """``(tensor, stats)`` from host frames; frames that are not host frames are ignored."""
    all_codecs = range(256)
    parts, ignored = [], 0
    for f in frames:
        h, reason = classify_host_frame(f, port=port, codecs_built_in=all_codecs)
        # RX keeps the wire header's parameter: a decoded threshold frame says its layout
        if reason is BypassReason.PARAM and h.codec == THRESHOLD_ID:
            reason = None
        if reason is not None:
            ignored += 1
            continue
        parts.append((h.offset, np.frombuffer(f, dtype="<u4", count=h.n, offset=HEADER_LEN)))
    if not parts:
        raise CliError("no decoded SqueezeNIC host frames in the input")
    parts.sort(key=lambda p: p[0])
    starts = np.array([p[0] for p in parts], dtype=np.int64)
    ends = starts + np.array([p[1].size for p in parts], dtype=np.int64)
    if np.any(starts[1:] < ends[:-1]):
        i = int(np.argmax(starts[1:] < ends[:-1]))
        raise CliError(f"frames overlap: offsets {starts[i]}..{ends[i] - 1} and "
                       f"{starts[i + 1]}..{ends[i + 1] - 1}")
    gaps = int(np.count_nonzero(starts[1:] > ends[:-1]))
    missing = int(np.sum(starts[1:] - ends[:-1]))
    if gaps and not allow_gaps:
        i = int(np.argmax(starts[1:] > ends[:-1]))
        raise CliError(f"{gaps} gap(s), {missing} element(s) missing, first at offset "
                       f"{ends[i]} (use --allow-gaps to zero-fill)")
    first = int(starts[0])
    out = np.zeros(int(ends[-1]) - first, dtype=np.uint32)
    for start, words in parts:
        out[start - first:start - first + words.size] = words
    stats = {"frames": len(parts), "ignored": ignored, "elements": int(out.size),
             "first_offset": first, "gaps": gaps, "missing": missing}
    return out.view(np.float32), stats


def run(args):
    frames, _ = read_pcap(args.input)
    tensor, stats = gather(frames, port=args.port, allow_gaps=args.allow_gaps)
    np.save(args.output, tensor)
    print(render([stats], COLUMNS, args.format, json_obj=stats), end="")
    return 0
