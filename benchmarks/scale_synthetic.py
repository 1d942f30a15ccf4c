"""End-to-end audits of large synthetic corpora: wall time and peak memory against the number of documents.

The corpus is drawn from the LDA model of audit/inputs/synthetic.py (sparse topics
over a long-tailed vocabulary, Poisson lengths), sampled token by token with
vectorised inverse-CDF draws (audit/inputs/synthetic.py draws a dense multinomial
per document, minutes at 200,000 documents), and written as a UCI docword
file outside the repository. ``topicaudit run`` then audits it in a fresh
process while the memory of the process tree is sampled (as
benchmarks/audit_end_to_end.py: summed PSS of every process, the driver's
own RSS apart).

    .venv/bin/python benchmarks/scale_synthetic.py --docs 20000 50000 100000 200000 --shadows 8
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_end_to_end import measured_run  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def sample_corpus(n_docs: int, n_words: int, k: int, mean_length: float, topic_concentration: float,
                  doc_concentration: float, seed: int, chunk: int = 2_000_000):
    """(doc, word, count) triples of an LDA corpus, drawn token by token in chunks."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_words, topic_concentration), size=k)
    word_cdf = np.cumsum(topics, axis=1)
    word_cdf[:, -1] = 1.0
    mixtures = rng.dirichlet(np.full(k, doc_concentration), size=n_docs)
    topic_cdf = np.cumsum(mixtures, axis=1)
    topic_cdf[:, -1] = 1.0
    lengths = np.maximum(rng.poisson(mean_length, size=n_docs), 3)
    doc_of_token = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    keys = []
    for start in range(0, doc_of_token.size, chunk):
        docs = doc_of_token[start:start + chunk]
        u = rng.random(docs.size)
        topic = (u[:, None] > topic_cdf[docs]).sum(axis=1)
        word = np.empty(docs.size, dtype=np.int64)
        v = rng.random(docs.size)
        for t in range(k):
            at = topic == t
            word[at] = np.searchsorted(word_cdf[t], v[at], side="right")
        keys.append(docs * n_words + np.minimum(word, n_words - 1))
    unique, counts = np.unique(np.concatenate(keys), return_counts=True)
    return unique // n_words, unique % n_words, counts


def write_uci(directory: Path, name: str, n_docs: int, n_words: int, triples) -> Path:
    docs, words, counts = triples
    docword = directory / f"docword.{name}.txt"
    with open(docword, "w") as f:
        f.write(f"{n_docs}\n{n_words}\n{docs.size}\n")
        body = np.column_stack([docs + 1, words + 1, counts])
        np.savetxt(f, body, fmt="%d")
    (directory / f"vocab.{name}.txt").write_text("\n".join(f"w{i:05d}" for i in range(n_words)) + "\n")
    return docword


def audit(docword: Path, k: int, shadows: int, out: Path) -> dict:
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "run", "--corpus", str(docword), "--k", str(k), "--shadows", str(shadows),
           "--seed", "0", "--output", str(out), "--quiet"]
    load_before = os.getloadavg()
    peak = measured_run(cmd, cwd=REPO, interval=0.2)
    wall = peak["wall_s"]
    results = json.loads((out / "results.json").read_text())
    return {"wall_s": round(wall, 1), "peak_pss_gb": round(peak["pss"] / 2**30, 2),
            "peak_rss_gb": round(peak["rss"] / 2**30, 2), "driver_peak_rss_gb": round(peak["driver_rss"] / 2**30, 2),
            "load_before": [round(x, 1) for x in load_before], "load_after": [round(x, 1) for x in os.getloadavg()],
            "timings_s": results["timings_s"], "n_tokens": results["corpus"]["n_tokens"],
            "lira_online_shrunk": results["attacks"].get("lira_online_shrunk"),
            "lira_offline_shrunk": results["attacks"].get("lira_offline_shrunk")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", nargs="+", type=int, default=[20000, 50000, 100000, 200000])
    parser.add_argument("--words", type=int, default=20000)
    parser.add_argument("--mean-length", type=float, default=120.0)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--shadows", type=int, default=8)
    parser.add_argument("--workdir", help="where corpora and runs go (default: a temporary directory)")
    parser.add_argument("--json", help="append one JSON line per size here")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="topicaudit-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| documents | tokens | wall s | fit wall s | statistics s | peak PSS GB | peak RSS GB | driver RSS GB | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.docs:
        t = time.perf_counter()
        triples = sample_corpus(n, args.words, args.k, args.mean_length, 0.05, 0.3, seed=n)
        docword = write_uci(work, f"synth{n}", n, args.words, triples)
        del triples
        generate = time.perf_counter() - t
        row = audit(docword, args.k, args.shadows, work / f"run-{n}")
        row.update({"docs": n, "generate_s": round(generate, 1)})
        t = row["timings_s"]
        print(f"| {n} | {row['n_tokens']} | {row['wall_s']} | {t['fit_wall']} | {t['statistics']} | "
              f"{row['peak_pss_gb']} | {row['peak_rss_gb']} | {row['driver_peak_rss_gb']} | "
              f"{row['load_before'][0]}–{row['load_after'][0]} |", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        docword.unlink()


if __name__ == "__main__":
    main()
