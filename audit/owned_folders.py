"""The folders topicaudit owns, opened as directory descriptors and never through a symbolic link.

Three hostile passes each found one more place where a file was written through a link into a user's folder
(a linked ``corpora``, ``runs``, ``~/.cache/topicaudit``, ``sizing``, a run's ``models/``), and the fixes were
``islink`` checks made before the write: a folder swapped for a link between the check and the write was still
written through. Here a folder is opened once, from an *anchor* the user named (``--output``, ``report -o``,
``$TOPICAUDIT_CACHE_DIR``, ``--cache``; a link there is the user's choice and is followed), and every component
below the anchor is opened with ``O_NOFOLLOW`` relative to its parent's descriptor (made with ``mkdir`` relative
to it when absent). Files are then written, renamed, removed and made relative to the folder's descriptor: a
folder renamed away and replaced by a link after it was opened is still the folder written, and a component
that is a link when it is opened is refused (``LinkedFolder``: what, where, how to fix).

Which anchor a path has: a folder held open for a block (``holding``: the writer lock holds its directory for
the whole command, so every write below it goes through that descriptor), else a folder declared topicaudit's
own below an anchor (``declare``: the caches), else the path itself (the user named it): ``folder_anchors``.
On platforms without ``dir_fd`` (Windows) the same calls fall back to paths, as before.
"""
from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import BinaryIO, Callable

from topicaudit.errors import UserError
from topicaudit.folder_anchors import anchor_of, declare, held_descriptor, planted_link, planted_once_made
from topicaudit.process_state import only_the_command

# Descriptor-relative calls (POSIX); elsewhere each call takes the folder's path.
BY_DESCRIPTOR = (hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW")
                 and {os.open, os.mkdir, os.rmdir, os.unlink, os.rename, os.stat} <= os.supports_dir_fd)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC


class LinkedFolder(UserError):
    """A folder topicaudit owns is a symbolic link (or not a folder): nothing is written through it."""

    def __init__(self, path: Path, target: str | None):
        self.path, self.target = path, target
        what = f"a symbolic link (to {target})" if target is not None else "not a directory"
        super().__init__(f"{path} is {what}, not topicaudit's own folder: nothing is written, read or deleted "
                         "through it; move it away (or remove the link) and rerun the same command")


class PlantedLink(LinkedFolder):
    """A link on the way to a path the user named that another user put in a shared sticky folder (``/tmp``)."""

    def __init__(self, path: Path, link: str, uid: int, target: str):
        self.reason = (f"{link} is a symbolic link of another user (uid {uid}) to {target}, in a folder everyone "
                       "may write to (sticky, as /tmp): topicaudit does not follow it (as the system does not where "
                       "fs.protected_symlinks is 1), so another user cannot choose where its files go; remove the "
                       "link, or give a path of your own")
        where = "" if os.path.abspath(path) == link else f"{path}: "
        UserError.__init__(self, where + self.reason)
        self.path, self.target = Path(path), target


def refuse_planted_link(path: Path | str) -> None:
    """Raise ``PlantedLink`` when another user's link in a shared sticky folder lies on the way to ``path``."""
    found = planted_link(path)
    if found is not None:
        raise PlantedLink(Path(path), *found)


def make_folders(path: Path) -> None:
    """``path``'s missing folders made, as the user's ``mkdir -p`` would, but one at a time and never through
    another user's link (``planted_once_made``): judged, then made with ``mkdir(parents=True)``, a link planted
    above it between the two (``--output /tmp/A/b/o``, A absent when judged) had the folders made in the folder
    that link named, before the output was refused (hostile pass XIX-yb). What cannot be made raises as mkdir."""
    if planted_once_made(os.fspath(path)):
        refuse_planted_link(path)
        raise UserError(f"{path}: a symbolic link on the way to it kept changing while its folders were made "
                        "(another user's, in a folder everyone may write to); nothing was made through it")
    Path(path).mkdir(parents=True, exist_ok=True)  # made above; else its error (permissions, a full disk)


