"""The code files a run's fitting process loaded from outside every place the cache key digests, kept with the run.

The key (``run_cache.cache_key``) holds topicaudit's source, the keyed libraries, a plug-in's files and what a bare
start of Python loads. Code a start leaves behind (a thread, a trace function, a finder, a wrapper over the import
system) can import more later, from anywhere, under no digest: its edit reused the run before it (XIX-zh). Such
code is a module, a file the process read and compiled (``exec(open(path).read())``), or a file such code read and
turned into code in any other form (stripped, unmarshalled, unpickled: XIX-zk), so the fitting process lists those
files outside the standard library, topicaudit's own source and the keyed libraries, with their digests
(results.json, ``target.loaded_code``), and a finished run is reused only while each still has that content.

A file's content says nothing of whether another process would load it: a library's optional import during the fit
(numba's ``cffi`` while it compiles) runs whatever the process's path finds first, a file in the working directory or
on PYTHONPATH, and a process started elsewhere finds another file, or none (hostile pass XIX-zo, V9, V22). So the
record also holds where each top-level name the fit imported, or looked for, is found (``import NAME``), and where each
listed module's name is (``module NAME``); a run is reused only where those names are found in the same places.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import warnings
from pathlib import Path
from typing import Iterable

import topicaudit.environment_reads as environment_reads
import topicaudit.files_read as files_read
import topicaudit.loaded_code as loaded_code
import topicaudit.working_directory as working_directory
from topicaudit.inputs import integrity_key
from topicaudit.engine.storage.import_places import (ABSENT, IMPORT_PATH, IN_THE_KEY, here, import_path_read,
                                                     where)
from topicaudit.engine.storage.key_places import KEYED, installed, keyed_elsewhere, opened_outside, own, standard

# A file read and compiled is looked for among the files read up to this size (a corpus is not code).
_LARGEST_READ = 4 * 2**20
# The value of a ``loaded_outside`` entry for code that reached the process from no file (its key names the code that
# compiled it): no later process can check it, so ``changed`` always reports it and its run is never reused.
UNCHECKABLE = "uncheckable"
# A text is looked for in the files listed up to this size, and only when some code asked for one to run.
_LARGEST_SEARCHED = 64 * 2**20
_WARNED: set[str] = set()
# Entries of a record naming a module rather than a file: ``import NAME``, a top-level name a fit imported or looked
# for, checked in every later process; ``module NAME``, the name of a listed module loaded outside a fit, checked
# where a process has loaded that name too (a script's or test's own modules are not every process's).
IMPORT, MODULE = "import ", "module "
# Digests taken in this process, by the file's identity (device, inode, size, times): a run saves many models.
_DIGESTS: dict[tuple, str] = {}


def loaded_outside(keyed: Iterable[str] = KEYED, driver: bool = True) -> dict[str, str]:
    """Each code file this process loaded from outside the key's digests (module files, source files opened, and
    files read whose text was compiled), by absolute path, with its SHA-256. keyed: the keyed libraries' top-level
    modules, whose installed files their versions stand for. Called at every model saved, in the driver and in each
    fit's process: decisions are kept per file, and a file's bytes are hashed again only when its identity changed.
    With code listed, the driver's import path too (``IMPORT_PATH``; a Ray worker's follows from the driver's), and
    the variables such code read (``ENVIRONMENT``), and the command line when it read it or when the driver ran the
    script that defines its learner (``ARGUMENTS``)."""
    keyed = tuple(sorted(set(keyed)))
    files = {file for module in list(sys.modules.values())
             if isinstance(file := getattr(module, "__file__", None), str)}
    files.update(loaded_code.noted_files())
    read, compiled = files_read.read(), loaded_code.compiled()
    files.update(name for _, name, _ in compiled if _is_file(name))
    texts = {digest for digest, _, _ in compiled}
    sizes = {size for _, _, size in compiled if size <= _LARGEST_READ}
    files.update(file for file, stacks in read.items()
                 if file not in files and _read_as_code(file, stacks, keyed, sizes, texts))
    found, secret = {}, os.path.realpath(integrity_key.key_file())  # (its digest is HMAC's key: XIX-zw Z8)
    for file in sorted(files):
        path = _absolute(file)
        if not keyed_elsewhere(path, keyed) and not (path.endswith(integrity_key.FILE_NAME)
                                                      and os.path.realpath(path) == secret):  # a file read, then changed: as it was at the end (XIX-zv C10)
            by = [stack for stack in read.get(file, ()) if opened_outside(stack, keyed)]
            found[path] = UNCHECKABLE if files_read.changed_since_read(file, by) else _digest_here(path)
    found.update(_from_no_file(found, set(keyed)))
    found.update(_names(found))
    found.update(_working_directory(found, set(keyed), driver))
    found.update(_environment(set(keyed), driver))
    found.update({IMPORT_PATH: import_path_read()} if driver and _PLUGIN_RUNS[0] > 0 else {})  # (XIX-zu FP2)
    return found


def _environment(keyed: set[str], driver: bool) -> dict[str, str]:
    """``environment NAME`` for each variable code outside the key read, itself or through the standard library
    (``_requester``; a library's own read is its own): a plug-in choosing its code by ``MODE`` had its run reused by a
    process with another value; kept as first read (``environment_reads.first_value``). A Ray
    worker's reads hold ``IN_A_WORKER``, which the driver settles with its own value (``settled``): a worker's
    environment is the driver's and Ray's (its ``OMP_NUM_THREADS``), which no later process has."""
    keys = tuple(sorted(keyed))
    names = {name for stack, read in environment_reads.read_by().items() if _asker(stack, keys, through=False)
             for name in read}
    found = {f"{ENVIRONMENT}{name}": environment_reads.first_value(name) if driver else IN_A_WORKER
             for name in sorted(names - {ARGUMENTS, ORIGINAL, integrity_key.ENVIRONMENT_VARIABLE})}  # (XIX-zv C9)
    if driver and (ARGUMENTS in names or "__mp_main__" in sys.modules):
        found[ARGUMENTS] = environment_reads.first_value(ARGUMENTS)  # or the script's settings
    if driver and ORIGINAL in names:
        found[ORIGINAL] = environment_reads.first_value(ORIGINAL)
    return found


ENVIRONMENT, IN_A_WORKER = "environment ", "read in a Ray worker"


def settled(record: dict[str, str]) -> dict[str, str]:
    """A record with the variables its Ray workers read (``IN_A_WORKER``) as this process, their driver, has them."""
    return {entry: environment_reads.variable(entry[len(ENVIRONMENT):]) if value == IN_A_WORKER
            and entry.startswith(ENVIRONMENT) else value for entry, value in record.items()}


# The entry of a record holding the command line's arguments, when code outside the key read ``sys.argv`` (a plug-in
# poisoning on ``"--json" in sys.argv``, XIX-zt Z15) or the audit's new process ran the calling script (a learner it
# defines, ``__main__:Class``: a script reading ``--strength 50`` had the run of ``--strength 0`` reused, XIX-zf N2;
# the new process is given the caller's ``sys.argv``); and ``sys.orig_argv``, the interpreter's, when code read it.
ARGUMENTS, ORIGINAL = environment_reads.ARGUMENTS, environment_reads.ORIGINAL


def _read_as_code(file: str, stacks: set[tuple[str, ...]], keyed: tuple[str, ...], sizes: set[int],
                  texts: set[str]) -> bool:
    """Whether a file read (not as a module) counts as code: a regular file opened by code outside the key's digests
    (``opened_outside``), or whose bytes are a text the process compiled (only a file of a compiled text's size is
    hashed). Who opened it, and its size, are decided once per file and number of openings."""
    seen = _READ_DECIDED.get(file)
    if seen is None or seen[0] != len(stacks):
        try:
            found = os.stat(file)
            size = found.st_size if stat.S_ISREG(found.st_mode) \
                and not os.path.realpath(file).startswith(_SYSTEM) else None  # /dev/shm's, /proc/self/root/'s: files
        except FileNotFoundError:
            size = -1  # looked for and not found: a settings file made later is another input (XIX-zv C3)
        except (OSError, ValueError):
            size = None
        seen = (len(stacks), any(opened_outside(stack, keyed) for stack in list(stacks)  # (an import's cached code)
                                 if not (file.endswith(".pyc") and stack[0].startswith("<frozen importlib"))), size)
        _READ_DECIDED[file] = seen
    return seen[2] is not None and (seen[1] or (seen[2] in sizes and _digest_here(file) in texts))


# Per file read: (its number of openings when decided, whether code outside the key opened it, its size; None for
# no regular file; -1 for none there). A process's own state is no code.
_READ_DECIDED: dict[str, tuple[int, bool, int | None]] = {}
_SYSTEM = ("/proc/", "/sys/")


def _is_file(name: str) -> bool:
    if name not in _IS_FILE:
        _IS_FILE[name] = os.path.isfile(name)
    return _IS_FILE[name]


def _absolute(file: str) -> str:
    if file not in _ABSOLUTE:
        _ABSOLUTE[file] = os.path.abspath(file)
    return _ABSOLUTE[file]


_IS_FILE: dict[str, bool] = {}
_ABSOLUTE: dict[str, str] = {}


def _names(listed: dict[str, str]) -> dict[str, str]:
    """``import NAME`` for each name a fit or a run in this process looked for, where it was found then (a stand-in
    that hides itself afterwards: XIX-zp Z3), but a run's found in the key (Ray puts its psutil first on ``sys.path``
    as it is imported, which a process deciding on a reuse has not done); ``module NAME`` for each other top-level
    module loaded from a listed file (its file; where it was looked for when that was another source file: a
    stand-in that put the real module in its place), and each name looked for before, not loaded, still found there
    outside the key (Z5: a module a test imported and forgot, its folder gone, is no code of this run)."""
    imported, in_fits, in_runs = loaded_code.imported_during_fits()
    found = {}
    for name, place in sorted(imported.items()):
        place = place or where(name)
        if name not in _NOT_NAMES and name in in_runs and (name in in_fits or place != IN_THE_KEY):
            found[f"{IMPORT}{name}"] = place
        elif name not in in_runs and name not in sys.modules and place not in (ABSENT, IN_THE_KEY) \
                and where(name) == place:
            found[f"{MODULE}{name}"] = place  # a stand-in that failed as a plug-in was imported
    for name, module in sorted(list(sys.modules.items())):
        file = getattr(module, "__file__", None)
        if "." not in name and name not in _NOT_NAMES and name not in in_runs and isinstance(file, str) \
                and _absolute(file) in listed:
            here, looked = where(name), imported.get(name)  # an extension module loaded under another name: here
            found[f"{MODULE}{name}"] = looked if looked and looked != here and looked.endswith(".py") else here
    return found


# The scripts a process runs: named by how it started, not found on its path.
_NOT_NAMES = ("__main__", "__mp_main__")


def _working_directory(listed: dict[str, str], keyed: set[str], driver: bool = True) -> dict[str, str]:
    """``HERE``: the working directory a fit, a run or a plug-in's import read or ran a listed file in by a name
    relative to it that no name's lookup gave (an ``import NAME``'s place, a script's), or that code outside the key
    asked for (``_requester``, through the libraries it called: ``os.getcwd() + "/helper.py"``, a kernel's name built
    from the folder's, ``np.loadtxt("settings.txt")``): a process started elsewhere runs other code (hostile passes
    XIX-zq Q2, Q7; XIX-zr); and during a plug-in's run, in the driver, asked or not (``plugin_run``). Several
    directories (a fit that moved) are found by no process."""
    placed = {place for entry, place in listed.items() if entry.startswith((IMPORT, MODULE))}  # a plug-in found here
    placed.update(_absolute(file) for name in _NOT_NAMES  # a script, run by the path its process was given
                  if isinstance(file := getattr(sys.modules.get(name), "__file__", None), str))
    files, asked, keys = working_directory.in_working_directory(), working_directory.asked_where(), tuple(sorted(keyed))
    noted = {here for file, here in files.items() if file in listed and file not in placed}
    noted.update(here for stack, here in asked.items() if _asker(stack, keys))
    noted.update([here()] if driver and _PLUGIN_RUNS[0] > 0 else [])
    return {HERE: os.pathsep.join(sorted(noted))} if noted else {}


# Set while a run of a plug-in learner or vocabulary step goes on (``plugin_run``).
_PLUGIN_RUNS = [0]


@contextlib.contextmanager
def plugin_run(plugin: bool):
    """A run goes on in this block; plugin: its learner or vocabulary step is a plug-in, whose record then holds the
    working directory whether its code asked or not. Each pass over the ways a plug-in learns its folder found more
    (a fork's child asking, a path relative to a descriptor of it, a link the plug-in made to ``/proc/self/cwd``, the
    original behind the wrapped ``os.getcwd``, the import system listing it: hostile passes XIX-zq, zr, zt): a
    plug-in's run is reused from the folder it was fitted in, and only there."""
    _PLUGIN_RUNS[0] += 1 if plugin else 0
    try:
        yield
    finally:
        _PLUGIN_RUNS[0] -= 1 if plugin else 0


