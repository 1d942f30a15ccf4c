"""Which anchor a path is opened from: where the user's choice (a link followed) ends and topicaudit's own
folders (no link followed) begin.

A folder is held open for a block (``holding``: the writer lock holds its run directory for the whole command, so
every folder below it is opened from that descriptor), or declared topicaudit's own below an anchor the user named
(``declare``: the caches, a report's staging folder); any other path is its own anchor (the user named it). A
declaration lasts as long as the command that made it (``command_scope``): in a long Python session a later
command's path below an earlier command's cache is the user's again, its links followed as in a fresh process.
``topicaudit.owned_folders`` opens folders by these answers.
"""
from __future__ import annotations

import errno
import functools
import os
import stat
import tempfile
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterator

from topicaudit.process_state import command_process

_LOCK = threading.Lock()
_HELD: dict[str, list[Any]] = {}  # folders held open for a block, by absolute path
_DECLARED: dict[str, list[Path]] = {}  # folders declared topicaudit's own, by absolute path → their anchors
_SCOPE: ContextVar[list[tuple[str, Path]] | None] = ContextVar("folder_anchors_scope", default=None)


def absolute(path: Path | str) -> str:
    """``path`` absolute, with ``..`` taken as the system takes it: after the link before it. ``abspath`` removed
    ``L/..`` by the text, so ``--output L/../out`` (L a link into another folder) opened the user's ``./out``
    rather than the folder the path names, and wrote the run's files into it over the user's own (and a report's
    read-once snapshot showed one run's files for the other)."""
    text = os.fspath(path)
    # (an absolute path needs no working directory: asking for one failed when it was deleted, and `report
    # /abs/RUN -o /abs/rep` from there said "/abs is not writable (No such file or directory)")
    full = Path(text) if os.path.isabs(text) else Path(os.path.join(os.getcwd(), text))
    parts = full.parts
    if ".." not in parts:
        return str(full)
    last = len(parts) - 1 - parts[::-1].index("..")
    return os.path.join(os.path.realpath(Path(*parts[:last + 1])), *parts[last + 1:])


def planted_link(path: Path | str) -> tuple[str, int, str] | None:
    """The first symbolic link on the way to ``path`` that sits in a folder everyone may write to and whose
    sticky bit keeps each name its owner's (``/tmp``), made by a user who is neither this one, root, nor that
    folder's owner: its path, its owner's uid and its target; None when there is none (or the path ends before).

    Such a link is another user's choice of where this user's files go: ``--output /tmp/L/run``, L a link another
    user planted to a folder of this user's, wrote the run into that folder. The kernel refuses to follow it
    where ``fs.protected_symlinks`` is 1; where it is 0 (hostile pass XIX), topicaudit refuses it itself, by the
    same rule, and follows every other link as the user named it."""
    path = os.fspath(path)
    if not os.path.isabs(path):
        try:
            path = os.path.join(os.getcwd(), path)
        except OSError:  # the working directory was deleted: a relative path names nothing (said where it is used)
            return None
    todo = list(Path(path).parts)
    here, hops = "/", 0
    while todo:
        part = todo.pop(0)
        if part in ("/", "//"):
            here = "/"
            continue
        if part == ".":
            continue
        if part == "..":
            here = os.path.dirname(here)
            continue
        candidate = os.path.join(here, part)
        try:
            info = os.lstat(candidate)
        except OSError:
            return None  # absent from here on (made later), or out of reach: nothing to follow
        if not stat.S_ISLNK(info.st_mode):
            here = candidate
            continue
        target = os.readlink(candidate)
        try:
            folder = os.stat(here)
        except OSError:
            return None
        shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
        if shared and info.st_uid not in (os.geteuid(), 0, folder.st_uid):
            return candidate, info.st_uid, target
        hops += 1
        if hops > 40:  # a loop: the system says so when the path is used
            return None
        todo[:0] = Path(target).parts
    return None


