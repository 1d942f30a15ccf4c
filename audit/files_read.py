"""The files this process's code opened for reading, by whom and as they were when first opened, and those it wrote.

A plug-in's fit may choose its code by any file it reads: a settings file, a database, a library it loads. A run's
record keeps each such file by content (``engine.storage.fitted_code`` decides whose reads count), so a later process
with other content fits again. Source files run as modules are ``topicaudit.loaded_code``'s. A read is an ``open``
audit event that can read (also ``"r+"``: a file opened so and only read was left out as written, hostile pass XIX-zv
C4), a SQLite database connected to or a shared library ctypes loads by its path (C1, C11); a name relative to a
folder's descriptor is taken in that folder (C2). A file's identity is kept as each opener first opened it for
reading (None: not there) while a fit, a run or a plug-in's import went on, or by a plug-in's own code: a fit that
read a file and then rewrote it, renamed it away, or made it, is told from one that read it as it is at the end (C10,
C3). (What a test or a notebook reads between runs is not, nor topicaudit's own look for a file it then writes: a
run's manifest.json, first looked for while absent, kept every later run of a test session from resuming.)
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import urllib.parse

import topicaudit.loaded_code as loaded_code

# Every file opened for reading (any suffix but ``.py``), with the code files of the calls that opened it (each stack,
# opener first): a file read then turned into code (stripped, unmarshalled, unpickled: XIX-zk), or a plug-in's input.
_READ: dict[str, set[tuple[str, ...]]] = {}
_WRITTEN: set[str] = set()
_READ_AT: dict[tuple[str, tuple[str, ...]], tuple[int, ...] | None] = {}  # by file and opener
# Files opened by other events than ``open``.
_OPENING = {"ctypes.dlopen", "sqlite3.connect"}
# The folder of the descriptor an ``os.open(name, dir_fd=…)`` in this thread opens ``name`` in ("": a descriptor of no
# folder; set by ``in_folder``, the wrapper of ``os.open``).
AT = threading.local()


def _on_audit(event: str, args: tuple) -> None:
    # Called for every audit event of the process: a file opened (also a ``.py`` file a plug-in reads as settings).
    if event in _OPENING and args and isinstance(args[0], (str, bytes, os.PathLike)):
        name = _named_file(event, args[0])
        if name is None:
            return
        event, args = "open", (name, "rb")
    if event != "open" or not args:
        return
    try:
        # open(b"settings.txt") (XIX-zr R7), a ``numpy.str_`` (XIX-zw Z4); a ``.py`` file too, opened "r+" (Z2)
        name = os.fsdecode(str(args[0]) if isinstance(args[0], str) else args[0]) \
            if isinstance(args[0], (str, bytes)) else None
        if name is None:
            return
        folder = getattr(AT, "folder", None)
        path = os.path.join(folder or os.getcwd(), name) if folder or not os.path.isabs(name) else name
        # a ".." after a linked folder is the link's target's parent, not the name's (Z6)
        path = os.path.realpath(path) if ".." in path.split(os.sep) else os.path.normpath(path)
        makes = _makes(args, path)
        reads = not makes and _can_read(args) and not os.path.isdir(path)  # (``shutil.rmtree`` opens folders)
        if reads and path not in _WRITTEN and not getattr(loaded_code._UNNOTED, "on", False):
            stack = loaded_code._openers(sys._getframe(getattr(AT, "depth", 1)))  # (2: under ``in_folder``'s wrapper)
            if (path, stack) not in _READ_AT and (loaded_code.strictly_watched() or loaded_code.by_plugin(stack)):
                _READ_AT[path, stack] = _identity_or_none(path)
            _READ.setdefault(path, set()).add(stack)
        elif makes and path not in _READ:
            _WRITTEN.add(path)  # made or emptied by this process: what it wrote, not what it read
    except Exception:  # noqa: BLE001 - a hook must never fail an open
        pass


def _can_read(args: tuple) -> bool:
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return flags & os.O_ACCMODE != os.O_WRONLY


def _makes(args: tuple, path: str) -> bool:
    """Whether an ``open`` event makes or empties the file (``"w"``, ``"x"``, ``O_TRUNC``, or creates it): what the
    process then reads is what it wrote. Any other open, ``"r+"``, ``"a+"``, ``"a"``, reads or can read what was
    there (a mode that could write was left out as written: XIX-zv C4, XIX-zw Z1); a file only appended to is
    neither read nor made (a log)."""
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return bool(set(mode) & set("wx")) or "a" in mode and not os.path.exists(path)
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return bool(flags & os.O_TRUNC) or bool(flags & os.O_CREAT) and not os.path.exists(path)


def _named_file(event: str, name) -> str | None:
    """The file a ``ctypes.dlopen`` or ``sqlite3.connect`` event opens: a library by its path (a bare name is one the
    loader searches for), a database by its name or its ``file:`` URI (not ``:memory:``)."""
    try:
        name = os.fsdecode(name)
    except TypeError:
        return None
    if event == "ctypes.dlopen":
        return name if os.sep in name else None
    if name.startswith("file:"):
        name = urllib.parse.unquote(name[len("file:"):].partition("?")[0].partition("#")[0])
        name = "/" + name[2:].partition("/")[2] if name.startswith("//") else name  # (file://host/path)
    return None if name in ("", ":memory:") else name


def _identity_or_none(path: str) -> tuple[int, ...] | None:
    try:
        return loaded_code._identity(path)
    except (OSError, ValueError):
        return None


def read() -> dict[str, set[tuple[str, ...]]]:
    """The files opened for reading that this process did not make or empty first, each with the stacks that opened
    it (``loaded_code._openers``)."""
    written = loaded_code._copied(_WRITTEN)
    return {file: loaded_code._copied(stacks) for file, stacks in loaded_code._copied(_READ).items()
            if file not in written}


def changed_since_read(path: str, stacks) -> bool:
    """Whether a file is no longer as it was when any of ``stacks`` first opened it (rewritten, replaced, removed, or
    there now when it was looked for and not found). Only the openers that make a file a run's input count:
    topicaudit's own look for a run's manifest.json before writing it is no read of a plug-in's."""
    first = [_READ_AT[path, stack] for stack in stacks if (path, stack) in _READ_AT]
    if not os.path.isdir(os.path.dirname(path)):
        return False  # its folder is gone: a temporary folder of the fit's own (a child's output read there), absent
    return bool(first) and any(identity != _identity_or_none(path) for identity in first)


def in_folder(call):
    """``os.open`` telling the hook the folder of its ``dir_fd`` (also under ``open(…, opener=…)``)."""
    @functools.wraps(call)
    def opened(path, flags, mode=0o777, *, dir_fd=None):
        try:
            AT.folder = None if dir_fd is None else os.readlink(f"/proc/self/fd/{int(dir_fd)}")
        except (OSError, TypeError, ValueError):
            AT.folder = ""
        AT.depth = 2  # the opener is this wrapper's caller
        try:
            return call(path, flags, mode) if dir_fd is None else call(path, flags, mode, dir_fd=dir_fd)
        finally:
            AT.folder, AT.depth = None, 1
    return opened


def install() -> None:
    """Install the hook (once per process; ``os.open`` is wrapped by ``working_directory``, with its kin)."""
    if not getattr(sys, "_topicaudit_files_read", False):
        sys.addaudithook(_on_audit)
        sys._topicaudit_files_read = True  # type: ignore[attr-defined]
