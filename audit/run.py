"""One audit, end to end: corpus → plan → target and shadow fits → statistics → scores → metrics.

Everything that can be checked without computing is checked before the run
directory is touched, so bad input never leaves a half-written directory.
Shadow fits and statistics run as Ray tasks; finished models are written one
file each as they arrive, so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import datetime
import hashlib
import math
import platform
import shutil
import sys
import time
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from audit import __version__
from audit.attacks import attack_scores, epsilon_lower_bounds
from audit.config import Config, config_hash, validate
from audit.corpus import Corpus, keep_most_frequent_words, load_corpus
from audit.errors import UserError
from audit.metrics import summarize
from audit.parallel import cluster_description, ray_session
from audit.plan import Plan, make_plan
from audit.progress import Progress
from audit.rundir import RunDirectory
from audit.statistics import STATISTICS
from audit.tasks import fit_release, statistics_batch
from audit.synthetic import synthetic_corpus
from audit.utility import release_utility
from targets import build_target
from targets.base import Release

RESULTS_SCHEMA = "topicaudit.results/1"


# -- inputs -----------------------------------------------------------------------
def load_audit_corpus(config: Config) -> Corpus:
    if config.corpus.path is None:
        s = config.synthetic
        corpus, _ = synthetic_corpus(s.n_docs, s.n_words, s.k, s.mean_length, s.topic_concentration,
                                     s.doc_concentration, seed=config.seed)
        return corpus
    c = config.corpus
    corpus = load_corpus(c.path, format=c.format, preprocess=c.preprocess, text_field=c.text_field, **c.options)
    return keep_most_frequent_words(corpus, c.max_words) if c.max_words else corpus


def corpus_fingerprint(corpus: Corpus) -> str:
    digest = hashlib.sha256()
    for array in (corpus.X.indptr, corpus.X.indices, corpus.X.data):
        digest.update(np.ascontiguousarray(array).tobytes())
    digest.update("\n".join(map(str, corpus.vocabulary)).encode())
    return digest.hexdigest()[:16]


def package_versions() -> dict[str, str]:
    versions = {"topicaudit": __version__, "python": platform.python_version()}
    for name in ("numpy", "scipy", "scikit-learn", "numba", "ray", "nltk"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


# -- orchestration -------------------------------------------------------------------
@contextmanager
def removed_on_user_error(path: Path):
    """Remove a run directory this block creates if a UserError stops it before any model is saved.

    Such a directory holds nothing worth resuming, and its config hash would
    block the corrected configuration from using the same path.
    """
    existed = path.exists()
    try:
        yield
    except UserError:
        if not existed and not any(path.glob("models/*.npz")):
            shutil.rmtree(path, ignore_errors=True)
        raise


def fitted(ray, ref, target) -> tuple[Release, float]:
    """A fit task's result; a learner refusing the data (ValueError) becomes a UserError.

    Learners check what only the data can tell (e.g. a corpus too large for a
    dense sampler) and raise ValueError with the reason and the fix.
    """
    try:
        return ray.get(ref)
    except ValueError as error:
        cause = getattr(error, "cause", None) or error  # a RayTaskError carries the worker's exception
        learner = type(target.learner).__name__ if hasattr(target, "learner") else type(target).__name__
        raise UserError(f"the learner ({learner}) could not fit this corpus: {cause}") from None


def fit_shadow_models(ray, run: RunDirectory, target, X_ref, plan: Plan, chash: str,
                      vocabulary: np.ndarray | None, quiet: bool) -> tuple[list[Release], float, int]:
    """Fit (or reload) every shadow model of the plan, one Ray task each, saving each as it arrives.

    vocabulary: corpus column ids every shadow learns over, or None for each
    shadow's own vocabulary step. Returns the releases, their summed fit
    seconds and how many were reloaded from the run directory.
    """
    fit = ray.remote(num_cpus=1)(fit_release)
    shadows: list[Release | None] = [None] * plan.n_shadows
    pending, fit_seconds = {}, 0.0
    for i in range(plan.n_shadows):
        loaded = run.load_model(i, chash)
        if loaded is not None:
            shadows[i], seconds = loaded
            fit_seconds += seconds
        else:
            rows = np.flatnonzero(plan.shadow_in[i])
            pending[fit.remote(target, X_ref, rows, int(plan.shadow_seeds[i]), vocabulary)] = i
    n_reused = plan.n_shadows - len(pending)
    progress = Progress("shadow models", plan.n_shadows, quiet=quiet)
    progress.done = n_reused
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(done[0])
        shadows[i], seconds = fitted(ray, done[0], target)
        run.save_model(i, shadows[i], chash, seconds)
        fit_seconds += seconds
        progress.advance()
    progress.close()
    return shadows, fit_seconds, n_reused


def _fit_models(ray, run: RunDirectory, target, X_ref, plan: Plan, chash: str,
                shadow_vocabulary: str, quiet: bool) -> tuple[Release, list[Release], float]:
    loaded = run.load_model(None, chash)
    if loaded is None:
        fit = ray.remote(num_cpus=1)(fit_release)
        target_release, seconds = fitted(
            ray, fit.remote(target, X_ref, np.flatnonzero(plan.target_in), plan.target_seed, None), target)
        run.save_model(None, target_release, chash, seconds)
    else:
        target_release, seconds = loaded
    reuse = target_release.vocabulary if shadow_vocabulary == "target" else None
    shadows, shadow_seconds, _ = fit_shadow_models(ray, run, target, X_ref, plan, chash, reuse, quiet)
    return target_release, shadows, seconds + shadow_seconds


def compute_statistics(ray, X_ref, releases: list[Release], tol: float, cpus: int,
                        quiet: bool) -> dict[str, np.ndarray]:
    task = ray.remote(num_cpus=1)(statistics_batch)
    batch = max(1, math.ceil(len(releases) / (4 * max(cpus, 1))))
    starts = list(range(0, len(releases), batch))
    refs = {task.remote(X_ref, releases[s:s + batch], tol): s for s in starts}
    parts: dict[int, dict[str, np.ndarray]] = {}
    progress = Progress("scoring models", len(releases), quiet=quiet)
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        start = refs.pop(done[0])
        parts[start] = ray.get(done[0])
        progress.advance(len(parts[start]["zeta"]))
    progress.close()
    ordered = [parts[s] for s in starts]
    return {name: np.concatenate([p[name] for p in ordered]) for name in ordered[0]}


def run_audit(config: Config, quiet: bool = False) -> dict[str, Any]:
    """Run (or resume) the audit a configuration describes; returns ``results.json``'s content."""
    started = time.perf_counter()
    validate(config)
    corpus = load_audit_corpus(config)
    t = config.target
    target = build_target(t.learner, t.k, t.vocabulary, t.params, t.vocabulary_params)
    plan = make_plan(corpus.X.shape[0], config.attack.shadows, config.seed)
    chash = config_hash(config, corpus_fingerprint(corpus))
    run = RunDirectory(config.run_dir)
    resuming = run.check_compatible(chash)
    load_seconds = time.perf_counter() - started
    if not quiet:
        n_tokens = int(corpus.X.sum())
        print(f"{'resuming' if resuming else 'auditing'} {corpus.source}: {corpus.X.shape[0]} documents, "
              f"{corpus.X.shape[1]} words, {n_tokens} tokens; learner {config.target.learner}, "
              f"k={config.target.k}, {config.attack.shadows} shadow models → {run.path}", file=sys.stderr)

    x_bytes = corpus.X.data.nbytes + corpus.X.indices.nbytes + corpus.X.indptr.nbytes
    with removed_on_user_error(run.path), \
            ray_session(config.ray.address, config.ray.num_cpus, object_store_bytes=8 * x_bytes) as ray:
        cluster = cluster_description(ray)
        versions = package_versions()
        run.create(config.to_dict(), {
            "config_hash": chash, "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": versions, "seeds": {"seed": config.seed, "target_fit": plan.target_seed},
        })
        if not (run.path / "plan.npz").exists():
            plan.save(run.path / "plan.npz")
        X_ref = ray.put(corpus.X)

        t = time.perf_counter()
        target_release, shadows, fit_cpu_seconds = _fit_models(
            ray, run, target, X_ref, plan, chash, config.attack.shadow_vocabulary, quiet)
        fit_seconds = time.perf_counter() - t

        t = time.perf_counter()
        stats = compute_statistics(ray, X_ref, [target_release, *shadows], config.attack.tol,
                                    cluster["cpus"], quiet)
        statistics_seconds = time.perf_counter() - t

    t = time.perf_counter()
    target_stats = {name: values[0] for name, values in stats.items()}
    shadow_stats = {name: values[1:] for name, values in stats.items()}
    scores = attack_scores(target_stats, shadow_stats, plan.shadow_in)
    run.save_arrays("statistics.npz", {
        **{f"target_{name}": v for name, v in target_stats.items()},
        **{f"shadow_{name}": v for name, v in shadow_stats.items()},
    })
    run.save_arrays("scores.npz", {**scores, "is_member": plan.target_in, "doc_index": corpus.doc_index})
    attacks = {name: summarize(s, plan.target_in) for name, s in scores.items()}
    guarantee = target.guarantee()
    bound_delta = guarantee.delta if math.isfinite(guarantee.epsilon) else config.attack.delta
    bounds = epsilon_lower_bounds(scores, plan.target_in, bound_delta, config.attack.alpha)
    scoring_seconds = time.perf_counter() - t

    t = time.perf_counter()
    utility = release_utility(corpus.X, target_release, plan.target_in)
    utility_seconds = time.perf_counter() - t

    results = {
        "schema": RESULTS_SCHEMA,
        "name": config.name,
        "config_hash": chash,
        "corpus": {
            "source": corpus.source,
            "n_docs": int(corpus.X.shape[0]),
            "n_words": int(corpus.X.shape[1]),
            "n_tokens": int(corpus.X.sum()),
            "n_dropped_empty": int(corpus.n_dropped_empty),
            # where the corpus was read (absolute, so reports find it from any directory)
            "path": str(Path(config.corpus.path).resolve()) if config.corpus.path else None,
            "fingerprint": corpus_fingerprint(corpus),
        },
        "target": {
            "learner": config.target.learner,
            "k": config.target.k,
            "vocabulary_step": config.target.vocabulary,
            "vocabulary_size": int(target_release.vocabulary.size),
            "n_members": int(plan.target_in.sum()),
            "guarantee": guarantee.to_json(),
            # A learner's data-dependent privacy monitor (cgs-monitor), when it has one.
            **({"monitor": target_release.info["monitor"]} if "monitor" in target_release.info else {}),
        },
        "shadows": {
            "n_shadows": plan.n_shadows,
            "vocabulary": config.attack.shadow_vocabulary,
            "in_per_document": plan.n_shadows // 2,
        },
        "statistics": {"names": list(STATISTICS), "max_zeta_gap": float(stats["gap"].max()),
                       "zeta_tol": config.attack.tol},
        "metrics_convention": "tpr_at_fpr_F is the largest TPR over thresholds whose FPR is at most F",
        "attacks": attacks,
        "utility": utility,
        "epsilon_lower_bounds": {
            "method": "one-run",
            "confidence": 1 - config.attack.alpha,
            "delta": bound_delta,
            "epsilon": max(b.epsilon for b in bounds.values()),
            "by_attack": {name: b.to_json() for name, b in bounds.items()},
        },
        "seeds": {"seed": config.seed, "target_fit": plan.target_seed},
        "versions": versions,
        "ray": {"address": config.ray.address or "local", **cluster},
        "timings_s": {
            "load": round(load_seconds, 3),
            "fit_wall": round(fit_seconds, 3),
            "fit_cpu": round(fit_cpu_seconds, 3),
            "statistics": round(statistics_seconds, 3),
            "scoring": round(scoring_seconds, 3),
            "utility": round(utility_seconds, 3),
            "total": round(time.perf_counter() - started, 3),
        },
        "resumed": resuming,
    }
    run.save_results(results)
    return results


