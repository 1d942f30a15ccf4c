"""Variants of offline LiRA tried for few reference models (issue 12), measured but not kept as attacks.

Same saved 128-shadow runs and first-N-shadows rule as benchmarks/few_models.py.
Each variant changes one thing of ``pooled_prior``: ``lira_offline_shrunk`` with
its prior always the pooled variance, as it was before the prior that follows
the document (docs/attacks.md); ``feature_prior`` is that prior used always.

* ``both_sides_variance``: the document's variance from both sides (each
  centred on its own mean: N − 2 degrees of freedom instead of N/2 − 1),
  shrunk to the pooled one.
* ``all_shadow_mean``: the OUT mean from all N shadows, the IN ones moved down
  by a membership shift regressed on [1, n, log n] across documents.
* ``feature_prior``: variance shrunk towards a per-document prior, a
  regression of the (χ²-unbiased) log sample variance on word-count features
  (topicaudit.attacks.quantile.document_features), instead of the pooled one.
* ``word_level_prior``: the prior is Σ_w n_dw² v_w, v_w the variance over
  shadows of log(θ̂·Φ_w) pooled over every document containing word w (ζ's
  variance if words varied independently), regressed as above; needs the
  shadows' Φ and θ̂ (ζ is solved again for the N shadows).
* ``model_offset``: each model's median per-token deviation from the shadows'
  mean removed (a fit-quality offset per model) before scoring.
* ``oracle_*`` (diagnostics, not attacks): the N-shadow mean or variance
  replaced by the one from all the run's shadows, to see which of the two limits the attack.
* ``min_with_quantile``: the smaller of the robustly standardised
  ``pooled_prior`` and ``quantile_regression`` scores (flag only if
  both agree).

Nothing here reads the target's membership except the final metrics.

    .venv/bin/python benchmarks/few_models_variants.py --root runs/fm --corpus pheme kos --seeds 0 1 2 3 4
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from few_models import METRICS, document_counts, run_arrays, run_dir  # noqa: E402

from topicaudit.attacks.metrics import summarize  # noqa: E402
from topicaudit.attacks.features import document_features  # noqa: E402
from topicaudit.attacks.quantile import quantile_scores  # noqa: E402
from topicaudit.attacks.variance import prior_strength, regressed_variance, shrunk_moments, side_moments  # noqa: E402
from topicaudit.attacks.zeta import solve_zeta  # noqa: E402

# Diagnostics, not attacks: the first N shadows' mean or variance replaced by the 128 shadows' one.
ORACLES = ("oracle_mean_128", "oracle_variance_128")
VARIANTS = ORACLES + ("pooled_prior", "likelihood_chosen_prior", "both_sides_variance", "all_shadow_mean", "feature_prior",
            "word_level_prior", "model_offset", "min_with_quantile")


def shrink_to(prior: np.ndarray, ss: np.ndarray, dof: np.ndarray, with_likelihood: bool = False):
    """(ν₀ p_d + S_d)/(ν₀ + dof_d) with ν₀ by marginal likelihood of s_d²/p_d (and that log-likelihood)."""
    s2 = np.where(dof > 0, ss / np.maximum(dof, 1), 0.0)
    use = (dof > 0) & (s2 > 0)
    nu = prior_strength(s2[use] / prior[use], dof[use], 1.0)
    var = (nu * prior + ss) / (nu + dof)
    if not with_likelihood:
        return var
    # log density of the sample variances themselves (Jacobian 1/p_d of the ratio), comparable across priors
    loglik = (stats.f.logpdf(s2[use] / prior[use], dof[use], nu) - np.log(prior[use])).sum()
    return var, loglik


def word_level_variance(path: Path, counts, shadow_in: np.ndarray, n: int) -> np.ndarray:
    """Σ_w n_dw² v_w from the first n shadows' Φ (v_w pooled over documents, each side centred)."""
    rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    cols = counts.indices
    logp = []
    for m in range(n):
        with np.load(path / "models" / f"shadow-{m + 1:04d}.npz") as z:
            phi = z["phi"].astype(np.float64)
        theta = solve_zeta(phi, counts, warn=False).theta
        logp.append(np.log(np.maximum(np.einsum("ik,ki->i", theta[rows], phi[:, cols]), 1e-300)))
    logp = np.array(logp)
    inside = shadow_in[:n][:, rows]
    resid = np.zeros_like(logp)
    for side in (True, False):
        mask = inside == side
        mean = np.where(mask, logp, 0.0).sum(axis=0) / np.maximum(mask.sum(axis=0), 1)
        resid += np.where(mask, logp - mean, 0.0)
    v = np.bincount(cols, (resid ** 2).sum(axis=0), counts.shape[1]) / np.maximum(
        np.bincount(cols, minlength=counts.shape[1]) * (n - 2), 1)
    return np.bincount(rows, counts.data ** 2 * v[cols], counts.shape[0])


def robust_z(x: np.ndarray) -> np.ndarray:
    centre = np.median(x)
    return (x - centre) / (1.4826 * np.median(np.abs(x - centre)))


def correlation(prior: np.ndarray, ss: np.ndarray, count: np.ndarray) -> float:
    """Correlation over documents of log prior and log σ² from all (128) shadows of that side."""
    var = ss / np.maximum(count - 1, 1)
    use = (prior > 0) & (var > 0)
    return float(np.corrcoef(np.log(prior[use]), np.log(var[use]))[0, 1])


