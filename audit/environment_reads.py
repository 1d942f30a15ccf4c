"""The environment variables and command-line arguments code read while a fit or a run went on, or once a plug-in
was imported.

A plug-in can choose its code by a variable (``if os.environ.get("MODE") == "weak": ...``): its run's record held its
files, unchanged, and a process with another value reused the run. So ``os.environ[name]`` (and so ``get``, ``in``,
``os.getenv``, a copy of the environment) notes the stack that read each name; ``engine.storage.fitted_code`` decides
whose code read it and keys the run by each such variable (``environment NAME``: a digest of its value, never the
value, which may be a secret). ``PWD``, the shell's name for the working directory, is an ask for the folder too
(``topicaudit.working_directory``). Not seen: ``os.environ._data``, ``posix.environ``, C's ``getenv``. So too
``sys.argv`` (a plug-in poisoning when ``"--json" in sys.argv`` had a run of ``check CFG --json v.json`` reused by
``check CFG``, hostile pass XIX-zt Z15): a list that notes the stacks reading it (an index, a slice, ``in``,
iteration, its length); ``str.join`` and C code read a list's items directly, unseen. ``sys.orig_argv`` counts as
the command line too, and so does opening ``/proc/self/cmdline``; opening ``/proc/self/environ`` reads every variable
(hostile pass XIX-zu).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys

import topicaudit.loaded_code as loaded_code
import topicaudit.working_directory as working_directory

# Each stack (``loaded_code._openers``) that read a variable, with the names it read: while a fit, a run or a plug-in's
# import went on; and after a plug-in's import (``_LATER``: the plug-in's own reads count, ``loaded_code.by_plugin``).
_READ: dict[tuple[str, ...], set[str]] = {}
_LATER: dict[tuple[str, ...], set[str]] = {}
# What each name held when code first read it (a plug-in that removed its variable, or its ``--json`` argument, as it
# was imported left nothing for a record made later to see: hostile pass XIX-zu, ZP, ZQ).
_FIRST: dict[str, str] = {}


def _reading(getitem):
    """``os.environ[name]`` noting the stack that reads ``name``, while watched (``loaded_code.watched``)."""
    @functools.wraps(getitem)
    def read(self, key):
        if loaded_code.watched():
            _note(key, sys._getframe(1))
        return getitem(self, key)
    return read


def _reading_all(method):
    """``os.environ``'s iteration, ``repr`` and length (``list(os.environ)``, ``keys()``, a printout), noting every
    name."""
    @functools.wraps(method)
    def read(self, *args):
        if loaded_code.watched():
            for name in list(self._data):
                _note(self.decodekey(name), sys._getframe(1))
        return method(self, *args)
    return read


def _note(key, frame) -> None:
    try:
        name = os.fsdecode(key)
        caller = loaded_code.first_caller(frame)  # the standard library passes the read on (``get``, ``os.getenv``)
        if caller is None and not loaded_code.handed_down() \
                or caller is not None and caller.f_code.co_filename.startswith(loaded_code._OWN_FOLDER):
            return  # topicaudit's own settings (a thread's task handed down: its stack decides, ``fitted_code``)
        if name == "PWD":
            working_directory._relative(None, frame)  # (a variable may be named "sys.argv": kept as arguments read)
        (_READ if loaded_code.strictly_watched() else _LATER).setdefault(loaded_code._openers(frame), set()).add(name)
        if name not in _FIRST:
            _FIRST[name] = value(name)
    except Exception:  # noqa: BLE001 - a read of the environment must never fail for this (a key of another type)
        pass


class _Arguments(list):
    """``sys.argv`` (or ``sys.orig_argv``: ``name``), noting the stacks that read it while watched; pickled as a plain
    list (a child process unpickling it needs no topicaudit)."""
    name = "sys.argv"

    def __reduce__(self):  # ``copy.copy``, ``copy.deepcopy`` and ``pickle.dumps`` read it whole (XIX-zv C7)
        if loaded_code.watched():
            _note(self.name, sys._getframe(1))
        return list, (list.copy(self),)


def _noting(method):
    """A method of ``list`` that notes the stack reading ``sys.argv`` through it (``copy``, ``count``, ``str``…)."""
    @functools.wraps(method)
    def read(self, *args):
        if loaded_code.watched():
            _note(self.name, sys._getframe(1))
        return method(self, *args)
    return read


for _method in ("__getitem__", "__iter__", "__contains__", "__len__", "copy", "count", "index", "__repr__", "__str__",
                "__reversed__", "__eq__", "__ne__", "__add__", "__mul__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(_Arguments, _method, _noting(getattr(list, _method)))


# The names under which a read of the command line is noted among the variables (``fitted_code`` keys such a run by
# them): ``sys.argv``, and ``sys.orig_argv`` (the interpreter's own, with its flags; ``/proc/self/cmdline``).
ARGUMENTS, ORIGINAL = "sys.argv", "sys.orig_argv"


def _on_audit(event: str, args: tuple) -> None:
    # Called for every audit event: while watched, a read-only open of this process's ``environ`` or ``cmdline`` file
    # is a read of every variable, or of the command line. Only a name ending so is resolved.
    if event != "open" or not args or not loaded_code.watched() or not loaded_code._reading(args):
        return
    try:
        name = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else ""
        if os.path.basename(name) not in ("environ", "cmdline"):
            return
        found = re.fullmatch(rf"/proc/{os.getpid()}(?:/task/\d+)?/(environ|cmdline)", os.path.realpath(name))
        if found and found.group(1) == "cmdline":
            _note(ORIGINAL, sys._getframe(1))
        elif found:
            for variable_name in list(os.environ._data):
                _note(os.environ.decodekey(variable_name), sys._getframe(1))
    except Exception:  # noqa: BLE001 - a hook must never fail an open
        pass


def read_by() -> dict[tuple[str, ...], set[str]]:
    """The stacks that read variables, with the names each read (after a plug-in's import, the plug-in's own)."""
    found = {stack: set(names) for stack, names in loaded_code._copied(_LATER).items() if loaded_code.by_plugin(stack)}
    for stack, names in loaded_code._copied(_READ).items():
        found.setdefault(stack, set()).update(names)
    return found


def first_value(name: str) -> str:
    """What ``name`` (a variable, ``ARGUMENTS`` or ``ORIGINAL``) held when code first read it; as now if never read."""
    return _FIRST.get(name) or value(name)


def _listed(given) -> str:
    return json.dumps([str(argument) for argument in list.copy(given)] if isinstance(given, list) else [])


def value(name: str) -> str:
    """What a record keeps of a variable, or of ``ARGUMENTS`` or ``ORIGINAL``, as it is now: the whole list
    (``python ap.py`` and ``python /abs/ap.py`` differ to a plug-in reading ``sys.argv[0]``, XIX-zu ZA0)."""
    if name in (ARGUMENTS, ORIGINAL):
        return _listed(getattr(sys, name[len("sys."):], None))
    return variable(name)


def variable(name: str) -> str:
    """What a record keeps of a variable: a digest of its value after a prefix of topicaudit's, or ``absent``. A plain
    SHA-256 of a value is what HMAC-SHA256 keys with when that value is a key over 64 bytes: a plug-in that copied the
    environment put the integrity key's into results.json, and a forger MACed a manifest with it (XIX-zv C9); that
    variable is never kept (``fitted_code``), and no record holds a plain SHA-256 of any value."""
    held = os.environ.get(name)
    return "absent" if held is None else hashlib.sha256(_PREFIX + held.encode("utf-8", "surrogateescape")).hexdigest()


_PREFIX = b"topicaudit: a variable's value\0"


def install() -> None:
    """Wrap ``os.environ``'s reads (once per process: ``os.environb`` shares the class), ``sys.argv`` and
    ``sys.orig_argv``, and watch opens of ``/proc/self/environ`` and ``cmdline``."""
    if not getattr(sys, "_topicaudit_environment_reads", False):
        environment = type(os.environ)
        environment.__getitem__ = _reading(environment.__getitem__)
        environment.__iter__ = _reading_all(environment.__iter__)
        environment.__repr__ = _reading_all(environment.__repr__)
        environment.__len__ = _reading_all(environment.__len__)  # XIX-zv C8
        sys.addaudithook(_on_audit)
        for name in (ARGUMENTS, ORIGINAL):
            attribute = name[len("sys."):]
            if type(getattr(sys, attribute, None)) is list:
                noting = _Arguments(getattr(sys, attribute))
                noting.name = name
                setattr(sys, attribute, noting)
        sys._topicaudit_environment_reads = True  # type: ignore[attr-defined]
