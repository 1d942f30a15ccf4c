"""Ray: a local instance by default, or an existing cluster by address.

The expensive work (shadow fits, statistics) runs as Ray tasks of one CPU
each, with every numeric library pinned to one thread so tasks do not
oversubscribe cores. The count matrix goes into the object store once.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

resource: Any
try:
    import resource
except ImportError:  # Windows has no address-space limits
    resource = None

from topicaudit.engine.execution.phases import phase
from topicaudit.errors import EXIT_RAY_FAILED, UserError

ONE_THREAD = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
)}


def _check_reachable(address: str) -> None:
    """Fail fast on an address nobody listens on (ray.init would retry for minutes)."""
    host_port = _host_port(address)
    if host_port is None:
        return  # "auto" and other forms: ray.init reports its own errors quickly
    try:
        socket.create_connection(host_port, timeout=5).close()
    except OSError as error:
        raise UserError(
            f"nothing is listening at {address!r} ({error}); start a cluster with "
            "`ray start --head` and pass the address it prints, or drop --ray-address to use a local instance"
        ) from None


def _host_port(address: str) -> tuple[str, int] | None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return (host, int(port)) if host and port.isdigit() else None


# -- token authentication (Ray >= 2.52) ------------------------------------------------
AUTH_MODE = "RAY_AUTH_MODE"
TOKEN_FIX = ("get the cluster's token with `ray get-auth-token` on its head node and give it to this "
             "machine as ~/.ray/auth_token, RAY_AUTH_TOKEN_PATH=<file> or RAY_AUTH_TOKEN")


def token_source() -> str | None:
    """Where Ray would read a token from, in Ray's own order; None if there is none. Never the token."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        try:
            if Path(path).expanduser().read_text().strip():
                return f"RAY_AUTH_TOKEN_PATH ({path})"
        except OSError:
            pass
        raise UserError(f"RAY_AUTH_TOKEN_PATH names {path!r}, which is missing, unreadable or empty; "
                        f"point it at the file that holds the cluster's token, or unset it")
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() and default.read_text().strip() else None


