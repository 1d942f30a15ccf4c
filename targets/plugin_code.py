"""Where a plug-in's code lives, and its digest: what the run cache keys a plug-in's code by
(``run_cache.cache_key``: an edit to it is another run) and which files a check must never write over.

Found without importing the plug-in: its top-level module or package (every folder Python can import it from),
and the modules and packages beside it, which it may import. A version says nothing of the files (a package
reinstalled after an edit at the same version), so installed plug-ins are digested too.

A plug-in imported, then edited in the same process, runs other code than its files say: ``as_loaded`` drops the
digest then (``topicaudit.loaded_code``).
"""
from __future__ import annotations

import _imp
import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

from topicaudit.loaded_code import (changed_files, changed_since_loaded, changed_while_running, loaded_before_hook,
                                    unnoted)
from topicaudit.mapped_files import changed_mapped
from topicaudit.patched_code import patched_since_loaded
from topicaudit.process_state import command_memo


def code_files(path: str) -> list[Path]:
    """The code files a plug-in's digest reads, for its ``package.module:Class`` path: its top-level module or
    package and the modules beside it (``_beside``); as many as the walk's limit found."""
    walk = _walk(path)
    return [] if walk is None else [*walk.files, *walk.beside]


@dataclass(frozen=True)
class _Walk:
    """What the walk of a plug-in's folders found: its own code files, the folders they are named relative to,
    the modules and packages beside it, and the folder where the walk passed its limit (None when it did not)."""

    files: list[Path]
    base: list[Path]
    root: Path | None
    beside: list[Path]
    too_large: Path | None


def _walk(path: str) -> _Walk | None:
    """The walk of a plug-in's folders (None when it cannot be found), once per command (``command_memo``): a run
    asked for it five times, each a walk of every folder beside the plug-in."""
    memo = command_memo()
    key = ("plugin_code.walk", path, tuple(sys.path))
    if memo is not None and key in memo:
        return memo[key]
    budget = [DIGEST_WALK_LIMIT]
    found: _Walk | None
    try:
        located = _located(path, budget)
    except _TooLarge as error:
        found = _Walk([], [], None, [], Path(str(error)))
    else:
        if located is None:
            found = None
        else:
            files, base, root = located
            try:
                found = _Walk(files, base, root, _beside(root, set(files), budget), None)
            except _TooLarge as error:
                found = _Walk(files, base, root, [], Path(str(error)))
    if memo is not None:
        memo[key] = found
    return found


def _located(path: str, budget: list[int]) -> tuple[list[Path], list[Path], Path] | None:
    """A plug-in's own code files (``_is_code``), the folders they are named relative to, and the folder holding its
    top-level module or package; None when it cannot be found, or is frozen or built in."""
    top = path.partition(":")[0].split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        # A module imported without a spec: a script's __main__ (a learner class defined in the script that calls
        # assert_privacy). It had no digest, so an edit to the script reused the cached run (hostile pass XIX).
        file = getattr(sys.modules.get(top), "__file__", None)
        if file and _is_code(Path(file)) and Path(file).is_file():
            return [Path(file)], [Path(file).parent], Path(file).parent
        return None
    if spec.submodule_search_locations:
        locations = _package_locations(top, spec)
        files = sorted(f for location in locations for f in _code_under(location, budget))
        return files, locations, locations[0].parent
    if spec.origin and _is_code(Path(spec.origin)) and Path(spec.origin).is_file():
        return [Path(spec.origin)], [Path(spec.origin).parent], Path(spec.origin).parent
    return None  # a frozen or built-in module: its distribution's version is all there is


def _package_locations(top: str, spec) -> list[Path]:
    """Every folder a package's modules may come from: its spec's, its ``__path__`` once imported, and a folder of
    its name on each ``sys.path`` entry (``pkgutil.extend_path``, the older namespace packages, adds them). A
    package split over two folders by ``extend_path`` was digested from the first alone, so an edit to its
    learner's module in the second reused the cached run (hostile pass XIX)."""
    found = [Path(location) for location in spec.submodule_search_locations]
    found += [Path(location) for location in getattr(sys.modules.get(top), "__path__", None) or ()
              if isinstance(location, str)]
    for entry in sys.path:
        candidate = Path(entry or ".") / top
        try:
            if candidate.is_dir():
                found.append(candidate)
        except OSError:
            continue
    unique: dict[Path, Path] = {}
    for location in found:
        try:
            unique.setdefault(location.resolve(), location)
        except (OSError, RuntimeError):
            continue
    return list(unique.values())


