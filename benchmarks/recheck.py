"""Re-check finished run directories with this code: every verdict again, counted by group.

Validity on the final code without refitting: each directory's stored scores are held to the
learner's own claim by `check` as it is now (the bounds, α split and tests of this commit).

  .venv/bin/python benchmarks/recheck.py runs/validity30 runs/dpsu_validity30
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from harness import run_directories

from topicaudit.engine.check import check_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args()
    counts: dict[str, Counter] = defaultdict(Counter)
    for path in run_directories(args.roots):
        learner = re.match(r"(.+?)-(pheme|kos|20news)-", path.name).group(1)
        result = check_run(path)
        counts[learner][result.verdict] += 1
        if result.violated:
            print(f"VIOLATED {path.name}: {result.strongest_attack} ε ≥ {result.epsilon_lower_bound:.3f} "
                  f"> {result.claimed_epsilon:g}", flush=True)
    print("| learner | audits | VIOLATED | NO SIGNAL | CONSISTENT |\n|---|---|---|---|---|")
    for learner, c in sorted(counts.items()):
        print(f"| {learner} | {sum(c.values())} | {c['VIOLATED']} | {c['NO SIGNAL']} | {c['CONSISTENT']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