@contextmanager
def _stderr_silenced():
    """Ray's C++ client logs each refused attempt straight to file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _accepted(ray, address: str) -> bool:
    """Whether the cluster's GCS accepts this process's credentials (one RPC, no retries)."""
    from ray.exceptions import AuthenticationError  # Ray ≥ 2.52 only: callers check it exists first

    try:
        with _stderr_silenced():
            ray._raylet.GcsClient(address=address)
    except AuthenticationError:
        return False
    return True


def _set_auth_mode(ray, mode: str | None) -> None:
    """Set (or unset) RAY_AUTH_MODE in this process, as Ray itself does for ``address="auto"``."""
    if mode is None:
        os.environ.pop(AUTH_MODE, None)
    else:
        os.environ[AUTH_MODE] = mode
    ray._raylet.Config.initialize("")  # the C++ side reads RAY_AUTH_MODE when (re)initialised
    ray._raylet.AuthenticationTokenLoader.instance().reset_cache()


def authenticate(ray, address: str) -> bool:
    """Make the coming ray.init pass the cluster's token check, or say in one line what to fix.

    Ray only reads a token for a cluster named by address when RAY_AUTH_MODE=token,
    while ``ray start --head`` turns authentication on whenever a token exists
    (Ray >= 2.59). So: ask the cluster first; if it wants a token and RAY_AUTH_MODE
    is unset, use the one Ray would find (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
    ~/.ray/auth_token). A cluster that asks for none is never sent one.
    Returns True when it turned token mode on (the caller turns it off after).
    """
    host_port = _host_port(address)
    if host_port is None or not hasattr(ray.exceptions, "AuthenticationError"):
        return False  # "auto" is handled by Ray itself; Ray before 2.52 has no token authentication
    gcs = f"{host_port[0]}:{host_port[1]}"
    if _accepted(ray, gcs):
        return False
    mode = os.environ.get(AUTH_MODE)
    source = token_source()
    if mode is not None and mode.lower() != "token":
        raise UserError(f"the Ray cluster at {address!r} requires token authentication but "
                        f"{AUTH_MODE}={mode} here; unset {AUTH_MODE} (or set it to token) and {TOKEN_FIX}")
    if source is None:
        raise UserError(f"the Ray cluster at {address!r} requires an authentication token and this "
                        f"machine has none; {TOKEN_FIX}")
    if mode is None:
        _set_auth_mode(ray, "token")
        if _accepted(ray, gcs):
            return True
        _set_auth_mode(ray, None)
    raise UserError(f"the Ray cluster at {address!r} rejected the authentication token from {source}; "
                    f"{TOKEN_FIX}")


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


# Sessions shutting down in the background (``StartingSession``), and what their shutdown raised.
_stopping: list[threading.Thread] = []
_stop_errors: list[BaseException] = []


def wait_for_stop() -> None:
    """Block until every session stopping in the background has shut down; re-raise what a shutdown raised.

    The command line calls it after printing its result, ``execute_run`` before
    returning to a library caller, and every new session before starting: no
    caller ever sees a half-stopped Ray.
    """
    while _stopping:
        _stopping.pop().join()
    if _stop_errors:
        raise _stop_errors.pop()


@contextmanager
def ray_session(address: str = "", num_cpus: int = 0, object_store_bytes: int = 0):
    """Connect to (or start) Ray for the duration of the block.

    address: "" starts a local instance unless RAY_ADDRESS is set; "auto" or
    "host:port" joins a running cluster (e.g. one made with ``ray start --head``).
    A session already initialised by the caller is used as it is.
    """
    import ray  # ~1 s to import: a run without shadow models never pays it

    wait_for_stop()
    if ray.is_initialized():
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS", "")
    common: dict[str, Any] = dict(
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    token_mode_set = False
    if address:
        _check_reachable(address)
        token_mode_set = authenticate(ray, address)
    if not address:
        check_address_space(object_store_bytes)
    handlers = _signal_handlers()
    reaper = None
    ON_RAY_START()
    try:
        if address:
            ray.init(address=address, runtime_env={"env_vars": ONE_THREAD}, **common)
        else:
            # Workers inherit the raylet's environment, so a local instance needs no
            # runtime_env (which would make the runtime-env agent build one per job).
            reaper = _start_reaper()
            with _environment(LOCAL_ENVIRONMENT):
                ray.init(
                    address="local",
                    num_cpus=num_cpus or os.cpu_count(),
                    object_store_memory=max(object_store_bytes, 100 * 2**20),
                    **common,
                )
            reaper.watch(ray)
    except (ConnectionError, RuntimeError, ValueError) as error:
        if token_mode_set:
            _set_auth_mode(ray, None)
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        hint = ("something answers there: check that it is the address `ray start --head` printed and that "
                "this machine has the cluster's Ray and Python versions (`ray --version`)") if address \
            else "check that no stale Ray processes hold its ports"
        if reaper is not None:
            reaper.stop()
        raise UserError(f"could not connect to {where}: {error}; {hint}") from None
    except Exception as error:  # e.g. "the node timed out during startup" on an overloaded machine
        if reaper is not None:
            reaper.stop()
        raise RayFailure(f"Ray did not start: {' '.join(str(error).split())}") from None
    finally:
        _restore_signal_handlers(handlers)
    _quiet_raylet_banners(ray)
    stop_watching = _watch_raylet(ray) if not address and EXIT_WHEN_RAYLET_DIES else threading.Event()
    try:
        yield ray
    finally:
        stop_watching.set()  # before the raylet stops, which the watcher would take for a crash
        try:
            with phase("stop"):
                ray.shutdown()
        finally:
            if reaper is not None:
                reaper.stop()
            if token_mode_set:
                _set_auth_mode(ray, None)


class StartingSession:
    """A Ray session owned by a background thread: Ray starts while the driver prepares the work, and stops
    while the driver writes the results.

    The thread that starts Ray must outlive the session: Ray's local processes
    die with the thread that started them (Linux's parent-death signal follows
    the thread, not the process). So one thread enters the session, waits
    until the work is done, and leaves it (``ray.shutdown``) while the driver
    goes on; ``wait_for_stop`` joins it.

    ``session()`` is the context manager to do the work in: it waits for the
    start and raises what the start raised (a bad address is the same one-line
    error, at the same point, as when Ray starts in the foreground).
    ``abandon()`` ends a session whose work never began (an error while
    preparing). ``then(ray)`` runs in the thread once Ray is up (e.g. warming
    the workers); what it returns is kept until the session ends. ``local``:
    the session starts its own instance on this machine (rather than joining
    a cluster), whose start takes seconds of one core.
    """

    def __init__(self, session, then=None, local: bool = False):
        self._session, self._then, self.local = session, then, local
        self._ray = None
        self._error: BaseException | None = None
        self._ready, self._done = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._own, name="topicaudit-ray", daemon=True)
        wait_for_stop()
        self._thread.start()

    def _own(self) -> None:
        try:
            with phase("ray_start"):
                self._ray = self._session.__enter__()
        except BaseException as error:  # noqa: BLE001 — re-raised in the driver's thread by session()
            self._error = error
            self._ready.set()
            return
        kept = None
        try:
            if self._then is not None:
                try:
                    kept = self._then(self._ray)
                except Exception:  # noqa: BLE001 — warming is an optimisation; the work reports real failures
                    pass
        finally:
            self._ready.set()
        self._done.wait()
        del kept
        try:
            self._session.__exit__(None, None, None)
        except BaseException as error:  # noqa: BLE001 — re-raised by wait_for_stop in the driver's thread
            _stop_errors.append(error)

    def ready(self) -> bool:
        """Whether the start has ended (Ray is up, or its start failed)."""
        return self._ready.is_set()

    @contextmanager
    def session(self):
        try:
            self._ready.wait()
        except BaseException:  # Ctrl-C while waiting: Ray is still stopped again
            self.abandon()
            raise
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        try:
            yield self._ray
        except BaseException:
            # Stopped mid-work (an error, Ctrl-C, SIGTERM): Ray shuts down here, before the driver unwinds,
            # so nothing the unwinding frees (tasks' object references) reaches Ray's core while it stops.
            self._done.set()
            self._thread.join()
            raise
        finally:
            _stopping.append(self._thread)
            self._done.set()

    def abandon(self) -> None:
        """Stop Ray again once it has started, and wait; what the start raised is dropped (the caller's error
        stands)."""
        self._done.set()
        self._thread.join()
        self._error = None
        if _stop_errors:
            _stop_errors.pop()


# Set by the command line (topicaudit.cli.main): a library caller's process is not ours to end.
EXIT_WHEN_RAYLET_DIES = False


def ON_RAY_START() -> None:  # noqa: N802 — a hook the command line replaces
    """Called just before Ray starts or is joined: from then on, an abnormal end of the process is Ray's."""


