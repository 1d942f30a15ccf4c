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
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

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
                load = os.getloadavg()[0]
                start = time.perf_counter()
                done = subprocess.run([str(exe), "check", str(run), "--epsilon", f"{claim:g}"], env=env,
                                      capture_output=True, text=True)
                seconds = time.perf_counter() - start
                verdict = next((l for l in done.stdout.splitlines() if l.startswith(("VIOLATED", "CONSISTENT", "NO "))),
                               "")
                line = {"topicaudit": str(exe), "claim": claim, "seconds": round(seconds, 2), "exit": done.returncode,
                        "verdict": verdict[:160], "load_before": round(load, 2),
                        "load_after": round(os.getloadavg()[0], 2)}
                print(json.dumps(line), flush=True)
                lines.append(line)
    if args.record:
        with args.record.open("a") as record:
            record.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
