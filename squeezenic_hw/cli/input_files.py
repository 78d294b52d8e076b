"""Reading the commands' input files, with one message for every way that fails:
``cannot read FILE: REASON`` as a :class:`~squeezenic_hw.cli.CliError` (one line on
stderr, exit status 2), whether the file is missing, unreadable or not what the command
reads."""

from pathlib import Path

import numpy as np

from . import CliError

__all__ = ["cannot_read", "read_pcap", "read_tensor", "read_text"]

#: The first bytes of every ``.npy`` file.
NPY_MAGIC = b"\x93NUMPY"


def cannot_read(path, reason):
    """The :class:`CliError` of an input file ``path`` that cannot be read: ``reason`` is
    an ``OSError`` (its ``strerror``: "No such file or directory") or a text; a reason that
    starts with the path already has it dropped."""
    if isinstance(reason, OSError):
        reason = reason.strerror or str(reason)
    reason = " ".join(str(reason).split())
    prefix = f"{path}: "
    if reason.startswith(prefix):
        reason = reason[len(prefix):]
    return CliError(f"cannot read {path}: {reason}")


def read_pcap(path):
    """:func:`squeezenic_hw.pcap.read_frames` of ``path``: its frames and their cycles."""
    from squeezenic_hw.pcap import read_frames

    try:
        return read_frames(path)
    except (OSError, ValueError) as exc:
        raise cannot_read(path, exc) from None


def read_tensor(path):
    """A float32 ``.npy`` file, flattened; a file that is not ``.npy`` (numpy would read it
    as a pickle, which it refuses) or holds another dtype is a :class:`CliError`."""
    try:
        with open(path, "rb") as f:
            if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise cannot_read(path, "not a .npy file (save the tensor with numpy.save)")
        t = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise cannot_read(path, exc) from None
    if not isinstance(t, np.ndarray) or t.dtype != np.float32:
        dtype = getattr(t, "dtype", type(t).__name__)
        raise CliError(f"{path}: tensor must be float32, got {dtype} "
                       "(convert it with astype(np.float32))")
    return np.ascontiguousarray(t).reshape(-1)


def read_text(path):
    """The text of ``path``."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise cannot_read(path, exc if isinstance(exc, OSError) else "not a text file") \
            from None
