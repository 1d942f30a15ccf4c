"""A run's phases, traced for ``benchmarks/run_phases.py``: where the wall time and the driver's CPU go.

Off unless the environment variable ``TOPICAUDIT_PHASE_TRACE`` names a file;
then every phase appends one JSON line to it: ``{"phase", "start", "end",
"cpu", "thread"}`` with wall clock times in seconds since the epoch (so the
benchmark can line them up with the CPU it samples from the other processes)
and ``cpu`` the CPU seconds of the thread that ran the phase. ``mark`` records
an instant with the process's CPU so far (the imports, whose start is the
process's own). Phases may overlap: Ray starts in the background while the
corpus loads.

The trace is only ever appended to a regular file outside every topicaudit run, sweep or audit directory,
with no other name (a hard link of a run's results.json was appended to, and the run refused as edited),
opened without following a link: it once appended to whatever the variable named, a run's results.json
included (the run was then refused as edited), and it is new, empty or already a trace (the configuration it
named was appended to before it was read, and could not be read). Any other path is ignored with one warning.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import threading
import warnings
import time
from contextlib import contextmanager

from topicaudit.engine.execution.progress import enter_activity, leave_activity
from topicaudit.engine.storage import manifest
from topicaudit.folder_anchors import planted_link

ENVIRONMENT_VARIABLE = "TOPICAUDIT_PHASE_TRACE"
_lock = threading.Lock()
_refused: set[str] = set()  # paths already warned about: one warning each


def _refusal(path: str) -> str | None:
    """Why the trace may not be appended to ``path`` (None: it may)."""
    if os.path.islink(path):
        return "it is a symbolic link"
    planted = planted_link(os.path.dirname(os.path.abspath(path)))
    if planted is not None:  # the trace went into the folder another user's link in a shared /tmp named
        return f"{planted[0]} on the way is a symbolic link of another user (uid {planted[1]}) in a shared folder"
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        return "it is not a regular file"
    if os.path.lexists(path) and os.lstat(path).st_nlink > 1:  # another name of a run's results.json, say
        return f"it is a hard link ({os.lstat(path).st_nlink} names share its content)"
    inside = manifest.topicaudit_directories(path)
    if inside:
        return f"it is inside {inside[0]}, a topicaudit directory whose files a check, report or resume verifies"
    if os.path.lexists(path) and not _a_trace(path):  # the configuration or corpus was appended to, and unreadable
        return "it holds something other than a phase trace (a file of yours: the configuration, the corpus?)"
    return None


def _a_trace(path: str) -> bool:
    """Whether the file is empty or begins with a phase record, as this module writes them."""
    with open(path, "rb") as handle:
        first = handle.readline(65536)
    if not first:
        return True
    try:
        return isinstance(json.loads(first), dict) and "phase" in json.loads(first)
    except ValueError:
        return False


def _append(record: dict) -> None:
    path = os.environ.get(ENVIRONMENT_VARIABLE)
    if not path:
        return
    with _lock:
        try:
            reason = _refusal(path)
            if reason is None:
                _write(path, (json.dumps(record) + "\n").encode("utf-8"))
        except OSError as error:  # a trace is never worth failing a run for, but it is said (an immutable file)
            reason = f"it cannot be written ({error.strerror or error})"
        if reason is not None and path not in _refused:
            _refused.add(path)
            warnings.warn(f"{ENVIRONMENT_VARIABLE}={path} is ignored: {reason}; name a new file elsewhere",
                          stacklevel=3)


def _write(path: str, line: bytes) -> None:
    """Append ``line`` to ``path``, a regular file (created if missing; a link is not followed)."""
    flags = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    # Created in its folder opened first, and that folder judged again as opened: absent at the check above, the
    # folder became another user's link a moment later and the trace was created in the folder it named (XIX-y)
    folder = os.path.dirname(os.path.abspath(path))
    above = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        if planted_link(folder) is not None or not os.path.samestat(os.fstat(above), os.stat(folder)):
            raise OSError(errno.EPERM, "its folder became another user's symbolic link")
        fd = os.open(os.path.basename(path), flags, 0o644, dir_fd=above)
    finally:
        os.close(above)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:  # swapped since the check: left alone
            os.write(fd, line)
    finally:
        os.close(fd)


@contextmanager
def phase(name: str):
    """Trace the block as the phase ``name`` (nothing is written unless tracing is on); the progress heartbeat
    names it meanwhile (``progress.enter_activity``)."""
    entered = enter_activity(name)
    try:
        if not os.environ.get(ENVIRONMENT_VARIABLE):
            yield
            return
        start, cpu = time.time(), time.thread_time()
        try:
            yield
        finally:
            _append({"phase": name, "start": start, "end": time.time(), "cpu": time.thread_time() - cpu,
                     "thread": threading.current_thread().name})
    finally:
        leave_activity(entered)


def mark(name: str) -> None:
    """Trace an instant: the phase ``name`` ends now, having used the process's CPU so far."""
    if os.environ.get(ENVIRONMENT_VARIABLE):
        _append({"phase": name, "start": None, "end": time.time(), "cpu": time.process_time(),
                 "thread": threading.current_thread().name})
