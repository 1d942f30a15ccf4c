"""Does a gate sized by ``check --canaries auto`` catch a 2× bug? Twenty seeded canary-only audits of a learner
with its noise halved (``[target] test_under_noise = 2``, the claim unchanged), at a given canary count.

  .venv/bin/python benchmarks/sized_gate.py --learner dp-cgs --canaries 3600 --out runs/sized-gate \\
      --record benchmarks/results/sized_gate.jsonl

Each audit is ``topicaudit check CONFIG --output DIR --quiet`` (the command the gate runs); one JSON line per
audit: learner, canaries, seed, exit code, verdict, ε bound, and the load average before and after.

--no-power runs the same run and check in this process with the verdict's power simulation left out (it says
"no power estimate"): the verdict and its bounds are the same, and at 100,000 canaries and more the two power
simulations (the run's and check's) are most of an audit's time. --correct audits the learner as it is (no
noise divided), to see that a correct learner stays CONSISTENT at the same count.
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
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--no-power", action="store_true", help="leave out the verdict's power simulation")
    parser.add_argument("--correct", action="store_true", help="the learner as it is, its noise not divided")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    caught = 0
    under = "" if args.correct else "test_under_noise = 2.0\n"
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        config = args.out / f"{args.learner}-m{args.canaries}-s{seed}{'-correct' if args.correct else ''}.toml"
        config.write_text(f'seed = {seed}\n[corpus]\npath = "{args.corpus.resolve()}"\npreprocess = false\n'
                          f'[target]\nlearner = "{args.learner}"\nk = 5\nvocabulary = "all"\n{under}'
                          f"[attack]\nshadows = 0\n[attack.canaries]\ncount = {args.canaries}\n")
        before = os.getloadavg()
        if args.no_power:
            code, line = _without_power(config, args.out / config.stem)
        else:
            done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), "check", str(config),
                                   "--output", str(args.out / config.stem), "--quiet"], capture_output=True, text=True)
            code, line = done.returncode, done.stdout.strip()
        caught += code == 1
        record = {"learner": args.learner, "canaries": args.canaries, "seed": seed, "exit": code,
                  "verdict": line.split(":", 1)[0], "line": line[:200], "load_before": before,
                  "load_after": os.getloadavg()}
        if args.correct:
            record["correct"] = True
        if args.no_power:
            record["power"] = "not simulated"
        print(json.dumps(record), flush=True)
        if args.record:
            with open(args.record, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
    print(f"{caught} of {args.seeds} said VIOLATED", file=sys.stderr)
    return 0


def _without_power(config: Path, output: Path) -> tuple[int, str]:
    """The run and check of ``config`` in this process with the power simulation left out: (exit code as check
    gives it, the verdict line)."""
    from topicaudit.engine import verdict
    from topicaudit.engine.check import check_run
    from topicaudit.engine.configuration.loading import load_config
    from topicaudit.engine.run import execute_run

    def no_power(*args, **kwargs):
        raise ValueError("not simulated in this benchmark")

    verdict.simulated_power = no_power
    settings = load_config(config)
    settings.output = str(output)
    execute_run(settings, quiet=True)
    result = check_run(output)
    return (1 if result.violated else 0), result.message()


if __name__ == "__main__":
    sys.exit(main())
