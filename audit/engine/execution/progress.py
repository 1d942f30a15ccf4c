"""Progress lines for long work: count, elapsed time, time left; a heartbeat so that no stretch is silent; the
overall progress of a job of several parts (a sweep's runs).

- ``Progress``: ``label done/total`` of one phase (shadow models, canary releases, scoring), with the time left
  paced from the first completion.
- ``Heartbeat``: while a command runs (not ``--quiet``), a line on stderr whenever nothing was printed for
  ``every`` seconds (5), naming what is being done (``activity``, set by ``engine.execution.phases.phase``), how long it
  has taken and how long the command has run.
- ``Overall``: a job of N parts (a sweep's runs): parts done, elapsed time and the time left at the mean pace
  of the parts run by this command (parts already finished when it started are not paced: they return at
  once). Its clock can be given, so its estimate is tested with recorded timings (tests/test_progress.py).
"""
from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

# What the command is doing now, and since when (the main thread's phases, innermost last); when anything last
# reached stderr.
_state: dict = {"activities": [], "last_output": time.monotonic()}
ACTIVITIES = {
    "load": "reading the corpus",
    "plan": "drawing the plan and the canaries",
    "figure": "loading the plotting library while Ray starts",
    "driver_fits": "fitting models in this process while Ray starts",
    "canary_fits": "fitting the canary release",
    "fits": "fitting models",
    "experiment": "starting Ray (when shadow models need it) and fitting the models",
    "scoring": "scoring: attacks, bounds and the verdict (its power simulation)",
    "writing": "writing the results and roc.png",
    "sizing": "choosing the canary count: a timed fit and power simulations",
    "verdict": "computing the verdict (its power simulation)",
}


def noted() -> None:
    """Something reached stderr now: the heartbeat waits another interval."""
    _state["last_output"] = time.monotonic()


