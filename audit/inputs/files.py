"""Reading a file the user named: one message per way it can fail, before any parser sees it."""
from __future__ import annotations

import hashlib
import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory


def open_regular(path: Path, what: str):
    """``path`` opened for binary reading, or a UserError when it is not a regular file.

    Opened without blocking (a FIFO would wait in ``open`` for a writer that
    never comes) and checked with ``fstat`` on the open file, so what is read
    is what was checked: /dev/zero, a FIFO or a socket is refused, not read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, but a {what} was expected; give the file's path") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied reading the {what}; make it readable") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise UserError(f"{path}: is a directory, but a {what} was expected; give the file's path")
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file ({_kind(info.st_mode)}), but a {what} was expected; "
                        "give the path of a file on disk")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def read_user_file(path: Path, what: str) -> bytes:
    """The bytes of a file the user named (``what`` says which: "JSON corpus file", "Φ file"…), or a UserError."""
    with open_regular(path, what) as f:
        size = os.fstat(f.fileno()).st_size
        check_fits_in_memory(2 * size, f"reading the {what} {path}", "use a smaller file, or free memory")
        try:
            return f.read()
        except OSError as e:
            raise UserError(f"{path}: cannot read the {what}: {e.strerror or e}") from None


def check_regular(*paths: Path, fix: str = "it should be a file topicaudit wrote: delete it and rerun the command "
                                          "that writes it") -> None:
    """Refuse any of ``paths`` that exists but is not a regular file (a FIFO would hang the read that follows).

    For readers that keep their own messages for a missing file (run
    directories): a missing path passes, so that message still comes.
    """
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else _kind(info.st_mode)
            raise UserError(f"{path}: not a regular file ({kind}); {fix}")


# -- reading a run directory once: what is verified is what is read ------------------------------------------
# A verdict checked a file's SHA-256 (and the manifest's MAC) in one read and parsed the file in another: a
# forger who swapped files between the two (rename(2) in a loop) had a tampered canaries.npz read as the
# authenticated one, a forged verdict said "integrity: authenticated". Inside ``read_once()`` every file is read
# from disk at most once, and whether it exists is looked at once: the hash, the checks and the verdict all see
# those same bytes, and a file that appears (or vanishes) after that is not seen.
_ABSENT = object()  # a path the block saw missing
_SNAPSHOT: ContextVar[dict[str, object] | None] = ContextVar("topicaudit_read_once", default=None)


@contextmanager
def read_once():
    """Within the block, each file is read from disk at most once (``once``), its presence looked at once
    (``present``); nested blocks share the outermost one's snapshot."""
    if _SNAPSHOT.get() is not None:
        yield
        return
    token = _SNAPSHOT.set({})
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)


def reading_once() -> bool:
    return _SNAPSHOT.get() is not None


def present(path: Path | str) -> bool:
    """``os.path.lexists(path)``; inside ``read_once()``, the answer the block first saw (or its read did)."""
    snapshot = _SNAPSHOT.get()
    if snapshot is None:
        return os.path.lexists(path)
    key = os.path.abspath(path)
    if key not in snapshot:
        if os.path.lexists(path):
            return True  # its bytes are taken by its first read
        snapshot[key] = _ABSENT
    return snapshot[key] is not _ABSENT


def once(path: Path | str, read: Callable[[], bytes]) -> bytes:
    """``read()``, the bytes of ``path``; inside ``read_once()``, only the first time (later calls get the same
    bytes). A path the block saw missing stays missing (FileNotFoundError)."""
    snapshot = _SNAPSHOT.get()
    if snapshot is None:
        return read()
    key = os.path.abspath(path)
    if key not in snapshot:
        try:
            snapshot[key] = bytes(read())
        except FileNotFoundError:  # (a dangling link too) missing for the rest of the block
            snapshot[key] = _ABSENT
            raise
    data = snapshot[key]
    if data is _ABSENT:
        raise FileNotFoundError(2, os.strerror(2), str(path))
    return data  # type: ignore[return-value]


def whole_regular_file(path: Path | str) -> bytes:
    """The bytes of a regular file (not blocking on a FIFO, refusing a device), checked to fit in memory."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else _kind(info.st_mode)
            raise UserError(f"{path} is not a regular file ({kind}); the run directory was altered — rerun the "
                            "audit into a new directory")
        check_fits_in_memory(2 * info.st_size, f"reading {path}", "free memory")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (a model or corpus is never held twice in memory); inside
    ``read_once()``, of the bytes every later read of the block gets."""
    if reading_once():
        return hashlib.sha256(once(path, lambda: whole_regular_file(path))).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