def planted_once_made(prefix: str) -> bool:
    """Whether a folder a library will write in (``PYTHONPYCACHEPREFIX``, ``NUMBA_CACHE_DIR``) is reached through
    another user's link (``planted_link``). Its missing folders are made first, one at a time and never through a
    link, as the library would make them on its first write: the launcher looked while ``/tmp/F`` was absent,
    another user made F a link to a folder of the user's a moment later, and the interpreter wrote its bytecode
    there; numba made its cache folder there (hostile pass XIX-w). Still racing after a few tries: taken as
    planted (the caller writes nothing there)."""
    for _ in range(20):
        if planted_link(prefix) is not None:
            return True
        missing, path = [], Path(prefix) if os.path.isabs(prefix) else Path(os.getcwd(), prefix)
        while not os.path.lexists(path) and path != path.parent:
            missing.append(path)
            path = path.parent
        if not missing:
            return planted_link(prefix) is not None
        try:  # each folder made in the one above it, opened without following a link: the nearest one that is
            # there may have become another user's link since the look above (hostile pass XIX-y: mkdir followed it)
            above = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError:  # cannot be opened: the library cannot write there either
            return planted_link(prefix) is not None
        try:
            if planted_link(str(path)) is not None or not os.path.samestat(os.fstat(above), os.stat(path)):
                continue  # the folder opened was reached through a planted link, or has been swapped since
            for folder in reversed(missing):
                try:
                    os.mkdir(folder.name, dir_fd=above)
                except FileExistsError:  # made since: by whom, the next look says
                    pass
                inner = os.open(folder.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                | getattr(os, "O_CLOEXEC", 0), dir_fd=above)
                os.close(above)
                above = inner
            return planted_link(prefix) is not None
        except OSError as error:  # cannot be made here (or a link took a name): the next look says
            # Only a link taking a name is looked at again; anything else (a full or read-only disk, a name too
            # long, a folder such as /proc that makes nothing) is the caller's own mkdir's error to report
            if not os.access(path, os.W_OK | os.X_OK) or error.errno not in (errno.EEXIST, errno.ELOOP, errno.ENOTDIR):
                return planted_link(prefix) is not None
        finally:
            os.close(above)
    return True


TEMPORARY_PLACES = ("/tmp", "/var/tmp", "/usr/tmp")  # after $TMPDIR, $TEMP and $TMP, as Python's tempfile tries


def temporary_folder() -> str | None:
    """Where topicaudit puts a temporary folder or file of its own: the first place Python's ``tempfile`` would try
    that is a folder this user may write in and that no other user's link in a shared sticky folder leads to
    (``planted_link``); None when there is none. ``tempfile.gettempdir()`` is no answer: it tests its choice by
    creating and removing a file there, and ``TMPDIR=/tmp/L`` (L another user's link to a folder of this user's)
    had a report make and remove a matplotlib folder in that folder of the user's (hostile pass XIX-p)."""
    places = [os.environ[name] for name in ("TMPDIR", "TEMP", "TMP") if os.environ.get(name)]
    for place in (*places, *TEMPORARY_PLACES):
        if (os.path.isabs(place) and os.path.isdir(place) and os.access(place, os.W_OK | os.X_OK)
                and planted_link(place) is None):
            return place
    return None


_TEMPFILE_LOCK = threading.Lock()
_TEMPFILE_HELD: list[Any] = [0, None, None]  # blocks inside, tempfile.tempdir before them, the one given


