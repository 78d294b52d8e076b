"""``squeezenic-hw reference tx|rx``: run the numpy reference of a lane on a pcap."""

from squeezenic_hw.pcap import write_frames
from squeezenic_hw.reference import lane as lane_reference
from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import CliError
from .input_files import read_pcap
from .options import OptionType, codec_list
from .output import add_format_option, render

NAME = "reference"
HELP = "run the numpy reference TX or RX lane on a pcap of frames"


def add_build_options(parser):
    """The lanes' build parameters, as ``reference``, ``simulate`` and ``fuzz`` take them."""
    parser.add_argument("--mtu", type=int, default=DEFAULT_MTU,
                        help=f"tx: largest wire frame in bytes (default {DEFAULT_MTU})")
    parser.add_argument("--max-host-elements", type=int, default=DEFAULT_HOST_ELEMENTS,
                        help=f"rx: most elements per host frame (default {DEFAULT_HOST_ELEMENTS})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="SqueezeNIC UDP port")


def check_lane_port(port):
    """``--port`` as a lane's build takes it (one line, exit 2 otherwise)."""
    if not 1 <= port < 2**16:
        raise CliError(f"--port must be 1..65535, got {port}")


def add_lane_options(parser):
    """The lane options ``reference`` and ``simulate`` share."""
    add_build_options(parser)
    parser.add_argument("--idle-timeout", type=int, metavar="CYCLES",
                        help="tx: close an open wire frame after this many idle cycles "
                             "(times from the pcap timestamps at 250 MHz; default never)")
    parser.add_argument("--codecs", type=OptionType("--codecs", codec_list),
                        help="comma-separated codec names or ids built in (default: all of "
                             "0-6)")


def add_arguments(parser):
    parser.add_argument("lane", choices=("tx", "rx"))
    parser.add_argument("input", metavar="IN.pcap")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.pcap")
    add_lane_options(parser)
    add_format_option(parser)


def run(args):
    codecs = args.codecs
    if not 0 <= args.port < 2**16:
        raise CliError(f"--port must be 0..65535, got {args.port}")
    frames, cycles = read_pcap(args.input)
    try:
        if args.lane == "tx":
            out, counters = lane_reference.tx(frames, port=args.port, mtu=args.mtu,
                                              codecs=codecs, idle_timeout=args.idle_timeout,
                                              times=cycles)
        else:
            out, counters = lane_reference.rx(frames, port=args.port,
                                              max_host_elements=args.max_host_elements,
                                              codecs=codecs)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    write_frames(args.output, out)
    summary = {"lane": args.lane, "frames_in": len(frames), "frames_out": len(out),
               "bytes_in": sum(map(len, frames)), "bytes_out": sum(map(len, out))}
    rows = [{"name": k, "value": v} for k, v in {**summary, **counters}.items()]
    print(render(rows, ["name", "value"], args.format,
                 json_obj={**summary, "counters": counters}), end="")
    return 0
