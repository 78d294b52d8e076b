"""``squeezenic-hw generate``: write the OpenNIC user plugin (default) or a standalone
U280 Vivado build plan, and say what was written."""

import sys
import time
from pathlib import Path

from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import CliError
from .output import add_format_option, render
from .reference_cmd import parse_codecs

NAME = "generate"
HELP = "write the OpenNIC user plugin (or a standalone U280 build plan) into build/"

TARGETS = ("opennic", "u280")
_DEFAULT_OUT = {"opennic": "build/opennic", "u280": "build/u280"}
_DEFAULT_HOST_BW = {"opennic": 100, "u280": 400}


def add_arguments(parser):
    parser.add_argument("--target", default="opennic", metavar="{opennic,u280}",
                        help="opennic: a user-plugin directory for OpenNIC's "
                             "build.tcl -user_plugin (default); u280: a standalone Vivado "
                             "plan of the loopback design generators → TX → RX → checkers")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="output directory (default build/opennic or build/u280)")
    parser.add_argument("--host-bw", metavar="GBPS",
                        help="host bandwidth in Gb/s, a multiple of 100 up to 6400; above "
                             "100 adds host_bw/100 on-chip generator lanes (generator → TX "
                             "lane → the wire, as the paper's Table 6; default 100 for "
                             "opennic, 400 for u280)")
    parser.add_argument("--num-intf", metavar="N", default="1",
                        help="opennic: NUM_PHYS_FUNC = NUM_CMAC_PORT, 1 or 2 (default 1)")
    parser.add_argument("--codecs", help="comma-separated codec names or ids built into the "
                                         "host-facing lanes (default: every codec, 0-6)")
    parser.add_argument("--gen-codecs", metavar="C,...",
                        help="opennic: codecs of the generator lanes (names, ids or "
                             "name:bits such as fixed:8; default: the Table 6 codec of "
                             "--host-bw, the one whose ratio keeps the wire at 100 Gb/s)")
    parser.add_argument("--loopback", action="store_true",
                        help="opennic: also the RX side of the generator lanes: wire → RX "
                             "lanes → checkers, as many lanes as the wire needs at the "
                             "generator codecs' ratio (docs/arrays.md)")
    parser.add_argument("--mtu", default=str(DEFAULT_MTU), metavar="BYTES",
                        help=f"largest wire frame, 68-9600 (default {DEFAULT_MTU})")
    parser.add_argument("--port", default=str(DEFAULT_PORT),
                        help=f"SqueezeNIC UDP port (default {DEFAULT_PORT}; a register "
                             "can change it at run time)")
    parser.add_argument("--max-host-elements", default=str(DEFAULT_HOST_ELEMENTS),
                        metavar="N", help="largest RX host frame in fp32 elements "
                                          f"(default {DEFAULT_HOST_ELEMENTS})")
    parser.add_argument("--idle-timeout", default="0", metavar="CYCLES",
                        help="close an open wire frame after this many idle cycles, 0 = "
                             "never (reset value of the idle_timeout register; default 0)")
    parser.add_argument("--registers", action="store_true",
                        help="opennic: print the build's register map and write nothing")
    add_format_option(parser, extra=("markdown",))


def _int(args, name):
    text = getattr(args, name.replace("-", "_"))
    try:
        return int(text, 0)
    except ValueError:
        raise CliError(f"--{name}: expected an integer, got {text!r}") from None


