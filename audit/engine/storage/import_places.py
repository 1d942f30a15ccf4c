"""Where this process finds a module's name, and what decides it: the record of a run holds where each name its fits
imported, or looked for, was found (``import NAME``, ``module NAME`` in ``fitted_code``), and the import path itself,
which a plug-in may read as a list: ``python -m`` puts the working directory first on it, and a kernel named after
``sys.path[0]`` was chosen by the folder without one audited question (hostile pass XIX-zr, R6).
"""
from __future__ import annotations

import json
import os
import pkgutil
import sys

import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage.key_places import keyed_elsewhere

# Where a name is found, besides a file's path: a place the key holds (the standard library, topicaudit's source, a
# keyed library, the interpreter's built-in and frozen modules), nowhere, or by a finder that failed.
IN_THE_KEY, ABSENT, UNFINDABLE = "a place the key holds", "absent", "unfindable"


def where(name: str, folders: list[str] | None = None) -> str:
    """Where this process loads the module ``name`` from: the file of the module loaded under that name, else what
    the import system's finders give (the finders' own order: the working directory, PYTHONPATH, the installed
    folders; a submodule: in its package's folders, ``folders``, else ``_folders``); a path, or ``IN_THE_KEY``,
    ``ABSENT``, ``UNFINDABLE``, ``namespace …`` (a package of folders)."""
    file = getattr(sys.modules.get(name), "__file__", None)
    if isinstance(file, str):
        return _placed(file)
    spec = _spec(name, folders if folders is not None or "." not in name else _folders(name.rpartition(".")[0]))
    if spec is None or isinstance(spec, str):
        return spec or ABSENT
    if spec.origin in ("built-in", "frozen"):
        return IN_THE_KEY
    if isinstance(spec.origin, str) and spec.has_location:
        return _placed(spec.origin)
    folders = [str(folder) for folder in (spec.submodule_search_locations or [])]
    return "namespace " + os.pathsep.join(sorted({_placed(folder) for folder in folders})) if folders else ABSENT


def _looked_for(name: str, path=None) -> str | None:
    """Where a fit or a run finds ``name`` as it looks for it (``loaded_code._FitImports``): a top-level name, or a
    submodule of a package of several folders (pkgutil's ``extend_path``: a portion in the working directory ran, and
    a process started elsewhere reused the run, hostile pass XIX-zp Z4); None for other submodules. A fit's lookup on
    a path changed since it (or its run) began, or in a top-level package whose ``__path__`` is not its spec's with
    ``extend_path``'s (the working directory put first), is found so by no process (XIX-zq Q1, Q8)."""
    folders, fit, package = [str(folder) for folder in path or []], loaded_code._FITS[0] > 0, name.rpartition(".")[0]
    changed = fit and path is not None and "." not in package and folders != _folders(package, loaded=False)
    found = where(name) if path is None else where(name, folders) if len(set(folders)) > 1 or changed else None
    moved = found is not None and fit and (changed or loaded_code.PATH_AT_START[0] not in (None, _import_path()))
    return f"{MOVED}{found}" if moved else found


# A fit that changed its import path finds a name where one started elsewhere does not (XIX-zq, Q1): never reused.
MOVED = "found on an import path its fit changed: "


def _import_path() -> tuple:
    """What decides where an import finds a name: ``sys.path`` (relative entries in the working directory) but the
    folders in places the key holds (Ray puts its own first as it is imported, beside a fit), the finders, the hooks."""
    folder_now = here()
    folders = [os.path.join(folder_now, folder) if isinstance(folder, str) else folder for folder in list(sys.path)]
    return ([folder for folder in folders if not (isinstance(folder, str) and keyed_elsewhere(folder))],
            list(sys.meta_path), list(sys.path_hooks))


def here() -> str:
    try:
        return os.getcwd()
    except OSError:
        return "?"


def _folders(package: str, loaded: bool = True) -> list[str]:
    """A package's ``__path__``; not ``loaded`` (or not loaded), its spec's folders with ``extend_path``'s."""
    if loaded and (module := sys.modules.get(package)) is not None:
        return [str(folder) for folder in getattr(module, "__path__", None) or []]
    spec = _spec(package) if "." not in package else None
    if spec is None or isinstance(spec, str) or spec.submodule_search_locations is None:
        return []
    return pkgutil.extend_path([str(folder) for folder in spec.submodule_search_locations], package)


loaded_code.PLACE[:] = [_looked_for, _import_path]  # where a name is found as a fit or a run looks for it


def _spec(name: str, path=None):
    """The spec the first finder of ``sys.meta_path`` to know ``name`` gives (None: none; ``UNFINDABLE``: it failed)."""
    for finder in list(sys.meta_path):
        find = getattr(finder, "find_spec", None)
        if find is None or finder is loaded_code._FitImports:
            continue
        try:
            spec = find(name, path)
        except Exception:  # noqa: BLE001 - a finder's failure is what an import here would meet
            return UNFINDABLE
        if spec is not None:
            return spec
    return None


def _placed(file: str) -> str:
    path = os.path.abspath(file)
    return IN_THE_KEY if keyed_elsewhere(path) else path


# The entry of a driver's record holding its import path as a plug-in reads it (``import_path_read``).
IMPORT_PATH = "sys.path"  # not "import …": an ``import NAME`` entry


def import_path_read() -> str:
    """``sys.path`` as code reading it sees it (its entries as written, but the folders the key holds): what a plug-in
    can choose its code by, compared where a reuse is decided (a process started with ``python -m`` in another
    folder has another first entry)."""
    return json.dumps([folder if isinstance(folder, str) else repr(folder) for folder in list(sys.path)
                       if not (isinstance(folder, str) and os.path.isabs(folder) and keyed_elsewhere(folder))])