# The entry of a record holding the working directory its files depend on, checked against the deciding process's.
HERE = "working directory"


def _asker(stack: tuple[str, ...], keyed: tuple[str, ...], through: bool = True) -> bool:
    """``_requester`` (through libraries, or not), once per stack (a test session notes thousands; a record per model
    saved). A variable is counted as read by code outside the key only when no library read it on its own behalf:
    numba's import reads every variable of the environment (its ``NUMBA_*`` settings), and a plug-in importing it had
    its run keyed by ``OLDPWD`` and ``SHLVL`` (hostile pass XIX-zt's rerun)."""
    if (stack, keyed, through) not in _ASKERS:
        _ASKERS[(stack, keyed, through)] = _requester(stack, set(keyed), through) is not None
    return _ASKERS[(stack, keyed, through)]


_ASKERS: dict[tuple[tuple[str, ...], tuple[str, ...], bool], bool] = {}


def _from_no_file(listed: dict[str, str], keyed: set[str]) -> dict[str, str]:
    """An entry (``UNCHECKABLE``) for each code outside the key that, during a fit or inside a call of topicaudit's,
    compiled a text (or unmarshalled bytes) found neither in its own file nor in a file listed: code from an
    environment variable or another process's output ran in the fit and no file can key it (XIX-zk T8, T20)."""
    found, contents = {}, {}
    for (_, stack, fit), text in loaded_code.from_text().items():
        requester = _requester(stack, keyed)
        if requester is None or not text.strip():
            continue
        at = stack.index(requester)
        if not fit and not any(name.startswith("/") and own(Path(name)) for name in stack[at + 1:]):
            continue  # the script calling topicaudit, not code inside its calls
        wanted = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        if any(wanted in _content(file, contents) for file in (requester, *listed)):
            continue
        found[f"<code from no file, run by {requester}>"] = UNCHECKABLE
    for key in sorted(set(found) - _WARNED):
        _WARNED.add(key)
        warnings.warn(f"{key[1:-1]} (a text from no file this process read: an environment variable, another "
                      "process's output): no later process can check that code, so this run will not be reused "
                      "from the run cache", RuntimeWarning, stacklevel=3)
    return found


