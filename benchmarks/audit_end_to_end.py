"""End-to-end audit in a fresh process, timed, with the peak memory of the whole process tree.

Runs ``topicaudit run`` as a subprocess (Ray start-up included) once per seed,
samples the resident memory of it and every descendant (Ray's GCS, raylet and
workers) every 0.1 s, and prints a Markdown table of wall time, peak memory
and the attack metrics, with their mean over seeds.

    .venv/bin/python benchmarks/audit_end_to_end.py --corpus ../shared/data/pheme/pheme_clean.json \
        --no-preprocess --k 5 --shadows 128 --seeds 0 1 2 3 4
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ATTACKS = ("lira_online", "lira_online_global", "lira_offline", "lira_offline_global",
           "threshold_max_theta", "threshold_std_theta", "threshold_entropy_theta")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _memory(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(root: int) -> tuple[int, int]:
    """(Σ RSS, Σ PSS) over root and all its descendants, in bytes."""
    tree, stack, rss, pss = _children(), [root], 0, 0
    while stack:
        pid = stack.pop()
        rss += _memory(pid, "Rss")
        pss += _memory(pid, "Pss")
        stack.extend(tree.get(pid, []))
    return rss, pss


def measured_run(cmd: list[str], cwd=None, interval: float = 0.1) -> dict:
    """Run a command, sampling the memory of its process tree; wall seconds and peak bytes.

    Keys: wall_s, rss (Σ RSS peak), pss (Σ PSS peak), driver_rss (the command's own RSS peak).
    Exits with the command's stderr when it fails.
    """
    peak = {"rss": 0, "pss": 0, "driver_rss": 0}
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def sample():
        while proc.poll() is None:
            rss, pss = tree_memory(proc.pid)
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
            peak["driver_rss"] = max(peak["driver_rss"], _memory(proc.pid, "Rss"))
            time.sleep(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"run failed ({proc.returncode}):\n{err}")
    return {"wall_s": wall, **peak}


def run_once(args, seed: int, out_dir: Path) -> dict:
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "run", "--corpus", args.corpus, "--k", str(args.k), "--shadows", str(args.shadows),
           "--seed", str(seed), "--output", str(out_dir), "--quiet", "--learner", args.learner]
    if args.no_preprocess:
        cmd.append("--no-preprocess")
    if args.format:
        cmd += ["--format", args.format]
    if args.num_cpus:
        cmd += ["--num-cpus", str(args.num_cpus)]
    measured = measured_run(cmd)
    results = json.loads((out_dir / "results.json").read_text())
    return {"seed": seed, "wall_s": measured["wall_s"], "peak_rss_gb": measured["rss"] / 2**30,
            "peak_pss_gb": measured["pss"] / 2**30,
            "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--format")
    parser.add_argument("--no-preprocess", action="store_true")
    parser.add_argument("--learner", default="lda")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--shadows", type=int, default=128)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--num-cpus", type=int, default=0, help="size of the local Ray instance (default: all cores)")
    parser.add_argument("--keep", help="keep run directories under this folder")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        for seed in args.seeds:
            row = run_once(args, seed, base / f"seed{seed}")
            rows.append(row)
            a = row["results"]["attacks"]
            print(f"seed {seed}: {row['wall_s']:.1f} s, peak RSS {row['peak_rss_gb']:.2f} GB, "
                  f"online TPR@0.1% {a['lira_online']['tpr_at_fpr_0.001']:.2%} AUC {a['lira_online']['auc']:.3f}, "
                  f"offline AUC {a['lira_offline']['auc']:.3f}", file=sys.stderr, flush=True)

    r0 = rows[0]["results"]
    print(f"\n`{' '.join(sys.argv)}`\n")
    print(f"{r0['corpus']['source']}: {r0['corpus']['n_docs']} docs; learner {r0['target']['learner']}, "
          f"k={r0['target']['k']}, {r0['shadows']['n_shadows']} shadows\n")
    head = "| seed | wall s | peak RSS GB | peak PSS GB | vocab | " + " | ".join(
        f"{a} AUC / TPR@0.1% / TPR@1%" for a in ATTACKS[:4]) + " |"
    print(head)
    print("|" + "---|" * (5 + 4))
    for row in rows:
        a = row["results"]["attacks"]
        cells = [f"{a[n]['auc']:.3f} / {a[n]['tpr_at_fpr_0.001']:.2%} / {a[n]['tpr_at_fpr_0.01']:.2%}"
                 for n in ATTACKS[:4]]
        print(f"| {row['seed']} | {row['wall_s']:.1f} | {row['peak_rss_gb']:.2f} | {row['peak_pss_gb']:.2f} | "
              f"{row['results']['target']['vocabulary_size']} | " + " | ".join(cells) + " |")
    n = len(rows)
    mean = lambda f: sum(f(r) for r in rows) / n  # noqa: E731
    cells = [f"{mean(lambda r: r['results']['attacks'][a]['auc']):.3f} / "
             f"{mean(lambda r: r['results']['attacks'][a]['tpr_at_fpr_0.001']):.2%} / "
             f"{mean(lambda r: r['results']['attacks'][a]['tpr_at_fpr_0.01']):.2%}" for a in ATTACKS[:4]]
    print(f"| mean | {mean(lambda r: r['wall_s']):.1f} | {max(r['peak_rss_gb'] for r in rows):.2f} (max) | "
          f"{max(r['peak_pss_gb'] for r in rows):.2f} (max) | | " + " | ".join(cells) + " |")
    print("\nThreshold baselines (mean AUC / TPR@0.1%): " + ", ".join(
        f"{a} {mean(lambda r: r['results']['attacks'][a]['auc']):.3f} / "
        f"{mean(lambda r: r['results']['attacks'][a]['tpr_at_fpr_0.001']):.2%}" for a in ATTACKS[4:]))


if __name__ == "__main__":
    main()
