"""numba's ``njit``, whose compiled kernels are cached on disk when numba has a place for its cache.

numba keeps a cache beside the package (``__pycache__``) or, when that folder is not writable, in the user's
own cache folder (``~/.cache/numba``). When neither can be written (a package installed by root, run by a user
whose home directory does not exist or is not writable: CI containers, Debian's ``nobody``), ``cache=True``
raised at import, and every command that reached a kernel ended as an internal error (exit 3). Such a process
compiles its kernels for itself instead, as numba does without ``cache=True``; ``NUMBA_CACHE_DIR`` names a
cache folder for it.
"""
from __future__ import annotations

import numba


def njit(*args, **options):
    """``numba.njit`` with the same arguments; ``cache=True`` falls back to no cache when numba has no place
    for one."""
    def decorate(function):
        try:
            return numba.njit(**options)(function)
        except RuntimeError as error:  # numba's "cannot cache function …: no locator available for file …"
            if not options.get("cache") or "no locator available" not in str(error):
                raise
            return numba.njit(**{**options, "cache": False})(function)
    return decorate(args[0]) if len(args) == 1 and callable(args[0]) and not options else decorate
