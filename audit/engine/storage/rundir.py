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
must match, so a resumed run cannot silently mix models. This module is the
one reader of the .npz files (``load_arrays``).
"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import stat
import tempfile
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

try:
    import resource  # POSIX only: what a file size limit (EFBIG) is
except ImportError:  # pragma: no cover — Windows
    resource = None  # type: ignore[assignment]

import numpy as np

from topicaudit.engine.storage import manifest

from topicaudit.engine.configuration import toml_reader
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.validation import check_synthetic
from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.engine.storage.lock import NAME as NAME_OF_LOCK, holds_only_the_lock
from topicaudit.engine.storage.results import RunResults
from topicaudit.errors import UserError
from topicaudit.inputs import files
from topicaudit.inputs.cache import cached_corpus
from topicaudit.inputs.corpus import Corpus, keep_most_frequent_words, load_corpus
from topicaudit.inputs.integrity_key import ENVIRONMENT_VARIABLE as KEY_VARIABLE, key_file
from topicaudit.inputs.sizes import ARRAY_COPIES, BoundedNpz
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets.base import Release
from topicaudit.targets.mechanisms import LaplaceNoise, Transcript, mechanism_from_json



def load_audit_corpus(config: Config) -> Corpus:
    """The corpus a run configuration names (or its synthetic one), as the run read it."""
    if config.corpus.path is None:
        s = config.synthetic
        check_synthetic(s)  # report draws it from a run's config.toml: a negative prior was exit 3 there
        corpus, _ = synthetic_corpus(s.n_docs, s.n_words, s.k, s.mean_length, s.topic_concentration,
                                     s.doc_concentration, seed=config.seed)
        return corpus
    c = config.corpus

    def load() -> Corpus:
        corpus = load_corpus(c.path, format=c.format, preprocess=c.preprocess, text_field=c.text_field, **c.options)
        return keep_most_frequent_words(corpus, c.max_words) if c.max_words else corpus

    # A text corpus read before with the same settings: its counts from the cache (docs/corpora.md#cache).
    return cached_corpus(c.path, c.format, {"preprocess": c.preprocess, "text_field": c.text_field,
                                            "options": c.options, "max_words": c.max_words}, load)


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
    refuse_replacing(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise disk_full(error, path) or error from None
    try:
        with os.fdopen(fd, "wb") as handle:
            writer(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a run directory keeps the usual permissions
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and disk_full(error, path):
            raise disk_full(error, path) from None
        raise
    fsync_directory(path.parent)


def atomic_write_all(contents: list[tuple[Path, bytes]]) -> None:
    """``atomic_write_bytes`` of several files, all or none: each is written and fsynced beside its place
    first, and renamed over it only once every one is written. ``check`` wrote check.json into the run
    directory and then failed on a full disk for its --junit file: the run kept a check.json its manifest
    did not match (so ``report`` refused it) after a command that said it had failed."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in contents:
            path = Path(path)
            refuse_replacing(path)
            try:
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                staged.append((tmp, path))
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.chmod(tmp, 0o666 & ~_umask())
            except OSError as error:  # named by the file it was writing, not by its temporary
                raise disk_full(error, path) or OSError(error.errno, error.strerror, str(path)) from None
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    for parent in dict.fromkeys(path.parent for _, path in staged):
        fsync_directory(parent)


def refuse_replacing(path: Path, what: str = "") -> None:
    """A file is written by renaming a new one over ``path``: refuse when something other than a regular file or a
    symbolic link is there. The rename would replace a FIFO or a device with a regular file (``check --junit
    /dev/null`` run as root replaced the system's /dev/null), and cannot replace a directory (IsADirectoryError)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # nothing there (or nothing we can see): the write says what is wrong
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
            if stat.S_ISSOCK(mode) else "a device")
    raise UserError(f"cannot write {what + ' ' if what else ''}{path}: it is {kind}, not a regular file; topicaudit "
                    f"writes a file by renaming a new one over it, and never replaces {kind}: move it away or give "
                    "another path, and rerun the same command")


def disk_full(error: OSError, path: Path | str | None) -> UserError | None:
    """A write refused for room — a full disk or exhausted quota (ENOSPC, EDQUOT), a file over the size limit
    (EFBIG: ``ulimit -f``, or the file system's largest file) — as a UserError naming the file; else None."""
    if getattr(error, "errno", None) not in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EFBIG):
        return None
    named = path or getattr(error, "filename", None)
    path = Path(named or ".")
    if error.errno == errno.EFBIG:
        return UserError(f"cannot write {path if named else 'a file'}: it would be larger than {_size_limit()}; "
                         "raise the limit (`ulimit -f unlimited`) or choose an output directory on another file "
                         "system, and rerun the same command")
    mount = path.absolute()
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    what = "no space left" if error.errno == errno.ENOSPC else "the disk quota is exhausted"
    return UserError(f"cannot write {path if named else 'a file'}: {what} on the disk mounted at {mount}; free "
                     "some space there (or choose another output directory) and rerun the same command")


def _size_limit() -> str:
    """What EFBIG means here: this process's file size limit if it has one, else the file system's."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        soft = None if soft == resource.RLIM_INFINITY else soft
    except (AttributeError, OSError, ValueError):  # no resource module (Windows)
        soft = None
    if soft is None:
        return "the largest file this file system holds"
    return f"the file size limit of this process (`ulimit -f`, RLIMIT_FSIZE = {soft} bytes)"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))


# What a torn, empty or foreign .npz raises when read (np.load and zipfile disagree by version).
UNREADABLE_NPZ = (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile,
                  zlib.error, TypeError, IndexError)


MAX_JSON_BYTES = 256 * 2**20  # far above any results.json; a larger "JSON" file is not one topicaudit wrote


def regular_file(path: Path) -> os.stat_result:
    """The stat of ``path``, which must be a regular file (a FIFO or a device would block or never end)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path} is not a regular file (a device, FIFO or directory, or a link to one); the run "
                        "directory was altered — rerun the command that writes it into a new directory")
    return info


