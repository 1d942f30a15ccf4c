"""Targets under audit: release pipelines built by name from configuration."""
from __future__ import annotations

import inspect

from audit.errors import UserError
from targets.base import NO_GUARANTEE, Guarantee, Release, Target
from targets.cgs import CollapsedGibbsLDA
from targets.lda import VariationalLDA
from targets.pipeline import Pipeline
from targets.dpsu import DPSU_STEPS
from targets.vocabulary import VOCABULARY_STEPS as NON_PRIVATE_STEPS

VOCABULARY_STEPS = {**NON_PRIVATE_STEPS, **DPSU_STEPS}

# learner name → (class, fixed keyword arguments)
LEARNERS = {
    "lda": (VariationalLDA, {"backend": "compiled"}),
    "sklearn-lda": (VariationalLDA, {"backend": "sklearn"}),
    "cgs": (CollapsedGibbsLDA, {}),
}


def _construct(cls, params: dict, fixed: dict, where: str, what: str):
    accepted = set(inspect.signature(cls).parameters) - {"k"} - set(fixed)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UserError(
            f"unknown parameter(s) {', '.join(unknown)} for {what} in {where}; "
            f"accepted: {', '.join(sorted(accepted)) or 'none'}"
        )
    try:
        return cls(**fixed, **params)
    except (TypeError, ValueError) as error:
        raise UserError(f"bad parameter for {what} in {where}: {error}") from None


def build_target(learner: str, k: int, vocabulary: str = "observed", params: dict | None = None,
                 vocabulary_params: dict | None = None) -> Pipeline:
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
    step = _construct(VOCABULARY_STEPS[vocabulary], dict(vocabulary_params or {}), {},
                      "[target.vocabulary_params]", f"vocabulary step {vocabulary!r}")
    model = _construct(cls, dict(params or {}), {"k": k, **fixed}, "[target.params]", f"learner {learner!r}")
    return Pipeline(step, model)


__all__ = ["Guarantee", "NO_GUARANTEE", "Release", "Target", "build_target", "LEARNERS"]
