"""numba's ``njit``, whose compiled kernels are cached on disk when numba has a place for its cache.

numba keeps a cache beside the package (``__pycache__``) or, when that folder is not writable, in the user's
own cache folder (``~/.cache/numba``). When neither can be written (a package installed by root, run by a user
whose home directory does not exist or is not writable: CI containers, Debian's ``nobody``), ``cache=True``
raised at import, and every command that reached a kernel ended as an internal error (exit 3). Such a process
compiles its kernels for itself instead, as numba does without ``cache=True``; ``NUMBA_CACHE_DIR`` names a
cache folder for it. Nor is anything cached when numba's own place for it in the user's cache folder
(``$XDG_CACHE_HOME/numba``, else ``~/.cache/numba``) lies behind another user's link in a shared sticky folder
(hostile pass XIX: it wrote its kernels into the folder that link named), nor when ``NUMBA_CACHE_DIR``, which numba
then uses for every kernel, does (hostile pass XIX-q: ``NUMBA_CACHE_DIR=/tmp/L`` wrote them there the same way).
"""
from __future__ import annotations

import inspect
import os
import sys

# numba's compiled part prints why another failed to load (under `ulimit -v`, the loader's "failed to map segment",
# through ``sys.excepthook``) and raises an ImportError that no longer says it: that print became a second line before
# "internal error" (exit 3, seen in CI). The hook keeps it instead, as the cause ``topicaudit.memory`` reads; stderr
# itself is left alone (a signal's "interrupted" line may be written while numba loads).
_dropped: list[BaseException] = []
_excepthook, sys.excepthook = sys.excepthook, lambda kind, value, trace: _dropped.append(value)
try:
    import numba
except ImportError as error:
    raise ImportError(f"{error} ({type(_dropped[-1]).__name__}: {_dropped[-1]})" if _dropped else str(error)) \
        from (_dropped[-1] if _dropped else error)
finally:
    sys.excepthook = _excepthook
for _value in _dropped:  # printed while numba loaded: shown as before
    _excepthook(type(_value), _value, _value.__traceback__)

try:  # numba's internals (its cache locators, its cache folder): they may move between releases
    from numba.core import caching as _caching
    from numba.misc.appdirs import AppDirs as _AppDirs
except ImportError:
    _caching = _AppDirs = None

from topicaudit.folder_anchors import planted_link, planted_once_made


def _cache_planted() -> bool:
    """Whether ``NUMBA_CACHE_DIR`` (numba's first choice, for every kernel) is reached through another user's link
    in a shared sticky folder; numba makes it as soon as a kernel is declared, so this is decided before."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:  # made now if missing: absent here, another user's link a moment later was followed (XIX-w)
        return planted_once_made(chosen)
    return False


def _user_wide_planted(function) -> bool:
    """Whether numba would cache ``function``'s kernel in its user-wide folder (``$XDG_CACHE_HOME/numba``, else
    ``~/.cache/numba``: where the package's own ``__pycache__`` cannot be written) and that folder is reached
    through another user's link. It is made now if missing (``planted_once_made``), as numba would make it next:
    judged as the path was, a ``XDG_CACHE_HOME=/tmp/F`` absent then and another user's link a moment later had
    numba write its kernels into the folder that link named (hostile pass XIX-yb). numba's own in-tree locator
    answers first (it makes ``__pycache__`` beside the module, as numba does next), so nothing is made in the
    user's cache folder when numba would not use it."""
    try:
        in_tree = getattr(_caching, "InTreeCacheLocator", None) or getattr(_caching, "_InTreeCacheLocator")
        if in_tree.from_function(function, inspect.getfile(function)) is not None:
            return False
        folder = _AppDirs(appname="numba", appauthor=False).user_cache_dir
    except Exception:  # numba's internals have moved: cached only where its user-wide folder is already there
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "numba")
        return planted_link(folder) is not None or not os.path.isdir(folder)
    return planted_once_made(folder)


_UNCACHED = _cache_planted()


def njit(*args, **options):
    """``numba.njit`` with the same arguments; ``cache=True`` falls back to no cache when numba has no place
    for one."""
    def decorate(function):
        if options.get("cache") and (_UNCACHED or _user_wide_planted(function)):
            return numba.njit(**{**options, "cache": False})(function)
        try:
            return numba.njit(**options)(function)
        except RuntimeError as error:  # numba's "cannot cache function …: no locator available for file …"
            if not options.get("cache") or "no locator available" not in str(error):
                raise
            return numba.njit(**{**options, "cache": False})(function)
    return decorate(args[0]) if len(args) == 1 and callable(args[0]) and not options else decorate
