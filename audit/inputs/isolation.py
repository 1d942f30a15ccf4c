"""Untrusted binary files parsed in a child process, with a time and a memory limit.

A native parser (tomotopy's C++ model loader) fed a damaged file can crash
with SIGSEGV or SIGABRT, loop forever ignoring SIGTERM, or allocate without
bound. Run in a child, each of those becomes a message about the file
(:class:`topicaudit.errors.UserError`), never the end of topicaudit.

The child runs ``python -m MODULE PATH`` where ``MODULE`` defines
``read(path) -> (header, payload)``, a JSON-able dict and raw bytes (plain
arrays as bytes; never a pickle), and ends with ``serve(read)``. It limits
its own address space (RLIMIT_AS), CPU time and core dumps before the
parser runs; the parent kills it (SIGKILL) at the wall-time limit.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import struct
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from topicaudit.errors import UserError
from topicaudit.inputs.integrity_key import ENVIRONMENT_VARIABLE as KEY_VARIABLE

_HEADER = struct.Struct("<Q")           # length of the JSON header that leads the child's answer
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class Limits:
    """What one child may use: wall-clock seconds and bytes of address space."""

    seconds: float
    memory: int


class Damaged(Exception):
    """The child could not give an answer: why, in words (crash, signal, time or memory limit)."""


def run_isolated(module: str, path: Path, limits: Limits) -> tuple[dict, bytes]:
    """The child's answer for ``path``: its header and payload, or :class:`Damaged` saying why there is none.

    A reader's own refusal (an exception it raised) comes back in the header
    as ``{"error": message}``; the caller words it.
    """
    env = dict(os.environ, **{name: "1" for name in _THREAD_VARIABLES})
    # The integrity key never reaches native code parsing an untrusted file (docs/run-directory.md#integrity-key).
    env.pop(KEY_VARIABLE, None)
    # -P: the working directory is not put on the module path (a file there named like ours is never run)
    command = [sys.executable, "-P", "-m", module, str(path), str(int(limits.memory)), str(float(limits.seconds))]
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                              timeout=limits.seconds)
    except subprocess.TimeoutExpired:  # subprocess.run has killed the child (SIGKILL)
        raise Damaged(f"reading it took longer than {limits.seconds:g} s (the reader was stopped)") from None
    if done.returncode < 0:
        number = -done.returncode
        name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
        if number == signal.SIGXCPU:
            raise Damaged(f"reading it used more than {limits.seconds:g} s of CPU time (the reader was stopped)")
        raise Damaged(f"the reader crashed ({name}) on it{_last_line(done.stderr)}")
    if done.returncode != 0:
        raise Damaged(f"the reader failed (exit {done.returncode}){_last_line(done.stderr)}")
    out = done.stdout
    if len(out) < _HEADER.size:
        raise Damaged("the reader gave no answer")
    (length,) = _HEADER.unpack_from(out)
    try:
        header = json.loads(out[_HEADER.size:_HEADER.size + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Damaged("the reader's answer is garbled") from None
    if not isinstance(header, dict):
        raise Damaged("the reader's answer is garbled")
    if header.get("memory"):
        raise Damaged(f"reading it needs more than the {limits.memory / 2**30:.1f} GiB of memory allowed")
    return header, out[_HEADER.size + length:]


def _last_line(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    return f": {lines[-1][:200]}" if lines else ""


def describe(path: Path, reason: str, fix: str) -> UserError:
    """The one message for a file the isolated reader could not read."""
    return UserError(f"damaged model file {path}: {reason}; {fix}")


# -- the child's side ----------------------------------------------------------------------
def _lower(limit: int, soft: int, hard: int) -> None:
    """Lower a resource limit, never above one already inherited (``ulimit -v``: the stricter holds)."""
    try:
        _, current = resource.getrlimit(limit)
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(limit, (soft, hard))
    except (ValueError, OSError):  # a platform without that limit (macOS: RLIMIT_AS): the wall time still holds
        pass


def serve(read) -> None:
    """Child entry point: set the limits, call ``read(path)``, write the answer to the real stdout, exit 0."""
    path, memory, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    cpu = int(seconds) + 1
    _lower(resource.RLIMIT_CORE, 0, 0)  # a crash leaves no core file behind
    _lower(resource.RLIMIT_AS, memory, memory)
    _lower(resource.RLIMIT_CPU, cpu, cpu + 1)
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the library prints goes to stderr, not into the answer
    payload = b""
    try:
        header, payload = read(path)
    except MemoryError:
        header = {"memory": True}
    except Exception as error:  # noqa: BLE001 - the reader's refusal, worded by the parent
        header = {"error": f"{type(error).__name__}: {error}" if str(error) else type(error).__name__}
        traceback.print_exc()
    data = json.dumps(header).encode("utf-8")
    answer.write(_HEADER.pack(len(data)) + data + payload)
    answer.flush()
    os._exit(0)  # skip interpreter teardown: a damaged native object's destructor may crash
