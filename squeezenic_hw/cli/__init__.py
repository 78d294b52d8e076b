"""The ``squeezenic-hw`` command line.

Each command is a module of this package with ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; add it to ``COMMANDS``.

Exit status (the ``EXIT_STATUS`` text of ``--help``):

* 0 — done; every check the command makes passed.
* 1 — done, but a check failed: the hardware disagreed with the reference, or a
  synthesis run failed (the command says which and where its log is).
* 2 — a user error: a bad option or parameter (:class:`CliError`, also from an
  option's ``type=`` callable, :mod:`~.options`, or a ``ValueError`` from the library
  naming the parameter), or an input file that is missing, unreadable
  or not what the command reads (``OSError``). One line on stderr, no traceback.
* 130 — interrupted.
"""

import argparse
import gc
import importlib
import sys
import warnings

from amaranth.hdl import UnusedElaboratable

from squeezenic_hw import __version__

COMMANDS = [
    "codecs_cmd",
    "model_cmd",
    "frames_cmd",
    "reference_cmd",
    "simulate_cmd",
    "simulate_plugin_cmd",
    "fuzz_cmd",
    "tensor_cmd",
    "throughput_cmd",
    "generate_cmd",
    "report_cmd",
    "allreduce_cmd",
    "dissector_cmd",
]


EXIT_STATUS = ("exit status: 0 done and every check passed; 1 a check failed (hardware vs "
               "reference, synthesis); 2 a user error (bad option or parameter, missing or "
               "unreadable input file); 130 interrupted")


class CliError(Exception):
    """A user error: printed as one line on stderr, exit status 2."""


def build_parser():
    parser = argparse.ArgumentParser(
        prog="squeezenic-hw",
        description="Hardware generators, simulation and reports for the SqueezeNIC "
                    "in-NIC gradient-compression FPGA NIC.",
        epilog=EXIT_STATUS)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = importlib.import_module(f".{name}", __name__)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.epilog = f"{p.epilog} {EXIT_STATUS}" if p.epilog else EXIT_STATUS
        p.set_defaults(_run=mod.run)
    return parser


def _user_error(command, exc):
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        exc = f"{exc.filename}: {exc.strerror}"      # not Python's "[Errno 2] …: 'name'"
    message = " ".join(str(exc).split())
    print(f"squeezenic-hw {command}: error: {message}", file=sys.stderr)
    return 2


def main(argv=None):
    parser = build_parser()
    args = argparse.Namespace()
    try:
        parser.parse_args(argv, args)
    except CliError as exc:          # an option's type= callable (cli.options) refused it
        return _user_error(args.command, exc)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    # A component that rejects its parameters is never elaborated; the user should see
    # the one-line error, not Amaranth's warning about the half-built object.
    warnings.filterwarnings("ignore", category=UnusedElaboratable)
    try:
        return args._run(args) or 0
    except (CliError, ValueError, OSError) as exc:
        return _user_error(args.command, exc)
    except KeyboardInterrupt:
        print(f"squeezenic-hw {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        # the command's half-built components held in reference cycles are collected now,
        # under that filter, not later by a caller that runs main() in its own process
        gc.collect()
