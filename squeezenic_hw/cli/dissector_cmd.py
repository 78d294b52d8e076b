"""``squeezenic-hw dissector``: write the Wireshark and tshark dissector of SqueezeNIC
frames, a Lua script made from the spec, and say what was written and how to load it."""

from pathlib import Path

from squeezenic_hw.dissector.lua_script import INSTALL_DIR, PROTO, lua_script
from squeezenic_hw.spec.codecs import DEFAULT_CODECS, codec_info, resolve_codecs
from squeezenic_hw.spec.header import DEFAULT_PORT, check_port

from .options import OptionType, codec_list, integer
from .output import add_format_option, render

NAME = "dissector"
HELP = "write the Wireshark/tshark dissector of SqueezeNIC frames (a Lua script)"
COLUMNS = ["file", "bytes", "what"]


def _port(text):
    return check_port(integer(text))


def add_arguments(parser):
    parser.add_argument("-o", "--output", required=True, metavar="FILE.lua",
                        help=f"the script to write (its folder is made if missing), e.g. "
                             f"{INSTALL_DIR}squeezenic.lua")
    parser.add_argument("--port", type=OptionType("--port", _port), default=DEFAULT_PORT,
                        help=f"default of the script's port preference, the SqueezeNIC UDP "
                             f"port (default {DEFAULT_PORT})")
    parser.add_argument("--codecs", type=OptionType("--codecs", codec_list),
                        help="default of its preference of the codecs built into the NIC, "
                             "comma-separated names or ids (default: 0-6, the hardware's "
                             "default build)")
    add_format_option(parser)
    parser.epilog = (
        f"Install: write it into {INSTALL_DIR} (squeezenic-hw dissector -o "
        f"{INSTALL_DIR}squeezenic.lua), where Wireshark and tshark load every Lua script at "
        f"start; or load it for one run: tshark -X lua_script:squeezenic.lua -r "
        f"FRAMES.pcap. Frames to another port: -o {PROTO}.port:N, or Decode As -d "
        f"udp.port==N,{PROTO}. Its fields, preferences and expert info: docs/wireshark.md.")


def run(args):
    built = DEFAULT_CODECS if args.codecs is None else resolve_codecs(args.codecs)
    text = lua_script(port=args.port, codecs=built)
    path = Path(args.output).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    names = [codec_info(c).name for c in sorted(built)]
    rows = [{"file": str(path), "bytes": path.stat().st_size,
             "what": "Wireshark/tshark Lua dissector of SqueezeNIC frames"}]
    summary = (f"Dissector of SqueezeNIC frames on UDP port {args.port}, codecs "
               f"{','.join(names)} built in (its preferences' defaults).\n"
               f"Install: copy it into {INSTALL_DIR}, or for one run:\n"
               f"  tshark -X lua_script:{path} -r FRAMES.pcap")
    obj = {"files": rows, "port": args.port, "codecs": names, "install_dir": INSTALL_DIR}
    print(render(rows, COLUMNS, args.format, title=summary, json_obj=obj), end="")
    return 0
