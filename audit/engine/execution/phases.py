"""A run's phases, traced for ``benchmarks/run_phases.py``: where the wall time and the driver's CPU go.

Off unless the environment variable ``TOPICAUDIT_PHASE_TRACE`` names a file;
then every phase appends one JSON line to it: ``{"phase", "start", "end",
"cpu", "thread"}`` with wall clock times in seconds since the epoch (so the
benchmark can line them up with the CPU it samples from the other processes)
and ``cpu`` the CPU seconds of the thread that ran the phase. ``mark`` records
an instant with the process's CPU so far (the imports, whose start is the
process's own). Phases may overlap: Ray starts in the background while the
corpus loads.
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager

from topicaudit.engine.execution.progress import enter_activity, leave_activity

ENVIRONMENT_VARIABLE = "TOPICAUDIT_PHASE_TRACE"
_lock = threading.Lock()


def _append(record: dict) -> None:
    path = os.environ.get(ENVIRONMENT_VARIABLE)
    if not path:
        return
    with _lock:
        try:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError:
            pass  # a trace is never worth failing a run for


@contextmanager
def phase(name: str):
    """Trace the block as the phase ``name`` (nothing is written unless tracing is on); the progress heartbeat
    names it meanwhile (``progress.enter_activity``)."""
    entered = enter_activity(name)
    try:
        if not os.environ.get(ENVIRONMENT_VARIABLE):
            yield
            return
        start, cpu = time.time(), time.thread_time()
        try:
            yield
        finally:
            _append({"phase": name, "start": start, "end": time.time(), "cpu": time.thread_time() - cpu,
                     "thread": threading.current_thread().name})
    finally:
        leave_activity(entered)


def mark(name: str) -> None:
    """Trace an instant: the phase ``name`` ends now, having used the process's CPU so far."""
    if os.environ.get(ENVIRONMENT_VARIABLE):
        _append({"phase": name, "start": None, "end": time.time(), "cpu": time.process_time(),
                 "thread": threading.current_thread().name})