def enter_activity(name: str) -> bool:
    """The main thread enters the phase ``name`` (``engine.execution.phases.phase`` calls this); whether it was noted
    (other threads' phases are not: Ray starts in the background)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    _state["activities"].append((ACTIVITIES.get(name, name.replace("_", " ")), time.monotonic()))
    return True


def leave_activity(entered: bool) -> None:
    if entered and _state["activities"]:
        _state["activities"].pop()


class Heartbeat:
    """While the block runs, a line on ``stream`` whenever nothing was printed for ``every`` seconds."""

    def __init__(self, stream=None, every: float = 5.0, quiet: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.every, self.quiet = every, quiet
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        _state["command_started"] = self.started
        if not self.quiet:
            noted()
            self._thread = threading.Thread(target=self._beat, name="topicaudit-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        _state.pop("command_started", None)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def line(self, now: float) -> str:
        activity, since = _state["activities"][-1] if _state["activities"] else ("working", self.started)
        return f"  … {activity}: {now - since:.0f} s so far ({now - self.started:.0f} s since the command started)"

    def _beat(self) -> None:
        while not self._stop.wait(min(0.25, self.every / 3)):
            now = time.monotonic()
            if now - _state["last_output"] >= self.every:
                try:
                    self.stream.write(self.line(now) + "\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    return  # a closed stderr ends the heartbeat, never the command
                noted()


class Progress:
    """Reports ``label done/total`` on stderr: in place on a terminal, else every few seconds."""

    def __init__(self, label: str, total: int, stream=None, quiet: bool = False, every: float = 5.0,
                 then: str = ""):
        self.label, self.total = label, total
        self.then = then  # what follows this phase in the command, said beside its time left
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.every = every
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = self.last = time.perf_counter()
        self.done = 0
        self.first: tuple[float, int] | None = None  # (when, how many) at the first completion

    def time_left(self, now: float) -> float | None:
        """Seconds left at the pace since the first completion, or None before two more have come in.

        The pace is measured from the first completion, not from the start: the
        wait before it (Ray starting, the first compile) would otherwise be
        charged to every item left (the demo's first estimate was ~768 s for a
        job of 16 s).
        """
        if self.first is None or self.done - self.first[1] < 2 or self.done >= self.total:
            return None
        since, at = self.first
        return (now - since) / (self.done - at) * (self.total - self.done)

    def _line(self) -> str:
        now = time.perf_counter()
        elapsed = now - self.start
        left = self.time_left(now)
        width = 24
        bar = "#" * int(width * self.done / max(self.total, 1))
        eta = f", ~{left:.0f} s left" if left is not None else ""
        if left is not None and self.then:
            eta += f" ({self.then})"
        started = _state.get("command_started")
        command = f"; {time.monotonic() - started:.0f} s since the command started" if started is not None else ""
        return f"{self.label:<18} [{bar:<{width}}] {self.done}/{self.total}  {elapsed:.1f} s{eta}{command}"

    def advance(self, n: int = 1) -> None:
        if self.first is None:
            self.first = (time.perf_counter(), self.done + n)
        self.done += n
        if self.quiet:
            return
        now = time.perf_counter()
        if self.tty:
            self.stream.write("\r" + self._line())
            self.stream.flush()
            noted()
        elif now - self.last >= self.every or self.done == self.total:
            self.stream.write(self._line() + "\n")
            self.stream.flush()
            self.last = now
            noted()

    def close(self) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\r" + self._line() + "\n")
            self.stream.flush()


# Swept keys whose value scales a run's work (topics, models, canaries, iterations, documents): before two of
# their values have been timed, a run's time is taken as proportional to the value; others as independent of it.
SIZE_KEYS = ("k", "shadows", "count", "n_iter", "max_iter", "iterations", "n_docs", "max_words", "length", "steps")


class Overall:
    """A job of parts (a sweep's runs), each with the swept value it runs at: how many are done, the time
    elapsed, and the time left.

    The time left is the sum over the parts left of each one's expected time: the mean time of the parts
    already run at its value, else ``a · value^b`` fitted to the parts run so far (least squares on the logs
    once two values were timed, b kept within [b₀, 3]; before that b = b₀), where b₀ is 1 for a key that
    scales the work (``SIZE_KEYS``: topics, shadow models, canaries…) and 0 for others (ε, a learner's name).
    Parts that were finished before this command started are not paced (``finish(ran=False)``): they
    return at once. The clock can be given, so the estimate is tested with recorded timings.
    """

    def __init__(self, label: str, values: list, parameter: str = "", clock: Callable[[], float] = time.monotonic):
        self.label, self.values, self.clock = label, list(values), clock
        self.total = len(self.values)
        self.prior = 1.0 if parameter.split(".")[-1] in SIZE_KEYS else 0.0
        self.started = clock()
        self.done = 0
        self.timed: list[tuple[object, float]] = []  # (value, seconds) of the parts this command ran
        self._part_started: float | None = None

    def start(self) -> None:
        self._part_started = self.clock()

    def finish(self, ran: bool = True) -> None:
        if ran and self._part_started is not None:
            self.timed.append((self.values[self.done], self.clock() - self._part_started))
        self._part_started = None
        self.done += 1

    def _model(self) -> tuple[float, float] | None:
        """(a, b) of a · value^b over the numeric values timed; None when values are not positive numbers."""
        points = [(float(v), t) for v, t in self.timed if _positive_number(v) and t > 0]
        if len(points) != len(self.timed) or not points:
            return None
        x = np.log([v for v, _ in points])
        y = np.log([t for _, t in points])
        b = self.prior
        if np.unique(x).size >= 2:
            slope = float(np.polyfit(x, y, 1)[0])
            b = min(max(slope, self.prior), 3.0)
        return float(np.exp(np.mean(y - b * x))), b

    def expected(self, value) -> float:
        """The expected seconds of one part at ``value``."""
        same = [t for v, t in self.timed if v == value]
        if same:
            return sum(same) / len(same)
        model = self._model()
        if model is not None and _positive_number(value):
            a, b = model
            return a * float(value) ** b
        return sum(t for _, t in self.timed) / len(self.timed)

    def time_left(self) -> float | None:
        """The expected seconds of the parts left; None before the first part was timed."""
        if not self.timed:
            return None
        return sum(self.expected(v) for v in self.values[self.done:])

    def line(self) -> str:
        left = self.time_left() if self.done < self.total else None
        eta = (f", ~{left:.0f} s left" if left is not None else
               (", the time left is estimated after the first run" if self.done < self.total else ""))
        return f"{self.label}: {self.done}/{self.total} done, {self.clock() - self.started:.0f} s elapsed{eta}"


def _positive_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
