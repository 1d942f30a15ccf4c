"""One-run ε lower bounds: ceilings, guess families for strong attacks, tightness on an idealised Gaussian.

Usage (from the repository root):

    .venv/bin/python benchmarks/one_run_bounds.py [--trials 20] [--alpha 0.05] [--seed 0]
        [--sections ceiling,family,gaussian,gaussian-expected,calibration]

Bounds: "one-run" (Steinke, Nasr & Jagielski 2023), "fdp-one-run-pure" and
"fdp-one-run-gdp" (Mahloujifar, Melis & Chaudhuri 2024), see audit/bounds/one_run.py.

* ceiling: the largest ε each bound could ever prove (every guess correct)
  with m canaries and the default Bonferroni-corrected guess family.
* family: which (k+, k−) guesses get closest to the ceiling when the attack is
  (nearly) perfect: members scored above non-members, except a fraction of
  canaries whose scores are swapped to the wrong side. Coins are independent,
  so the number of members is Bin(m, ½), not m/2.
* gaussian: the idealised setting of both papers: each canary's score is
  N(μ·[in], 1), exactly μ-GDP, μ calibrated so that (ε, δ = 1e-5) is tight.
  Reports ε_LB / ε for the default family and for the best single
  pre-registered pair (chosen on the first half of the trials, reported on
  the second half, each at the full α).
* gaussian-expected: the same mechanism with the expected number of correct
  guesses (no sampling) and the best (k, k) per bound without correction:
  the idealised curves both papers plot, for m up to 10^6.
* calibration: how often correct and 10×-under-noised mechanisms are flagged
  (the mechanisms of benchmarks/epsilon_calibration.py, claim ε = 1, δ = 1e-5).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402
from scipy import optimize, special, stats  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from epsilon_calibration import release  # noqa: E402

from topicaudit.bounds.epsilon import gdp_epsilon, gdp_mu_for  # noqa: E402
from topicaudit.bounds.fdp import eps_lb_fdp_one_run, fdp_one_run_bound  # noqa: E402
from topicaudit.bounds.guesses import default_guess_counts, margin_guess_counts  # noqa: E402
from topicaudit.bounds.one_run import eps_lb_one_run, one_run_ceiling, one_run_epsilon  # noqa: E402
from topicaudit.bounds.verdict import guess_family  # noqa: E402

BOUNDS = {
    "one-run": lambda s, l, d, a, **kw: eps_lb_one_run(s, l, d, a, **kw),
    "fdp-one-run-pure": lambda s, l, d, a, **kw: eps_lb_fdp_one_run(s, l, d, a, family="pure", **kw),
    "fdp-one-run-gdp": lambda s, l, d, a, **kw: eps_lb_fdp_one_run(s, l, d, a, family="gdp", **kw),
}


def fmt(x) -> str:
    return f"{np.mean(x):.3f} ± {np.std(x, ddof=1):.3f}" if len(x) > 1 else f"{x[0]:.3f}"


def section_ceiling(alpha) -> None:
    print("### Ceilings: the largest ε each bound can prove (every guess correct), default guess family\n")
    print("| m | pairs | δ | one-run (Steinke) | fdp-one-run-pure | fdp-one-run-gdp | "
          "pure, one pair (m/2, m/2) | pure, margin family |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m in (100, 1000, 10_000, 100_000):
        for delta in (0.0, 1e-5):
            row = [one_run_ceiling(m, alpha, delta, meth) for meth in BOUNDS]
            one = one_run_ceiling(m, alpha, delta, "fdp-one-run-pure", k_plus=m // 2, k_minus=m // 2)
            kp, km = zip(*margin_guess_counts(m))
            marg = one_run_ceiling(m, alpha, delta, "fdp-one-run-pure", k_plus=kp, k_minus=km)
            print(f"| {m:,} | {len(default_guess_counts(m))} | {delta:g} | "
                  + " | ".join(f"{x:.3f}" for x in row) + f" | {one:.3f} | {marg:.3f} |")
    print()


def near_perfect(m, swap, rng):
    labels = rng.random(m) < 0.5
    scores = labels + 0.5 * rng.random(m)
    bad = rng.random(m) < swap  # scored on the wrong side
    scores[bad] = (~labels[bad]) + 0.5 * rng.random(int(bad.sum()))
    return scores, labels


def section_family(trials, alpha, seed) -> None:
    print("### Guess families for a (nearly) perfect attack, δ = 0 (mean ± sd over trials)\n")
    print("| m | swapped | family | pairs | one-run (Steinke) | fdp-one-run-pure | ceiling (pure) |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for m in (1000, 10_000):
        families = {
            "default (k, k), (k, 0), k = m/2, m/4, …": None,
            "one pair (m/2, m/2)": ([m // 2], [m // 2]),
            "one pair (m/2 − 2.5·√m/2, same)": tuple([x] for x in margin_guess_counts(m, (2.5,))[0]),
            "margin (k, k), z = 1.5, 2.5, 3.5": tuple(map(list, zip(*margin_guess_counts(m)))),
            "margin + default": tuple(map(list, zip(*(margin_guess_counts(m) + default_guess_counts(m))))),
            "2-means + margin + default (topicaudit.bounds.verdict.guess_family)": guess_family,
            "2-means + margin": lambda s, m=m: tuple(
                [a[-1]] + [k for k, _ in margin_guess_counts(m)] for a in guess_family(s)),
        }
        for swap in (0.0, 0.005, 0.02):
            rng = np.random.default_rng([seed, m, int(swap * 1000)])
            outcomes = [near_perfect(m, swap, rng) for _ in range(trials)]
            for name, fam in families.items():
                # A family is fixed, or a function of each outcome's scores (never of its labels).
                kws = [{} if fam is None else dict(zip(("k_plus", "k_minus"), fam(s) if callable(fam) else fam))
                       for s, _ in outcomes]
                res = {b: [BOUNDS[b](s, l, 0.0, alpha, **kw).epsilon for (s, l), kw in zip(outcomes, kws)]
                       for b in ("one-run", "fdp-one-run-pure")}
                # Ceiling: every guess of the first outcome's family right.
                ceil = one_run_ceiling(m, alpha, 0.0, "fdp-one-run-pure", **kws[0])
                npairs = len(default_guess_counts(m)) if fam is None else len(kws[0]["k_plus"])
                print(f"| {m:,} | {swap:.1%} | {name} | {npairs} | {fmt(res['one-run'])} | "
                      f"{fmt(res['fdp-one-run-pure'])} | {ceil:.3f} |")
    print()


def section_gaussian(trials, alpha, seed) -> None:
    delta = 1e-5
    print(f"### Idealised Gaussian: ε_LB / ε at δ = {delta:g} (scores N(μ·[in], 1); mean ± sd over trials)\n")
    print("| m | ε | μ | family | one-run (Steinke) | fdp-one-run-pure | fdp-one-run-gdp |")
    print("|---:|---:|---:|---|---:|---:|---:|")
    for m in (1000, 10_000):
        pairs = default_guess_counts(m)
        for eps in (1.0, 2.0, 4.0, 8.0):
            mu = gdp_mu_for(eps, delta)
            rng = np.random.default_rng([seed, m, int(eps * 10)])
            labels = rng.random((trials, m)) < 0.5
            scores = rng.normal(size=(trials, m)) + mu * labels
            default = {b: [f(s, l, delta, alpha).epsilon / eps for s, l in zip(scores, labels)]
                       for b, f in BOUNDS.items()}
            # Best pre-registered pair: picked on the first half of the trials, reported on the second.
            half = trials // 2
            chosen = {}
            for b, f in BOUNDS.items():
                mean_sel = [np.mean([f(s, l, delta, alpha, k_plus=kp, k_minus=km).epsilon
                                     for s, l in zip(scores[:half], labels[:half])]) for kp, km in pairs]
                kp, km = pairs[int(np.argmax(mean_sel))]
                chosen[b] = ((kp, km), [f(s, l, delta, alpha, k_plus=kp, k_minus=km).epsilon / eps
                                        for s, l in zip(scores[half:], labels[half:])])
            print(f"| {m:,} | {eps:g} | {mu:.3f} | default ({len(pairs)} pairs, Bonferroni) | "
                  + " | ".join(fmt(default[b]) for b in BOUNDS) + " |")
            print(f"| {m:,} | {eps:g} | {mu:.3f} | best single pair (chosen on trials 1–{half}) | "
                  + " | ".join(f"{fmt(chosen[b][1])} {chosen[b][0]}" for b in BOUNDS) + " |")
    print()


def section_gaussian_expected(alpha) -> None:
    """The papers' idealised curves: expected outcomes, best k+ = k− per bound, no correction."""
    delta = 1e-5
    print(f"### Idealised Gaussian, expected outcomes: ε_LB / ε at δ = {delta:g}, best (k, k) per bound, "
          "no Bonferroni (as the papers plot it)\n")
    print("| m | ε | μ | one-run (Steinke) | fdp-one-run-pure | fdp-one-run-gdp |")
    print("|---:|---:|---:|---:|---:|---:|")
    for m in (1000, 10_000, 100_000, 1_000_000):
        ks = np.unique(np.geomspace(8, m // 2, 40).astype(int))
        for eps in (1.0, 2.0, 4.0, 8.0):
            mu = gdp_mu_for(eps, delta)
            # Top k of the ½N(0,1) + ½N(μ,1) mixture: threshold t with P[score > t] = k/m.
            tail = lambda t: 0.5 * (special.ndtr(-t) + special.ndtr(mu - t))
            best = dict.fromkeys(BOUNDS, (0.0, 0))
            for k in ks:
                t = optimize.brentq(lambda x: tail(x) - k / m, -40, 40)
                v = int(round(2 * m * 0.5 * special.ndtr(mu - t)))  # members on top = non-members at the bottom
                r = 2 * int(k)
                vals = {"one-run": one_run_epsilon(m, r, v, delta, alpha),
                        "fdp-one-run-pure": fdp_one_run_bound(m, r, v, alpha, family="pure", delta=delta),
                        "fdp-one-run-gdp": gdp_epsilon(fdp_one_run_bound(m, r, v, alpha, family="gdp"), delta)}
                for b, e in vals.items():
                    if e > best[b][0]:
                        best[b] = (e, int(k))
            print(f"| {m:,} | {eps:g} | {mu:.3f} | "
                  + " | ".join(f"{best[b][0] / eps:.3f} (k = {best[b][1]:,})" for b in BOUNDS) + " |")
    print()


def section_calibration(trials, alpha, seed) -> None:
    eps, delta, m = 1.0, 1e-5, 500
    print(f"### Calibration: flagged = ε_LB > ε = {eps:g} (δ = {delta:g}, {m} canaries, {trials} audits per row)\n")
    print("| mechanism | noise | bound | flagged | 95% CP interval | median ε_LB |")
    print("|---|---|---|---:|---|---:|")
    seqs = iter(np.random.SeedSequence(seed).spawn(6))
    for kind in ("rr", "laplace", "gaussian"):
        for noise in (1.0, 0.1):
            scores, labels = release(kind, eps, delta, noise, trials, m, np.random.default_rng(next(seqs)))
            for b in ("fdp-one-run-pure", "fdp-one-run-gdp"):
                lb = np.array([BOUNDS[b](s, l, delta, alpha).epsilon for s, l in zip(scores, labels)])
                k = int((lb > eps).sum())
                ci = stats.binomtest(k, trials).proportion_ci(0.95, method="exact")
                note = " (not μ-GDP: invalid here)" if b.endswith("gdp") and kind != "gaussian" else ""
                print(f"| {kind} | ×{noise:g} | {b}{note} | {k}/{trials} | [{ci.low:.1%}, {ci.high:.1%}] | "
                      f"{np.median(lb):.3f} |")
    print()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--calibration-audits", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sections", default="ceiling,family,gaussian,gaussian-expected,calibration")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    for name in args.sections.split(","):
        t = time.perf_counter()
        if name == "ceiling":
            section_ceiling(args.alpha)
        elif name == "family":
            section_family(args.trials, args.alpha, args.seed)
        elif name == "gaussian":
            section_gaussian(args.trials, args.alpha, args.seed)
        elif name == "gaussian-expected":
            section_gaussian_expected(args.alpha)
        elif name == "calibration":
            section_calibration(args.calibration_audits, args.alpha, args.seed)
        else:
            raise SystemExit(f"unknown section {name!r}")
        print(f"({name}: {time.perf_counter() - t:.1f} s)\n", flush=True)
    given = argv if argv is not None else sys.argv[1:]
    cmd = shlex.join([".venv/bin/python", "benchmarks/one_run_bounds.py", *given])
    load = os.getloadavg()[0]
    print(f"Command: `{cmd}`  —  wall time {time.perf_counter() - start:.1f} s, load average {load:.1f}.")


if __name__ == "__main__":
    main()
