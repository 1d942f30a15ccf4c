"""Learners and vocabulary steps from outside topicaudit: a ``package.module:Class`` path, or a short name an
installed package registers in the entry-point groups ``topicaudit.learners`` and ``topicaudit.vocabulary_steps``.

Everything a plug-in can get wrong that would otherwise surface in a Ray worker,
minutes later, is checked here when the target is built, before any fit: the
module imports, the class exists and is a learner (or a step), its constructor
takes the parameters, the instance pickles. The registry
(``topicaudit.targets.registry``) resolves names with it; only the names asked
for are imported, so a Ray worker unpickling a target loads that target's code only.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import importlib.metadata as metadata
import inspect
import math
import os
import pickle
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topicaudit.errors import UserError
from topicaudit.process_state import kept_process_state
from topicaudit.targets.base import declared_mechanism, records
from topicaudit.targets.mechanisms import Mechanism

LEARNER_GROUP = "topicaudit.learners"
STEP_GROUP = "topicaudit.vocabulary_steps"
# What each kind of plug-in must offer (besides, for a learner, storing ``k``).
METHODS = {LEARNER_GROUP: ("fit", "guarantee"), STEP_GROUP: ("select", "guarantee")}
KIND = {LEARNER_GROUP: "learner", STEP_GROUP: "vocabulary step"}


def is_class_path(name: str) -> bool:
    """Whether a configured name is a ``module:Class`` path rather than a short name."""
    return ":" in name


def registered(group: str) -> dict[str, metadata.EntryPoint]:
    """The short names installed packages register in ``group``, by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=group)}


def resolve(name: str, builtins: dict[str, str], group: str, where: str) -> str:
    """The ``module:Class`` path a configured name stands for: built-in, a path as given, or an entry point."""
    if name in builtins:
        return builtins[name]
    if is_class_path(name):
        return name
    found = registered(group).get(name)
    if found is not None:
        return found.value
    known = ", ".join([*builtins, *registered(group)])
    raise UserError(f"unknown {KIND[group]} {name!r} in {where}; known: {known}; or give your own class as "
                    f"\"package.module:Class\" (docs/adding-a-learner.md)")


def load_class(path: str, group: str, where: str) -> type:
    """The class at ``module:Class``, or a UserError naming what failed: the module's import, a missing name."""
    what = f"{KIND[group]} {path!r} ({where})"
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise UserError(f"{what} is not a \"package.module:Class\" path; write the module, a colon and the class")
    try:
        with kept_process_state(f"the import of {module_name!r}"):
            module = importlib.import_module(module_name)
    except Exception as error:  # whatever the module raised while importing is the user's to see
        raise UserError(f"{what}: module {module_name!r} does not import ({type(error).__name__}: {error}); "
                        "install the package that provides it in this environment, or put its directory on "
                        "PYTHONPATH") from None
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            classes = sorted(n for n, v in vars(module).items() if inspect.isclass(v) and v.__module__ == module_name)
            raise UserError(f"{what}: module {module_name!r} has no {attribute!r}; its classes: "
                            f"{', '.join(classes) or 'none'}")
        found = getattr(found, part)
    if not inspect.isclass(found):
        raise UserError(f"{what}: {attribute!r} is a {type(found).__name__}, not a class")
    missing = [m for m in METHODS[group] if not callable(getattr(found, m, None))]
    if missing:
        raise UserError(f"{what}: {found.__name__} is not a {KIND[group]}: it has no {' or '.join(missing)} method "
                        f"(a {KIND[group]} has {', '.join(METHODS[group])}; docs/adding-a-learner.md)")
    if group == LEARNER_GROUP and not _accepts(found, "k"):
        raise UserError(f"{what}: {found.__name__}'s constructor takes no k; a learner's first parameter is k, "
                        "the number of topics")
    return found


def _accepts(cls: type, name: str) -> bool:
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return True  # a signature Python cannot read: the constructor's call decides
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def check_instance(obj, path: str, group: str, where: str, k: int | None = None) -> None:
    """A built plug-in stores ``k`` (learners) and pickles: Ray ships it to its workers."""
    what = f"{KIND[group]} {path!r} ({where})"
    with kept_process_state(what):
        _check_instance(obj, what, group, k)


def _check_instance(obj, what: str, group: str, k: int | None) -> None:
    if k is not None and getattr(obj, "k", None) != k:
        raise UserError(f"{what}: the instance does not store k = {k} as its attribute k "
                        "(the engine reads learner.k); set self.k = k in the constructor")
    try:
        pickle.dumps(obj)
    except Exception as error:  # any failure to pickle is the finding
        raise UserError(f"{what}: the instance cannot be pickled ({type(error).__name__}: {error}), and Ray ships "
                        "it to its workers; keep only picklable attributes (no open files, locks, lambdas or "
                        "live clients)") from None
    check_declared_release(obj, what, group)


