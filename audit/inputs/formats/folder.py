"""The ``folder`` corpus format: a directory of text files, read recursively in sorted path order."""
from __future__ import annotations

import codecs
import os
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.inputs.files import read_user_file
from topicaudit.inputs.formats.decoding import decode, printable_name


def read_folder(path: Path, encoding: str = "utf-8") -> tuple[list[str], str, list[str]]:
    """The texts, a description, and each file's path relative to the folder (POSIX form)."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise UserError(f"unknown text encoding {encoding!r}; use e.g. 'utf-8' or 'latin-1'") from None
    if not path.exists():
        raise UserError(f"{path}: directory not found; check the path")
    if not path.is_dir():
        raise UserError(f"{path}: not a directory; the folder format reads a directory of text files")
    files = []
    for root, dirs, names in os.walk(path, onerror=_raise_walk_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files.extend(Path(root) / n for n in names if not n.startswith("."))
    files.sort(key=lambda p: p.relative_to(path).parts)
    fix = (
        f"re-save it as {encoding}, or pass the files' encoding with the option encoding= "
        "(e.g. 'latin-1')"
    )
    texts = [decode(read_user_file(f, "text file"), f, encoding, fix) for f in files]
    ids = [printable_name(f.relative_to(path).as_posix()) for f in files]
    return texts, f"folder {path} ({len(files)} files, {encoding})", ids


def _raise_walk_error(err: OSError):
    raise UserError(f"{err.filename}: cannot list the directory: {err.strerror or err}; make it readable")
