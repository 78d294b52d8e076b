"""Parameter sweeps that keep the default suite short: every case of the sweep's main
parameters runs by default with one setting of the others (taken in turn, so each setting
runs too), and the rest of the full product runs under ``-m slow``."""

from itertools import product

import pytest

__all__ = ["grid", "rotated", "slow_except"]


def _values(v):
    """A case or setting as the tuple of its parameters' values."""
    return v if isinstance(v, tuple) else (v,)


def rotated(cases, settings):
    """``pytest.param`` values for ``parametrize``: each of ``cases`` (tuples, or single
    values) with each of ``settings`` (tuples, or single values); by default ``cases[k]``
    with ``settings[(k + k // n) mod n]``, n = ``len(settings)`` (so when ``cases`` is a
    :func:`grid` whose last parameter has n values, the settings also turn over that
    parameter's values; with fewer cases than settings, the settings left over go to the
    cases in turn), the other pairs marked ``slow``."""
    n = len(settings)
    chosen = {(k, (k + k // n) % n) for k in range(len(cases))}
    # fewer cases than settings: the settings left over go to the cases in turn
    chosen |= {(j % len(cases), j) for j in range(len(cases), n)}
    return [pytest.param(*_values(case), *_values(setting),
                         marks=() if (k, j) in chosen else (pytest.mark.slow,))
            for k, case in enumerate(cases) for j, setting in enumerate(settings)]


def grid(*values):
    """The product of ``values`` as a list of tuples (for :func:`rotated`'s cases)."""
    return list(product(*values))


def slow_except(values, *keep):
    """``pytest.param`` values for ``parametrize``: ``values[k]`` for each index ``k`` of
    ``keep`` by default, the others marked ``slow``."""
    return [pytest.param(*_values(v), marks=() if k in keep else (pytest.mark.slow,))
            for k, v in enumerate(values)]
