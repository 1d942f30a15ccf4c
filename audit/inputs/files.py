"""Reading a file the user named: one message per way it can fail, before any parser sees it."""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

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


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (a model or corpus is never held twice in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
