"""Refits against recorded runs: the same configuration fitted again on this code gives the same verdict.

  .venv/bin/python benchmarks/mechanism_audit.py --out runs/fresh30 --tag fresh30 --corpora pheme kos 20news \
      --epsilons 1 3 --variants ok --seeds 2 --learners lp-lda lppf dp-cgs dpsu-laplace dpsu-gw dpsu-gaussian
  .venv/bin/python benchmarks/mechanism_audit.py --out runs/fresh30 --tag fresh30 --corpora pheme kos 20news \
      --epsilons 1 3 --variants ok --seeds 2 --learners hdp-lda dp-svi --canaries 10000
  .venv/bin/python benchmarks/compare_refits.py runs/fresh30 runs/validity30 runs/dpsu_validity30
"""
import sys
from pathlib import Path

from topicaudit.engine.check import check_run


def main() -> int:
    fresh_root, *recorded_roots = (Path(a) for a in sys.argv[1:])
    same = differ = 0
    verdicts = set()
    for fresh in sorted(p for p in fresh_root.iterdir() if (p / "results.json").exists()):
        recorded = next(root / fresh.name for root in recorded_roots if (root / fresh.name).exists())
        a, b = check_run(fresh), check_run(recorded)
        verdicts.add(a.verdict)
        if a.epsilon_lower_bound == b.epsilon_lower_bound and a.verdict == b.verdict:
            same += 1
        else:
            differ += 1
            print("DIFFER", fresh.name, a.epsilon_lower_bound, b.epsilon_lower_bound, a.verdict, b.verdict)
    print(f"identical {same}, different {differ}; verdicts of the refits: {sorted(verdicts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
