"""Deliberately broken DP learners, for testing an audit only: the mechanism is wrong, the claim is not.

A privacy gate that passes every learner proves nothing; these learners carry
the bugs real DP code ships with (noise a factor off, composition forgotten, a
cap or clipping skipped, a randomiser deleted while the server still
de-noises) and keep claiming the correct learner's guarantee, so tests and
benchmarks can measure how often the gate catches each one. ``[target]
test_under_noise`` and ``[target] test_bug`` select them; ``results.json``
records the bug in the guarantee's parameters and every command that runs one
prints a warning. Never release a model trained this way: its guarantee is
false by construction.

"Noise divided by f" for each mechanism: Laplace and Gaussian scales divided
by f; randomised response and the geometric mechanism run at f times their ε
(their noise has no scale to divide: running at f·ε is the same bug, a budget
misread by a factor f).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import sys

import numpy as np

from topicaudit.targets.base import Learner, VocabularyStep, declared_mechanism
from topicaudit.targets.mechanisms import Recorder
from topicaudit.targets.privacy.dp_svi_accounting import calibrate_noise_multiplier

# A divisor this large leaves no noise worth the name (the geometric and randomised-response
# mechanisms at 10⁶·ε keep every count and bit).
NO_NOISE = 1e6


def _dp_cgs(learner, factor):      # Laplace(2L/ε) on the final sweep's counts
    learner.epsilon *= factor


def _hdp_lda(learner, factor):     # Laplace(2/ε_l) release every iteration
    learner.epsilon_l *= factor


def _dp_svi(learner, factor):      # Gaussian noise of std noise_multiplier × sensitivity
    learner.noise_multiplier_ /= factor


def _lp_lda(learner, factor):      # randomised response at ε_b per presence bit
    learner.epsilon, learner.p = min(learner.epsilon_per_word * factor, 700.0), None


def _lppf(learner, factor):        # two-sided geometric noise, α = e^{−ε} per token
    learner.alpha, learner.epsilon = max(learner.mechanism_alpha ** factor, 1e-300), None


# Learner class name → how to divide its noise.
NOISE_KNOBS = {
    "ZhuDPCollapsedGibbsLDA": _dp_cgs,
    "ZhaoHDPLDA": _hdp_lda,
    "DPStochasticVariationalLDA": _dp_svi,
    "LocallyPrivateLDA": _lp_lda,
    "LocallyPrivatePoissonFactorization": _lppf,
    "NaiveLocallyPrivatePoissonFactorization": _lppf,
}


def _composition_forgotten(learner):
    """DP-SVI's noise multiplier calibrated for one step while every step runs."""
    eps = learner.spent_.epsilon
    learner.noise_multiplier_ = calibrate_noise_multiplier(eps, learner.delta, learner.sampling_rate, 1,
                                                           learner.accountant)


def _steps_20x(learner):
    """DP-SVI running 20× the steps its accountant saw, with the same noise."""
    learner.n_iter *= 20


def _cap_skipped(learner):
    """The per-document token cap not applied; the noise stays what the claimed cap calibrated."""
    if type(learner).__name__ == "ZhuDPCollapsedGibbsLDA":
        scale = learner.noise_scale
        learner.max_doc_length = 10**9
        learner.epsilon = 2.0 * learner.max_doc_length / scale  # same Laplace scale 2L/ε
    else:
        std = learner.noise_std
        learner.max_doc_tokens = 10**9
        learner.noise_multiplier_ = std / learner.sensitivity


def _clipping_skipped(learner):
    """DP-SVI with clip_norm set but clipping skipped: the noise is calibrated to C, contributions are not."""
    if learner.clip_norm is None:
        raise ValueError("clipping-skipped needs a learner with clip_norm set")
    std = learner.noise_std
    learner.clip_norm = None
    learner.noise_multiplier_ = std / learner.sensitivity


def _randomiser_dropped(learner):
    """The local randomiser deleted while the server still de-noises as if it ran."""
    if type(learner).__name__ == "LocallyPrivateLDA":
        learner.randomiser_keep_probability = 1.0
    else:
        learner.randomiser_dropped = True


