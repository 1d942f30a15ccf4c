"""The run directory's manifest: a SHA-256 of every file a verdict or a resumed run reads.

``manifest.json`` is updated as each file is written (the plan, every model,
the scores, results.json); ``check``, ``report`` and a resumed run compare the
files with it, and a mismatch is an error naming the file. It detects
corruption and accidental edits (a file copied over another, an array
re-saved), and a forger who does not recompute hashes; not one who rewrites
the manifest too (docs/run-directory.md#integrity).

A run written by a version that writes manifests says so in its own files
(``MARK`` in results.json and in config.toml's [provenance]; the ``model`` slot
of every model file), so a manifest deleted, emptied or missing an entry is
refused rather than read as no manifest (``topicaudit.engine.integrity``).
Only a directory with none of those marks, the layout written before the
manifest existed, is read without one, and its verdict says so.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from topicaudit.errors import UserError

NAME = "manifest.json"
SCHEMA = "topicaudit.manifest/1"
MARK = "manifest"  # results.json's key and [provenance]'s: this run keeps a manifest (value: SCHEMA)
MAX_BYTES = 64 * 2**20  # far above any manifest (~100 bytes per file); a larger one is not one topicaudit wrote
_CHUNK = 1 << 20


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def entries(run_dir: Path) -> dict[str, str] | None:
    """File (relative to the run directory, '/'-separated) → SHA-256; None when there is no manifest."""
    path = Path(run_dir) / NAME
    if not os.path.lexists(path):
        return None
    try:
        data = json.loads(_read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}): the run directory was damaged, so none "
                        f"of its files can be verified; {RERUN}") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise UserError(f"{path} is not a topicaudit manifest, so none of the run's files can be verified; {RERUN}")
    return files


RERUN = "rerun the audit into a new directory (--output)"


def _read_regular(path: Path) -> bytes:
    """The manifest's bytes: a regular file, opened without following a link or blocking on a FIFO, bounded."""
    if os.path.islink(path):
        raise UserError(f"{path} is a symbolic link, not the manifest the run wrote; {RERUN}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path} is not a regular file (a device, FIFO or directory); the run directory was "
                            f"altered — {RERUN}")
        if info.st_size > MAX_BYTES:
            raise UserError(f"{path} is larger than {MAX_BYTES // 2**20} MiB, which no manifest topicaudit writes "
                            f"is; {RERUN}")
        return handle.read(MAX_BYTES + 1)


def record(run_dir: Path, *names: str, write_text) -> None:
    """Add (or update) the hashes of ``names``, files just written in ``run_dir``; a missing one is dropped.

    write_text: the atomic writer of the run directory (``rundir.atomic_write_text``).
    """
    run_dir = Path(run_dir)
    try:
        files = entries(run_dir) or {}
    except UserError:
        files = {}  # a damaged manifest is rebuilt from the files it is told about
    for name in names:
        path = run_dir / name
        if path.is_file():
            files[name] = sha256(path)
        else:
            files.pop(name, None)
    write_text(run_dir / NAME, json.dumps({"schema": SCHEMA, "algorithm": "sha256", "files": files},
                                          indent=1, sort_keys=True) + "\n")


def verify(run_dir: Path, names: list[str] | None = None) -> None:
    """Each of ``names`` (default: every file the manifest lists) that exists must have its recorded hash.

    A file the manifest lists that is missing is left to the reader (which says
    how to recreate it); a file the manifest does not list is not checked.
    """
    run_dir = Path(run_dir)
    files = entries(run_dir)
    if files is None:
        return
    for name in (names if names is not None else sorted(files)):
        path = run_dir / name
        if name not in files or not path.exists():
            continue
        if not path.is_file():
            raise UserError(f"{path} is not a regular file; the run directory was altered — rerun the audit "
                            "into a new directory")
        if sha256(path) != files[name]:
            raise UserError(
                f"{path} is not the file this run wrote (its SHA-256 differs from {run_dir / NAME}): it was edited, "
                "replaced or damaged, so no result is read from it; restore it, or rerun the audit into a new "
                "directory"
            )
