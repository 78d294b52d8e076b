"""Tests of :mod:`squeezenic_hw.cluster`: results as tasks finish, errors named by their
task, retries, the ``MEMORY`` that tasks ask for, a scheduler that is not there.

A killed worker whose synthesis runs again: ``tests/flows/test_report.py``."""

import time
from pathlib import Path

import pytest

from squeezenic_hw import cluster
from squeezenic_hw.cluster import MEMORY, SchedulerUnreachable, Task, TaskFailed, run_tasks


def _square(x, delay=0.0):
    time.sleep(delay)
    return x * x


def _attempt(path):
    """Counts its runs in ``path``; fails the first."""
    runs = Path(path)
    runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
    if len(runs.read_text()) == 1:
        raise OSError("a file system that came back")
    return "done"


def _fail(kind):
    raise kind("bad parameter")


def test_results_come_as_tasks_finish(dask_threads):
    tasks = [Task(f"square {x}", _square, (x,), {"delay": 0.4 if x == 0 else 0.0})
             for x in range(4)]
    lines = []
    got = list(run_tasks(tasks, scheduler=dask_threads, progress=lines.append))
    assert sorted(got) == [(x, x * x) for x in range(4)]
    assert got[-1] == (0, 0)                      # the slow one, started first
    starts = [ln.split(" on inproc://") for ln in lines if ln.startswith("[start]")]
    assert sorted(s[0] for s in starts) == [f"[start] square {x}" for x in range(4)]
    assert all(len(s) == 2 for s in starts)       # the worker's address


def test_one_local_worker_runs_tasks_in_their_order():
    lines = []
    tasks = [Task(f"square {x}", _square, (x,), memory_mib=100) for x in range(3)]
    assert list(run_tasks(tasks, jobs=1, progress=lines.append)) == [(0, 0), (1, 1), (2, 4)]
    assert lines == ["[start] square 0", "[start] square 1", "[start] square 2"]


def test_an_expected_error_is_raised_as_it_is_and_not_retried(dask_threads, tmp_path):
    with pytest.raises(ValueError, match="^bad parameter$"):
        list(run_tasks([Task("t", _fail, (ValueError,))], scheduler=dask_threads,
                       expected=(ValueError,)))
    # any other error: run once more, then named by its task
    with pytest.raises(TaskFailed, match=r"^second: KeyError: 'bad parameter'$"):
        list(run_tasks([Task("first", _square, (1,)), Task("second", _fail, (KeyError,))],
                       scheduler=dask_threads))
    runs = tmp_path / "runs"
    assert list(run_tasks([Task("flaky", _attempt, (runs,))], scheduler=dask_threads)) == [
        (0, "done")]
    assert runs.read_text() == "xx"
    with pytest.raises(TaskFailed, match="OSError"):
        list(run_tasks([Task("flaky", _attempt, (tmp_path / "again",))],
                       scheduler=dask_threads, retries=0))


def test_memory_is_asked_for_within_what_the_workers_declare():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address="127.0.0.1:0", resources={MEMORY: 1 << 30}) as local:
        lines = []
        tasks = [Task("small", _square, (2,), memory_mib=256),
                 Task("big", _square, (3,), memory_mib=3000)]
        assert sorted(run_tasks(tasks, scheduler=local.scheduler_address,
                                progress=lines.append)) == [(0, 4), (1, 9)]
        assert ("a task needs about 2.9 GiB; the largest worker declares 1.0 GiB of MEMORY: "
                "such tasks ask for all of it") in lines
        with Client(local.scheduler_address, set_as_default=False) as client:
            asked = cluster._memory_request(client, local.scheduler_address, 3000, print)
        assert asked(256) == {MEMORY: 256 << 20} and asked(3000) == {MEMORY: 1 << 30}


def test_workers_that_declare_no_memory_run_tasks_by_threads(dask_threads):
    lines = []
    tasks = [Task("big", _square, (3,), memory_mib=3000)]
    assert list(run_tasks(tasks, scheduler=dask_threads, progress=lines.append)) == [(0, 9)]
    assert ("the workers declare no MEMORY resource: each runs as many tasks at a time as it "
            "has threads") in lines


def test_a_scheduler_that_is_not_there(monkeypatch):
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 0.5)
    start = time.monotonic()
    with pytest.raises(SchedulerUnreachable, match=r"^no Dask scheduler answers at "
                                                   r"tcp://127\.0\.0\.1:1 within 0\.5 s"):
        list(run_tasks([Task("t", _square, (1,))], scheduler="tcp://127.0.0.1:1"))
    assert time.monotonic() - start < 5
    with pytest.raises(SchedulerUnreachable, match="not a scheduler address: 'localhost'"):
        list(run_tasks([Task("t", _square, (1,))], scheduler="localhost"))
    assert list(run_tasks([], scheduler="tcp://127.0.0.1:1")) == []   # nothing to run: no call
