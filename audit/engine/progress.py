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

    def _line(self) -> str:
        elapsed = time.perf_counter() - self.start
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        width = 24
        bar = "#" * int(width * self.done / max(self.total, 1))
        eta = f", ~{left:.0f} s left" if self.done and self.done < self.total else ""
        return f"{self.label:<18} [{bar:<{width}}] {self.done}/{self.total}  {elapsed:.1f} s{eta}"

    def advance(self, n: int = 1) -> None:
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