def read_regular(path: Path, limit: int, too_large: str) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (else a UserError: ``too_large`` says why
    no such file is that large). Opened without blocking and checked with ``fstat`` on the open file, so a FIFO
    (which blocked the reader forever) or a device such as /dev/zero (read until the kernel killed the process),
    put there or linked, is refused rather than read. Inside ``files.read_once()``, read from disk once."""
    try:
        raw = files.once(path, lambda: _read_regular(path, limit, too_large), limit)
    except FileNotFoundError:  # seen missing earlier in the same read_once() block
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    if len(raw) > limit:
        raise UserError(f"{path} is larger than {limit:,} bytes, {too_large}")
    return raw


def _read_regular(path: Path, limit: int, too_large: str) -> bytes:
    """``read_regular``'s read from disk."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory, not the file topicaudit wrote; the run directory was altered — "
                        "rerun the command that writes it into a new directory") from None
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path} is not a regular file (a device, FIFO or directory, or a link to one); the "
                            "run directory was altered — rerun the command that writes it into a new directory")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    finally:
        os.close(fd)
    if info.st_size > limit or size > limit:
        raise UserError(f"{path} is larger than {limit:,} bytes, {too_large}")
    return b"".join(chunks)


def read_run_toml(path: Path) -> dict[str, Any]:
    """A run directory's config.toml: a regular file within the bounds of configuration files, parsed with them
    (``toml_reader``: a dotted key of 100,000 parts grew past 7 GB in tomllib), or a UserError naming it."""
    raw = read_regular(path, toml_reader.MAX_BYTES, "which no configuration topicaudit writes is; the run "
                       "directory was altered — rerun the audit into a new directory")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start}); the run directory was "
                        "altered — rerun the audit into a new directory") from None
    return toml_reader.loads(text, str(path))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object written by topicaudit, or a UserError naming the file and the fix."""
    raw = read_regular(path, MAX_JSON_BYTES, "which no topicaudit JSON file is; rerun the same command to "
                                             "rewrite it")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
        raise UserError(f"{path} is unreadable ({reason}); rerun the same command to rewrite it") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; rerun the same command to rewrite it")
    return data


def load_arrays(path: Path, copies: int = ARRAY_COPIES) -> dict[str, np.ndarray]:
    """Every array of an .npz, each one's size checked before it is decompressed: the one reader of .npz files.

    A damaged file raises one of ``UNREADABLE_NPZ`` (or a ``UserError``
    naming it); callers decide what that means (refit a model, or stop).
    ``copies``: how many copies of an array must fit in memory.
    """
    source = path
    if (large := files.held(path)) is not None:  # held open since it was hashed: read from that open file
        with BoundedNpz(large.file(), str(path), copies) as z:
            arrays = {name: z[name] for name in z.files}
        large.unchanged()
        return arrays
    if files.reading_once():  # the bytes every other read in the block gets (its hash included)
        source = files.once(path, lambda: files.whole_regular_file(path))
    with BoundedNpz(source, str(path), copies) as z:
        return {name: z[name] for name in z.files}


def array_names(path: Path) -> set[str]:
    """The arrays an .npz run file holds, read from its index without loading one (empty when it is no regular
    file or no archive)."""
    try:
        regular_file(path)
        with zipfile.ZipFile(path) as archive:
            return {name[:-4] for name in archive.namelist() if name.endswith(".npy")}
    except (UserError, OSError, zipfile.BadZipFile):
        return set()


def read_arrays(path: Path, required: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Every array of an .npz written by topicaudit, holding at least ``required``; or a UserError naming the
    file and the fix."""
    if files.reading_once():  # the block's one read of the file (or the one it had already)
        try:
            if files.held(path) is None:
                files.once(path, lambda: files.whole_regular_file(path))
        except FileNotFoundError:
            raise UserError(f"{path} does not exist; rerun the command that writes it") from None
        except OSError as error:
            raise UserError(f"cannot read {path}: {error.strerror or error}") from None
    else:
        regular_file(path)
    try:
        arrays = load_arrays(path)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; rerun the command that writes it") from None
    except UNREADABLE_NPZ as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}: {error}); rerun the same command "
                        "to rewrite it") from None
    missing = [key for key in required if key not in arrays]
    if missing:
        raise UserError(f"{path} lacks {', '.join(missing)}; it was written by another version of topicaudit — "
                        "rerun the audit")
    return arrays


