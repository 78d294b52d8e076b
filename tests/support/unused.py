# amaranth: UnusedElaboratable=no
"""Elaboratables a test makes and never elaborates: a constructor that must refuse its
parameters, or one built only to read its attributes.

Amaranth warns about an elaboratable that is collected unused. The objects made here
are unused on purpose: this file's first line tells Amaranth so (its linter option),
for them alone."""

import pytest

__all__ = ["rejected", "inspected"]


def rejected(factory, *args, match, **kwargs):
    """``factory(*args, **kwargs)`` raises ``ValueError`` matching ``match``; returns
    pytest's ``ExceptionInfo``."""
    with pytest.raises(ValueError, match=match) as info:
        factory(*args, **kwargs)
    return info


def inspected(factory, *args, **kwargs):
    """``factory(*args, **kwargs)``, for a test that reads its attributes only."""
    return factory(*args, **kwargs)
