"""Ray: a local instance by default, or an existing cluster by address.

The expensive work (shadow fits, statistics) runs as Ray tasks of one CPU
each, with every numeric library pinned to one thread so tasks do not
oversubscribe cores. The count matrix goes into the object store once.
"""
from __future__ import annotations

import logging
import os
import socket
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
        runtime_env={"env_vars": ONE_THREAD},
    )
    if address:
        _check_reachable(address)
    try:
        if address:
            ray.init(address=address, **common)
        else:
            ray.init(
                address="local",
                num_cpus=num_cpus or os.cpu_count(),
                object_store_memory=max(object_store_bytes, 100 * 2**20),
                **common,
            )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        hint = ("start one with `ray start --head` (and pass --ray-address auto), or drop --ray-address "
                "to use a local instance") if address else "check that no stale Ray processes hold its ports"
        raise UserError(f"could not connect to {where}: {error}; {hint}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_description(ray) -> dict:
    resources = ray.cluster_resources()
    return {"nodes": len([n for n in ray.nodes() if n.get("Alive")]), "cpus": int(resources.get("CPU", 0))}
