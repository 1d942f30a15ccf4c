"""Time topicaudit.targets.learners.vb_lda.fit_lda_vb against scikit-learn's LatentDirichletAllocation.

Usage (from the repository root):

    .venv/bin/python benchmarks/lda_fit.py [--reps 5] [--sklearn-reps 3]
                                            [--kos-sklearn-reps 1] [--only pheme,kos]

Corpora (read in place from ../shared/data beside the repository root):
  * PHEME clean, a random half of the tweets (RandomState(0)), CountVectorizer()
    defaults, k=5;
  * KOS, all 3,430 documents, k=10.

Both learners use sklearn's defaults (batch, max_iter=10, priors 1/k,
mean_change_tol=1e-3, max_doc_update_iter=100) and the same seeds. Numba
compile time is measured in two fresh child processes sharing an empty
NUMBA_CACHE_DIR: the first compiles, the second loads the cache. This process
uses that same cache, so its timings are steady state; "per fit" is the median
over seeds 0, 1, ... Max |ΔΦ| is over row-normalised components_, for every
seed sklearn was run on.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"

if __name__ == "__main__" and "--child-compile" not in sys.argv:
    # our own cache dir, set before numba is imported anywhere
    _CACHE = tempfile.mkdtemp(prefix="vb_lda_numba_cache_")
    os.environ["NUMBA_CACHE_DIR"] = _CACHE

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from harness import cold_and_warm, invocation, kos_counts, parse_or_compile, pheme_texts  # noqa: E402


def load_pheme_half(seed: int = 0) -> sp.csr_matrix:
    from sklearn.feature_extraction.text import CountVectorizer

    texts = pheme_texts()
    idx = np.random.RandomState(seed).choice(len(texts), len(texts) // 2, replace=False)
    return sp.csr_matrix(CountVectorizer().fit_transform([texts[i] for i in idx]),
                         dtype=np.float64)



def child_compile() -> None:
    """Fresh process: import time, first fit (compile or cache load), later fits."""
    t0 = time.perf_counter()
    from topicaudit.targets.learners.vb_lda import fit_lda_vb
    t_import = time.perf_counter() - t0
    rng = np.random.RandomState(0)
    X = sp.csr_matrix(rng.poisson(0.3, (50, 40)).astype(np.float64))
    t0 = time.perf_counter()
    fit_lda_vb(X, 3, 0)
    t_first = time.perf_counter() - t0
    later = []
    for s in range(5):
        t0 = time.perf_counter()
        fit_lda_vb(X, 3, s)
        later.append(time.perf_counter() - t0)
    print(json.dumps({"import": t_import, "first": t_first, "later": float(np.median(later))}))



def normalise(c):
    return c / c.sum(axis=1, keepdims=True)


def bench(name, X, k, reps, sk_reps):
    from topicaudit.targets.learners.vb_lda import _fit, fit_lda_sklearn

    ours, comps, passes = [], [], []
    for s in range(max(reps, sk_reps)):
        t0 = time.perf_counter()
        c, p = _fit(X, k, s)
        ours.append(time.perf_counter() - t0)
        comps.append(c)
        passes.append(int(p.sum()))
    sk, d_norm, d_rel = [], [], []
    for s in range(sk_reps):
        t0 = time.perf_counter()
        ref = fit_lda_sklearn(X, k, s)
        sk.append(time.perf_counter() - t0)
        d_norm.append(float(np.abs(normalise(comps[s]) - normalise(ref)).max()))
        d_rel.append(float((np.abs(comps[s] - ref) / ref).max()))
        print(f"  {name} seed {s}: sklearn {sk[-1]:.2f} s, ours {ours[s]:.3f} s, "
              f"max|dPhi| {d_norm[-1]:.1e}", flush=True)
    return {
        "name": name, "shape": X.shape, "nnz": X.nnz, "k": k,
        "ours": float(np.median(ours[:reps])), "ours_n": reps,
        "sk": float(np.median(sk)), "sk_n": sk_reps,
        "d_norm": max(d_norm), "d_rel": max(d_rel),
        "passes": int(np.median(passes)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="fits of ours per corpus (median)")
    ap.add_argument("--sklearn-reps", type=int, default=3, help="sklearn fits on PHEME")
    ap.add_argument("--kos-sklearn-reps", type=int, default=1, help="sklearn fits on KOS")
    ap.add_argument("--only", default="pheme,kos")
    args = parse_or_compile(ap, child_compile)
    if args is None:
        return

    load_before = os.getloadavg()[0]
    command = invocation("lda_fit.py")
    cold, warm = cold_and_warm(__file__, _CACHE)

    import numba
    import sklearn

    from topicaudit.targets.learners.vb_lda import fit_lda_vb

    fit_lda_vb(sp.csr_matrix(np.ones((3, 4))), 2, 0)  # load the compiled kernels
    rows = []
    which = args.only.split(",")
    if "pheme" in which:
        rows.append(bench("PHEME clean, random half", load_pheme_half(0), 5,
                          args.reps, args.sklearn_reps))
    if "kos" in which:
        rows.append(bench("KOS, all documents", kos_counts(), 10,
                          args.reps, args.kos_sklearn_reps))

    print()
    print(f"Command: `{command}` (from the repository root)  ")
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"1-min load average at start {load_before:.2f}; Python "
          f"{platform.python_version()}, numpy {np.__version__}, scikit-learn "
          f"{sklearn.__version__}, numba {numba.__version__}; one thread per fit "
          f"(sklearn n_jobs=1, same as its default None).  ")
    print("Both: batch VB, max_iter=10, priors 1/k, mean_change_tol=1e-3, "
          "max_doc_update_iter=100, seeds 0, 1, ...")
    print()
    print("| corpus | docs × words (nnz) | k | sklearn s/fit | ours s/fit | speed-up "
          "| inner passes/fit | max \\|ΔΦ\\| (row-normalised) | max rel. Δ components_ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['shape'][0]:,} × {r['shape'][1]:,} ({r['nnz']:,}) | {r['k']} "
              f"| {r['sk']:.2f} (median of {r['sk_n']}) | {r['ours']:.3f} (median of {r['ours_n']}) "
              f"| {r['sk'] / r['ours']:.0f}× | {r['passes']:,} | {r['d_norm']:.1e} "
              f"| {r['d_rel']:.1e} |")
    print()
    print("| numba one-off cost, fresh process | seconds |")
    print("|---|---|")
    print(f"| import topicaudit.targets.learners.vb_lda (numba, scipy, numpy) | {cold['import']:.2f} |")
    print(f"| first fit, empty cache: JIT compile | {cold['first'] - cold['later']:.2f} |")
    print(f"| first fit, warm cache (cache=True): load | {warm['first'] - warm['later']:.2f} |")
    shutil.rmtree(_CACHE, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
