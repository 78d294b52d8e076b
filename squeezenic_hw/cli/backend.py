"""The options the simulating commands share: ``--backend compiled|amaranth``, the compiled
models' ``--cache-dir`` and the stall probabilities (``--idle``, ``--backpressure``)."""

import sys

from . import CliError

BACKENDS = ("compiled", "amaranth")


def add_backend_option(parser):
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="compiled: a Verilator model, built once and cached in "
                             "build/sim-cache; amaranth: Amaranth's simulator (default: "
                             "compiled where Verilator and a C++ compiler are present)")


def add_cache_dir_option(parser):
    parser.add_argument("--cache-dir", default="build/sim-cache", metavar="DIR",
                        help="where the compiled models are built and cached "
                             "(default build/sim-cache)")


def simulation_backend(command, asked):
    """The backend ``asked`` (``"compiled"``, ``"amaranth"`` or ``None`` for the default):
    compiled where this machine can build it, else Amaranth, saying so in one line on
    stderr. ``--backend compiled`` on a machine without Verilator, or a bad
    ``SQUEEZENIC_HW_CXX_OPT`` when the backend is compiled, is a user error."""
    from squeezenic_hw.sim.compiled import compiled_available

    if asked is not None:
        if asked == "compiled" and not compiled_available():
            raise CliError("--backend compiled needs Verilator and a C++ compiler on PATH")
        return _checked(asked)
    if compiled_available():
        return _checked("compiled")
    print(f"squeezenic-hw {command}: no Verilator or C++ compiler here: simulating on Amaranth",
          file=sys.stderr)
    return "amaranth"


def _checked(backend):
    from squeezenic_hw.sim.compiled import cxx_opt

    if backend == "compiled":
        try:
            cxx_opt()
        except ValueError as exc:
            raise CliError(str(exc)) from None
    return backend


def probability(name, value):
    """``value`` of option ``--name`` when it is a probability of a stall, in [0, 1)."""
    if not 0.0 <= value < 1.0:
        raise CliError(f"--{name} must be in [0, 1), got {value}")
    return value
