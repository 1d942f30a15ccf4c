"""Pipelines with a DP vocabulary step, audited with the default (`auto`) canaries: what each verdict says.

`auto` picks threshold canaries for a DP vocabulary step, which hold the step to its own claim.
Each audit is a canary-only run on PHEME followed by `check`; one JSON line per audit.

  .venv/bin/python benchmarks/pipeline_auto.py --out runs/dpsu_auto30 --steps dpsu-laplace dpsu-gw \\
      --bugs dpsu-noise-halved dpsu-budget-2 --seeds 20                     # a DPSU step before lda
  .venv/bin/python benchmarks/pipeline_auto.py --out runs/fdptm30 --steps dpsu-gw --learner dp-cgs \\
      --epsilon 1.5 --bugs no-noise ok --seeds 5                              # FDPTM: 1.5 + 1.5
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from topicaudit.engine.check import check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run

PHEME = Path(__file__).resolve().parents[2] / "shared" / "data" / "pheme" / "pheme_clean.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", nargs="+", default=["dpsu-laplace"])
    parser.add_argument("--learner", default="lda", help="the learner behind the step (its ε = --epsilon if DP)")
    parser.add_argument("--epsilon", type=float, default=3.0, help="the step's ε (and a DP learner's)")
    parser.add_argument("--bugs", nargs="+", default=["ok"], help="planted bugs (ok: none)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--canaries", type=int, default=1000)
    args = parser.parse_args()
    tally = Counter()
    for step in args.steps:
        for bug in args.bugs:
            for seed in range(args.seeds):
                out = args.out / f"{step}-{args.learner}-{bug}-m{args.canaries}-s{seed}"
                target = {"learner": args.learner, "k": 5, "vocabulary": step,
                          "vocabulary_params": {"epsilon": args.epsilon},
                          **({"params": {"epsilon": args.epsilon}} if args.learner != "lda" else {}),
                          **({"test_bug": bug} if bug != "ok" else {})}
                if not (out / "results.json").exists():
                    execute_run(config_from_dict({"corpus": {"path": str(PHEME), "preprocess": False}, "seed": seed,
                                                  "target": target, "output": str(out),
                                                  "attack": {"shadows": 0, "canaries": {"count": args.canaries}}}),
                                quiet=True)
                result = check_run(out)
                kind = json.loads((out / "results.json").read_text())["canaries"]["kind"]
                tally[(step, bug, result.verdict)] += 1
                print(json.dumps({"step": step, "learner": args.learner, "bug": bug, "seed": seed, "kind": kind,
                                  "verdict": result.verdict, "claimed": result.claimed_epsilon,
                                  "eps_lb": result.epsilon_lower_bound, "power": result.power,
                                  "unseen": result.unseen}), flush=True)
    for (step, bug, verdict), n in sorted(tally.items()):
        print(f"{step} {args.learner} {bug}: {verdict} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
