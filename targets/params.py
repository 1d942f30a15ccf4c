"""Range checks for learner parameters, run in each learner's constructor.

A learner is built (and so checked) before any data is read or Ray started:
a NaN, negative or infinite prior, or zero iterations, is refused with the
parameter's name instead of producing NaN models. Each check raises
ValueError; ``topicaudit.targets.build_target`` turns it into one message naming where
the parameter came from ([target.params] or --param).
"""
from __future__ import annotations

import math
import numbers


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive(name: str, value, *, optional: bool = False, infinite: bool = False):
    """A number > 0 (finite unless ``infinite``); None passes when ``optional``."""
    if value is None and optional:
        return None
    if not (_is_real(value) and value > 0 and (infinite or math.isfinite(value))):
        kind = "a number > 0" if infinite else "a finite number > 0"
        raise ValueError(f"{name} must be {kind}{' or unset' if optional else ''} (got {value!r})")
    return value


def non_negative(name: str, value):
    """A finite number ≥ 0."""
    if not (_is_real(value) and value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number ≥ 0 (got {value!r})")
    return value


def integer(name: str, value, minimum: int = 1):
    """An integer ≥ ``minimum`` (not a bool, not a float)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum} (got {value!r})")
    return value


def choice(name: str, value, options: tuple[str, ...]):
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)} (got {value!r})")
    return value
