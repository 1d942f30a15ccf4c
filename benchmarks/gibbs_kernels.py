"""Φ digests and fit times of the four Gibbs learners (cgs, dp-cgs, hdp-lda, the monitor) on PHEME.

Run it with two installs of topicaudit (e.g. a worktree of the commit before a change to the shared sweep
kernels, and this one), alternating, on a quiet machine: the digests must match, and the times are the A/B.

    for r in 1 2 3 4 5; do echo old:; OLD/.venv/bin/python benchmarks/gibbs_kernels.py; \
                          echo new:; .venv/bin/python benchmarks/gibbs_kernels.py; done
"""
import argparse
import hashlib
import time

import numpy as np

from topicaudit.inputs.corpus import load_corpus
from topicaudit.targets.learners.cgs import run_cgs
from topicaudit.targets.learners.cgs_monitor import run_monitored_cgs
from topicaudit.targets.learners.dp_cgs import run_dp_cgs
from topicaudit.targets.learners.hdp_lda import run_hdp_lda


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="../shared/data/pheme/pheme_clean.json")
    args = parser.parse_args()
    X = load_corpus(args.corpus, preprocess=False).X
    fits = {
        "cgs": lambda s: run_cgs(X, 5, s, n_iter=100).phi,
        "dp-cgs": lambda s: run_dp_cgs(X, 5, s, epsilon=3.0, max_doc_length=30, n_iter=100).phi,
        "hdp": lambda s: run_hdp_lda(X, 5, s, n_iter=100).phi,
        "monitor": lambda s: run_monitored_cgs(X, 5, s, n_iter=30)[0].phi,
    }
    for name, fit in fits.items():
        fit(0)  # numba's compile (or its cache)
        started = time.perf_counter()
        phis = [fit(seed) for seed in (1, 2, 3)]
        seconds = (time.perf_counter() - started) / 3
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in phis)).hexdigest()[:16]
        print(f"{name:8s} {digest} {seconds:.3f}s", flush=True)


if __name__ == "__main__":
    main()
