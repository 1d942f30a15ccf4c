"""Durable writes of a run's files: whole or not at all after a crash, never over a FIFO or a device, and a full
disk or a file size limit said in one message naming the file."""
from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
from pathlib import Path

try:
    import resource  # POSIX only: what a file size limit (EFBIG) is
except ImportError:  # pragma: no cover — Windows
    resource = None  # type: ignore[assignment]
try:
    import fcntl  # POSIX: a folder's attributes (chattr) on Linux
except ImportError:  # pragma: no cover — Windows
    fcntl = None  # type: ignore[assignment]

from topicaudit.errors import UserError
from topicaudit.owned_folders import Folder, open_folder

# Linux's FS_IOC_GETFLAGS, _IOR('f', 1, long), and its append-only and immutable flags (chattr +a, +i)
_GETFLAGS = (2 << 30) | (struct.calcsize("l") << 16) | (ord("f") << 8) | 1
_APPEND_ONLY, _IMMUTABLE = 0x20, 0x10


def fsync_directory(path: Path | Folder) -> None:
    """Make a rename or a new entry in ``path`` durable (POSIX: the directory's own fsync); a ``Folder`` by its
    descriptor."""
    if isinstance(path, Folder):
        path.fsync()
        return
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


def atomic_write_bytes(path: Path, writer) -> str:
    """Write through a temporary file in the same directory, fsync it, rename, fsync the directory; the SHA-256
    (hex) of the bytes written, for the manifest (``manifest.record``'s ``written``): hashing the file found on
    disk after the rename listed, and with a key MAC'd, whatever a forger renamed over it in that moment.

    After a crash or power loss the file is either the old one or the whole new one, never empty or torn. The
    directory is opened once (``topicaudit.owned_folders``: the folders topicaudit owns never through a link)
    and the file is made, renamed and its directory fsynced by that descriptor.
    """
    path = Path(path)
    try:
        folder = open_folder(path.parent)
    except OSError as error:
        raise disk_full(error, path) or error from None
    with folder:
        refuse_replacing(path, folder=folder)
        try:
            digest = folder.write(path.name, writer, fsync=False)
        except OSError as error:
            raise disk_full(error, path) or error from None
        fsync_directory(folder)
    return digest


def atomic_write_all(contents: list[tuple[Path, bytes]]) -> dict[Path, str]:
    """``atomic_write_bytes`` of several files, all or none: each is written and fsynced beside its place
    first, and renamed over it only once every one is written. ``check`` wrote check.json into the run
    directory and then failed on a full disk for its --junit file: the run kept a check.json its manifest
    did not match (so ``report`` refused it) after a command that said it had failed. Returns each file's
    SHA-256 (hex) of the bytes written, by path, as ``atomic_write_bytes`` does."""
    folders: dict[Path, Folder] = {}
    found: dict[Path, tuple[list[str], tuple[int, int]] | None] = {}
    staged: list[tuple[Folder, str, Path]] = []
    try:
        for path, _ in contents:  # all refused before any is staged: a refused check left its folder a new mtime
            path = Path(path)
            if path.parent not in folders:
                try:
                    folders[path.parent] = open_folder(path.parent)
                except OSError as error:
                    raise disk_full(error, path) or OSError(error.errno, error.strerror, str(path)) from None
                found[path.parent] = _listing(folders[path.parent])
            refuse_replacing(path, folder=folders[path.parent])
        try:
            for path, data in contents:
                path = Path(path)
                folder = folders[path.parent]
                try:
                    temporary, handle = folder.stage(path.name)
                    staged.append((folder, temporary, path))
                    with handle:
                        handle.write(data)
                        handle.flush()
                        os.fsync(handle.fileno())
                except OSError as error:  # named by the file it was writing, not by its temporary
                    raise disk_full(error, path) or OSError(error.errno, error.strerror, str(path)) from None
            for folder, temporary, path in staged:
                try:
                    folder.replace(temporary, path.name)
                except OSError as error:  # named by the file (an immutable one, a mount point), not its temporary
                    raise OSError(error.errno, error.strerror, str(path)) from None
        except BaseException:
            for folder, temporary, _ in staged:
                folder.unlink(temporary, missing_ok=True)
            for parent, folder in folders.items():  # a failed --json on a full disk left the user's folder
                _put_back_times(folder, found[parent])  # holding it a new mtime
            raise
        for folder in folders.values():
            fsync_directory(folder)
    finally:
        for folder in folders.values():
            folder.close()
    return {Path(path): hashlib.sha256(data).hexdigest() for path, data in contents}


