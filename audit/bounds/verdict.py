"""Which ε bounds a verdict rests on, and the guesses they make: shared by runs and ``check``.

A bound here must hold for any (ε, δ)-DP release (no assumption on the shape of
its trade-off curve), and its guesses must be functions of the scores alone,
never of the coins: then the largest of several bounds, each at its share of
α, is itself a valid bound.
"""
from __future__ import annotations

import numpy as np

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