class Folder:
    """An open folder: its descriptor (None without ``dir_fd``) and the path it was opened by, for messages."""

    def __init__(self, path: Path, fd: int | None):
        self.path, self.fd = Path(path), fd

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _at(self, name: str) -> tuple[str, dict]:
        """``name`` as a descriptor-relative name, or (no ``dir_fd``) as a path. Only the command's own process gets
        here: a child forked below Python ends (``process_state.only_the_command``)."""
        only_the_command()
        if self.fd is None:
            return str(self.path / name), {}
        return name, {"dir_fd": self.fd}

    # -- folders -------------------------------------------------------------
    def child(self, name: str, create: bool = False) -> Folder:
        """The folder ``name`` in this one, never through a link (made when absent and ``create``)."""
        if name in ("", ".", "..") or "/" in name or os.sep in name:
            raise ValueError(f"not a folder name: {name!r}")
        where, at = self._at(name)
        if create:
            try:
                os.mkdir(where, **at)
            except FileExistsError:
                pass
        if self.fd is None:  # no dir_fd: the check before use is all there is
            if os.path.islink(where) or not os.path.isdir(where):
                if not os.path.lexists(where):
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), where)
                raise LinkedFolder(self.path / name, _link_target(self, name))
            return Folder(self.path / name, None)
        try:
            return Folder(self.path / name, os.open(name, _DIRECTORY | NOFOLLOW, dir_fd=self.fd))
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise LinkedFolder(self.path / name, _link_target(self, name)) from None
            raise

    def mkdir(self, name: str) -> None:
        where, at = self._at(name)
        os.mkdir(where, **at)

    def rmdir(self, name: str) -> None:
        where, at = self._at(name)
        os.rmdir(where, **at)

    def make_folder(self, prefix: str) -> str:
        """A new folder ``PREFIX`` + 8 hex digits here (``mkdtemp`` by descriptor, with the usual permissions
        rather than mkdtemp's 0700); its name."""
        for _ in range(100):
            name = f"{prefix}{secrets.token_hex(4)}"
            try:
                self.mkdir(name)
            except FileExistsError:
                continue
            return name
        raise FileExistsError(errno.EEXIST, "no unused folder name", str(self.path / prefix))

    def put(self, name: str, data: bytes) -> None:
        """Write ``data`` as the file ``name`` without the fsyncs of ``write``: for a folder no one reads before it
        is complete (a report's staging). A new file renamed over ``name``, never a write into what is there: a
        hard link of a user's file put in the staging folder was truncated and overwritten in place."""
        temporary, handle = self.stage(name)
        try:
            with handle:
                handle.write(data)
            self.replace(temporary, name)
        except BaseException:
            self.unlink(temporary, missing_ok=True)
            raise

    def move(self, name: str, into: Folder, new_name: str) -> None:
        """Rename the entry ``name`` to ``new_name`` in ``into`` (a link is moved as a link)."""
        only_the_command()
        if self.fd is None or into.fd is None:
            os.replace(self.path / name, into.path / new_name)
        else:
            os.replace(name, new_name, src_dir_fd=self.fd, dst_dir_fd=into.fd)

    def remove_tree(self, name: str) -> None:
        """Remove the entry ``name``: a real folder with everything in it (``rmtree`` by descriptor, which never
        follows a link), else the file or link itself."""
        try:
            if not stat.S_ISDIR(self.lstat(name).st_mode):
                self.unlink(name, missing_ok=True)
            elif self.fd is not None:
                shutil.rmtree(name, ignore_errors=True, dir_fd=self.fd)
            else:
                shutil.rmtree(self.path / name, ignore_errors=True)
        except OSError:
            pass

    def holds(self, name: str, folder: Folder) -> bool:
        """Whether the entry ``name`` here is still ``folder`` (held open): not a link or another folder put in
        its place since it was opened (without descriptors: not a link)."""
        try:
            if self.fd is None or folder.fd is None:
                return stat.S_ISDIR(self.lstat(name).st_mode)
            return os.path.samestat(self.lstat(name), os.fstat(folder.fd))
        except OSError:
            return False

    def expect(self, name: str, folder: Folder) -> None:
        """Refuse (``LinkedFolder``) when the entry ``name`` here is no longer ``folder`` (``holds``)."""
        if not self.holds(name, folder):
            raise LinkedFolder(self.path / name, _link_target(self, name))

    def files(self) -> list[str]:
        """The files below this folder (relative, ``/``-separated), listed by its descriptor: never through a link."""
        if self.fd is None:
            return sorted(p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if not p.is_dir())
        return sorted(os.path.normpath(os.path.join(top, name)).replace(os.sep, "/")
                      for top, _, files, _ in os.fwalk(".", dir_fd=self.fd) for name in files)

    def names(self) -> list[str]:
        return os.listdir(self.fd if self.fd is not None else self.path)

    def fsync(self) -> None:
        """Make a rename or a new entry durable (POSIX: the directory's own fsync)."""
        try:
            if self.fd is not None:
                os.fsync(self.fd)
        except OSError:
            pass

    # -- entries -------------------------------------------------------------
    def lstat(self, name: str) -> os.stat_result:
        where, at = self._at(name)
        return os.stat(where, follow_symlinks=False, **at)

    def exists(self, name: str) -> bool:
        try:
            self.lstat(name)
            return True
        except FileNotFoundError:
            return False

    def open(self, name: str, flags: int, mode: int = 0o666) -> int:
        """``os.open`` of ``name`` in this folder; ``O_NOFOLLOW`` always: a link there is never opened."""
        where, at = self._at(name)
        return os.open(where, flags | NOFOLLOW | CLOEXEC, mode, **at)

    def unlink(self, name: str, missing_ok: bool = False) -> None:
        where, at = self._at(name)
        try:
            os.unlink(where, **at)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def replace(self, source: str, name: str) -> None:
        self.move(source, self, name)

    def stage(self, name: str) -> tuple[str, BinaryIO]:
        """A new temporary file beside ``name`` (``.NAME.XXXXXXXX.tmp``, the usual permissions), open for
        reading and writing: ``mkstemp`` takes no directory descriptor."""
        for _ in range(100):  # NAME cut to 200 characters: `--json` named 250 was refused as "too long"
            temporary = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
            try:
                fd = self.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            _keep_mode(fd, self, name)
            return temporary, os.fdopen(fd, "w+b")
        raise FileExistsError(errno.EEXIST, "no unused temporary name", str(self.path / name))

    def write(self, name: str, writer: Callable[[BinaryIO], object], fsync: bool = True) -> str:
        """Write ``name`` whole or not at all: a temporary file fsynced, renamed over it, the folder fsynced
        (unless ``fsync`` is False: the caller does it).
        Returns the SHA-256 (hex) of the bytes written, read back through the temporary's own descriptor."""
        temporary, handle = self.stage(name)
        try:
            with handle:
                writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
                handle.seek(0)
                digest = hashlib.sha256()
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            self.replace(temporary, name)
        except BaseException:
            self.unlink(temporary, missing_ok=True)
            raise
        if fsync:
            self.fsync()
        return digest.hexdigest()