# Bug name → (the learners it applies to, how to plant it).
BUGS = {
    "no-noise": (tuple(NOISE_KNOBS), lambda learner: NOISE_KNOBS[type(learner).__name__](learner, NO_NOISE)),
    "noise-halved": (tuple(NOISE_KNOBS), lambda learner: NOISE_KNOBS[type(learner).__name__](learner, 2.0)),
    "composition-forgotten": (("DPStochasticVariationalLDA",), _composition_forgotten),
    "steps-20x": (("DPStochasticVariationalLDA",), _steps_20x),
    "cap-skipped": (("DPStochasticVariationalLDA", "ZhuDPCollapsedGibbsLDA"), _cap_skipped),
    "clipping-skipped": (("DPStochasticVariationalLDA",), _clipping_skipped),
    "randomiser-dropped": (("LocallyPrivateLDA", "LocallyPrivatePoissonFactorization",
                            "NaiveLocallyPrivatePoissonFactorization"), _randomiser_dropped),
    # The record is the correct mechanism's outputs while Φ is built from another, less noised draw: what a
    # learner does when it logs one noisy release and fits from another (or averages several).
    "record-mismatch-halved": (tuple(NOISE_KNOBS), lambda learner: NOISE_KNOBS[type(learner).__name__](learner, 2.0)),
    "record-mismatch-no-noise": (tuple(NOISE_KNOBS),
                                 lambda learner: NOISE_KNOBS[type(learner).__name__](learner, NO_NOISE)),
}
# Bugs whose record (transcript) comes from the correct mechanism, not from the one Φ was built from.
RECORD_MISMATCH = ("record-mismatch-halved", "record-mismatch-no-noise")
# DP-CGS averaging Φ over this many noisy draws of its final counts, each noised as for one release, while it
# records one: the average has √10 less noise than the claim spends on.
AVERAGED_DRAWS = 10
BUGS["averaged-sweeps"] = (("ZhuDPCollapsedGibbsLDA",), lambda learner: None)


def _averaged_sweeps(learner, X, seed: int, record: Recorder):
    """DP-CGS whose Φ averages AVERAGED_DRAWS noisy draws of the final counts; it records the first draw."""
    run_dp_cgs = sys.modules[type(learner).__module__].run_dp_cgs  # the learner's own module, already loaded
    state = run_dp_cgs(X, learner.k, seed, learner.epsilon, learner.max_doc_length, alpha=learner.alpha,
                       beta=learner.beta, n_iter=learner.n_iter)
    m = learner.mechanism()
    first = record.laplace((state.nwk + state.noise_wk).T, scale=m.scale, document_tokens=m.document_tokens,
                           noisy_sweep=True)
    rng = np.random.default_rng([seed, AVERAGED_DRAWS])
    draws = [first] + [state.nwk.T + rng.laplace(0.0, state.scale, state.nwk.T.shape)
                       for _ in range(AVERAGED_DRAWS - 1)]
    phis = [(np.maximum(y, 0.0) + learner.beta) / (np.maximum(y, 0.0) + learner.beta).sum(axis=1, keepdims=True)
            for y in draws]
    phi = np.mean(phis, axis=0).astype(np.float32)
    return phi / phi.sum(axis=1, keepdims=True)


class _Planted:
    """What every broken part shares: it runs ``buggy`` while everything it states is ``claimed``'s."""

    claimed: object
    buggy: object
    planted: dict  # what results.json records in the guarantee's parameters

    def __getattr__(self, name):
        # Settings the engine reads (k, a threshold to design canaries from) are the claim's.
        if name.startswith("__") or "claimed" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["claimed"], name)

    def mechanism(self):
        """The claimed part's mechanism: what the buggy one's records state (as its code would)."""
        return declared_mechanism(self.claimed)

    def _claimed_record(self, record: Recorder | None) -> Recorder:
        """The recorder, restating every release with the claimed constants."""
        record = Recorder() if record is None else record
        record.restate = _Restate(self.mechanism())
        return record

    def guarantee(self):
        g = self.claimed.guarantee()
        return dataclasses.replace(g, parameters={**g.parameters, **self.planted})


@dataclasses.dataclass(frozen=True)
class _Restate:
    """Replaces a release's constants by the claimed ones (picklable, unlike a lambda)."""

    claimed: object

    def __call__(self, mechanism):
        return self.claimed if self.claimed is not None else mechanism


