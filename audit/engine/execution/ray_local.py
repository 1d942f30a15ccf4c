"""A local Ray instance's processes, and Ray's failures: the checks before it starts (address space, its
temporary folder), the reaper
and the raylet watch that end it with the driver, the environment and signal handlers around ``ray.init``, and
the raylet's banners as one-line notes."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Any

resource: Any
try:
    import resource
except ImportError:  # Windows has no address-space limits
    resource = None

from topicaudit.errors import EXIT_RAY_FAILED, UserError
from topicaudit.folder_anchors import planted_link, planted_once_made


ONE_THREAD = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
)}
# What every worker gets: one thread each, and no bytecode written. A worker imports a plug-in learner when it
# unpickles the target, before any fit: Python's default put a __pycache__ folder beside the user's module
# (hostile pass XIX); the driver imports it under topicaudit.process_state's rule, which writes none either.
WORKER_ENVIRONMENT = {**ONE_THREAD, "PYTHONDONTWRITEBYTECODE": "1"}


class RayFailure(Exception):
    """Ray itself failed (did not start, or stopped under the run): not the user's input, not our bug."""


class RayCannotStart(RayFailure):
    """Ray cannot start in this process's limits; the message says which and what to change (exit 4)."""


# The address space a local instance needs besides its object store: every one of its processes (GCS,
# raylet, workers) gets the limit. Measured with Ray 2.60: ray.init aborted at 1.5 GB (`ulimit -v 1500000`),
# and a run of fits and statistics finished at 3 GB.
RAY_ADDRESS_SPACE_BYTES = 3 * 10**9


def check_address_space(object_store_bytes: int = 0) -> None:
    """Refuse to start a local Ray instance under an address-space limit (``ulimit -v``) it cannot start in.

    Ray's C++ layer otherwise aborts (SIGABRT, exit 134) with a stack dump of
    every loaded module.
    """
    if resource is None:  # Windows
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    needed = RAY_ADDRESS_SPACE_BYTES + max(object_store_bytes, 100 * 2**20)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise RayCannotStart(
            f"the address-space limit of this shell (ulimit -v {soft // 1024}) is below the ~{needed / 1e9:.1f} GB "
            "each process of a local Ray instance reserves, so Ray would abort; raise it (`ulimit -v unlimited`, "
            f"or at least {needed // 1024}) or join a cluster with --ray-address"
        )


def local_start_hint() -> str:
    """What to check when a local Ray instance did not start: stale processes, and a low limit of open files
    (under `ulimit -n 40` its GCS server never wrote its port file, and the message blamed stale processes)."""
    hint = "check that no stale Ray processes hold its ports"
    if resource is not None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < 1024:
            hint += (f", and that the limit of open files (`ulimit -n`, {soft} here) leaves Ray the hundreds of "
                     "files its processes open; raise it, or join a cluster with --ray-address")
    return hint


def ray_temp_root() -> str:
    """The folder a local Ray instance keeps its sessions in, as Ray (2.x) chooses it: ``$RAY_TMPDIR/ray``, else
    ``$TMPDIR/ray`` on Linux, else ``/tmp/ray``."""
    if "RAY_TMPDIR" in os.environ:
        base = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        base = os.environ["TMPDIR"]
    elif sys.platform.startswith(("linux", "darwin")):
        base = "/tmp"
    else:
        base = tempfile.gettempdir()
    return os.path.join(base, "ray")


def private_temp_base() -> str:
    """A new folder of this user's alone (mode 0700) for a local Ray instance to keep its root in
    (``RAY_TMPDIR``), made where Ray would have made that root; the caller removes it after the session.

    Ray makes its root and every session folder in it writable by everyone, and not sticky (``/tmp/ray``,
    ``session_*/logs``: 0777): another local user renamed a running session's ``logs`` folder and put a link to
    a folder of the user's in its place, and the run's Ray processes wrote their logs into that folder and made
    it writable by everyone (hostile pass XIX-t). Inside a folder only this user may enter, nobody else can."""
    base = os.path.dirname(ray_temp_root())  # held to check_temp_root's rules before (planted links refused)
    try:  # a short name: Ray's socket paths below it must stay under 108 bytes
        return tempfile.mkdtemp(prefix="t", dir=base)
    except OSError as error:
        raise UserError(f"cannot make a private folder for a local Ray instance in {base}: {error.strerror}; set "
                        "RAY_TMPDIR to a folder you can write, or join a cluster with --ray-address") from None


