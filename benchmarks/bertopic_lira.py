"""The natural-document LiRA against BERTopic models (the ``bertopic`` learner), over seeds: a table of AUC and TPR.

For each setting and seed it writes a ``topicaudit run`` configuration (the corpus, learner ``bertopic`` with the
setting's parameters, k, the number of shadow models, the seed), runs it in its own process, and reads
results.json. The target is trained on a seeded random half of the corpus, each shadow on another random half
(every document in half of them), all over the target's vocabulary (``run``'s default for a learner without a DP
claim: the observed words). Printed: each attack's AUC and TPR at 0.1% and 1% FPR per seed, then mean ± sd, and
the number of distinct topics in the target's Φ.

    .venv/bin/python benchmarks/bertopic_lira.py --corpus ../shared/data/pheme/pheme_clean.json --no-preprocess \\
        --shadows 64 --seeds 0 1 2 --setting hdbscan:k=20 --setting kmeans:k=5 --keep runs/bertopic-lira

A setting is ``NAME:key=value,key=value``: ``k`` is the target's k, the other keys are the learner's parameters
(``clustering``, ``min_topic_size``, …; docs/bertopic.md); NAME ``hdbscan``/``kmeans`` sets ``clustering``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ATTACKS = ("lira_online", "lira_online_shrunk", "lira_online_global", "lira_offline", "lira_offline_shrunk",
           "rmia_online")
ROOT = Path(__file__).resolve().parent.parent


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def parse_setting(text: str) -> tuple[str, int, dict]:
    name, _, rest = text.partition(":")
    params = {key: _value(value) for key, value in (item.split("=", 1) for item in rest.split(",") if item)}
    k = int(params.pop("k", 5))
    if name in ("hdbscan", "kmeans"):
        params.setdefault("clustering", name)
    return name, k, params


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def run_one(args, name: str, k: int, params: dict, seed: int, where: Path) -> dict:
    label = name + "".join(f"-{key}{value}" for key, value in params.items() if key != "clustering")
    out = where / f"{label}-k{k}-s{seed}"
    config = where / f"{label}-k{k}-s{seed}.toml"
    lines = [f"seed = {seed}", "[corpus]", f"path = {json.dumps(str(Path(args.corpus).resolve()))}"]
    if args.format:
        lines.append(f"format = {json.dumps(args.format)}")
    if args.no_preprocess:
        lines.append("preprocess = false")
    for key, value in args.corpus_option:
        lines.append(f"options.{key} = {toml_value(_value(value))}")
    lines += ["[target]", 'learner = "bertopic"', f"k = {k}",
              "params = { " + ", ".join(f"{key} = {toml_value(v)}" for key, v in params.items()) + " }",
              "[attack]", f"shadows = {args.shadows}", "[ray]", f"num_cpus = {args.num_cpus}"]
    config.write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    done = subprocess.run([str(ROOT / ".venv/bin/topicaudit"), "run", str(config), "--output", str(out), "--quiet"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{config}: exit {done.returncode}\n{done.stderr[-3000:]}")
    results = json.loads((out / "results.json").read_text())
    target = np.load(out / "models" / "target.npz")
    topics = int(np.unique(np.round(target["phi"], 7), axis=0).shape[0])
    row = {"setting": name, "k": k, "params": params, "seed": seed, "shadows": args.shadows,
           "corpus": Path(args.corpus).name, "wall_s": round(wall, 1), "topics": topics,
           "n_docs": results["corpus"]["n_docs"] if "n_docs" in results["corpus"] else None}
    for attack in ATTACKS:
        a = results["attacks"].get(attack)
        if a:
            row[attack] = {"auc": a["auc"], "tpr_0.1%": a["tpr_at_fpr_0.001"], "tpr_1%": a["tpr_at_fpr_0.01"]}
    return row


def mean_sd(values: list[float], percent: bool) -> str:
    scale = 100 if percent else 1
    m = statistics.mean(values) * scale
    s = statistics.stdev(values) * scale if len(values) > 1 else 0.0
    return f"{m:.1f} ± {s:.1f} %" if percent else f"{m:.3f} ± {s:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--format")
    parser.add_argument("--corpus-option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    parser.add_argument("--no-preprocess", action="store_true")
    parser.add_argument("--shadows", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--setting", action="append", default=[], help="NAME:key=value,... (repeatable)")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--keep", help="keep the run directories and configurations under this folder")
    parser.add_argument("--json", help="append every row as a JSON line to this file")
    args = parser.parse_args()
    settings = [parse_setting(s) for s in (args.setting or ["hdbscan:k=20"])]
    holder = None if args.keep else tempfile.TemporaryDirectory()
    where = Path(args.keep or holder.name)
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, k, params in settings:
        for seed in args.seeds:
            row = run_one(args, name, k, params, seed, where)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a") as handle:
                    handle.write(json.dumps(row) + "\n")
    print()
    print("| setting | k | topics in target Φ | attack | AUC | TPR@0.1% FPR | TPR@1% FPR | seeds |")
    print("|---|---|---|---|---|---|---|---|")
    for name, k, params in settings:
        mine = [r for r in rows if r["setting"] == name and r["k"] == k and r["params"] == params]
        shown = ", ".join(f"{key}={value}" for key, value in params.items())
        topics = "–".join(str(t) for t in sorted({min(r["topics"] for r in mine), max(r["topics"] for r in mine)}))
        for attack in ATTACKS:
            got = [r[attack] for r in mine if attack in r]
            if not got:
                continue
            print(f"| {shown} | {k} | {topics} | {attack} | {mean_sd([g['auc'] for g in got], False)} | "
                  f"{mean_sd([g['tpr_0.1%'] for g in got], True)} | {mean_sd([g['tpr_1%'] for g in got], True)} | "
                  f"{' '.join(str(r['seed']) for r in mine)} |")
    if holder is not None:
        holder.cleanup()


if __name__ == "__main__":
    sys.exit(main())
