"""What the best possible mechanism audit of DP-SVI can prove, by canary count: the claimed mechanism simulated.

A DP-SVI claim covers every step's noisy statistics; the mechanism audit
scores each canary by the claimed mechanism's exact likelihood ratio
(Neyman–Pearson), so no score does better on those outputs. This script
draws those outputs from the claimed mechanism itself, idealised so that
each canary exercises the full sensitivity (its N tokens in one topic), and
bounds them with the tests `check` runs (the f-DP test of the (ε, δ) curve
and of the claimed mechanism's own curve, α split over both). The result is
the ceiling of any real audit of that design: how many canaries a given
tightness, or a given chance of catching noise ÷ 2, needs.

  .venv/bin/python benchmarks/ideal_mechanism_audit.py --canaries 1000 10000 30000 100000 --replicates 20

Writes one JSON row per (ε, canaries, factor, replicate) to
benchmarks/results/ideal_mechanism_audit.jsonl and prints the summary table.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from topicaudit.attacks.mechanism import simulate_scores
from topicaudit.bounds.verdict import bound_tests, guess_family
from topicaudit.engine.check import curve_tests
from topicaudit.targets.privacy.composition import privacy_profile
from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.05
METHODS = ("fdp-one-run-pure",)  # with the curve test: what check runs for a DP-SVI mechanism audit


@functools.cache
def claimed(epsilon: float, k: int):
    """The claimed learner's constants and privacy profile (the PLD accountant's, computed once per ε)."""
    learner = DPStochasticVariationalLDA(k, epsilon=epsilon)
    return learner.mechanism_parameters(), privacy_profile(learner.guarantee()), learner.delta


def audit(epsilon: float, canaries: int, factor: float, seed: int, k: int, tokens: int) -> float:
    """ε_LB of one simulated audit (the largest bound of check's tests at α/2 each)."""
    parameters, profile, delta = claimed(epsilon, k)
    rng = np.random.default_rng(seed)
    coins = rng.random(canaries) < 0.5
    scores = {"mechanism": simulate_scores("subsampled-gaussian-steps", parameters, coins, tokens, factor, rng)}
    alpha_each = ALPHA / (len(METHODS) + 1)
    tests = bound_tests(scores, coins, delta, alpha_each, METHODS)
    tests.update(curve_tests(scores, coins, profile, epsilon, alpha_each, guess_family))
    return max(b.epsilon for b in tests.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0])
    parser.add_argument("--canaries", nargs="+", type=int, default=[1000, 10000, 30000, 100000])
    parser.add_argument("--factors", nargs="+", type=float, default=[1.0, 2.0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=800, help="canary length (the audit's default: 4× the cap)")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    rows = []
    with (RESULTS / "ideal_mechanism_audit.jsonl").open("a") as log:
        for epsilon in args.epsilons:
            for m in args.canaries:
                for factor in args.factors:
                    for seed in range(args.replicates):
                        row = {"epsilon": epsilon, "canaries": m, "factor": factor, "seed": seed,
                               "epsilon_lb": audit(epsilon, m, factor, seed, args.k, args.tokens)}
                        rows.append(row)
                        log.write(json.dumps(row) + "\n")
                    print(summary_line(rows, epsilon, m, factor), flush=True)
    print("| ε | canaries | mechanism | replicates | ε_LB/ε | refuted |\n|---|---|---|---|---|---|")
    for epsilon in args.epsilons:
        for m in args.canaries:
            for factor in args.factors:
                print(summary_line(rows, epsilon, m, factor))
    return 0


def summary_line(rows, epsilon, m, factor) -> str:
    ratios = [r["epsilon_lb"] / epsilon for r in rows
              if (r["epsilon"], r["canaries"], r["factor"]) == (epsilon, m, factor)]
    sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
    refuted = sum(x > 1 for x in ratios)
    name = "as claimed" if factor == 1 else f"noise ÷ {factor:g}"
    return (f"| {epsilon:g} | {m} | {name} | {len(ratios)} | {statistics.mean(ratios):.2f} ± {sd:.2f} | "
            f"{refuted}/{len(ratios)} |")


if __name__ == "__main__":
    sys.exit(main())
