"""Does a gate sized by ``check --canaries auto`` catch a 2× bug? Twenty seeded canary-only audits of a learner
with its noise halved (``[target] test_under_noise = 2``, the claim unchanged), at a given canary count.

  .venv/bin/python benchmarks/sized_gate.py --learner dp-cgs --canaries 3600 --out runs/sized-gate \\
      --record benchmarks/results/sized_gate.jsonl

Each audit is ``topicaudit check CONFIG --output DIR --quiet`` (the command the gate runs); one JSON line per
audit: learner, canaries, seed, exit code, verdict, ε bound, and the load average before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHEME = REPO.parent / "shared" / "data" / "pheme" / "pheme_clean.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learner", default="dp-cgs")
    parser.add_argument("--canaries", type=int, required=True)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--corpus", type=Path, default=PHEME)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    caught = 0
    for seed in range(args.seeds):
        config = args.out / f"{args.learner}-m{args.canaries}-s{seed}.toml"
        config.write_text(f'seed = {seed}\n[corpus]\npath = "{args.corpus.resolve()}"\npreprocess = false\n'
                          f'[target]\nlearner = "{args.learner}"\nk = 5\nvocabulary = "all"\ntest_under_noise = 2.0\n'
                          f"[attack]\nshadows = 0\n[attack.canaries]\ncount = {args.canaries}\n")
        before = os.getloadavg()
        done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), "check", str(config), "--output",
                               str(args.out / config.stem), "--quiet"], capture_output=True, text=True)
        line = done.stdout.strip()
        caught += done.returncode == 1
        record = {"learner": args.learner, "canaries": args.canaries, "seed": seed, "exit": done.returncode,
                  "verdict": line.split(":", 1)[0], "line": line[:200], "load_before": before,
                  "load_after": os.getloadavg()}
        print(json.dumps(record), flush=True)
        if args.record:
            with open(args.record, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
    print(f"{caught} of {args.seeds} said VIOLATED", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
