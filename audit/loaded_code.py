"""Whether a module this process runs is still the file it was loaded from.

Python loads a module once: a plug-in imported, edited, then audited in one process ran the code before the edit
under the digest of the files after it, and a fresh process reused that run (hostile passes XIX-u and XIX-v).

What the file was when it was loaded is recorded instead: an audit hook, installed when topicaudit is first
imported, notes the file's identity and times (``os.stat``: device, inode, size, modification and change times) as
each module's code starts to run. A module is unchanged when its file still has them all. The change time (ctime)
cannot be set back by a user, so an edit that restores the modification time is seen too. A module loaded before
topicaudit was imported has no record; its file counts as changed when its ctime is not older than the process.
Source files opened for reading are held to their files the same way (``changed_files``; shared libraries:
``topicaudit.mapped_files``; code replaced in memory: ``topicaudit.patched_code``).
"""
from __future__ import annotations

import concurrent.futures.thread as futures_thread
import contextlib
import functools
import hashlib
import os
import sys
import threading
import types

from topicaudit.mapped_files import PROCESS_START_NS

# The stat of each module file as its code started to run, by the path the code was compiled from (the module's
# __file__): one entry per load, so a file loaded twice under different contents is seen as changed.
_LOADED: dict[str, list[tuple[int, ...]]] = {}
# The stat of each source file opened (``exec(open(path).read())`` runs "<string>", no module code of that file: XIX-ya
# C2), by absolute path, one entry per opening; topicaudit's own reads (``unnoted``) left out.
_OPENED: dict[str, list[tuple[int, ...]]] = {}
_UNNOTED = threading.local()
# The SHA-256 of each source compiled from text with its file name and size: code a process runs from a file it read
# (``exec(open(path).read())``, hostile pass XIX-zh; the files read: ``topicaudit.files_read``).
_COMPILED: set[tuple[str, str, int]] = set()
_DEEPEST = 200
# Each text compiled and bytes unmarshalled while a fit runs, or under a call of topicaudit's, by (SHA-256, stack as
# ``_openers``, whether a fit ran): code from no file (an environment variable, another process's output) no later
# process can check (XIX-zk, T8, T20); ``fitted_code`` decides who asked for it. The import system's own left out.
_FROM_TEXT: dict[tuple[str, tuple[str, ...], bool], str | bytes] = {}
_OWN_FOLDER = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Standard-library files writing code from their caller's names (dataclasses, namedtuple, ForwardRef): not noted.
_STANDARD = os.path.dirname(os.__file__) + os.sep
GENERATORS = ("/dataclasses.py", "/collections/__init__.py", "/typing.py")
_FITS = [0]  # fits going on (``fitting``)
# The import path as the outermost run, else fit, began (``PLACE[1]``: a name a fit finds on a path changed since is
# found elsewhere by a process started elsewhere, which one deciding on a reuse cannot know: XIX-zq).
PATH_AT_START: list = [None]
_FITS_LOCK = threading.Lock()
# The top-level module names looked for while a fit runs (any thread): a library's optional import during the fit
# (numba's ``cffi`` while it compiles) loads what this process's path finds first, a file in the working directory or
# on PYTHONPATH, or nothing (hostile pass XIX-zo, V9, V22); ``engine.storage.fitted_code`` records where each is found.
_FIT_IMPORTS: dict[str, str | None] = {}
# Set while an audit runs (``running``: its cache entry's choice to its results): what it imports outside its fits
# ran in it too (Ray's GPU probe imports ``amdsmi``, found first in the working directory: XIX-zp, Z1, Z2).
_RUNS = [0]
# Where each name was found as it was looked for (``PLACE``: ``fitted_code._looked_for``, then ``_import_path``): a
# stand-in that takes its folder off ``sys.path`` or puts the real module in ``sys.modules`` is not where it was found
# by the end of the run (XIX-zp, Z3); a name found in two places is kept as such, which no later process finds.
PLACE: list = []
# _FIT_IMPORTS holds every top-level name looked for (XIX-zp Z5); those noted while a fit, or a fit or a run, went on:
_IN_FITS: set[str] = set()
_IN_RUNS: set[str] = set()
_LOOKING = threading.local()
# Plug-in modules being imported (``importing``), and whether one was: what the process learns of its folder or
# environment then is noted as a fit's (``topicaudit.working_directory``, ``topicaudit.environment_reads``: a kernel
# chosen by the folder's name as the plug-in is imported, XIX-zr R1, R2); after it, what the plug-in's own code learns
# (a thread or a hook that import left, asking between it and the run: R11; ``by_plugin``).
_PLUGINS = [0, False]
# The files of a plug-in's modules: the one named and the modules of its package its import loaded.
PLUGIN_FILES: set[str] = set()


