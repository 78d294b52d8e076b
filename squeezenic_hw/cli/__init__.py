"""The ``squeezenic-hw`` command line.

Each command is a module of this package with ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; add it to ``COMMANDS``.
Errors the user can fix raise :class:`CliError`: one line on stderr, exit 2.
"""

import argparse
import importlib
import sys

from squeezenic_hw import __version__

COMMANDS = [
    "codecs_cmd",
    "model_cmd",
    "frames_cmd",
    "reference_cmd",
    "simulate_cmd",
    "tensor_cmd",
    "throughput_cmd",
    "generate_cmd",
    "report_cmd",
]


class CliError(Exception):
    """A user error: printed as one line on stderr, exit status 2."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="squeezenic-hw",
        description="Hardware generators, simulation and reports for the SqueezeNIC "
                    "in-NIC gradient-compression FPGA NIC.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = importlib.import_module(f".{name}", __name__)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args._run(args) or 0
    except CliError as exc:
        print(f"squeezenic-hw {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"squeezenic-hw {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"squeezenic-hw {args.command}: interrupted", file=sys.stderr)
        return 130