def check_declared_release(obj, what: str, group: str) -> None:
    """A part that records its releases declares their kind (``mechanism()``, a ``topicaudit.mechanisms``
    class), and a part claiming ε that takes a recorder declares one: without it the engine cannot check the
    record against the claim, size canaries past its cap, or find a scorer before the fit."""
    method = obj.fit if group == LEARNER_GROUP else obj.select
    try:
        declared = declared_mechanism(obj)
    except Exception as error:  # whatever mechanism() raised is the finding
        raise UserError(f"{what}: mechanism() raised {type(error).__name__}: {error}") from None
    if declared is not None and not isinstance(declared, Mechanism):
        raise UserError(f"{what}: mechanism() returned a {type(declared).__name__}, not a release of "
                        "topicaudit.mechanisms (GaussianNoise, LaplaceNoise, GeometricNoise, RandomisedResponse, "
                        "SetUnion, or a subclass of Mechanism)")
    if declared is None and records(method) and math.isfinite(obj.guarantee().epsilon):
        raise UserError(f"{what}: its {method.__name__}() takes a recorder but it declares no mechanism(); return "
                        "the kind and constants of what it records, e.g. LaplaceNoise(scale, document_tokens) "
                        "(docs/adding-a-learner.md)")


def import_recorded(*sources: dict[str, str] | None) -> None:
    """Import the modules of the plug-ins a run recorded (results.json's ``learner_source``, ``vocabulary_source``),
    so that a process that did not build the target (``check`` of a finished run) knows the release kinds and
    scorers they define. A module that no longer imports is left out: what needs its kind then says so."""
    for found in sources:
        path = (found or {}).get("class", "")
        if is_class_path(path):
            try:
                with kept_process_state(f"the import of {path.partition(':')[0]!r}"):
                    importlib.import_module(path.partition(":")[0])
            except Exception:  # whatever it raises: what needs its kind then names the kind unknown
                continue


def class_path(cls: type) -> str:
    """``module:QualifiedName`` of a class, the form configurations name it by."""
    return f"{cls.__module__}:{cls.__qualname__}"


@functools.lru_cache(maxsize=8)
def _distributions(search_path: tuple[str, ...]) -> Mapping[str, list[str]]:
    """Top-level import names → their distributions (a quarter second to scan, so once per ``sys.path``)."""
    return metadata.packages_distributions()


def source(name: str, group: str) -> dict[str, str] | None:
    """Where a plug-in comes from, for the configuration's identity and results.json: its class path, its
    distribution and version when importlib.metadata knows them, and ``source_sha256``, a digest of its code.
    The digest is taken for an installed distribution too: its version does not change with its files (a
    package reinstalled with ``pip install .`` after an edit, at the same version, as a CI installs its own
    project), and the cached run of the code before the edit was reused, NO SIGNAL where the new code gave
    VIOLATED (hostile pass XIX). None for a built-in name.

    So another version of the package, or an edit to a plug-in's files, is another run: a cached run
    (``topicaudit.engine.storage.run_cache``) is never reused for other code.
    """
    if not is_class_path(name):
        found = registered(group).get(name)
        if found is None:
            return None  # a built-in (an unknown name is refused where the target is built)
        out = {"class": found.value}
        dist = found.dist
        if dist is not None:
            out.update(distribution=dist.name, version=dist.version)
        out.update(_code_digest(found.value))
        return out
    out = {"class": name}
    top = name.partition(":")[0].split(".")[0]
    dists = _distributions(tuple(sys.path)).get(top)
    if dists:
        out.update(distribution=dists[0], version=metadata.version(dists[0]))
    out.update(_code_digest(name))
    return out


def code_files(name: str, group: str) -> list[Path]:
    """The files of a plug-in's code that its digest reads (``_code_digest``), found without importing it: its
    top-level module or package and the modules beside it. A check refuses to write its documents over them (a
    `check c.toml --json mylearner.py` replaced the learner it had just audited). None for a built-in name."""
    if not is_class_path(name):
        found = registered(group).get(name)
        if found is None:
            return []
        name = found.value
    located = _located(name)
    if located is None:
        return []
    files, _, root = located
    return [*files, *_beside(root, set(files))]


def _located(path: str) -> tuple[list[Path], list[Path], Path] | None:
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
        files = sorted(f for location in locations for f in _code_under(location))
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


def _code_under(folder: Path, importable_only: bool = False) -> list[Path]:
    """The code files of a package folder, recursively (bytecode caches left out: their source is read), through
    symbolic links to folders too: a package whose subpackage was a link to a shared folder (``pathlib``'s glob
    does not follow one) was digested without it, and an edit there reused the cached run (hostile pass XIX).
    ``importable_only``: only through folders whose names an import can name (a namespace package's)."""
    found: list[Path] = []
    seen: set[Path] = set()
    for here, folders, files in os.walk(folder, followlinks=True):
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


def _code_digest(path: str) -> dict[str, str]:
    """``{"source_sha256": …}`` over the plug-in's code, found without importing it: its top-level module or package
    (every code file: source, bytecode, extension module) and the modules and packages beside it, which it may
    import (``_beside``); empty when it cannot be found (the target's build then says why)."""
    located = _located(path)
    if located is None:
        return {}
    files, base, root = located
    digest = hashlib.sha256()
    for file in files:
        relative = next((file.relative_to(b) for b in base if file.is_relative_to(b)), Path(file.name))
        try:
            digest.update(relative.as_posix().encode() + b"\0" + file.read_bytes())
        except OSError:
            continue
    for file in _beside(root, set(files)):
        try:
            digest.update(b"beside\0" + file.relative_to(root).as_posix().encode() + b"\0" + file.read_bytes())
        except OSError:
            continue
    return {"source_sha256": digest.hexdigest()}


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


def _beside(root: Path, own: set[Path]) -> list[Path]:
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
                    found += _code_under(entry)
                elif _namespace_folder(entry):  # a namespace package beside it, imported as a package too
                    found += _code_under(entry, importable_only=True)
        except OSError:
            continue
    return [f for f in found if f not in own]