def _watch_raylet(ray) -> threading.Event:
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


def _start_reaper():
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
LOCAL_ENVIRONMENT = {**ONE_THREAD, "RAY_enable_pipe_based_agent_to_parent_health_check": "1",
                     "RAY_gcs_rpc_server_reconnect_timeout_s": "5"}


@contextmanager
def _environment(variables: dict[str, str]):
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


def _signal_handlers() -> dict | None:
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        return None
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


def _restore_signal_handlers(handlers: dict | None) -> None:
    """ray.init installs a SIGTERM handler that exits 1 (or 15); the caller's own handling stays in charge."""
    for s, handler in (handlers or {}).items():
        if handler is not None:
            signal.signal(s, handler)


def _quiet_raylet_banners(ray) -> None:
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


def one_cpu_task(ray, function):
    """``function`` as a Ray task of one CPU, spread over the cluster's nodes.

    Ray's default placement keeps tasks on the driver's node while it has room and
    reports spare CPUs elsewhere late, so a short audit could run on one node of
    many; SPREAD hands tasks round the nodes (on one machine it changes nothing).
    """
    return ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(function)


def cluster_description(ray) -> dict:
    resources = ray.cluster_resources()
    return {"nodes": len([n for n in ray.nodes() if n.get("Alive")]), "cpus": int(resources.get("CPU", 0))}
