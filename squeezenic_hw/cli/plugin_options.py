"""The plugin's build parameters as options, shared by ``generate`` and ``simulate-plugin``:
``--host-bw``, ``--num-intf``, ``--codecs``, ``--gen-codecs``, ``--loopback``, ``--mtu``,
``--port``, ``--max-host-elements``, ``--idle-timeout`` and ``--reduce``, turned into a
``PluginParams``
whose complaints name the option."""

from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import CliError
from .options import OptionType, codec_list, codec_spec_list, integer, option_message

_PARAMS = ("num_intf", "host_bw", "gen_codecs", "codecs", "mtu", "port", "max_host_elements",
           "idle_timeout", "loopback", "reduce")


def add_plugin_options(parser, *, host_bw_default):
    """Add the build options; ``host_bw_default`` is the help's words for ``--host-bw``'s
    default."""
    def add(option, convert, **kwargs):
        parser.add_argument(option, type=OptionType(option, convert), **kwargs)

    add("--host-bw", integer, metavar="GBPS",
        help="host bandwidth in Gb/s, a multiple of 100 up to 6400; above 100 adds "
             "host_bw/100 on-chip generator lanes (generator → TX lane → the wire, as the "
             f"paper's Table 6; default {host_bw_default})")
    add("--num-intf", integer, metavar="N", default=1,
        help="NUM_PHYS_FUNC = NUM_CMAC_PORT of OpenNIC, 1 or 2 (default 1)")
    add("--codecs", codec_list, help="comma-separated codec names or ids built into the "
                                     "host-facing lanes (default: every codec, 0-6)")
    add("--gen-codecs", codec_spec_list, metavar="C,...",
        help="codecs of the generator lanes (names, ids or name:bits such as fixed:8; "
             "default: the Table 6 codec of --host-bw, the one whose ratio keeps the wire "
             "at 100 Gb/s)")
    parser.add_argument("--loopback", action="store_true",
                        help="also the RX side of the generator lanes: wire → RX lanes → "
                             "checkers, as many lanes as the wire needs at the generator "
                             "codecs' ratio (docs/arrays.md)")
    add("--mtu", integer, default=DEFAULT_MTU, metavar="BYTES",
        help=f"largest wire frame, 68-9600 (default {DEFAULT_MTU})")
    add("--port", integer, default=DEFAULT_PORT,
        help=f"SqueezeNIC UDP port (default {DEFAULT_PORT}; a register can change it at "
             "run time)")
    add("--max-host-elements", integer, default=DEFAULT_HOST_ELEMENTS, metavar="N",
        help=f"largest RX host frame in fp32 elements (default {DEFAULT_HOST_ELEMENTS})")
    add("--reduce", codec_spec_list, metavar="C,...", default=(),
        help="build the reduce lane of the ring all-reduce on interface 0 for these integer "
             "codecs (fixed, qsgd, sign; fixed:8 builds 8-bit codes only), its registers at "
             "0x0400 (docs/wire-format.md section 8; default: none)")
    add("--idle-timeout", integer, default=0, metavar="CYCLES",
        help="close an open wire frame after this many idle cycles, 0 = never (reset "
             "value of the idle_timeout register; default 0)")


def option_name(message):
    """Turn a parameter name at the start of a ValueError into its option."""
    for param in _PARAMS:
        if message.startswith(param):
            return option_message("--" + param.replace("_", "-"), message)
    return message


def plugin_params(args, host_bw):
    """The ``PluginParams`` of the options (``host_bw`` when ``--host-bw`` is not given)."""
    from squeezenic_hw.build.params import PluginParams

    try:
        return PluginParams(host_bw=host_bw if args.host_bw is None else args.host_bw,
                            num_intf=args.num_intf, codecs=args.codecs,
                            gen_codecs=args.gen_codecs, loopback=args.loopback,
                            mtu=args.mtu, port=args.port,
                            max_host_elements=args.max_host_elements,
                            idle_timeout=args.idle_timeout, reduce=args.reduce)
    except ValueError as exc:
        raise CliError(option_name(str(exc))) from None