# What Python imports code from: sources, sourceless bytecode and compiled extension modules. A plug-in module built
# in place (a Cython .so) or shipped as .pyc was in no digest, and its cached run was reused after a rebuild (NO
# SIGNAL where the rebuilt learner gave VIOLATED, hostile pass XIX).
CODE_SUFFIXES = tuple(dict.fromkeys([*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.BYTECODE_SUFFIXES,
                                     *importlib.machinery.EXTENSION_SUFFIXES]))


def _is_code(file: Path) -> bool:
    return file.name.endswith(CODE_SUFFIXES) and "__pycache__" not in file.parts


# How many files and folders a plug-in's code digest walks before it gives up: a learner module kept in a home folder,
# or beside a large tree (a linked site-packages took 3.5 s, five times a command), is not digested; its runs are
# then never reused from the run cache (``run_cache.cache_key``: no digest, no reuse), and a note says why.
DIGEST_WALK_LIMIT = 20_000


class _TooLarge(Exception):
    """The walk of a plug-in's folders passed ``DIGEST_WALK_LIMIT`` entries."""


def _code_under(folder: Path, budget: list[int], importable_only: bool = False) -> list[Path]:
    """The code files of a package folder, recursively (bytecode caches left out: their source is read), through
    symbolic links to folders too: a package whose subpackage was a link to a shared folder (``pathlib``'s glob
    does not follow one) was digested without it, and an edit there reused the cached run (hostile pass XIX).
    ``importable_only``: only through folders whose names an import can name (a namespace package's)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for here, folders, files in os.walk(folder, followlinks=True):
        budget[0] -= len(folders) + len(files)
        if budget[0] < 0:
            raise _TooLarge(folder)
        try:
            real = Path(here).resolve()
        except (OSError, RuntimeError):
            folders[:] = []
            continue
        if real in seen:  # a link back up the tree
            folders[:] = []
            continue
        seen.add(real)
        folders[:] = sorted(name for name in folders if name != "__pycache__" and not name.startswith(".")
                            and (not importable_only or _namespace_folder(Path(here) / name)))
        found += [Path(here) / name for name in files if _is_code(Path(here) / name) and (Path(here) / name).is_file()]
    return sorted(found)


def _namespace_folder(folder: Path) -> bool:
    """Whether ``folder`` may be imported as a package without an ``__init__.py`` (a namespace package): a name an
    import statement can hold, and not a virtual environment."""
    try:
        return folder.name.isidentifier() and not (folder / "pyvenv.cfg").exists()
    except OSError:
        return False


def code_digest(path: str) -> dict[str, str]:
    """``{"source_sha256": …}`` over the plug-in's code, found without importing it: its top-level module or package
    (every code file: source, bytecode, extension module) and the modules and packages beside it, which it may
    import (``_beside``); empty when it cannot be found (the target's build then says why). Read once per command
    (``command_memo``), so that one command keys every lookup by the same code."""
    memo = command_memo()
    key = ("plugin_code.digest", path, tuple(sys.path))
    if memo is not None and key in memo:
        return dict(memo[key])
    with unnoted():  # its reads of the files are not the process opening them to run (loaded_code)
        found = _code_digest(path)
    if memo is not None:
        memo[key] = dict(found)
    return found


def _code_digest(path: str) -> dict[str, str]:
    walk = _walk(path)
    found: dict[str, str] = {}
    if walk is not None and walk.too_large is not None:
        warnings.warn(f"plug-in {path}: more than {DIGEST_WALK_LIMIT:,} files and folders in and beside its code "
                      f"(under {walk.too_large}), so its code is not digested and its runs are never reused from "
                      "the run cache; keep the plug-in in a folder of its own", RuntimeWarning, stacklevel=3)
    elif walk is not None:
        digest = hashlib.sha256()
        for file in walk.files:
            relative = next((file.relative_to(b) for b in walk.base if file.is_relative_to(b)), Path(file.name))
            try:
                digest.update(relative.as_posix().encode() + b"\0" + file.read_bytes() + _stale_bytecode(file))
            except OSError:
                continue
        for file in walk.beside:
            try:
                digest.update(b"beside\0" + file.relative_to(walk.root).as_posix().encode() + b"\0" + file.read_bytes()
                              + _stale_bytecode(file))
            except OSError:
                continue
        found = {"source_sha256": digest.hexdigest()}
    return found


def _stale_bytecode(source: Path) -> bytes:
    """The bytecode file Python runs for ``source`` when it is not ``source``'s code, else nothing: Python runs a .pyc
    whose header has the source's modification time (in seconds) and size, or an unchecked hash-based one whatever
    the source holds, so a source edited at the same size within the second (or its times kept by a copy) ran its
    old code under the new source's digest, and a process without that .pyc reused the run (hostile pass XIX-x, S2).
    Compared (compiled anew) only when the source changed after the .pyc was written: a .pyc written by someone
    else after the source is the plug-in author's own code, as any code of theirs."""
    if not source.name.endswith(".py"):
        return b""
    try:
        cached = Path(importlib.util.cache_from_source(str(source)))
        data = cached.read_bytes()
        found, written = source.stat(), cached.stat().st_mtime_ns
    except (OSError, ValueError, NotImplementedError):
        return b""
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER or written > found.st_ctime_ns:
        return b""
    flags = int.from_bytes(data[4:8], "little")
    checked = flags & 0b10 and _imp.check_hash_based_pycs != "never"  # Python hashes the source (unless told not to)
    stale = not flags & 0b1 and (data[8:12] != (int(found.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                                 or data[12:16] != (found.st_size & 0xFFFFFFFF).to_bytes(4, "little"))
    if checked or stale:
        return b""  # Python compiles the source (XIX-x P3: a checked .pyc under --check-hash-based-pycs never is run)
    try:
        same = marshal.loads(data[16:]) == compile(source.read_bytes(), str(source), "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 - bytecode or source that cannot be read as code: the bytes tell it apart
        same = False
    return b"" if same else b"\0stale bytecode\0" + data


def _installed() -> set[Path]:
    """The folders Python installs into (site-packages, the standard library, and the same for the interpreter a
    virtual environment is made from). Not everything under the interpreter's prefix: a project there (the
    virtual environment's ``src`` folder of ``pip install -e`` checkouts, ``/usr/src/app`` under a system Python
    whose prefix is ``/usr``) had no module beside it digested, and an edit to its helper reused the cached run
    (hostile pass XIX)."""
    found = set()
    for base, platbase in ((sys.prefix, sys.exec_prefix), (sys.base_prefix, sys.base_exec_prefix)):
        paths = sysconfig.get_paths(vars={"base": base, "platbase": platbase, "installed_base": base,
                                          "installed_platbase": platbase})
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            try:
                found.add(Path(paths[key]).resolve())
            except (KeyError, OSError, RuntimeError):
                continue
    return found


def _beside(root: Path, own: set[Path], budget: list[int]) -> list[Path]:
    """The code files (``_is_code``) of the modules and packages importable from ``root`` (the folder that holds the
    plug-in's top-level module or package), its own left out: a plug-in module's helper ``noise.py`` beside it was
    not in the digest, so an edit to it reused the cached run of the code before the edit (hostile pass XVI). Only
    the modules directly in ``root``, and packages there (with an ``__init__.py``, or namespace packages without one:
    a helper in such a folder was left out, hostile pass XIX), recursively; none when ``root`` is an installed
    location (``_installed``), where a distribution's version is read."""
    try:
        resolved = root.resolve()
    except (OSError, RuntimeError):
        return []
    if resolved.name in ("site-packages", "dist-packages") or any(resolved.is_relative_to(p) for p in _installed()):
        return []
    found: list[Path] = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    for entry in entries:
        try:
            if _is_code(entry) and entry.is_file():
                found.append(entry)
            elif entry.is_dir() and not entry.name.startswith(".") and entry.name != "__pycache__":
                if (entry / "__init__.py").is_file():
                    found += _code_under(entry, budget)
                elif _namespace_folder(entry):  # a namespace package beside it, imported as a package too
                    found += _code_under(entry, budget, importable_only=True)
        except OSError:
            continue
    return [f for f in found if f not in own]


def with_distribution(digest: dict[str, str], dist) -> dict[str, str]:
    """``digest`` (``code_digest``'s) extended over the code files its installed distribution ``dist`` lists (its
    RECORD): an installed plug-in module's helper in the same distribution (``py_modules=["leak", "leak_noise"]``,
    or a second top-level package) lies beside it in site-packages, where nothing beside is digested, so a helper
    edited and reinstalled at the same version reused the cached run of the code before the edit (hostile pass
    XIX-s). Empty when the distribution lists more code files than ``DIGEST_WALK_LIMIT`` (never reused, as for a
    plug-in too large to digest); as given when it lists none (no RECORD, or an editable install's finder alone)."""
    if "source_sha256" not in digest:
        return digest
    memo = command_memo()  # read once per command, as the digest is
    key = ("plugin_code.distribution", digest["source_sha256"], str(getattr(dist, "_path", "")),
           getattr(dist, "name", None))
    if memo is not None and key in memo:
        return dict(memo[key])
    with unnoted():
        found = _with_distribution(digest, dist)
    if memo is not None:
        memo[key] = dict(found)
    return found


def as_loaded(path: str, digest: dict[str, str]) -> dict[str, str]:
    """``digest`` when it still describes the code this process runs, else empty (never reused, as for code with
    no digest). Python imports a module once: after an edit to the plug-in's files, a second call of the API in the
    same process ran the code imported before the edit under the digest of the files after it, so a fresh process
    running the edited code reused that entry (hostile pass XIX-u: NO SIGNAL where the edited code gives VIOLATED).
    Each loaded module of the plug-in's files is held against its file as it was loaded (``loaded_code``).
    """
    if "source_sha256" not in digest:
        return digest
    listed = code_files(path)
    files = {os.path.realpath(f) for f in listed}
    names = {os.path.basename(f) for f in [*listed, *files]}  # a module's file may be a link of another name
    # Every load of them, in sys.modules or not (a helper kept out of it, XIX-x S1), and the modules loaded before
    # topicaudit was (no record: their files' change times).
    modules = [m for m in list(sys.modules.values()) if isinstance(file := getattr(m, "__file__", None), str)
               and os.path.basename(file) in names and os.path.realpath(file) in files]
    early = any(loaded_before_hook(module) for module in modules)  # then any of its files, loaded untraced (S9)
    if (changed_files(files, names) or changed_mapped(files, names)
            or any(changed_since_loaded(module) or patched_since_loaded(module) for module in modules)
            or early and any(changed_while_running(file) for file in files)):
        memo = command_memo()
        if memo is None or ("plugin_code.warned", path) not in memo:  # once per command, not once per read
            warnings.warn(f"plug-in {path}: its code files changed after this process imported it (or its "
                          "code was replaced in it, a patched method), so the code that runs is not the code on "
                          "disk; this run is not reused from the run cache (a new Python process audits the edit)",
                          RuntimeWarning, stacklevel=3)
            if memo is not None:
                memo[("plugin_code.warned", path)] = True
        return {}
    return digest


def _with_distribution(digest: dict[str, str], dist) -> dict[str, str]:
    try:
        files = dist.files
        listed = sorted(str(f) for f in files or () if _is_code(Path(str(f))))
        # No list of files (a dist-info without RECORD): the top-level modules it names, else a helper installed
        # beside the plug-in was in no digest and its edit reused the run before it (hostile pass XIX-u).
        tops = sorted((dist.read_text("top_level.txt") or "").split()) if files is None else []
    except Exception:  # noqa: BLE001 - another distribution's metadata, unreadable in any way: its version stands
        return digest
    if tops:
        combined = hashlib.sha256(digest["source_sha256"].encode())
        for top in tops:
            combined.update(b"top-level\0" + top.encode() + b"\0" + code_digest(f"{top}:_").get("source_sha256",
                                                                                              "").encode())
        return {"source_sha256": combined.hexdigest()}
    if len(listed) > DIGEST_WALK_LIMIT:
        warnings.warn(f"distribution {getattr(dist, 'name', dist)}: more than {DIGEST_WALK_LIMIT:,} code files, so "
                      "its plug-in's code is not digested and its runs are never reused from the run cache",
                      RuntimeWarning, stacklevel=3)
        return {}
    combined = hashlib.sha256(digest["source_sha256"].encode())
    for name in listed:
        try:
            combined.update(b"distribution\0" + name.encode() + b"\0" + Path(dist.locate_file(name)).read_bytes())
        except (OSError, ValueError):
            continue
    return {"source_sha256": combined.hexdigest()}
