"""Rescore DPSU threshold-canary audits three ways on the same transcripts (RESULTS §23).

For each run directory of a Laplace-noise DPSU step (one anchor per anchored
canary), recompute the anchored canaries' scores from the recorded noisy
weights: ``linear + median`` (the audit's: the Laplace ratio continued
linearly, unreleased fresh canaries at the anchored median), ``clipped + 0``
(the ratio clipped to its window, fresh canaries at 0: the score before issue
30) and ``linear + 0``; and bound each with the one-run and f-DP pure tests at
α = 0.05/3, δ = 0 (the check adds the δ-tail test beside them).

  .venv/bin/python benchmarks/dpsu_rescore.py runs/issue30v2 dpsu-laplace-pheme-e3-dpsu-budget-2 ...
"""
from __future__ import annotations

import glob
import json
import sys

import numpy as np

from topicaudit.attacks.mechanism import RELEASED_FRESH, laplace_llr, neutral_fresh_scores
from topicaudit.bounds.epsilon import Method
from topicaudit.bounds.verdict import bound_tests, guess_family


def rescore(run: str) -> dict[str, float]:
    c, s = np.load(f"{run}/canaries.npz"), np.load(f"{run}/canary_scores.npz")
    coins, anchors = c["coins"], c["anchors"]
    stored = s["mechanism"][np.argsort(s["ids"])]
    z = np.load(f"{run}/models/canary-target.npz", allow_pickle=True)
    raw = z["transcript.parameters"]
    p = json.loads(str(raw)) if raw.dtype.kind in "US" else raw.item()
    columns, y = z["transcript.columns"], z["transcript.array.noisy_weights"]
    m = coins.size
    weight = y[np.searchsorted(columns, int(c["n_corpus_words"]) + np.arange(m))]
    lo, hi, b = anchors.astype(float), anchors + 1.0, float(p["scale"])
    anchored = anchors > 0
    fresh = np.where(stored >= RELEASED_FRESH, RELEASED_FRESH, 0.0)
    linear = np.where(anchored, (2 * weight - lo - hi) / b, fresh)
    scores = {"linear + median": neutral_fresh_scores(linear, anchored),
              "clipped + 0": np.where(anchored, laplace_llr(weight, lo, hi, b), fresh),
              "linear + 0": linear}
    out = {}
    for name, values in scores.items():
        tests = bound_tests({"m": values}, coins, 0.0, 0.05 / 3, (Method.ONE_RUN, Method.FDP_PURE), guess_family)
        out[name] = max(t.epsilon for t in tests.values())
    return out


def main() -> None:
    root, groups = sys.argv[1], sys.argv[2:]
    print("| runs | ε | " + " | ".join(["linear + median", "clipped + 0", "linear + 0"]) + " |")
    print("|---|---|---|---|---|")
    for group in groups:
        runs = sorted(glob.glob(f"{root}/{group}-s*"))
        eps = 3.0 if "-e3-" in group else 1.0
        rows = [rescore(r) for r in runs]
        cells = [f"{sum(r[k] > eps for r in rows)}/{len(rows)} ({np.mean([r[k] for r in rows]):.2f})"
                 for k in ("linear + median", "clipped + 0", "linear + 0")]
        print(f"| {group} | {eps:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
