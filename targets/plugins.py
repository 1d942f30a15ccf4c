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
import importlib
import importlib.metadata as metadata
import inspect
import math
import pickle
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import topicaudit.loaded_code as loaded_code
from topicaudit.errors import UserError
from topicaudit.process_state import kept_process_state
from topicaudit.targets import plugin_code
from topicaudit.targets.base import claim, declared_mechanism, records
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
        with kept_process_state(f"the import of {module_name!r}"), loaded_code.importing(module_name):  # its asks (XIX-zr)
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
    if declared is None and records(method) and math.isfinite(claim(obj).epsilon):
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
        digest = plugin_code.code_digest(found.value)
        out.update(plugin_code.as_loaded(found.value, plugin_code.with_distribution(digest, dist)
                                         if dist is not None else digest))
        return out
    out = {"class": name}
    top = name.partition(":")[0].split(".")[0]
    dists = _distributions(tuple(sys.path)).get(top)
    digest = plugin_code.code_digest(name)
    if dists:
        out.update(distribution=dists[0], version=metadata.version(dists[0]))
        digest = plugin_code.with_distribution(digest, metadata.distribution(dists[0]))
    out.update(plugin_code.as_loaded(name, digest))
    return out


def code_files(name: str, group: str) -> list[Path]:
    """The files of a plug-in's code that its digest reads (``plugin_code.code_digest``), found without importing
    it. A check refuses to write its documents over them (a `check c.toml --json mylearner.py` replaced the learner
    it had just audited). None for a built-in name."""
    if not is_class_path(name):
        found = registered(group).get(name)
        if found is None:
            return []
        name = found.value
    return plugin_code.code_files(name)


