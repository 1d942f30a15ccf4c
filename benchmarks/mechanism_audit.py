"""Mechanism audits: tightness of correct DP learners, power against planted bugs, validity.

Each audit is a canary-only run (`--shadows 0`) whose canaries are scored on
what the mechanism releases ([attack.canaries] observe = "mechanism", the
default where the learner records it), followed by `check` against the
learner's own claim. The release (Φ) audit of the same run is reported beside
it (the bounds of the release scores, α split the same way).

  .venv/bin/python benchmarks/mechanism_audit.py --out runs/mechanism --seeds 5
  .venv/bin/python benchmarks/mechanism_audit.py --analyse-only

Groups: learner × corpus × claimed ε × variant (ok, or a planted bug from
topicaudit.targets.bug_variants) × seed. Rerunning resumes (finished run
directories are reused). Writes benchmarks/results/mechanism_audit.md and .json.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"

CORPORA = {
    "pheme": {"path": str(DATA / "pheme" / "pheme_clean.json"), "preprocess": False},
    "kos": {"path": str(DATA / "kos" / "docword.kos.txt")},
    # The local learners randomise every (document, word) cell: 20news keeps its 2,000 most frequent words.
    "20news": {"path": str(DATA / "20news" / "20news-bydate-reassembled.tar.gz"), "max_words": 2000},
}
# The learners' inference after the mechanism (CGS on LP-LDA's reconstruction, LPPF's sampler) does not
# change what the mechanism released, so those run short; DP-CGS's chain and DP-SVI's steps are the mechanism.
LEARNERS = {
    "lp-lda": ({"n_iter": 20}, ["noise-halved", "randomiser-dropped"]),
    "lppf": ({"n_iter": 2}, ["noise-halved", "randomiser-dropped"]),
    "dp-cgs": ({"n_iter": 50}, ["noise-halved", "cap-skipped"]),
    "dp-svi": ({}, ["noise-halved", "composition-forgotten", "steps-20x", "cap-skipped"]),
    # DP-SVI with per-document clipping at a quarter of its token cap N = 200 (the canary's 4 × N tokens,
    # capped to N, clipped to C): skipping the clipping lets N/C = 4 times the claimed contribution through.
    "dp-svi-clipped": ({"clip_norm": 50.0}, ["clipping-skipped"]),
}
# HDP-LDA's claim ε_g = T (ε_l + 2 ln(C/β + 1)) spends 2 ln(C/β + 1) per iteration on its sampler, which no
# release shows; its audits take C/β small, so the Laplace releases carry most of the claim:
# ε_l = ε_g / T − 2 ln(C/β + 1) (hdp_epsilon_l). One release (T = 1) is one Laplace mechanism, which the
# pure-ε tests measure tightly; T = 10 releases compose, which they do not (benchmarks/RESULTS.md §20).
HDP = {"hdp-lda": {"n_iter": 1, "clip": 0.01, "beta": 1.0}}
HDP["hdp-lda-t10"] = {**HDP["hdp-lda"], "n_iter": 10}
for _name, _params in HDP.items():
    LEARNERS[_name] = (_params, ["noise-halved"])
# Benchmark names of a learner under other settings → the learner's registry name.
LEARNER_NAMES = {"dp-svi-clipped": "dp-svi", "hdp-lda-t10": "hdp-lda"}
# DP vocabulary steps, audited with threshold canaries in front of a non-private learner (lda): each step is
# held to its own claim.
DPSU_STEPS = {"dpsu-laplace", "dpsu-gaussian", "dpsu-gw"}
DPSU_BUGS = ["dpsu-noise-halved", "dpsu-noise-tenth", "dpsu-threshold-halved", "dpsu-delta0-skipped", "dpsu-budget-2",
             "dpsu-budget-10"]
for _step in DPSU_STEPS:
    LEARNERS[_step] = ({}, DPSU_BUGS)
# LPPF privatises every count densely: its audits use the corpus's 400 most frequent words.
MAX_WORDS = {"lppf": 400}


def config(corpus, learner, epsilon, variant, seed, canaries):
    params, _ = LEARNERS[learner]
    corpus_table = dict(CORPORA[corpus])
    if learner in MAX_WORDS:
        corpus_table["max_words"] = MAX_WORDS[learner]
    if learner in DPSU_STEPS and variant == "noise-halved":
        variant = "dpsu-noise-halved"  # the same bug, planted in the vocabulary step
    bug = {"test_bug": variant} if variant != "ok" else {}
    if learner in DPSU_STEPS:
        target = {"learner": "lda", "k": 5, "vocabulary": learner, "vocabulary_params": {"epsilon": epsilon}, **bug}
    else:
        privacy = {"epsilon_l": hdp_epsilon_l(params, epsilon)} if learner in HDP else {"epsilon": epsilon}
        target = {"learner": LEARNER_NAMES.get(learner, learner), "k": 5, "vocabulary": "all",
                  "params": {**params, **privacy}, **bug}
    return {
        "name": f"{learner}-{corpus}-e{epsilon:g}-{variant}-s{seed}" + (f"-m{canaries}" if canaries != 1000 else ""),
        "seed": seed, "corpus": corpus_table, "target": target,
        "attack": {"shadows": 0, "canaries": {"count": canaries,
                                              **({"kind": "threshold"} if learner in DPSU_STEPS else {})}},
    }


def hdp_epsilon_l(params: dict, epsilon_g: float) -> float:
    """The per-release ε_l that makes HDP-LDA's total claim ε_g at the given T, C and β."""
    epsilon_l = epsilon_g / params["n_iter"] - 2.0 * math.log(params["clip"] / params["beta"] + 1.0)
    if epsilon_l <= 0:
        raise ValueError(f"HDP-LDA cannot claim ε_g = {epsilon_g}: its sampler alone spends more")
    return epsilon_l


