"""The helpers of ``support.unused``: an elaboratable made unused on purpose, and the parts
its constructor made, go without Amaranth's warning; one made elsewhere still warns."""

import gc
import warnings

from amaranth.hdl import Elaboratable, Module, UnusedElaboratable

from support.unused import inspected, rejected


class _Part(Elaboratable):
    def elaborate(self, platform):
        return Module()


class _Whole(Elaboratable):
    """Makes its parts in its constructor, here, where no linter option silences them (as a
    lane makes its classifier in the lane's module); ``refuse`` raises after the first."""

    def __init__(self, refuse=False):
        self.part = _Part()
        self.more = [_Part(), {"deep": _Part()}]
        if refuse:
            raise ValueError("refuse: refused")

    def elaborate(self, platform):
        return Module()


def _warnings_of(make):
    """The ``UnusedElaboratable`` warnings of ``make()``, with the warning switched on
    (Amaranth keeps it off in a process until the first elaboration)."""
    silenced = UnusedElaboratable.__dict__.get("_MustUse__silence")
    UnusedElaboratable._MustUse__silence = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnusedElaboratable)
            make()
            gc.collect()
    finally:
        if silenced is None:
            del UnusedElaboratable._MustUse__silence
        else:
            UnusedElaboratable._MustUse__silence = silenced
    return [w for w in caught if issubclass(w.category, UnusedElaboratable)]


def test_an_inspected_component_and_its_parts_do_not_warn():
    assert not _warnings_of(lambda: inspected(_Whole).part)


def test_a_rejected_component_and_the_parts_it_had_made_do_not_warn():
    assert not _warnings_of(lambda: rejected(_Whole, refuse=True, match="refuse"))


def test_made_outside_the_helpers_they_warn():
    """The check above can fail: without the helpers the whole and its four parts warn."""
    def made_here():
        _Whole()

    assert len(_warnings_of(made_here)) == 4
