"""What a plug-in's code digest costs one command: a canary-only `topicaudit run` of a plug-in learner whose folder
holds a large tree of modules beside it (a namespace folder of --beside small .py files), timed for each
executable given, alternated, so two builds compare side by side on one machine at one load.

  .venv/bin/python benchmarks/plugin_digest.py --topicaudit .venv/bin/topicaudit /path/to/old/.venv/bin/topicaudit \\
      --beside 12000 --repeat 3 --out /tmp/plugin-digest --record benchmarks/results/plugin_digest.jsonl

--link DIR links DIR (a site-packages, say) beside the plug-in instead of the generated tree. One JSON line per command: the executable, the tree's size, seconds, exit code, the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
from pathlib import Path

from harness import record, timed_command

PLUGIN = ("from topicaudit.targets.learners.lda import VariationalLDA\n\n\n"
          "class Beside(VariationalLDA):\n    \"\"\"The built-in learner, kept in a folder with a large tree.\"\"\"\n")
CONFIG = ("seed = 0\n[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n"
          "[target]\nlearner = \"digestplug:Beside\"\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topicaudit", nargs="+", type=Path, required=True, help="the executables to compare")
    parser.add_argument("--beside", type=int, default=12_000, help="modules in the tree beside the plug-in")
    parser.add_argument("--link", type=Path, help="a folder linked beside the plug-in instead (a site-packages)")
    parser.add_argument("--warm", action="store_true", help="one untimed run per executable first (numba's cache)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    plug = args.out / "plug"
    (plug / "tree").mkdir(parents=True)
    (plug / "digestplug.py").write_text(PLUGIN)
    if args.link:
        (plug / "tree").rmdir()
        (plug / "tree").symlink_to(args.link.resolve(), target_is_directory=True)
    else:
        for i in range(args.beside):
            (plug / "tree" / f"m{i:05d}.py").write_text(f"VALUE = {i}\n")
    (args.out / "c.toml").write_text(CONFIG)
    env = {**os.environ, "PYTHONPATH": str(plug), "TOPICAUDIT_INTEGRITY_KEY": "off"}
    lines = []
    for index, exe in enumerate(args.topicaudit if args.warm else []):
        subprocess.run([str(exe), "run", str(args.out / "c.toml"), "--output", str(args.out / f"warm-{index}"),
                        "--quiet"], env=env, capture_output=True)
    for round_ in range(args.repeat):
        for index, exe in enumerate(args.topicaudit):
            run_dir = args.out / f"run-{round_}-{index}"
            line, done = timed_command([str(exe), "run", str(args.out / "c.toml"), "--output", str(run_dir),
                                        "--quiet"], env, topicaudit=str(exe),
                                       beside=str(args.link) if args.link else args.beside)
            if done.returncode != 0:
                print(done.stderr[-400:], flush=True)
            lines.append(line)
    record(args.record, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
