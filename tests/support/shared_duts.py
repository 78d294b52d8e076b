"""Designs shared by the tests of a worker that build the same one.

``shared(Factory, *args, **kwargs)`` builds ``Factory(*args, **kwargs)`` once per worker and
keeps its Amaranth simulation set up (:func:`squeezenic_hw.sim.streams.reuse_simulation`):
the next test that asks for the same design resets that simulation instead of setting up
another, which takes longer than many of the tests' runs.

A shared design lives as long as the worker, and its set-up simulation is hundreds of
thousands of objects: the collector's full passes would walk all of them again and again
(in ``tests/gateware/tx`` and ``sparse``, 17.5 s of 300 s, against 2.9 s). So each new one
is frozen out of the collector's reach (``gc.freeze``) once it is set up.
"""

import gc

from squeezenic_hw.sim.streams import reuse_simulation

__all__ = ["shared"]


def _frozen(value):
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


_DESIGNS = {}


def shared(factory, *args, **kwargs):
    """``factory(*args, **kwargs)``, the same object for the same arguments (a new one each
    time when an argument cannot be a key: an array, say)."""
    key = (factory, _frozen(args), _frozen(kwargs))
    try:
        hash(key)
    except TypeError:
        return factory(*args, **kwargs)
    if key not in _DESIGNS:
        _DESIGNS[key] = reuse_simulation(factory(*args, **kwargs))
        gc.collect(1)        # the set-up's young garbage, not frozen with it
        gc.freeze()
    return _DESIGNS[key]
