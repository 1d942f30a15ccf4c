"""One writer per run (or sweep) directory: an OS lock that ``run``, ``sweep`` and ``audit`` hold while writing.

Two commands on one ``--output`` would each refit and delete the other's
models and leave a config.toml that matches neither. The lock is
``fcntl.flock`` on ``.lock`` in the directory, which the kernel releases when
the holder exits, however it ends (``kill -9`` included), so a stale lock
never blocks a resume. The file holds the holder's PID for the message.

The lock opens the directory once and holds it open for the block (``topicaudit.folder_anchors.holding``):
every file written, deleted or made below it goes through that descriptor, never through a link put in its
place, and ``.lock`` itself is opened there without following a link.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from topicaudit.engine.storage import manifest
from topicaudit.engine.storage.durable_write import disk_full, refuse_append_only
from topicaudit.errors import UserError
from topicaudit.folder_anchors import absolute, holding
from topicaudit.owned_folders import Folder, LinkedFolder, ancestors, open_folder, remove_empty

NAME = ".lock"

_UNINTERRUPTED = [0]  # depth of ``uninterrupted()`` blocks in this process


@contextmanager
def uninterrupted():
    """A few file operations that must all happen or none (check's files and the manifest that lists them): the
    command's signal handler (``cli.main``) takes a Ctrl-C or SIGTERM that lands here again 10 ms later, once
    out of the block. A SIGTERM between check.json's write and the manifest's update left a check.json the
    manifest did not match, and ``report`` refused it as edited."""
    _UNINTERRUPTED[0] += 1
    try:
        yield
    finally:
        _UNINTERRUPTED[0] -= 1


def in_uninterrupted() -> bool:
    return _UNINTERRUPTED[0] > 0

try:
    import fcntl
except ImportError:  # Windows: no advisory locks here; one writer is then the user's care
    fcntl = None


def holds_only_the_lock(path: Path) -> bool:
    """A directory holding nothing but what an interrupted start leaves: the lock, and an empty ``models/``
    (made just before config.toml). Such a directory is no one's work yet: it may be used, or removed."""
    try:
        with open_folder(path) as folder:
            return _holds_only_the_lock(folder)
    except (OSError, UserError):  # absent, not a folder, or a link topicaudit does not follow
        return False


DYING_GRACE_SECONDS = 30.0  # how long a killed holder may take to exit (it may be inside a slow fsync)


def _acquire(handle, wait: float = 0.0) -> bool:
    """Take the lock; wait while its holder is a process that was killed and has not yet exited, or, for up to
    ``wait`` seconds, while it is any holder (a cached run another check is writing)."""
    start = time.monotonic()
    noted = False
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            holder = os.pread(handle.fileno(), 64, 0).decode("ascii", "replace").strip()
            waited = time.monotonic() - start
            dying = holder.isdigit() and _dying(int(holder)) and waited < DYING_GRACE_SECONDS
            if not (dying or waited < wait):
                return False
            if wait and not noted:
                warnings.warn(f"waiting for process {holder or '?'}, which is writing this cached run, to finish "
                              f"(at most {wait:.0f} s); its run is then reused", UserWarning, stacklevel=3)
                noted = True
            time.sleep(0.05 if dying else 0.2)


def _dying(pid: int) -> bool:
    """A process with SIGKILL pending (killed inside a system call) or already a zombie (Linux)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # gone: its lock is being released
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if fields.get("State", "").strip()[:1] in ("Z", "X"):
        return True
    kill = 1 << (9 - 1)
    return any(int(fields.get(key, "0").strip() or "0", 16) & kill for key in ("SigPnd", "ShdPnd"))


_PID_LINE = re.compile(rb"\d*\n?")  # what a topicaudit lock holds: its holder's PID, or nothing yet


def _open_lock(folder: Folder, flag: str) -> tuple[int, bytes | None, tuple[int, int] | None]:
    """The lock file's descriptor, opened in the run directory's own descriptor, never through a link or onto
    a FIFO, device or directory; its former content (None: this call created it) and times (access,
    modification, in ns). A file that is no topicaudit lock is refused untouched."""
    lock = folder.path / NAME
    refuse = (f"{lock} is {{what}}, not a topicaudit lock file; remove or rename that .lock (or choose another "
              f"{flag}): the writer lock is never taken through it")
    flags = os.O_RDWR | os.O_NONBLOCK
    try:
        return folder.open(NAME, flags | os.O_CREAT | os.O_EXCL, 0o666), None, None
    except FileExistsError:
        pass
    try:
        fd = folder.open(NAME, flags)
    except IsADirectoryError:
        raise UserError(refuse.format(what="a directory")) from None
    except OSError as error:
        if error.errno == errno.ELOOP or stat.S_ISLNK(folder.lstat(NAME).st_mode):
            target = _readlink(folder, NAME)
            raise UserError(refuse.format(what="a symbolic link" + (f" (to {target})" if target else ""))) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(refuse.format(what="a FIFO, socket or device" if not stat.S_ISDIR(info.st_mode)
                                          else "a directory"))
        if info.st_nlink > 1:  # the PID written into it went into a file of the user's, elsewhere
            raise UserError(refuse.format(what=f"a hard link ({info.st_nlink} names share its content)"))
        former = os.pread(fd, 64, 0)
        if not _PID_LINE.fullmatch(former):
            raise UserError(refuse.format(what="a file of yours (it holds something other than a process id)"))
    except BaseException:
        os.close(fd)
        raise
    return fd, former, (info.st_atime_ns, info.st_mtime_ns)


def _readlink(folder: Folder, name: str) -> str | None:
    try:
        return os.readlink(name, dir_fd=folder.fd) if folder.fd is not None else os.readlink(folder.path / name)
    except OSError:
        return None


def _holds_only_the_lock(folder: Folder) -> bool:
    """What ``holds_only_the_lock`` asks, of a folder already open: looked up by its descriptor."""
    try:
        for name in folder.names():
            if name == "models" and stat.S_ISDIR(folder.lstat(name).st_mode):
                with folder.child(name) as models:
                    if models.names():
                        return False
            elif name != NAME:
                return False
    except OSError:
        return False
    return True


def _remove_own(folder: Folder) -> None:
    """Remove what the lock's block made in the folder (``.lock``, an empty ``models/``), by its descriptor,
    then the folder itself by its parent's descriptor, only while it is still the folder held (``rmdir`` by
    path went through a cache's ``runs/`` swapped for a link, and removed the user's folder of that name)."""
    try:
        folder.unlink(NAME, missing_ok=True)
        if folder.exists("models"):
            folder.rmdir("models")
    except OSError:
        return
    remove_empty(folder.path, same_as=folder)


@contextmanager
def writer_lock(path: str | Path, flag: str = "--output", wait: float = 0.0):
    """Hold the directory's writer lock for the block (creating the directory; removed again if the block
    leaves nothing in it); a second writer gets a UserError naming the holder's PID, or with ``wait`` (a run
    cache's entry: parallel checks of one configuration in CI) first waits up to that many seconds for it.

    A ``.lock`` that is a link, a directory, a FIFO or a file of the user's is refused untouched, and a
    block that fails (a directory refused as another run's, say) leaves ``.lock`` as it was found: removed
    if this call created it, its former content back otherwise.
    """
    # as the system names it: `P/y/z/..` (absent) was made as P/y, and a failure, removing P/y/z/.. by that name,
    # left P/y behind and P's times changed
    path = Path(absolute(path)) if ".." in Path(path).parts else Path(path)
    manifest.refuse_over_read_names(path, None, flag)  # not a run made inside another run's own files
    for _ in range(100):  # again when the holder waited for removed the directory it had made (and its lock)
        if path.is_symlink() and not path.exists():
            raise UserError(f"{flag} {path} is a symbolic link to {os.readlink(path)}, which does not exist; "
                            f"remove the link, or choose another {flag}")
        if path.exists() and not path.is_dir():
            raise UserError(f"{flag} {path} exists and is not a directory; choose another {flag}")
        created = not path.exists()
        found = None if created else listing(path)
        # The parents this creates too (e.g. runs/ for the default runs/NAME), removed with it when left empty.
        new_parents = [parent for parent in path.parents if not parent.exists()]
        above = next((parent for parent in path.parents if parent.exists()), None)  # the user's, left as found
        found_above = listing(above) if created and above is not None else None
        try:
            folder, fd, former, times = _open_locked(path, flag)
            made = ancestors(folder, len(new_parents)) if folder.fd is not None else None  # to remove on failure
        except BaseException:  # a folder made without rights to its own .lock (umask 0277): removed again
            if created:
                remove_made([p for p in (path, *new_parents) if os.path.lexists(p)], above, found_above)
            raise
        handle = os.fdopen(fd, "r+b", buffering=0)
        try:
            if fcntl is not None and not _acquire(handle, wait):
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                who = f"process {holder}" if holder.isdigit() else "another process"
                raise UserError(f"{path} is being written by another topicaudit command ({who}); wait for it "
                                f"to finish, or choose another {flag}")
        except BaseException:
            handle.close()
            folder.close()
            raise
        if _in_place(path, folder, fd):
            break
        handle.close()
        folder.close()
    else:
        raise UserError(f"{path} was removed or replaced each time its writer lock was taken (other commands "
                        f"are making and removing it); wait for them to finish, or choose another {flag}")

    def leave_nothing() -> None:  # a folder this made that holds only its lock is no one's work: removed
        if created and _holds_only_the_lock(folder):
            _remove_own(folder)
            remove_made(new_parents, above, found_above, made)

    def undo(only_unwritten: bool = False) -> None:  # what a failed block's end does, for an exit that runs none
        if only_unwritten and not _holds_only_the_lock(folder):
            return
        _restore(folder, fd, former, times)
        put_back_times(folder, found)
        leave_nothing()

    _ON_EXIT_NOW.append(undo)
    try:
        try:  # the PID's write inside: on a full disk it failed, and left the .lock it made (in a user's folder)
            # An empty .lock that was there may be the user's: locked as it is, never written, so that no end of the
            # command leaves it holding a PID (hostile pass XIX-w: Ray's own code ended one after a group SIGTERM).
            if former != b"":
                _write_pid(fd, path / NAME)
            with holding(path, folder):  # every write below ``path`` goes through this descriptor
                yield
        except BaseException:
            with uninterrupted():  # whole: a second signal here left the .lock in a user's folder
                _restore(folder, fd, former, times)
                put_back_times(folder, found)
            raise
        finally:
            with uninterrupted():
                leave_nothing()
    finally:
        _ON_EXIT_NOW.remove(undo)
        handle.close()
        folder.close()


# What each lock held now must undo if the process ends at once (``before_exit_now``, ``at_first_stop``).
_ON_EXIT_NOW: list[Callable[..., None]] = []


def at_first_stop() -> None:
    """At the first Ctrl-C or SIGTERM: each held lock whose folder holds nothing but the lock is undone now, as
    ``before_exit_now`` would, rather than when its block ends. A stop sent to the whole process group while a
    local Ray started also ended Ray's own processes, and Ray's code then ended the command before any block's end
    ran: a user's empty ``.lock`` in ``--output`` was left holding the command's PID (hostile pass XIX-w). A folder
    holding work (a model, a config) is left to the block's end, which keeps it for a resume."""
    for undo in reversed(_ON_EXIT_NOW):
        try:
            undo(only_unwritten=True)
        except Exception:  # noqa: BLE001 — the block's own end tries again
            continue


def before_exit_now() -> None:
    """Before the process ends at once (a second Ctrl-C or SIGTERM: ``os._exit``, no block's end runs): each held
    lock is undone as a failed block's end would: ``.lock`` as it was found (removed if made), the folder's times
    put back, and a folder it made holding nothing but the lock removed. One stop sent to a command's process
    group while its local Ray started came back as a second one (Ray's own processes stopping), and the new output
    folder was left holding only ``.lock`` (hostile pass XIX-m, SG-AU); in a folder of the user's, a ``.lock``."""
    for undo in reversed(_ON_EXIT_NOW):
        try:
            undo()
        except Exception:  # noqa: BLE001 — the process is ending: what cannot be removed stays, as after kill -9
            continue


def _write_pid(fd: int, lock: Path) -> None:
    """The holder's PID into the lock file; a full disk or a file size limit said as such, naming it."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as error:
        raise disk_full(error, lock) or error from None


def _open_locked(path: Path, flag: str) -> tuple[Folder, int, bytes | None, tuple[int, int] | None]:
    """The directory opened (made when absent; below a cache's anchor no link is followed) and its lock file."""
    try:
        folder = open_folder(path, create=True)
    except OSError as error:
        raise UserError(f"cannot write {flag} {path}: it cannot be created ({error.strerror or error}); "
                        f"choose another {flag}") from None
    try:
        refuse_append_only(folder, f"{flag} {path}")  # before its .lock is made there: it could not be removed
        return (folder, *_open_lock(folder, flag))
    except OSError as error:
        folder.close()
        raise UserError(f"cannot write {flag} {path}: it cannot be created ({error.strerror or error}); "
                        f"choose another {flag}") from None
    except BaseException:
        folder.close()
        raise


def _in_place(path: Path, folder: Folder, fd: int) -> bool:
    """Whether the directory locked is still the one at ``path`` and its ``.lock`` the file locked: a holder
    that made the directory removes it when it leaves nothing in it, and the lock taken after it was on a
    removed file (two waiters each held "the" lock), its directory gone."""
    if folder.fd is None:
        return True
    try:
        with open_folder(path) as now:
            same = os.path.samestat(os.fstat(folder.fd), os.fstat(now.fd))
            return same and os.path.samestat(now.lstat(NAME), os.fstat(fd))
    except (OSError, UserError):
        return False


def _restore(folder: Folder, fd: int, former: bytes | None, times: tuple[int, int] | None = None) -> None:
    """Leave ``.lock`` as the failed block found it: gone if it was made for it, else its former content and
    times (a refused resume changed the lock's modification time, which tools that watch it saw as a write)."""
    try:
        if former is None:
            folder.unlink(NAME, missing_ok=True)
        else:
            os.ftruncate(fd, 0)
            os.pwrite(fd, former, 0)
            if times is not None:
                os.utime(fd, ns=times)
    except OSError:
        pass


def listing(path: Path) -> tuple[list[str], tuple[int, int]] | None:
    """An existing directory's entry names and times (access, modification, in ns)."""
    try:
        info = os.stat(path)
        return sorted(os.listdir(path)), (info.st_atime_ns, info.st_mtime_ns)
    except OSError:
        return None


def put_back_times(path: Path | Folder, found: tuple[list[str], tuple[int, int]] | None) -> None:
    """A refused run into an existing directory (``--output`` an empty folder of the user's), or into a new one
    inside the user's folder, left that folder holding what it held but with a new modification time, from the
    ``.lock`` (or the run directory) made and removed again: put it back, by the folder's descriptor (a
    ``Folder`` held, or the path opened as an owned folder: never the times of a folder a link put there names)."""
    if found is None:
        return
    try:
        folder = path if isinstance(path, Folder) else open_folder(path)
    except (OSError, LinkedFolder):
        return
    try:
        if sorted(folder.names()) == found[0]:
            os.utime(folder.fd if folder.fd is not None else folder.path, ns=found[1])
    except OSError:
        pass
    finally:
        if folder is not path:
            folder.close()


def remove_made(made: list[Path], above: Path | None, found: tuple[list[str], tuple[int, int]] | None,
                identities: list[os.stat_result | None] | None = None) -> None:
    """Remove the folders a failed command made (nearest first: one not empty, and those above it, stay), each
    only while it is still the folder made (``identities``, from ``owned_folders.ancestors``; one unknown stays),
    then put back the times of the user's folder ``above`` them (``found``: its ``listing`` before)."""
    for at, parent in enumerate(made):
        same = identities[at] if identities is not None and at < len(identities) else None
        if identities is not None and same is None:
            break
        if not remove_empty(parent, same_as=same):  # by its parent's descriptor, never through a link
            break
    if above is not None:
        put_back_times(above, found)
