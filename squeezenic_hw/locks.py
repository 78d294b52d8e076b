"""Exclusive file locks, so that a slow one-time job (a compiled model's build, YoWASP's
first compile) runs in one process at a time while the others wait for its result."""

import contextlib

try:
    import fcntl
except ImportError:          # not POSIX: nothing is serialised
    fcntl = None

__all__ = ["exclusive"]


@contextlib.contextmanager
def exclusive(path):
    """Hold an exclusive ``flock`` on the file ``path`` (created if missing) for the
    ``with`` block. Without ``fcntl``, or when the file cannot be opened (another user's,
    say), the block runs unlocked: the lock only saves repeated work."""
    try:
        lock = open(path, "a") if fcntl is not None else None
    except OSError:
        lock = None
    if lock is None:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
