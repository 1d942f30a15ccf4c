"""Whether a shared library mapped into this process (an extension module, a plug-in's ctypes kernel) is still the
file it mapped: Python runs no module code from such a file, so ``topicaudit.loaded_code``'s hook has no record of it,
and the library a process opened stays the one it runs after a rebuild (hostile pass XIX-ya, C1)."""
from __future__ import annotations

import os
import time


def _mapped() -> dict[str, set[tuple[int, int]]]:
    """The files mapped into this process (``/proc/self/maps``: shared libraries, extension modules), by path, with
    the (device, inode) of each mapping; a path whose file was removed or replaced since carries " (deleted)" and is
    given as it is. Empty where there is no such file."""
    found: dict[str, set[tuple[int, int]]] = {}
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="surrogateescape") as maps:
            for line in maps:
                fields = line.rstrip("\n").split(maxsplit=5)
                if len(fields) < 6 or not fields[5].startswith("/"):
                    continue
                major, _, minor = fields[3].partition(":")
                found.setdefault(fields[5], set()).add((os.makedev(int(major, 16), int(minor, 16)), int(fields[4])))
    except (OSError, ValueError):
        return {}
    return found


def changed_mapped(paths, names=None) -> list[str]:
    """Those of ``paths`` (real paths) mapped into this process (a shared library a plug-in opened with ctypes, an
    extension module) whose file is no longer the one mapped, or changed after the process started. Python runs no
    module code from such a file, so the audit hook has no record of it, and the library a process opened stays the
    one it runs after a rebuild: a plug-in's ctypes kernel rebuilt between two audits in one process ran the old
    library under the rebuilt file's digest, and a fresh check of the rebuilt plug-in reused that run (hostile pass
    XIX-ya, C1). When it was mapped is not known, so a file changed after the process started counts as changed, as
    a module loaded with no record does. names: as ``loaded_code.changed_files``."""
    wanted = set(paths)
    names = {os.path.basename(path) for path in wanted} | set(names or ())
    found = []
    for shown, mappings in _mapped().items():
        deleted = shown.endswith(" (deleted)")
        path = shown[: -len(" (deleted)")] if deleted else shown
        try:
            if os.path.basename(path) not in names or os.path.realpath(path) not in wanted:
                continue
            now = os.stat(path)
        except (OSError, ValueError):
            found.append(path)
            continue
        if deleted or (now.st_dev, now.st_ino) not in mappings or now.st_ctime_ns >= PROCESS_START_NS:
            found.append(path)
    return found


def _process_start_ns() -> int:
    """When this process's Python started, on the clock files' times are on (Linux's /proc: clock ticks after the
    boot, rounded down, so never later than the start); 0 where it cannot be read, so that every module loaded before
    the hook counts as changed. A process forked from its parent (``os.fork``, multiprocessing's default start on
    Linux) holds the modules the parent loaded: the start of the earliest ancestor with the same command line (a fork
    keeps it) is taken, else a module loaded by the parent, then edited before the fork, read as unchanged (hostile
    pass XIX-x, S8)."""
    try:
        def stat(pid: str) -> list[bytes]:
            with open(f"/proc/{pid}/stat", "rb") as found:
                return found.read().rpartition(b")")[2].split()

        def cmdline(pid: str) -> bytes:
            with open(f"/proc/{pid}/cmdline", "rb") as found:
                return found.read()

        own, fields = cmdline("self"), stat("self")
        started_ticks = int(fields[19])
        parent = fields[1].decode()
        for _ in range(64):  # a chain of forks, to the first ancestor that is another program
            if parent in ("0", "1"):
                break
            try:
                if cmdline(parent) != own:
                    break
                fields = stat(parent)
            except OSError:
                break
            started_ticks, parent = min(started_ticks, int(fields[19])), fields[1].decode()
        booted = time.time_ns() - time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        return booted + started_ticks * 10**9 // os.sysconf("SC_CLK_TCK")
    except Exception:  # noqa: BLE001 - no /proc, or another layout
        return 0


PROCESS_START_NS = _process_start_ns()
