"""The run directory: the unit users keep, compare, resume and report on.

    config.toml        resolved configuration + provenance (config hash, versions, seeds)
    plan.npz           target and shadow membership, fitting seeds
    models/target.npz  the target's release
    models/shadow-0001.npz ...   one file per finished shadow model, written atomically
    models/canary-target.npz     the canary release (runs with canaries)
    canaries.npz       the canaries, their coins and how they entered the canary release's training
    canary_scores.npz  every canary score, by canary id
    statistics.npz     every statistic for the target and every shadow
    scores.npz         per-document scores of every attack, with the true labels
    results.json       metrics, guarantee, timings (documented, stable keys): a RunResults written out
    roc.png            the main attacks' log-log ROC (drawn by topicaudit.engine.presentation.roc_figure)
    manifest.json      the SHA-256 of every file above but roc.png

An audit of a released model (``topicaudit audit``) writes config.toml,
plan.npz, models/, statistics.npz, scores.csv (its ranking, a spreadsheet
cannot run a cell of it) and audit.json.

A directory made by another configuration is never reused: its config hash
must match, so a resumed run cannot silently mix models. This module writes
and reloads the files through the storage package's writers and readers:
``durable_write`` (atomic, durable writes), ``bounded_read`` (bounded reads and
the one reader of the .npz files, ``load_arrays``), ``scores_csv`` (scores.csv)
and ``run_corpus`` (the corpus a run's configuration names).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.storage import fitted_code, manifest

from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.engine.storage.bounded_read import UNREADABLE_NPZ, load_arrays, read_run_toml
from topicaudit.engine.storage.durable_write import atomic_write_bytes, atomic_write_text, fsync_directory
from topicaudit.engine.storage.lock import NAME as NAME_OF_LOCK, holds_only_the_lock
from topicaudit.engine.storage.model_file import DAMAGED, compared_arrays, model_arrays, transcript_from_arrays
from topicaudit.engine.storage.results import RunResults
from topicaudit.errors import UserError
from topicaudit.inputs import files
from topicaudit.inputs.integrity_key import ENVIRONMENT_VARIABLE as KEY_VARIABLE, key_file
from topicaudit.owned_folders import Folder, LinkedFolder, open_folder
from topicaudit.targets.base import Release


class RunDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.models = self.path / "models"
        # what the processes that fitted this run's models loaded from outside the cache key (saved and reloaded
        # models' records, ``fitted_code.loaded_outside``): results.json's ``target.loaded_code`` holds it all
        self.loaded_code: dict[str, str] = {}

    # -- identity -----------------------------------------------------------
    def stored_hash(self) -> str | None:
        config = self.path / "config.toml"
        if not os.path.lexists(config):
            return None
        try:
            return str(read_run_toml(config)["provenance"]["config_hash"])
        except (UserError, KeyError, TypeError) as error:
            why = str(error) if isinstance(error, UserError) else f"{type(error).__name__}: {error}"
            raise UserError(
                f"{config} cannot be read ({why}), so this run directory cannot be resumed safely; delete the "
                "directory to start over, or choose another output (--output)"
            ) from None

    def check_compatible(self, config_hash: str) -> bool:
        """True when resuming. Raises if the directory belongs to something else."""
        if not self.path.exists():
            return False
        if not self.path.is_dir():
            raise UserError(f"output {self.path} exists and is not a directory; choose another output (--output)")
        stored = self.stored_hash()
        if stored is None:
            if not holds_only_the_lock(self.path) and any(self.path.iterdir()):
                raise UserError(
                    f"output directory {self.path} is not empty and is not a topicaudit run; "
                    "choose another output (--output)"
                )
            return False
        if stored != config_hash:
            raise UserError(
                f"output directory {self.path} holds a run with a different configuration "
                f"(config hash {stored}, this one {config_hash}); choose another output (--output), "
                "or delete that directory to start over"
            )
        self._check_models_folder()
        self._check_manifest_kept()
        return True

    def _check_models_folder(self) -> None:
        """models/ must be the run's own folder: through a link a resume deleted a user's files it could not read
        as models ("refitting") and wrote models among them; a file or FIFO there was an internal error."""
        try:
            self._models_folder().close()
        except FileNotFoundError:
            pass

    def _models_folder(self, create: bool = False) -> Folder:
        """models/ opened below the run directory without following a link (``topicaudit.owned_folders``)."""
        try:
            return open_folder(self.models, create)
        except LinkedFolder as linked:
            what = "a symbolic link" if linked.target is not None else "not a directory"
            raise UserError(f"{self.models} is {what}, not this run's models folder: the run directory was "
                            "altered, and nothing is written or deleted through it; move it away, or rerun the "
                            "audit into a new directory (--output)") from None

    def _check_manifest_kept(self) -> None:
        """A run that keeps a manifest resumes only with it (readable), else its models could not be verified;
        config.toml alone is a start interrupted before its first entry, and resumes. With an integrity key
        configured, its MAC must verify (else exit 2); a manifest with a MAC resumes only with the key, which a
        resume without it would drop."""
        found = manifest.read(self.path)  # a damaged manifest, or a missing or wrong MAC with a key: exit 2
        if found is not None:
            if found.carries_mac and not found.authenticated:
                raise UserError(f"{self.path / manifest.NAME} is authenticated with an integrity key (HMAC) and "
                                "none is configured: resuming without it would drop that protection; set "
                                f"{KEY_VARIABLE} (or the key file {key_file()}) to the key this run was started "
                                f"with, or {manifest.RERUN}")
            # the config hash the resume trusts is config.toml's: an edited one (seed = 0 made 1) resumed, the
            # results were rewritten beside it, and every later check refused the directory (exit 2)
            manifest.verify(self.path, ["config.toml"])
            return
        provenance = read_run_toml(self.path / "config.toml")["provenance"]
        others = [p for p in self.path.rglob("*") if p.is_file() and p.name not in ("config.toml", NAME_OF_LOCK)]
        if manifest.MARK in provenance and others:
            raise UserError(f"{self.path / manifest.NAME} is missing, but {self.path / 'config.toml'} records one: "
                            "without it the run's models cannot be verified; " + manifest.RERUN)

    def create(self, config_dict: dict[str, Any], provenance: dict[str, Any]) -> None:
        created = not os.path.lexists(self.models)  # the directory itself may be only the writer lock's so far
        self._models_folder(create=True).close()
        if created:
            fsync_directory(self.path.parent)
        listed = manifest.entries(self.path)
        if not (self.path / "config.toml").exists() or listed is None or "config.toml" not in listed:
            # Written afresh also when present but unlisted (a start interrupted before the manifest listed it;
            # its config hash matched): listing it as found on disk listed, and with a key MAC'd, any edit made
            # to it since. The mark says this run keeps a manifest: without one it is refused
            # (engine/storage/integrity.py).
            digest = atomic_write_text(self.path / "config.toml", to_toml({**config_dict, "provenance": {
                **provenance, manifest.MARK: manifest.SCHEMA}}))
            self.record("config.toml", written={"config.toml": digest})

    def record(self, *names: str, written: dict[str, str] | None = None) -> None:
        """Add files just written to the manifest (``topicaudit.engine.storage.manifest``); ``written``: the
        SHA-256 of the bytes written to each, as the writer returned it (the manifest lists that, not the disk)."""
        manifest.record(self.path, *names, write_text=atomic_write_text, written=written)

    # -- models ---------------------------------------------------------------
    def model_path(self, index: int | str | None) -> Path:
        """None: the target; i: shadow i; a name: that model (``"canary-target"``)."""
        if isinstance(index, str):
            return self.models / f"{index}.npz"
        return self.models / ("target.npz" if index is None else f"shadow-{index + 1:04d}.npz")

    def save_model(self, index: int | str | None, release: Release, config_hash: str, seconds: float,
                   node: str = "", loaded: dict[str, str] | None = None) -> None:
        """One model file; the learner's ``info`` (if any) as a JSON string array ``info``;
        ``node``: the id of the Ray node that fitted it; ``loaded``: the code the fitting process loaded from
        outside the cache key (a Ray worker's), kept with this process's."""
        extra = {}
        if node:
            extra["node"] = np.str_(node)
        # the code files loaded from outside the cache key when it was saved: a run killed mid-way under a start-up
        # patch, resumed after the patch changed, rescored its model as the new code's (hostile pass XIX-zh, T12)
        code = fitted_code.settled({**fitted_code.loaded_outside(), **(loaded or {})})
        self.loaded_code.update(code)
        extra["loaded_code"] = np.str_(json.dumps(code, sort_keys=True))
        path = self.model_path(index)
        digest = atomic_write_bytes(path, lambda handle: np.savez(
            handle, **model_arrays(release), config_hash=np.str_(config_hash), fit_seconds=np.float64(seconds),
            model=np.str_(path.stem), **extra,
        ))
        name = path.relative_to(self.path).as_posix()
        self.record(name, written={name: digest})

    def load_model(self, index: int | str | None, config_hash: str, n_topics: int | None = None,
                   n_words: int | None = None) -> tuple[Release, float] | None:
        """A saved model, checked: this configuration's, in its own slot (a shadow copied over the target is
        refused), as the manifest recorded it, with ``n_topics`` topics over corpus word ids below ``n_words``.
        None when it is missing or unreadable (then it is refitted). The file is read once: the bytes its hash
        is checked on are the bytes loaded (a model swapped in between was resumed as the verified one)."""
        with files.read_once():
            return self._load_model(index, config_hash, n_topics, n_words)

    def _load_model(self, index: int | str | None, config_hash: str, n_topics: int | None,
                    n_words: int | None) -> tuple[Release, float] | None:
        path = self.model_path(index)
        if not os.path.lexists(path):
            return None
        if path.is_dir() and not path.is_symlink():
            raise UserError(f"{path} is a directory, not a model file: the run directory was altered; move it away "
                            "to refit that model, or rerun the audit into a new directory (--output)")
        try:
            # One copy: this run wrote the file, so an array larger than memory means a damaged header.
            z = load_arrays(path, copies=1)
            made_by = str(z["config_hash"])
            # Files written before learners could report info (or their slot) have no such entry.
            info = json.loads(str(z["info"])) if "info" in z else {}
            slot = str(z["model"]) if "model" in z else path.stem
            code = json.loads(str(z["loaded_code"])) if "loaded_code" in z else {}
            release, seconds = (Release(phi=z["phi"], vocabulary=z["vocabulary"], info=info,
                                        transcript=transcript_from_arrays(z)),
                                float(z["fit_seconds"]))
        except (*UNREADABLE_NPZ, UserError) as error:
            # A torn file (power loss before files were fsynced, a full disk): refit that model.
            warnings.warn(f"{path} is unreadable ({type(error).__name__}); refitting that model", stacklevel=2)
            self._remove_model(path)
            return None
        if made_by != config_hash:
            raise UserError(f"{path} was made by a different configuration; delete it to refit")
        edited = fitted_code.changed(code) if isinstance(code, dict) else []
        if edited:
            warnings.warn(f"{path} was fitted with code that has changed since ({', '.join(edited[:3])}); refitting "
                          "that model", stacklevel=2)
            self._remove_model(path)
            return None
        listed = manifest.entries(self.path)
        if listed is not None and path.relative_to(self.path).as_posix() not in listed:
            # Written, then interrupted before the manifest listed it: it cannot be verified, so it is refitted.
            warnings.warn(f"{path} is not listed in {manifest.NAME}; refitting that model", stacklevel=2)
            self._remove_model(path)
            return None
        manifest.verify(self.path, [path.relative_to(self.path).as_posix()])
        if slot != path.stem:
            raise UserError(f"{path} holds the model {slot!r}, not {path.stem!r}: it was copied or renamed; "
                            "delete it to refit that model")
        check_release(path, release, n_topics, n_words)
        if isinstance(code, dict):
            self.loaded_code.update({str(entry): str(value) for entry, value in code.items()})
        return release, seconds

    def saved_release(self, index: int | str | None) -> tuple[dict[str, np.ndarray], bool] | None:
        """What a saved model file holds of its release (``compared_arrays``) and whether a Ray worker fitted it, read
        without changing anything; None when there is no such file, or it is not listed in the manifest (written,
        then interrupted: the resume refits it); ``DAMAGED`` when it is there but not the file the run wrote
        (unreadable, truncated, another's bytes, a link or no regular file)."""
        path = self.model_path(index)
        name = path.relative_to(self.path).as_posix()
        if not os.path.lexists(path):
            return None
        try:
            with files.read_once():
                listed = manifest.entries(self.path)
                if listed is None or name not in listed:
                    return None
                if not path.is_file() or path.is_symlink():
                    return DAMAGED
                manifest.verify(self.path, [name])
                z = load_arrays(path, copies=1)
        except (*UNREADABLE_NPZ, UserError, OSError):
            return DAMAGED
        return compared_arrays(z), bool(str(z["node"])) if "node" in z else False

    def remove_models(self) -> None:
        """Delete every saved model (a cache entry whose learner does not reproduce them): the resume refits all."""
        with self._models_folder() as folder:
            for name in folder.names():
                if name.endswith(".npz"):
                    try:
                        folder.unlink(name, missing_ok=True)
                    except OSError as error:  # a folder by a model's name: exit 3 (XIX-zz Z3)
                        raise UserError(f"cannot remove {self.models / name} to refit it ({error.strerror or error}):"
                                        f" the run directory was altered; delete {self.path} and run again") from None

    def _remove_model(self, path: Path) -> None:
        """Delete a model file that is refitted, by the models folder's descriptor (never through a link)."""
        with self._models_folder() as folder:
            folder.unlink(path.name, missing_ok=True)

    # -- plan -----------------------------------------------------------------
    def keep_plan(self, arrays: dict[str, np.ndarray], name: str = "plan.npz") -> None:
        """Write the plan once; on resume the stored one must be readable and equal to this one.

        The plan is recomputed from the seed on every run, so a stored plan that
        differs or cannot be read means the directory was damaged or edited.
        """
        path = self.path / name
        if not path.exists():
            self.save_arrays(name, arrays)
            return
        try:
            stored = load_arrays(path)
        except (*UNREADABLE_NPZ, UserError) as error:
            raise UserError(
                f"{path} is unreadable ({type(error).__name__}: {error}); it is recomputed from the seed, so "
                f"delete {path} and rerun the same command (finished models are kept)"
            ) from None
        if set(stored) != set(arrays) or not all(np.array_equal(stored[k], arrays[k]) for k in arrays):
            raise UserError(f"{path} is not the plan of this configuration; delete {path} and rerun the same "
                            "command to rewrite it, or delete the directory to start over")
        if name not in (manifest.entries(self.path) or {}):
            # Equal to the recomputed plan, but written before the manifest listed it: written again, so the
            # manifest lists the bytes written, never what is on disk after the comparison.
            self.save_arrays(name, arrays)

    def models_by_node(self) -> dict[str, int]:
        """How many of the saved models each Ray node fitted (files from before nodes were recorded: "")."""
        counts: dict[str, int] = {}
        for path in sorted(self.models.glob("*.npz")):
            try:
                arrays = load_arrays(path)
            except (*UNREADABLE_NPZ, UserError):
                continue
            node = str(arrays["node"]) if "node" in arrays else ""
            counts[node] = counts.get(node, 0) + 1
        return counts

    # -- results --------------------------------------------------------------
    def keep_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        """Write ``name`` unless the run already holds exactly these arrays, as its manifest lists them: a
        resume refused partway (a model that is a folder) had rewritten canaries.npz and the manifest with the
        same content first, leaving the refused directory with new modification times."""
        path = self.path / name
        try:
            same = (not path.is_symlink() and path.is_file()
                    and (manifest.entries(self.path) or {}).get(name) == files.file_sha256(path)
                    and same_arrays(load_arrays(path), arrays))
        except (*UNREADABLE_NPZ, UserError, OSError):
            same = False  # unreadable: rewritten
        if not same:
            self.save_arrays(name, arrays)

    def save_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        digest = atomic_write_bytes(self.path / name, lambda handle: np.savez(handle, **arrays))
        self.record(name, written={name: digest})

    def save_results(self, results: RunResults) -> None:
        digest = atomic_write_text(self.path / "results.json", json.dumps(results.to_json(), indent=2) + "\n")
        self.record("results.json", written={"results.json": digest})


def same_arrays(stored: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> bool:
    """The same names, each array of the same dtype, shape and values (NaN equal to NaN)."""
    return set(stored) == set(arrays) and all(
        stored[k].dtype == np.asarray(arrays[k]).dtype
        and np.array_equal(stored[k], arrays[k], equal_nan=stored[k].dtype.kind in "fc") for k in arrays)


def check_release(path: Path, release: Release, n_topics: int | None = None, n_words: int | None = None) -> None:
    """A loaded model's Φ and vocabulary have the shapes and values a fit gives, or a UserError naming the file."""
    phi, vocabulary = release.phi, release.vocabulary
    problem = None
    if phi.ndim != 2 or phi.dtype.kind != "f" or vocabulary.ndim != 1 or vocabulary.dtype.kind not in "iu":
        problem = "its phi or vocabulary has the wrong type or number of dimensions"
    elif phi.shape[1] != vocabulary.size:
        problem = f"phi has {phi.shape[1]} columns for {vocabulary.size} vocabulary ids"
    elif n_topics is not None and phi.shape[0] != n_topics:
        problem = f"it has {phi.shape[0]} topics where this run fits {n_topics}"
    elif vocabulary.size and (vocabulary[0] < 0 or (n_words is not None and vocabulary[-1] >= n_words)
                              or np.any(np.diff(vocabulary) <= 0)):
        problem = ("its vocabulary ids are not increasing corpus word ids"
                   + (f" in [0, {n_words})" if n_words is not None else ""))
    elif not np.all(np.isfinite(phi)) or np.any(phi < 0):
        problem = "phi holds negative or non-finite values"
    if problem:
        raise UserError(f"{path}: {problem}; it is not a model of this run — delete it to refit that model")
