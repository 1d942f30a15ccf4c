"""Which ε bounds a verdict rests on, and the guesses they make: shared by runs and ``check``.

A bound here must hold for any (ε, δ)-DP release (no assumption on the shape of
its trade-off curve), and its guesses must be functions of the scores alone,
never of the coins: then the largest of several bounds, each at its share of
α, is itself a valid bound.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from topicaudit.bounds.epsilon import EpsilonBound, Method
from topicaudit.bounds.guesses import default_guess_counts, margin_guess_counts
from topicaudit.bounds.one_run import OneRunAuditor

# ε-bound methods valid for any (ε, δ)-DP release, so a verdict may rest on them. (The f-DP bound's Gaussian
# family assumes a Gaussian trade-off curve and flags correct Laplace or randomised-response mechanisms: not here.)
VALID_BOUNDS = (Method.ONE_RUN, Method.FDP_PURE)


# What a canary audit observed, in the words every verdict uses.
THREAT_MODELS = {
    "mechanism": "everything the mechanism releases, as its proof assumes",
    "release": "the released Φ",
}


def canary_verdict_scores(scores: dict[str, np.ndarray], observe: str) -> dict[str, np.ndarray]:
    """The canary scores a verdict rests on: the mechanism's likelihood ratio when the audit observed the
    mechanism, else every score of the release (α is split over those only)."""
    on_mechanism = {name: values for name, values in scores.items() if name.startswith("mechanism")}
    if observe == "mechanism":
        return on_mechanism
    return {name: values for name, values in scores.items() if name not in on_mechanism}


def two_means_split(scores: np.ndarray) -> int:
    """How many scores sit in the upper of the two groups that best split them (1-D 2-means).

    A function of the scores alone, so a guess built from it is a guess from
    the release: valid for one-run bounds.
    """
    s = np.asarray(scores, np.float64)
    s = np.sort(np.where(np.isnan(s), -np.inf, s))[::-1]
    finite = s[np.isfinite(s)]
    n = s.size
    if n < 2 or s[0] == s[-1] or finite.size == 0:
        return n // 2
    # ±inf just beyond the finite range: they join the extreme group without swamping the sums
    spread = finite.max() - finite.min() + 1.0
    s = np.clip(s, finite.min() - spread, finite.max() + spread) - finite.mean()
    c1, c2 = np.cumsum(s), np.cumsum(s * s)
    j = np.arange(1, n)                          # j scores in the upper group
    upper = c2[j - 1] - c1[j - 1] ** 2 / j
    lower = (c2[-1] - c2[j - 1]) - (c1[-1] - c1[j - 1]) ** 2 / (n - j)
    return int(j[np.argmin(upper + lower)])


def guess_family(scores: np.ndarray) -> tuple[list[int], list[int]]:
    """(k+, k−) pairs to try: the halving family, the margin pairs and one guess of every candidate by 2-means.

    The halving family suits noisy releases (guess only the surest); the
    margin pairs (k just below either class's likely size) and the 2-means
    guess suit releases that separate the candidates (nearly) cleanly, where
    a fixed k+ = m/2 would misplace the few canaries the coins put on the
    heavier side. All are functions of the scores' count and values only.
    """
    pairs = default_guess_counts(len(scores)) + margin_guess_counts(len(scores))
    top = two_means_split(scores)
    pairs.append((top, len(scores) - top))
    return [p for p, _ in pairs], [q for _, q in pairs]


def bound_tests(scores: dict[str, np.ndarray], labels: np.ndarray, delta: float, alpha_each: float,
                methods=tuple(VALID_BOUNDS), family=guess_family) -> dict[str, EpsilonBound]:
    """Every (score, method) bound at α_each, keyed ``"score:method"``; the caller splits α over them.

    family(scores) -> (k_plus, k_minus) picks each score's guesses (None: the
    method's own default).
    """
    bounds = {}
    for name, values in scores.items():
        auditor = OneRunAuditor(values, labels)
        k_plus, k_minus = family(values) if family else (None, None)
        for method in methods:
            bounds[f"{name}:{method}"] = auditor.bound(method, delta, alpha_each, k_plus=k_plus, k_minus=k_minus)
    return bounds


def bound_ceiling(labels: np.ndarray, delta: float, alpha_each: float, methods=tuple(VALID_BOUNDS),
                  family=guess_family) -> float:
    """The largest ε these coins could ever prove: the bounds at scores that separate every coin."""
    perfect = {"perfect": np.asarray(labels, dtype=np.float64)}
    return max(b.epsilon for b in bound_tests(perfect, labels, delta, alpha_each, methods, family).values())


# -- the verdict's one computation --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    """One experiment's scores and coins, the tests to run on them, and what they observed.

    ``methods`` are the (ε, δ)-family methods ``bound_tests`` runs on every
    score; ``shaped`` runs the tests outside that family (a claimed curve, a
    δ-tail), ``shaped_count`` of them per score, at the same share of α.
    """

    prefix: str                      # test names start with it: "natural/", "canaries/", "canaries-release/"
    scores: dict[str, np.ndarray]
    labels: np.ndarray
    methods: tuple
    observed: str                    # what the scores observed, in words
    family: Callable | None = guess_family
    shaped: Callable[[dict[str, np.ndarray], np.ndarray, float], dict[str, EpsilonBound]] | None = None
    shaped_count: int = 0

    @property
    def test_count(self) -> int:
        return len(self.scores) * (len(self.methods) + self.shaped_count)


@dataclass(frozen=True)
class Judgement:
    """Every test's bound at its share of α, the largest ε any outcome could prove, and whether any score
    separated the candidates (ranked members above non-members) or all were tied."""

    bounds: dict[str, EpsilonBound]
    ceiling: float
    alpha_each: float
    signal: bool
    tied: bool
    reversed: tuple[str, ...] = ()   # scores that rank members *below* non-members (a defect of the score)


def judge(evidence: list[Evidence], delta: float, alpha: float) -> Judgement:
    """Every test of every experiment at one share of α (Bonferroni over all of them), so the largest bound
    is itself valid at confidence 1 − α: the one computation behind ``run``'s summary, ``check``, the
    report's card and ledger, ``sweep`` and the API."""
    alpha_each = alpha / max(1, sum(e.test_count for e in evidence))
    bounds: dict[str, EpsilonBound] = {}
    ceiling, signal, reversed_scores = 0.0, False, []
    for e in evidence:
        if e.labels.all() or not e.labels.any():
            continue  # one class only: these coins prove nothing
        tests = bound_tests(e.scores, e.labels, delta, alpha_each, e.methods, e.family)
        if e.shaped is not None:
            tests.update(e.shaped(e.scores, e.labels, alpha_each))
        bounds.update({e.prefix + name: b for name, b in tests.items()})
        ceiling = max(ceiling, bound_ceiling(e.labels, delta, alpha_each, e.methods, e.family))
        for name, values in e.scores.items():
            signal = signal or separates(values, e.labels, alpha)
            if separates(-np.asarray(values, np.float64), e.labels, alpha_each):
                reversed_scores.append(e.prefix + name)
    tied = all(np.all(v == v[0]) for e in evidence for v in e.scores.values())
    return Judgement(bounds, ceiling, alpha_each, signal, tied, tuple(reversed_scores))


def separates(scores: np.ndarray, labels: np.ndarray, alpha: float) -> bool:
    """Whether the scores rank members above non-members better than chance (one-sided rank test at α).

    Tied scores never do; an audit whose every test fails this has no
    signal, and its verdict must not read as a test that could have refuted.
    """
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=-np.inf)
    if np.all(scores == scores[0]) or labels.all() or not labels.any():
        return False
    return bool(stats.mannwhitneyu(scores[labels], scores[~labels], alternative="greater").pvalue < alpha)