def read_results(path: Path) -> RunResults:
    """A run's results.json as :class:`RunResults`, or a UserError naming the file and the fix."""
    return RunResults.from_json(read_json(path), str(path))


class RunDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.models = self.path / "models"

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
        if os.path.islink(self.models) or (os.path.lexists(self.models) and not self.models.is_dir()):
            what = "a symbolic link" if os.path.islink(self.models) else "not a directory"
            raise UserError(f"{self.models} is {what}, not this run's models folder: the run directory was "
                            "altered, and nothing is written or deleted through it; move it away, or rerun the "
                            "audit into a new directory (--output)")

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
            return
        provenance = read_run_toml(self.path / "config.toml")["provenance"]
        others = [p for p in self.path.rglob("*") if p.is_file() and p.name not in ("config.toml", NAME_OF_LOCK)]
        if manifest.MARK in provenance and others:
            raise UserError(f"{self.path / manifest.NAME} is missing, but {self.path / 'config.toml'} records one: "
                            "without it the run's models cannot be verified; " + manifest.RERUN)

    def create(self, config_dict: dict[str, Any], provenance: dict[str, Any]) -> None:
        self._check_models_folder()
        created = not self.models.exists()  # the directory itself may be only the writer lock's so far
        self.models.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_directory(self.path.parent)
        listed = manifest.entries(self.path)
        if (self.path / "config.toml").exists() and (listed is None or "config.toml" not in listed):
            self.record("config.toml")  # interrupted before the manifest listed it (its config hash matched)
        if not (self.path / "config.toml").exists():
            # The mark says this run keeps a manifest: without one it is refused (engine/storage/integrity.py).
            atomic_write_text(self.path / "config.toml", to_toml({**config_dict, "provenance": {
                **provenance, manifest.MARK: manifest.SCHEMA}}))
            self.record("config.toml")

    def record(self, *names: str) -> None:
        """Add files just written to the manifest (``topicaudit.engine.storage.manifest``)."""
        manifest.record(self.path, *names, write_text=atomic_write_text)

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
        path = self.model_path(index)
        atomic_write_bytes(path, lambda handle: np.savez(
            handle, phi=release.phi.astype(np.float32), vocabulary=release.vocabulary.astype(np.int64),
            config_hash=np.str_(config_hash), fit_seconds=np.float64(seconds), model=np.str_(path.stem), **extra,
        ))
        self.record(path.relative_to(self.path).as_posix())

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
            release, seconds = (Release(phi=z["phi"], vocabulary=z["vocabulary"], info=info,
                                        transcript=transcript_from_arrays(z)),
                                float(z["fit_seconds"]))
        except (*UNREADABLE_NPZ, UserError) as error:
            # A torn file (power loss before files were fsynced, a full disk): refit that model.
            warnings.warn(f"{path} is unreadable ({type(error).__name__}); refitting that model", stacklevel=2)
            path.unlink(missing_ok=True)
            return None
        if made_by != config_hash:
            raise UserError(f"{path} was made by a different configuration; delete it to refit")
        listed = manifest.entries(self.path)
        if listed is not None and path.relative_to(self.path).as_posix() not in listed:
            # Written, then interrupted before the manifest listed it: it cannot be verified, so it is refitted.
            warnings.warn(f"{path} is not listed in {manifest.NAME}; refitting that model", stacklevel=2)
            path.unlink(missing_ok=True)
            return None
        manifest.verify(self.path, [path.relative_to(self.path).as_posix()])
        if slot != path.stem:
            raise UserError(f"{path} holds the model {slot!r}, not {path.stem!r}: it was copied or renamed; "
                            "delete it to refit that model")
        check_release(path, release, n_topics, n_words)
        return release, seconds

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
            self.record(name)  # equal to the recomputed plan, but written before the manifest listed it

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
    def save_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        atomic_write_bytes(self.path / name, lambda handle: np.savez(handle, **arrays))
        self.record(name)

    def save_results(self, results: RunResults) -> None:
        atomic_write_text(self.path / "results.json", json.dumps(results.to_json(), indent=2) + "\n")
        self.record("results.json")


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


