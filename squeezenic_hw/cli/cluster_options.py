"""``--jobs`` and ``--scheduler``, the options of the commands whose independent runs are
Dask tasks (``report``, ``fuzz``, ``throughput``; :mod:`squeezenic_hw.cluster`)."""

from contextlib import contextmanager

from . import CliError


def add_cluster_options(parser, *, unit, jobs_help=""):
    """Add ``--jobs N`` and ``--scheduler ADDRESS``; ``unit`` names what one task runs
    (``"synthesis"``, ``"batch"``)."""
    parser.add_argument("--jobs", type=int, metavar="N",
                        help=f"{unit} runs in parallel on a local Dask cluster of N worker "
                             f"processes{jobs_help} (default 1: one at a time in this process)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help=f"run each {unit} as a task on the Dask cluster of the scheduler "
                             "at ADDRESS (tcp://host:8786) instead of locally (docs/report.md)")


def cluster_choice(args):
    """``(jobs, scheduler)`` of the options, checked (one line, exit 2)."""
    if args.scheduler is not None and args.jobs is not None:
        raise CliError("--jobs sizes the local cluster; with --scheduler the cluster's "
                       "workers decide")
    jobs = 1 if args.jobs is None else args.jobs
    if jobs < 1:
        raise CliError(f"--jobs must be at least 1, got {jobs}")
    return jobs, args.scheduler


@contextmanager
def scheduler_errors():
    """A scheduler that does not answer as a user error naming ``--scheduler``."""
    from squeezenic_hw.cluster import SchedulerUnreachable

    try:
        yield
    except SchedulerUnreachable as exc:
        raise CliError(f"--scheduler: {exc}") from None
