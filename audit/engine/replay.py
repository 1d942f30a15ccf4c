"""A plug-in's saved models checked by fitting one of them again before any is reused.

The run cache keys a plug-in's run by what topicaudit sees it use: its files, the code it loads, the files and
variables its fit reads (``engine.storage.fitted_code``). A learner can also depend on what no hook sees: a native
library opening a file, a folder's listing, standard input, a file read in a way not yet counted. Each hostile pass
found another such input whose change reused the run of a learner that no longer fitted that way. The learner
contract says one seed fits one release (``learner_checks``, ``same seed``), so one model fitted again, from the
same data and seed, and compared with the saved file checks every input at once: a release that differs is a learner
that behaves otherwise now, whatever it read, and none of the run's saved models is reused for it.

The model fitted again is the first one saved of: the canary release, the target, the canary shadows, the shadows
(the release under audit first); a saved file that is not the one the run wrote stands for no release. It is fitted
as the run fitted it: in a new process with a Ray worker's environment when a worker fitted it, else here (one BLAS
thread beside Ray's start). A finished run found again costs that one fit, and its claim (``guarantee()``) is
compared too; a built-in learner, whose code is all topicaudit's own and keyed by its digest, is not fitted again.

What it does not see (docs/check.md): a change that shows only in other models' fits (a learner that behaves
otherwise on another training set's size), and a resumed run whose only saved models are shadows over the target's
words. A learner whose fit another process does not reproduce (randomness not drawn from its seed) never matches:
each audit of it is fitted anew (``run_cache.behaviour_entry`` bounds the entries it leaves).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from topicaudit.engine.audit_inputs import load_audit_inputs
from topicaudit.engine.canary_audit import build_canaries, observed_mechanism
from topicaudit.engine.configuration.config import Config, audit_config_of, config_hash
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.execution import fresh_process
from topicaudit.engine.execution.experiment import Experiment, needs_ray
from topicaudit.engine.execution.ray_local import WORKER_ENVIRONMENT
from topicaudit.engine.execution.fitting import learner_refused
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.execution.tasks import fit_release
from topicaudit.engine.storage.results import GuaranteeInfo
from topicaudit.engine.storage.run_cache import BEHAVIOURS, REFIT, is_entry
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.engine.storage.model_file import compared_arrays, model_arrays
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, corpus_fingerprint
from topicaudit.targets import configured_target, has_plugin


@dataclass(frozen=True)
class Replay:
    """One saved model of a run fitted again now."""

    model: str    # the model file's name in models/ ("canary-target", "target", …)
    digest: str   # of the release fitted now (``release_digest``): names the cache entry of the learner as it is now
    same: bool    # whether the fit now is the saved release


def release_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of what a model file keeps of a release (``model_arrays``): names, types, shapes and bytes."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode() + array.tobytes())
    return digest.hexdigest()


def _replay(config: Config, corpus: Corpus, target, run: RunDirectory) -> Replay | None:
    """The first saved model of ``run`` (see the module's docstring) fitted again and compared; None when none of
    them is saved."""
    for model, fit in _models(config, corpus, target):
        saved = run.saved_release(model)
        if saved is not None:
            arrays, in_a_worker = saved
            digest = (_in_a_worker("run_model", {"config": config.to_dict(), "model": model})
                      if in_a_worker and _fresh(config) else release_digest(fit()))
            return Replay(model, digest, digest == release_digest(arrays))
    return None


def _any_model(run: RunDirectory) -> bool:
    """Whether ``run`` has a models folder with a model file in it (a linked folder is refused by the resume, never
    read here: XIX-zy L1)."""
    try:
        return not os.path.islink(run.models) and any(name.endswith(".npz") for name in os.listdir(run.models))
    except OSError:  # no models folder yet (a new run)
        return False


def _models(config: Config, corpus: Corpus, target):
    """(model name, its fit now in this process) for every model a replay may fit, in order; each fit built only when
    asked."""
    canaries = config.attack.canaries
    in_workers = needs_ray(config.attack.shadows, canaries.shadows if canaries.count else 0)
    built = build_canaries(config, corpus.X, target, target.guarantee().adjacency) if canaries.count else None
    observe = built.observed_columns if built is not None and observed_mechanism(config, target, built) else None
    if built is not None:
        yield "canary-target", lambda: _fit(target, built.training_matrix(corpus.X, built.coins), None,
                                            built.fit_seed, observe, in_workers)
    plan = make_plan(corpus.X.shape[0], config.attack.shadows, config.seed) if config.attack.shadows else None
    if plan is not None:
        yield "target", lambda: _fit(target, corpus.X, np.flatnonzero(plan.target_in), plan.target_seed, None, True)
    if built is not None and built.shadow_in is not None and built.shadow_seeds is not None:
        for i, (coins, seed) in enumerate(zip(built.shadow_in, built.shadow_seeds)):  # (each matrix made if asked)
            yield f"canary-shadow-{i + 1:04d}", lambda coins=coins, seed=seed: _fit(
                target, built.training_matrix(corpus.X, coins), None, int(seed), observe, True)
    words = _shadow_words(config)
    if plan is not None and words is not False:
        for i in range(plan.n_shadows):
            yield f"shadow-{i + 1:04d}", functools.partial(
                _fit, target, corpus.X, np.flatnonzero(plan.shadow_in[i]), int(plan.shadow_seeds[i]), None, True, words)


def _shadow_words(config: Config):
    """The vocabulary the natural shadows train over (``fitting._shadow_vocabulary``): None for each shadow's own
    step, the ids given; False for the target's (then the target, replayed first when saved, is the model to fit)."""
    chosen = config.attack.shadow_vocabulary
    if not isinstance(chosen, str):
        return np.asarray(chosen, dtype=np.int64)
    return False if chosen == "target" else None


def check_first_shadow(experiment: Experiment, learner: str) -> None:
    """``audit``'s resume of a plug-in's shadows (``learner``): its first saved shadow fitted again, as its Ray worker
    fitted it, must be the saved one, or a UserError."""
    plan, run = experiment.plan, experiment.run
    if not has_plugin(learner, "all") or plan is None or not _any_model(run):
        return
    for i in range(plan.n_shadows):
        saved = run.saved_release(i)
        if saved is None:
            continue
        if not saved[0]:  # damaged or replaced (XIX-zy Y2)
            raise UserError(_REFUSED.format(run=run.path, model=run.model_path(i).stem))
        if _fresh(None):
            digest = _in_a_worker("audit_shadow", {"config": experiment.record, "index": i})
        else:
            digest = release_digest(_fit(experiment.target, experiment.X, np.flatnonzero(plan.shadow_in[i]),
                                         int(plan.shadow_seeds[i]), None, True, _audit_words(experiment)))
        if digest != release_digest(saved[0]):
            raise UserError(_REFUSED.format(run=run.path, model=run.model_path(i).stem))
        return


def _audit_words(experiment: Experiment):
    return None if isinstance(experiment.shadow_vocabulary, str) else experiment.shadow_vocabulary


def _fresh(config: Config | None) -> bool:
    """Whether a model a Ray worker fitted can be fitted again in a new process as a worker fits it: a learner the
    calling script defines (``__main__:Class``) is fitted here instead."""
    named = () if config is None else (config.target.learner, config.target.vocabulary)
    return fresh_process.available() and not any(str(name).startswith("__main__:") for name in named)


def _in_a_worker(job: str, arguments: dict) -> str:
    """The digest of a model fitted in a new process with a Ray worker's environment (one thread for BLAS, OpenMP
    and numba, set before anything is imported): a learner whose sums follow the thread count it finds (numba's
    ``prange``, a chunked reduction) fits in the checking process other bits than in its worker (XIX-zx X3)."""
    return fresh_process.call_fresh(f"{__name__}:{job}", arguments, environment=WORKER_ENVIRONMENT)


def run_model(config: dict, model: str) -> str:
    """The new process's side of a run's replay: ``model`` fitted, its digest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the caller has said them
        run = config_from_dict(config)
        corpus = load_audit_corpus(run)
        target = configured_target(run.target)
        fit = dict(_models(run, corpus, target))[model]
        return release_digest(fit())


def audit_shadow(config: dict, index: int) -> str:
    """The new process's side of ``audit``'s replay: shadow ``index`` fitted over the released words, its digest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resolved, inputs = load_audit_inputs(audit_config_of(config_from_dict(config)))
        X = sp.vstack([inputs.candidates.X, inputs.reference.X], format="csr")
        plan = make_plan(X.shape[0], resolved.attack.shadows, resolved.seed)
        words = np.arange(inputs.model.vocabulary.size, dtype=np.int64)
        return release_digest(_fit(inputs.target, X, np.flatnonzero(plan.shadow_in[index]),
                                   int(plan.shadow_seeds[index]), None, True, words))


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
    return compared_arrays(model_arrays(release))


def same_claim(config: Config, target, stored: GuaranteeInfo) -> bool:
    """Whether a plug-in's claim now (``guarantee()``) is the one its finished run was tested against: a claim read
    from a file had the run of ε = 100 reused when it said 0.01 (XIX-zx X1). A built-in's claim is keyed."""
    if not has_plugin(config.target.learner, config.target.vocabulary):
        return True
    now = json.loads(json.dumps(GuaranteeInfo.of(target.guarantee()).to_json(), default=str))
    return json.dumps(now, sort_keys=True) == json.dumps(stored.to_json(), sort_keys=True, default=str)


class OtherBehaviour(Exception):
    """A cache entry's saved models are not what its plug-in fits now: the run goes to the entry of the learner as
    it behaves now (``run_cache.behaviour_entry``), carrying the model fitted here so that it is not fitted again."""

    def __init__(self, replayed: Replay):
        super().__init__(replayed.model)
        self.replayed = replayed


def check_saved_models(config: Config, corpus: Corpus, target, carried: Replay | None = None) -> None:
    """Before a run reuses any of its saved models (a finished run found again, or a resume): when the plug-in no
    longer fits them, ``OtherBehaviour`` for a run cache's entry, else a UserError (the directory holds another
    learner's audit). ``carried``: the model fitted at the entry before, compared here without a new fit. A directory
    holding another configuration is left to the resume, which refuses it for what it is (XIX-zx X7)."""
    run = RunDirectory(config.run_dir)
    if not has_plugin(config.target.learner, config.target.vocabulary) or not _any_model(run) \
            or run.stored_hash() not in (None, config_hash(config, corpus_fingerprint(corpus))):
        return  # a built-in's run, or nothing saved, costs nothing here
    saved = run.saved_release(carried.model) if carried is not None else None
    if carried is not None and saved is not None:
        found: Replay | None = Replay(carried.model, carried.digest, release_digest(saved[0]) == carried.digest)
    else:
        found = _replay(config, corpus, target, run)
    if found is None or found.same:
        return
    if not is_entry(run.path):
        raise UserError(_REFUSED.format(run=run.path, model=found.model))
    if run.path.name.endswith("-" + REFIT):
        # the key's entry for a learner whose behaviour's own entry held another's models, or after BEHAVIOURS of
        # them (XIX-zx X4): its models are refitted in place, so that each check keeps no new entry
        warnings.warn(f"the plug-in does not fit the models saved in {run.path} again (fitted with the same data and "
                      f"seed, its model '{found.model}' differs): it behaves otherwise than in the {BEHAVIOURS} "
                      "behaviours the cache keeps for this audit, or its fit is not determined by its seed "
                      "(check_learner's `same seed` test shows which); refitting them", UserWarning, stacklevel=2)
        run.remove_models()
        return
    raise OtherBehaviour(found)


_REFUSED = ("{run} holds models the plug-in (its learner or vocabulary step) no longer fits: fitted again with the "
            "same data and seed, its model '{model}' is not the saved file (another release, or a file damaged or "
            "replaced), so its code, something its fit reads (a file, a variable, the command line) or the file has "
            "changed since; give another output directory (--output) to audit the plug-in as it is now, or restore "
            "what changed to reuse the run")
