"""Stop every process of a local Ray instance once the driver that started it is gone.

Started by ``topicaudit.engine.execution.parallel`` before ``ray.init``, with a pipe on its stdin;
it learns the instance's session directory from the command line of the
driver's first Ray child (or from the driver, after ``ray.init``).
When the pipe closes (the driver exited, or was killed with -9), it kills the
processes that hold a file open in that directory (every Ray process of the
instance logs there). Ray's own agents would otherwise linger ~60 s, retrying
to report the raylet's death to a GCS that died with it. Only processes of
this instance are touched, never another Ray instance on the machine.

    python -m topicaudit.engine.execution.ray_reaper        (reads the session directory from stdin)
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE_SECONDS = 1.0  # let Ray's own shutdown finish first


def processes_using(directory: str, spare: set[int]) -> list[int]:
    """PIDs not in ``spare`` with an open file under ``directory``."""
    prefix = directory.rstrip("/") + "/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in spare:
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(prefix):
                    found.append(int(entry))
                    break
        except OSError:
            continue  # gone, or not ours to read
    return found


def session_of_children(parent: int) -> str:
    """The session directory named on the command line of a child of ``parent`` (the GCS, the raylet)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                if int(handle.read().rsplit(b")", 1)[1].split()[1]) != parent:
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                arguments = handle.read().decode(errors="replace").split("\0")
        except (OSError, IndexError, ValueError):
            continue
        for argument in arguments:
            for flag in ("--session-dir=", "--session_dir="):
                if argument.startswith(flag):
                    return argument[len(flag):]
    return ""


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the driver's to handle
    driver = os.getppid()
    spare = {os.getpid(), driver}  # the driver keeps its own Ray log open after ray.shutdown
    session = ""
    # Until the driver names its session, look for it on its children's command lines,
    # so a driver killed during ray.init is covered too.
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.5)
        if ready:
            line = sys.stdin.readline()
            if not line:
                break  # the driver is gone, or done with Ray
            session = line.strip() or session
        elif not session:
            session = session_of_children(driver)
    if not session or not os.path.isabs(session) or os.path.basename(session) in ("", "ray"):
        return 0
    time.sleep(GRACE_SECONDS)
    for pid in processes_using(session, spare):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
