"""Attacks with few reference (shadow) models: N ∈ {1, 2, 4, 8, 16, 128} from one 128-shadow run per seed.

Shadow i of a run has the same training documents and fitting seed whatever
N is (topicaudit.engine.execution.plan), so the attacks with N shadows are exactly those of a run
with ``--shadows N``: the first N shadows (N/2 complementary pairs; for N = 1
the first shadow alone). One 128-shadow run per (corpus, seed) therefore
gives the whole row of N, from its statistics.npz and plan.npz.

    .venv/bin/python benchmarks/few_models.py run --corpus pheme --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/few_models.py table --corpus pheme kos 20news --seeds 0 1 2 3 4

``run`` starts each missing run (``topicaudit run``, a fresh process) and
records its wall time and the load average beside it; ``table`` prints the
Markdown table of mean ± sd over seeds and writes the numbers as JSON
(``--cache DIR`` keeps each run's numbers so that adding a seed rescores only
that run). ``quantile_regression`` needs the documents' word counts, so
``table`` reloads each run's corpus (its config.toml) from ../shared/data.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from topicaudit.attacks.features import document_features  # noqa: E402
from topicaudit.attacks.lira import offline_scores, online_scores  # noqa: E402
from topicaudit.attacks.metrics import summarize  # noqa: E402
from topicaudit.attacks.quantile import quantile_scores  # noqa: E402
from topicaudit.attacks.rmia import rmia_scores  # noqa: E402
from topicaudit.attacks.variance import shrunk_offline_scores, shrunk_online_scores  # noqa: E402

CORPORA = {
    "pheme": (["--corpus", "../shared/data/pheme/pheme_clean.json", "--no-preprocess"], 5),
    "kos": (["--corpus", "../shared/data/kos/docword.kos.txt"], 10),
    "20news": (["--corpus", "../shared/data/20news/20news-bydate-reassembled.tar.gz"], 20),
}
SHADOW_COUNTS = (1, 2, 4, 8, 16, 128)
ATTACKS = ("lira_online", "lira_online_global", "lira_offline", "lira_offline_global",
           "lira_online_shrunk", "lira_offline_shrunk", "lira_online_shrunk_pooled", "lira_offline_shrunk_pooled",
           "rmia_online", "rmia_offline", "quantile_regression")
METRICS = (("auc", "AUC", 1), ("tpr_at_fpr_0.001", "TPR@0.1%", 100), ("tpr_at_fpr_0.01", "TPR@1%", 100))


def run_dir(root: Path, corpus: str, seed: int) -> Path:
    return root / f"{corpus}-s{seed}"


def ensure_run(root: Path, corpus: str, seed: int, shadows: int) -> None:
    out = run_dir(root, corpus, seed)
    if (out / "results.json").exists():
        return
    flags, k = CORPORA[corpus]
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "run", *flags, "--k", str(k), "--shadows", str(shadows), "--seed", str(seed),
           "--output", str(out), "--quiet"]
    load = os.getloadavg()
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    (out / "few_models_run.json").write_text(json.dumps(
        {"command": cmd, "wall_s": round(wall, 1), "load_before": load, "load_after": os.getloadavg()}) + "\n")
    print(f"{corpus} seed {seed}: {wall:.1f} s (load {load[0]:.1f} → {os.getloadavg()[0]:.1f})", file=sys.stderr)


def document_counts(path: Path):
    """Word counts of each document over the target's vocabulary (CSR), recounted from the run's corpus."""
    from topicaudit.inputs.corpus import keep_most_frequent_words, load_corpus

    c = tomllib.loads((path / "config.toml").read_text())["corpus"]
    corpus = load_corpus(c["path"], format=c.get("format"), preprocess=c.get("preprocess"),
                         text_field=c.get("text_field", "text"), **c.get("options", {}))
    if c.get("max_words"):
        corpus = keep_most_frequent_words(corpus, c["max_words"])
    with np.load(path / "models" / "target.npz") as z:
        vocabulary = z["vocabulary"]
    return corpus.X[:, vocabulary].tocsr()


def scores_with(n: int, observed, shadow, shadow_in, n_tokens, counts) -> dict[str, np.ndarray]:
    """Every attack from the first n shadows (LiRA needs a shadow on both sides: n ≥ 2)."""
    s, i = shadow[:n], shadow_in[:n]
    features = document_features(counts)
    scores = {}
    if n >= 2:
        scores["lira_online"] = online_scores(observed, s, i)
        scores["lira_online_global"] = online_scores(observed, s, i, global_variance=True)
        scores["lira_offline"] = offline_scores(observed, s, i)
        scores["lira_offline_global"] = offline_scores(observed, s, i, global_variance=True)
        scores["lira_online_shrunk"] = shrunk_online_scores(observed, s, i, features)
        scores["lira_offline_shrunk"] = shrunk_offline_scores(observed, s, i, features)
        # the shrunk attacks as they were before the feature-regressed prior: always the pooled prior
        scores["lira_online_shrunk_pooled"] = shrunk_online_scores(observed, s, i)
        scores["lira_offline_shrunk_pooled"] = shrunk_offline_scores(observed, s, i)
    scores["rmia_online"] = rmia_scores(observed, s, i, n_tokens, online=True)[0]
    scores["rmia_offline"], a = rmia_scores(observed, s, i, n_tokens, online=False)
    scores["quantile_regression"] = quantile_scores(observed, s, i, counts)
    return scores, a


def run_arrays(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ζ under the target, ζ under each shadow, the shadows' membership and the target's, of one finished run."""
    with np.load(path / "statistics.npz") as z:
        observed, shadow = z["target_zeta"], z["shadow_zeta"]
    with np.load(path / "plan.npz") as z:
        shadow_in = z["shadow_in"]
    with np.load(path / "scores.npz") as z:
        member = z["is_member"]
    return observed, shadow, shadow_in, member


