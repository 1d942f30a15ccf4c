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
from contextlib import contextmanager, nullcontext
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.canaries import CanarySet, canary_scores, default_length, make_canaries, resolve_kind
from topicaudit.attacks.lira import offline_scores, online_scores
from topicaudit.attacks.metrics import summarize
from topicaudit.attacks.registry import attack_scores, bounded_attacks, epsilon_lower_bounds
from topicaudit.attacks.statistics import STATISTICS
from topicaudit.attacks.utility import release_utility
from topicaudit.bounds.verdict import VALID_BOUNDS, bound_ceiling, bound_tests
from topicaudit.engine.config import Config, config_hash, validate
from topicaudit.engine.parallel import cluster_description, one_cpu_task, ray_session
from topicaudit.engine.plan import Plan, make_plan
from topicaudit.engine.progress import Progress
from topicaudit.engine.rundir import RunDirectory
from topicaudit.engine.tasks import fit_release, statistics_batch
from topicaudit.engine.validation import warn_more_topics_than_words
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, keep_most_frequent_words, load_corpus
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets import build_target
from topicaudit.targets.base import Release
from topicaudit.version import __version__

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
    """Remove a run directory this block creates if an error stops it before any model is saved.

    Such a directory holds nothing worth resuming, and its config hash would
    block the corrected configuration from using the same path.
    """
    existed = path.exists()
    try:
        yield
    except Exception:  # a UserError, or a crash before anything worth resuming
        if not existed and not any(path.glob("models/*.npz")):
            shutil.rmtree(path, ignore_errors=True)
        raise


def fitted(ray, ref, target) -> tuple[Release, float, str]:
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


def collect_fits(ray, run: RunDirectory, target, pending: dict, releases, chash: str, progress: Progress) -> float:
    """Wait for the fit tasks in ``pending`` (ref → model key), saving each model as it arrives.

    releases: list or dict filled by model key. Returns the tasks' summed fit seconds.
    """
    seconds = 0.0
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        key = pending.pop(done[0])
        releases[key], fit_seconds, node = fitted(ray, done[0], target)
        run.save_model(key, releases[key], chash, fit_seconds, node)
        seconds += fit_seconds
        progress.advance()
    progress.close()
    return seconds


def fit_shadow_models(ray, run: RunDirectory, target, X_ref, plan: Plan, chash: str,
                      vocabulary: np.ndarray | None, quiet: bool) -> tuple[list[Release], float, int]:
    """Fit (or reload) every shadow model of the plan, one Ray task each, saving each as it arrives.

    vocabulary: corpus column ids every shadow learns over, or None for each
    shadow's own vocabulary step. Returns the releases, their summed fit
    seconds and how many were reloaded from the run directory.
    """
    fit = one_cpu_task(ray, fit_release)
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
    fit_seconds += collect_fits(ray, run, target, pending, shadows, chash, progress)
    return shadows, fit_seconds, n_reused


def _fit_models(ray, run: RunDirectory, target, X_ref, plan: Plan, chash: str,
                shadow_vocabulary: str, quiet: bool) -> tuple[Release, list[Release], float]:
    loaded = run.load_model(None, chash)
    if loaded is None:
        fit = one_cpu_task(ray, fit_release)
        target_release, seconds, node = fitted(
            ray, fit.remote(target, X_ref, np.flatnonzero(plan.target_in), plan.target_seed, None), target)
        run.save_model(None, target_release, chash, seconds, node)
    else:
        target_release, seconds = loaded
    reuse = target_release.vocabulary if shadow_vocabulary == "target" else None
    shadows, shadow_seconds, _ = fit_shadow_models(ray, run, target, X_ref, plan, chash, reuse, quiet)
    return target_release, shadows, seconds + shadow_seconds


def compute_statistics(ray, X_ref, releases: list[Release], tol: float, cpus: int,
                        quiet: bool) -> dict[str, np.ndarray]:
    task = one_cpu_task(ray, statistics_batch)
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


def build_canaries(config: Config, X, target, adjacency: str | None) -> CanarySet | None:
    """The run's canaries (None without any); a corpus too small for them is a UserError."""
    c = config.attack.canaries
    if not c.count:
        return None
    kind = resolve_kind(c.kind, adjacency)
    length = c.length or default_length(target.learner, X)
    try:
        return make_canaries(X, c.count, kind, length, config.seed, c.shadows)
    except ValueError as error:
        raise UserError(f"[attack.canaries]: {error}") from None


