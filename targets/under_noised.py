"""Under-noised mechanisms, for testing an audit only: noise divided by a factor, the claim unchanged.

A privacy gate that passes every learner proves nothing; these deliberately
broken learners measure how often it catches a real bug (a sensitivity off by
10×, noise dropped by a refactor). Never release a model trained this way:
its guarantee is false by construction. ``[target] test_under_noise`` selects
one; ``results.json`` records the factor in the guarantee's parameters.

"Noise divided by f" for each mechanism: Laplace and Gaussian scales divided
by f; randomised response and the geometric mechanism run at f times their ε
(their noise has no scale to divide: running at f·ε is the same bug, a budget
misread by a factor f).
"""
from __future__ import annotations

import copy
import dataclasses
import math


def _dp_cgs(learner, factor):      # Laplace(2L/ε) on the final sweep's counts
    learner.epsilon *= factor


def _hdp_lda(learner, factor):     # Laplace(2/ε_l) release every iteration
    learner.epsilon_l *= factor


def _dp_svi(learner, factor):      # Gaussian noise of std noise_multiplier × sensitivity
    learner.noise_multiplier_ /= factor


def _lp_lda(learner, factor):      # randomised response at ε_b per presence bit
    learner.epsilon, learner.p = learner.epsilon_per_word * factor, None


def _lppf(learner, factor):        # two-sided geometric noise, α = e^{−ε} per token
    learner.alpha, learner.epsilon = learner.mechanism_alpha ** factor, None


# Learner class name → how to divide its noise.
NOISE_KNOBS = {
    "ZhuDPCollapsedGibbsLDA": _dp_cgs,
    "ZhaoHDPLDA": _hdp_lda,
    "DPStochasticVariationalLDA": _dp_svi,
    "LocallyPrivateLDA": _lp_lda,
    "LocallyPrivatePoissonFactorization": _lppf,
    "NaiveLocallyPrivatePoissonFactorization": _lppf,
}


class UnderNoised:
    """A learner whose mechanism runs with ``factor`` times less noise but claims the original guarantee."""

    def __init__(self, learner, factor: float):
        name = type(learner).__name__
        if name not in NOISE_KNOBS:
            raise ValueError(f"{name} has no privacy noise to divide; test_under_noise applies to "
                             f"the DP learners only")
        if not (factor >= 1 and math.isfinite(factor)):
            raise ValueError(f"the noise divisor must be a finite number ≥ 1, got {factor!r}")
        self.claimed = learner
        self.factor = float(factor)
        self.mechanism = copy.copy(learner)
        NOISE_KNOBS[name](self.mechanism, self.factor)
        self.k = learner.k

    def __getattr__(self, name):
        # Settings the engine reads (document caps, k) are the claimed learner's.
        if name.startswith("__") or "claimed" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["claimed"], name)

    def fit(self, X, seed: int):
        return self.mechanism.fit(X, seed)

    def guarantee(self):
        g = self.claimed.guarantee()
        return dataclasses.replace(g, parameters={**g.parameters, "test_under_noise": self.factor})

    def __repr__(self) -> str:
        return f"UnderNoised({self.claimed!r}, factor={self.factor:g})"
