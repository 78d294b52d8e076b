"""``squeezenic-hw generate``: write the OpenNIC user plugin (default) or a standalone
U280 Vivado build plan, and say what was written."""

import sys
import time
from pathlib import Path

from . import CliError
from .options import OptionType
from .output import add_format_option, render
from .plugin_options import add_plugin_options, option_name, plugin_params

NAME = "generate"
HELP = "write the OpenNIC user plugin (or a standalone U280 build plan) into build/"

TARGETS = ("opennic", "u280")
_DEFAULT_OUT = {"opennic": "build/opennic", "u280": "build/u280"}
_DEFAULT_HOST_BW = {"opennic": 100, "u280": 400}


def add_arguments(parser):
    parser.add_argument("--target", default="opennic", metavar="{opennic,u280}",
                        type=OptionType("--target", _target),
                        help="opennic: a user-plugin directory for OpenNIC's "
                             "build.tcl -user_plugin (default); u280: a standalone Vivado "
                             "plan of the loopback design generators → TX → RX → checkers")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="output directory (default build/opennic or build/u280)")
    add_plugin_options(parser, host_bw_default="100 for opennic, 400 for u280")
    parser.add_argument("--registers", action="store_true",
                        help="opennic: print the build's register map and write nothing")
    add_format_option(parser, extra=("markdown",))


def _target(text):
    if text not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {text!r}")
    return text


def run(args):
    host_bw = _DEFAULT_HOST_BW[args.target]
    out = Path(args.output or _DEFAULT_OUT[args.target])
    start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    if args.target == "opennic":
        from squeezenic_hw.flows.opennic import PLUGIN_FILES, write_opennic_plugin
        params = plugin_params(args, host_bw)
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
                   + "Build it, in the script/ folder of an open-nic-shell checkout, with:\n"
                   + f"  {manifest['opennic']['build']}")
        obj = {"target": "opennic", "dir": str(out), "files": rows,
               "manifest": manifest}
    else:
        if args.num_intf != 1:
            raise CliError("--num-intf applies to --target opennic only")
        if args.gen_codecs is not None or args.loopback or args.reduce:
            raise CliError("--gen-codecs, --loopback and --reduce apply to --target opennic "
                           "only")
        params = plugin_params(args, host_bw)       # checked as for opennic
        host_bw = params.host_bw
        from squeezenic_hw.flows.u280 import write_u280_plan
        progress(f"elaborating the U280 loopback design (host_bw {host_bw} Gb/s)")
        try:
            paths = write_u280_plan(out, host_bw=host_bw, codecs=args.codecs, mtu=params.mtu,
                                    port=params.port,
                                    max_host_elements=params.max_host_elements)
        except ValueError as exc:
            raise CliError(option_name(str(exc))) from None
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
        held, regs = g["held"], g["held_registers"]
        if held:
            spec = ", ".join(g["codecs"])
            how = ((", rounded to nearest" if held["deterministic"] else "")
                   + (", with gen_scale rounded down to a power of two"
                      if held["pow2_scale"] else ""))
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


def _u280_what(path):
    return {".tcl": "Vivado build script", ".xdc": "constraints", ".v": "generated Verilog",
            ".sh": "runs Vivado in batch mode", ".il": "RTLIL (yosys)"}.get(
        path.suffix, "build file")