def check_temp_root() -> None:
    """Refuse to start a local Ray instance whose temporary folder is another user's symbolic link.

    Ray makes that folder writable by everyone (``chmod 777``) and writes its sessions into it, through a link: a
    link ``/tmp/ray`` planted by another user (a shared ``/tmp`` on a system that follows such links) made a folder
    of the user's, where it pointed, world-writable and filled it with Ray's logs. A link of the user's own (or of
    the administrator's) is their choice, followed as they made it. A relative folder (an empty ``RAY_TMPDIR``)
    is refused too, and so is one that does not exist (Ray made it, parents included: ``/nonexistent/ray``).
    """
    root = ray_temp_root()
    if not os.path.isabs(root):  # an empty RAY_TMPDIR: Ray made ./ray (mode 777) in the working directory, then
        variable = "RAY_TMPDIR" if "RAY_TMPDIR" in os.environ else "TMPDIR"  # timed out starting (exit 4)
        raise UserError(f"{variable}={os.environ.get(variable, '')!r} is not an absolute path, so a local Ray "
                        f"instance would keep its sessions in {root!r} below the working directory; set {variable} "
                        "to an absolute path (or unset it), or join a cluster with --ray-address")
    base = os.path.dirname(root)
    if os.path.exists(base) and not os.path.isdir(base):  # RAY_TMPDIR naming a file: Ray failed to start, exit 4
        variable = "RAY_TMPDIR" if "RAY_TMPDIR" in os.environ else "TMPDIR"
        raise UserError(f"{variable}={base} is not a directory, where a local Ray instance keeps its sessions; set "
                        f"{variable} to a directory (or unset it), or join a cluster with --ray-address")
    if not os.path.lexists(base):  # Ray made it, and every folder above it (`/nonexistent/ray`, at the root)
        variable = "RAY_TMPDIR" if "RAY_TMPDIR" in os.environ else "TMPDIR"
        raise UserError(f"{variable}={base} does not exist, and a local Ray instance would create it (with every "
                        "missing folder above it) to keep its sessions there; set it to an existing directory (or "
                        "unset it), or join a cluster with --ray-address")
    if not os.access(base, os.W_OK | os.X_OK) and not os.access(root, os.W_OK | os.X_OK):
        variable = "RAY_TMPDIR" if "RAY_TMPDIR" in os.environ else "TMPDIR"  # Ray failed to start: exit 4
        raise UserError(f"{variable}={base} cannot be written (a read-only file system, or not yours), and a local "
                        "Ray instance keeps its sessions there; set it to a folder you can write (or unset it), or "
                        "join a cluster with --ray-address")
    planted = planted_link(base)  # a folder above it reached through another user's link in a shared /tmp
    if planted is not None:
        raise UserError(f"Ray's temporary folder {root}: {planted[0]} is a symbolic link of another user (uid "
                        f"{planted[1]}) to {planted[2]}, in a folder everyone may write to (sticky, as /tmp): a "
                        "local Ray instance would make a folder there writable by everyone and write its sessions "
                        "into it; remove the link, or set RAY_TMPDIR to a folder of your own, or join a cluster "
                        "with --ray-address")
    try:
        info = os.lstat(root)
    except OSError:
        return  # absent (Ray makes it), or unreadable: Ray says why it cannot start
    if not stat.S_ISLNK(info.st_mode) or not hasattr(os, "geteuid") or info.st_uid in (os.geteuid(), 0):
        return
    raise UserError(f"Ray's temporary folder {root} is a symbolic link of another user (uid {info.st_uid}) to "
                    f"{os.readlink(root)}: a local Ray instance would make that folder writable by everyone and "
                    "write its sessions into it; remove the link, or set RAY_TMPDIR to a folder of your own, or "
                    "join a cluster with --ray-address")