def evaluate(path: Path, counts=SHADOW_COUNTS) -> dict:
    """{N: {attack: metrics}, "a": {N: a}} of one finished 128-shadow run."""
    observed, shadow, shadow_in, member = run_arrays(path)
    word_counts = document_counts(path)
    n_tokens = np.asarray(word_counts.sum(axis=1), dtype=np.float64).ravel()
    out = {"a": {}}
    for n in counts:
        if n > shadow.shape[0]:
            continue
        scores, a = scores_with(n, observed, shadow, shadow_in, n_tokens, word_counts)
        out[n] = {name: summarize(score, member) for name, score in scores.items()}
        out["a"][n] = a
    return out


def cached_evaluate(path: Path, cache: str | None) -> dict:
    """evaluate(path), read from (or written to) cache/<run name>.json when a cache directory is given."""
    if not cache:
        return evaluate(path)
    stored = Path(cache) / f"{path.name}.json"
    if stored.exists():
        raw = json.loads(stored.read_text())
        return {(int(k) if k.isdigit() else k): v for k, v in raw.items()}
    result = evaluate(path)
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(result, default=str) + "\n")
    return result


def table(results: dict[str, list[dict]], counts=SHADOW_COUNTS) -> str:
    lines = ["| corpus | N | attack | AUC | TPR@0.1% | TPR@1% |", "|---|---|---|---|---|---|"]
    for corpus, runs in results.items():
        for n in counts:
            rows = [r[n] for r in runs if n in r]
            if not rows:
                continue
            for attack in ATTACKS:
                if attack not in rows[0]:
                    continue
                cells = []
                for metric, _, scale in METRICS:
                    xs = np.array([r[attack][metric] for r in rows]) * scale
                    digits = 3 if scale == 1 else 2
                    cells.append(f"{xs.mean():.{digits}f} ± {xs.std(ddof=1) if xs.size > 1 else 0:.{digits}f}")
                lines.append(f"| {corpus} ({len(rows)} seeds) | {n} | {attack} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["run", "table"])
    parser.add_argument("--corpus", nargs="+", choices=list(CORPORA), default=["pheme"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--root", default="runs/few-models", help="where the 128-shadow runs live")
    parser.add_argument("--shadows", type=int, default=128)
    parser.add_argument("--json", help="write the per-run numbers here")
    parser.add_argument("--cache", help="keep each run's numbers in DIR/<corpus>-s<seed>.json and reuse them")
    args = parser.parse_args()
    root = Path(args.root)
    if args.action == "run":
        for corpus in args.corpus:
            for seed in args.seeds:
                ensure_run(root, corpus, seed, args.shadows)
        return
    results = {}
    for corpus in args.corpus:
        runs = [run_dir(root, corpus, s) for s in args.seeds]
        results[corpus] = [cached_evaluate(r, args.cache) for r in runs if (r / "results.json").exists()]
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