def fit_canary_releases(ray, run: RunDirectory, target, canaries: CanarySet, X, chash: str,
                        quiet: bool) -> tuple[Release, list[Release], float]:
    """The canary release and its shadows (if any), reusing saved ones; also returns their fit seconds.

    Ray tasks when a session is open; in this process otherwise, so a
    shadow-free canary audit starts no cluster.
    """
    jobs = [("canary-target", canaries.coins, canaries.fit_seed)]
    if canaries.shadow_in is not None:
        jobs += [(f"canary-shadow-{i + 1:04d}", coins, int(seed))
                 for i, (coins, seed) in enumerate(zip(canaries.shadow_in, canaries.shadow_seeds))]
    releases, seconds, pending = {}, 0.0, {}
    for name, coins, seed in jobs:
        loaded = run.load_model(name, chash)
        if loaded is not None:
            releases[name], fit_seconds = loaded
            seconds += fit_seconds
            continue
        X_train = canaries.training_matrix(X, coins)
        rows = np.arange(X_train.shape[0])
        if ray is not None:
            pending[one_cpu_task(ray, fit_release).remote(target, X_train, rows, seed, None)] = name
            continue
        try:
            releases[name], fit_seconds, node = fit_release(target, X_train, rows, seed, None)
        except ValueError as error:
            raise UserError(f"the learner could not fit the canary training set: {error}") from None
        run.save_model(name, releases[name], chash, fit_seconds, node)
        seconds += fit_seconds
    progress = Progress("canary releases", len(jobs), quiet=quiet or len(jobs) == 1)
    progress.done = len(jobs) - len(pending)
    seconds += collect_fits(ray, run, target, pending, releases, chash, progress)
    return releases["canary-target"], [releases[name] for name, _, _ in jobs[1:]], seconds


def all_canary_scores(release: Release, shadows: list[Release], canaries: CanarySet, tol: float) -> dict[str, np.ndarray]:
    """Shadow-free scores, plus online and offline LiRA on ζ when there are shadow canary releases."""
    scores = canary_scores(release, canaries, tol)
    if shadows:
        zeta = np.stack([canary_scores(r, canaries, tol)["zeta"] for r in shadows])
        scores["lira_online"] = online_scores(scores["zeta"], zeta, canaries.shadow_in)
        scores["lira_offline"] = offline_scores(scores["zeta"], zeta, canaries.shadow_in)
    return scores


def canary_results(canaries: CanarySet, scores: dict[str, np.ndarray], release: Release, delta: float,
                   alpha: float) -> dict[str, Any]:
    """``results.json["canaries"]``: metrics, every valid ε bound (α split over them), the audit's ceiling."""
    coins = canaries.coins
    share = alpha / (len(scores) * len(VALID_BOUNDS))
    bounds = bound_tests(scores, coins, delta, share) if 0 < coins.sum() < coins.size else {}
    return {
        "kind": canaries.kind,
        "count": canaries.count,
        "length": canaries.length,
        "members": int(coins.sum()),
        "fixed_training_documents": int(canaries.fixed_rows.size),
        "shadows": 0 if canaries.shadow_in is None else len(canaries.shadow_in),
        "release_vocabulary_size": int(release.vocabulary.size),
        "adjacency": "word" if canaries.kind == "word" else "document",
        "scores": {name: summarize(values, coins) for name, values in scores.items()} if bounds else {},
        "epsilon_lower_bounds": {
            "confidence": 1 - alpha,
            "delta": delta,
            "epsilon": max((b.epsilon for b in bounds.values()), default=0.0),
            "ceiling": bound_ceiling(coins, delta, share) if bounds else 0.0,
            "by_test": {name: b.to_json() for name, b in bounds.items()},
        },
    }


def tokens_in_vocabulary(X, vocabulary: np.ndarray) -> np.ndarray:
    """Each document's tokens over a release's vocabulary (the words ζ is computed on), float64.

    A product with the vocabulary's indicator, so no copy of the corpus is made.
    """
    in_vocabulary = np.zeros(X.shape[1], dtype=np.float64)
    in_vocabulary[vocabulary] = 1.0
    return np.asarray(X @ in_vocabulary, dtype=np.float64).ravel()