def check_token_folder() -> None:
    """Refuse to start a local Ray instance that would make its authentication token through another user's link.

    Ray (2.5x) turns token authentication on for a new local instance and, with no token given, makes one in
    ``~/.ray/auth_token`` (``~/.ray`` with it): with ``HOME`` reached through another user's link in a shared
    sticky folder, ``run --shadows 2`` wrote ``.ray/auth_token`` into the folder that link named (hostile pass
    XIX-q). A token given by ``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``, or ``RAY_AUTH_MODE=disabled``, is no
    such write."""
    if (os.environ.get("RAY_AUTH_TOKEN", "").strip() or os.environ.get("RAY_AUTH_TOKEN_PATH")
            or os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "disabled"):
        return
    folder = os.path.join(os.path.expanduser("~"), ".ray")
    # Made now if missing, never through a link (Ray makes it anyway): a HOME absent here and another user's link
    # a moment later had Ray write .ray/auth_token into the folder that link named (hostile pass XIX-y)
    if planted_once_made(folder):
        planted = planted_link(folder) or (folder, "another", "a folder that kept changing")
        raise UserError(f"a local Ray instance keeps its authentication token in {folder}/auth_token, making it "
                        f"when missing: {planted[0]} is a symbolic link of another user (uid {planted[1]}) to "
                        f"{planted[2]}, in a folder everyone may write to (sticky, as /tmp); set HOME to a folder "
                        "of your own, or give Ray its token with RAY_AUTH_TOKEN_PATH, or join a cluster with "
                        "--ray-address")


def watch_raylet(ray) -> threading.Event:
    """End the driver with one line (exit 4) when the local raylet dies under it.

    Left alone, Ray's core worker notices ~15 s later, prints its own errors and
    exits 1, which ``check`` callers would read as "claim refuted". Finished
    models are already on disk; the reaper stops what remains of the instance.
    """
    stop = threading.Event()
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    raylets = [info.process for info in getattr(node, "all_processes", {}).get("raylet", [])]
    if not raylets:
        return stop

    def watch():
        while not stop.wait(0.5):
            if any(process.poll() is not None for process in raylets) and not stop.is_set():
                print("topicaudit: error: the local Ray instance stopped under the run (its raylet died); "
                      "finished models are kept — rerun the same command to resume", file=sys.stderr, flush=True)
                os._exit(EXIT_RAY_FAILED)

    threading.Thread(target=watch, name="topicaudit-raylet-watch", daemon=True).start()
    return stop


class _Reaper:
    """``topicaudit.engine.execution.ray_reaper`` watching this driver: the local instance's processes die with it."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "topicaudit.engine.execution.ray_reaper"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, text=True,
        )

    def watch(self, ray) -> None:
        """Tell the reaper which instance is ours: its session directory."""
        node = getattr(getattr(ray, "_private", None) and ray._private.worker, "_global_node", None)
        session = getattr(node, "get_session_dir_path", lambda: None)()
        if session:
            try:
                self.process.stdin.write(session + "\n")
                self.process.stdin.flush()
            except OSError:
                pass

    def stop(self) -> None:
        """After ray.shutdown: the reaper kills any straggler of this instance, then exits."""
        try:
            self.process.stdin.close()
        except OSError:
            pass


def start_reaper():
    if sys.platform != "linux":
        return _NoReaper()
    return _Reaper()


class _NoReaper:
    def watch(self, ray) -> None:
        pass

    def stop(self) -> None:
        pass


# The local instance's processes: one thread per numeric library in every worker, and
# Ray's agents watching the raylet through a pipe, so they exit the moment it does
# (polling, they linger ~60 s orphaned after the driver is killed).
LOCAL_ENVIRONMENT = {**WORKER_ENVIRONMENT, "RAY_enable_pipe_based_agent_to_parent_health_check": "1",
                     "RAY_gcs_rpc_server_reconnect_timeout_s": "5"}


@contextmanager
def environment(variables: dict[str, str]):
    """Set environment variables for the processes ray.init starts, and restore the driver's after."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def signal_handlers() -> dict | None:
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        return None
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def restore_signal_handlers(handlers: dict | None) -> None:
    """ray.init installs a SIGTERM handler that exits 1 (or 15); the caller's own handling stays in charge."""
    for s, handler in (handlers or {}).items():
        if handler is not None:
            signal.signal(s, handler)


def quiet_raylet_banners(ray) -> None:
    """Ray prints the raylet's multi-line error reports (e.g. "a worker died…") on the driver's
    stdout even with worker logs off; keep their first line, as one note on stderr."""
    worker_module = sys.modules.get("ray._private.worker")
    original = getattr(worker_module, "print_to_stdstream", None)
    if original is None or getattr(original, "_topicaudit_quiet", False):
        return

    def one_line(data, ignore_prefix=False, *args, **kwargs):
        if data.get("pid") != "raylet":
            return original(data, ignore_prefix, *args, **kwargs)
        for line in data.get("lines", []):
            first = " ".join(str(line).strip().splitlines()[:1])[:200]
            if first:
                print(f"topicaudit: note: Ray: {first}", file=sys.stderr)

    setattr(one_line, "_topicaudit_quiet", True)
    setattr(worker_module, "print_to_stdstream", one_line)
