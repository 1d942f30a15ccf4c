"""What the best possible mechanism audit of DP-SVI (or HDP-LDA) can prove, by canary count: the claimed
mechanism simulated.

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

With ``--learner hdp-lda`` it simulates HDP-LDA's T Laplace releases (``--releases``) at the benchmark's
C = 0.01, β = 1 with paired word canaries, scored by check's pure-ε tests: ``--k 5`` is the real audit
(the canary token's topic unknown, one of k), ``--k 1`` an audit that knows it.

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
from topicaudit.engine.claim_tests import curve_tests
from topicaudit.targets.privacy.composition import privacy_profile
from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
from topicaudit.targets.learners.hdp_lda import ZhaoHDPLDA

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mechanism_audit import HDP, hdp_epsilon_l  # noqa: E402  (HDP-LDA's settings and ε_l: one place)

RESULTS = Path(__file__).resolve().parent / "results"
ALPHA = 0.05
METHODS = ("fdp-one-run-pure",)  # with the curve test: what check runs for a DP-SVI mechanism audit


@functools.cache
def claimed(epsilon: float, k: int):
    """The claimed learner's constants and privacy profile (the PLD accountant's, computed once per ε)."""
    learner = DPStochasticVariationalLDA(k, epsilon=epsilon)
    return learner.mechanism(), privacy_profile(learner.guarantee()), learner.delta


def hdp_audit(epsilon: float, canaries: int, factor: float, seed: int, k: int, releases: int) -> float:
    """ε_LB of one simulated HDP-LDA audit: paired word canaries, check's pure-ε tests (α split over them)."""
    settings = {**HDP["hdp-lda"], "n_iter": releases}
    learner = ZhaoHDPLDA(k, epsilon_l=hdp_epsilon_l(settings, epsilon), **settings)
    rng = np.random.default_rng(seed)
    coins = rng.random(canaries) < 0.5
    scores = {"mechanism": simulate_scores(learner.mechanism(), coins, 1, factor, rng, paired=True, k=k)}
    tests = bound_tests(scores, coins, 0.0, ALPHA / 2)  # the two pure-ε tests check runs at δ = 0
    return max(b.epsilon for b in tests.values())


def audit(epsilon: float, canaries: int, factor: float, seed: int, k: int, tokens: int) -> float:
    """ε_LB of one simulated audit (the largest bound of check's tests at α/2 each)."""
    mechanism, profile, delta = claimed(epsilon, k)
    rng = np.random.default_rng(seed)
    coins = rng.random(canaries) < 0.5
    scores = {"mechanism": simulate_scores(mechanism, coins, tokens, factor, rng)}
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
    parser.add_argument("--learner", choices=["dp-svi", "hdp-lda"], default="dp-svi")
    parser.add_argument("--releases", type=int, default=1, help="HDP-LDA's T")
    args = parser.parse_args()
    log_name = "ideal_mechanism_audit" if args.learner == "dp-svi" else "ideal_hdp_audit"
    RESULTS.mkdir(exist_ok=True)
    rows = []
    with (RESULTS / f"{log_name}.jsonl").open("a") as log:
        for epsilon in args.epsilons:
            for m in args.canaries:
                for factor in args.factors:
                    for seed in range(args.replicates):
                        bound = (audit(epsilon, m, factor, seed, args.k, args.tokens) if args.learner == "dp-svi"
                                 else hdp_audit(epsilon, m, factor, seed, args.k, args.releases))
                        row = {"epsilon": epsilon, "canaries": m, "factor": factor, "seed": seed, "epsilon_lb": bound,
                               **({"releases": args.releases, "k": args.k} if args.learner == "hdp-lda" else {})}
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
