"""What this process learnt of its working directory while a fit, a run or a plug-in's import went on, and what a
plug-in's own code learnt of it after its import.

A plug-in can choose its code by where it runs: load ``os.getcwd() + "/helper.py"``, import ``"k_" +
basename(getcwd())``, test whether a flag file exists, list the folder, read a relative settings file, run ``ls``.
Its run's record held the files it ran, unchanged, so a process started in another folder, whose fit would run other
code, reused the run (hostile passes XIX-zq Q2, Q7; XIX-zr). So the stacks that asked for the folder, or used a path
relative to it (or ``/proc/self/cwd``, or read ``PWD``: ``topicaudit.environment_reads``), are noted with its answer,
and the files run or read by a relative name with it; ``engine.storage.fitted_code`` decides whose code asked and keys
the run by the folder (its ``"working directory"``; a plug-in's run holds it whatever its code asked, as every pass
found more ways to learn it: ``fitted_code.plugin_run``). From a plug-in's import on, its code can run at any time (a
thread the import started asked between it and the run: XIX-zr R11), so from then on what the plug-in's own code asks
counts too.

Nothing raises an audit event for ``os.getcwd`` or ``os.stat``: those functions are wrapped (``install``), and each
wrapper is counted wherever the function is in ``os.supports_dir_fd`` and its kin, so code choosing
descriptor-relative calls by those sets (``topicaudit.owned_folders``, ``shutil.rmtree``'s guard against links)
still does.
"""
from __future__ import annotations

import functools
import os
import sys
import types

import topicaudit.files_read as files_read
import topicaudit.loaded_code as loaded_code

# Each file run as module code, or read, by a name relative to the working directory, with it (``run_path("h.py")``).
_HERE: dict[str, str] = {}
# Each stack (``loaded_code._openers``) that asked for the working directory or used a path relative to it, with it:
# while a fit, a run or a plug-in's import went on; and after a plug-in's import (``_LATER``: the plug-in's own count).
_ASKED: dict[tuple[str, ...], str] = {}
_LATER: dict[tuple[str, ...], str] = {}
_GETCWD = os.getcwd  # this module's own question, before the wrapper
_LISTING = ("os.listdir", "os.scandir")
_STARTING = ("subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn")  # a child runs in the folder
_ABLE = ("supports_dir_fd", "supports_fd", "supports_follow_symlinks", "supports_effective_ids")


def _on_audit(event: str, args: tuple) -> None:
    # Called for every audit event: while watched, the folder listed, another process started in it, a file opened for
    # reading or a module's code run by a name relative to it. Nothing else is looked at (``sys._getframe`` is itself
    # an audited event: taken only for a relative name).
    if not loaded_code.watched():
        return
    if event in _LISTING or event in _STARTING:
        where = (args[0] if args else None) if event in _LISTING else args[2] if event == "subprocess.Popen" else None
        if _relative_name(where, allow_none=True):
            _relative(where, sys._getframe(1))
    elif event == "open" and args and _relative_name(args[0]) and loaded_code._reading(args) \
            and not getattr(loaded_code._UNNOTED, "on", False) and not getattr(files_read.AT, "folder", None):
        _note_here(os.fsdecode(args[0]), sys._getframe(1))
    elif event == "exec" and args and type(args[0]) is types.CodeType and args[0].co_name == "<module>" \
            and not os.path.isabs(args[0].co_filename):
        _note_here(args[0].co_filename)


def _relative_name(path, allow_none: bool = False) -> bool:
    """Whether ``path`` names a file relative to the working directory (None: the folder itself, when allowed), or
    through a process's link to it (``/proc/self/cwd``)."""
    if path is None:
        return allow_none
    try:
        name = os.fsdecode(os.fspath(path)) if isinstance(path, (str, bytes, os.PathLike)) else None
    except TypeError:
        return False
    return name is not None and (not name.startswith("/") or name.startswith("/proc/")
                                 and "cwd" in os.path.normpath(name).split("/")[3:6])