def watched() -> bool:
    """Whether a fit, a run or a plug-in's import goes on, or a plug-in was imported (its code may run later)."""
    return _FITS[0] > 0 or _RUNS[0] > 0 or _PLUGINS[0] > 0 or _PLUGINS[1]


def strictly_watched() -> bool:
    """Whether a fit, a run or a plug-in's import goes on: what any code outside the key learns then counts; after a
    plug-in's import, only what the plug-in's own code learns (a test's ``monkeypatch.chdir`` asks too)."""
    return _FITS[0] > 0 or _RUNS[0] > 0 or _PLUGINS[0] > 0


def by_plugin(stack: tuple[str, ...]) -> bool:
    """Whether a stack (``_openers``) runs a plug-in's own code."""
    return any(name in PLUGIN_FILES for name in stack)


class _FitImports:
    """A finder first on ``sys.meta_path`` that finds nothing and notes each top-level name looked for during a fit
    or a run, and each submodule of a package of several folders (``PLACE`` says which), with where it is found then:
    ``importlib.import_module`` raises no "import" audit event, an import statement does (both are noted)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if isinstance(name, str) and (path is None or _FITS[0] > 0 or _RUNS[0] > 0) and PLACE \
                and not getattr(_LOOKING, "on", False):
            _LOOKING.on = True
            try:
                found = PLACE[0](name, path)
            except Exception:  # noqa: BLE001 - a finder must never fail an import
                found = "unfindable"
            finally:
                _LOOKING.on = False
            before = _FIT_IMPORTS.get(name)
            if found is not None and before is not None and before != found:
                found = before if before.startswith("several places: ") else f"several places: {before}, {found}"
            if found is not None:
                _FIT_IMPORTS[name] = found
                _IN_RUNS.update([name] if _FITS[0] > 0 or _RUNS[0] > 0 else [])
                _IN_FITS.update([name] if _FITS[0] > 0 else [])
        return None


def fitting():
    """A learner's fit runs in this block (any thread): code compiled from text meanwhile is noted with its stack."""
    return _going_on(_FITS)


def running():
    """An audit runs in this block (``engine.run.execute_run``): the top-level names it imports are noted."""
    return _going_on(_RUNS)


@contextlib.contextmanager
def _going_on(counter: list[int]):
    """One more fit or run (``counter``) going on in this block; the outermost run, else fit, takes the import path."""
    with _FITS_LOCK:
        counter[0] += 1
        if counter[0] == 1 and (counter is _RUNS or counter is _FITS and _RUNS[0] == 0) and len(PLACE) > 1:
            PATH_AT_START[0] = PLACE[1]()
    try:
        yield
    finally:
        with _FITS_LOCK:
            counter[0] -= 1


@contextlib.contextmanager
def importing(name: str):
    """The plug-in's module ``name`` is imported in this block: what code learns of the working directory or the
    environment meanwhile is noted as a fit's, and what the plug-in's own code learns later too."""
    before = set(sys.modules)
    with _FITS_LOCK:
        _PLUGINS[0] += 1
        _PLUGINS[1] = True
    try:
        yield
    finally:
        with _FITS_LOCK:
            _PLUGINS[0] -= 1
        package = name.partition(".")[0]
        for loaded in {name, *(other for other in set(sys.modules) - before if other.partition(".")[0] == package)}:
            if isinstance(file := getattr(sys.modules.get(loaded), "__file__", None), str):
                PLUGIN_FILES.update({file, os.path.abspath(file)})


@contextlib.contextmanager
def unnoted():
    """Files opened in this block (topicaudit reading a plug-in's files for its digest) are not noted as opened."""
    before = getattr(_UNNOTED, "on", False)
    _UNNOTED.on = True
    try:
        yield
    finally:
        _UNNOTED.on = before


def _identity(path: str) -> tuple[int, ...]:
    found = os.stat(path)
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def _reading(args: tuple) -> bool:
    """Whether an ``open`` event's (path, mode, flags) opens for reading only (a write is an edit, not a load)."""
    mode = args[1] if len(args) > 1 else None
    if isinstance(mode, str):
        return not set(mode) & set("wax+")
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    return flags & os.O_ACCMODE == os.O_RDONLY