def run(args):
    if args.target not in TARGETS:
        raise CliError(f"--target must be one of {', '.join(TARGETS)}, got {args.target!r}")
    host_bw = _DEFAULT_HOST_BW[args.target] if args.host_bw is None else _int(args, "host-bw")
    codecs = parse_codecs(args.codecs)
    values = {name: _int(args, name) for name in ("num-intf", "mtu", "port",
                                                  "max-host-elements", "idle-timeout")}
    out = Path(args.output or _DEFAULT_OUT[args.target])
    start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    if args.target == "opennic":
        from squeezenic_hw.flows.opennic import PLUGIN_FILES, write_opennic_plugin
        from squeezenic_hw.regmap.plugin import PluginParams
        gen_codecs = None
        if args.gen_codecs is not None:
            gen_codecs = [c.strip() for c in args.gen_codecs.split(",") if c.strip()]
        try:
            params = PluginParams(num_intf=values["num-intf"], host_bw=host_bw,
                                  codecs=codecs, mtu=values["mtu"], port=values["port"],
                                  max_host_elements=values["max-host-elements"],
                                  idle_timeout=values["idle-timeout"],
                                  gen_codecs=gen_codecs, loopback=args.loopback)
        except ValueError as exc:
            raise CliError(_option_name(str(exc))) from None
        if args.registers:
            return _print_registers(params, args.format)
        manifest = write_opennic_plugin(out, params, progress=progress)
        rows = [{"file": str(out / rel), "bytes": info["bytes"], "what": info["what"]}
                for rel, info in manifest["files"].items()]
        rows.append({"file": str(out / "manifest.json"),
                     "bytes": (out / "manifest.json").stat().st_size,
                     "what": PLUGIN_FILES["manifest.json"]})
        summary = (f"OpenNIC user plugin for the Alveo U280 in {out}/ "
                   f"({params.num_intf} interface(s), host_bw {params.host_bw} Gb/s, "
                   f"{manifest['registers']['count']} registers).\n"
                   + _lanes_text(manifest["lanes"])
                   + f"Build it with:\n  {manifest['opennic']['build']}")
        obj = {"target": "opennic", "dir": str(out), "files": rows,
               "manifest": manifest}
    else:
        if values["num-intf"] != 1:
            raise CliError("--num-intf applies to --target opennic only")
        if args.gen_codecs is not None or args.loopback:
            raise CliError("--gen-codecs and --loopback apply to --target opennic only")
        from squeezenic_hw.flows.u280 import write_u280_plan
        progress(f"elaborating the U280 loopback design (host_bw {host_bw} Gb/s)")
        try:
            paths = write_u280_plan(out, host_bw=host_bw, codecs=codecs, mtu=values["mtu"],
                                    port=values["port"],
                                    max_host_elements=values["max-host-elements"])
        except ValueError as exc:
            raise CliError(_option_name(str(exc))) from None
        rows = [{"file": str(p), "bytes": Path(p).stat().st_size,
                 "what": _u280_what(Path(p))} for p in paths]
        script = next((Path(p).name for p in paths if str(p).endswith(".sh")), "the .tcl")
        summary = (f"Vivado build plan of the U280 loopback design (generators → TX → RX → "
                   f"checkers, host_bw {host_bw} Gb/s) in {out}/; no Vivado was run. Build "
                   f"it with Vivado on the PATH:\n  cd {out} && sh {script}")
        obj = {"target": "u280", "dir": str(out), "files": rows}
    progress("done")
    if args.format == "markdown":
        raise CliError("--format markdown applies to --registers only")
    if args.format == "table":
        print(render(rows, ["file", "bytes", "what"], "table", title=summary), end="")
    else:
        print(render(rows, ["file", "bytes", "what"], args.format, json_obj=obj), end="")
    return 0


def _lanes_text(lanes):
    """Which lanes carry which codecs, one line per kind."""
    h, g, r = lanes["host"], lanes["generator"], lanes["loopback"]
    text = (f"  host lanes ({h['count']} TX + {h['count']} RX): "
            f"{', '.join(h['tx_codecs'])}\n")
    if g["count"]:
        text += (f"  generator lanes ({g['count']} x generator → TX lane, module "
                 f"{g['module']}): {', '.join(g['codecs'])}\n")
        held = g.get("held")
        if held:
            spec = ", ".join(g["codecs"])
            regs = ["gen_codec"] + (["gen_param"] if held["param"] is not None else [])
            how = ""
            if held["deterministic"]:
                how += ", rounded to nearest"
                regs.append("gen_stochastic")
            if held["pow2_scale"]:
                how += ", with gen_scale rounded down to a power of two"
                regs.append("gen_scale")
            verb = "says" if len(regs) == 1 else "say"
            text += (f"    narrow lanes: the generators always send {spec}{how} "
                     f"(whatever {', '.join(regs)} {verb})\n")
        text += (f"  loopback RX lanes with checkers: {r['count']}"
                 + (f" ({', '.join(r['codecs'])})" if r["count"] else " (TX only; "
                    "--loopback adds them)") + "\n")
    return text


def _print_registers(params, fmt):
    from squeezenic_hw.regmap.plugin import plugin_register_map

    rm = plugin_register_map(params)
    if fmt == "markdown":
        print(rm.to_markdown(), end="")
        return 0
    if fmt == "json":
        print(rm.to_json())
        return 0
    rows = [{"offset": f"0x{r.offset:04x}", "name": r.name, "access": r.access,
             "width": r.width, "reset": r.reset, "group": r.group, "doc": r.doc}
            for r in rm]
    print(render(rows, list(rows[0]), fmt,
                 title=f"{len(rm)} registers, {rm.size:#x} bytes of address space"), end="")
    return 0


def _option_name(message):
    """Turn a parameter name at the start of a ValueError into its option."""
    for param in ("num_intf", "host_bw", "gen_codecs", "codecs", "mtu", "port",
                  "max_host_elements", "idle_timeout", "loopback"):
        if message.startswith(param):
            return "--" + param.replace("_", "-") + message[len(param):]
    return message


def _u280_what(path):
    return {".tcl": "Vivado build script", ".xdc": "constraints", ".v": "generated Verilog",
            ".sh": "runs Vivado in batch mode", ".il": "RTLIL (yosys)"}.get(
        path.suffix, "build file")
