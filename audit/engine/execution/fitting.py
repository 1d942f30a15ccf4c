"""Fitting an experiment's models: the plan's target and shadows as Ray tasks (each scored in its own task,
saved as it finishes), the first of them in the driver while a local Ray instance starts, the canary releases,
the statistics of reloaded or given models in batches, and the warnings the fits raised, shown once each.
``topicaudit.engine.execution.experiment.execute`` calls them inside its Ray session."""
from __future__ import annotations

import math
import os
import time
import warnings
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from topicaudit.engine.execution.parallel import StartingSession, one_cpu_task
from topicaudit.engine.execution.progress import Progress
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.execution.tasks import (
    fit_and_score,
    fit_and_score_sharing_vocabulary,
    fit_release,
    statistics_batch,
)
from topicaudit.errors import UserError
from topicaudit.targets.base import Release

if TYPE_CHECKING:  # the experiment calls these functions: its type is only named here
    from topicaudit.engine.execution.experiment import Experiment


class WorkerWarnings:
    """Warnings raised in fits (returned by Ray's tasks, or recorded in the driver), shown once each."""

    def __init__(self):
        self.messages: list[str] = []

    def add(self, messages: list[str], where: str = "in a Ray worker") -> None:
        for message in messages:
            if message not in self.messages:
                self.messages.append(message)
                warnings.warn(f"{where}: {message}", RuntimeWarning, stacklevel=2)


def learner_refused(target, error: ValueError, what: str = "this corpus") -> UserError:
    """A learner refusing the data (ValueError in its task) as a UserError naming the learner.

    Learners check what only the data can tell (e.g. a corpus too large for a
    dense sampler) and raise ValueError with the reason and the fix.
    """
    cause = getattr(error, "cause", None) or error  # a RayTaskError carries the worker's exception
    learner = type(target.learner).__name__ if hasattr(target, "learner") else type(target).__name__
    if str(cause).startswith("its vocabulary step ("):  # the step's selection, refused before the learner ran
        return UserError(f"the target's vocabulary step could not select the words of {what}: {cause}")
    return UserError(f"the learner ({learner}) could not fit {what}: {cause}")


def _fitted(ray, ref, target, worker_warnings: WorkerWarnings) -> tuple[Release, float, str, dict[str, str]]:
    """A fit task's result, its warnings reported."""
    try:
        release, seconds, node, messages, loaded = ray.get(ref)
    except ValueError as error:
        raise learner_refused(target, error) from None
    worker_warnings.add(messages)
    return release, seconds, node, loaded


def _collect_fits(ray, run: RunDirectory, target, pending: dict, releases, chash: str, progress: Progress,
                  worker_warnings: WorkerWarnings) -> float:
    """Wait for the fit tasks in ``pending`` (ref → model key), saving each model as it arrives.

    releases: list or dict filled by model key. Returns the tasks' summed fit seconds.
    """
    seconds = 0.0
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        key = pending.pop(done[0])
        releases[key], fit_seconds, node, loaded = _fitted(ray, done[0], target, worker_warnings)
        run.save_model(key, releases[key], chash, fit_seconds, node, loaded)
        seconds += fit_seconds
        progress.advance()
    progress.close()
    return seconds


def _topics(target) -> int | None:
    """The number of topics every model of the experiment has (None when the learner does not say)."""
    k = getattr(getattr(target, "learner", target), "k", None)
    return k if isinstance(k, int) and not isinstance(k, bool) else None


def _shadow_vocabulary(exp: Experiment, target_vocabulary):
    """The vocabulary the shadows train over: the target's (its ids, or the reference a task returns them
    by), None for each shadow's own step, or the ids the experiment gives."""
    vocabulary = exp.shadow_vocabulary
    if isinstance(vocabulary, str):
        return target_vocabulary if vocabulary == "target" else None
    return vocabulary


DRIVER_FITS_VARIABLE = "TOPICAUDIT_DRIVER_FITS"  # "0": the driver leaves every fit to Ray (docs/configuration.md)


def fit_while_ray_starts(exp: Experiment, starting: StartingSession | None) -> dict[int, tuple]:
    """Models of the plan fitted in this process while a local Ray instance starts: row → ``fit_and_score``'s
    result (row 0, the target, first: the shadows may train over its vocabulary).

    A local start keeps about one core busy for seconds, while the driver, its
    work prepared, would wait on the other. A fit in flight when Ray comes up
    is finished first, so a fit longer than the rest of the start holds the
    workers back by the difference (the shadows may need the target's words),
    as 20news's target at k = 20 does; still, about 3 s were saved there and
    on PHEME (benchmarks/RESULTS.md §22). Same inputs and seeds as in a
    worker, on one BLAS thread as there, so each model is the one a worker
    would fit. Fresh runs only (a resumed run reloads its models first).
    """
    done: dict[int, tuple] = {}
    plan = exp.plan
    if (os.environ.get(DRIVER_FITS_VARIABLE) == "0" or starting is None or not starting.local or plan is None
            or exp.released is not None
            or (exp.run.models.exists() and any(exp.run.models.iterdir()))):
        return done
    scored = exp.X if exp.scored is None else exp.scored
    jobs = ((row, plan.target_in if row == 0 else plan.shadow_in[row - 1],
             plan.target_seed if row == 0 else int(plan.shadow_seeds[row - 1])) for row in range(1 + plan.n_shadows))
    with threadpool_limits(1):
        for row, members, seed in jobs:
            if starting.ready():
                break
            vocabulary = None if row == 0 else _shadow_vocabulary(exp, done[0][0].vocabulary)
            try:
                done[row] = fit_and_score(exp.target, exp.X, np.flatnonzero(members), seed, vocabulary, scored,
                                          exp.tol, in_ray=False)
            except ValueError as error:
                raise learner_refused(exp.target, error) from None
    return done