def _requester(stack: tuple[str, ...], keyed: set[str], through: bool = False) -> str | None:
    """The code that asked for a text to run (a stack, innermost first): the first call that is neither the standard
    library's nor frozen; None when it is a keyed library's (numba writes its wrappers so), topicaudit's own, a
    standard-library code generator's (``loaded_code.GENERATORS``) or an installed distribution's: attrs writes a
    class's methods from its names as dataclasses does, for dp_accounting, topicaudit and plug-ins alike. through:
    a library's call passes it on too, but topicaudit's (``np.loadtxt("settings.txt")`` in a fit is the fit's: R12)."""
    for name in stack:
        if name.startswith("<frozen "):
            continue
        if not name.startswith("/"):
            return name  # code with no file, run from a string
        path = Path(name)
        if standard(path):
            if name.endswith(loaded_code.GENERATORS):
                return None
            continue  # the standard library's other calls pass the request on
        if through and not own(path) and (keyed_elsewhere(path, keyed) or installed(path) and path.name not in _STARTS):
            continue
        if keyed_elsewhere(path, keyed) or (path.name not in _STARTS and installed(path)):
            return None
        return name
    return None


# Start-up files, wherever they lie (a sitecustomize in site-packages is no library).
_STARTS = ("sitecustomize.py", "usercustomize.py")


