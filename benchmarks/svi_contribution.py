"""Does DP-SVI's power simulation match its audits? Three measurements (benchmarks/RESULTS.md §29).

  shares      a DP-SVI fit on PHEME with canaries, every sampled trained canary's E-step measured: the share
              of its N capped tokens in its scored topic (the argmax of its column's E[log β])
                .venv/bin/python benchmarks/svi_contribution.py shares --canaries 10000 [--under-noise 2]
  replicates  independent simulated audits of a finished run's design at M canaries (a 2× bug), each drawn
              afresh: the bound / claim ratio of each, and the share refuted; --whole simulates the whole
              contribution (the simulation before §29), else the run's measured shares
                .venv/bin/python benchmarks/svi_contribution.py replicates RUN_DIR 64000 --replicates 40
  pooled      the verdict's own estimate (``simulated_power``, pooled replicates) at M canaries under several
              seeds: how much one estimate varies
                .venv/bin/python benchmarks/svi_contribution.py pooled RUN_DIR 20000 --seeds 10
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import topicaudit.engine.verdict as verdict
import topicaudit.targets.learners.dp_svi as dp_svi
from topicaudit.attacks.mechanism import simulate_score_sets
from topicaudit.bounds.verdict import bound_tests
from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.canary_audit import build_canaries
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.targets import build_target

PHEME = Path(__file__).resolve().parents[2] / "shared" / "data" / "pheme" / "pheme_clean.json"


def shares(count: int, under_noise: float, seed: int) -> None:
    """The E-step's share in the scored topic, measured beside the fit (a second E-step of the sampled canary
    rows from their own random start, so the fit itself is untouched)."""
    config = config_from_dict({"corpus": {"path": str(PHEME), "preprocess": False}, "seed": seed,
                               "target": {"learner": "dp-svi", "k": 5, "vocabulary": "all",
                                          "test_under_noise": under_noise},
                               "attack": {"shadows": 0, "canaries": {"count": count}}})
    corpus = load_audit_corpus(config)
    t = config.target
    target = build_target(t.learner, t.k, t.vocabulary, t.params, t.vocabulary_params, t.test_under_noise, "")
    canaries = build_canaries(config, corpus.X, target, target.guarantee().adjacency)
    learner = getattr(target.learner, "buggy", target.learner)
    original, measuring, measured = dp_svi.minibatch_statistics, np.random.default_rng(99), []

    def measure(Xb, lam, rng, **options):
        out = original(Xb, lam, rng, **options)
        rows = np.flatnonzero(np.diff(Xb.indptr) == 1)
        rows = rows[Xb.indices[Xb.indptr[rows]] >= corpus.X.shape[1]]  # one-word rows of fresh words: canaries
        if rows.size:
            sub = Xb[rows]
            s, _ = original(sub, lam, measuring, **options)
            top = options["elog_beta"][:, sub.indices].argmax(axis=0)
            measured.append(s[top, sub.indices] / sub.data)
        return out

    dp_svi.minibatch_statistics = measure
    learner.fit_lambda(canaries.training_matrix(corpus.X), seed)
    values = np.concatenate(measured)
    thirds = np.array_split(np.arange(len(measured)), 3)
    print(f"noise std {learner.noise_std:.1f}; {values.size} sampled (step, canary) pairs: share in the scored "
          f"topic mean {values.mean():.4f}; quantiles 1/5/25/50%: {np.quantile(values, [.01, .05, .25, .5]).round(3)};"
          f" by thirds of the steps: {[round(float(np.concatenate([measured[i] for i in part]).mean()), 4) for part in thirds]}")


def _design(run: str):
    """The run's verdict design, as ``run_verdict`` hands it to ``simulated_power``."""
    captured = {}
    original = verdict.simulated_power

    def capture(mechanism, labels, epsilon, delta, alpha_each, shape, methods, **options):
        captured.update(mechanism=mechanism, epsilon=epsilon, delta=delta, alpha_each=alpha_each, shape=shape,
                        methods=methods)
        raise ValueError("captured")

    verdict.simulated_power = capture
    try:
        check_run(run)
    finally:
        verdict.simulated_power = original
    return captured


def replicates(run: str, m: int, count: int, whole: bool, factor: float) -> None:
    design = _design(run)
    mechanism = design["mechanism"]
    rng = np.random.default_rng(verdict.POWER_SEED + 7)
    ratios = []
    for _ in range(count):
        coins = rng.random(m) < 0.5
        scores = simulate_score_sets(mechanism.release(), coins, int(mechanism.tokens), factor, rng,
                                     k=int(mechanism.topics), arrays=tuple(mechanism.arrays),
                                     contribution=None if whole else mechanism.contribution)
        tests = bound_tests(scores, coins, design["delta"], design["alpha_each"], design["methods"])
        tests.update(design["shape"].tests(scores, coins, design["epsilon"], design["alpha_each"]))
        ratios.append(max(b.epsilon for b in tests.values()) / design["epsilon"])
    ratios = np.array(ratios)
    print(f"{m} canaries, factor {factor:g}, {'whole contribution' if whole else 'measured shares'}: bound/claim "
          f"mean {ratios.mean():.3f}, sd {ratios.std(ddof=1):.3f}; refuted in {int((ratios > 1).sum())} of {count}")


def pooled(run: str, m: int, seeds: int) -> None:
    design = _design(run)
    for seed in range(seeds):
        verdict.POWER_SEED = 1000 + seed
        power = verdict.simulated_power(design["mechanism"], np.zeros(m, bool), design["epsilon"], design["delta"],
                                        design["alpha_each"], design["shape"], design["methods"], factors=(2.0,))
        print(f"{m} canaries, seed {1000 + seed}: {power['2x']:.2f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    a = sub.add_parser("shares")
    a.add_argument("--canaries", type=int, default=10_000)
    a.add_argument("--under-noise", type=float, default=1.0)
    a.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("replicates")
    b.add_argument("run")
    b.add_argument("m", type=int)
    b.add_argument("--replicates", type=int, default=20)
    b.add_argument("--whole", action="store_true")
    b.add_argument("--factor", type=float, default=2.0)
    c = sub.add_parser("pooled")
    c.add_argument("run")
    c.add_argument("m", type=int)
    c.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    if args.what == "shares":
        shares(args.canaries, args.under_noise, args.seed)
    elif args.what == "replicates":
        replicates(args.run, args.m, args.replicates, args.whole, args.factor)
    else:
        pooled(args.run, args.m, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