@contextmanager
def tempfile_without_planted_links() -> Iterator[None]:
    """For the block, Python's ``tempfile`` (and every library that asks it) never chooses its folder through
    another user's link: ``tempfile.gettempdir()`` tests its choice by making and removing a file there, and with
    ``TMPDIR=/tmp/L`` (L another user's link to a folder of the user's) nltk's path check, run on every
    pre-processed corpus, changed that folder's time (hostile pass XIX-r). Where a place named by ``TMPDIR``,
    ``TEMP`` or ``TMP`` is such a link (relative ones too, ``cd /tmp; TMPDIR=L``: tempfile makes them absolute
    against the working directory, hostile pass XIX-t), ``tempfile.tempdir`` is ``temporary_folder`` for the
    block, then as found. So it is where such a place is absent now: another user may plant the link later, before
    tempfile's first choice (hostile pass XIX-w: nobody flipping T/F between a link and nothing, V's time changed)."""
    with _TEMPFILE_LOCK:
        if _TEMPFILE_HELD[0] == 0 and tempfile.tempdir is None and any(
                planted_link(os.environ[name]) is not None or not os.path.isdir(os.environ[name])
                for name in ("TMPDIR", "TEMP", "TMP")
                if os.environ.get(name)):  # a relative one too: tempfile joins it to the working directory
            _TEMPFILE_HELD[1:] = [tempfile.tempdir, temporary_folder()]
            tempfile.tempdir = _TEMPFILE_HELD[2]
        _TEMPFILE_HELD[0] += 1
    try:
        yield
    finally:
        with _TEMPFILE_LOCK:
            _TEMPFILE_HELD[0] -= 1
            if _TEMPFILE_HELD[0] == 0:
                if _TEMPFILE_HELD[2] is not None and tempfile.tempdir == _TEMPFILE_HELD[2]:
                    tempfile.tempdir = _TEMPFILE_HELD[1]
                _TEMPFILE_HELD[1:] = [None, None]


def declare(path: Path, anchor: Path) -> None:
    """``path`` (and everything below it) is topicaudit's own from ``anchor``, an ancestor the user named (or
    the XDG base): the folders between them are opened without following links."""
    if absolute(path) != absolute(anchor) and Path(absolute(anchor)) not in Path(absolute(path)).parents:
        raise ValueError(f"{anchor} does not hold {path}")
    # Both absolute: a relative anchor ($TOPICAUDIT_CACHE_DIR=cache) read after a chdir was another folder, and
    # every path below it a ValueError.
    key, base = absolute(path), Path(absolute(anchor))
    with _LOCK:
        _DECLARED.setdefault(key, []).append(base)
    scope = _SCOPE.get()
    if scope is not None:
        scope.append((key, base))


@contextmanager
def command_scope() -> Iterator[None]:
    """The declarations made in the block (by this thread's context) end with it, counted per path: a cache
    declared by one call of the API no longer changes how a later call opens a path the user named below it
    (``run(output=proj/out/r1)``, ``proj/out`` the user's link, was refused after ``run`` with ``--cache proj``),
    and two threads declaring one folder do not end each other's declaration. Declarations made outside any
    scope last for the process, as a command line's do."""
    made: list[tuple[str, Path]] = []
    token = _SCOPE.set(made)
    try:
        with command_process(), tempfile_without_planted_links():  # only this process carries the command on
            yield
    finally:
        _SCOPE.reset(token)
        with _LOCK:
            for key, base in reversed(made):
                anchors = _DECLARED[key]
                del anchors[len(anchors) - 1 - anchors[::-1].index(base)]  # this command's, not another's
                if not anchors:
                    del _DECLARED[key]


def in_command_scope(function):
    """``function`` run inside ``command_scope``: an entry point of the API (run, check, report, …)."""
    @functools.wraps(function)
    def scoped(*args, **kwargs):
        with command_scope():
            return function(*args, **kwargs)
    return scoped


@contextmanager
def holding(path: Path, folder: Any) -> Iterator[None]:
    """For the block, every folder below ``path`` is opened from ``folder``'s descriptor (the writer lock's)."""
    key = absolute(path)
    with _LOCK:
        _HELD.setdefault(key, []).append(folder)
    try:
        yield
    finally:
        with _LOCK:
            _HELD[key].remove(folder)
            if not _HELD[key]:
                del _HELD[key]


def anchor_of(path: Path) -> tuple[Path, tuple[str, ...]]:
    """The anchor ``path`` is opened from (followed as the user named it) and its own components below it."""
    key = Path(absolute(path))
    with _LOCK:
        for candidate in (key, *key.parents):
            if str(candidate) in _HELD or str(candidate) in _DECLARED:
                base = candidate if str(candidate) in _HELD else _DECLARED[str(candidate)][-1]
                return base, key.relative_to(base).parts
    return key, ()


def held_descriptor(base: Path) -> int | None:
    """A duplicate of the descriptor of the folder held open at ``base`` (the innermost block's); None when none
    is held."""
    with _LOCK:
        held = _HELD.get(str(base))
        return os.dup(held[-1].fd) if held and held[-1].fd is not None else None
