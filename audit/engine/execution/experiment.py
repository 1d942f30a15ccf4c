"""The one shadow experiment that ``run``, ``audit``, ``sweep`` and ``check`` drive.

An experiment is a pool of documents, a plan saying which models train on
which of them, the pipeline those models run, and the model under audit:
either trained here on the plan's target half (``run``) or given (a user's Φ,
``audit``), plus optional canary releases. :func:`execute` does the part every
front end shares: open the run directory, start or join Ray, fit (or reload)
every model one file each as it finishes, and compute the statistics of every
scored document under every model. Front ends turn the statistics into
attack scores and their own results file.
"""
from __future__ import annotations

import datetime
import os
import platform
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.canaries import CanarySet
from topicaudit.engine.storage.lock import NAME as LOCK_NAME
from topicaudit.engine.storage.lock import holds_only_the_lock
from topicaudit.engine.execution.parallel import StartingSession, cluster_description, one_cpu_task, ray_session
from topicaudit.engine.execution.fitting import (
    WorkerWarnings,
    fit_and_score_plan,
    fit_canary_releases,
    fit_while_ray_starts,
)
from topicaudit.engine.execution.phases import phase
from topicaudit.engine.execution.plan import Plan
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.execution.tasks import warm_up
from topicaudit.owned_folders import LinkedFolder, open_folder, remove_empty
from topicaudit.targets.base import Release
from topicaudit.version import __version__, source_digest


def needs_ray(shadows: int, canary_shadows: int) -> bool:
    """Whether an experiment fits its models as Ray tasks: the one rule, for ``Experiment.needs_ray`` and for
    ``run``, which asks it of its configuration (``engine.run.run_needs_ray``) before the experiment exists, so
    that Ray starts while the plan is drawn.

    Ray is needed for shadow models, of the natural documents or of the
    canaries; a target or a canary release alone is fitted in this process,
    so a shadow-free canary audit starts no cluster.
    """
    return shadows > 0 or canary_shadows > 0


@dataclass
class Experiment:
    """Everything one experiment needs; checked and built before anything is written."""

    run: RunDirectory
    config_hash: str                 # identity of the numbers: a directory made for another is refused
    record: dict[str, Any]           # the resolved configuration, kept as config.toml
    seeds: dict[str, int]            # every seed, for the manifest
    X: sp.csr_matrix | None          # the pool (documents × corpus words); None without natural-document shadows
    target: Any                      # the pipeline the shadows (and a trained target) run
    plan: Plan | None                # membership of the pool; None for a canary-only audit
    plan_arrays: dict[str, np.ndarray] | None = None  # what plan.npz keeps (default: plan.arrays())
    released: Release | None = None  # the model under audit when it is given rather than trained here
    shadow_vocabulary: Any = "target"  # "target": the target's released words; "own": each shadow's step; or ids
    scored: sp.csr_matrix | None = None  # documents whose statistics are computed (default: the pool)
    canaries: CanarySet | None = None
    canary_X: sp.csr_matrix | None = None  # the corpus canary training sets are built from
    observe: np.ndarray | None = None      # columns whose mechanism outputs the canary releases record
    tol: float = 1e-8
    ray_address: str = ""
    num_cpus: int = 0

    @property
    def needs_ray(self) -> bool:
        canaries = self.canaries
        return needs_ray(0 if self.plan is None else self.plan.n_shadows,
                         0 if canaries is None or canaries.shadow_in is None else len(canaries.shadow_in))

    def resuming(self) -> bool:
        """Whether the run directory holds this experiment's earlier work (another's is refused)."""
        return self.run.check_compatible(self.config_hash)


@dataclass
class Outcome:
    """What :func:`execute` hands back to the front end."""

    target_release: Release | None = None
    statistics: dict[str, np.ndarray] | None = None  # name → (1 + N, scored documents): row 0 the target
    canary_release: Release | None = None
    canary_shadows: list[Release] = field(default_factory=list)
    n_reused: int = 0
    fitted_in_driver: int = 0  # models the driver fitted while a local Ray started
    cluster: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    worker_warnings: list[str] = field(default_factory=list)  # raised inside Ray workers, once each


