"""The learners and vocabulary steps by name, and the target pipelines configurations build from them."""
from __future__ import annotations

import importlib
import inspect

from topicaudit.errors import UserError
from topicaudit.targets.privacy.composition import compose
from topicaudit.targets.params import check_topics
from topicaudit.targets.learners.pipeline import Pipeline
from topicaudit.targets.bug_variants import VOCABULARY_BUGS, BrokenLearner, BrokenVocabulary, under_noised

# Registries name "module:Class" and are imported on use, so a Ray worker that
# unpickles one target loads that target's code only, not every learner's.
# learner name → (class, fixed keyword arguments)
LEARNERS = {
    "lda": ("topicaudit.targets.learners.lda:VariationalLDA", {"backend": "compiled"}),
    "sklearn-lda": ("topicaudit.targets.learners.lda:VariationalLDA", {"backend": "sklearn"}),
    "cgs": ("topicaudit.targets.learners.cgs:CollapsedGibbsLDA", {}),
    "gensim-lda": ("topicaudit.targets.learners.gensim_lda:GensimLDA", {}),        # pip install 'topicaudit[gensim]'
    "tomotopy-lda": ("topicaudit.targets.learners.tomotopy_lda:TomotopyLDA", {}),  # pip install 'topicaudit[tomotopy]'
    "cgs-monitor": ("topicaudit.targets.learners.cgs_monitor:MonitoredCollapsedGibbsLDA", {}),
    "dp-cgs": ("topicaudit.targets.learners.dp_cgs:ZhuDPCollapsedGibbsLDA", {}),
    "hdp-lda": ("topicaudit.targets.learners.hdp_lda:ZhaoHDPLDA", {}),
    "dp-svi": ("topicaudit.targets.learners.dp_svi:DPStochasticVariationalLDA", {}),
    "lp-lda": ("topicaudit.targets.learners.lp_lda:LocallyPrivateLDA", {}),
    "pf": ("topicaudit.targets.learners.poisson_factorization:PoissonFactorization", {}),
    "lppf": ("topicaudit.targets.learners.poisson_factorization:LocallyPrivatePoissonFactorization", {}),
    "lppf-naive": ("topicaudit.targets.learners.poisson_factorization:NaiveLocallyPrivatePoissonFactorization", {}),
}
VOCABULARY_STEPS = {
    "observed": "topicaudit.targets.learners.vocabulary:ObservedVocabulary",
    "all": "topicaudit.targets.learners.vocabulary:CorpusVocabulary",
    "dpsu-laplace": "topicaudit.targets.learners.dpsu:PolicyLaplaceDPSU",
    "dpsu-gaussian": "topicaudit.targets.learners.dpsu:PolicyGaussianDPSU",
    "dpsu-gw": "topicaudit.targets.learners.dpsu:GreedyWeightedDPSU",
    "dpsu-gw-public-code": "topicaudit.targets.learners.dpsu:GreedyWeightedPublicCode",
}


def _load(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _construct(cls, params: dict, fixed: dict, where: str, what: str):
    accepted = set(inspect.signature(cls).parameters) - {"k"} - set(fixed)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise UserError(
            f"unknown parameter(s) {', '.join(unknown)} for {what} in {where}; "
            f"accepted: {', '.join(sorted(accepted)) or 'none'}"
        )
    try:
        return cls(**fixed, **params)
    except (TypeError, ValueError) as error:
        raise UserError(f"bad parameter for {what} in {where}: {error}") from None


def build_learner(learner: str, k: int, params: dict | None = None, where: str = "[target.params]"):
    """The learner named ``learner`` with ``params``; ``where`` names the place the parameters came from."""
    path, fixed = LEARNERS[learner]
    try:
        cls = _load(path)
    except ImportError:
        raise UserError(f"learner {learner!r} is not available in this installation (docs/interop.md); choose "
                        "one of the installed learners, e.g. lda or cgs") from None
    return _construct(cls, dict(params or {}), {"k": k, **fixed}, where, f"learner {learner!r}")


def shadow_pipeline(learner: str, k: int, params: dict | None = None, where: str = "[target.params]") -> Pipeline:
    """The named learner over a fixed vocabulary (every column it is given): shadows of a model whose words are known."""
    step, model = _load(VOCABULARY_STEPS["all"])(), build_learner(learner, k, params, where)
    return Pipeline(step, model, compose(step.guarantee(), model.guarantee()))


def build_target(learner: str, k: int, vocabulary: str = "observed", params: dict | None = None,
                 vocabulary_params: dict | None = None, under_noise: float = 1.0, bug: str = "") -> Pipeline:
    """The target pipeline named by a configuration, with a clear error for typos.

    under_noise > 1 and bug build a deliberately broken learner for testing an audit
    (``topicaudit.targets.bug_variants``): its noise divided by that factor, or the named bug
    planted, its claim unchanged.
    """
    if learner not in LEARNERS:
        raise UserError(f"unknown learner {learner!r} in [target] learner; known learners: {', '.join(LEARNERS)}")
    if vocabulary not in VOCABULARY_STEPS:
        raise UserError(
            f"unknown vocabulary step {vocabulary!r} in [target] vocabulary; known: {', '.join(VOCABULARY_STEPS)}"
        )
    check_topics(k, "k", "set [target] k or --k")
    step = _construct(_load(VOCABULARY_STEPS[vocabulary]), dict(vocabulary_params or {}), {},
                      "[target.vocabulary_params]", f"vocabulary step {vocabulary!r}")
    model = build_learner(learner, k, params)
    if under_noise != 1.0:
        try:
            model = under_noised(model, under_noise)
        except ValueError as error:
            raise UserError(f"[target] test_under_noise: {error}") from None
    if bug:
        try:
            if bug in VOCABULARY_BUGS:
                step = BrokenVocabulary(step, bug)
            else:
                model = BrokenLearner(model, bug)
        except ValueError as error:
            raise UserError(f"[target] test_bug: {error}") from None
    try:
        guarantee = compose(step.guarantee(), model.guarantee())  # an incoherent composition is refused now
    except ValueError as error:
        raise UserError(f"vocabulary step {vocabulary!r} and learner {learner!r} cannot be composed: {error}; "
                        "choose a vocabulary step with the learner's adjacency, or 'all' (public vocabulary)") from None
    return Pipeline(step, model, guarantee)
