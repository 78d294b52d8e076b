"""The plugin's build parameters as options, shared by ``generate`` and ``simulate-plugin``:
``--host-bw``, ``--num-intf``, ``--codecs``, ``--gen-codecs``, ``--loopback``, ``--mtu``,
``--port``, ``--max-host-elements`` and ``--idle-timeout``, turned into a ``PluginParams``
whose complaints name the option."""

from squeezenic_hw.spec.header import DEFAULT_HOST_ELEMENTS, DEFAULT_MTU, DEFAULT_PORT

from . import CliError
from .reference_cmd import parse_codecs

_PARAMS = ("num_intf", "host_bw", "gen_codecs", "codecs", "mtu", "port", "max_host_elements",
           "idle_timeout", "loopback")


def add_plugin_options(parser, *, host_bw_default):
    """Add the build options; ``host_bw_default`` is the help's words for ``--host-bw``'s
    default."""
    parser.add_argument("--host-bw", metavar="GBPS",
                        help="host bandwidth in Gb/s, a multiple of 100 up to 6400; above "
                             "100 adds host_bw/100 on-chip generator lanes (generator → TX "
                             "lane → the wire, as the paper's Table 6; default "
                             f"{host_bw_default})")
    parser.add_argument("--num-intf", metavar="N", default="1",
                        help="NUM_PHYS_FUNC = NUM_CMAC_PORT of OpenNIC, 1 or 2 (default 1)")
    parser.add_argument("--codecs", help="comma-separated codec names or ids built into the "
                                         "host-facing lanes (default: every codec, 0-6)")
    parser.add_argument("--gen-codecs", metavar="C,...",
                        help="codecs of the generator lanes (names, ids or name:bits such "
                             "as fixed:8; default: the Table 6 codec of --host-bw, the one "
                             "whose ratio keeps the wire at 100 Gb/s)")
    parser.add_argument("--loopback", action="store_true",
                        help="also the RX side of the generator lanes: wire → RX lanes → "
                             "checkers, as many lanes as the wire needs at the generator "
                             "codecs' ratio (docs/arrays.md)")
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


def int_option(args, name):
    """The integer value of option ``--name`` (decimal or 0x...)."""
    text = getattr(args, name.replace("-", "_"))
    try:
        return int(text, 0)
    except ValueError:
        raise CliError(f"--{name}: expected an integer, got {text!r}") from None


def option_name(message):
    """Turn a parameter name at the start of a ValueError into its option."""
    for param in _PARAMS:
        if message.startswith(param):
            return "--" + param.replace("_", "-") + message[len(param):]
    return message


def gen_codecs_option(args):
    """``--gen-codecs`` as a list, or ``None``."""
    if args.gen_codecs is None:
        return None
    return [c.strip() for c in args.gen_codecs.split(",") if c.strip()]


def plugin_params(args, host_bw):
    """The ``PluginParams`` of the options (``host_bw`` when ``--host-bw`` is not given)."""
    from squeezenic_hw.build.params import PluginParams

    if args.host_bw is not None:
        host_bw = int_option(args, "host-bw")
    values = {name: int_option(args, name.replace("_", "-"))
              for name in ("num_intf", "mtu", "port", "max_host_elements", "idle_timeout")}
    try:
        return PluginParams(host_bw=host_bw, codecs=parse_codecs(args.codecs),
                            gen_codecs=gen_codecs_option(args), loopback=args.loopback,
                            **values)
    except ValueError as exc:
        raise CliError(option_name(str(exc))) from None