def _note_here(given: str, frame=None) -> None:
    """Note a file read or run by a name (``given``) relative to the working directory; one opened (``frame``: its
    opener) is an ask too, there or not (a settings file the first folder lacked: XIX-zr, R8)."""
    try:
        if frame is not None:
            _relative(given, frame)
        if loaded_code.watched() and not os.path.isabs(given):
            here = _GETCWD()
            _HERE.setdefault(os.path.normpath(os.path.join(here, given)), here)
    except Exception:  # noqa: BLE001 - a hook must never fail an open or an import (no folder: nothing)
        pass


def _relative(path, frame) -> None:
    """Note the stack as asking for the working directory when ``path`` (None: ".") is relative; not the import
    system's (a ``''`` entry of ``sys.path``: the names it finds are placed), nor topicaudit's own calls."""
    try:
        if not loaded_code.watched() or not _relative_name(path, allow_none=True) \
                or frame.f_code.co_filename.startswith("<frozen importlib"):
            return
        caller = loaded_code.first_caller(frame)  # the standard library (and a wrapper) passes the question on
        if caller is not None and not caller.f_code.co_filename.startswith(loaded_code._OWN_FOLDER):
            noted = _ASKED if loaded_code.strictly_watched() else _LATER
            noted.setdefault(loaded_code._openers(frame), os.fsdecode(_GETCWD()))
    except Exception:  # noqa: BLE001 - a hook must never fail a call (a descriptor, another type: nothing)
        pass


def _asking(getcwd):
    """``getcwd`` noting the stack that asks (so ``pathlib.Path.cwd``, ``os.path.abspath`` of a relative path)."""
    @functools.wraps(getcwd)
    def asked():
        if loaded_code.watched():
            _relative(None, sys._getframe(1))
        return getcwd()
    return asked


def _by_path(call):
    """``call`` (``os.stat``, ``lstat``, ``access``, ``readlink``) noting a relative path: a fit testing whether a
    flag file exists in the working directory chose its code by it (XIX-zr, R3)."""
    @functools.wraps(call)
    def called(path, *args, **kwargs):
        if loaded_code.watched() and _relative_name(path) and kwargs.get("dir_fd") is None:
            _relative(path, sys._getframe(1))
        return call(path, *args, **kwargs)
    return _counted(call, called)


def _counted(call, wrapper):
    """``wrapper``, counted wherever ``call`` is in ``os.supports_dir_fd`` and its kin."""
    for able in (getattr(os, name) for name in _ABLE if hasattr(os, name)):
        if call in able:
            able.add(wrapper)
    return wrapper


def in_working_directory() -> dict[str, str]:
    """The files read or run by a name relative to the working directory, with it (``_HERE``)."""
    return loaded_code._copied(_HERE)


def asked_where() -> dict[tuple[str, ...], str]:
    """The stacks that asked for the working directory, or used a path relative to it, with its answer: while a fit,
    a run or a plug-in's import went on, or the plug-in's own code later (``loaded_code.by_plugin``)."""
    later = loaded_code._copied(_LATER)
    return {**{stack: here for stack, here in later.items() if loaded_code.by_plugin(stack)},
            **loaded_code._copied(_ASKED)}


def install() -> None:
    """Install the hook and the wrappers (once per process; ``posix.getcwd`` is ``os.getcwd``: XIX-zr, R5)."""
    if not getattr(sys, "_topicaudit_working_directory", False):
        sys.addaudithook(_on_audit)
        os.getcwd, os.getcwdb = _asking(os.getcwd), _asking(os.getcwdb)
        native = sys.modules.get(os.name)
        if native is not None:
            native.getcwd, native.getcwdb = os.getcwd, os.getcwdb
        os.stat, os.lstat, os.access = _by_path(os.stat), _by_path(os.lstat), _by_path(os.access)
        os.readlink = _by_path(os.readlink)  # ``/proc/self/cwd``
        os.open = _counted(os.open, files_read.in_folder(os.open))
        if native is not None:
            native.open = os.open  # ``posix.open(name, dir_fd=…)`` (XIX-zw Z5)
        sys._topicaudit_working_directory = True  # type: ignore[attr-defined]
