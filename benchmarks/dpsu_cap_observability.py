"""Can an audit see a DPSU step that skips its per-document cap Δ0? (issue 30)

The cap protects δ only: a document still spends a budget of 1 however many
words it keeps, so the shared candidates' weights remain the ε-DP Laplace
(Gaussian) mechanism of sensitivity 1 and no anchored canary, of one word or of
many, can show more than ε. What the cap bounds is the number of *new*
candidates a document brings, each released with a small probability p_w; a
canary document of L fresh words releases one of them with probability about
min(L, Δ0)·p_w. So the only test is the δ-tail test on fresh canary documents.

Part 1 measures the per-document release probability with the real steps'
code at a δ large enough to see releases (δ = 1e-2, Δ0 = 8, 2,000 documents of
L = 4Δ0 fresh words, with and without the cap) against the union-bound
formula. Part 2 computes, at the audits' settings (δ = 1e-5, Δ0 = 64, α = 0.05
split over the three tests of a canary audit), the fewest fresh canary words
(documents × L, minimised over L) for which the δ-tail test (X ≥ 2 releases and
(M/2)·δ/X ≤ α') refutes a step without its cap in 80% of audits.

  .venv/bin/python benchmarks/dpsu_cap_observability.py
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.stats import poisson

from topicaudit.targets.bug_variants import BrokenVocabulary
from topicaudit.targets.learners.dpsu import GreedyWeightedDPSU, PolicyGaussianDPSU, PolicyLaplaceDPSU
from scipy.stats import norm

STEPS = (PolicyLaplaceDPSU, GreedyWeightedDPSU, PolicyGaussianDPSU)


def word_release_probabilities(step, L: int) -> np.ndarray:
    """Release probability of each of the words a lone document of L fresh words makes candidates."""
    t = L if step.delta0 is None else min(L, step.delta0)
    if isinstance(step, GreedyWeightedDPSU):   # budget 1 on one word, the other t − 1 candidates at weight 0
        w = np.r_[1.0, np.zeros(t - 1)]
    elif isinstance(step, PolicyGaussianDPSU):
        w = np.full(t, 1.0 / math.sqrt(t))
    else:
        w = np.full(t, 1.0 / t)
    if isinstance(step, PolicyGaussianDPSU):
        return norm.sf((step.rho - w) / step.noise_scale)
    return 0.5 * np.exp(-(step.rho - w) / step.noise_scale)


def document_release_probability(step, L: int) -> float:
    return float(-np.expm1(np.log1p(-word_release_probabilities(step, L)).sum()))


def measured(step_class, epsilon: float, delta: float, delta0: int, docs: int, seed: int = 0):
    """Share of lone fresh documents of 4Δ0 words of which the real step released any word."""
    L = 4 * delta0
    X = sp.csr_matrix((np.ones(docs * L), (np.repeat(np.arange(docs), L), np.arange(docs * L))), shape=(docs, docs * L))
    out = {}
    for name, step in (("cap", step_class(epsilon=epsilon, delta=delta, delta0=delta0)),
                       ("no cap", BrokenVocabulary(step_class(epsilon=epsilon, delta=delta, delta0=delta0),
                                                   "dpsu-delta0-skipped"))):
        hits = 0
        for r in range(5):
            released = np.zeros(docs * L, bool)
            released[step.select(X, seed + r)] = True
            hits += int(released.reshape(docs, L).any(axis=1).sum())
        mech = step.mechanism if isinstance(step, BrokenVocabulary) else step
        out[name] = (hits / (5 * docs), document_release_probability(mech, L))
    return out


def fewest_words(step_class, epsilon: float, delta: float = 1e-5, delta0: int = 64, alpha: float = 0.05 / 3,
                 power: float = 0.8) -> tuple[float, int, int]:
    """(fresh words, documents, L) of the smallest δ-tail design that refutes the step without its cap."""
    broken = step_class(epsilon=epsilon, delta=delta, delta0=delta0)
    broken.delta0 = None
    best = (math.inf, 0, 0)
    for L in np.unique(np.geomspace(delta0, 10**6, 40).astype(int)):
        p = document_release_probability(broken, int(L))
        for n in np.unique(np.geomspace(10, 10**8, 400).astype(int)):   # n fresh documents trained (M/2)
            x = max(2, math.ceil(n * delta / alpha))                    # the δ-tail test's smallest refuting count
            if poisson.sf(x - 1, n * p) >= power:
                best = min(best, (float(n * L), int(n), int(L)))
                break
    return best


def main() -> None:
    print("Part 1: lone fresh documents of 4Δ0 = 32 words, δ = 1e-2, Δ0 = 8, 2,000 documents × 5 seeds")
    print("| step | ε | released share, cap (formula) | released share, no cap (formula) |")
    print("|---|---|---|---|")
    for cls in STEPS:
        for eps in (1.0, 3.0):
            m = measured(cls, eps, 1e-2, 8, 2000)
            print(f"| {cls.name} | {eps:g} | {m['cap'][0]:.4f} ({m['cap'][1]:.4f}) | "
                  f"{m['no cap'][0]:.4f} ({m['no cap'][1]:.4f}) |")
    print("\nPart 2: δ = 1e-5, Δ0 = 64, α' = 0.05/3, the δ-tail test at 80% power against the cap skipped")
    print("| step | ε | per-document δ, cap | per word, no cap | fewest fresh words | documents × L |")
    print("|---|---|---|---|---|---|")
    for cls in STEPS:
        for eps in (1.0, 3.0):
            step = cls(epsilon=eps, delta=1e-5, delta0=64)
            words, n, L = fewest_words(cls, eps)
            per_word = word_release_probabilities(step, 10**6)[-1]
            print(f"| {cls.name} | {eps:g} | {document_release_probability(step, 256):.2e} | {per_word:.2e} | "
                  f"{words:.2e} | {n:,} × {L:,} |")


if __name__ == "__main__":
    main()
