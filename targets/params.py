"""Range checks for learner parameters, run in each learner's constructor.

A learner is built (and so checked) before any data is read or Ray started:
a NaN, negative or infinite prior, or zero iterations, is refused with the
parameter's name instead of producing NaN models. Each check raises
ValueError; ``topicaudit.targets.build_target`` turns it into one message naming where
the parameter came from ([target.params] or --param). ``check_topics``, the one check of
the number of topics for configurations, flags and Φ files, takes that place itself.
"""
from __future__ import annotations

import math
import numbers

from topicaudit.errors import UserError

# One topic is no model to audit: every document would get the same mixture.
MIN_TOPICS = 2
MAX_INTEGER = 2**31 - 1  # the largest integer parameter (a count) a learner takes
# Sane upper bounds, far above any audit the tool can finish, refused with one message before any work (a
# `--k 99999` fitted for minutes; docs/configuration.md#limits): topics, and iterations of a learner's loop.
MAX_TOPICS = 10_000
MAX_ITERATIONS = 100_000


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


def integer(name: str, value, minimum: int = 1, maximum: int = MAX_INTEGER):
    """An integer ≥ ``minimum`` (not a bool, not a float) and ≤ ``maximum``: every integer parameter is a
    count (iterations, passes, a length), and 10**21 reached NumPy as "Maximum allowed dimension exceeded"."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum} (got {value!r})")
    if int(value) > maximum:  # (typeshed's numbers.Integral has no __gt__)
        bound = "2**31 − 1 = " if maximum == MAX_INTEGER else ""
        raise ValueError(f"{name} must be an integer ≤ {bound}{maximum:,} (got {value!r}); it is a count, and no "
                         "fit needs more")
    return value


def iteration_count(name: str, value, minimum: int = 1):
    """A number of iterations (sweeps, passes) of a learner's loop: an integer in [minimum, MAX_ITERATIONS]."""
    return integer(name, value, minimum, MAX_ITERATIONS)


def topic_count(name: str, value, minimum: int = 1):
    """A learner's number of topics: an integer in [minimum, MAX_TOPICS]."""
    return integer(name, value, minimum, MAX_TOPICS)


def averaged_sweeps(n_avg, n_iter):
    """n_avg, how many final sweeps a sampler averages Φ over: an integer in [1, max(n_iter, 1)]."""
    integer("n_avg", n_avg, 1)
    if n_avg > max(n_iter, 1):
        raise ValueError(f"n_avg ({n_avg}) cannot exceed n_iter ({n_iter})")
    return n_avg


def choice(name: str, value, options: tuple[str, ...]):
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)} (got {value!r})")
    return value


def check_topics(k, where: str, fix: str = "") -> int:
    """The number of topics, an integer in [2, MAX_TOPICS]; ``where`` names the key, flag or file, ``fix`` says
    what to do."""
    if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < MIN_TOPICS:
        raise UserError(f"{where}, the number of topics, must be an integer ≥ {MIN_TOPICS} (got {k!r})"
                        + (f"; {fix}" if fix else ""))
    if int(k) > MAX_TOPICS:  # (typeshed's numbers.Integral has no __gt__)
        raise UserError(f"{where}, the number of topics, must be at most {MAX_TOPICS:,} (got {k!r}): every model "
                        "holds k × vocabulary numbers, and the audit fits dozens of them; give a smaller k"
                        + (f"; {fix}" if fix else ""))
    return int(k)