def _on_audit(event: str, args: tuple) -> None:
    # Called for every audit event of the process: only a module's code (its body, "<module>") run by exec is noted,
    # a source file opened by the process's own code, texts compiled, and names imported during a fit or a run.
    if event == "import":
        if (_FITS[0] > 0 or _RUNS[0] > 0) and args and isinstance(args[0], str):
            _FIT_IMPORTS.setdefault(args[0].partition(".")[0], None)
            _IN_RUNS.add(args[0].partition(".")[0])
            _IN_FITS.update([args[0].partition(".")[0]] if _FITS[0] > 0 else [])
        return
    if event in ("compile", "marshal.loads") and args and isinstance(args[0], (bytes, str)):
        try:
            text = args[0].encode("utf-8", "surrogatepass") if isinstance(args[0], str) else args[0]
            digest = None  # an import's cached bytecode, unmarshalled, is not hashed
            if event == "compile":
                digest = hashlib.sha256(text).hexdigest()
                _COMPILED.add((digest, str(args[1]) if len(args) > 1 else "", len(text)))
            _note_text(digest, args[0], text, sys._getframe(1))
        except Exception:  # noqa: BLE001 - a hook must never fail a compile
            pass
        return
    if event == "open" and args and type(args[0]) is bytes:
        args = (os.fsdecode(args[0]), *args[1:])
    if event == "open" and args and type(args[0]) is str and args[0].endswith(".py"):
        if not getattr(_UNNOTED, "on", False) and _reading(args):
            try:
                path = os.path.abspath(args[0])
                _OPENED.setdefault(path, []).append(_identity(path))
            except Exception:  # noqa: BLE001 - a hook must never fail an open (a file that is not there: none)
                pass
        return
    if event != "exec" or not args:
        return
    code = args[0]
    if type(code) is not types.CodeType or code.co_name != "<module>" or not code.co_filename.endswith(".py"):
        return
    try:
        _LOADED.setdefault(code.co_filename, []).append(_identity(code.co_filename))
    except Exception:  # noqa: BLE001 - a hook must never fail an import; no record reads as changed
        pass


def _note_text(digest: str | None, text: str | bytes, encoded: bytes, frame) -> None:
    """Keep a text compiled (or bytes unmarshalled) with its stack, when a fit runs or topicaudit's code called."""
    name = frame.f_code.co_filename if frame is not None else "<frozen importlib>"
    if name.startswith("<frozen importlib") or (name.startswith(_STANDARD) and name.endswith(GENERATORS)):
        return  # the import system (the module's file is noted as it runs), or a generator
    stack = _openers(frame)
    fit = _FITS[0] > 0
    if fit or any(name.startswith(_OWN_FOLDER) for name in stack):
        _FROM_TEXT.setdefault((digest or hashlib.sha256(encoded).hexdigest(), stack, fit), text)


def _openers(frame) -> tuple[str, ...]:
    """The code files of the calls on this stack, the innermost first, each once in a row; in a thread, then the
    stack that started it or handed it its task (``_PARENT``)."""
    found: list[str] = []
    while frame is not None and len(found) < _DEEPEST:
        name = frame.f_code.co_filename
        if (not found or found[-1] != name) and frame.f_code not in _TRANSPARENT:
            found.append(name)
        frame = frame.f_back
    return (*found, *getattr(_PARENT, "stack", ()))[:_DEEPEST]


