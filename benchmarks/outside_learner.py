"""A DP learner from outside the repository, audited as a built-in one is (issue 31, "Done when").

The learner is tests/packages/dpem-topics (docs/adding-a-learner.md's worked
example): DP variational EM, Gaussian noise on the expected word-topic counts
of each of its n_iter iterations, documents capped at max_doc_tokens, its
claim from dp-accounting's PLD accountant. It is installed the way a user
installs it (pip, into a directory of its own, put on sys.path) and named by
its entry point (`dpem`) or by path (its planted bugs,
`dpem_topics.planted:HalvedNoise`, `…:SkippedCap`). Beside it, the built-in
learner of the same mechanism: DP-SVI with sampling_rate = 1 (every document
in every step: a plain Gaussian release per step), the same n_iter, token
cap, k, ε, δ and accountant (PLD), the same canaries.

Each audit is a canary-only run (`--shadows 0`), canaries scored on what the
mechanism records, then `check` against the learner's own claim
(benchmarks/mechanism_audit.py's run_one).

  .venv/bin/python benchmarks/outside_learner.py --out runs/outside --seeds 5 --learners dpem dp-svi-q1 \\
      --variants ok --epsilons 1 3 --canaries 20000
  .venv/bin/python benchmarks/outside_learner.py --out runs/outside --seeds 20 --learners dpem \\
      --variants noise-halved cap-skipped --epsilons 3 --canaries 20000
  .venv/bin/python benchmarks/outside_learner.py --conformance      # check_learner on the four versions
  .venv/bin/python benchmarks/outside_learner.py --analyse-only

Rows go to benchmarks/results/TAG.jsonl (default outside_learner), with the
load average at the start and end of each audit (its seconds measure nothing
while other jobs share the cores).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import mechanism_audit as M

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tests" / "packages" / "dpem-topics"
RESULTS = ROOT / "benchmarks" / "results"

# The learners' common settings: 20 iterations (steps), a cap of 64 tokens a document, k = 5.
N_ITER, CAP, K = 20, 64, 5
LEARNERS = {
    "dpem": {"ok": "dpem", "noise-halved": "dpem_topics.planted:HalvedNoise",
             "cap-skipped": "dpem_topics.planted:SkippedCap", "record-mismatch": "dpem_topics.planted:RecordMismatch"},
    "dp-svi-q1": {"ok": "dp-svi", "noise-halved": "dp-svi"},
}
# The built-in learner's planted bugs ([target] test_bug, topicaudit.targets.bug_variants).
BUILT_IN_BUGS = {("dp-svi-q1", "noise-halved"): "noise-halved"}
PARAMS = {
    "dpem": {"n_iter": N_ITER, "max_doc_tokens": CAP},
    "dp-svi-q1": {"sampling_rate": 1.0, "n_iter": N_ITER, "max_doc_tokens": CAP, "accountant": "pld"},
}


# The corpora of benchmarks/mechanism_audit.py, and the synthetic corpus of the page's CI audit (privacy/audit.toml).
CORPORA = {**M.CORPORA, "synthetic": None}


def install(site: Path) -> Path:
    """The package installed as a user installs it (no dependencies: they are this environment's), once."""
    if not (site / "dpem_topics").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                        "--no-index", "--target", str(site), str(PACKAGE)], check=True)
    sys.path.insert(0, str(site))
    return site


def config(corpus: str, learner: str, epsilon: float, variant: str, seed: int, canaries: int) -> dict:
    return {
        "name": f"{learner}-{corpus}-e{epsilon:g}-{variant}-s{seed}-m{canaries}",
        "seed": seed,
        **({"synthetic": {"n_docs": 1000}} if CORPORA[corpus] is None else {"corpus": dict(CORPORA[corpus])}),
        "target": {"learner": LEARNERS[learner][variant], "k": K, "vocabulary": "all",
                   "params": {**PARAMS[learner], "epsilon": epsilon},
                   **({"test_bug": BUILT_IN_BUGS[learner, variant]} if (learner, variant) in BUILT_IN_BUGS else {})},
        "attack": {"shadows": 0, "canaries": {"count": canaries}},
    }


def load() -> float:
    return os.getloadavg()[0]


def conformance() -> list[dict]:
    """check_learner on the correct learner and its three planted bugs (the conformance suite's own sizes)."""
    from dpem_topics import DPEMTopics
    from dpem_topics.planted import HalvedNoise, RecordMismatch, SkippedCap
    from topicaudit.testing import check_learner

    rows = []
    for cls in (DPEMTopics, HalvedNoise, SkippedCap, RecordMismatch):
        start = time.perf_counter()
        try:
            result = check_learner(cls(k=3, epsilon=1.0, n_iter=5))
            outcome, message = "passes", f"canary audit bound {result.bound:.3f} with {result.design.count} canaries"
        except AssertionError as error:
            outcome, message = "fails", str(error)
        rows.append({"learner": cls.__name__, "check_learner": outcome, "message": message,
                     "seconds": round(time.perf_counter() - start, 1), "load": round(load(), 2)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/outside"))
    parser.add_argument("--site", type=Path, default=None, help="where to install the package (default OUT/site)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--canaries", type=int, default=20000)
    parser.add_argument("--corpora", nargs="+", default=["pheme"], choices=sorted(CORPORA))
    parser.add_argument("--learners", nargs="+", default=["dpem", "dp-svi-q1"], choices=list(LEARNERS))
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 3.0])
    parser.add_argument("--variants", nargs="+", default=["ok"])
    parser.add_argument("--tag", default="outside_learner")
    parser.add_argument("--conformance", action="store_true", help="run check_learner on the four versions and stop")
    parser.add_argument("--analyse-only", action="store_true")
    args = parser.parse_args()
    log = RESULTS / f"{args.tag}.jsonl"
    if args.analyse_only:
        rows = [json.loads(line) for line in log.read_text().splitlines() if line]
        audits = {r["name"]: r for r in rows if "verdict" in r}  # a rerun of an audit replaces its row
        print(M.summary(list(audits.values())))
        for r in rows:
            if "check_learner" in r:
                print(f"{r['learner']}: check_learner {r['check_learner']}: {r['message']}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    install((args.site or args.out / "site").resolve())
    if args.conformance:
        for row in conformance():
            with log.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
        return 0
    rows = []
    for corpus in args.corpora:
        for learner in args.learners:
            for epsilon in args.epsilons:
                for variant in args.variants:
                    if variant not in LEARNERS[learner]:
                        continue
                    for seed in range(args.first_seed, args.first_seed + args.seeds):
                        before = load()
                        row = {"corpus": corpus, "learner": learner, "epsilon": epsilon, "variant": variant,
                               "seed": seed, "canaries": args.canaries,
                               **M.run_one(args.out, config(corpus, learner, epsilon, variant, seed, args.canaries)),
                               "load": [round(before, 2), round(load(), 2)]}
                        rows.append(row)
                        with log.open("a") as handle:
                            handle.write(json.dumps(row) + "\n")
                        print(json.dumps(row), flush=True)
    print(M.summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
