"""Ray: a local instance by default, or an existing cluster by address.

The expensive work (shadow fits, statistics) runs as Ray tasks of one CPU
each, with every numeric library pinned to one thread so tasks do not
oversubscribe cores. The count matrix goes into the object store once.
Joining a cluster (its address, its token) is ``ray_auth``; a local
instance's processes (the reaper, the raylet watch, its environment) are
``ray_local``; here, the session and its background start and stop.
"""
from __future__ import annotations

import contextvars
import logging
import os
import shutil
import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from topicaudit.engine.execution.phases import phase
from topicaudit.engine.execution.ray_auth import NAMED_ADDRESSES, authenticate, check_reachable, set_auth_mode
from topicaudit.engine.execution.ray_local import (
    LOCAL_ENVIRONMENT,
    WORKER_ENVIRONMENT,
    RayCannotStart,
    RayFailure,
    check_address_space,
    check_temp_root,
    check_token_folder,
    environment,
    local_start_hint,
    private_temp_base,
    quiet_raylet_banners,
    restore_signal_handlers,
    signal_handlers,
    start_reaper,
    watch_raylet,
)
from topicaudit.errors import UserError



@dataclass(frozen=True)
class RayBehaviour:
    """What the command line asks of the Ray sessions it starts, beyond what a library caller gets.

    exit_when_raylet_dies: a dead local raylet ends the process with one line and exit 4 (a library caller's
        process is not ours to end). on_start: called just before Ray starts or is joined (the command line
        tells its supervisor that from then on, an abnormal end of the process is Ray's).
    """

    exit_when_raylet_dies: bool = False
    on_start: Callable[[], None] | None = None


# The behaviour of the sessions started in this context: a library caller's unless ``ray_behaviour`` says
# otherwise for the length of a block. A context variable, not a module global, so that it ends with the
# block (the command line leaves the process as it found it) and a session started in a background thread
# (``StartingSession``) sees the behaviour of the block that started it.
_BEHAVIOUR: contextvars.ContextVar[RayBehaviour] = contextvars.ContextVar("topicaudit_ray_behaviour",
                                                                          default=RayBehaviour())


@contextmanager
def ray_behaviour(behaviour: RayBehaviour):
    """Sessions started inside the block behave as ``behaviour`` says; after it, as before it."""
    token = _BEHAVIOUR.set(behaviour)
    try:
        yield behaviour
    finally:
        _BEHAVIOUR.reset(token)


def current_behaviour() -> RayBehaviour:
    """The behaviour a session started here now would have."""
    return _BEHAVIOUR.get()

# Sessions shutting down in the background (``StartingSession``), and what their shutdown raised. Process-wide,
# as Ray's own session is: a new session waits for every one still stopping, whoever started it.
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
        check_reachable(address)
        token_mode_set = authenticate(ray, address)
    if not address:
        check_address_space(object_store_bytes)
        check_temp_root()
        check_token_folder()
    private = None if address else private_temp_base()  # Ray's root inside it: a folder no other user enters
    try:
        behaviour = current_behaviour()
        handlers = signal_handlers()
        reaper = None
        if behaviour.on_start is not None:
            behaviour.on_start()
        try:
            if address:
                ray.init(address=address, runtime_env={"env_vars": WORKER_ENVIRONMENT}, **common)
            else:
                # Workers inherit the raylet's environment, so a local instance needs no
                # runtime_env (which would make the runtime-env agent build one per job).
                reaper = start_reaper()
                with environment({**LOCAL_ENVIRONMENT, "RAY_TMPDIR": private}):
                    ray.init(
                        address="local",
                        num_cpus=num_cpus or os.cpu_count(),
                        object_store_memory=max(object_store_bytes, 100 * 2**20),
                        **common,
                    )
                reaper.watch(ray)
        except (ConnectionError, RuntimeError, ValueError) as error:
            if token_mode_set:
                set_auth_mode(ray, None)
            if reaper is not None:
                reaper.stop()
            if not address:  # Ray failed to start here (exit 4, as docs/exit-codes.md says), not a bad input
                raise RayCannotStart(f"a local Ray instance did not start: {' '.join(str(error).split())}; "
                                 f"{local_start_hint()}") from None
            if address in NAMED_ADDRESSES:  # nothing was probed: "auto" finds no cluster started on this machine
                raise UserError(f"could not join a Ray cluster with address {address!r}: "
                                f"{' '.join(str(error).split())}; start one with `ray start --head`, give its "
                                "HOST:PORT, or drop --ray-address (and RAY_ADDRESS) to use a local instance") from None
            raise UserError(f"could not connect to the Ray cluster at {address!r}: {error}; something answers there: "
                            "check that it is the address `ray start --head` printed and that this machine has the "
                            "cluster's Ray and Python versions (`ray --version`)") from None
        except Exception as error:  # e.g. "the node timed out during startup" on an overloaded machine
            if reaper is not None:
                reaper.stop()
            raise RayFailure(f"Ray did not start: {' '.join(str(error).split())}") from None
        finally:
            restore_signal_handlers(handlers)
        quiet_raylet_banners(ray)
        stop_watching = watch_raylet(ray) if not address and behaviour.exit_when_raylet_dies else threading.Event()
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
                    set_auth_mode(ray, None)
    finally:
        if private is not None:  # the sessions' logs with it (Ray's processes have ended, or the reaper ends them)
            shutil.rmtree(private, ignore_errors=True)


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
        # The thread starts the session in this thread's context: the block's ``ray_behaviour`` holds there too.
        self._thread = threading.Thread(target=contextvars.copy_context().run, args=(self._own,),
                                        name="topicaudit-ray", daemon=True)
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
