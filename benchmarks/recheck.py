"""Re-check finished run directories with this code: every verdict again, counted by group.

Validity on the final code without refitting: each directory's stored scores are held to the
learner's own claim by `check` as it is now (the bounds, α split and tests of this commit).

  .venv/bin/python benchmarks/recheck.py runs/validity30 runs/dpsu_validity30 --record recheck.jsonl

--record writes one JSON line per directory (its name, verdict, bound and strongest test); --compare FILE
holds each directory's verdict and bound to such a record, so a later commit can be checked against a full
re-check on a sample (--every N: every N-th directory) in a fraction of the time.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from harness import run_directories

from topicaudit.engine.check import check_run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--record", type=Path, help="write one JSON line per directory")
    parser.add_argument("--compare", type=Path, help="hold each directory to the line a --record run wrote")
    parser.add_argument("--every", type=int, default=1, help="re-check every N-th directory only")
    args = parser.parse_args()
    counts: dict[str, Counter] = defaultdict(Counter)
    before = {}
    if args.compare:
        before = {row["name"]: row for row in map(json.loads, args.compare.read_text().splitlines())}
    record = args.record.open("w") if args.record else None
    differ = 0
    for i, path in enumerate(run_directories(args.roots)):
        if i % args.every:
            continue
        learner = re.match(r"(.+?)-(pheme|kos|20news)-", path.name).group(1)
        result = check_run(path)
        row = {"name": path.name, "verdict": result.verdict, "epsilon": result.epsilon_lower_bound,
               "strongest": result.strongest_attack}
        if record:
            print(json.dumps(row), file=record, flush=True)
        if args.compare and before.get(path.name) != row:
            differ += 1
            print(f"DIFFERS {path.name}: {before.get(path.name)} → {row}", flush=True)
        counts[learner][result.verdict] += 1
        if result.violated:
            print(f"VIOLATED {path.name}: {result.strongest_attack} ε ≥ {result.epsilon_lower_bound:.3f} "
                  f"> {result.claimed_epsilon:g}", flush=True)
    print("| learner | audits | VIOLATED | NO SIGNAL | CONSISTENT |\n|---|---|---|---|---|")
    for learner, c in sorted(counts.items()):
        print(f"| {learner} | {sum(c.values())} | {c['VIOLATED']} | {c['NO SIGNAL']} | {c['CONSISTENT']} |")
    if args.compare:
        print(f"{sum(sum(c.values()) for c in counts.values())} re-checked against {args.compare}: {differ} differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
