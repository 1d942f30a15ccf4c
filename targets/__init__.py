"""Targets under audit: release pipelines built by name from configuration."""
from __future__ import annotations

import inspect

from audit.errors import UserError
from targets.base import NO_GUARANTEE, Guarantee, Release, Target
from targets.lda import VariationalLDA
from targets.pipeline import Pipeline
from targets.vocabulary import VOCABULARY_STEPS

# learner name → (class, fixed keyword arguments)
LEARNERS = {
    "lda": (VariationalLDA, {"backend": "compiled"}),
    "sklearn-lda": (VariationalLDA, {"backend": "sklearn"}),
}


def build_target(learner: str, k: int, vocabulary: str = "observed", params: dict | None = None) -> Pipeline:
    """The target pipeline named by a configuration, with a clear error for typos."""
    if learner not in LEARNERS:
        raise UserError(f"unknown learner {learner!r} in [target] learner; known learners: {', '.join(LEARNERS)}")
    if vocabulary not in VOCABULARY_STEPS:
        raise UserError(
            f"unknown vocabulary step {vocabulary!r} in [target] vocabulary; known: {', '.join(VOCABULARY_STEPS)}"
        )
    if not isinstance(k, int) or isinstance(k, bool) or k < 2:
        raise UserError(f"the number of topics k must be an integer ≥ 2 (got {k!r}); set [target] k or --k")
    cls, fixed = LEARNERS[learner]
    params = dict(params or {})
    accepted = set(inspect.signature(cls).parameters) - {"k"} - set(fixed)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UserError(
            f"unknown parameter(s) {', '.join(unknown)} for learner {learner!r} in [target.params]; "
            f"accepted: {', '.join(sorted(accepted)) or 'none'}"
        )
    return Pipeline(VOCABULARY_STEPS[vocabulary](), cls(k=k, **fixed, **params))


__all__ = ["Guarantee", "NO_GUARANTEE", "Release", "Target", "build_target", "LEARNERS"]