def transcript_arrays(transcript: Transcript) -> dict[str, np.ndarray]:
    """A mechanism transcript as model-file entries (``transcript.*``), JSON for its constants."""
    return {"transcript.kind": np.str_(transcript.kind),
            "transcript.columns": np.asarray(transcript.columns, dtype=np.int64),
            "transcript.parameters": np.str_(json.dumps(transcript.parameters, sort_keys=True)),
            **{f"transcript.array.{name}": values for name, values in transcript.arrays.items()}}


def transcript_from_arrays(z: dict[str, np.ndarray]) -> Transcript | None:
    """The transcript stored by ``transcript_arrays`` in a model file's arrays; None when it has none.

    Model files of earlier versions are read as today's: DP-CGS's single
    release (``noisy_counts``, k × columns) and HDP-LDA's (``releases``) are
    the stacked ``noisy_counts`` of a Laplace release, and DP-SVI's
    ``expected_log_beta`` gives each step's top topic.
    """
    if "transcript.kind" not in z:
        return None
    prefix = "transcript.array."
    arrays = {name[len(prefix):]: z[name] for name in z if name.startswith(prefix)}
    mechanism = mechanism_from_json(str(z["transcript.kind"]), json.loads(str(z["transcript.parameters"])))
    if "releases" in arrays:
        arrays["noisy_counts"] = arrays.pop("releases")
    if isinstance(mechanism, LaplaceNoise) and np.ndim(arrays.get("noisy_counts")) == 2:
        arrays["noisy_counts"] = arrays["noisy_counts"][None]
    if "expected_log_beta" in arrays and "top_topics" not in arrays:
        arrays["top_topics"] = np.asarray(arrays.pop("expected_log_beta")).argmax(axis=1)
    return Transcript(mechanism, z["transcript.columns"], arrays)


# -- scores.csv (an audit's ranking) ----------------------------------------------------------
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# What a spreadsheet may skip before a formula: whitespace of every kind (\s: VT, FF, NEL, U+2028, NBSP, ...)
# and the invisible format characters (zero-width, bidi marks and controls, BOM).
_SKIPPED = r"[\s\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]*"
_FORMULA_AT_START = re.compile(_SKIPPED + r"[=+\-@]")
# A break a reader may take for a new cell or line: line breaks and separators of every kind, ; , and tab.
_FORMULA_AFTER_BREAK = re.compile(r"(?<=[\n;,\t\x0b\x0c\x1c-\x1e\x85\u2028\u2029])(?=" + _SKIPPED + r"[=+\-@])")


def csv_cell(text: str) -> str:
    """Corpus text as a CSV cell that spreadsheets display rather than evaluate (OWASP CSV injection).

    A cell starting like a formula gets a ``'`` prefix, also when whitespace
    or invisible characters of any kind come before the ``=`` (a spreadsheet
    may skip them). So does a formula character after a line break or
    separator of any kind, ``;``, ``,`` or tab inside the cell: a spreadsheet
    assuming another separator or line ending would start a cell there.
    ``\r`` becomes ``\n`` (a bare carriage return ends a row for many readers).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _FORMULA_AFTER_BREAK.sub("'", text)
    return "'" + text if text.startswith(_FORMULA_START) or _FORMULA_AT_START.match(text) else text


def scores_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """scores.csv's text: a header of ``columns``, then one line per row; floats with 10 significant digits,
    ``id`` and ``text`` cells made safe for spreadsheets (:func:`csv_cell`)."""
    out = io.StringIO()
    # Every cell quoted (OWASP): a "\r" (not in the line terminator, so QUOTE_MINIMAL left it bare),
    # a ";=" or a "\t=" inside a cell stays inside it whatever separator or line ending a reader assumes.
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(columns)
    for row in rows:
        cells = []
        for c in columns:
            value = row[c]
            if c in ("id", "text"):
                cells.append(csv_cell(str(value)))
            elif isinstance(value, float):
                cells.append(format(value, ".10g"))
            else:
                cells.append(str(value))
        writer.writerow(cells)
    return out.getvalue()