class BrokenLearner(_Planted):
    """A learner whose mechanism carries a planted bug while it claims the correct learner's guarantee."""

    claimed: Learner
    buggy: Learner

    def __init__(self, learner, bug: str, factor: float | None = None):
        name = type(learner).__name__
        self.claimed = learner
        self.buggy = copy.copy(learner)
        if factor is not None:
            if name not in NOISE_KNOBS:
                raise ValueError(f"{name} has no privacy noise to divide; test_under_noise applies to "
                                 f"the DP learners only")
            if not (factor >= 1 and math.isfinite(factor)):
                raise ValueError(f"the noise divisor must be a finite number ≥ 1, got {factor!r}")
            NOISE_KNOBS[name](self.buggy, float(factor))
        else:
            if bug not in BUGS:
                raise ValueError(f"unknown bug {bug!r}; known: {', '.join(BUGS)}")
            applies, plant = BUGS[bug]
            if name not in applies:
                raise ValueError(f"the bug {bug!r} does not apply to {name}")
            plant(self.buggy)
        self.bug = bug
        self.factor = factor
        self.planted = {"test_under_noise": factor} if factor is not None else {"test_bug": bug}
        self.k = learner.k

    def fit(self, X, seed: int, record: Recorder | None = None):
        record = self._claimed_record(record)
        if self.bug == "averaged-sweeps":
            return _averaged_sweeps(self.buggy, X, seed, record)
        if self.bug in RECORD_MISMATCH:
            self.claimed.fit(X, seed, record=record)  # a correct record of another draw
            return self.buggy.fit(X, seed)
        return self.buggy.fit(X, seed, record=record)

    def __repr__(self) -> str:
        return f"BrokenLearner({self.claimed!r}, bug={self.bug!r})"


def _dpsu_noise(step, factor):
    step.noise_scale /= factor


def _dpsu_threshold_halved(step):
    """ρ halved (and the cap Γ = ρ + α·scale with it): new candidates are released far more often than δ."""
    step.rho /= 2.0
    step.gamma = step.rho + step.alpha * step.noise_scale


def _dpsu_delta0_skipped(step):
    step.delta0 = None


def _dpsu_budget(step, budget):
    """Each document spends ``budget`` (not 1) over its words: sensitivity ``budget``, the noise and ρ unchanged."""
    step.budget = float(budget)


DPSU_STEPS = ("PolicyLaplaceDPSU", "PolicyGaussianDPSU", "GreedyWeightedDPSU")
# Bugs of a DP vocabulary step (DP set union): name → how to plant it.
VOCABULARY_BUGS = {
    "dpsu-noise-halved": lambda step: _dpsu_noise(step, 2.0),
    "dpsu-noise-tenth": lambda step: _dpsu_noise(step, 10.0),
    "dpsu-threshold-halved": _dpsu_threshold_halved,
    "dpsu-delta0-skipped": _dpsu_delta0_skipped,
    "dpsu-budget-2": lambda step: _dpsu_budget(step, 2.0),
    "dpsu-budget-10": lambda step: _dpsu_budget(step, 10.0),
}


class BrokenVocabulary(_Planted):
    """A DP vocabulary step with a planted bug that claims the correct step's guarantee."""

    claimed: VocabularyStep
    buggy: VocabularyStep

    def __init__(self, step, bug: str):
        name = type(step).__name__
        if bug not in VOCABULARY_BUGS:
            raise ValueError(f"unknown vocabulary bug {bug!r}; known: {', '.join(VOCABULARY_BUGS)}")
        if name not in DPSU_STEPS:
            raise ValueError(f"the bug {bug!r} applies to the DP set union steps ({', '.join(DPSU_STEPS)}), "
                             f"not to {name}")
        self.claimed = step
        self.buggy = copy.copy(step)
        VOCABULARY_BUGS[bug](self.buggy)
        self.bug = bug
        self.planted = {"test_bug": bug}

    def select(self, X, seed: int, record: Recorder | None = None):
        return self.buggy.select(X, seed, record=None if record is None else self._claimed_record(record))


def under_noised(learner, factor: float) -> BrokenLearner:
    """The learner with its noise divided by ``factor`` and its claim unchanged."""
    return BrokenLearner(learner, f"noise divided by {factor:g}", factor=factor)
