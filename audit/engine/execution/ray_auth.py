"""Joining a Ray cluster by address: fail fast on an address nobody listens on, and pass the cluster's token check
(Ray >= 2.52) or say in one line what to fix."""
from __future__ import annotations

import os
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from topicaudit.errors import UserError


# The addresses ray.init takes that are not HOST:PORT: the cluster started on this machine, and a new local instance.
NAMED_ADDRESSES = ("auto", "local")


def check_reachable(address: str) -> None:
    """Fail fast on an address that is not one (Ray's own parse error was followed by our "something answers
    there") or that nobody listens on (ray.init would retry for minutes)."""
    if address in NAMED_ADDRESSES:
        return
    host_port = _host_port(address)
    if host_port is None or not 0 < host_port[1] < 65536:
        raise UserError(f"the Ray address {address!r} is not HOST:PORT: give the address `ray start --head` "
                        "printed (e.g. 10.0.0.5:6379, or ray://HOST:10001 for Ray Client), 'auto' for the cluster "
                        "started on this machine, or drop --ray-address (and RAY_ADDRESS) to use a local instance")
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


def set_auth_mode(ray, mode: str | None) -> None:
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
        set_auth_mode(ray, "token")
        if _accepted(ray, gcs):
            return True
        set_auth_mode(ray, None)
    raise UserError(f"the Ray cluster at {address!r} rejected the authentication token from {source}; "
                    f"{TOKEN_FIX}")
