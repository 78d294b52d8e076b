"""Fixtures of the whole suite."""

import os

import pytest


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    """One build cache of compiled models for the session, shared by the xdist workers (the
    parent of each worker's base directory): a model is built once, whichever test asks
    first (a second asker waits for the build, ``sim.compiled``'s lock)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "sim-cache"
