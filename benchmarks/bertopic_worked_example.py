"""Worked example of docs/bertopic.md: audit a BERTopic model trained on half of PHEME and saved by BERTopic.

For each seed: a random half of PHEME (the members) trains a BERTopic model with BERTopic's light pipeline, as a
user without torch would (``BERTopic(embedding_model=make_pipeline(TfidfVectorizer(), TruncatedSVD(100)))``;
without umap-learn and hdbscan installed BERTopic itself falls back to ``PCA(n_components=5)`` and scikit-learn's
``HDBSCAN(min_cluster_size=10)``), saved with ``save(dir, serialization="safetensors", save_ctfidf=True)``.
The audit gets 400 candidates (200 members, 200 non-members, shuffled; the truth stays with this script) and every
other PHEME tweet as reference, as in docs/interop.md. ``topicaudit audit DIR`` runs on the directory, once as it
picks its shadows (``smoothing=1e-06``, the default) and once with ``--param smoothing=0`` (Φ scored exactly as
saved; docs/bertopic.md). Printed per audit: the AUC of the
command's ranking and of the online LiRA scores against the hidden truth, the exposure figure the audit reports
(no truth needed), the number of topics, and wall times.

Needs BERTopic importable (``pip install --no-deps bertopic==0.17.4 pandas safetensors``; not umap-learn, hdbscan,
sentence-transformers or torch).

    .venv/bin/python benchmarks/bertopic_worked_example.py --seeds 0 1 2 --shadows 64 --num-cpus 2
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

PHEME = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pheme" / "pheme_clean.json"


def train(docs: list[str], seed: int, out: Path) -> tuple[Path, int]:
    from bertopic import BERTopic
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    model = BERTopic(embedding_model=make_pipeline(TfidfVectorizer(), TruncatedSVD(100, random_state=seed)))
    model.fit(docs)
    model.save(out / "pheme-bertopic", serialization="safetensors", save_ctfidf=True, save_embedding_model=False)
    return out / "pheme-bertopic", len(model.topic_sizes_)


def audit(model: Path, d: Path, name: str, shadows: int, seed: int, num_cpus: int, extra: list[str]) -> dict:
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "audit", str(model), "--candidates", str(d / "candidates.json"), "--reference",
           str(d / "reference.json"), "--no-preprocess", "--shadows", str(shadows), "--seed", str(seed),
           "--output", str(d / name), "--quiet", *extra]
    if num_cpus:
        cmd += ["--num-cpus", str(num_cpus)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stderr}")
    with open(d / name / "scores.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"rows": rows, "wall": wall, "result": json.loads((d / name / "audit.json").read_text()),
            "stderr": proc.stderr}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--shadows", type=int, default=64)
    parser.add_argument("--num-cpus", type=int, default=0)
    args = parser.parse_args()

    texts = json.loads(PHEME.read_text())["text"]
    lines = []
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(texts))
        members, others = order[: len(order) // 2], order[len(order) // 2:]
        candidates = np.concatenate([members[:200], others[:200]])
        truth = np.repeat([True, False], 200)
        shuffle = rng.permutation(400)
        candidates, truth = candidates[shuffle], truth[shuffle]
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            t = time.perf_counter()
            model, n_topics = train([texts[i] for i in members], seed, d)
            train_s = time.perf_counter() - t
            (d / "candidates.json").write_text(json.dumps({"text": [texts[i] for i in candidates]}))
            reference = np.concatenate([members[200:], others[200:]])
            (d / "reference.json").write_text(json.dumps({"text": [texts[i] for i in np.sort(reference)]}))
            for label, extra in (("smoothing=1e-06 (default)", []), ("smoothing=0", ["--param", "smoothing=0"])):
                r = audit(model, d, label, args.shadows, seed, args.num_cpus, extra)
                is_member = truth[[int(row["candidate"]) for row in r["rows"]]]
                ranking = roc_auc_score(is_member, [-int(row["rank"]) for row in r["rows"]])
                online = roc_auc_score(is_member, [float(row["lira_online"]) for row in r["rows"]])
                shrunk = roc_auc_score(is_member, [float(row["lira_online_shrunk"]) for row in r["rows"]])
                exposure = r["result"]["exposure"]
                figure = (f"{exposure['auc']['mean']:.3f} ± {exposure['auc']['sd']:.3f}, "
                          f"{100 * exposure['tpr_at_fpr_0.001']['mean']:.1f}% @0.1%"
                          if exposure and exposure.get("auc") else "–")
                line = (f"| {seed} | {label} | {n_topics} | {r['result']['ranking']['rank_by']} | {ranking:.3f} | "
                        f"{online:.3f} | {shrunk:.3f} | {figure} | {r['wall']:.0f} | {train_s:.1f} |")
                print(line, file=sys.stderr, flush=True)
                if seed == args.seeds[0] and not extra:
                    print(r["stderr"], file=sys.stderr, flush=True)
                    print(f"  settings: {r['result']['learner']['params']}", file=sys.stderr, flush=True)
                lines.append(line)
    print(f"\n`{' '.join(sys.argv)}`\n")
    print("| seed | shadows scored | topics in the model | ranking | ranking AUC | online AUC | online shrunk AUC | "
          "exposure figure (AUC, TPR) | audit wall s | training s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
