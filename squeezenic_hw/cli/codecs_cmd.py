"""``squeezenic-hw codecs``: the codec set and the presets."""

from squeezenic_hw.spec.codecs import ALL_CODECS, PRESETS, codec_info

from .output import add_format_option, render

NAME = "codecs"
HELP = "list every codec and preset: id, bits per element, ratio, scale/aux meaning"

COLUMNS = ["name", "kind", "codec", "id", "param", "bits", "ratio", "stochastic",
           "scale", "aux", "summary"]


def add_arguments(parser):
    add_format_option(parser)
    parser.epilog = (
        "JSON: a list of objects with keys " + ", ".join(COLUMNS) + ". For fixed/qsgd "
        "`param` is the range 'lo..hi' and `bits`/`ratio` are given for the smallest and "
        "largest parameter as 'lo..hi' strings in table/CSV and as [lo, hi] in JSON. "
        "threshold (sparse) has `bits` and `ratio` 'variable' (null in JSON): its size "
        "depends on how many elements are kept; `param` is its wire layout 0..1.")


def rows(*, json_types=False):
    out = []
    for c in ALL_CODECS.values():
        if c.variable:
            bits = ratio = None if json_types else "variable"
            param = list(c.param_range) if json_types else "0..1 (wire layout)"
        elif c.param_range:
            lo, hi = c.param_range
            bits = [lo, hi] if json_types else f"{lo}..{hi}"
            ratio = [32 / hi, 32 / lo] if json_types else f"{32 / hi:g}..{32 / lo:g}"
            param = [lo, hi] if json_types else f"{lo}..{hi}"
        else:
            bits, ratio, param = c.bits, c.ratio(), None
        out.append({"name": c.name, "kind": "codec", "codec": c.name, "id": c.id,
                    "param": param, "bits": bits, "ratio": ratio,
                    "stochastic": "optional" if c.stochastic else "no",
                    "scale": c.scale, "aux": c.aux, "summary": c.summary})
    for p in PRESETS.values():
        info = codec_info(p.codec)
        out.append({"name": p.name, "kind": "preset", "codec": p.codec, "id": info.id,
                    "param": p.param or None, "bits": info.bits_per_element(p.param or None),
                    "ratio": info.ratio(p.param or None),
                    "stochastic": "yes" if p.stochastic else "no",
                    "scale": p.scale, "aux": p.aux, "summary": p.summary})
    return out


def run(args):
    data = rows(json_types=args.format == "json")
    columns = COLUMNS if args.format != "table" else COLUMNS[:-1]
    print(render(data, columns, args.format), end="")
    return 0
