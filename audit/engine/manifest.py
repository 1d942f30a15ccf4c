"""The run directory's manifest: a SHA-256 of every file a verdict or a resumed run reads.

``manifest.json`` is updated as each file is written (the plan, every model,
the scores, results.json); ``check``, ``report`` and a resumed run compare the
files with it, and a mismatch is an error naming the file. It detects
corruption and accidental edits (a file copied over another, an array
re-saved), not a determined forger, who can rewrite the manifest too
(docs/run-directory.md). Directories written before the manifest existed have
none, and are read as before.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from topicaudit.errors import UserError

NAME = "manifest.json"
SCHEMA = "topicaudit.manifest/1"
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
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(f"{path} is unreadable ({type(error).__name__}); the run directory was damaged: "
                        f"delete {path} to read the directory without it, or rerun the audit") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise UserError(f"{path} is not a topicaudit manifest; delete it to read the directory without it, "
                        "or rerun the audit")
    return files


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