def summary_table(results: dict[str, Any]) -> str:
    """The one-screen summary printed at the end of a run."""
    lines = [
        f"{results['corpus']['source']}",
        f"  {results['corpus']['n_docs']} documents, target vocabulary {results['target']['vocabulary_size']} words, "
        f"{results['target']['n_members']} members; {results['target']['learner']} k={results['target']['k']}; "
        f"{results['shadows']['n_shadows']} shadow models",
        "",
        f"  {'attack':<26}{'AUC':>8}{'TPR@0.1%FPR':>14}{'TPR@1%FPR':>12}",
    ]
    for name, m in results["attacks"].items():
        lines.append(f"  {name:<26}{m['auc']:>8.3f}{m['tpr_at_fpr_0.001']:>13.2%}{m['tpr_at_fpr_0.01']:>12.2%}")
    eps = results["epsilon_lower_bounds"]
    guarantee = results["target"]["guarantee"]
    claim = "none" if guarantee["epsilon"] is None else f"{guarantee['epsilon']:g}"
    if guarantee["epsilon"] is not None and guarantee["adjacency"]:
        claim += f" ({guarantee['adjacency']}-level, {guarantee['basis']})"
    lines += ["", f"  empirical ε ≥ {eps['epsilon']:.2f} (one-run, document-level, {eps['confidence']:.0%} "
                  f"confidence, δ = {eps['delta']:g}); claimed ε: {claim}"]
    t = results["timings_s"]
    lines += ["", f"  wall time {t['total']:.1f} s (fits {t['fit_wall']:.1f} s, statistics {t['statistics']:.1f} s)"]
    return "\n".join(lines)