def _content(file: str, contents: dict[str, bytes]) -> bytes:
    """A file's bytes (b"" for none, or one too large), read once per call of ``_from_no_file``."""
    if file not in contents:
        contents[file] = b""
        try:
            if _regular(file) and os.path.getsize(file) <= _LARGEST_SEARCHED:
                with loaded_code.unnoted(), open(file, "rb") as handle:
                    contents[file] = handle.read()
        except OSError:
            pass
    return contents[file]


def _digest_here(path: str | Path) -> str:
    """``file_digest``, taken once per identity of the file in this process."""
    try:
        seen = os.stat(path)
        identity = (str(path), seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
    except OSError:
        return file_digest(Path(path))
    if identity not in _DIGESTS:
        _DIGESTS[identity] = file_digest(Path(path))
    return _DIGESTS[identity]


def changed(recorded: dict[str, str] | None, names: bool = True) -> list[str]:
    """The entries of ``recorded`` (``loaded_outside`` when the run was fitted) not as they were (a file's content,
    where a name is found), and the files of modules this process loaded under a recorded file's name from
    elsewhere: a start-up file choosing its patch's folder by an environment variable ran another ci_patches.py, and
    the run of the first was reused (hostile pass XIX-zh, T13); names=False: the recorded entries alone."""
    recorded = recorded or {}
    present = now(recorded)
    found = {entry for entry, value in recorded.items() if value == UNCHECKABLE or present[entry] != value}
    tails = {"/".join(Path(file).parts[at:]) for file in recorded if recorded[file] != UNCHECKABLE
             and not file.startswith((IMPORT, MODULE)) for at in range(1, len(Path(file).parts))}
    for name, module in list(sys.modules.items()) if names else []:
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and os.path.abspath(file) not in recorded:
            tail = _tail(name, Path(file))
            if tail is not None and tail in tails and not keyed_elsewhere(os.path.abspath(file)):
                found.add(os.path.abspath(file))
    return sorted(found)


def now(recorded: dict[str, str]) -> dict[str, str]:
    """Each entry of a record as found here: a file's digest, a name's place (a ``module NAME`` not loaded: as is)."""
    found, looked_for = {}, loaded_code.imported_during_fits()[0]
    for entry, value in recorded.items():
        if entry.startswith(IMPORT):
            found[entry] = where(entry[len(IMPORT):])
        elif entry == HERE:
            found[entry] = here()
        elif entry.startswith(ENVIRONMENT):
            found[entry] = environment_reads.variable(entry[len(ENVIRONMENT):])
        elif entry in (ARGUMENTS, ORIGINAL):
            found[entry] = environment_reads.value(entry)
        elif entry == IMPORT_PATH:
            found[entry] = import_path_read()
        elif entry.startswith(MODULE):
            name = entry[len(MODULE):]  # compared where this process loaded the name, or looked for it (Z5)
            loaded = isinstance(getattr(sys.modules.get(name), "__file__", None), str) or name in looked_for
            found[entry] = where(name) if loaded else value
        else:
            found[entry] = value if value == UNCHECKABLE else _digest_here(entry)
    return found


def _tail(name: str, path: Path) -> str | None:
    """The end of a path a module of this name has (``pkg/mod.py``, ``pkg/__init__.py``); None for a module whose
    file does not carry its name (``__main__``)."""
    parts = name.split(".")
    if path.name.startswith("__init__."):
        return "/".join([*parts, path.name])
    return "/".join([*parts[:-1], path.name]) if path.name.split(".")[0] == parts[-1] else None


def file_digest(path: Path) -> str:
    """SHA-256 of a file; a module inside an archive (zipimport: its ``__file__`` names no file) by the archive's."""
    place = path
    while not place.is_file() and place != place.parent:
        if place.exists():
            return "absent"
        place = place.parent
    try:
        with loaded_code.unnoted(), open(place, "rb") as handle:  # topicaudit's read, not the process loading code
            digest = hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return "absent"
    return digest if place == path else f"archive {place}: {digest}"


def _regular(file: str) -> bool:
    try:
        return not file.startswith(_SYSTEM) and os.path.isfile(file)
    except OSError:
        return False
