"""What listing a fit's loaded code costs: ``fitted_code.loaded_outside`` runs once per model saved in the driver and
once per fit in the fitting process (a Ray worker), so its cost is paid per shadow model. Each python given runs a
child that audits a small synthetic corpus (canaries only: numba, scikit-learn and the learners loaded, as after a
fit), then times the call; the pythons alternate, so two builds compare side by side at one load.

  .venv/bin/python benchmarks/fitted_code_cost.py --python .venv/bin/python /path/to/old/.venv/bin/python \\
      --repeat 3 --record benchmarks/results/fitted_code_cost.jsonl

One JSON line per child: the python, the commit of its topicaudit, the entries listed, the first call after the run
(the run saved its model: most files are hashed already), the median and fastest of the next calls in seconds, and the
load average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import record

CALLS = 15
CHILD = """
import json, statistics, sys, time
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage import fitted_code
config = {"synthetic": {"n_docs": 150, "n_words": 250}, "target": {"k": 3, "vocabulary": "all"},
          "attack": {"shadows": 0, "canaries": {"count": 60}}, "output": sys.argv[1]}
execute_run(config_from_dict(config), quiet=True)
seconds = []
for _ in range(1 + int(sys.argv[2])):
    started = time.perf_counter()
    listed = fitted_code.loaded_outside()
    seconds.append(time.perf_counter() - started)
print(json.dumps({"entries": len(listed), "first_s": seconds[0], "median_s": statistics.median(seconds[1:]),
                  "fastest_s": min(seconds[1:])}))
"""


def _commit(python: Path) -> str:
    found = subprocess.run([str(python), "-c", "import topicaudit, pathlib; print(pathlib.Path(topicaudit.__file__)"
                            ".resolve())"], capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run(["git", "-C", str(Path(found).parent), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", nargs="+", type=Path, required=True, help="the interpreters to compare")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    args.python = [Path(os.path.abspath(python)) for python in args.python]  # the children run elsewhere
    commits = {python: _commit(python) for python in args.python}
    lines = []
    for attempt in range(args.repeat):
        for python in args.python:
            with tempfile.TemporaryDirectory() as scratch:
                environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "HOME": scratch}
                before = os.getloadavg()[0]
                started = time.perf_counter()
                done = subprocess.run([str(python), "-c", CHILD, f"{scratch}/run", str(CALLS)], env=environment,
                                      capture_output=True, text=True, cwd=scratch)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                line = {"python": str(python), "commit": commits[python], "attempt": attempt + 1,
                        **json.loads(done.stdout.splitlines()[-1]), "child_s": time.perf_counter() - started,
                        "load_before": before, "load_after": os.getloadavg()[0]}
            print(json.dumps(line), flush=True)
            lines.append(line)
    for python in args.python:
        mine = [line["median_s"] for line in lines if line["python"] == str(python)]
        print(f"{commits[python]}: median call {statistics.median(mine) * 1000:.1f} ms over {len(mine)} children")
    record(args.record, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
