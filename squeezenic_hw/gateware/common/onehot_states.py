"""A state machine whose states are one flip-flop each.

Amaranth's ``m.FSM`` encodes its state in binary, so every ``ongoing`` is a compare of
the state bits: one LUT before any logic that reads it. A controller whose handshake
reads its state on the path from an output's ready to an input's is a LUT shorter with
one flip-flop per state, each read directly.
"""

from contextlib import contextmanager

from amaranth import Signal

__all__ = ["OneHotStates"]


class OneHotStates:
    """States ``names`` of a machine in module ``m``, the first the initial one, as one
    flip-flop each (reset to the initial state).

    ``with states.state(name):`` is the logic of a state (an ``If`` on its flip-flop);
    inside it ``states.goto(other)`` moves to ``other`` from the next cycle. At most one
    ``goto`` may take effect in a cycle: the flip-flops of the two states change, the
    others hold.

    Parameters
    ----------
    m : Module
    names : sequence of str
        The states, the initial one first; at least two, no repeats.
    name : str
        Prefix of the flip-flops' names (``<name>_<state>``, lower case).
    """

    def __init__(self, m, names, *, name):
        names = list(names)
        if len(names) < 2 or len(set(names)) != len(names) \
                or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"names must be two or more distinct non-empty strings, "
                             f"got {names!r}")
        self._m = m
        self._regs = {n: Signal(init=(k == 0), name=f"{name}_{n.lower()}")
                      for k, n in enumerate(names)}
        self._current = None

    def ongoing(self, name):
        """The flip-flop of state ``name``: high while the machine is in it."""
        return self._regs[name]

    @contextmanager
    def state(self, name):
        """The logic of state ``name``, in an ``If`` on its flip-flop."""
        if name not in self._regs:
            raise ValueError(f"no state {name!r}")
        if self._current is not None:
            raise ValueError(f"state {name!r} inside state {self._current!r}")
        with self._m.If(self._regs[name]):
            self._current = name
            try:
                yield
            finally:
                self._current = None

    def goto(self, name):
        """Move from the current state to ``name`` at the next clock edge (within
        :meth:`state`)."""
        if self._current is None:
            raise ValueError("goto outside a state")
        if name not in self._regs:
            raise ValueError(f"no state {name!r}")
        if name != self._current:
            self._m.d.sync += [self._regs[self._current].eq(0), self._regs[name].eq(1)]
