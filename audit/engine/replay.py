"""A plug-in's saved models checked by fitting one of them again before any is reused.

The run cache keys a plug-in's run by what topicaudit sees it use: its files, the code it loads, the files and
variables its fit reads (``engine.storage.fitted_code``). A learner can also depend on what no hook sees: a native
library opening a file, a folder's listing, standard input, a file read in a way not yet counted. Each hostile pass
found another such input whose change reused the run of a learner that no longer fitted that way. The learner
contract says one seed fits one release (``learner_checks``, ``same seed``), so one model fitted again, from the
same data and seed, and compared with the saved file checks every input at once: a release that differs is a learner
that behaves otherwise now, whatever it read, and none of the run's saved models is reused for it.

The model fitted again is the first one saved of: the canary release, the target, the first canary shadow (the
release under audit first); it is fitted as the run fitted it (one BLAS thread where the run's fits ran in Ray
workers or beside Ray's start). A finished run found again costs that one fit; a built-in learner, whose code is all
topicaudit's own and keyed by its digest, is not fitted again.

What it does not see (docs/check.md): a change that shows only in other models' fits (a learner that behaves
otherwise on another training set's size), and a run resumed whose saved models include none of those three. A
learner whose fit another process does not reproduce (randomness not drawn from its seed) never matches: each audit
of it is fitted anew.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from topicaudit.engine.canary_audit import build_canaries, observed_mechanism
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.execution.experiment import Experiment, needs_ray
from topicaudit.engine.execution.fitting import learner_refused
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.execution.tasks import fit_release
from topicaudit.engine.storage.run_cache import is_entry
from topicaudit.engine.storage.rundir import RunDirectory, model_arrays, same_arrays
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus
from topicaudit.targets import has_plugin


@dataclass(frozen=True)
class Replay:
    """One saved model of a run fitted again now."""

    model: str                       # the model file's name in models/ ("canary-target", "target", …)
    same: bool                       # whether the fit now is the saved release, array for array
    arrays: dict[str, np.ndarray]    # what a model file keeps of the release fitted now (``model_arrays``)

    @property
    def digest(self) -> str:
        """SHA-256 of the release fitted now: names the cache entry of the learner as it behaves now."""
        digest = hashlib.sha256()
        for name in sorted(self.arrays):
            array = np.ascontiguousarray(self.arrays[name])
            digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode() + array.tobytes())
        return digest.hexdigest()

    def matches(self, run: RunDirectory) -> bool:
        """Whether ``run`` holds this release as its model of the same name (no fit: another entry checked)."""
        saved = run.saved_release(self.model)
        return saved is not None and same_arrays(saved, self.arrays)


def replay(config: Config, corpus: Corpus, target, run: RunDirectory) -> Replay | None:
    """The first saved model of ``run`` (see the module's docstring) fitted again and compared; None when the run's
    learner and vocabulary step are built in, or when none of those models is saved."""
    if not has_plugin(config.target.learner, config.target.vocabulary) or not _any_model(run):
        return None
    for model, fit in _models(config, corpus, target):
        saved = run.saved_release(model)
        if saved is not None:
            arrays = fit()
            return Replay(model, same_arrays(saved, arrays), arrays)
    return None


def _any_model(run: RunDirectory) -> bool:
    try:
        return any(name.endswith(".npz") for name in os.listdir(run.models))
    except OSError:  # no models folder yet (a new run)
        return False


def _models(config: Config, corpus: Corpus, target):
    """(model name, its fit now) for the models a replay may fit, in order; each fit built only when asked."""
    canaries = config.attack.canaries
    in_workers = needs_ray(config.attack.shadows, canaries.shadows if canaries.count else 0)
    built = build_canaries(config, corpus.X, target, target.guarantee().adjacency) if canaries.count else None
    if built is not None:
        observe = built.observed_columns if observed_mechanism(config, target, built) else None
        yield "canary-target", lambda: _fit(target, built.training_matrix(corpus.X, built.coins), None,
                                            built.fit_seed, observe, in_workers)
    if config.attack.shadows:
        plan = make_plan(corpus.X.shape[0], config.attack.shadows, config.seed)
        yield "target", lambda: _fit(target, corpus.X, np.flatnonzero(plan.target_in), plan.target_seed, None, True)
    if built is not None and built.shadow_in is not None and built.shadow_seeds is not None:
        yield "canary-shadow-0001", lambda: _fit(target, built.training_matrix(corpus.X, built.shadow_in[0]), None,
                                                 int(built.shadow_seeds[0]), observe, True)


def check_first_shadow(experiment: Experiment, learner: str) -> None:
    """``audit``'s resume of a plug-in's shadows (``learner``): its first saved shadow fitted again (in a Ray worker's
    one BLAS thread, over the released words, as there) must be the saved one, or a UserError."""
    plan, run = experiment.plan, experiment.run
    if not has_plugin(learner, "all") or plan is None or not plan.n_shadows:
        return
    saved = run.saved_release(0)
    if saved is not None and not same_arrays(saved, _fit(
            experiment.target, experiment.X, np.flatnonzero(plan.shadow_in[0]), int(plan.shadow_seeds[0]), None, True,
            None if isinstance(experiment.shadow_vocabulary, str) else experiment.shadow_vocabulary)):
        raise UserError(_REFUSED.format(run=run.path, model=run.model_path(0).stem))


def _fit(target, X, rows: np.ndarray | None, seed: int, observe, one_thread: bool,
         vocabulary: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """A model fitted on ``X``'s ``rows`` (None: all) as the run fits it (``tasks.fit_release``), as a model file
    keeps it."""
    rows = np.arange(X.shape[0]) if rows is None else rows
    with threadpool_limits(1) if one_thread else contextlib.nullcontext():
        try:
            release = fit_release(target, X, rows, seed, vocabulary, observe, in_ray=False)[0]
        except ValueError as error:
            raise learner_refused(target, error, "a saved model's training set") from None
    return model_arrays(release)


class OtherBehaviour(Exception):
    """A cache entry's saved models are not what its plug-in fits now: the run goes to the entry of the learner as
    it behaves now (``run_cache.behaviour_entry``), carrying the model fitted here so that it is not fitted again."""

    def __init__(self, replayed: Replay):
        super().__init__(replayed.model)
        self.replayed = replayed


def check_saved_models(config: Config, corpus: Corpus, target, carried: Replay | None = None) -> None:
    """Before a run reuses any of its saved models (a finished run found again, or a resume): when the plug-in no
    longer fits them, ``OtherBehaviour`` for a run cache's entry, else a UserError (the directory holds another
    learner's audit). ``carried``: the model fitted at the entry before, compared here without a new fit."""
    run = RunDirectory(config.run_dir)
    found = carried if carried is not None and run.saved_release(carried.model) is not None else None
    if found is not None:
        found = Replay(found.model, found.matches(run), found.arrays)
    else:
        found = replay(config, corpus, target, run)
    if found is None or found.same:
        return
    if is_entry(run.path):
        raise OtherBehaviour(found)
    raise UserError(_REFUSED.format(run=run.path, model=found.model))


_REFUSED = ("{run} holds models this learner no longer fits: fitted again with the same data and seed, its model "
            "'{model}' differs from the saved one, so its code or something its fit reads (a file, a variable, the "
            "command line) has changed since; give another output directory (--output) to audit the learner as it "
            "is now, or restore what changed to reuse the run")
