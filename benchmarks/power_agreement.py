"""Stated power against measured power: does a verdict's "refuted in X% of simulated audits" hold?

Re-checks every run directory of a benchmark root with this code (``check``
against the learner's own claim) and groups them by everything but the seed.
For a planted "noise ÷ 2" (`noise-halved`, `dpsu-noise-halved`) the verdict's
stated power is its "2x" figure; for `dpsu-noise-tenth` its "10x" figure.
Measured power is the share of the group's audits that said VIOLATED, with
the share refuted by the mechanism's own tests beside it (the power
simulation models those; the released Φ's tests can only add).

  .venv/bin/python benchmarks/mechanism_audit.py --out runs/power30 --tag power30 --seeds 20 \\
      --corpora pheme --epsilons 1 3 --learners lp-lda lppf dp-cgs --variants noise-halved
  .venv/bin/python benchmarks/power_agreement.py runs/power30
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness import run_directories

from topicaudit.engine.check import check_run

FACTORS = {"noise-halved": "2x", "dpsu-noise-halved": "2x", "dpsu-noise-tenth": "10x"}


def group_of(name: str) -> tuple[str, str]:
    """(group, variant) of a run directory named ``learner-corpus-eE-variant-sS[-mM]``."""
    group = re.sub(r"-s\d+(?=-m\d+$|$)", "", name)
    variant = next((v for v in sorted(FACTORS, key=len, reverse=True) if f"-{v}" in group), "")
    return group, variant


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args()
    groups: dict[str, list] = defaultdict(list)
    for path in run_directories(args.roots):
        group, variant = group_of(path.name)
        if not variant:
            continue
        result = check_run(path)
        mechanism = max(b.epsilon for name, b in result.bounds.items() if name.startswith("canaries/"))
        stated = (result.power or {}).get(FACTORS[variant])
        groups[group].append((result.violated, mechanism > result.claimed_epsilon, stated))
    print("| group | audits | VIOLATED | by the mechanism's tests | stated power (mean) | measured − stated |")
    print("|---|---|---|---|---|---|")
    for group, rows in sorted(groups.items()):
        n = len(rows)
        caught, by_mechanism = sum(r[0] for r in rows), sum(r[1] for r in rows)
        stated = [r[2] for r in rows if r[2] is not None]
        mean = statistics.mean(stated) if stated else None
        gap = f"{100 * (by_mechanism / n - mean):+.0f} pp" if mean is not None else "–"
        print(f"| {group} | {n} | {caught}/{n} | {by_mechanism}/{n} | "
              f"{'–' if mean is None else f'{100 * mean:.0f}%'} | {gap} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
