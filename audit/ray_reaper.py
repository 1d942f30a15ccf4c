"""Stop every process of a local Ray instance once the driver that started it is gone.

Started by ``audit.parallel`` before ``ray.init``, with a pipe on its stdin;
after ``ray.init`` the driver writes the instance's session directory to it.
When the pipe closes (the driver exited, or was killed with -9), it kills the
processes that hold a file open in that directory (every Ray process of the
instance logs there). Ray's own agents would otherwise linger ~60 s, retrying
to report the raylet's death to a GCS that died with it. Only processes of
this instance are touched, never another Ray instance on the machine.

    python -m audit.ray_reaper        (reads the session directory from stdin)
"""
from __future__ import annotations

import os
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


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the driver's to handle
    spare = {os.getpid(), os.getppid()}  # the driver keeps its own Ray log open after ray.shutdown
    session = ""
    try:
        for line in sys.stdin:
            session = line.strip() or session
    except OSError:
        pass
    if not session or not os.path.isabs(session) or os.path.basename(session) in ("", "ray"):
        return 0  # the driver died before Ray told it where its session lives
    time.sleep(GRACE_SECONDS)
    for pid in processes_using(session, spare):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