def fit_and_score_plan(ray, exp: Experiment, X_ref, scored_ref, quiet: bool, worker_warnings: WorkerWarnings,
                        timings: dict[str, float], prefitted: dict[int, tuple] | None = None
                        ) -> tuple[Release, dict[str, np.ndarray], int]:
    """The model under audit and every shadow of the plan, fitted (or reloaded), with their statistics.

    A model fitted here gets its statistics in the same task, so the driver
    keeps no shadow's Φ: memory stays flat as N grows. Reloaded and given
    models are scored in batches afterwards. prefitted: models this process
    fitted while Ray started (``fit_while_ray_starts``), saved here as if a
    task had returned them. Returns the target's release, the statistics
    (name → (1 + N, scored documents), row 0 the target) and how many shadows
    were reloaded.
    """
    run, chash, plan, X = exp.run, exp.config_hash, exp.plan, exp.X
    assert plan is not None and X is not None  # an experiment with shadow models has both
    fused = one_cpu_task(ray, fit_and_score)
    rows: list[dict[str, np.ndarray] | None] = [None] * (1 + plan.n_shadows)
    to_score: dict[int, Release] = {}  # row → a release whose statistics are still to compute
    prefitted = prefitted or {}

    def keep(result: tuple, row: int, key, where: str = "in a Ray worker") -> Release:
        release, seconds, node, statistics, score_seconds, messages, loaded = result
        worker_warnings.add(messages, where)
        run.save_model(key, release, chash, seconds, node, loaded)
        rows[row] = statistics
        timings["fit_cpu"] += seconds
        timings["statistics_cpu"] += score_seconds
        return release

    def finished(ref, row: int, key) -> Release:
        try:
            result = ray.get(ref)
        except ValueError as error:
            raise learner_refused(exp.target, error) from None
        return keep(result, row, key)

    n_topics, n_words = _topics(exp.target), X.shape[1]
    target_release, target_ref, vocabulary_ref = exp.released, None, None
    if target_release is not None:
        to_score[0] = target_release
    elif 0 in prefitted:
        target_release = prefitted[0][0]
    else:
        loaded = run.load_model(None, chash, n_topics, n_words)
        if loaded is None:
            task = (exp.target, X_ref, np.flatnonzero(plan.target_in), plan.target_seed, None, scored_ref, exp.tol)
            if any(run.model_path(i).exists() for i in range(plan.n_shadows)):
                # Resuming: the saved shadows are checked against the target's vocabulary, so it comes first.
                target_release = finished(fused.remote(*task), 0, None)
            else:
                # The shadows' tasks take the target's vocabulary as a reference: queued now, they start the
                # moment the target's task ends, without waiting for the driver.
                vocabulary_ref, target_ref = one_cpu_task(ray, fit_and_score_sharing_vocabulary).options(
                    num_returns=2).remote(*task)
        else:
            target_release, seconds = loaded
            timings["fit_cpu"] += seconds
            to_score[0] = target_release
    if target_ref is not None:
        shared = vocabulary_ref
    else:
        assert target_release is not None  # given, fitted by the driver, reloaded or fitted first
        shared = target_release.vocabulary
    vocabulary = _shadow_vocabulary(exp, shared)
    pending = {}
    for i in range(plan.n_shadows):
        if 1 + i in prefitted:
            continue
        loaded = run.load_model(i, chash, n_topics, n_words)
        if loaded is not None:
            if vocabulary is not None and not np.array_equal(loaded[0].vocabulary, vocabulary):
                raise UserError(f"{run.model_path(i)} is not over the target's released vocabulary, as every "
                                "shadow of this run is; it is not a model of this run — delete it to refit it")
            to_score[1 + i], seconds = loaded
            timings["fit_cpu"] += seconds
        else:
            pending[fused.remote(exp.target, X_ref, np.flatnonzero(plan.shadow_in[i]), int(plan.shadow_seeds[i]),
                                 vocabulary, scored_ref, exp.tol)] = i
    if prefitted:  # fitted by the driver, on the node it runs on; saved while the workers run the rest
        here = ray.get_runtime_context().get_node_id()
        for row, result in sorted(prefitted.items()):
            keep((*result[:2], here, *result[3:]), row, None if row == 0 else row - 1, "in a fit in the driver")
            timings["driver_fit_cpu"] = timings.get("driver_fit_cpu", 0.0) + result[1] + result[4]
    if target_ref is not None:
        target_release = finished(target_ref, 0, None)  # first, as when the shadows waited for it
    n_reused = plan.n_shadows - len(pending) - sum(row > 0 for row in prefitted)
    # The fits (with their statistics) are the run's bulk: what follows them takes seconds (benchmarks/RESULTS.md)
    progress = Progress("shadow models", plan.n_shadows, quiet=quiet,
                        then="then scoring and writing, seconds" + (", after the statistics of reloaded models"
                                                                    if to_score else ""))
    progress.done = plan.n_shadows - len(pending)
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        i = pending.pop(done[0])
        finished(done[0], 1 + i, i)  # the release itself is dropped here: only its statistics are kept
        progress.advance()
    progress.close()
    if to_score:
        t = time.perf_counter()
        order = sorted(to_score)
        scored = compute_statistics(ray, scored_ref, [to_score[row] for row in order], exp.tol,
                                    max(int(ray.cluster_resources().get("CPU", 1)), 1), quiet, worker_warnings)
        for j, row in enumerate(order):
            rows[row] = {name: values[j] for name, values in scored.items()}
        timings["statistics"] = time.perf_counter() - t
    assert target_release is not None
    complete = [row for row in rows if row is not None]
    if len(complete) != len(rows):  # not an assert (``python -O`` strips it): a missing row misaligns the evidence
        raise RuntimeError(f"{len(rows) - len(complete)} shadow rows were neither fitted, reloaded nor scored")
    return target_release, {name: np.stack([row[name] for row in complete]) for name in complete[0]}, n_reused


