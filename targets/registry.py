"""The learners and vocabulary steps by name, and the target pipelines configurations build from them.

A name is a built-in one (below), a "package.module:Class" path, or a name an installed package registers
(``topicaudit.targets.plugins``).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import pickle
import random

import numpy as np

from topicaudit.errors import UserError, said
from topicaudit.process_state import kept_process_state
from topicaudit.targets import plugins
from topicaudit.targets.base import claim as base_claim, declared_mechanism
from topicaudit.targets.privacy.composition import compose
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.targets.params import check_topics
from topicaudit.targets.learners.pipeline import Pipeline, plugin_code
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
    # BERTopic's light pipeline (scikit-learn only; docs/bertopic.md)
    "bertopic": ("topicaudit.targets.learners.bertopic_light:LightBERTopic", {}),
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


LEARNER_PLACE = "[target] learner (--learner)"
STEP_PLACE = "[target] vocabulary"
# The vocabulary step by default: chosen by the learner's claim (``default_vocabulary``).
AUTO = "auto"


def _construct(cls, params: dict, fixed: dict, where: str, what: str):
    parameters = inspect.signature(cls).parameters
    accepted = set(parameters) - {"k"} - set(fixed)
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    unknown = sorted(set(params) - accepted)
    if unknown and not open_ended:  # the first ten, each cut: 20,000 of them were a 149 KB line (XIX-zi)
        named = ", ".join(f"{name:.60}" for name in unknown[:10]) + (f", … ({len(unknown)} in all)"
                                                                       if len(unknown) > 10 else "")
        raise UserError(
            f"unknown parameter(s) {named} for {what} in {where}; "
            f"accepted: {', '.join(sorted(accepted)) or 'none'}"
        )
    try:
        with kept_process_state(f"the constructor of {what}"):
            made = cls(**fixed, **params)
    except (TypeError, ValueError) as error:
        raise UserError(f"bad parameter for {what} in {where}: {error}") from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # a plug-in's constructor raising anything else was exit 3, "a bug" (XIX-zz Z5)
        if cls.__module__.startswith("topicaudit."):
            raise
        text = said(error)
        raise UserError(f"the constructor of {what} raised {type(error).__name__}{': ' + text if text else ''} "
                        "(the plug-in's code, not topicaudit's; fix it there)") from None
    if cls.__module__.startswith("topicaudit."):
        try:
            # The release its parameters give, described now: dp-cgs at ε = 5e-324 has an infinite noise scale,
            # and the description failed later as an internal error (pass XIX-z, N3)
            declared_mechanism(made)
        except ValueError as error:
            raise UserError(f"bad parameter for {what} in {where}: {error}") from None
    return made


def learner_class(learner: str, place: str = LEARNER_PLACE) -> tuple[type, dict]:
    """The class a learner's name stands for (built-in, ``module:Class`` or an entry point's name), checked, and its
    fixed keyword arguments."""
    if learner in LEARNERS:
        path, fixed = LEARNERS[learner]
        try:
            return _load(path), fixed
        except ImportError:
            raise UserError(f"learner {learner!r} is not available in this installation (docs/interop.md); "
                            "choose one of the installed learners, e.g. lda or cgs") from None
    path = plugins.resolve(learner, {}, plugins.LEARNER_GROUP, place)
    return plugins.load_class(path, plugins.LEARNER_GROUP, place), {}


def build_learner(learner: str, k: int, params: dict | None = None, where: str = "[target.params]",
                  place: str = LEARNER_PLACE):
    """The learner named ``learner`` with ``params``; ``where`` names the place the parameters came from,
    ``place`` the learner's name's."""
    if learner not in LEARNERS and not plugins.is_class_path(learner):
        plugins.resolve(learner, {name: path for name, (path, _) in LEARNERS.items()}, plugins.LEARNER_GROUP,
                        place)  # an unknown name: refused listing every known one
    cls, fixed = learner_class(learner, place)
    model = _construct(cls, dict(params or {}), {"k": k, **fixed}, where, f"learner {learner!r}")
    if learner not in LEARNERS:
        plugins.check_instance(model, learner, plugins.LEARNER_GROUP, place, k)
    return model


def claim_of(part, what: str):
    """``part.guarantee()``, or one UserError naming the part when it cannot state a claim (ε NaN or negative, a
    string, δ outside [0, 1]: an internal error, exit 3, before hostile pass XIX)."""
    try:
        with plugin_code(part, "guarantee()"):  # a plug-in's own exception said as its own, not topicaudit's bug
            claim = base_claim(part)
    except (ValueError, TypeError) as error:
        raise UserError(f"{what}: its guarantee() cannot state a claim: {error}; return a Guarantee whose ε is a "
                        "number ≥ 0 (math.inf for none) and δ a number in [0, 1)") from None
    if not isinstance(claim, Guarantee):
        raise UserError(f"{what}: its guarantee() returned a {type(claim).__name__}, not a Guarantee "
                        "(docs/adding-a-learner.md)")
    return claim


def default_vocabulary(model) -> str:
    """The vocabulary step a learner gets when the configuration names none: the public one (``all``) for a
    learner claiming a finite ε, so that its claim stands (a data-dependent vocabulary, ``observed``, is not
    private, and a canary's word in it gives its coin away); ``observed``, the paper's, for the others."""
    return "all" if math.isfinite(base_claim(model).epsilon) else "observed"


@functools.lru_cache(maxsize=256)
def _resolved_vocabulary(learner: str, k: int, params: str) -> str:
    return default_vocabulary(build_learner(learner, k, json.loads(params)))


def vocabulary_of(learner: str, k: int, params: dict | None, vocabulary: str) -> str:
    """The vocabulary step a configuration means: ``vocabulary``, or for ``auto`` the learner's default."""
    if vocabulary != AUTO:
        return vocabulary
    check_topics(k, "k", "set [target] k or --k")
    return _resolved_vocabulary(learner, k, json.dumps(params or {}, sort_keys=True))


def _build_step(vocabulary: str, params: dict | None):
    if vocabulary in VOCABULARY_STEPS:
        cls = _load(VOCABULARY_STEPS[vocabulary])
    else:
        cls = plugins.load_class(plugins.resolve(vocabulary, VOCABULARY_STEPS, plugins.STEP_GROUP, STEP_PLACE),
                                 plugins.STEP_GROUP, STEP_PLACE)
    step = _construct(cls, dict(params or {}), {}, "[target.vocabulary_params]", f"vocabulary step {vocabulary!r}")
    if vocabulary not in VOCABULARY_STEPS:
        plugins.check_instance(step, vocabulary, plugins.STEP_GROUP, STEP_PLACE)
    return step


def sources(learner: str, vocabulary: str) -> dict[str, dict[str, str]]:
    """Where a configuration's plug-ins come from (class path, distribution, version), for its identity and
    results.json: ``learner_source`` and ``vocabulary_source``, each only when it is a plug-in."""
    found = {"learner_source": None if learner in LEARNERS else plugins.source(learner, plugins.LEARNER_GROUP),
             "vocabulary_source": None if vocabulary in (*VOCABULARY_STEPS, AUTO)
             else plugins.source(vocabulary, plugins.STEP_GROUP)}
    return {key: value for key, value in found.items() if value is not None}


def has_plugin(learner: str, vocabulary: str) -> bool:
    """Whether a configuration's learner or vocabulary step is a plug-in (code outside topicaudit)."""
    return learner not in LEARNERS or vocabulary not in (*VOCABULARY_STEPS, AUTO)


def plugin_files(learner: str, vocabulary: str) -> list:
    """The files of the plug-ins' code a configuration names (none for built-ins): files a check reads."""
    return [*([] if learner in LEARNERS else plugins.code_files(learner, plugins.LEARNER_GROUP)),
            *([] if vocabulary in (*VOCABULARY_STEPS, AUTO) else plugins.code_files(vocabulary, plugins.STEP_GROUP))]


def shadow_pipeline(learner: str, k: int, params: dict | None = None, where: str = "[target.params]",
                    place: str = "[model] learner (--learner)") -> Pipeline:
    """The named learner over a fixed vocabulary (every column it is given): shadows of a model whose words are known."""
    step, model = _load(VOCABULARY_STEPS["all"])(), build_learner(learner, k, params, where, place)
    return Pipeline(step, model, compose(base_claim(step), base_claim(model)))


def configured_target(table) -> Pipeline:
    """The target pipeline a configuration's ``[target]`` table names: its learner, k, vocabulary step, their
    parameters and the test hooks (``test_under_noise``, ``test_bug``)."""
    return build_target(table.learner, table.k, table.vocabulary, table.params, table.vocabulary_params,
                        table.test_under_noise, table.test_bug)


def build_target(learner: str, k: int, vocabulary: str = AUTO, params: dict | None = None,
                 vocabulary_params: dict | None = None, under_noise: float = 1.0, bug: str = "") -> Pipeline:
    """The target pipeline named by a configuration, with a clear error for typos.

    learner and vocabulary: a built-in name, a "package.module:Class" path or a
    name an installed package registers (``topicaudit.targets.plugins``);
    vocabulary ``auto``: the learner's default (``default_vocabulary``).
    under_noise > 1 and bug build a deliberately broken learner for testing an audit
    (``topicaudit.targets.bug_variants``): its noise divided by that factor, or the named bug
    planted, its claim unchanged.
    """
    if learner not in LEARNERS and not plugins.is_class_path(learner):
        plugins.resolve(learner, {name: path for name, (path, _) in LEARNERS.items()}, plugins.LEARNER_GROUP,
                        LEARNER_PLACE)
    if vocabulary != AUTO:
        plugins.resolve(vocabulary, VOCABULARY_STEPS, plugins.STEP_GROUP, STEP_PLACE)
    check_topics(k, "k", "set [target] k or --k")
    model = build_learner(learner, k, params)
    claim_of(model, f"learner {learner!r}")
    if vocabulary == AUTO:
        vocabulary = default_vocabulary(model)
    step = _build_step(vocabulary, vocabulary_params)
    claim_of(step, f"vocabulary step {vocabulary!r}")
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
        guarantee = compose(base_claim(step), base_claim(model))  # an incoherent composition is refused now
    except ValueError as error:
        raise UserError(f"vocabulary step {vocabulary!r} and learner {learner!r} cannot be composed: {error}; "
                        "choose a vocabulary step with the learner's adjacency, or 'all' (public vocabulary)") from None
    return Pipeline(step, model, guarantee)


def learner_settings(learner) -> tuple[str, int, dict]:
    """A learner object as the configuration that rebuilds it: its name (built-in, else ``module:Class``), k and
    the parameters it was given away from their defaults.

    The Python API takes learner objects; a run directory records configurations, so that its hash identifies
    the learner and the command line can rerun it. So the object must follow scikit-learn's convention (each
    constructor parameter stored under its own name), its parameters must be values a TOML file holds, and it must
    pickle (Ray ships it); each is refused here with what to change.
    """
    cls = type(learner)
    path = plugins.class_path(cls)
    what = f"learner {cls.__name__} ({path})"
    missing = [m for m in plugins.METHODS[plugins.LEARNER_GROUP] if not callable(getattr(learner, m, None))]
    if missing:
        raise UserError(f"{what} is not a learner: it has no {' or '.join(missing)} method "
                        "(docs/adding-a-learner.md)")
    k = getattr(learner, "k", None)
    if not isinstance(k, int) or isinstance(k, bool):
        raise UserError(f"{what} stores no number of topics k as a Python int (got {k!r}); set self.k = int(k) in "
                        "its constructor")
    k = int.__index__(k)  # its own value: an int subclass holding 3 was recorded as its __repr__ (XIX-zl)
    try:
        signature = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        raise UserError(f"{what}: Python cannot read its constructor's parameters, so a run cannot record it") \
            from None
    names = [n for n, p in signature.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "k"]
    unstored = [n for n in names if not hasattr(learner, n)]
    if unstored:
        raise UserError(f"{what} does not store its constructor parameter(s) {', '.join(unstored)} under their own "
                        "names, so a run cannot record how it was built; store each as self.<name> = <name> "
                        "(scikit-learn's convention)")
    full = {n: getattr(learner, n) for n in names}
    given = {n: v for n, v in full.items() if not _same(v, signature[n].default)}
    for name, value in given.items():
        if not _recordable(value):
            raise UserError(f"{what}: parameter {name} = {value!r} is a {type(value).__name__}, which a run's "
                            "configuration (TOML) cannot record; give it as numbers, strings, booleans or lists of "
                            "them, or build that value inside the learner from such a parameter")
    given = {name: _own_value(value) for name, value in given.items()}
    plugins.check_instance(learner, path, plugins.LEARNER_GROUP, "the learner given", k)
    name = path
    for short, (builtin, fixed) in LEARNERS.items():
        if builtin == path and all(_same(full.get(key), value) for key, value in fixed.items()):
            name, given = short, {n: v for n, v in given.items() if n not in fixed}
            break
    rebuilt = build_learner(name, k, given, where="the learner given", place="the learner given")
    if any(not _same(getattr(rebuilt, n), v) for n, v in full.items()):
        raise UserError(f"{what}: rebuilt from its stored parameters it has other parameters ({given}); store each "
                        "constructor argument unchanged, as scikit-learn's estimators do")
    differ = _other_state(learner, rebuilt, {*full, "k"})
    if differ:
        raise UserError(f"{what}: the object given holds other state than the learner its constructor parameters "
                        f"build ({', '.join(differ[:5])}), and the audit fits learners rebuilt from those parameters "
                        "(the run records them, Ray ships them), so it would audit another learner than this one; "
                        "set every setting through a constructor parameter, or pass a freshly constructed learner")
    return name, k, given


def _other_state(learner, rebuilt, compared: set[str]) -> list[str]:
    """The attributes in which ``learner`` differs from ``rebuilt`` (the same class built from its parameters).

    The run audits ``rebuilt``: a learner given with an attribute set after construction (a noise switch, a
    derived noise scale) was audited as the honest rebuild and passed while the object leaked (hostile pass XIX).
    Fitted attributes (scikit-learn's ``name_``: public, ending in ``_``) that the object alone holds are not
    compared: a fit sets them and the audit fits afresh. ``compared``: the parameters, already held to the rebuild.
    """
    mine, theirs = getattr(learner, "__dict__", {}), getattr(rebuilt, "__dict__", {})
    differ = []
    for name in sorted((set(mine) | set(theirs)) - compared):
        fitted = name.endswith("_") and not name.startswith("_")
        if name not in theirs and fitted:
            continue
        if name not in mine or name not in theirs or not _same_state(mine[name], theirs[name]):
            differ.append(name)
    for name in getattr(type(learner), "__slots__", ()):
        if name not in compared and not _same_state(getattr(learner, name, None), getattr(rebuilt, name, None)):
            differ.append(name)
    return differ


# Random generators an honest learner makes in its constructor: unseeded, each object's state differs from its
# rebuild's, and a learner holding one was refused as holding "other state" (hostile pass XIX-o); a generator's
# state is noise, not a setting, so two of one type are the same state here.
RANDOM_STATES = (np.random.Generator, np.random.RandomState, np.random.BitGenerator, random.Random)


def _same_state(a, b) -> bool:
    """Equal values: numbers and strings as ``_same``, arrays element by element, anything else by its pickle."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return (type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
                    and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
        except (TypeError, ValueError):
            return False
    if isinstance(a, (bool, int, float, str, type(None))) and isinstance(b, (bool, int, float, str, type(None))):
        return type(a) is type(b) and _same(a, b)
    if isinstance(a, RANDOM_STATES) and isinstance(b, RANDOM_STATES):
        return type(a) is type(b)  # an unseeded generator made in __init__ differs by construction (listed, XIX-o)
    try:
        return pickle.dumps(a) == pickle.dumps(b)
    except Exception:  # noqa: BLE001 - what does not pickle cannot be shown equal
        return False


def _recordable(value) -> bool:
    if isinstance(value, (bool, int, float, str)):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value)


def _own_value(value):
    """A recordable parameter as its own value, the type a TOML file gives: a str subclass holding "pld" whose
    ``__str__`` said "rdp" was fitted as pld and recorded in config.toml as rdp (hostile pass XIX-zl)."""
    if isinstance(value, (list, tuple)):
        return (tuple if isinstance(value, tuple) else list)(_own_value(v) for v in value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return str.__str__(value)


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    except (TypeError, ValueError):
        return False