def _keep_mode(fd: int, folder: Folder, name: str) -> None:
    """The new file takes the permissions of the user's own file it replaces: a `check` under ``umask 000`` made
    a run's manifest writable by everyone (under ``077``, readable by no one else), and a ``--json`` file kept
    private (600) became readable by all. A file of another owner gives nothing: one planted in a shared folder
    (``/tmp``) must not make the command's output writable by others."""
    try:
        found = folder.lstat(name)
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid():
            os.fchmod(fd, stat.S_IMODE(found.st_mode) & 0o777)
    except (OSError, AttributeError):  # no such file yet; no geteuid (Windows)
        pass


def _link_target(folder: Folder, name: str) -> str | None:
    """What the link ``name`` names; None when it is no link (a file where a folder belongs)."""
    try:
        if folder.fd is None:
            return os.readlink(folder.path / name)
        return os.readlink(name, dir_fd=folder.fd)
    except OSError:
        return None


def open_folder(path: Path, create: bool = False) -> Folder:
    """``path`` opened as a folder: its anchor as named, every component below it without following a link
    (made when absent and ``create``; the anchor itself is made by path, parents included, as the user's
    ``mkdir -p`` would). Raises ``LinkedFolder`` for a component that is a link, FileNotFoundError for one
    that is absent."""
    base, parts = anchor_of(path)
    shown = Path(path)
    held = held_descriptor(base)
    folder = Folder(base, held) if held is not None else None
    if folder is None:
        refuse_planted_link(base)
        if create:
            make_folders(base)
        folder = Folder(base, os.open(base, _DIRECTORY) if BY_DESCRIPTOR else None)
        try:  # again once open: a link planted between the look and the open (a race) is refused too
            refuse_planted_link(base)
        except PlantedLink:
            folder.close()
            raise
    try:
        for part in parts:
            inner = folder.child(part, create)
            folder.close()
            folder = inner
    except BaseException:
        folder.close()
        raise
    folder.path = shown  # messages name the path as the caller gave it
    return folder


