"""The learner conformance suite ``topicaudit.testing.check_learner``: every registered learner passes it,
and each check fails a learner with the one defect it looks for, naming the learner and the check."""
from __future__ import annotations

import inspect

import dp_accounting
import numpy as np
import pytest

from topicaudit.learner_checks import check_guarantee
from topicaudit.targets import LEARNERS
from topicaudit.targets.bug_variants import BrokenLearner
from topicaudit.targets.learners.dp_cgs import ZhuDPCollapsedGibbsLDA
from topicaudit.targets.privacy.guarantee import NO_GUARANTEE, Adjacency, Basis, Guarantee
from topicaudit.targets.params import positive
from topicaudit.targets.registry import build_learner
from topicaudit.testing import check_learner

# Parameters that fit in well under a second on the suite's 150 short documents; every DP learner at ε = 1.
QUICK = {
    "lda": {"max_iter": 5},
    "sklearn-lda": {"max_iter": 5},
    "cgs": {"n_iter": 20},
    "gensim-lda": {"iterations": 10},
    "tomotopy-lda": {"iterations": 20},
    "cgs-monitor": {"n_iter": 20},
    "dp-cgs": {"epsilon": 1.0, "max_doc_length": 8, "n_iter": 20},
    "hdp-lda": {"n_iter": 5},
    "dp-svi": {"epsilon": 1.0, "n_iter": 20},
    "lp-lda": {"epsilon": 1.0, "n_iter": 20},
    "pf": {"n_iter": 30},
    "lppf": {"epsilon": 1.0, "n_iter": 30},
    "lppf-naive": {"epsilon": 1.0, "n_iter": 30},
}


def test_every_registered_learner_is_checked():
    assert set(QUICK) == set(LEARNERS)


@pytest.mark.parametrize("name", sorted(QUICK))
def test_every_registered_learner_passes_check_learner(name):
    check_learner(build_learner(name, 3, QUICK[name]))


class NoiselessDPCGS(ZhuDPCollapsedGibbsLDA):
    """DP-CGS carrying the planted bug ``no-noise`` (targets/bug_variants.py) while claiming DP-CGS's ε.

    Its constructor, parameters, pickling and guarantee are DP-CGS's, so only the canary audit can tell.
    """

    def _broken(self) -> BrokenLearner:
        names = inspect.signature(ZhuDPCollapsedGibbsLDA).parameters
        return BrokenLearner(ZhuDPCollapsedGibbsLDA(**{n: getattr(self, n) for n in names}), "no-noise")

    def fit(self, X, seed):
        return self._broken().fit(X, seed)

    def fit_observed(self, X, seed, columns):
        return self._broken().fit_observed(X, seed, columns)


def test_a_planted_noiseless_learner_fails_the_canary_audit():
    learner = NoiselessDPCGS(3, **QUICK["dp-cgs"])
    with pytest.raises(AssertionError, match=r"NoiselessDPCGS\(k=3, .*epsilon=1\.0.*\) fails the 'canary audit' "
                                             r"check: 300 paired canaries on the mechanism prove ε ≥ \d"):
        check_learner(learner)
    check_learner(ZhuDPCollapsedGibbsLDA(3, **QUICK["dp-cgs"]))  # the same learner with its noise passes


# -- each check catches its defect ---------------------------------------------------------------------------------
class Smoothed:
    """A tiny conforming learner: each topic a seeded Dirichlet draw around the corpus's word counts."""

    def __init__(self, k: int, smoothing: float = 0.5):
        positive("smoothing", smoothing)
        self.k = k
        self.smoothing = smoothing

    def fit(self, X, seed):
        counts = np.asarray(X.sum(axis=0)).ravel() + self.smoothing
        phi = np.random.default_rng(seed).dirichlet(counts, size=self.k).astype(np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def guarantee(self):
        return NO_GUARANTEE


class Float64(Smoothed):
    def fit(self, X, seed):
        return super().fit(X, seed).astype(np.float64)


class Unseeded(Smoothed):
    def fit(self, X, seed):
        return super().fit(X, int(np.random.default_rng().integers(2**31)))


class Unchecked(Smoothed):
    def __init__(self, k: int, smoothing: float = 0.5):
        self.k = k
        self.smoothing = smoothing


class Renamed(Smoothed):
    def __init__(self, k: int, smoothing: float = 0.5):
        super().__init__(k, smoothing)
        del self.smoothing
        self.prior = smoothing


class Unpicklable(Smoothed):
    def __init__(self, k: int, smoothing: float = 0.5):
        super().__init__(k, smoothing)
        self.normalise = lambda phi: phi / phi.sum(axis=1, keepdims=True)


class ChokesOnEmptyDocuments(Smoothed):
    def fit(self, X, seed):
        lengths = np.asarray(X.sum(axis=1)).ravel()
        if lengths.min() == 0:
            raise ZeroDivisionError("a document of length 0")
        return super().fit(X, seed)


class Overclaims(Smoothed):
    """Claims ε = 2 for Laplace noise of scale 1 (ε = 1): the claim is not its event's."""

    def guarantee(self):
        return Guarantee(epsilon=2.0, adjacency=Adjacency.DOCUMENT, basis=Basis.THEOREM,
                         event=dp_accounting.LaplaceDpEvent(1.0))


def test_a_conforming_toy_learner_passes():
    check_learner(Smoothed(3))


@pytest.mark.parametrize("learner, check, detail", [
    (Float64(3), "phi", "Φ is float64, not float32"),
    (Unseeded(3), "same seed", "two fits with seed 7 differ"),
    (Unchecked(3), "parameters", "smoothing = nan was accepted by the constructor"),
    (Renamed(3), "parameters", "smoothing are not stored under their own names"),
    (Unpicklable(3), "pickle", "does not survive a pickle round trip"),
    (ChokesOnEmptyDocuments(3), "short documents", "ZeroDivisionError"),
    (Overclaims(3), "guarantee", "claim ε = 2 at δ = 0 is not what its event gives: PLD accountant ε = 1"),
])
def test_each_check_fails_the_learner_with_its_defect(learner, check, detail):
    with pytest.raises(AssertionError) as failure:
        check_learner(learner)
    message = str(failure.value)
    assert message.startswith(f"check_learner: {type(learner).__name__}(k=3) fails the {check!r} check: ")
    assert detail in message


def test_the_guarantee_check_accepts_dp_svis_rdp_claim_and_a_pure_claim():
    """A claim made by the RDP accountant (DP-SVI's default) and a pure Laplace claim both match their event."""
    check_learner(build_learner("dp-svi", 3, {"epsilon": 1.0, "n_iter": 20, "accountant": "rdp"}))

    class Laplace(Smoothed):
        def guarantee(self):
            return Guarantee(epsilon=1.0, adjacency=Adjacency.DOCUMENT, basis=Basis.THEOREM,
                             event=dp_accounting.LaplaceDpEvent(1.0))

    check_guarantee(Laplace(3))  # not check_learner: this toy adds no noise, which the canary audit would catch
