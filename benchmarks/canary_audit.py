"""Canary audits: how strong `topicaudit check` is, and how often it is wrong.

Runs canary-only audits (no shadow models) and checks each against its claim:

  nonprivate   lda and cgs on PHEME (k = 5), unique-word and rare-words canaries, 1,000 and 10,000:
               ε_LB at 95% with δ = 0, and whether `check --epsilon 4` refutes
  correct      dp-svi (ε = 1, 3; document canaries) on PHEME and lppf (ε = 1 per token; word canaries)
               on a synthetic corpus: how often a correct mechanism is flagged (should be ≤ 5%)
  broken       the same learners and dp-cgs, lp-lda with their noise divided by 10
               ([target] test_under_noise), claims unchanged: how often they are caught
  claims       dp-cgs (ε = 1, 3) and hdp-lda (its own ε_g, word canaries) at their claims

Every audit is one run directory under --out (rerunning resumes: finished canary releases are
reused); the analysis reads the directories, so new bound methods re-analyse old runs for free:

  .venv/bin/python benchmarks/canary_audit.py --out runs/canary_bench            # run + analyse
  .venv/bin/python benchmarks/canary_audit.py --out runs/canary_bench --analyse-only

Writes benchmarks/results/canary_audit.md and .json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHEME = ROOT.parent / "shared" / "data" / "pheme" / "pheme_clean.json"
RESULTS = ROOT / "benchmarks" / "results"

PHEME_CORPUS = {"path": str(PHEME), "preprocess": False}
# LPPF privatises every count of every document (dense): a small synthetic corpus keeps a fit to seconds.
LPPF_CORPUS = {"synthetic": {"n_docs": 200, "n_words": 200, "k": 5, "mean_length": 40.0}}
LPPF_PARAMS = {"n_iter": 100, "n_avg": 25}


def audit(name, learner, params, canaries, kind, seed, *, k=5, under_noise=1.0, vocabulary="all", corpus="pheme"):
    """One canary audit's configuration (a dict of the TOML's content) and its group."""
    config = {
        "name": name, "seed": seed,
        "target": {"learner": learner, "k": k, "vocabulary": vocabulary, "params": params,
                   "test_under_noise": under_noise},
        "attack": {"shadows": 0, "delta": 0.0, "canaries": {"count": canaries, "kind": kind}},
    }
    if corpus == "pheme":
        config["corpus"] = PHEME_CORPUS
    else:
        config.update(LPPF_CORPUS)
    return config


def plan(seeds: int, parts: set[str]) -> list[tuple[str, dict]]:
    """(group, config) of every audit of the selected parts."""
    runs = []
    if "nonprivate" in parts:
        for learner in ("lda", "cgs"):
            for kind in ("unique-word", "rare-words"):
                for m in (1000, 10000):
                    for seed in range(3):
                        group = f"nonprivate/{learner}/{kind}/{m}"
                        runs.append((group, audit(group, learner, {}, m, kind, seed, vocabulary="observed")))
    for part, factor in (("correct", 1.0), ("broken", 10.0)):
        if part not in parts:
            continue
        learners = [("dp-svi", eps, {"epsilon": eps}, "unique-word", "pheme") for eps in (1.0, 3.0)]
        learners += [("lppf", eps, {"epsilon": eps, **LPPF_PARAMS}, "word", "synthetic")
                     for eps in ((1.0,) if part == "correct" else (1.0, 3.0))]
        if part == "broken":
            learners += [("dp-cgs", eps, {"epsilon": eps}, "unique-word", "pheme") for eps in (1.0, 3.0)]
            learners += [("lp-lda", eps, {"epsilon": eps}, "word", "pheme") for eps in (1.0, 3.0)]
        for learner, eps, params, kind, corpus in learners:
            m = 500 if corpus == "synthetic" else 1000
            for seed in range(seeds):
                group = f"{part}/{learner}/eps{eps:g}"
                runs.append((group, audit(group, learner, params, m, kind, seed, under_noise=factor, corpus=corpus)))
    if "claims" in parts:
        for eps in (1.0, 3.0):
            for seed in range(seeds):
                group = f"claims/dp-cgs/eps{eps:g}"
                runs.append((group, audit(group, "dp-cgs", {"epsilon": eps}, 1000, "unique-word", seed)))
        for seed in range(5):
            group = "claims/hdp-lda/own"
            runs.append((group, audit(group, "hdp-lda", {}, 1000, "word", seed)))
    return runs


def run_dir(out: Path, group: str, seed: int) -> Path:
    return out / group.replace("/", "__") / f"seed{seed:02d}"


def _run_one(config: dict, path: str) -> float:
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.run import execute_run

    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    config = config_from_dict({**config, "output": path})
    started = time.perf_counter()
    execute_run(config, quiet=True)
    return time.perf_counter() - started


def execute(runs, out: Path, workers: int) -> None:
    todo = [(g, c) for g, c in runs if not (run_dir(out, g, c["seed"]) / "results.json").exists()]
    print(f"{len(runs)} audits, {len(todo)} to run", file=sys.stderr)
    with ProcessPoolExecutor(workers) as pool:
        futures = {pool.submit(_run_one, c, str(run_dir(out, g, c["seed"]))): (g, c["seed"]) for g, c in todo}
        for i, future in enumerate(as_completed(futures), 1):
            group, seed = futures[future]
            print(f"[{i}/{len(todo)}] {group} seed {seed}: {future.result():.1f} s", file=sys.stderr)


def analyse(runs, out: Path) -> dict:
    from topicaudit.bounds.verdict import VALID_BOUNDS, bound_tests, guess_family
    from topicaudit.engine.check import canary_evidence, check_run

    rows: dict[str, list[dict]] = {}
    for group, config in runs:
        path = run_dir(out, group, config["seed"])
        if not (path / "results.json").exists():
            continue
        results = json.loads((path / "results.json").read_text())
        claim = results["target"]["guarantee"]["epsilon"]
        tested = claim if claim is not None else 4.0  # non-private: is ε = 4 refuted?
        check = check_run(path, epsilon=tested, alpha=0.05)  # δ: the claim's own, else [attack] delta = 0
        scores, coins, _ = canary_evidence(path)
        # Each bound method alone at the full α (split over the scores only): for the tightness table.
        alone = {}
        for method in VALID_BOUNDS:
            bounds = bound_tests(scores, coins, check.delta, 0.05 / len(scores), (method,), guess_family)
            alone[method] = max(b.epsilon for b in bounds.values())
        rows.setdefault(group, []).append({
            "seed": config["seed"], "claim": claim, "delta": check.delta, "tested": tested,
            "epsilon_lb": check.epsilon_lower_bound,
            "ceiling": check.ceiling, "violated": check.violated, "by_method": alone,
            "auc": max(s["auc"] for s in results["canaries"]["scores"].values()),
            "seconds": results["timings_s"]["total"],
        })
    return rows


def _ms(values, fmt="{:.2f}") -> str:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return "—"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(sd)}"


def report(rows: dict) -> str:
    from topicaudit.bounds.verdict import VALID_BOUNDS

    methods = list(VALID_BOUNDS)
    lines = ["# Canary audits", "",
             "Canary-only audits (no shadow models), 95% confidence, δ = the claim's (DP-SVI: 1e-5) or 0; ε_LB is "
             "the bound `check` uses "
             "(every valid method, α split over them); mean ± sd over seeds. Made by "
             "`benchmarks/canary_audit.py`.", "",
             "| audit | claim ε | audits | flagged | ε_LB | ceiling | ε_LB by method alone (" + ", ".join(methods)
             + ") | best AUC | s per audit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for group, rs in rows.items():
        claim = rs[0]["claim"]
        claim = f"{claim:.4g}" if claim is not None else None
        by_method = " / ".join(_ms([r["by_method"].get(m) for r in rs]) for m in methods)
        flagged = sum(r["violated"] for r in rs)
        lines.append(f"| {group} | {claim if claim is not None else 'none (4 tested)'} | {len(rs)} | "
                     f"{flagged}/{len(rs)} ({flagged / len(rs):.0%}) | {_ms([r['epsilon_lb'] for r in rs])} | "
                     f"{_ms([r['ceiling'] for r in rs])} | {by_method} | {_ms([r['auc'] for r in rs], '{:.3f}')} | "
                     f"{_ms([r['seconds'] for r in rs], '{:.1f}')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/canary_bench")
    parser.add_argument("--parts", default="nonprivate,correct,broken,claims")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--analyse-only", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    runs = plan(args.seeds, set(args.parts.split(",")))
    if not args.analyse_only:
        execute(runs, out, args.workers)
    rows = analyse(runs, out)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "canary_audit.json").write_text(json.dumps(rows, indent=1) + "\n")
    text = report(rows)
    (RESULTS / "canary_audit.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