def _listing(folder: Folder) -> tuple[list[str], tuple[int, int]] | None:
    """A folder's entry names and times (access, modification, in ns), by its descriptor."""
    try:
        info = os.fstat(folder.fd) if folder.fd is not None else os.stat(folder.path)
        return sorted(folder.names()), (info.st_atime_ns, info.st_mtime_ns)
    except OSError:
        return None


def _put_back_times(folder: Folder, found: tuple[list[str], tuple[int, int]] | None) -> None:
    """The folder's times as ``found`` when it holds the same names again (a write that failed and was undone)."""
    try:
        if found is not None and sorted(folder.names()) == found[0]:
            os.utime(folder.fd if folder.fd is not None else folder.path, ns=found[1])
    except OSError:
        pass


def refuse_append_only(folder: Folder, what: str) -> None:
    """An append-only folder (``chattr +a``) takes new names but never removes or renames one: a probe or a
    ``.lock`` made there before a refusal stayed in the user's folder, as would every temporary file topicaudit
    renames into place. Refused (an immutable one too) before anything is made in it."""
    if folder.fd is None or fcntl is None:
        return
    try:
        flags = struct.unpack("i", fcntl.ioctl(folder.fd, _GETFLAGS, bytes(struct.calcsize("l")))[:4])[0]
    except OSError:  # a file system without these attributes
        return
    if flags & (_APPEND_ONLY | _IMMUTABLE):
        kind = "append-only (chattr +a)" if flags & _APPEND_ONLY else "immutable (chattr +i)"
        raise UserError(f"cannot write {what}: {folder.path} is {kind}, and topicaudit writes a file by renaming a "
                        "new one into place; choose another place")


def refuse_replacing(path: Path, what: str = "", folder: Folder | None = None) -> None:
    """A file is written by renaming a new one over ``path`` (looked up in ``folder`` when given): refuse when
    something other than a regular file or a symbolic link is there. The rename would replace a FIFO or a device
    with a regular file (``check --junit /dev/null`` run as root replaced the system's /dev/null), and cannot
    replace a directory (IsADirectoryError)."""
    try:
        mode = (folder.lstat(Path(path).name) if folder is not None else os.lstat(path)).st_mode
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
    (EFBIG: ``ulimit -f``, or the file system's largest file), or no file descriptor left (``too_many_open_files``)
    — as a UserError naming the file; else None."""
    if getattr(error, "errno", None) in (errno.EMFILE, errno.ENFILE):
        return too_many_open_files(error, path)
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


def too_many_open_files(error: OSError, path: Path | str | None) -> UserError | None:
    """EMFILE or ENFILE as what it is: no file descriptor left, in this process (``ulimit -n``) or in the whole
    system; the place is not at fault (the message said "choose another place"). Else None."""
    if getattr(error, "errno", None) not in (errno.EMFILE, errno.ENFILE):
        return None
    named = path or getattr(error, "filename", None)
    what = f"cannot write {named}" if named else "cannot open a file"
    if error.errno == errno.ENFILE:
        return UserError(f"{what}: the system has too many open files (its limit of open files is reached); close "
                         "some programs, or raise the system's limit (fs.file-max), and rerun the same command")
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        limit = f" (its limit is {soft}, `ulimit -n`)" if soft != resource.RLIM_INFINITY else ""
    except (AttributeError, OSError, ValueError):  # no resource module (Windows)
        limit = ""
    return UserError(f"{what}: this process has too many open files{limit}; raise the limit (`ulimit -n 4096`) "
                     "and rerun the same command")


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


def atomic_write_text(path: Path, text: str) -> str:
    """``atomic_write_bytes`` of ``text`` in UTF-8; the SHA-256 of those bytes."""
    return atomic_write_bytes(path, lambda handle: handle.write(text.encode("utf-8")))
