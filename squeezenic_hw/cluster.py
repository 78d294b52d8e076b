"""Independent tasks run on a Dask cluster (``dask.distributed``): the syntheses of
``squeezenic-hw report``, the batches of ``fuzz``, the points of ``throughput``.

:func:`run_tasks` submits the tasks, first first, as the workers have threads free for
them (so that no task waits behind a busy worker while another is idle: a synthesis can
take many minutes), and yields each result as its task finishes. The tasks go to the
cluster of a scheduler's address (an existing cluster: a ``dask scheduler`` with its
workers, a dask-jobqueue ``SLURMCluster``, ...) or, without one, to a local cluster
started for the run and closed after it, so that one path runs them either way:

* ``jobs`` > 1: ``jobs`` worker processes of one thread each (each task then has a
  core; elaboration and simulation in Python hold the GIL);
* ``jobs`` = 1: one worker thread in this process, which starts no process of its own,
  as a serial run never did.

Each task runs at most ``retries`` times more after an exception its caller did not
declare (``expected``); a task whose worker dies (killed, out of memory, its machine
lost) is run again on another worker by the scheduler itself (``distributed.scheduler.
allowed-failures`` times, 3 by default). An expected exception (a synthesis error, a
model that does not build) is the task's answer, raised here as it was raised there:
running it again would only fail again.

Memory
------
A task may say what it takes at its peak (``Task.memory_mib``, the Yosys run's measured
peak for a synthesis). Such tasks ask for that much of the workers' ``MEMORY`` resource
(bytes; Dask's `worker resources`, ``dask worker --resources MEMORY=8e9``), so that no
worker runs more of them at once than its memory holds. A local cluster's workers get a
memory limit of the largest task's need plus :data:`WORKER_ALLOWANCE_MIB` (the worker's
own Python: elaboration, export) and that much ``MEMORY``; they are neither paused nor
restarted for memory (the child processes a task starts, Yosys among them, are outside
what Dask counts of a worker). On a cluster whose workers declare no ``MEMORY``, tasks
run as many at a time as the workers have threads; a task that needs more than the
largest worker declares asks for all of that worker's.
"""

import socket
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Seconds to reach a scheduler before giving up.
CONNECT_TIMEOUT_S = 5.0

#: MiB a local worker is given beyond its largest task's need: its own Python process.
WORKER_ALLOWANCE_MIB = 1024

#: The worker resource that memory-hungry tasks ask for (bytes).
MEMORY = "MEMORY"

_MIB = 1 << 20

# A local cluster's workers hold no data worth spilling; what their tasks take is mostly
# in child processes that Dask does not count.
_LOCAL_CONFIG = {
    "distributed.worker.memory.target": False,
    "distributed.worker.memory.spill": False,
    "distributed.worker.memory.pause": False,
    "distributed.worker.memory.terminate": False,
}


class SchedulerUnreachable(ValueError):
    """No Dask scheduler answers at the address given (or the address is malformed)."""


class TaskFailed(RuntimeError):
    """A task raised what its caller did not expect, or its worker died each time it ran
    it; names the task."""

    def __init__(self, label, detail):
        self.label = label
        self.detail = " ".join(str(detail).split())
        super().__init__(f"{label}: {self.detail}")


@dataclass
class Task:
    """One unit of work: ``fn(*args, **kwargs)`` on a worker.

    ``fn`` must be importable by its module and name (a module-level function), as the
    workers import it; so must the classes of its arguments and result. ``label`` names
    the task in progress lines, errors and on the scheduler's dashboard; ``memory_mib``
    is what it takes at its peak (0: not known, no ``MEMORY`` asked for).
    """
    label: str
    fn: object
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    memory_mib: float = 0.0


@dataclass
class _Raised:
    """An expected exception, returned as the task's value (so it is not retried)."""
    error: BaseException


