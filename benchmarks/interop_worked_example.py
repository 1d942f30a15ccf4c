"""Worked example of docs/interop.md: audit a gensim or tomotopy model trained on half of PHEME.

For each library and seed: a random half of PHEME (the members) trains a model
the way a user would, and it is saved as the library saves it. The audit gets
400 candidates (200 members, 200 non-members, shuffled; the truth stays with
this script) and, as reference, every other PHEME tweet (members that are not
candidates included: the owner of a model has its training set), so each
shadow trains on as many tweets as the model, as the README advises; with
``--reference non-members`` only the other non-members (shadows on about half
as many tweets as the model). Documents are token lists (the tokens the model
was trained on). ``topicaudit audit`` runs twice on the saved
model: with the shadows it picks from the model (same library, same settings)
and with ``--learner lda`` (the default for a bare Φ). Printed: the ranking
AUC (offline LiRA, the command's order) and the online AUC from the hidden
truth, and each audit's wall time.

    .venv/bin/python benchmarks/interop_worked_example.py --seeds 0 1 2 --shadows 64 --num-cpus 2
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


def train_gensim(docs: list[list[str]], seed: int, out: Path) -> Path:
    from gensim.corpora import Dictionary
    from gensim.models import LdaModel

    dictionary = Dictionary(docs)
    lda = LdaModel([dictionary.doc2bow(d) for d in docs], id2word=dictionary, num_topics=5, passes=5,
                   chunksize=500, alpha="auto", random_state=seed)
    lda.save(str(out / "pheme.gensim"))
    return out / "pheme.gensim"


def train_tomotopy(docs: list[list[str]], seed: int, out: Path) -> Path:
    import tomotopy as tp

    lda = tp.LDAModel(k=5, alpha=0.1, eta=0.01, min_cf=2, seed=seed)
    for doc in docs:
        lda.add_doc(doc)
    lda.train(500, workers=1)
    lda.save(str(out / "pheme.tomotopy"))
    return out / "pheme.tomotopy"


def audit(model: Path, d: Path, name: str, shadows: int, seed: int, num_cpus: int, extra: list[str]) -> dict:
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "audit", str(model), "--candidates", str(d / "candidates.json"), "--reference",
           str(d / "reference.json"), "--shadows", str(shadows), "--seed", str(seed), "--output", str(d / name),
           "--quiet", *extra]
    if num_cpus:
        cmd += ["--num-cpus", str(num_cpus)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"audit failed ({proc.returncode}):\n{proc.stderr}")
    with open(d / name / "scores.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    result = json.loads((d / name / "audit.json").read_text())
    return {"rows": rows, "wall": wall, "learner": result["learner"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libraries", nargs="+", default=["gensim", "tomotopy"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--shadows", type=int, default=64)
    parser.add_argument("--num-cpus", type=int, default=0)
    parser.add_argument("--reference", choices=["all", "non-members"], default="all")
    args = parser.parse_args()

    texts = json.loads(PHEME.read_text())["text"]
    tokens = [t.split() for t in texts]
    trainers = {"gensim": train_gensim, "tomotopy": train_tomotopy}
    lines = []
    for library in args.libraries:
        for seed in args.seeds:
            rng = np.random.default_rng(seed)
            order = rng.permutation(len(tokens))
            members, others = order[: len(order) // 2], order[len(order) // 2:]
            candidates = np.concatenate([members[:200], others[:200]])
            truth = np.repeat([True, False], 200)
            shuffle = rng.permutation(400)
            candidates, truth = candidates[shuffle], truth[shuffle]
            with tempfile.TemporaryDirectory() as tmp:
                d = Path(tmp)
                t = time.perf_counter()
                model = trainers[library]([tokens[i] for i in members if tokens[i]], seed, d)
                train_s = time.perf_counter() - t
                (d / "candidates.json").write_text(json.dumps({"text": [tokens[i] for i in candidates]}))
                reference = np.concatenate([members[200:], others[200:]]) if args.reference == "all" else others[200:]
                (d / "reference.json").write_text(json.dumps({"text": [tokens[i] for i in np.sort(reference)]}))
                trust = ["--trust-pickle"] if library == "gensim" else []
                for label, extra in (("matched", trust), ("lda", trust + ["--learner", "lda"])):
                    r = audit(model, d, label, args.shadows, seed, args.num_cpus, extra)
                    is_member = truth[[int(row["candidate"]) for row in r["rows"]]]
                    ranking = roc_auc_score(is_member, [-int(row["rank"]) for row in r["rows"]])
                    online = roc_auc_score(is_member, [float(row["lira_online"]) for row in r["rows"]])
                    line = (f"| {library} | {seed} | {r['learner']['name']} | {ranking:.3f} | {online:.3f} | "
                            f"{r['wall']:.0f} | {train_s:.1f} |")
                    print(line, file=sys.stderr, flush=True)
                    if label == "matched":
                        print(f"  {library} settings: {r['learner']['params']}", file=sys.stderr, flush=True)
                    lines.append(line)
    print(f"\n`{' '.join(sys.argv)}`\n")
    print("| library | seed | shadow learner | ranking (offline) AUC | online AUC | audit wall s | training s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