def run_one(out: Path, cfg: dict) -> dict:
    path = out / cfg["name"]
    start = time.perf_counter()
    if not (path / "results.json").exists():
        execute_run(config_from_dict({**cfg, "output": str(path)}), quiet=True)
    seconds = time.perf_counter() - start
    verdict = check_run(path)
    results = json.loads((path / "results.json").read_text())
    release = [b for name, b in results["canaries"]["release_epsilon_lower_bounds"]["by_test"].items()] \
        if "release_epsilon_lower_bounds" in results["canaries"] else []
    return {"name": cfg["name"], "epsilon_claim": verdict.claimed_epsilon, "epsilon_lb": verdict.epsilon_lower_bound,
            "verdict": verdict.verdict, "strongest": verdict.strongest_attack, "power": verdict.power,
            "release_epsilon_lb": max((b["epsilon"] for b in release), default=None),
            "seconds": round(seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/mechanism"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--corpora", nargs="+", default=["pheme"], choices=sorted(CORPORA))
    parser.add_argument("--learners", nargs="+", default=list(LEARNERS), choices=list(LEARNERS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0])
    parser.add_argument("--variants", nargs="+", default=None, help="ok and bug names (default: ok and each "
                                                                     "learner's bugs)")
    parser.add_argument("--tag", default="mechanism_audit")
    parser.add_argument("--analyse-only", action="store_true",
                        help="summarise benchmarks/results/TAG.jsonl (every audit recorded so far) and stop")
    args = parser.parse_args()
    if args.analyse_only:
        rows = [json.loads(line) for line in (RESULTS / f"{args.tag}.jsonl").read_text().splitlines() if line]
        latest = {r["name"] + f"-m{r['canaries']}": r for r in rows}  # a rerun of an audit replaces its row
        print(summary(list(latest.values())))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    log = RESULTS / f"{args.tag}.jsonl"
    for corpus in args.corpora:
        for learner in args.learners:
            variants = args.variants or ["ok"] + LEARNERS[learner][1]
            for epsilon in args.epsilons:
                for variant in variants:
                    for seed in range(args.seeds):
                        row = {"corpus": corpus, "learner": learner, "epsilon": epsilon, "variant": variant,
                               "seed": seed, "canaries": args.canaries,
                               **run_one(args.out, config(corpus, learner, epsilon, variant, seed, args.canaries))}
                        rows.append(row)
                        with log.open("a") as handle:
                            handle.write(json.dumps(row) + "\n")
                        print(json.dumps(row), flush=True)
    print(summary(rows))
    return 0


def summary(rows: list[dict]) -> str:
    """Markdown: per group, ε_LB/ε (mean ± sd), verdicts, the release audit beside, power estimate, time."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["corpus"], r["learner"], r["epsilon"], r["variant"], r["canaries"]), []).append(r)
    lines = ["| corpus | learner | ε | variant | canaries | audits | VIOLATED | NO SIGNAL | ε_LB/ε mechanism | "
             "ε_LB/ε release | power 2× (est.) | s per audit |", "|" + "---|" * 12]
    for (corpus, learner, eps, variant, m), rs in sorted(groups.items()):
        ratio = [r["epsilon_lb"] / r["epsilon_claim"] for r in rs]
        # A DP vocabulary step's claim says nothing of the non-private learner's Φ behind it: no release column.
        rel = [] if learner in DPSU_STEPS else [r["release_epsilon_lb"] / r["epsilon_claim"] for r in rs
                                                if r["release_epsilon_lb"] is not None]
        power = [r["power"]["2x"] for r in rs if r.get("power")]

        def ms(x):
            """mean ± sd of the finite values; ∞ (a δ-tail refutation) counted apart."""
            finite = [v for v in x if math.isfinite(v)]
            text = "–" if not finite else (f"{statistics.mean(finite):.2f} ± "
                                          f"{statistics.stdev(finite) if len(finite) > 1 else 0:.2f}")
            return text if len(finite) == len(x) else f"∞ in {len(x) - len(finite)}/{len(x)}; {text}"
        lines.append(f"| {corpus} | {learner} | {eps:g} | {variant} | {m} | {len(rs)} | "
                     f"{sum(r['verdict'] == 'VIOLATED' for r in rs)} | {sum(r['verdict'] == 'NO SIGNAL' for r in rs)} | "
                     f"{ms(ratio)} | {ms(rel)} | {ms(power)} | {statistics.median(r['seconds'] for r in rs):.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
