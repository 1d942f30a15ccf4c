"""What a cached ``assert_privacy`` pays for fitting in a new interpreter, and a reuse for probing the start-up code.

Side by side, alternating, each in a Python process of its own (the same imports every time), on the README's CI
example (PHEME, DP-CGS k = 5, a fixed canary count):

- ``in place``: ``assert_privacy(..., cache=False)``, the fit in the calling process (no run kept);
- ``fresh``: ``assert_privacy(..., cache=EMPTY)``, the fit in a new interpreter, its run kept;
- ``reuse``: the same again, the finished run found (start-up probe, cache key, check);
- ``probe``: ``startup_code()`` alone, the first call of a process.

    .venv/bin/python benchmarks/fresh_process_cost.py [--rounds 3] > benchmarks/results/fresh_process_cost.txt

Take it on a quiet machine: it prints the load average before each round.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CONFIG = {"corpus": {"path": str(SHARED / "pheme" / "pheme_clean.json"), "preprocess": False},
          "target": {"learner": "dp-cgs", "k": 5, "vocabulary": "all"},
          "attack": {"shadows": 0, "canaries": {"count": 1000}}}
AUDIT = """import json, sys, time
started = time.perf_counter()
import topicaudit
imported = time.perf_counter()
topicaudit.assert_privacy(json.loads(sys.argv[1]), epsilon=3.0, cache={cache}, output={output})
print(json.dumps({{"import": imported - started, "call": time.perf_counter() - imported}}))
"""
PROBE = """import json, time
started = time.perf_counter()
from topicaudit.engine.storage.startup_code import startup_code
imported = time.perf_counter()
assert startup_code()
print(json.dumps({"import": imported - started, "call": time.perf_counter() - imported}))
"""


def _timed(code: str, where: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code, json.dumps(CONFIG)], capture_output=True, text=True,
                          cwd=where, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    seconds: dict[str, list[float]] = {"in place": [], "fresh": [], "reuse": [], "probe": []}
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        for r in range(rounds):
            load = Path("/proc/loadavg").read_text().split()[:3]
            cache = where / f"cache-{r}"
            cases = {"in place": AUDIT.format(cache="False", output=repr(str(where / f"run-{r}"))),
                     "fresh": AUDIT.format(cache=repr(str(cache)), output="None"),
                     "reuse": AUDIT.format(cache=repr(str(cache)), output="None"),
                     "probe": PROBE}
            for name, code in cases.items():
                seconds[name].append(_timed(code, where)["call"])
            print(f"round {r + 1}: load before {' '.join(load)}; " +
                  ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()), flush=True)
    for name, values in seconds.items():
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"{name}: {statistics.mean(values):.2f} ± {spread:.2f} s (call only, over {len(values)} rounds)")
    ratio = [f / i for f, i in zip(seconds["fresh"], seconds["in place"])]
    print(f"fresh / in place: {statistics.mean(ratio):.2f} ± {statistics.stdev(ratio) if len(ratio) > 1 else 0:.2f}")
    print(f"load after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