def run_audit(config: Config, quiet: bool = False) -> dict[str, Any]:
    """Run (or resume) the audit a configuration describes; returns ``results.json``'s content.

    Two experiments, either or both: the LiRA audit of natural documents (a
    target and ``shadows`` shadow models) and the canary audit (one canary
    release, scored without shadows).
    """
    started = time.perf_counter()
    validate(config)
    corpus = load_audit_corpus(config)
    t = config.target
    target = build_target(t.learner, t.k, t.vocabulary, t.params, t.vocabulary_params, t.test_under_noise)
    warn_more_topics_than_words(config.target.k, corpus.X.shape[1], "[target] k (--k) asks for")
    guarantee = target.guarantee()
    canaries = build_canaries(config, corpus.X, target, guarantee.adjacency)
    plan = make_plan(corpus.X.shape[0], config.attack.shadows, config.seed) if config.attack.shadows else None
    chash = config_hash(config, corpus_fingerprint(corpus))
    run = RunDirectory(config.run_dir)
    resuming = run.check_compatible(chash)
    load_seconds = time.perf_counter() - started
    if not quiet:
        n_tokens = int(corpus.X.sum())
        parts = [f"{config.attack.shadows} shadow models"] if plan else []
        if canaries:
            parts.append(f"{canaries.count} {canaries.kind} canaries" + (
                f" ({len(canaries.shadow_in)} shadow canary releases)" if canaries.shadow_in is not None else ""))
        print(f"{'resuming' if resuming else 'auditing'} {corpus.source}: {corpus.X.shape[0]} documents, "
              f"{corpus.X.shape[1]} words, {n_tokens} tokens; learner {config.target.learner}, "
              f"k={config.target.k}, {' and '.join(parts)} → {run.path}", file=sys.stderr)

    x_bytes = corpus.X.data.nbytes + corpus.X.indices.nbytes + corpus.X.indptr.nbytes
    needs_ray = plan is not None or (canaries is not None and canaries.shadow_in is not None)
    session = (ray_session(config.ray.address, config.ray.num_cpus, object_store_bytes=8 * x_bytes) if needs_ray
               else nullcontext(None))
    timings: dict[str, float] = {"load": load_seconds}
    with removed_on_user_error(run.path), session as ray:
        cluster = cluster_description(ray) if ray is not None else {"nodes": 0, "cpus": 0}
        versions = package_versions()
        seeds = {"seed": config.seed, **({"target_fit": plan.target_seed} if plan else {}),
                 **({"canary_fit": canaries.fit_seed} if canaries else {})}
        run.create(config.to_dict(), {
            "config_hash": chash, "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": versions, "seeds": seeds,
        })
        if canaries is not None:
            run.save_arrays("canaries.npz", canaries.arrays())
            t = time.perf_counter()
            canary_release, canary_shadows, timings["canary_fit_cpu"] = fit_canary_releases(
                ray, run, target, canaries, corpus.X, chash, quiet)
            timings["canary_fit_wall"] = time.perf_counter() - t
        if plan is not None:
            run.keep_plan(plan.arrays())
            X_ref = ray.put(corpus.X)
            t = time.perf_counter()
            target_release, shadows, timings["fit_cpu"] = _fit_models(
                ray, run, target, X_ref, plan, chash, config.attack.shadow_vocabulary, quiet)
            timings["fit_wall"] = time.perf_counter() - t
            t = time.perf_counter()
            stats = compute_statistics(ray, X_ref, [target_release, *shadows], config.attack.tol,
                                        cluster["cpus"], quiet)
            timings["statistics"] = time.perf_counter() - t

    bound_delta = guarantee.delta if math.isfinite(guarantee.epsilon) else config.attack.delta
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
            "guarantee": guarantee.to_json(),
            **({"test_under_noise": config.target.test_under_noise} if config.target.test_under_noise != 1 else {}),
        },
        "shadows": {
            "n_shadows": config.attack.shadows,
            "vocabulary": config.attack.shadow_vocabulary,
            "in_per_document": config.attack.shadows // 2,
        },
        "metrics_convention": "tpr_at_fpr_F is the largest TPR over thresholds whose FPR is at most F",
        "attacks": {},
        "seeds": seeds,
        "versions": versions,
        "ray": {"address": (config.ray.address or "local") if needs_ray else "none (no shadow models)", **cluster},
        "resumed": resuming,
    }
    if plan is not None:
        t = time.perf_counter()
        target_stats = {name: values[0] for name, values in stats.items()}
        shadow_stats = {name: values[1:] for name, values in stats.items()}
        n_tokens = tokens_in_vocabulary(corpus.X, target_release.vocabulary)
        scores = attack_scores(target_stats, shadow_stats, plan.shadow_in, n_tokens, config.attack.attacks)
        run.save_arrays("statistics.npz", {
            **{f"target_{name}": v for name, v in target_stats.items()},
            **{f"shadow_{name}": v for name, v in shadow_stats.items()},
            "n_tokens": n_tokens,
        })
        run.save_arrays("scores.npz", {**scores, "is_member": plan.target_in, "doc_index": corpus.doc_index})
        bounds = epsilon_lower_bounds(scores, plan.target_in, bound_delta, config.attack.alpha,
                                      bounded_attacks(list(scores)))
        results["attacks"] = {name: summarize(s, plan.target_in) for name, s in scores.items()}
        results["epsilon_lower_bounds"] = {
            "method": "one-run",
            "confidence": 1 - config.attack.alpha,
            "delta": bound_delta,
            "epsilon": max(b.epsilon for b in bounds.values()),
            "by_attack": {name: b.to_json() for name, b in bounds.items()},
        }
        results["statistics"] = {"names": list(STATISTICS), "max_zeta_gap": float(stats["gap"].max()),
                                 "zeta_tol": config.attack.tol}
        results["target"].update({
            "vocabulary_size": int(target_release.vocabulary.size),
            "n_members": int(plan.target_in.sum()),
            # A learner's data-dependent privacy monitor (cgs-monitor), when it has one.
            **({"monitor": target_release.info["monitor"]} if "monitor" in target_release.info else {}),
        })
        timings["scoring"] = time.perf_counter() - t
        t = time.perf_counter()
        results["utility"] = release_utility(corpus.X, target_release, plan.target_in)
        timings["utility"] = time.perf_counter() - t
    if canaries is not None:
        t = time.perf_counter()
        scores = all_canary_scores(canary_release, canary_shadows, canaries, config.attack.tol)
        run.save_arrays("canary_scores.npz", {"ids": canaries.ids, **scores})
        results["canaries"] = canary_results(canaries, scores, canary_release, bound_delta, config.attack.alpha)
        timings["canary_scoring"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    results["timings_s"] = {name: round(value, 3) for name, value in timings.items()}
    if "address" in results["ray"]:
        results["ray"]["models_by_node"] = run.models_by_node()
    run.save_results(results)
    return results


def summary_table(results: dict[str, Any]) -> str:
    """The one-screen summary printed at the end of a run."""
    target, guarantee = results["target"], results["target"]["guarantee"]
    claim = "none" if guarantee["epsilon"] is None else f"{guarantee['epsilon']:g}"
    if guarantee["epsilon"] is not None and guarantee["adjacency"]:
        claim += f" ({guarantee['adjacency']}-level, {guarantee['basis']})"
    lines = [f"{results['corpus']['source']}"]
    if results["attacks"]:
        lines += [
            f"  {results['corpus']['n_docs']} documents, target vocabulary {target['vocabulary_size']} words, "
            f"{target['n_members']} members; {target['learner']} k={target['k']}; "
            f"{results['shadows']['n_shadows']} shadow models",
            "",
            f"  {'attack':<26}{'AUC':>8}{'TPR@0.1%FPR':>14}{'TPR@1%FPR':>12}",
        ]
        for name, m in results["attacks"].items():
            lines.append(f"  {name:<26}{m['auc']:>8.3f}{m['tpr_at_fpr_0.001']:>13.2%}{m['tpr_at_fpr_0.01']:>12.2%}")
        eps = results["epsilon_lower_bounds"]
        lines += ["", f"  empirical ε ≥ {eps['epsilon']:.2f} (one-run, document-level, {eps['confidence']:.0%} "
                      f"confidence, δ = {eps['delta']:g}); claimed ε: {claim}"]
    if "canaries" in results:
        c = results["canaries"]
        eps = c["epsilon_lower_bounds"]
        lines += ["", f"  canaries: {c['count']} {c['kind']} ({c['length']} tokens each), {c['members']} in the "
                      f"canary release beside {c['fixed_training_documents']} fixed documents; "
                      f"{target['learner']} k={target['k']}"]
        for name, m in c["scores"].items():
            lines.append(f"  {'canary ' + name:<26}{m['auc']:>8.3f}{m['tpr_at_fpr_0.001']:>13.2%}"
                         f"{m['tpr_at_fpr_0.01']:>12.2%}")
        lines.append(f"  empirical ε ≥ {eps['epsilon']:.2f} ({c['adjacency']}-level, {eps['confidence']:.0%} "
                     f"confidence, δ = {eps['delta']:g}; this audit can prove at most {eps['ceiling']:.2f}); "
                     f"claimed ε: {claim}")
    if "test_under_noise" in target:
        lines.append(f"  TEST MECHANISM: noise divided by {target['test_under_noise']:g}, claim unchanged")
    t = results["timings_s"]
    parts = [f"{label} {t[key]:.1f} s" for key, label in
             (("fit_wall", "fits"), ("statistics", "statistics"), ("canary_fit_wall", "canary fit")) if key in t]
    lines += ["", f"  wall time {t['total']:.1f} s ({', '.join(parts)})"]
    return "\n".join(lines)
