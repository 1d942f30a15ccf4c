"""The work done inside Ray tasks, kept apart from the driver's imports.

A worker unpickles these functions by reference, importing this module: it
needs the learners and the ζ solver, not the corpus loaders, nltk or the
attack statistics the driver uses. Each task returns the warnings it raised:
a worker's own stderr never reaches the user.
"""
from __future__ import annotations

import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.statistics import model_statistics
from topicaudit.attacks.zeta import warmup
from topicaudit.engine.storage.fitted_code import loaded_outside
from topicaudit.errors import developer_warning
from topicaudit.loaded_code import fitting
from topicaudit.targets.base import Release


@contextmanager
def recorded_warnings():
    """Collect the messages of warnings raised in the block (the list is filled when it ends)."""
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield messages
    messages.extend(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught
                                  if not developer_warning(w.category)))


def fit_release(target, X: sp.csr_matrix, rows: np.ndarray, seed: int,
                vocabulary: np.ndarray | None, observe: np.ndarray | None = None, *, in_ray: bool = True
                ) -> tuple[Release, float, str, list[str], dict[str, str]]:
    """The release, its fit's CPU seconds, the id of the Ray node that fitted it ("" outside Ray), its warnings, and
    the code this process loaded from outside the cache key (``fitted_code.loaded_outside``: a worker's own imports
    during the fit are no driver's).

    CPU time of this process (every thread of it), so the run's ``*_cpu``
    timings are CPU time wherever the fit ran, not the wall time of a task.
    observe: corpus columns whose mechanism outputs the release's transcript records (canary audits).
    in_ray: False for a fit in the driver while Ray starts in another thread (its module may be half imported).
    """
    clock = time.process_time if in_ray else time.thread_time  # the driver's other threads are not this fit
    start = clock()
    with recorded_warnings() as messages, fitting():  # code compiled from text meanwhile is noted (loaded_code)
        release = target.fit(X[rows], seed, vocabulary, observe) if observe is not None \
            else target.fit(X[rows], seed, vocabulary)
    ray = sys.modules.get("ray") if in_ray else None  # a Ray worker has it; a Ray-free caller need not import it
    node = ray.get_runtime_context().get_node_id() if ray is not None and ray.is_initialized() else ""
    return release, clock() - start, node, messages, loaded_outside(driver=False)


def warm_up(target) -> None:
    """Ready a worker before its first fit: ``target`` arrives unpickled (its modules imported), the ζ kernels
    load from numba's cache. Computes nothing that is kept."""
    warmup()


def statistics_batch(X: sp.csr_matrix, releases: list[Release], tol: float
                     ) -> tuple[dict[str, np.ndarray], list[str]]:
    """Every statistic of X's documents under each release, stacked; and the warnings raised."""
    with recorded_warnings() as messages:
        rows = [model_statistics(r.dense_phi(X.shape[1]), X, tol) for r in releases]
    return {name: np.stack([row[name] for row in rows]) for name in rows[0]}, messages


def fit_and_score(target, X: sp.csr_matrix, rows: np.ndarray, seed: int, vocabulary: np.ndarray | None,
                  X_scored: sp.csr_matrix, tol: float, *, in_ray: bool = True
                  ) -> tuple[Release, float, str, dict[str, np.ndarray], float, list[str], dict[str, str]]:
    """Fit one model and compute its statistics on X_scored in the same worker.

    Φ then travels to the driver once (to be saved) and never back out to a
    statistics task. Returns the release, fit seconds, node, the statistics
    (name → (documents,)), their seconds, the warnings raised and the code loaded (``fit_release``).
    """
    release, seconds, node, messages, loaded = fit_release(target, X, rows, seed, vocabulary, in_ray=in_ray)
    clock = time.process_time if in_ray else time.thread_time
    start = clock()
    with recorded_warnings() as more:
        statistics = model_statistics(release.dense_phi(X_scored.shape[1]), X_scored, tol)
    return release, seconds, node, statistics, clock() - start, messages + more, loaded


def fit_and_score_sharing_vocabulary(target, X: sp.csr_matrix, rows: np.ndarray, seed: int,
                                     vocabulary: np.ndarray | None, X_scored: sp.csr_matrix, tol: float):
    """``fit_and_score``, with the release's vocabulary also returned on its own (a task of two returns): the
    shadows' tasks take that reference as their vocabulary and start when it is ready."""
    result = fit_and_score(target, X, rows, seed, vocabulary, X_scored, tol)
    return result[0].vocabulary, result
