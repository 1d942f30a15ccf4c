"""Time topicaudit.targets.learners.cgs.CollapsedGibbsLDA on a random half of PHEME.

Usage (from the repository root):

    .venv/bin/python benchmarks/cgs_fit.py [--reps 5] [--k 5] [--n-iter 200]

Corpus: PHEME clean, ``CountVectorizer()`` defaults fitted on all tweets, then
a random half of the rows (``RandomState(0).choice``), so unused vocabulary
columns are kept (~25k tokens). Numba compile time is measured in two fresh
child processes sharing an empty NUMBA_CACHE_DIR: the first compiles, the
second loads the cache. This process uses that same cache, so its timings are
steady state: "per fit" is the median over seeds 0..reps-1, one thread.
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
    _CACHE = tempfile.mkdtemp(prefix="cgs_numba_cache_")  # set before numba is imported
    os.environ["NUMBA_CACHE_DIR"] = _CACHE

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from harness import cold_and_warm, invocation, parse_or_compile, pheme_texts  # noqa: E402


def load_pheme_half(seed: int = 0) -> sp.csr_matrix:
    from sklearn.feature_extraction.text import CountVectorizer

    texts = pheme_texts()
    X = CountVectorizer().fit_transform(texts)
    idx = np.random.RandomState(seed).choice(len(texts), len(texts) // 2, replace=False)
    return sp.csr_matrix(X[idx], dtype=np.float64)


def child_compile() -> None:
    """Fresh process: import time, first fit (compile or cache load), later fits."""
    t0 = time.perf_counter()
    from topicaudit.targets.learners.cgs import CollapsedGibbsLDA
    t_import = time.perf_counter() - t0
    X = sp.csr_matrix(np.random.RandomState(0).poisson(0.3, (50, 40)).astype(np.float64))
    learner = CollapsedGibbsLDA(3, n_iter=20)
    t0 = time.perf_counter()
    learner.fit(X, 0)
    t_first = time.perf_counter() - t0
    later = []
    for s in range(5):
        t0 = time.perf_counter()
        learner.fit(X, s)
        later.append(time.perf_counter() - t0)
    print(json.dumps({"import": t_import, "first": t_first, "later": float(np.median(later))}))



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="steady-state fits (median)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--n-iter", type=int, default=200, help="Gibbs sweeps")
    args = parse_or_compile(ap, child_compile)
    if args is None:
        return

    load_before = os.getloadavg()[0]
    command = invocation("cgs_fit.py")
    cold, warm = cold_and_warm(__file__, _CACHE)

    import numba

    from topicaudit.targets.learners.cgs import CollapsedGibbsLDA

    X = load_pheme_half(0)
    n_tokens = int(X.sum())
    learner = CollapsedGibbsLDA(args.k, n_iter=args.n_iter)
    learner.fit(sp.csr_matrix(np.ones((3, 4))), 0)  # load the compiled kernels
    times = []
    for s in range(args.reps):
        t0 = time.perf_counter()
        phi = learner.fit(X, s)
        times.append(time.perf_counter() - t0)
        assert phi.shape == (args.k, X.shape[1])
    per_fit = float(np.median(times))
    ns_per_token = per_fit / (n_tokens * args.n_iter) * 1e9

    print(f"Command: `{command}` (from the repository root)  ")
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"1-min load average at start {load_before:.2f}; Python {platform.python_version()}, "
          f"numpy {np.__version__}, numba {numba.__version__}; one thread.  ")
    print(f"Learner: CollapsedGibbsLDA(k={args.k}, alpha=1/k, beta=0.01, n_iter={args.n_iter}), "
          f"seeds 0..{args.reps - 1}.")
    print()
    print("| corpus | docs × words (nnz) | tokens | k | sweeps | s/fit (median) | min–max s "
          "| ns per token-draw |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| PHEME clean, random half | {X.shape[0]:,} × {X.shape[1]:,} ({X.nnz:,}) | {n_tokens:,} "
          f"| {args.k} | {args.n_iter} | {per_fit:.3f} (median of {args.reps}) "
          f"| {min(times):.3f}–{max(times):.3f} | {ns_per_token:.1f} |")
    print()
    print("| numba one-off cost, fresh process | seconds |")
    print("|---|---|")
    print(f"| import topicaudit.targets.learners.cgs (numba, scipy, numpy) | {cold['import']:.2f} |")
    print(f"| first fit, empty cache: JIT compile | {cold['first'] - cold['later']:.2f} |")
    print(f"| first fit, warm cache (cache=True): load | {warm['first'] - warm['later']:.2f} |")
    shutil.rmtree(_CACHE, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
