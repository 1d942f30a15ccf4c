"""Reading a file the user named: one message per way it can fail, before any parser sees it."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable

from topicaudit.errors import UserError
from topicaudit.memory import check_fits_in_memory
from topicaudit.folder_anchors import absolute


class DuplicateKey(ValueError):
    """A JSON object naming one key twice. ``json.loads`` keeps the last silently (a corpus's "text" given twice
    was read from its second list), and other JSON readers keep the first: the file means different things."""

    def __init__(self, key: str):
        shown = repr(key) if len(repr(key)) <= 80 else repr(key)[:77] + "..."
        super().__init__(f"the key {shown} appears twice in one JSON object; keep one of them (JSON readers "
                         "differ on which one counts)")


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``object_pairs_hook`` for ``json.loads``: the object as a dict, or DuplicateKey."""
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise DuplicateKey(key)
        obj[key] = value
    return obj


def strict_json(text: str | bytes) -> object:
    """``json.loads`` with :func:`unique_keys`, where JSON nested past the interpreter's recursion limit is a
    ``ValueError`` ("nested too deeply") like any other malformed JSON: the decoder raises ``RecursionError``,
    which the readers' ``except ValueError`` missed, so a vocabulary or BERTopic file of 100,000 ``[`` was exit 3."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise ValueError("nested too deeply") from None


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
# A file larger than PIN_BYTES (a large run's statistics.npz) is not held in memory: it is held open, and every
# read of the block reads that open file (a file renamed over its name is not seen), checked unchanged since it
# was hashed (a write into it changes its size, modification or change time; the change time cannot be set back).
_ABSENT = object()  # a path the block saw missing
PIN_BYTES = 64 * 2**20
_SNAPSHOT: ContextVar[dict[str, object] | None] = ContextVar("topicaudit_read_once", default=None)


class _Held:
    """A large file of the block, held open since it was hashed."""

    def __init__(self, path, fd: int, info: os.stat_result):
        self.path, self.fd, self.size = path, fd, info.st_size
        self.identity = _identity(info)

    def unchanged(self) -> None:
        if _identity(os.fstat(self.fd)) != self.identity:
            raise UserError(f"{self.path} was written, replaced or removed while it was being read; the run "
                            "directory is being altered — rerun the command once nothing else writes it")

    def read(self, limit: int | None = None) -> bytes:
        size = self.size if limit is None else min(self.size, limit + 1)
        data = os.pread(self.fd, size, 0)
        self.unchanged()
        return data

    def file(self):
        handle = os.fdopen(os.dup(self.fd), "rb")
        handle.seek(0)
        return handle


def _identity(info: os.stat_result) -> tuple:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@contextmanager
def read_once():
    """Within the block, each file is read from disk at most once (``once``), its presence looked at once
    (``present``); nested blocks share the outermost one's snapshot."""
    if _SNAPSHOT.get() is not None:
        yield
        return
    snapshot: dict[str, object] = {}
    token = _SNAPSHOT.set(snapshot)
    try:
        yield
    finally:
        _SNAPSHOT.reset(token)
        for entry in snapshot.values():
            if isinstance(entry, _Held):
                os.close(entry.fd)


def held(path: Path | str) -> "_Held | None":
    """Inside ``read_once()``, the large file ``path`` held open since it was hashed (None for any other)."""
    snapshot = _SNAPSHOT.get()
    entry = None if snapshot is None else snapshot.get(absolute(path))
    return entry if isinstance(entry, _Held) else None


def reading_once() -> bool:
    return _SNAPSHOT.get() is not None


def present(path: Path | str) -> bool:
    """``os.path.lexists(path)``; inside ``read_once()``, the answer the block first saw (or its read did)."""
    snapshot = _SNAPSHOT.get()
    if snapshot is None:
        return os.path.lexists(path)
    key = absolute(path)
    if key not in snapshot:
        if os.path.lexists(path):
            return True  # its bytes are taken by its first read
        snapshot[key] = _ABSENT
    return snapshot[key] is not _ABSENT


def once(path: Path | str, read: Callable[[], bytes], limit: int | None = None) -> bytes:
    """``read()``, the bytes of ``path``; inside ``read_once()``, only the first time (later calls get the same
    bytes). A path the block saw missing stays missing (FileNotFoundError). limit: of a large file held open,
    at most ``limit`` + 1 bytes are read (the caller refuses a file over its limit from their length)."""
    snapshot = _SNAPSHOT.get()
    if snapshot is None:
        return read()
    key = absolute(path)
    if isinstance(snapshot.get(key), _Held):
        return snapshot[key].read(limit)  # type: ignore[union-attr]
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


def _take(path: Path | str, key: str, snapshot: dict[str, object]) -> None:
    """A file's first read in a ``read_once()`` block: its bytes, or (larger than PIN_BYTES) its open file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:  # (a dangling link too) missing for the rest of the block
        snapshot[key] = _ABSENT
        raise
    try:
        info = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if stat.S_ISREG(info.st_mode) and info.st_size > PIN_BYTES:
        snapshot[key] = _Held(path, fd, info)
        return
    os.close(fd)
    once(path, lambda: whole_regular_file(path))


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
    snapshot = _SNAPSHOT.get()
    if snapshot is not None:
        key = absolute(path)
        if key not in snapshot:
            _take(path, key, snapshot)
        entry = snapshot[key]
        if isinstance(entry, _Held):
            digest = hashlib.sha256()
            offset = 0
            while block := os.pread(entry.fd, 1 << 20, offset):
                digest.update(block)
                offset += len(block)
            entry.unchanged()
            return digest.hexdigest()
        return hashlib.sha256(once(path, lambda: whole_regular_file(path))).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
