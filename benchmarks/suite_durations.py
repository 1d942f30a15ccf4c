"""How long each test takes, and which tests the default run leaves out (tests/slow_tests.txt).

The default suite (`bash tests/run.sh`, what CI runs) must stay near ten minutes on 2 cores; it grew to 40-75
minutes, most of it in the few tests that start processes, Ray or whole audits. Those over a threshold are listed in
tests/slow_tests.txt, which tests/conftest.py marks slow (`bash tests/run.sh -m slow` runs them).

As a pytest plugin it appends every phase of every test to the file named by SUITE_DURATIONS (default
suite-durations.tsv), as the run goes, so a long run can be read before it ends::

    PYTHONPATH=benchmarks SUITE_DURATIONS=/tmp/d.tsv bash tests/run.sh -p suite_durations -m "slow or not slow"

As a script it writes the list from such files::

    python benchmarks/suite_durations.py SECONDS tests/slow_tests.txt /tmp/d.tsv [more.tsv ...]
"""
from __future__ import annotations

import os
import sys


def pytest_runtest_logreport(report) -> None:
    with open(os.environ.get("SUITE_DURATIONS", "suite-durations.tsv"), "a", encoding="utf-8") as log:
        log.write(f"{report.nodeid}\t{report.when}\t{report.duration:.3f}\t{report.outcome}\n")


def main(threshold: float, listed: str, logs: list[str]) -> None:
    calls: dict[str, float] = {}
    others = 0.0  # setups (module fixtures) and teardowns: they stay in the default run
    for name in logs:
        with open(name, encoding="utf-8") as log:
            for line in log:
                node, when, seconds, _ = line.rstrip("\n").split("\t")
                if when == "call":
                    calls[node] = max(calls.get(node, 0.0), float(seconds))
                else:
                    others += float(seconds)
    slow = sorted(node for node, seconds in calls.items() if seconds > threshold)
    kept = sum(seconds for node, seconds in calls.items() if seconds <= threshold)
    print(f"{len(calls)} tests: {len(slow)} over {threshold:g} s ({sum(calls[n] for n in slow):.0f} s of calls); "
          f"the default run keeps {kept:.0f} s of calls and about {others:.0f} s of set-ups and tear-downs")
    with open(listed, "w", encoding="utf-8") as out:
        out.write(f"# Tests whose call took over {threshold:g} s in a full run on 2 cores; tests/conftest.py marks "
                  "them slow:\n# `bash tests/run.sh` (CI) leaves them out, `bash tests/run.sh -m slow` runs them. "
                  "Made by benchmarks/suite_durations.py.\n")
        out.writelines(node + "\n" for node in slow)


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2], sys.argv[3:])
