"""How much memory a new allocation can get, so oversized work is refused before it starts; and running out of
it said as such."""
from __future__ import annotations

import errno
import os

try:
    import resource  # POSIX only: the address-space limit (``ulimit -v``)
except ImportError:  # pragma: no cover — Windows
    resource = None  # type: ignore[assignment]

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


# What the dynamic loader and llvmlite say when a compiled library cannot be mapped for want of address space.
_MAPPING_FAILURES = ("failed to map segment", "cannot allocate memory", "could not find/load shared object")
# What compiled code says when an allocation it did not check failed (CPython's SystemError for a C function that
# returned an error and set none), and numba's ImportError for its compiled part whose own failure (the loader's
# "failed to map segment") it printed and dropped: each seen under `ulimit -v` only.
_UNDER_A_LIMIT = ("error return without exception set", "returned null without setting an exception",
                  "failed to import")


def address_space_limit() -> int | None:
    """This process's address-space limit in bytes (``ulimit -v``, RLIMIT_AS); None when unlimited or unknown."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (AttributeError, OSError, ValueError):  # no resource module (Windows), or no such limit
        return None
    return None if soft == resource.RLIM_INFINITY else soft


# The address space topicaudit's libraries (numpy, scipy with OpenBLAS, numba with LLVM) need once a command has
# loaded them. `run` loaded them under `ulimit -v` of ~550 MB on this project's machines and failed below, at a
# different place from one start to the next (an ImportError, a MemoryError, a SystemError, LLVM's abort, a
# segmentation fault; OpenBLAS hung at ~400 MB): 1 GiB also leaves room for compiling the kernels.
LIBRARIES_ADDRESS_SPACE = 2**30


def address_space_too_small() -> UserError | None:
    """A UserError when this process's address-space limit is below what the libraries need; else None. Said
    before they load, so the command ends the same way at every start instead of crashing somewhere."""
    limit = address_space_limit()
    if limit is None or limit >= LIBRARIES_ADDRESS_SPACE:
        return None
    return UserError(f"this process's address-space limit (`ulimit -v {limit // 1024}`, {format_bytes(limit)}) is "
                     f"below the ~{format_bytes(LIBRARIES_ADDRESS_SPACE)} topicaudit's libraries (numpy, scipy, numba) "
                     "need once loaded, so the command would run out of memory while loading them; raise the limit "
                     f"(`ulimit -v unlimited`, or at least `ulimit -v {LIBRARIES_ADDRESS_SPACE // 1024}`) and rerun")


def out_of_memory(error: BaseException) -> UserError | None:
    """``error`` (or what it was raised from) as the process running out of memory, a UserError naming memory
    and the fix; else None. Under ``ulimit -v`` of 300–700 MB, importing scipy or numba failed with an ImportError
    ("failed to map segment from shared object"), an OSError (llvmlite's library could not be loaded) or a
    MemoryError, each an internal error (exit 3) before."""
    limit = address_space_limit()
    seen: BaseException | None = error
    for _ in range(8):  # the exception and what it was raised from or during
        if seen is None:
            return None
        text = " ".join(str(seen).split())
        if isinstance(seen, MemoryError):
            what = "MemoryError"
            break
        if isinstance(seen, (ImportError, OSError)) and (
                getattr(seen, "errno", None) == errno.ENOMEM
                or any(phrase in text.lower() for phrase in _MAPPING_FAILURES[:2])
                or (limit is not None and _MAPPING_FAILURES[2] in text.lower())):
            what = f"a compiled library could not be loaded: {text[:160].rstrip(' ,.')}"
            break
        if limit is not None and isinstance(seen, (ImportError, SystemError)) and \
                any(phrase in text.lower() for phrase in _UNDER_A_LIMIT):
            what = f"{type(seen).__name__}: {text[:160].rstrip(' ,.')}"
            break
        seen = seen.__cause__ or seen.__context__
    else:
        return None
    if limit is not None:
        return UserError(f"out of memory ({what}) under this process's address-space limit (`ulimit -v "
                         f"{limit // 1024}`, {format_bytes(limit)}): topicaudit's libraries alone need about 1 GiB "
                         "of address space, a local Ray instance about 3 GB more; raise the limit (`ulimit -v "
                         "unlimited`) and rerun the same command (finished models are kept)")
    return UserError(f"out of memory ({what}): the machine had no memory left for it; free memory (stop other "
                     "programs) or make the job smaller (fewer shadows, canaries or documents), and rerun the same "
                     "command (finished models are kept)")