def variants(path: Path, counts, observed, shadow, shadow_in, n: int, report: dict) -> dict[str, np.ndarray]:
    s, inside = shadow[:n], shadow_in[:n]
    count_all, mu_all, ss_all_out = side_moments(shadow, ~shadow_in)
    tokens = np.maximum(np.asarray(counts.sum(axis=1), dtype=np.float64).ravel(), 1.0)
    count_in, mu_in, ss_in = side_moments(s, inside)
    count_out, mu_out, ss_out = side_moments(s, ~inside)
    base = shrunk_moments(s, inside)
    out = {"pooled_prior": (observed - mu_out) / np.sqrt(base["var_out"]),
           "oracle_mean_128": (observed - mu_all) / np.sqrt(base["var_out"]),
           "oracle_variance_128": (observed - mu_out) / np.sqrt(np.maximum(ss_all_out / (count_all - 1), 1e-12))}
    dof_both = (np.maximum(count_in - 1, 0) + np.maximum(count_out - 1, 0)).astype(float)
    ss_both = ss_in + ss_out
    pooled = np.full_like(ss_both, ss_both.sum() / dof_both.sum())
    out["both_sides_variance"] = (observed - mu_out) / np.sqrt(shrink_to(pooled, ss_both, dof_both))

    design = np.column_stack([np.ones_like(tokens), tokens, np.log(tokens)])
    beta, *_ = np.linalg.lstsq(design, mu_in - mu_out, rcond=None)
    moved = s - inside * (design @ beta)
    mean_all = moved.mean(axis=0)
    ss_all = ((moved - mean_all) ** 2).sum(axis=0)
    dof_all = np.full_like(ss_all, n - 1.0)
    out["all_shadow_mean"] = (observed - mean_all) / np.sqrt(
        shrink_to(np.full_like(ss_all, ss_all.sum() / dof_all.sum()), ss_all, dof_all))

    dof_out = np.maximum(count_out - 1, 0).astype(float)
    prior = regressed_variance(ss_out, dof_out, document_features(counts))
    var_pooled, ll_pooled = shrink_to(np.full_like(ss_out, ss_out.sum() / dof_out.sum()), ss_out, dof_out, True)
    var_feature, ll_feature = shrink_to(prior, ss_out, dof_out, True)
    report.setdefault("feature_minus_pooled_loglik", []).append(ll_feature - ll_pooled)
    chosen = var_feature if ll_feature > ll_pooled else var_pooled
    out["likelihood_chosen_prior"] = (observed - mu_out) / np.sqrt(chosen)
    report.setdefault("feature_prior", []).append(correlation(prior, ss_all_out, count_all))
    report.setdefault("sample_variance", []).append(correlation(np.where(dof_out > 0, ss_out / np.maximum(dof_out, 1), 0), ss_all_out, count_all))
    out["feature_prior"] = (observed - mu_out) / np.sqrt(shrink_to(prior, ss_out, dof_out))
    word_level = np.log(np.maximum(word_level_variance(path, counts, shadow_in, n), 1e-12))
    prior = regressed_variance(ss_both, dof_both, word_level[:, None])
    report.setdefault("word_level_prior", []).append(correlation(prior, ss_all_out, count_all))
    out["word_level_prior"] = (observed - mu_out) / np.sqrt(shrink_to(prior, ss_both, dof_both))

    reference = s.mean(axis=0)
    offset_s = np.median((s - reference) / tokens, axis=1)
    offset_t = np.median((observed - reference) / tokens)
    s2, obs2 = s - offset_s[:, None] * tokens, observed - offset_t * tokens
    m2 = shrunk_moments(s2, inside)
    out["model_offset"] = (obs2 - m2["mu_out"]) / np.sqrt(m2["var_out"])

    qr = quantile_scores(observed, s, inside, counts)
    out["min_with_quantile"] = np.minimum(robust_z(out["pooled_prior"]), robust_z(qr))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", default=["pheme"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--root", default="runs/few-models")
    parser.add_argument("--shadows", nargs="+", type=int, default=[4, 8])
    args = parser.parse_args()
    print("| corpus | N | variant | AUC | TPR@0.1% | TPR@1% |\n|---|---|---|---|---|---|")
    for corpus in args.corpus:
        runs = [run_dir(Path(args.root), corpus, s) for s in args.seeds]
        runs = [r for r in runs if (r / "results.json").exists()]
        rows = {n: {v: [] for v in VARIANTS} for n in args.shadows}
        reports = {n: {} for n in args.shadows}
        for path in runs:
            observed, shadow, shadow_in, member = run_arrays(path)
            counts = document_counts(path)
            for n in args.shadows:
                for name, score in variants(path, counts, observed, shadow, shadow_in, n, reports[n]).items():
                    rows[n][name].append(summarize(score, member))
        for n in args.shadows:
            for name in VARIANTS:
                cells = []
                for metric, _, scale in METRICS:
                    xs = np.array([r[metric] for r in rows[n][name]]) * scale
                    digits = 3 if scale == 1 else 2
                    cells.append(f"{xs.mean():.{digits}f} ± {xs.std(ddof=1) if xs.size > 1 else 0:.{digits}f}")
                print(f"| {corpus} ({len(runs)} seeds) | {n} | {name} | " + " | ".join(cells) + " |", flush=True)
        for n in args.shadows:
            print(f"{corpus} N={n}: correlation over documents of log variance with log σ²_OUT from all shadows: "
                  + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in reports[n].items()), file=sys.stderr)


if __name__ == "__main__":
    main()