def _run_task(topic, index, fn, args, kwargs, expected):
    """What a worker runs: announce the start (the client prints ``[start]``), then the task."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(topic, {"index": index})
    try:
        return fn(*args, **kwargs)
    except expected as exc:
        return _Raised(exc)


def where(scheduler, jobs):
    """Where :func:`run_tasks` runs, in words (a progress line's part)."""
    if scheduler is not None:
        return f"on the Dask scheduler at {scheduler}"
    return f"{jobs} at a time"


def run_tasks(tasks, *, scheduler=None, jobs=1, expected=(), retries=1, progress=None,
              name="task"):
    """Run ``tasks`` on a Dask cluster; yield ``(index, result)`` as each finishes.

    Parameters
    ----------
    tasks : sequence of Task
        In priority order: the first are started first (put the longest first).
    scheduler : str, optional
        Address of a running scheduler (``tcp://host:8786``); default: a local cluster
        of ``jobs`` workers, started here and closed when the last task is done.
    jobs : int
        Workers of the local cluster (no more than there are tasks); ignored with
        ``scheduler``.
    expected : tuple of exception classes
        A task's exception of these classes is raised here as it is (and the task is
        not run again); any other becomes :class:`TaskFailed`.
    retries : int
        Runs after an unexpected exception, besides the first.
    progress : callable, optional
        Takes one line: ``[start] <label>`` (with the worker's address on a scheduler's
        cluster) as a task starts, and the lines that say where the tasks run.
    name : str
        What a task is, for its key on the scheduler's dashboard (``synth``, ``fuzz``).

    Raises
    ------
    SchedulerUnreachable
        ``scheduler`` does not answer within :data:`CONNECT_TIMEOUT_S` or is malformed.
    TaskFailed, or an ``expected`` exception
        For the first task to fail. The tasks not started are cancelled; those running
        are waited for (their work, a synthesis's cache entry, is kept) before it is
        raised.
    """
    from distributed import as_completed

    tasks = list(tasks)
    if not tasks:
        return
    say = progress or (lambda line: None)
    need_mib = max(t.memory_mib for t in tasks)
    jobs = max(1, min(jobs, len(tasks)))
    with _client(scheduler, jobs, need_mib, say) as client:
        memory = _memory_request(client, scheduler, need_mib, say) if need_mib else None
        topic = f"squeezenic-hw-start-{uuid.uuid4().hex}"
        started, finished = set(), set()

        def heard(event):
            index = event[1]["index"]
            first = index not in started
            started.add(index)
            if index not in finished:
                again = "" if first else " (again)"
                on = f" on {event[1]['worker']}" if scheduler is not None else ""
                say(f"[start] {tasks[index].label}{on}{again}")

        client.subscribe_topic(topic, heard)
        run = uuid.uuid4().hex[:8]
        waiting = list(range(len(tasks)))     # not submitted yet, first first
        futures = {}                          # submitted and not finished: index
        finishing = as_completed(loop=client.loop)

        def submit_more():
            room = (jobs if scheduler is None else _threads(client, scheduler, say))
            while waiting and len(futures) < room:
                index = waiting.pop(0)
                task = tasks[index]
                resources = memory(task.memory_mib) if memory and task.memory_mib else None
                future = client.submit(_run_task, topic, index, task.fn, task.args,
                                       task.kwargs, tuple(expected),
                                       key=f"{name} {task.label} {run}",
                                       priority=len(tasks) - index, retries=retries,
                                       resources=resources, pure=False)
                futures[future] = index
                finishing.add(future)

        try:
            submit_more()
            for future in finishing:
                index = futures.pop(future)
                finished.add(index)
                yield index, _outcome(future, tasks[index])
                submit_more()
        except BaseException:
            waiting.clear()
            running = [f for f in futures if futures[f] in started and not f.done()]
            client.cancel([f for f in futures if futures[f] not in started])
            if running:
                say("stopping: waiting for "
                    + ", ".join(tasks[futures[f]].label for f in running) + " to finish")
                for future in running:
                    _finish(future)
            raise
        finally:
            client.unsubscribe_topic(topic)


def _threads(client, scheduler, say):
    """The threads of the scheduler's workers now (workers may come and go), after
    waiting for a first worker if there is none."""
    threads = sum(client.nthreads().values())
    if not threads:
        say(f"waiting for a worker to join the scheduler at {scheduler}")
        client.wait_for_workers(1)
        threads = sum(client.nthreads().values())
    return threads


def _finish(future):
    """Wait for ``future``, whatever its end (its own is not the run's answer)."""
    try:
        future.result()
    except Exception:
        pass


def _outcome(future, task):
    """The task's result; its expected exception raised again; any other as TaskFailed."""
    from distributed import KilledWorker

    try:
        value = future.result()
    except KilledWorker:
        raise TaskFailed(task.label, "its worker died each time it ran it (killed, or out "
                                     "of memory?)") from None
    except Exception as exc:
        raise TaskFailed(task.label, f"{type(exc).__name__}: {exc}") from exc
    if isinstance(value, _Raised):
        raise value.error
    return value


@contextmanager
def _client(scheduler, jobs, need_mib, say):
    """A client of the scheduler at ``scheduler``, or of a local cluster of ``jobs``."""
    import dask
    from distributed import Client, LocalCluster

    if scheduler is not None:
        address = _reachable(scheduler)
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(f"no Dask scheduler answers at {scheduler}: "
                                       f"{exc}") from None
        with client:
            yield client
        return
    limit = None
    if need_mib:
        limit = int(need_mib + WORKER_ALLOWANCE_MIB) * _MIB
        _warn_if_over_memory(jobs, limit, say)
    with dask.config.set(_LOCAL_CONFIG):
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=jobs > 1,
                               memory_limit=limit or "auto",
                               resources={MEMORY: limit} if limit else None,
                               dashboard_address="127.0.0.1:0",
                               # in this process the workers talk in memory, not TCP
                               **({"host": "127.0.0.1"} if jobs > 1 else {}))
    with cluster, Client(cluster, set_as_default=False) as client:
        yield client


