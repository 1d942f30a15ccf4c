"""How long `topicaudit check RUN --epsilon E` takes on a small canary-only run, for claims below and above every
ceiling (a claim above them searches canary counts up to a million for the verdict's hint), for each executable
given, alternated, so that two builds compare side by side on one machine at one load.

  .venv/bin/python benchmarks/check_claim_timings.py --topicaudit .venv/bin/topicaudit OLD/.venv/bin/topicaudit \\
      --claims 3 8 12 20 --repeat 3 --out /tmp/claim-timings --record benchmarks/results/check_claim_timings.jsonl

The run (200 synthetic documents, lda k=3, 60 canaries, no shadow models) is made once by the first executable and
copied for every check. One JSON line per check: executable, claim, seconds, exit code, verdict line, load before
and after.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from harness import record, timed_command

CONFIG = "seed = 0\n[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\n[attack]\nshadows = 0\n" \
         "[attack.canaries]\ncount = 60\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topicaudit", nargs="+", type=Path, required=True, help="the executables to compare")
    parser.add_argument("--claims", nargs="+", type=float, default=[3, 8, 12, 20])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    (args.out / "c.toml").write_text(CONFIG)
    env = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"}
    subprocess.run([str(args.topicaudit[0]), "run", str(args.out / "c.toml"), "--output", str(args.out / "pA"),
                    "--quiet"], env=env, check=True, capture_output=True)
    lines = []
    for round_ in range(args.repeat):
        for claim in args.claims:
            for index, exe in enumerate(args.topicaudit):
                run = args.out / f"run-{round_}-{claim:g}-{index}"
                shutil.copytree(args.out / "pA", run)
                line, done = timed_command([str(exe), "check", str(run), "--epsilon", f"{claim:g}"], env,
                                           topicaudit=str(exe), claim=claim)
                line["verdict"] = next((v for v in done.stdout.splitlines()
                                        if v.startswith(("VIOLATED", "CONSISTENT", "NO "))), "")[:160]
                lines.append(line)
    record(args.record, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
