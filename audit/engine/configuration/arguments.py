"""The Python API's arguments, checked at its boundary as argparse checks the command line's flags.

``--epsilon 3`` reaches the engine as a float and ``--canaries 50.5`` never
does; a function gets whatever it is called with. A string went on as far as
it could (TypeError deep in a bound), ``10**400`` overflowed, ``True`` was read
as 1, ``report("RUN")`` read the letters R, U, N as three directories and an
array passed as Φ became a file type. Each is a ``UserError`` (a ValueError)
here instead, naming the argument; ranges are then checked by the code the
flags go through, with the same messages.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.configuration.config import AuditConfig
from topicaudit.engine.configuration.validation import check_path_text
from topicaudit.errors import UserError


def _shown(value: Any) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 10**30:
        return f"an integer of {len(str(abs(int(value))))} digits"
    text = repr(value) if isinstance(value, (str, bool, numbers.Number)) or value is None else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def real(value: Any, name: str) -> float | None:
    """A number as a float (None stays None): not a string, a bool, or an integer no float can hold."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UserError(f"{name} must be a number (got {_shown(value)})")
    try:
        # A float or int subclass by its own value: float() asks its __float__, which may say anything (a float
        # subclass holding 1.0 whose __float__ said 100 was tested as a claim of 100).
        return float.__float__(value) if isinstance(value, float) else (
            float(int.__index__(value)) if isinstance(value, int) else float(value))
    except OverflowError:
        raise UserError(f"{name} must be a finite number (got {_shown(value)})") from None


def integer(value: Any, name: str) -> int | None:
    """An integer as an int (None stays None): not 50.5, "50" or True."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UserError(f"{name} must be an integer (got {_shown(value)})")
    return int(value)


def boolean(value: Any, name: str) -> bool:
    """True or False (NumPy's too), as the flags give them: ``show_text="no"`` was a true value, and the
    report printed the documents' texts (hostile pass XIX-zi)."""
    if isinstance(value, np.bool_):
        value = bool(value)
    if not isinstance(value, bool):
        raise UserError(f"{name} must be True or False (got {_shown(value)})")
    return value


def path(value: Any, name: str) -> str | Path:
    """A file or directory path: a str or a path object, never an array, bytes or a number."""
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"{name} must be a path (a str or pathlib.Path; got {_shown(value)})")
    try:  # once: a path-like may give another value each time, and the one checked must be the one used
        text = os.fspath(value)
    except TypeError as error:  # its __fspath__ gave neither str nor bytes
        raise UserError(f"{name} could not be read as a path ({type(error).__name__}: {error})") from None
    if not isinstance(text, str):
        raise UserError(f"{name} must be a path given as text (its __fspath__ gave {type(text).__name__}); "
                        "pass a str or pathlib.Path")
    check_path_text(text, name)  # a NUL (ValueError) or a name over 255 bytes (OSError), as the flags refuse them
    # The text checked, as a plain str: a str subclass's own __str__ (which Path calls) may give another path.
    return str.__str__(text) if isinstance(text, str) else Path(text)


def cache_place(value: Any, name: str = "cache") -> str | Path | bool | None:
    """A run cache's folder, or True / False (NumPy's too: ``np.bool_(False)`` was refused as no path, where
    False means no cache; hostile pass XIX-zi, N8), or None for the default."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else boolean(value, name)
    return path(value, name)


def optional_path(value: Any, name: str) -> str | Path | None:
    """``path``, or None."""
    return None if value is None else path(value, name)


def paths(value: Any, name: str) -> list[str | Path]:
    """A list of paths; one path alone is a list of one (it is not a sequence of one-letter directories)."""
    if isinstance(value, (str, os.PathLike)):
        return [path(value, name)]
    if isinstance(value, (bytes, dict)) or not hasattr(value, "__iter__"):
        raise UserError(f"{name} must be a path or a list of paths (got {_shown(value)})")
    return [path(item, f"each of {name}") for item in value]


def phi(value: Any, name: str = "phi") -> str | Path | AuditConfig:
    """Φ for ``audit_model``: a file's path or a configuration, not the matrix itself."""
    if isinstance(value, AuditConfig):
        return value
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"{name} must be the path of Φ's file, a TOML configuration or an AuditConfig (got "
                        f"{_shown(value)}); save a matrix first, e.g. numpy.save('phi.npy', phi), and pass "
                        "'phi.npy'")
    return path(value, name)
