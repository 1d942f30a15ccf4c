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
import sys
import threading
from contextlib import contextmanager

from audit.errors import UserError

ONE_THREAD = {name: "1" for name in (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
)}


def _check_reachable(address: str) -> None:
    """Fail fast on an address nobody listens on (ray.init would retry for minutes)."""
    host_port = address.removeprefix("ray://")
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and other forms: ray.init reports its own errors quickly
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        raise UserError(
            f"could not connect to the Ray cluster at {address!r}: {error}; start one with "
            "`ray start --head` and pass the address it prints, or drop --ray-address to use a local instance"
        ) from None


class RayFailure(Exception):
    """Ray itself failed (did not start, or stopped under the run): not the user's input, not our bug."""


@contextmanager
def ray_session(address: str = "", num_cpus: int = 0, object_store_bytes: int = 0):
    """Connect to (or start) Ray for the duration of the block.

    address: "" starts a local instance unless RAY_ADDRESS is set; "auto" or
    "host:port" joins a running cluster (e.g. one made with ``ray start --head``).
    A session already initialised by the caller is used as it is.
    """
    import ray

    if ray.is_initialized():
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS", "")
    common = dict(
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    if address:
        _check_reachable(address)
    handlers = _signal_handlers()
    reaper = None
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
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        hint = ("start one with `ray start --head` (and pass --ray-address auto), or drop --ray-address "
                "to use a local instance") if address else "check that no stale Ray processes hold its ports"
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
        stop_watching.set()
        try:
            ray.shutdown()
        finally:
            if reaper is not None:
                reaper.stop()


# Set by the command line (audit.cli): a library caller's process is not ours to end.
EXIT_WHEN_RAYLET_DIES = False


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
                from audit.cli import EXIT_RAY_FAILED

                print("topicaudit: error: the local Ray instance stopped under the run (its raylet died); "
                      "finished models are kept — rerun the same command to resume", file=sys.stderr, flush=True)
                os._exit(EXIT_RAY_FAILED)

    threading.Thread(target=watch, name="topicaudit-raylet-watch", daemon=True).start()
    return stop


class _Reaper:
    """``audit.ray_reaper`` watching this driver: the local instance's processes die with it."""

    def __init__(self):
        import subprocess

        self.process = subprocess.Popen(
            [sys.executable, "-m", "audit.ray_reaper"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
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

    one_line._topicaudit_quiet = True
    worker_module.print_to_stdstream = one_line


def cluster_description(ray) -> dict:
    resources = ray.cluster_resources()
    return {"nodes": len([n for n in ray.nodes() if n.get("Alive")]), "cpus": int(resources.get("CPU", 0))}
