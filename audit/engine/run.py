"""``topicaudit run``, end to end: corpus → plan → target and shadow fits → statistics → scores → metrics.

Everything that can be checked without computing is checked before the run
directory is touched, so bad input never leaves a half-written directory.
Shadow fits and statistics run as Ray tasks; finished models are written one
file each as they arrive, so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.process_state import only_the_command
from topicaudit.attacks.canaries import CanarySet
from topicaudit.attacks.metrics import summarize
from topicaudit.attacks.registry import attack_scores, bounded_attacks, epsilon_lower_bounds
from topicaudit.attacks.statistics import STATISTICS
from topicaudit.attacks.utility import release_utility
from topicaudit.engine.storage import fitted_code, manifest
from topicaudit.engine.canary_audit import all_canary_scores, build_canaries, canary_results, observed_mechanism
from topicaudit.engine.configuration.config import Config, config_hash, run_config
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.execution.experiment import Experiment, execute, needs_ray, package_versions, start_ray
from topicaudit.engine.storage.integrity import verify_run_directory
from topicaudit.engine.storage.lock import writer_lock
from topicaudit.engine.execution.parallel import wait_for_stop
from topicaudit.engine.execution.phases import phase
from topicaudit.engine.execution.plan import check_plan, make_plan
from topicaudit.engine.storage.results import (
    RESULTS_SCHEMA,
    AttackMetrics,
    CorpusInfo,
    GuaranteeInfo,
    NaturalBounds,
    RunResults,
    ShadowsInfo,
    StatisticsInfo,
    TargetInfo,
    Utility,
)
from topicaudit.engine.presentation.roc_figure import warm_up as warm_figure
from topicaudit.engine.presentation.roc_figure import write_roc_figure
from topicaudit.engine.storage.bounded_read import read_results, read_run_toml
from topicaudit.engine.storage.check_result import NO_CLAIM
from topicaudit.engine.storage.durable_write import atomic_write_bytes
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.storage.run_cache import behaviour_entry
from topicaudit.engine.replay import OtherBehaviour, Replay, check_saved_models, same_claim
from topicaudit.engine.configuration.validation import check_name, warn_more_topics_than_words
from topicaudit.engine.verdict import own_claim_verdict
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, corpus_fingerprint
from topicaudit.inputs.files import read_once
from topicaudit.loaded_code import running
from topicaudit.targets import configured_target, has_plugin, sources, vocabulary_of


def tokens_in_vocabulary(X, vocabulary: np.ndarray) -> np.ndarray:
    """Each document's tokens over a release's vocabulary (the words ζ is computed on), float64.

    A product with the vocabulary's indicator, so no copy of the corpus is made.
    """
    in_vocabulary = np.zeros(X.shape[1], dtype=np.float64)
    in_vocabulary[vocabulary] = 1.0
    return np.asarray(X @ in_vocabulary, dtype=np.float64).ravel()


def execute_run(config: Config, quiet: bool = False, wait_for_ray: bool = True,
                wait_for_writer: float = 0.0) -> RunResults:
    """``topicaudit run``: run (or resume) the audit a run configuration describes; returns what it wrote to
    ``results.json``.

    The run directory's writer lock is held throughout: a second writer is refused.
    wait_for_ray: False returns while a Ray instance this run started is still
    shutting down (the command line prints the summary meanwhile, then calls
    ``parallel.wait_for_stop``).
    wait_for_writer: seconds to wait for another command writing the directory (a run cache's entry), instead
    of refusing at once.
    """
    config = run_config(config)
    check_name(config.name)  # before the lock makes runs/NAME-…: "../../x" made it outside runs/
    plugin = has_plugin(config.target.learner, config.target.vocabulary)  # its record holds the folder
    carried = None
    while True:
        try:
            with writer_lock(config.run_dir, wait=wait_for_writer), running(), fitted_code.plugin_run(plugin):
                results = _execute_run(config, quiet, carried)  # (what a run imports is noted, XIX-zp)
            break
        except OtherBehaviour as other:
            # the cache entry of the plug-in as it fits now (``engine.replay``); when that entry holds another's
            # models, the key's entry that refits them in place (``run_cache.REFIT``), where the loop ends
            if not quiet:
                only_the_command()
                print(f"note: the plug-in no longer fits the models kept in {config.run_dir} (its model "
                      f"'{other.replayed.model}' fitted again differs): auditing it as it fits now", file=sys.stderr)
            config.output = str(behaviour_entry(config.run_dir, other.replayed.digest if carried is None else None))
            carried = other.replayed
    if wait_for_ray:
        wait_for_stop()
    return results


def run_needs_ray(config: Config) -> bool:
    """Whether the run's experiment will need Ray (``experiment.needs_ray``), from its configuration alone: its
    shadow models, and its canaries' shadow releases when it has canaries."""
    canaries = config.attack.canaries
    return needs_ray(config.attack.shadows, canaries.shadows if canaries.count else 0)


@dataclass
class _Prepared:
    """What a run settles before its models are fitted: nothing of it is written yet."""

    corpus: Corpus
    target: Any
    guarantee: Any
    canaries: CanarySet | None
    plan: Any
    observe: bool
    fingerprint: str
    experiment: Experiment
    resuming: bool


def _execute_run(config: Config, quiet: bool, carried: Replay | None = None) -> RunResults:
    """``execute_run`` under the lock.

    Two experiments, either or both: the LiRA audit of natural documents (a
    target and ``shadows`` shadow models) and the canary audit (one canary
    release, scored without shadows). Ray starts (or is joined) in the
    background once the corpus is read, while the plan is drawn and the run
    directory checked; it stops in the background once the models are fitted.
    """
    started = time.perf_counter()
    validate(config)
    with phase("load"):
        corpus = load_audit_corpus(config)
    target = configured_target(config.target)
    warn_more_topics_than_words(config.target.k, corpus.X.shape[1], "[target] k (--k) asks for")
    check_saved_models(config, corpus, target, carried)  # a plug-in's, by fitting one again
    finished = finished_run(config, corpus, target, quiet)
    if finished is not None:
        return finished
    if config.attack.shadows:
        check_plan(corpus.X.shape[0], config.attack.shadows, config.seed)  # its sizes, before Ray starts
    starting = start_ray(config.ray.address, config.ray.num_cpus, corpus.X if config.attack.shadows else None,
                         target) if run_needs_ray(config) else None
    try:
        with phase("plan"):
            ready = _prepare(config, corpus, target, quiet)
        load_seconds = time.perf_counter() - started
        if starting is not None and config.attack.shadows:
            with phase("figure"):
                warm_figure()  # matplotlib's imports and fonts, for roc.png, while Ray starts
    except BaseException:
        if starting is not None:
            starting.abandon()
        raise
    with phase("experiment"):
        outcome = execute(ready.experiment, quiet, starting)
    with phase("scoring"):
        typed, natural_scores = _score(config, ready, outcome, {"load": load_seconds, **outcome.timings}, started)
    run = ready.experiment.run
    with phase("writing"):
        run.save_results(typed)
        if natural_scores is not None:
            write_roc_figure(run.path / "roc.png", typed.name or run.path.name, natural_scores, typed,
                             atomic_write_bytes)
    return typed


def finished_in_place(config: Config) -> bool:
    """Whether ``config``'s run directory holds this very run, finished (``finished_run``): nothing to fit, so a
    cached audit is reused in the process asking (``engine.cached_audit``)."""
    config = run_config(config)
    check_name(config.name)
    validate(config)
    if has_plugin(config.target.learner, config.target.vocabulary):
        return False  # its fit is checked (``engine.replay``) in the new process: this one may not run its files (X5)
    return finished_run(config, load_audit_corpus(config), configured_target(config.target)) is not None


def finished_run(config: Config, corpus: Corpus, target, quiet: bool = True) -> RunResults | None:
    """The run directory's results as they stand, when it holds this very run finished: same configuration
    and corpus content (its config hash), same name and reported attacks, same code (topicaudit's version and
    source digest, the dependencies' versions) and every file verified by its manifest; else None.

    Such a run is returned at once, marked ``resumed``, and nothing in its directory is rewritten: no model
    is reloaded or rescored, and Ray is not started. Anything else (an unfinished run, another code version,
    a file the manifest does not vouch for) takes the ordinary resume, which refits only what is missing and
    rescores everything with this code. Another configuration in the directory is refused, as there.
    """
    run = RunDirectory(config.run_dir)
    results_path = run.path / "results.json"
    if not results_path.is_file() or results_path.is_symlink():
        return None
    chash = config_hash(config, corpus_fingerprint(corpus))
    if not run.check_compatible(chash):  # another configuration: refused here, as a resume refuses it
        return None
    try:
        with read_once():  # the results and configuration compared are the files their hashes were checked on
            if verify_run_directory(run.path).unverified:  # the pre-manifest layout: rescored as before
                return None
            if not _every_listed_file_in_place(run.path):  # e.g. a model missing or a folder in its place
                return None
            stored = read_results(results_path)
            recorded = read_run_toml(run.path / "config.toml")
    except (UserError, OSError, ValueError):
        return None  # the ordinary resume says what is wrong, or repairs it
    same = (stored.config_hash == chash and stored.name == config.name and stored.versions == package_versions()
            and recorded.get("attack", {}).get("attacks") == list(config.attack.attacks)
            and _same_plugin_code(stored, config) and same_claim(config, target, stored.target.guarantee))
    if not same or (stored.attacks and not (run.path / "roc.png").is_file()):
        return None  # (roc.png is drawn after results.json: a run stopped between them draws it on resume)
    if fitted_code.changed(stored.target.loaded_code):
        # Code the fit loaded from outside the key (imported later by start-up code: a thread, a profiler, a finder
        # or a wrapper it left) has changed: the resume refits each model whose code changed (``rundir``, XIX-zh).
        return None
    if not quiet:
        only_the_command()
        print(f"reusing {run.path}: it holds this audit, finished with the same configuration, corpus content and "
              "code (nothing refitted or rescored)", file=sys.stderr)
    return replace(stored, resumed=True, absent=stored.absent - {"resumed"})


def _same_plugin_code(stored: RunResults, config: Config) -> bool:
    """Whether the plug-ins' code recorded when the run finished is this process's, digested: the key was taken when
    the run started, and code edited while it ran (then put back) was recorded without a digest, or with another."""
    now = sources(config.target.learner, config.target.vocabulary)
    recorded = {key: value for key in ("learner_source", "vocabulary_source")
                if (value := getattr(stored.target, key)) is not None}
    return recorded == now and all("source_sha256" in found for found in now.values())


def _every_listed_file_in_place(run_dir: Path) -> bool:
    """Whether every file the manifest lists (the models too, which the verdict does not read) is a regular file
    there, not a link: a run missing one is not finished as it was written, and the ordinary resume repairs or
    refuses it."""
    listed = manifest.entries(run_dir) or {}
    return all((run_dir / name).is_file() and not (run_dir / name).is_symlink() for name in listed
               if name not in manifest.CHECK_FILES)  # check's records, not the run's: deleting one changes no result


def _prepare(config: Config, corpus: Corpus, target, quiet: bool) -> _Prepared:
    """The canaries, the plan and the experiment of a run, checked against its directory (nothing written)."""
    guarantee = target.guarantee()
    canaries = build_canaries(config, corpus.X, target, guarantee.adjacency)
    plan = make_plan(corpus.X.shape[0], config.attack.shadows, config.seed) if config.attack.shadows else None
    observe = observed_mechanism(config, target, canaries)
    fingerprint = corpus_fingerprint(corpus)
    experiment = Experiment(
        run=RunDirectory(config.run_dir), config_hash=config_hash(config, fingerprint), record=config.to_dict(),
        seeds={"seed": config.seed, **({"target_fit": plan.target_seed} if plan else {}),
               **({"canary_fit": canaries.fit_seed} if canaries else {})},
        X=corpus.X if plan is not None else None, target=target, plan=plan,
        shadow_vocabulary=config.attack.shadow_vocabulary, canaries=canaries, canary_X=corpus.X,
        observe=canaries.observed_columns if observe else None,
        tol=config.attack.tol, ray_address=config.ray.address, num_cpus=config.ray.num_cpus)
    resuming = experiment.resuming()
    if not quiet:
        n_tokens = int(corpus.X.sum())
        parts = [f"{config.attack.shadows} shadow models"] if plan else []
        if canaries:
            parts.append(f"{canaries.count} {canaries.kind} canaries" + (
                f" ({len(canaries.shadow_in)} shadow canary releases)" if canaries.shadow_in is not None else ""))
        only_the_command()
        print(f"{'resuming' if resuming else 'auditing'} {corpus.source}: {corpus.X.shape[0]} documents, "
              f"{corpus.X.shape[1]} words, {n_tokens} tokens; learner {config.target.learner}, "
              f"k={config.target.k}, {' and '.join(parts)} → {experiment.run.path.resolve()}", file=sys.stderr)
    return _Prepared(corpus, target, guarantee, canaries, plan, observe, fingerprint, experiment, resuming)


def _score(config: Config, ready: _Prepared, outcome, timings: dict[str, float],
           started: float) -> tuple[RunResults, dict[str, np.ndarray] | None]:
    """Attack scores, bounds and utility from the experiment's outcome (saved as they are computed): the results,
    and the natural documents' scores (None without shadows)."""
    corpus, guarantee, canaries, plan, observe = ready.corpus, ready.guarantee, ready.canaries, ready.plan, ready.observe
    experiment, fingerprint, resuming = ready.experiment, ready.fingerprint, ready.resuming
    run = experiment.run
    target_release, stats = outcome.target_release, outcome.statistics

    bound_delta = guarantee.delta if math.isfinite(guarantee.epsilon) else config.attack.delta
    target_info = TargetInfo(
        learner=config.target.learner,
        k=config.target.k,
        vocabulary_step=vocabulary_of(config.target.learner, config.target.k, config.target.params,
                                      config.target.vocabulary),
        guarantee=GuaranteeInfo.of(guarantee),
        test_under_noise=config.target.test_under_noise if config.target.test_under_noise != 1 else None,
        test_bug=config.target.test_bug or None,
        # a plug-in's class path, distribution and version (topicaudit.targets.plugins)
        **sources(config.target.learner, config.target.vocabulary),
        # after the fit: what start-up code imported meanwhile too (XIX-zh), and what the fits' processes (Ray
        # workers) loaded, with where the names they imported are found (XIX-zo)
        loaded_code=fitted_code.settled({**fitted_code.loaded_outside(), **experiment.run.loaded_code}),
    )
    ray = {"address": (config.ray.address or "local") if experiment.needs_ray else "none (no shadow models)",
           **outcome.cluster, **({"fitted_in_driver": outcome.fitted_in_driver} if experiment.needs_ray else {})}
    results = RunResults(
        schema=RESULTS_SCHEMA,
        name=config.name,
        config_hash=experiment.config_hash,
        corpus=CorpusInfo(
            source=corpus.source,
            n_docs=int(corpus.X.shape[0]),
            n_words=int(corpus.X.shape[1]),
            n_tokens=int(corpus.X.sum()),
            n_dropped_empty=int(corpus.n_dropped_empty),
            # where the corpus was read (absolute, so reports find it from any directory)
            path=str(Path(config.corpus.path).resolve()) if config.corpus.path else None,
            fingerprint=fingerprint,
        ),
        target=target_info,
        shadows=ShadowsInfo(n_shadows=config.attack.shadows, vocabulary=config.attack.shadow_vocabulary,
                            in_per_document=config.attack.shadows // 2),
        metrics_convention="tpr_at_fpr_F is the largest TPR over thresholds whose FPR is at most F",
        attacks={},
        seeds=experiment.seeds,
        versions=outcome.versions,
        manifest=manifest.SCHEMA,  # this run keeps one: without it, it is refused
        ray=ray,
        resumed=resuming,
        warnings=outcome.worker_warnings,
    )
    natural_scores = None
    if plan is not None:
        t = time.perf_counter()
        target_stats = {name: values[0] for name, values in stats.items()}
        shadow_stats = {name: values[1:] for name, values in stats.items()}
        n_tokens = tokens_in_vocabulary(corpus.X, target_release.vocabulary)
        counts = corpus.X[:, target_release.vocabulary]
        scores = attack_scores(target_stats, shadow_stats, plan.shadow_in, n_tokens, config.attack.attacks, counts)
        run.save_arrays("statistics.npz", {
            **{f"target_{name}": v for name, v in target_stats.items()},
            **{f"shadow_{name}": v for name, v in shadow_stats.items()},
            "n_tokens": n_tokens,
        })
        natural_scores = {**scores, "is_member": plan.target_in, "doc_index": corpus.doc_index}
        run.save_arrays("scores.npz", natural_scores)
        bounds = epsilon_lower_bounds(scores, plan.target_in, bound_delta, config.attack.alpha,
                                      bounded_attacks(list(scores)))
        results = replace(
            results,
            attacks={name: AttackMetrics.of(summarize(s, plan.target_in)) for name, s in scores.items()},
            epsilon_lower_bounds=NaturalBounds(method="one-run", confidence=1 - config.attack.alpha,
                                               delta=bound_delta, epsilon=max(b.epsilon for b in bounds.values()),
                                               by_attack=bounds),
            statistics=StatisticsInfo(names=list(STATISTICS), max_zeta_gap=float(stats["gap"].max()),
                                      zeta_tol=config.attack.tol),
            target=replace(target_info, vocabulary_size=int(target_release.vocabulary.size),
                           n_members=int(plan.target_in.sum()),
                           # A learner's data-dependent privacy monitor (cgs-monitor), when it has one.
                           monitor=target_release.info.get("monitor")))
        timings["scoring"] = time.perf_counter() - t
        t = time.perf_counter()
        results = replace(results, utility=Utility.of(release_utility(corpus.X, target_release, plan.target_in)))
        timings["utility"] = time.perf_counter() - t
    if canaries is not None:
        t = time.perf_counter()
        canary_values = all_canary_scores(outcome.canary_release, outcome.canary_shadows, canaries, config.attack.tol)
        run.save_arrays("canary_scores.npz", {"ids": canaries.ids, **canary_values})
        # A release with no transcript (a DP vocabulary step that released no word at all) is scored as a release.
        observed = "mechanism" if observe and outcome.canary_release.transcript is not None else "release"
        results = replace(results, canaries=canary_results(canaries, canary_values, outcome.canary_release,
                                                           bound_delta, config.attack.alpha, observed))
        timings["canary_scoring"] = time.perf_counter() - t
    t = time.perf_counter()
    canary_files = (canary_values, canaries.coins, canaries.kind, canaries.anchors) if canaries is not None else None
    try:
        verdict, tested = own_claim_verdict(results, natural_scores, canary_files, run.path)
    except UserError:
        pass  # nothing these tests can bound (e.g. word canaries only, for a document-level claim)
    else:
        stored = {key: value for key, value in verdict.to_json().items() if key not in ("schema", "run_dir")}
        if not tested:  # bounds at ε = 0 prove no refutation: a script reading "VIOLATED" here read one
            stored.update(violated=False, verdict=NO_CLAIM)
        results = replace(results, verdict={"claim_tested": tested, **stored})
    timings["verdict"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    if "address" in ray:
        ray = {**ray, "models_by_node": run.models_by_node()}
    # (saved by the caller, serialised once: run.save_results)
    return replace(results, ray=ray, timings_s={name: round(value, 3) for name, value in timings.items()}), \
        natural_scores
