"""Where the project keeps what it can compute again: a user cache directory, outside any
checkout, so that a second clone or another working directory finds the same results.

The root is ``$SQUEEZENIC_HW_CACHE`` when set, else ``$XDG_CACHE_HOME/squeezenic-hw``, else
``~/.cache/squeezenic-hw``; each kind of result has a folder of its own under it
(``synth``: the synthesis cache of ``squeezenic-hw report``; ``sim``: the compiled
simulation models). Every entry is keyed by what
it was computed from (the generated Verilog and the tool versions), so a cache shared
between checkouts never gives a stale answer.
"""

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root", "user_cache_dir"]

#: The environment variable that moves the whole cache.
CACHE_ENV = "SQUEEZENIC_HW_CACHE"


def cache_root():
    """The cache root (see the module docstring), read from the environment on each call."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "squeezenic-hw"


def user_cache_dir(kind):
    """The folder of ``kind`` (``"synth"``, ...) under :func:`cache_root`; not created."""
    return cache_root() / kind
