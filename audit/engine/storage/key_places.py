"""Which part of the run cache's key stands for a code file: topicaudit's source (its digest), the standard library
(the interpreter), or a keyed library installed (its version and place); and whether code outside them opened a file.
Code anywhere else that a fit loaded, and what it read, is listed with the run by content (``fitted_code``). Each
file and stack is decided once per process."""
from __future__ import annotations

import sys
import sysconfig
from pathlib import Path
from typing import Iterable

from topicaudit.targets.plugin_code import _installed as installed_folders
from topicaudit.version import _mapped_subpackages, _package_root

# The top-level modules of the libraries whose versions the key holds (``experiment.package_versions``,
# ``run_cache.LEARNER_LIBRARIES`` and ``CLAIM_LIBRARIES``) and Ray's (which changes no number): their installed files
# are not listed (hundreds of files, shared libraries of many MB, digested at every model saved).
KEYED = ("numpy", "scipy", "sklearn", "numba", "nltk", "ray", "gensim", "tomotopy", "dp_accounting")


def installed(path: Path) -> bool:
    """Whether the file lies in a folder libraries are installed into (any distribution's, keyed or not)."""
    return bool({"site-packages", "dist-packages"} & set(path.parts))


def standard(path: Path) -> bool:
    """Whether the file is the standard library's (not a library installed beside it)."""
    if path not in _STANDARD:
        folders = _places()[1]
        _STANDARD[path] = "site-packages" not in path.parts and any(path.is_relative_to(folder) for folder in folders)
    return _STANDARD[path]


_STANDARD: dict[Path, bool] = {}


def own(path: str | Path) -> bool:
    """Whether the file is topicaudit's own source (as spelled or resolved)."""
    name = str(path)
    if name not in _OWN:
        _OWN[name] = any(Path(name).is_relative_to(folder) for folder in _places()[0])
    return _OWN[name]


_OWN: dict[str, bool] = {}


def keyed_elsewhere(path: str | Path, keyed: Iterable[str] = KEYED) -> bool:
    """Whether another part of the key stands for the file: the standard library, topicaudit's source (its digest),
    a keyed library installed (its version and place). Decided once per file and keyed set in this process."""
    memo = (str(path), keyed if isinstance(keyed, tuple) else tuple(sorted(keyed)))
    if memo not in _DECIDED:
        _DECIDED[memo] = _decided(Path(path), set(memo[1]), _places())
    return _DECIDED[memo]


_DECIDED: dict[tuple[str, tuple[str, ...]], bool] = {}
_PLACES: list[tuple[list[Path], list[Path], list[Path]]] = []


def _places() -> tuple[list[Path], list[Path], list[Path]]:
    """topicaudit's source folders, the standard library's and the installed folders (as spelled and resolved)."""
    if not _PLACES:
        root = _package_root()
        own = [root, *(folder for folder, _ in _mapped_subpackages(root))]
        standard = []
        for base in (sys.prefix, sys.base_prefix):
            paths = sysconfig.get_paths(vars={"base": base, "platbase": base, "installed_base": base,
                                              "installed_platbase": base})
            standard += [Path(paths[key]).resolve() for key in ("stdlib", "platstdlib") if key in paths]
        _PLACES.append(([*own, *(folder.resolve() for folder in own)], standard, sorted(installed_folders())))
    return _PLACES[0]


def _decided(path: Path, keyed: set[str], places: tuple[list[Path], list[Path], list[Path]]) -> bool:
    own, standard, installed = places
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        resolved = path
    if any(place.is_relative_to(folder) for folder in own for place in (path, resolved)):
        return True
    if "site-packages" not in resolved.parts and any(resolved.is_relative_to(folder) for folder in standard):
        return True
    for folder in {*installed, *(p for p in resolved.parents if p.name in ("site-packages", "dist-packages"))}:
        if resolved.is_relative_to(folder) and folder != resolved:
            if resolved.relative_to(folder).parts[0].split(".")[0] in keyed:
                return True
    return False


def opened_outside(stack: tuple[str, ...], keyed: Iterable[str]) -> bool:
    """Whether code outside the key's digests opened a file (a stack, innermost first): a call of such code (a file
    of it, or code with no file, ``<string>``) below the outermost of topicaudit's own, or with none of topicaudit's
    on the stack (a thread a start left). What that code read may be run as code in any form (stripped,
    unmarshalled, unpickled, of any size, read through one of topicaudit's own readers: a patch's edit reused the
    run before it, XIX-zk), so the file is kept with the run; what topicaudit itself or the libraries it calls read
    is not (the script or test that called topicaudit sits above it), nor what the import system reads (a module's
    cached bytecode: its module's file is kept). Decided once per stack in this process."""
    memo = (stack, keyed if isinstance(keyed, tuple) else tuple(sorted(keyed)))
    if memo not in _OUTSIDE:
        _OUTSIDE[memo] = _outside(*memo)
    return _OUTSIDE[memo]


_OUTSIDE: dict[tuple[tuple[str, ...], tuple[str, ...]], bool] = {}


def _outside(stack: tuple[str, ...], keyed: tuple[str, ...]) -> bool:
    if stack and stack[0].startswith(("<frozen importlib", "<frozen zipimport")) \
            and (len(stack) == 1 or stack[1].startswith("<frozen ")):
        return False  # an import reading its module's cached code; a caller's ``get_data`` is a read (XIX-zv C5)
    outside = False
    for name in stack:
        if name.startswith("<frozen "):
            continue
        if not name.startswith("/"):
            outside = True
        elif own(name):
            if outside:
                return True
        elif not keyed_elsewhere(name, keyed):
            outside = True
    return outside and not any(name.startswith("/") and own(name) for name in stack)
