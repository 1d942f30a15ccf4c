"""How much memory a new allocation can get, so oversized work is refused before it starts."""
from __future__ import annotations

import os

from topicaudit.errors import UserError


def available_memory() -> int | None:
    """Bytes the kernel says a new allocation can get (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_fits_in_memory(nbytes: float, what: str, fix: str) -> None:
    """Refuse work whose arrays alone need more than the memory available now."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise UserError(f"{what} needs about {format_bytes(nbytes)} of memory, more than the "
                        f"{format_bytes(available)} available; {fix}")