def package_versions() -> dict[str, str]:
    """The versions a run records (results.json, the manifest's provenance), with a digest of topicaudit's own
    source: a finished run is returned as it stands only under the same ones (``engine.run``)."""
    versions = {"topicaudit": __version__, "topicaudit_source": source_digest()[:16],
                "python": platform.python_version()}
    for name in ("numpy", "scipy", "scikit-learn", "numba", "ray", "nltk"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


@contextmanager
def removed_on_user_error(path: Path):
    """Remove a run directory this block creates if an error stops it before any model is saved.

    Such a directory holds nothing worth resuming, and its config hash would
    block the corrected configuration from using the same path.
    """
    existed = path.exists() and not holds_only_the_lock(path)  # a directory only locked is not the user's
    try:  # what it held is kept: a user's --output holding only an empty models/ lost that folder on a crash
        found = set(os.listdir(path)) if path.is_dir() else set()
    except OSError:
        found = set()
    try:
        yield
    except Exception:  # a UserError, or a crash before anything worth resuming
        if not existed:
            _remove_unsaved(path, found)
        raise


def _remove_unsaved(path: Path, found: set[str] = frozenset()) -> None:
    """Empty the run directory of a start that saved no model of what it made (not the names in ``found``), by
    the descriptor its writer lock holds (``topicaudit.owned_folders``): a directory swapped for a link
    meanwhile is never emptied through it."""
    try:
        folder = open_folder(path)
    except (OSError, LinkedFolder):  # nothing is deleted through a link
        return
    with folder:
        try:
            if "models" in folder.names():
                with folder.child("models") as models:
                    if any(name.endswith(".npz") for name in models.names()):
                        return
        except (OSError, LinkedFolder):
            return
        for name in folder.names():
            if name != LOCK_NAME and name not in found:  # the lock's holder removes the directory itself
                folder.remove_tree(name)
        if not folder.names():  # by its parent's descriptor, and only this folder (rmtree by path went through
            remove_empty(path, same_as=folder)  # a cache's runs/ swapped for a link: a user's folder deleted)


def _object_store_bytes(X: sp.csr_matrix | None) -> int:
    """The object store a local instance gets: room for the count matrix and what the tasks return."""
    return 8 * (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) if X is not None else 0


def start_ray(address: str, num_cpus: int, X: sp.csr_matrix | None, target) -> StartingSession:
    """Start (or join) Ray in the background while the driver draws the plan; the session stops in the background.

    Once Ray is up, one task per CPU unpickles ``target`` (importing its
    learner's modules) and loads the ζ kernels in a worker, so the fits find
    their workers ready. Nothing a fit computes depends on which worker runs it.
    """
    def warm(ray) -> list:
        cpus = max(int(ray.cluster_resources().get("CPU", 1)), 1)
        task = one_cpu_task(ray, warm_up)
        return [task.remote(target) for _ in range(cpus)]

    local = not (address or os.environ.get("RAY_ADDRESS"))
    return StartingSession(ray_session(address, num_cpus, object_store_bytes=_object_store_bytes(X)), then=warm,
                           local=local)


def execute(exp: Experiment, quiet: bool = False, starting: StartingSession | None = None) -> Outcome:
    """Fit (or reload) every model of the experiment and compute its statistics.

    The run directory is created inside the Ray session, and removed again if
    an error stops the experiment before any model is saved. starting: the
    session ``start_ray`` began (default: Ray starts here, when needed).
    """
    run = exp.run
    outcome = Outcome()
    worker_warnings = WorkerWarnings()
    prefitted: dict[int, tuple] = {}
    session: AbstractContextManager[Any]
    if starting is not None:
        try:
            with phase("driver_fits"):
                prefitted = fit_while_ray_starts(exp, starting)
        except BaseException:
            starting.abandon()
            raise
        session = starting.session()
    else:
        session = (ray_session(exp.ray_address, exp.num_cpus, object_store_bytes=_object_store_bytes(exp.X))
                   if exp.needs_ray else nullcontext(None))
    with removed_on_user_error(run.path), session as ray:
        outcome.cluster = cluster_description(ray) if ray is not None else {"nodes": 0, "cpus": 0}
        outcome.versions = package_versions()
        run.create(exp.record, {
            "config_hash": exp.config_hash,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": outcome.versions, "seeds": exp.seeds,
        })
        if exp.canaries is not None:
            run.keep_arrays("canaries.npz", exp.canaries.arrays())
            t = time.perf_counter()
            with phase("canary_fits"):
                outcome.canary_release, outcome.canary_shadows, outcome.timings["canary_fit_cpu"] = \
                    fit_canary_releases(ray, exp, quiet, worker_warnings)
            outcome.timings["canary_fit_wall"] = time.perf_counter() - t
        if exp.plan is not None:
            run.keep_plan(exp.plan_arrays if exp.plan_arrays is not None else exp.plan.arrays())
            X_ref = ray.put(exp.X)
            scored_ref = X_ref if exp.scored is None else ray.put(exp.scored)
            t = time.perf_counter()
            outcome.timings.update(fit_cpu=0.0, statistics_cpu=0.0, statistics=0.0)
            with phase("fits"):
                outcome.target_release, outcome.statistics, outcome.n_reused = fit_and_score_plan(
                    ray, exp, X_ref, scored_ref, quiet, worker_warnings, outcome.timings, prefitted)
            outcome.fitted_in_driver = len(prefitted)
            del X_ref, scored_ref  # released while Ray runs: it may stop in the background once the block ends
            # fits and the statistics computed in their tasks; "statistics": reloaded or given models alone
            outcome.timings["fit_wall"] = time.perf_counter() - t - outcome.timings["statistics"]
    outcome.worker_warnings = worker_warnings.messages
    return outcome
