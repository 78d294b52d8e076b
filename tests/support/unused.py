# amaranth: UnusedElaboratable=no
"""Elaboratables a test makes and never elaborates: a constructor that must refuse its
parameters, or one built only to read its attributes.

Amaranth warns about an elaboratable that is collected unused. The objects made here
are unused on purpose: this file's first line tells Amaranth so (its linter option),
for them alone. The parts a constructor makes of its own (a lane's classifier, made in
the lane's module, where no such option holds) are unused with it: the helpers mark
them, the ones a rejected constructor had made before it refused found through the
exception's frames."""

import pytest
from amaranth.hdl import Elaboratable

__all__ = ["rejected", "inspected"]


def _unused_on_purpose(value, seen):
    """Mark the elaboratables in ``value`` (its attributes, and lists, tuples and dicts of
    them, followed down) as unused on purpose."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Elaboratable):
        value._MustUse__silence = True
        children = list(getattr(value, "__dict__", {}).values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = list(value)
    elif isinstance(value, dict):
        children = list(value.values())
    else:
        return
    for child in children:
        _unused_on_purpose(child, seen)


def rejected(factory, *args, match, **kwargs):
    """``factory(*args, **kwargs)`` raises ``ValueError`` matching ``match``; returns
    pytest's ``ExceptionInfo``."""
    with pytest.raises(ValueError, match=match) as info:
        factory(*args, **kwargs)
    seen = set()
    tb = info.tb
    while tb is not None:
        _unused_on_purpose(list(tb.tb_frame.f_locals.values()), seen)
        tb = tb.tb_next
    return info


def inspected(factory, *args, **kwargs):
    """``factory(*args, **kwargs)``, for a test that reads its attributes only."""
    made = factory(*args, **kwargs)
    _unused_on_purpose(made, set())
    return made
