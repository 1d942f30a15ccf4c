"""Reads of a run's files, bounded: regular files only, a size limit each, config.toml and JSON parsed within
bounds, and the one reader of .npz files (``load_arrays``: each array's size checked before it is decompressed).

A damaged or altered file is a ``UserError`` naming it and the fix.
"""
from __future__ import annotations

import json
import os
import stat
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.configuration import toml_reader
from topicaudit.engine.storage.results import RunResults
from topicaudit.errors import UserError
from topicaudit.inputs import files
from topicaudit.inputs.sizes import ARRAY_COPIES, BoundedNpz


# What a torn, empty or foreign .npz raises when read (np.load and zipfile disagree by version).
UNREADABLE_NPZ = (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zipfile.LargeZipFile,
                  zlib.error, TypeError, IndexError, RecursionError)


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
    raw = read_regular(path, MAX_JSON_BYTES, f"which no topicaudit JSON file is; {_REWRITE}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
        raise UserError(f"{path} is unreadable ({reason}); {_REWRITE}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a JSON object; {_REWRITE}")
    return data


# A rerun alone finds the same file (XIX-zv O3: an unreadable sweep.json, "rerun the same command", failed again).
_REWRITE = "remove it, or give the command another output folder, and run it again"


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


# The arrays every model file a run writes holds (engine.storage.rundir): `model` is its slot.
_MODEL_ARRAYS = frozenset({"phi", "vocabulary", "config_hash", "model"})


def is_model_file(path: Path) -> bool:
    """Whether ``path`` is a model file of some run (a regular file, not followed through a link, holding a model's
    members): another run's models/ linked from elsewhere is no folder of a run, and `check --json` replaced its
    model there (hostile pass XIX-zs)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
    except (OSError, ValueError):
        return False
    return _MODEL_ARRAYS <= array_names(path)


def holds_model_files(folder: Path, looked_at: int = 256) -> bool:
    """Whether ``folder`` holds a model file of some run among its first ``looked_at`` .npz entries: a run's models/,
    kept elsewhere and linked back, which a new entry makes refused as edited (hostile pass XIX-zs, W18)."""
    try:
        with os.scandir(folder) as entries:
            archives = (entry for entry in entries if entry.name.endswith(".npz"))
            return any(is_model_file(Path(entry.path)) for _, entry in zip(range(looked_at), archives))
    except (OSError, ValueError):
        return False


def refuse_among_models(output: Path, flag: str) -> None:
    """Refuse an output made in a folder of a run's model files (the nearest existing folder at or above it): a
    run's models/ kept elsewhere and linked back, which nothing above marks as a run's, and where a new entry
    made that run refused as edited ever after (hostile pass XIX-zs, W18)."""
    folder = next((place for place in (Path(output), *Path(output).parents) if os.path.isdir(place)), Path("."))
    if holds_model_files(folder):
        raise UserError(f"cannot write {flag} {output}: {folder} holds a topicaudit run's model files (its models/ "
                        "folder, perhaps kept there and linked back), and a new entry there makes that run refused "
                        "as edited; give a path outside it")


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
