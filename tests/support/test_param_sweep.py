"""The default suite's share of a parameter sweep (``support.param_sweep.rotated``)."""

from itertools import product

import pytest

from support.param_sweep import grid, rotated, slow_except


@pytest.mark.parametrize("cases,settings", [
    (grid(["a", "b", "c"], [1, 2, 3]), ["x", "y", "z"]),
    ([1, 2, 3, 4], [(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)]),
    ([1518, 200], [0, 1, 2]),
    ([5], ["x", "y"]),
])
def test_every_case_and_setting_by_default_the_rest_slow(cases, settings):
    params = rotated(cases, settings)
    tup = [c if isinstance(c, tuple) else (c,) for c in cases]
    sets = [s if isinstance(s, tuple) else (s,) for s in settings]
    assert sorted(p.values for p in params) == sorted(c + s for c, s in product(tup, sets))
    default = [p.values for p in params if not p.marks]
    assert all(m.name == "slow" for p in params for m in p.marks)
    assert {v[:len(tup[0])] for v in default} == set(tup)          # every case
    assert {v[len(tup[0]):] for v in default} == set(sets)         # every setting
    assert len(default) == max(len(cases), len(settings))


def test_a_grid_turns_the_settings_over_its_last_parameter():
    """cases codec x mtu, three settings: a Latin square, each mtu with every setting."""
    default = [p.values for p in rotated(grid(["s", "f", "h"], [68, 1518, 9600]),
                                         ["x", "y", "z"]) if not p.marks]
    assert {(mtu, st) for _, mtu, st in default} == set(product([68, 1518, 9600], "xyz"))


def test_slow_except_keeps_the_named_values():
    params = slow_except([(0.0, 0.0), (0.3, 0.3), (0.1, 0.7)], 0, 2)
    assert [p.values for p in params if not p.marks] == [(0.0, 0.0), (0.1, 0.7)]
    assert [p.values for p in params if p.marks] == [(0.3, 0.3)]
