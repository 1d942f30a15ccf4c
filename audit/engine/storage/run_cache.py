"""Where ``check CONFIG``, ``assert_privacy`` and the pytest fixture keep their runs: a cache keyed by everything
that can change the verdict, so that an unchanged audit is never refitted and a changed one always is.

    <cache>/<corpus or name>-<learner>-k<k>-s<seed>-<16 hex of the key>/   an ordinary run directory

The key is a SHA-256 of

- the configuration's identity (what determines the numbers: learner, k, parameters, canaries, shadows,
  seed, …), its name and the attacks it reports;
- the content of its input files (the corpus, and any file its options name), not their paths;
- the code: topicaudit's version and a digest of its source (``topicaudit.version.source_digest``), the
  versions of the libraries the numbers come from, and, for a plug-in learner or vocabulary step, its
  distribution's version or, when it is not installed as one (or is installed editable), a digest of its
  source files (``topicaudit.targets.plugins.source``).

A change to any of them is another directory, fitted from scratch; the same key finds its finished run, which
``execute_run`` returns at once (``engine.run.finished_run``) after verifying every file against the run's
manifest. An interrupted run resumes where it stopped.

Where: ``--cache DIR`` (``check``), ``cache=`` (``assert_privacy``), ``--topicaudit-cache DIR`` or the ini
option ``topicaudit_cache`` (the fixture); else ``$TOPICAUDIT_CACHE_DIR/runs``, the cache that holds
pre-processed corpora (default ``~/.cache/topicaudit/runs``). ``TOPICAUDIT_CACHE_DIR=off`` turns it off: then
``check CONFIG`` uses the run's own default directory (runs/…) and the fixture a temporary one. Each entry is
a run directory, reportable and checkable on its own; deleting one, or the whole directory, only costs a refit.
In CI, keep the directory between jobs with the CI's cache (docs/check.md).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import secrets
from importlib import metadata
from pathlib import Path
from typing import Any

from topicaudit.engine.configuration.config import PATH_OPTIONS, Config, learner_label
from topicaudit.engine.execution.experiment import package_versions
from topicaudit.engine.storage import fitted_code
from topicaudit.engine.storage.startup_code import startup_code
from topicaudit.errors import UserError
from topicaudit.inputs.cache import ENVIRONMENT_VARIABLE, cache_anchor, cache_directory
from topicaudit.inputs.files import file_sha256
from topicaudit.folder_anchors import declare
from topicaudit.owned_folders import LinkedFolder, PlantedLink, open_folder
from topicaudit.targets import sources
from topicaudit.targets.plugin_code import _installed as installed_folders, code_digest
from topicaudit.version import __version__, source_digest

SCHEMA = "topicaudit.run-cache/1"
# Library versions that cannot change a number: left out of the key, so upgrading them reuses the cache.
NOT_IN_KEY = ("ray",)
# The libraries a built-in learner's Φ comes from beyond those every run records (``package_versions``), and the one
# the claims are accounted by: gensim upgraded under a cache reused the run of the version before, NO SIGNAL where
# the installed gensim gave VIOLATED (hostile pass XIX-s).
LEARNER_LIBRARIES = {"gensim-lda": ("gensim",), "tomotopy-lda": ("tomotopy",)}
CLAIM_LIBRARIES = ("dp-accounting",)


def library_versions(learner: str) -> dict[str, str]:
    """The versions of the libraries ``learner``'s numbers and claim come from that ``package_versions`` leaves
    out ("absent" when not installed)."""
    found = {}
    for name in (*LEARNER_LIBRARIES.get(learner, ()), *CLAIM_LIBRARIES):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


# The module each library in the key is imported as, when it is not its distribution's name.
_MODULE_OF = {"scikit-learn": "sklearn", "dp-accounting": "dp_accounting"}
_NOT_LIBRARIES = ("topicaudit", "topicaudit_source", "python")


def library_locations(names: Any) -> dict[str, str]:
    """Where each library would be imported from (its module's file, or the folders of a namespace package): a
    stand-in of it on ``sys.path`` (a test suite's fake gensim on PYTHONPATH or ``monkeypatch.syspath_prepend``) has
    the installed distribution's version, since ``metadata.version`` reads the dist-info, and other code: its run was
    reused by a process with the library itself (hostile pass XIX-zf, L1)."""
    found = {}
    for name in names:
        if name in _NOT_LIBRARIES:
            continue
        try:
            spec = importlib.util.find_spec(_MODULE_OF.get(name, name.replace("-", "_")))
        except (ImportError, ValueError):
            spec = None
        found[name] = "absent" if spec is None else str(
            spec.origin if spec.has_location else sorted(spec.submodule_search_locations or []))
        if spec is not None and not _installed_here(spec):
            # imported from outside the folders Python installs into (a stand-in or working copy of the library):
            # its code, by content, as a plug-in's; an edit at the same place and version reused the run before it
            # (hostile pass XIX-zg, L2). Not digested (too large a folder): a key never found again.
            module = _MODULE_OF.get(name, name.replace("-", "_"))
            found[name] += " sha256:" + (code_digest(module).get("source_sha256") or secrets.token_hex(16))
    return found


def _installed_here(spec: Any) -> bool:
    """Whether a module's code lies in a folder Python installs into (site-packages, the standard library)."""
    places = [spec.origin] if spec.has_location and spec.origin else list(spec.submodule_search_locations or [])
    installed = installed_folders()
    for place in places:
        try:
            resolved = Path(place).resolve()
        except (OSError, RuntimeError):
            return False
        if not ({"site-packages", "dist-packages"} & set(resolved.parts)
                or any(resolved.is_relative_to(folder) for folder in installed)):
            return False
    return bool(places)


def default_root() -> Path | None:
    """``$TOPICAUDIT_CACHE_DIR/runs`` (default ``~/.cache/topicaudit/runs``); None when the cache is off."""
    base = cache_directory()
    return None if base is None else base / "runs"


def resolve_root(cache: str | os.PathLike | bool | None) -> Path | None:
    """The cache directory a caller asked for: a path; None for the default; False (or "off") for none."""
    if cache is False:
        return None
    if cache is None or cache is True:
        return default_root()
    text = os.fspath(cache)
    if not str(text).strip():
        raise UserError("the cache directory is empty; give a directory (--cache DIR), or off")
    if str(text).strip().lower() == "off":
        return None
    return Path(text).expanduser()




def content_digest(path: str | os.PathLike) -> str | None:
    """SHA-256 of a file's bytes, or of a folder's files (by relative path); None when it does not exist (the
    run itself then says so)."""
    path = Path(path)
    try:
        if path.is_dir():
            digest = hashlib.sha256()
            for file in sorted(p for p in path.rglob("*") if p.is_file()):
                digest.update(file.relative_to(path).as_posix().encode() + b"\0" + file_sha256(file).encode())
            return digest.hexdigest()
        return file_sha256(path) if path.is_file() else None
    except OSError:
        return None


def cache_key(config: Config, unkeyed: bool = False) -> dict[str, Any]:
    """Everything the cached run's verdict depends on (what is hashed into its directory's name); ``unkeyed``: a
    key never found again (a run fitted where its code cannot be vouched for, ``engine.cached_audit``)."""
    inputs: dict[str, str | None] = {}
    if config.corpus.path is not None:
        inputs["corpus"] = content_digest(config.corpus.path)
        for key, value in config.corpus.options.items():
            if key in PATH_OPTIONS and isinstance(value, str):
                inputs[f"corpus.options.{key}"] = content_digest(value)
    t = config.target
    versions = {name: version for name, version in package_versions().items() if name not in NOT_IN_KEY}
    versions.update(library_versions(t.learner))
    code = sources(t.learner, t.vocabulary)
    startup = startup_code()
    if unkeyed or not startup or any("source_sha256" not in found for found in code.values()):
        # A plug-in whose code has no digest (defined in a notebook, frozen): nothing tells its code apart, so its
        # entry is never found again (reused, it was the run of whatever code ran first).
        code["unidentified"] = secrets.token_hex(16)
    return {
        "schema": SCHEMA,
        "config": config.identity(),  # plug-ins' sources included (engine.configuration.config.Config.identity)
        "name": config.name,
        "attacks": list(config.attack.attacks),
        "inputs": inputs,
        "code": {"topicaudit": __version__, "source": source_digest(), "versions": versions,
                 "locations": library_locations(versions),
                 "startup": startup, **code},
    }


def identified(config: Config) -> bool:
    """Whether the key names every code the run depends on by its files (a plug-in defined in a notebook, or
    replaced in this process since it was imported, is not: its runs are never found again)."""
    return "unidentified" not in cache_key(config)["code"]


def cached_run_dir(config: Config, root: Path, unkeyed: bool = False) -> Path:
    """The run directory of this configuration in the cache ``root`` (``unkeyed``: one never found again).

    A run whose fit loaded code from outside the key (``fitted_code``: imported later by something a start left, a
    thread, a profiler, a planted finder) names those files in its results, and where the names it imported are
    found; when one of them has changed, the run is another code's, and the entry for this code is the one keyed by
    their content (and places) now as well (hostile passes XIX-zh, XIX-zo): each content of that code has its own
    entry, found again by every process that runs it. After a run
    whose fit ran code from no file (``fitted_code.UNCHECKABLE``, XIX-zk T8), this one goes where none looks."""
    payload = json.dumps(cache_key(config, unkeyed), sort_keys=True, default=str)
    label = learner_label(config.target.learner)
    for _ in range(_REDIRECTS):
        path = Path(root) / f"{config.stem}-{label}-k{config.target.k}-s{config.seed}-" \
                            f"{hashlib.sha256(payload.encode()).hexdigest()[:16]}"
        recorded = None if unkeyed else _loaded_code_of(path)
        if not recorded or not fitted_code.changed(recorded, names=False):
            return path
        if any(value == fitted_code.UNCHECKABLE and not entry.startswith("/") for entry, value in recorded.items()):
            break  # code from no file ran in that fit: whatever this run's code, no later one can find it so
        # (a file that changed after that fit read it is no such code: the next entry is found again, XIX-zw)
        payload = json.dumps([payload, fitted_code.now(recorded)], sort_keys=True)
    return Path(root) / f"{config.stem}-{label}-k{config.target.k}-s{config.seed}-{secrets.token_hex(8)}"


# Entries followed from one key to the next (one per content of the code loaded from outside it that was cached)
# before the run is fitted in a directory never found again.
_REDIRECTS = 16


def _loaded_code_of(path: Path) -> dict[str, str] | None:
    """``target.loaded_code`` of the finished run in ``path``, if any. Only chooses which entry is this code's: the
    run found is verified as ever before it is reused (``engine.run.finished_run``)."""
    results = path / "results.json"
    try:
        if path.is_symlink() or results.is_symlink() or not results.is_file() or results.stat().st_size > 2**26:
            return None
        with open(results, encoding="utf-8") as handle:
            found = json.load(handle).get("target", {}).get("loaded_code")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) and all(isinstance(v, str) for v in found.values()) else None


# The cache entries this process chose (``use_cache``, ``behaviour_entry``): a plug-in's saved models that its fit no
# longer reproduces send the run to another entry there (``engine.replay``); elsewhere the run is refused.
_ENTRIES: set[str] = set()


def is_entry(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` is a run cache's entry this process chose for a configuration."""
    return os.path.abspath(run_dir) in _ENTRIES


def behaviour_entry(run_dir: str | os.PathLike, digest: str | None) -> Path:
    """The entry, beside ``run_dir`` (the key's, or one of its behaviours'), of a plug-in that now fits the release of
    SHA-256 ``digest`` (``engine.replay``): each behaviour of the same code and inputs has its own, found again by
    every process where the learner fits that way. ``digest`` None (the behaviour's own entry holds another's models:
    a learner that does not reproduce its fits), or ``BEHAVIOURS`` of them kept already: the key's one entry whose
    models are refitted instead, ``REFIT`` (a learner whose every fit differs kept one more entry per check, XIX-zx
    X4)."""
    path = Path(run_dir)
    key = re.sub(rf"-(b[0-9a-f]{{16}}|{REFIT})$", "", path.name)
    while len(os.fsencode(f"{key}-b{'0' * 16}")) > 255:  # a key entry's name near the limit: its start dropped,
        key = key[1:]                                    # its key kept (XIX-zzq Q1: ENAMETOOLONG at every check)
    wanted = None if digest is None else f"{key}-b{digest[:16]}"
    if wanted is not None and not os.path.lexists(path.parent / wanted):
        pattern = re.compile(rf"{re.escape(key)}-b[0-9a-f]{{16}}")
        try:
            kept = sum(1 for name in os.listdir(path.parent) if pattern.fullmatch(name))
        except OSError:
            kept = 0
        wanted = wanted if kept < BEHAVIOURS else None
    entry = path.with_name(wanted or f"{key}-{REFIT}")
    _ENTRIES.add(os.path.abspath(entry))
    return entry


# Entries of one key kept for the plug-in's behaviours (``behaviour_entry``), and the name ending of its entry that
# refits instead (``engine.replay.check_saved_models``).
BEHAVIOURS, REFIT = 8, "refit"


# How long a check of a cached configuration waits for another writing the same entry (parallel CI jobs, pytest
# workers asserting claims of one configuration): the second was exit 2 "being written by another command".
WAIT_FOR_WRITER_SECONDS = 3600.0


def use_cache(config: Config, cache: str | os.PathLike | bool | None, unkeyed: bool = False) -> Path | None:
    """Point the configuration's output at its cached run directory (unless it names its own output); returns
    that directory, or None when no cache is used. unkeyed: a directory never found again (``cache_key``)."""
    if config.output:
        return None
    root = checked_root(cache)
    if root is None:
        return None
    run_dir = cached_run_dir(config, root, unkeyed)  # below the cache's anchor: the writer lock opens it without links
    config.output = str(run_dir)
    _ENTRIES.add(os.path.abspath(run_dir))
    return run_dir


def checked_root(cache: str | os.PathLike | bool | None) -> Path | None:
    """``resolve_root``, refused when it is not a directory or (the default) a folder of the cache's own is a
    link: asked before anything is written there (``--canaries auto`` kept its sizing in it first)."""
    root = resolve_root(cache)
    if root is None:
        return None
    existing = root  # the nearest part of the path that is there: a file or device above the cache is no place
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if os.path.lexists(existing) and not existing.is_dir():
        chosen = os.environ.get(ENVIRONMENT_VARIABLE) if cache in (None, True) else None
        raise UserError(f"cannot keep the run cache in {root}"
                        + (f" ({ENVIRONMENT_VARIABLE}={chosen})" if chosen is not None else "")
                        + f": {existing} is not a directory; "
                        + (f"set {ENVIRONMENT_VARIABLE} to a directory, or to off" if chosen is not None
                           else "give a directory (--cache DIR) or off"))
    if cache is None or cache is True:  # the default's runs/ (and ~/.cache/topicaudit): the cache's own folders
        cache_anchor(root.parent)
    else:  # --cache DIR: the user's folder, and each entry below it the cache's own
        declare(root, root)
    try:
        open_folder(root).close()
    except PlantedLink as planted:
        raise UserError(f"cannot use the run cache folder {root}: {planted.reason}") from None
    except LinkedFolder as linked:
        what = f"a symbolic link (to {linked.target})" if linked.target is not None else "not a directory"
        raise UserError(f"the run cache folder {linked.path} is {what}, not the "
                        "cache's own folder: topicaudit never writes cached runs through one (they were written into "
                        "the link's target, outside the cache); remove the link, or give --cache DIR") from None
    except OSError:
        pass  # not there yet: made without following a link when the run is locked
    return root