def new_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``PREFIX`` + 8 hex digits made in ``parent`` by its descriptor, and declared topicaudit's
    own below it (a report's staging): what is written in it never goes through a link put in its place."""
    with open_folder(parent) as folder:
        made = Path(parent) / folder.make_folder(prefix)
    declare(made, Path(parent))
    return made


def ancestors(folder: Folder, count: int) -> list[os.stat_result | None]:
    """The identities of the ``count`` folders above ``folder`` (nearest first), reached from its descriptor
    (``..``), not by path: the folders a command made above its output, removed after a failure only while they
    are still these (a user's empty folder reached through a link put in their place was removed)."""
    found: list[os.stat_result | None] = []
    here = os.dup(folder.fd) if folder.fd is not None and count > 0 else None
    try:
        for _ in range(count):  # one `..` at a time: a path of them would pass PATH_MAX in a deep tree
            if here is None:
                found.append(None)
                continue
            try:
                above = os.open("..", _DIRECTORY, dir_fd=here)
            except OSError:
                os.close(here)
                here = None
                found.append(None)
                continue
            os.close(here)
            here = above
            found.append(os.fstat(here))
    finally:
        if here is not None:
            os.close(here)
    return found


def remove_empty(path: Path, same_as: Folder | os.stat_result | None = None) -> bool:
    """Remove the empty folder ``path`` by the descriptor of its parent, opened as every owned folder is (below
    an anchor no link is followed), and only while it is still ``same_as`` (a folder held open, or its identity):
    ``rmdir`` and ``rmtree`` by path went through a parent swapped for a link meanwhile (a cache's ``runs/``),
    and removed the user's folder of the same name there. Whether it was removed."""
    path = Path(path)
    try:
        with open_folder(path.parent) as parent:
            if isinstance(same_as, os.stat_result):
                if not os.path.samestat(parent.lstat(path.name), same_as):
                    return False
            elif same_as is not None and not parent.holds(path.name, same_as):
                return False
            parent.rmdir(path.name)
            return True
    except (OSError, ValueError, LinkedFolder):
        return False


def remove(path: Path) -> None:
    """Remove the entry at ``path`` (a real folder with all it holds, else the file or link itself) by the
    descriptor of its folder; nothing there, or a folder that cannot be opened: nothing done."""
    try:
        with open_folder(Path(path).parent) as folder:
            folder.remove_tree(Path(path).name)
    except (OSError, LinkedFolder):
        pass
