"""Fixtures of the whole suite."""

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest

from squeezenic_hw.locks import exclusive
from squeezenic_hw.sim.compiled import OPT_VARIABLE

# After a failing property test, hypothesis imports libcst to suggest an @example, and
# libcst's import warns (mypy_extensions.TypedDict is deprecated): under -W error that
# warning would replace the failure's report with a crash of the xdist worker. So libcst is
# imported once here, its warning ignored.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import libcst.metadata  # noqa: F401
    except ImportError:           # hypothesis then suggests no @example
        pass

# Compiled models at -O0: they build in two thirds of the time of the default -O1, and the
# suite's runs are a few thousand cycles (a user's runs are millions).
os.environ.setdefault(OPT_VARIABLE, "-O0")


@pytest.fixture(scope="session")
def cache():
    """The build cache of compiled models: the user cache's, as the commands use it
    (``sim.compiled.default_cache_dir``; ``$SQUEEZENIC_HW_CACHE`` moves it), shared by the
    xdist workers and by later runs. A model is built once, whichever test asks first (a
    second asker waits for the build, ``sim.compiled``'s lock); its key is its Verilog,
    bench, tools and flags (the suite's ``-O0`` among them), so a model found there is
    never stale. The tests of a cold build use a directory of their own."""
    from squeezenic_hw.sim.compiled import default_cache_dir

    return Path(default_cache_dir())


@pytest.fixture(scope="session")
def generated_plugin(tmp_path_factory):
    """``generated_plugin(params)``: the directory ``write_opennic_plugin`` wrote for
    ``PluginParams(**params)`` and its manifest (read back from the directory), generated
    once for the session, whichever xdist worker asks first."""
    from squeezenic_hw.build.params import PluginParams
    from squeezenic_hw.flows.opennic import write_opennic_plugin

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "plugins"
    root.mkdir(parents=True, exist_ok=True)

    def generate(params):
        key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
        final = root / key
        with exclusive(root / f"{key}.lock"):
            if not (final / "manifest.json").exists():
                work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
                shutil.rmtree(work)
                write_opennic_plugin(work, PluginParams(**params))
                work.rename(final)
        return final, json.loads((final / "manifest.json").read_text())

    return generate


@pytest.fixture(scope="session")
def dask_workers():
    """The address of a Dask cluster of two worker processes, one thread each, that
    declare 2 GiB of ``MEMORY`` (``squeezenic_hw.cluster``), started once for the session:
    what ``--scheduler`` points at. The tests' stand-ins (monkeypatch) do not reach its
    workers; a worker a test kills is started again by its nanny."""
    from distributed import LocalCluster

    from squeezenic_hw.cluster import MEMORY

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      resources={MEMORY: 2 << 30}, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="session")
def dask_threads():
    """The address of a Dask cluster of three worker threads in this process: tasks run
    in parallel and the tests' stand-ins reach them."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address