def _warn_if_over_memory(jobs, limit, say):
    import psutil

    total = psutil.virtual_memory().total
    if jobs > 1 and jobs * limit > total:
        say(f"{jobs} workers of {limit / (1 << 30):.1f} GiB each are more than this "
            f"machine's {total / (1 << 30):.1f} GiB: fewer --jobs may be safer")


def _reachable(scheduler):
    """The normalised address of ``scheduler``, after a TCP connection to it succeeded
    (a scheduler that is not there is said in :data:`CONNECT_TIMEOUT_S`, not after the
    client's retries)."""
    from distributed.comm import normalize_address, parse_address
    from distributed.comm.addressing import parse_host_port

    try:
        address = normalize_address(scheduler)
        scheme, location = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return address
        host, port = parse_host_port(location)
    except ValueError as exc:
        raise SchedulerUnreachable(f"not a scheduler address: {scheduler!r} ({exc})") from None
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SchedulerUnreachable(f"no Dask scheduler answers at {scheduler} within "
                                   f"{CONNECT_TIMEOUT_S:g} s ({reason})") from None
    return address


def _memory_request(client, scheduler, need_mib, say):
    """A function of a task's MiB giving the resources it asks for, or None when the
    workers declare no :data:`MEMORY`."""
    if scheduler is None:
        return lambda mib: {MEMORY: int(mib * _MIB)}
    _threads(client, scheduler, say)          # a first worker
    workers = client.scheduler_info(n_workers=-1)["workers"]
    declared = [w.get("resources", {}).get(MEMORY) for w in workers.values()]
    declared = [m for m in declared if m]
    if not declared:
        say(f"the workers declare no {MEMORY} resource: each runs as many tasks at a time "
            "as it has threads")
        return None
    largest = max(declared)
    if need_mib * _MIB > largest:
        say(f"a task needs about {need_mib / 1024:.1f} GiB; the largest worker declares "
            f"{largest / (1 << 30):.1f} GiB of {MEMORY}: such tasks ask for all of it")
    return lambda mib: {MEMORY: min(int(mib * _MIB), largest)}