def first_caller(frame):
    """The first frame out from ``frame`` neither the standard library's nor a wrapper's (None: a thread's task)."""
    while frame is not None and (frame.f_code in _TRANSPARENT or frame.f_code.co_filename.startswith(
            ("<frozen ", _STANDARD)) and "-packages" not in frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def handed_down() -> bool:
    return bool(getattr(_PARENT, "stack", ()))  # this thread runs a task another stack handed it


# In a thread, the stack (``_openers``) that started it, or submitted the task it runs: a thread pool's worker
# running ``open`` or ``os.environ.get`` handed to it by a plug-in has no plug-in code on its own stack (XIX-zw Z9).
_PARENT = threading.local()
_TRANSPARENT: set[types.CodeType] = set()  # the wrappers' own frames, no caller's


def _carrying(submit):
    """``ThreadPoolExecutor.submit`` running the task under the submitter's stack, while watched."""
    @functools.wraps(submit)
    def submitted(self, fn, /, *args, **kwargs):
        if not watched() or not callable(fn):
            return submit(self, fn, *args, **kwargs)
        parent = _openers(sys._getframe(1))

        def task(*task_args, **task_kwargs):
            before, _PARENT.stack = getattr(_PARENT, "stack", ()), parent
            try:
                return fn(*task_args, **task_kwargs)
            finally:
                _PARENT.stack = before
        _TRANSPARENT.add(task.__code__)
        return submit(self, task, *args, **kwargs)
    return submitted


def _starting(start):
    """``threading.Thread.start`` keeping the starter's stack for the thread's ``run``, while watched."""
    @functools.wraps(start)
    def started(self):
        if watched():
            self._topicaudit_parent = _openers(sys._getframe(1))
        return start(self)
    return started


def _running(run):
    @functools.wraps(run)
    def ran(self):
        _PARENT.stack = getattr(self, "_topicaudit_parent", ())
        return run(self)
    _TRANSPARENT.add(ran.__code__)
    return ran


def _copied(record):
    """A copy of a record above, again when another thread (Ray beside a fit) added to it meanwhile (it failed)."""
    for _ in range(100):
        try:
            return record.copy()
        except RuntimeError:
            continue
    return record.copy()


def noted_files() -> list[str]:
    """Every source file noted so far: each module's file as its code ran, and each source file opened for reading."""
    return sorted({*_copied(_LOADED), *_copied(_OPENED)})


def compiled() -> set[tuple[str, str, int]]:
    """Each text compiled (SHA-256, file name, size in bytes)."""
    return _copied(_COMPILED)


def from_text() -> dict[tuple[str, tuple[str, ...], bool], str | bytes]:
    """The texts compiled and bytes unmarshalled during a fit or under topicaudit's calls (``_FROM_TEXT``)."""
    return _copied(_FROM_TEXT)


def imported_during_fits() -> tuple[dict[str, str | None], set[str], set[str]]:
    """The module names imported, or looked for and not found, in this process (top-level ones; submodules while a
    fit or a run went on), each with where it was found as it was looked for (None: not noted then, ``PLACE``), those
    noted while a fit ran, and those noted while a fit or a run went on."""
    return _copied(_FIT_IMPORTS), set(_copied(_IN_FITS)), set(_copied(_IN_RUNS))


def changed_since_loaded(module: types.ModuleType) -> bool:
    """Whether ``module``'s file is no longer the file its code was loaded from (edited, replaced, removed).
    A module with no file is never changed."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return False
    try:
        now = _identity(path)
    except (OSError, ValueError):
        return True
    recorded = _LOADED.get(path)
    if recorded:
        return any(seen != now for seen in recorded)
    return now[4] >= PROCESS_START_NS  # loaded before topicaudit: changed while this process ran, or not


def loaded_before_hook(module: types.ModuleType) -> bool:
    """Whether ``module`` has a file and no record of its load (loaded before topicaudit was imported)."""
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and not _LOADED.get(path)


def changed_while_running(path: str) -> bool:
    """Whether the file at ``path`` changed after this process started (or cannot be read). A plug-in loaded before
    topicaudit may have loaded its other files with no trace (``exec_module`` outside ``sys.modules``), so each of
    them is held to the process's start (hostile pass XIX-x, S9)."""
    try:
        return _identity(path)[4] >= PROCESS_START_NS
    except (OSError, ValueError):
        return True


def changed_files(paths, names=None) -> list[str]:
    """Those of ``paths`` (real paths) whose code this process loaded, as any module, and whose file is no longer as
    it was then: a module kept out of ``sys.modules`` (a plug-in loading its helper with ``spec_from_file_location``
    and ``exec_module``) runs its loaded code too, and was not held against its file (hostile pass XIX-x, S1); so does
    a source file the process opened and may have run as text (XIX-ya, C2).
    names: the file names the paths are known by besides their own (a link named as the module)."""
    wanted = set(paths)
    names = {os.path.basename(path) for path in wanted} | set(names or ())
    found = []
    for path, recorded in [*_copied(_LOADED).items(), *_copied(_OPENED).items()]:
        try:
            if os.path.basename(path) not in names or os.path.realpath(path) not in wanted:
                continue
            now = _identity(path)
        except (OSError, ValueError):
            found.append(path)
            continue
        if any(seen != now for seen in recorded):
            found.append(path)
    return found


def install() -> None:
    """Install the audit hook (once per process; hooks cannot be removed, and this one only records)."""
    if not getattr(sys, "_topicaudit_loaded_code_hook", False):
        sys.addaudithook(_on_audit)
        sys.meta_path.insert(0, _FitImports)
        threading.Thread.start = _starting(threading.Thread.start)
        threading.Thread.run = _running(threading.Thread.run)
        futures_thread.ThreadPoolExecutor.submit = _carrying(futures_thread.ThreadPoolExecutor.submit)
        sys._topicaudit_loaded_code_hook = True  # type: ignore[attr-defined]
