"""Anchored DPSU canaries of one word against canaries of d anchored words (issue 30).

Simulates the claimed step's noisy weights on m anchored canaries (coins ½) of
d fresh words each, every word anchored by one fixed one-word document, and
scores each canary by the claimed mechanism's likelihood ratio over all its
words: policy Laplace (water-filling: 1/d on each word), Σ_j of the Laplace
ratio of y_j around 1 and 1 + 1/d; GW (greedy: the whole budget on one of the
d words, chosen by the document's random tie-break), log mean_j exp(ratio of
y_j around 1 and 2); policy Gaussian (1/√d on each), the Gaussian ratio,
which is linear in Σ_j y_j. For d = 1 the Laplace ratio is continued linearly
(the audit's score); ``laplace-linear`` continues it linearly for d > 1 too.
A budget of 2 doubles every weight, anchors included.
Reports the f-DP (pure) one-run bound at 95% (its default guesses) as
ε_LB/ε, mean ± sd over seeds.

  .venv/bin/python benchmarks/dpsu_multiword_canaries.py
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from topicaudit.bounds.fdp import eps_lb_fdp_one_run

EPSILON, M, SEEDS = 3.0, 500, 10


def scores(policy: str, d: int, budget: float, coins: np.ndarray, rng) -> np.ndarray:
    b = 1.0 / EPSILON
    m = coins.size
    if policy == "gaussian":
        sigma = 1.438  # the step's σ at ε = 3, δ/2 = 5e-6
        w = 1.0 / np.sqrt(d)
        y = budget * (1.0 + coins[:, None] * w) + rng.normal(0.0, sigma, (m, d))
        return ((y - 1.0) ** 2 - (y - 1.0 - w) ** 2).sum(axis=1) / (2 * sigma**2)
    if policy in ("laplace", "laplace-linear"):
        w = 1.0 / d
        y = budget * (1.0 + coins[:, None] * w) + rng.laplace(0.0, b, (m, d))
        if d == 1 or policy == "laplace-linear":
            return ((2 * y - 2.0 - w) / b).sum(axis=1)
        return ((2 * np.clip(y, 1.0, 1.0 + w) - 2.0 - w) / b).sum(axis=1)
    which = rng.integers(0, d, m)   # GW: the whole budget on one word
    y = budget * np.ones((m, d)) + rng.laplace(0.0, b, (m, d))
    y[np.arange(m), which] += budget * coins
    if d == 1:
        return ((2 * y - 3.0) / b).ravel()
    return logsumexp((2 * np.clip(y, 1.0, 2.0) - 3.0) / b, axis=1) - np.log(d)


def bound(s, coins):
    return eps_lb_fdp_one_run(s, coins, 0.0, 0.05, family="pure").epsilon


def main():
    print("| step | d words | budget | ε_LB/ε (mean ± sd, 10 seeds, 500 anchored canaries) |")
    print("|---|---|---|---|")
    for policy in ("laplace", "laplace-linear", "gw", "gaussian"):
        for d in ((4, 16) if policy == "laplace-linear" else (1, 4, 16)):
            for budget in (1.0, 2.0):
                out = []
                for seed in range(SEEDS):
                    rng = np.random.default_rng(seed)
                    coins = rng.random(M) < 0.5
                    out.append(bound(scores(policy, d, budget, coins, rng), coins) / EPSILON)
                print(f"| {policy} | {d} | {budget:g} | {np.mean(out):.2f} ± {np.std(out):.2f} |", flush=True)


if __name__ == "__main__":
    main()
