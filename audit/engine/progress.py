"""Progress lines for long work: count, elapsed time, time left."""
from __future__ import annotations

import sys
import time


class Progress:
    """Reports ``label done/total`` on stderr: in place on a terminal, else every few seconds."""

    def __init__(self, label: str, total: int, stream=None, quiet: bool = False, every: float = 5.0):
        self.label, self.total = label, total
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
        return f"{self.label:<18} [{bar:<{width}}] {self.done}/{self.total}  {elapsed:.1f} s{eta}"

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
        elif now - self.last >= self.every or self.done == self.total:
            self.stream.write(self._line() + "\n")
            self.stream.flush()
            self.last = now

    def close(self) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\r" + self._line() + "\n")
            self.stream.flush()