def fit_canary_releases(ray, exp: Experiment, quiet: bool, worker_warnings: WorkerWarnings
                         ) -> tuple[Release, list[Release], float]:
    """The canary release and its shadows (if any), reusing saved ones; also returns their fit seconds.

    Ray tasks when a session is open; in this process otherwise, so a
    shadow-free canary audit starts no cluster.
    """
    canaries, run, chash = exp.canaries, exp.run, exp.config_hash
    assert canaries is not None  # called for a canary experiment only
    jobs = [("canary-target", canaries.coins, canaries.fit_seed)]
    if canaries.shadow_in is not None and canaries.shadow_seeds is not None:
        jobs += [(f"canary-shadow-{i + 1:04d}", coins, int(seed))
                 for i, (coins, seed) in enumerate(zip(canaries.shadow_in, canaries.shadow_seeds))]
    releases, seconds, pending = {}, 0.0, {}
    for name, coins, seed in jobs:
        loaded = run.load_model(name, chash, _topics(exp.target))
        if loaded is not None:
            releases[name], fit_seconds = loaded
            seconds += fit_seconds
            continue
        X_train = canaries.training_matrix(exp.canary_X, coins)
        rows = np.arange(X_train.shape[0])
        if ray is not None:
            pending[one_cpu_task(ray, fit_release).remote(exp.target, X_train, rows, seed, None, exp.observe)] = name
            continue
        try:
            releases[name], fit_seconds, node, messages, loaded = fit_release(exp.target, X_train, rows, seed,
                                                                              None, exp.observe)
        except ValueError as error:
            raise learner_refused(exp.target, error, "the canary training set") from None
        worker_warnings.add(messages, "in the canary fit")
        run.save_model(name, releases[name], chash, fit_seconds, node, loaded)
        seconds += fit_seconds
    progress = Progress("canary releases", len(jobs), quiet=quiet or len(jobs) == 1)
    progress.done = len(jobs) - len(pending)
    seconds += _collect_fits(ray, run, exp.target, pending, releases, chash, progress, worker_warnings)
    return releases["canary-target"], [releases[name] for name, _, _ in jobs[1:]], seconds


def compute_statistics(ray, X_ref, releases: list[Release], tol: float, cpus: int, quiet: bool,
                       worker_warnings: WorkerWarnings | None = None) -> dict[str, np.ndarray]:
    """Every statistic of every document of X under every release: name → (len(releases), documents)."""
    task = one_cpu_task(ray, statistics_batch)
    batch = max(1, math.ceil(len(releases) / (4 * max(cpus, 1))))
    starts = list(range(0, len(releases), batch))
    refs = {task.remote(X_ref, releases[s:s + batch], tol): s for s in starts}
    parts: dict[int, dict[str, np.ndarray]] = {}
    progress = Progress("scoring models", len(releases), quiet=quiet)
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        start = refs.pop(done[0])
        parts[start], messages = ray.get(done[0])
        if worker_warnings is not None:
            worker_warnings.add(messages)
        progress.advance(len(parts[start]["zeta"]))
    progress.close()
    ordered = [parts[s] for s in starts]
    return {name: np.concatenate([p[name] for p in ordered]) for name in ordered[0]}
