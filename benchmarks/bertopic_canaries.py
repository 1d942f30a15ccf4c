"""Canary-only audits of the ``bertopic`` learner (``run --shadows 0 --canaries M``): ζ AUC, TPR, ε lower bound.

For each setting, canary kind and seed it writes a ``topicaudit run`` configuration (the corpus, learner
``bertopic`` with the setting's parameters, k, ``[attack] shadows = 0``, ``[attack.canaries] count``, ``kind``
and ``shadows`` (``--canary-shadows``, 0 by default), the seed), runs it in its own process and reads
results.json. The canary release trains on the whole corpus (minus the held-out documents for natural canaries)
plus each canary with probability ½ (docs/canaries.md). Printed: one JSON row per run, then mean ± sd over the seeds.

    .venv/bin/python benchmarks/bertopic_canaries.py --corpus ../shared/data/kos/docword.kos.txt \\
        --count 1000 --seeds 0 1 2 --kind unique-word --kind rare-words --kind natural \\
        --setting hdbscan:k=20 --setting kmeans:k=10

Settings are written as for benchmarks/bertopic_lira.py (``NAME:key=value,...``).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bertopic_lira import ROOT, _value, parse_setting, toml_value  # noqa: E402


def run_one(args, name: str, k: int, params: dict, kind: str, seed: int, where: Path) -> dict:
    label = name + "".join(f"-{key}{value}" for key, value in params.items() if key != "clustering")
    stem = f"{label}-k{k}-{kind}-cs{args.canary_shadows}-s{seed}"
    out, config = where / stem, where / f"{stem}.toml"
    lines = [f"seed = {seed}", "[corpus]", f"path = {json.dumps(str(Path(args.corpus).resolve()))}"]
    if args.format:
        lines.append(f"format = {json.dumps(args.format)}")
    if args.no_preprocess:
        lines.append("preprocess = false")
    for key, value in args.corpus_option:
        lines.append(f"options.{key} = {toml_value(_value(value))}")
    lines += ["[target]", 'learner = "bertopic"', f"k = {k}",
              "params = { " + ", ".join(f"{key} = {toml_value(v)}" for key, v in params.items()) + " }",
              "[attack]", "shadows = 0", "[attack.canaries]", f"count = {args.count}", f"kind = {json.dumps(kind)}",
              f"shadows = {args.canary_shadows}", "[ray]", "num_cpus = 1"]
    config.write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    done = subprocess.run([str(ROOT / ".venv/bin/topicaudit"), "run", str(config), "--output", str(out), "--quiet"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{config}: exit {done.returncode}\n{done.stderr[-3000:]}")
    canaries = json.loads((out / "results.json").read_text())["canaries"]
    phi = np.load(out / "models" / "canary-target.npz")["phi"]
    zeta = canaries["scores"]["zeta"]
    bounds = canaries["epsilon_lower_bounds"]
    others = {name: {"auc": v["auc"], "tpr_0.1%": v["tpr_at_fpr_0.001"], "tpr_1%": v["tpr_at_fpr_0.01"]}
              for name, v in canaries["scores"].items() if name != "zeta"}
    by_test = {name: t["epsilon"] for name, t in bounds.get("by_test", {}).items()}
    return {"corpus": Path(args.corpus).name, "setting": name, "k": k, "params": params, "kind": kind, "seed": seed,
            "count": canaries["count"], "members": canaries["members"], "length": canaries["length"],
            "fixed_training_documents": canaries["fixed_training_documents"],
            "topics": int(np.unique(np.round(phi, 7), axis=0).shape[0]),
            "auc": zeta["auc"], "tpr_0.1%": zeta["tpr_at_fpr_0.001"], "tpr_1%": zeta["tpr_at_fpr_0.01"],
            "epsilon": bounds["epsilon"], "ceiling": bounds["ceiling"], "confidence": bounds["confidence"],
            "delta": bounds["delta"], "canary_shadows": args.canary_shadows, "other_scores": others,
            "epsilon_by_test": by_test, "wall_s": round(wall, 1)}


def mean_sd(values: list[float], digits: int = 3) -> str:
    s = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {s:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--format")
    parser.add_argument("--corpus-option", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"))
    parser.add_argument("--no-preprocess", action="store_true")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--canary-shadows", type=int, default=0,
                        help="shadow canary releases for LiRA on the canaries ([attack.canaries] shadows; even)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kind", action="append", default=[], help="canary kind (repeatable)")
    parser.add_argument("--setting", action="append", default=[], help="NAME:key=value,... (repeatable)")
    parser.add_argument("--keep", help="keep the run directories and configurations under this folder")
    parser.add_argument("--json", help="append every row as a JSON line to this file")
    args = parser.parse_args()
    settings = [parse_setting(s) for s in (args.setting or ["hdbscan:k=20"])]
    kinds = args.kind or ["unique-word"]
    holder = None if args.keep else tempfile.TemporaryDirectory()
    where = Path(args.keep or holder.name)
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, k, params in settings:
        for kind in kinds:
            for seed in args.seeds:
                row = run_one(args, name, k, params, kind, seed, where)
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    with open(args.json, "a") as handle:
                        handle.write(json.dumps(row) + "\n")
    print()
    print("| setting | k | canaries | topics in release | ζ AUC | TPR@0.1% | TPR@1% | lira_online AUC | ε ≥ "
          "| ceiling | seeds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, k, params in settings:
        shown = ", ".join(f"{key}={value}" for key, value in params.items())
        for kind in kinds:
            mine = [r for r in rows if r["setting"] == name and r["k"] == k and r["params"] == params
                    and r["kind"] == kind]
            topics = ", ".join(str(r["topics"]) for r in mine)
            online = ([r["other_scores"]["lira_online"]["auc"] for r in mine] if args.canary_shadows else [])
            print(f"| {shown} | {k} | {kind} | {topics} | {mean_sd([r['auc'] for r in mine])} | "
                  f"{mean_sd([100 * r['tpr_0.1%'] for r in mine], 1)} % | "
                  f"{mean_sd([100 * r['tpr_1%'] for r in mine], 1)} % | {mean_sd(online) if online else '–'} | "
                  f"{mean_sd([r['epsilon'] for r in mine], 2)} | {mine[0]['ceiling']:.2f} | "
                  f"{' '.join(str(r['seed']) for r in mine)} |")
    if holder is not None:
        holder.cleanup()


if __name__ == "__main__":
    sys.exit(main())
