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
    results.json       metrics, guarantee, timings (documented, stable keys)

A directory made by another configuration is never reused: its config hash
must match, so a resumed run cannot silently mix models.
"""
from __future__ import annotations

import json
import os
import tempfile
import tomllib
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.config import Config, to_toml
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, keep_most_frequent_words, load_corpus
from topicaudit.inputs.files import check_regular
from topicaudit.inputs.phi_io import check_saved_phi
from topicaudit.inputs.sizes import BoundedNpz
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets.base import Release, Transcript

RESULTS_SCHEMA = "topicaudit.results/1"          # results.json of `topicaudit run`
USER_AUDIT_SCHEMA = "topicaudit.user-audit/1"    # audit.json of `topicaudit audit`


def load_audit_corpus(config: Config) -> Corpus:
    """The corpus a run configuration names (or its synthetic one), as the run read it."""
    if config.corpus.path is None:
        s = config.synthetic
        corpus, _ = synthetic_corpus(s.n_docs, s.n_words, s.k, s.mean_length, s.topic_concentration,
                                     s.doc_concentration, seed=config.seed)
        return corpus
    c = config.corpus
    corpus = load_corpus(c.path, format=c.format, preprocess=c.preprocess, text_field=c.text_field, **c.options)
    return keep_most_frequent_words(corpus, c.max_words) if c.max_words else corpus


def fsync_directory(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable (POSIX: the directory's own fsync)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # platforms without directory handles (Windows): rename is as durable as it gets
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, writer) -> None:
    """Write through a temporary file in the same directory, fsync it, rename, fsync the directory.

    After a crash or power loss the file is either the old one or the whole new
    one, never empty or torn.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            writer(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a run directory keeps the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))


# What a torn, empty or foreign .npz raises when read (np.load and zipfile disagree by version).
UNREADABLE_NPZ = (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile,
                  zlib.error, TypeError, IndexError)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object written by topicaudit, or a UserError naming the file and the fix."""
    check_regular(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}: {error}); rerun the same command "
                        "to rewrite it") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; rerun the same command to rewrite it")
    return data


def read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz written by topicaudit, or a UserError naming the file and the fix."""
    check_regular(path)
    try:
        with BoundedNpz(path, str(path)) as z:  # each array's size checked before it is decompressed
            return {name: z[name] for name in z.files}
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    except UNREADABLE_NPZ as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}: {error}); rerun the same command "
                        "to rewrite it") from None


class RunDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.models = self.path / "models"

    # -- identity -----------------------------------------------------------
    def stored_hash(self) -> str | None:
        config = self.path / "config.toml"
        if not config.exists():
            return None
        try:
            return str(tomllib.loads(config.read_text(encoding="utf-8"))["provenance"]["config_hash"])
        except (OSError, KeyError, TypeError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise UserError(
                f"{config} cannot be read ({type(error).__name__}: {error}), so this run directory cannot be "
                "resumed safely; delete the directory to start over, or choose another output (--output)"
            ) from None

    def check_compatible(self, config_hash: str) -> bool:
        """True when resuming. Raises if the directory belongs to something else."""
        if not self.path.exists():
            return False
        if not self.path.is_dir():
            raise UserError(f"output {self.path} exists and is not a directory; choose another output (--output)")
        stored = self.stored_hash()
        if stored is None:
            if any(self.path.iterdir()):
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
        return True

    def create(self, config_dict: dict[str, Any], provenance: dict[str, Any]) -> None:
        created = not self.path.exists()
        self.models.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_directory(self.path.parent)
        if not (self.path / "config.toml").exists():
            atomic_write_text(self.path / "config.toml", to_toml({**config_dict, "provenance": provenance}))

    # -- models ---------------------------------------------------------------
    def model_path(self, index: int | str | None) -> Path:
        """None: the target; i: shadow i; a name: that model (``"canary-target"``)."""
        if isinstance(index, str):
            return self.models / f"{index}.npz"
        return self.models / ("target.npz" if index is None else f"shadow-{index + 1:04d}.npz")

    def save_model(self, index: int | str | None, release: Release, config_hash: str, seconds: float,
                   node: str = "") -> None:
        """One model file; the learner's ``info`` (if any) as a JSON string array ``info``;
        ``node``: the id of the Ray node that fitted it."""
        extra = {"info": np.array(json.dumps(release.info, sort_keys=True))} if release.info else {}
        if release.transcript is not None:
            extra.update(transcript_arrays(release.transcript))
        if node:
            extra["node"] = np.str_(node)
        atomic_write_bytes(self.model_path(index), lambda handle: np.savez(
            handle, phi=release.phi.astype(np.float32), vocabulary=release.vocabulary.astype(np.int64),
            config_hash=np.str_(config_hash), fit_seconds=np.float64(seconds), **extra,
        ))

    def load_model(self, index: int | str | None, config_hash: str) -> tuple[Release, float] | None:
        path = self.model_path(index)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["config_hash"]) != config_hash:
                    raise UserError(f"{path} was made by a different configuration; delete it to refit")
                # Files written before learners could report info have no "info" entry.
                info = json.loads(str(z["info"])) if "info" in z.files else {}
                loaded = (Release(phi=z["phi"], vocabulary=z["vocabulary"], info=info,
                                  transcript=transcript_from_arrays(z)),
                          float(z["fit_seconds"]))
        except UNREADABLE_NPZ as error:
            # A torn file (power loss before files were fsynced, a full disk): refit that model.
            warnings.warn(f"{path} is unreadable ({type(error).__name__}); refitting that model", stacklevel=2)
            path.unlink(missing_ok=True)
            return None
        check_saved_phi(loaded[0].phi, path)
        return loaded

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
            with np.load(path, allow_pickle=False) as z:
                stored = {key: z[key] for key in z.files}
        except UNREADABLE_NPZ as error:
            raise UserError(
                f"{path} is unreadable ({type(error).__name__}: {error}); it is recomputed from the seed, so "
                f"delete {path} and rerun the same command (finished models are kept)"
            ) from None
        if set(stored) != set(arrays) or not all(np.array_equal(stored[k], arrays[k]) for k in arrays):
            raise UserError(f"{path} is not the plan of this configuration; delete {path} and rerun the same "
                            "command to rewrite it, or delete the directory to start over")

    def models_by_node(self) -> dict[str, int]:
        """How many of the saved models each Ray node fitted (files from before nodes were recorded: "")."""
        counts: dict[str, int] = {}
        for path in sorted(self.models.glob("*.npz")):
            try:
                with np.load(path, allow_pickle=False) as z:
                    node = str(z["node"]) if "node" in z.files else ""
            except UNREADABLE_NPZ:
                continue
            counts[node] = counts.get(node, 0) + 1
        return counts

    # -- results --------------------------------------------------------------
    def save_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        atomic_write_bytes(self.path / name, lambda handle: np.savez(handle, **arrays))

    def save_results(self, results: dict[str, Any]) -> None:
        atomic_write_text(self.path / "results.json", json.dumps(results, indent=2) + "\n")


def transcript_arrays(transcript: Transcript) -> dict[str, np.ndarray]:
    """A mechanism transcript as model-file entries (``transcript.*``), JSON for its parameters."""
    return {"transcript.kind": np.str_(transcript.kind),
            "transcript.columns": np.asarray(transcript.columns, dtype=np.int64),
            "transcript.parameters": np.str_(json.dumps(transcript.parameters, sort_keys=True)),
            **{f"transcript.array.{name}": values for name, values in transcript.arrays.items()}}


def transcript_from_arrays(z) -> Transcript | None:
    """The transcript stored by ``transcript_arrays`` in an open model file; None when it has none."""
    if "transcript.kind" not in z.files:
        return None
    prefix = "transcript.array."
    return Transcript(str(z["transcript.kind"]), z["transcript.columns"],
                      {name[len(prefix):]: z[name] for name in z.files if name.startswith(prefix)},
                      json.loads(str(z["transcript.parameters"])))
