"""The learner conformance suite: what every learner, built-in or third-party, must do to be audited.

In the spirit of scikit-learn's ``check_estimator``: ``check_learner(learner)``
runs each check below on a small synthetic corpus and raises AssertionError
naming the learner and the failed check. Public as
``topicaudit.testing.check_learner``; docs/adding-a-learner.md shows its use.

The checks, in order (``CHECKS``):

* ``parameters``: each constructor parameter is stored under its own name (so
  the learner can be rebuilt from its parameters, as ``build_target`` and Ray
  workers rely on), and a bad value (NaN) is refused in the constructor with a
  ValueError naming the parameter (``topicaudit.targets.params``);
* ``phi``: ``fit(X, seed)`` returns Φ of shape (k, n_words), float32, finite,
  on the simplex;
* ``same seed``: two fits with the same seed give the same Φ;
* ``pickle``: the learner survives a pickle round trip (Ray ships it) and the
  copy fits the same Φ;
* ``short documents``: a corpus holding an empty and a one-word document is
  fitted to a valid Φ;
* ``guarantee``: ``guarantee()`` is a ``Guarantee``; a finite ε names its
  adjacency, and when it carries a dp-accounting event, an accountant over
  that event gives the claimed ε;
* ``release constants``: for a learner that declares what it records
  (``mechanism()``), those constants agree with its claim's dp-accounting
  event (``targets.privacy.release_check``: noise multiplier, sampling rate,
  steps, Laplace scale over the sensitivity its neighbours imply), and a
  built-in scorer reads that kind of release;
* ``record used``: for a learner that records its releases, Φ is built from
  what the recorder returned. Deterministic: the same seed is fitted three
  times, with a plain recorder, with one that returns an unchanged copy of
  the observed columns (Φ must not move: the recorder is used, not bypassed)
  and with one that returns them with far more of the observed words (Φ
  must give those words more mass). A learner that records one array and
  builds Φ from another fails it, naming the release;
* ``canary audit``: for a learner claiming a finite ε, a canary audit
  through the engine's canary path (one fit) proves no ε above the claim. A
  correct learner passes except with probability ``ALPHA`` for a given seed;
* ``honest record``: for a learner that records its mechanism's outputs, the
  same fit's released Φ proves no ε above the claim either (Φ is computed
  from those outputs): a model built from another draw than the recorded
  one fails it when the two differ enough for the audit's size.

The canary audit's size follows the claim (``design_canary_audit``, in
:mod:`topicaudit.canary_design`, which says how and what it measured). A claim no
count up to MAX_CANARIES can test is not passed silently: the audit runs at
MIN_CANARIES and warns (``UntestableClaimWarning``, naming the largest testable ε),
and the ``CanaryAuditResult`` that ``check_learner`` returns has ``tested`` False.

Every check fails with an explicit ``raise AssertionError``, never an ``assert``
statement: ``python -O`` (``PYTHONOPTIMIZE``) strips those, and the suite then
passed a noiseless learner claiming ε = 1. Longer than 400 lines because of
that: each check spelled out as a test and a raise, the suite kept whole.
"""
from __future__ import annotations

import copy
import inspect
import json
import math
import os
import pickle
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import dp_accounting
import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.canaries import default_length, make_canaries, resolve_kind
from topicaudit.attacks.mechanism import scorer_for
from topicaudit.canary_design import ALPHA, CANARY_SEED, CanaryAuditDesign, design_canary_audit
from topicaudit.engine.canary_audit import all_canary_scores, canary_results
from topicaudit.errors import said
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.process_state import kept_process_state
from topicaudit.targets.privacy.composition import NEIGHBORING_RELATIONS, PLDAccountant
from topicaudit.targets.base import declared_mechanism, records
from topicaudit.targets.mechanisms import Mechanism, Recorder
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.targets.privacy.release_check import disagreements
from topicaudit.targets.learners.pipeline import Pipeline, PluginCodeError
from topicaudit.targets.learners.vocabulary import CorpusVocabulary

# Pure ε-DP has no δ = 0 point on a PLD curve (its tails are truncated); this δ stands in for it.
PURE_DELTA = 1e-12
# The PLD accountant's pessimistic discretisation (1e-4) moves ε by up to ~1e-3.
EPSILON_TOLERANCE = 2e-3


def _corpus(k: int, seed: int) -> sp.csr_matrix:
    """A small LDA corpus, every row non-empty: 150 documents over 60 words."""
    return synthetic_corpus(n_docs=150, n_words=60, k=max(int(k), 2), mean_length=20, seed=seed)[0].X


def _parameters(learner) -> dict:
    """The constructor's parameters as the learner stores them (scikit-learn's convention)."""
    names = [name for name, p in inspect.signature(type(learner)).parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [name for name in names if not hasattr(learner, name)]
    if missing:
        raise AssertionError(f"the constructor's parameter(s) {', '.join(missing)} are not stored under their own "
                             "names, so the learner cannot be rebuilt from its parameters")
    return {name: getattr(learner, name) for name in names}


def describe(learner) -> str:
    """Its class and the parameters set away from their defaults, e.g. ``ZhuDPCollapsedGibbsLDA(k=3, epsilon=1.0)``."""
    try:
        signature = inspect.signature(type(learner)).parameters
    except (TypeError, ValueError):
        return repr(learner)
    shown = ", ".join(f"{name}={getattr(learner, name)!r}" for name, p in signature.items()
                      if hasattr(learner, name) and (name == "k" or not _same(getattr(learner, name), p.default)))
    return f"{type(learner).__name__}({shown})"


def _class_name(learner) -> str:
    """The learner's class name as the class holds it, past a metaclass's own ``__name__`` (one calling
    ``sys.exit(0)`` left check_learner from the guard's failure, exit 0 with no check run: hostile pass XIX-v)."""
    return type.__dict__["__name__"].__get__(type(learner))


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _fit(learner, X: sp.csr_matrix, seed: int) -> np.ndarray:
    """A copy of the Φ a fit returns: a learner returning one buffer it reuses passed ``same seed`` and ``pickle``
    unseeded, the two fits compared being one array (hostile pass XIX)."""
    return np.array(learner.fit(X, seed), copy=True)


def check_parameters(learner) -> None:
    params = _parameters(learner)
    rebuilt = type(learner)(**params)
    if _parameters(rebuilt).keys() != params.keys():
        raise AssertionError("the learner rebuilt from its parameters stores other parameters")
    for name in params:
        if name == "k":
            continue
        try:
            type(learner)(**{**params, name: math.nan})
        except ValueError as error:  # topicaudit.errors.UserError is a ValueError too
            if name not in str(error):
                raise AssertionError(f"refusing {name} = nan, the message does not name it: {error}")
        else:
            raise AssertionError(f"{name} = nan was accepted by the constructor; check it there "
                                 "(topicaudit.targets.params)")


def check_phi(learner) -> None:
    X = _corpus(learner.k, seed=0)
    phi = _fit(learner, X, seed=0)
    want = (learner.k, X.shape[1])
    if phi.shape != want:
        raise AssertionError(f"Φ has shape {phi.shape}, not (k, n_words) = {want}")
    if phi.dtype != np.float32:
        raise AssertionError(f"Φ is {phi.dtype}, not float32")
    _assert_on_simplex(phi)


def _assert_on_simplex(phi: np.ndarray) -> None:
    if not np.all(np.isfinite(phi)):
        raise AssertionError("Φ has entries that are not finite")
    if not phi.min() >= 0:
        raise AssertionError(f"Φ has a negative entry ({phi.min():g})")
    sums = phi.sum(axis=1, dtype=np.float64)
    if not np.allclose(sums, 1, atol=1e-5):
        raise AssertionError(f"Φ's rows do not sum to 1 (sums {sums.min():.6g}..{sums.max():.6g})")


def check_same_seed(learner) -> None:
    X = _corpus(learner.k, seed=1)
    first, second = _fit(learner, X, seed=7), _fit(learner, X, seed=7)
    if not np.array_equal(first, second):
        raise AssertionError(f"two fits with seed 7 differ (largest difference "
                             f"{np.abs(first - second).max():g}); take every random choice from seed")


def check_pickle(learner) -> None:
    try:
        clone = pickle.loads(pickle.dumps(learner))
    except Exception as error:  # any failure to pickle is the finding
        raise AssertionError(f"the learner does not survive a pickle round trip (Ray ships it): {error!r}") from None
    X = _corpus(learner.k, seed=2)
    if not np.array_equal(_fit(clone, X, seed=3), _fit(learner, X, seed=3)):
        raise AssertionError("the unpickled learner fits another Φ than the original with the same seed")


def check_short_documents(learner) -> None:
    X = _corpus(learner.k, seed=3).tolil()
    X[0, :] = 0                     # an empty document
    X[1, :] = 0
    X[1, 5] = 1                     # a one-word document
    X = X.tocsr()
    X.eliminate_zeros()
    try:
        phi = _fit(learner, X, seed=0)
    except Exception as error:  # a crash on a short document is the finding
        raise AssertionError(f"fitting a corpus with an empty and a one-word document raised {error!r}") from None
    if phi.shape != (learner.k, X.shape[1]):
        raise AssertionError(f"Φ has shape {phi.shape}")
    _assert_on_simplex(phi)


def _claim_text(g) -> str:
    """A guarantee as comparable text (its JSON form)."""
    return json.dumps(g.to_json(), sort_keys=True, default=repr)


def _same_claim(learner, g: Guarantee, after: str) -> None:
    """guarantee() still states ``g``: the engine reads the claim once, before any fit (preflight, results.json),
    so a claim that changes between calls or with a fit is not the one audited. A learner claiming ε = 1 only once
    fitted, or on every other call, passed every check: the canary audit read "no claim" and tested nothing."""
    again = learner.guarantee()
    if not isinstance(again, Guarantee) or _claim_text(again) != _claim_text(g):
        shown = again.epsilon if isinstance(again, Guarantee) else type(again).__name__
        raise AssertionError(f"guarantee() changed after {after} (ε = {g.epsilon:g}, then {shown}): the claim must "
                             "follow from the constructor's parameters alone, the same before and after a fit, as "
                             "the audit reads it once before fitting")


def check_guarantee(learner) -> None:
    g = learner.guarantee()
    if not isinstance(g, Guarantee):
        raise AssertionError(f"guarantee() returned {type(g).__name__}, not a Guarantee")
    _same_claim(learner, g, "a second call")
    _fit(learner, _corpus(learner.k, seed=6), 0)
    _same_claim(learner, g, "a fit")
    if math.isinf(g.epsilon) or g.event is None:
        return
    if g.adjacency is None:
        raise AssertionError(f"the claim ε = {g.epsilon:g} states no adjacency")
    relation = NEIGHBORING_RELATIONS[g.relation]
    accounted = []
    pld = PLDAccountant(relation)
    if pld.supports(g.event):
        pld.compose(g.event)
        accounted.append(("PLD", float(pld.get_epsilon(g.delta or PURE_DELTA))))
    rdp = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    if g.delta > 0 and rdp.supports(g.event):
        rdp.compose(g.event)
        accounted.append(("RDP", float(rdp.get_epsilon(g.delta))))
    if not accounted:
        raise AssertionError(f"no dp-accounting accountant supports the claim's event {type(g.event).__name__}")
    close = [eps for _, eps in accounted if math.isclose(eps, g.epsilon, rel_tol=1e-3, abs_tol=EPSILON_TOLERANCE)]
    if not close:
        raise AssertionError(f"the claim ε = {g.epsilon:.6g} at δ = {g.delta:g} is not what its event gives: "
                             + ", ".join(f"{name} accountant ε = {eps:.6g}" for name, eps in accounted))


class CheckFailed(AssertionError):
    """A check's own finding: the learner does not do what the check holds it to."""


class CheckDidNotFinish(AssertionError):
    """A check that could not finish (the learner's code, or a library it called, raised): no finding on the
    learner. Not a ``CheckFailed``: a test that expects a check to fail (``parametrize_with_checks``'
    ``expected_failures``) must not read a crash as that failure."""


class UntestableClaimWarning(UserWarning):
    """A learner's claim is beyond what the conformance check's canary audit can refute (see its message)."""


@dataclass(frozen=True)
class CanaryAuditResult:
    """What the conformance check's canary audit did: its design, what it observed, the bound it proved."""

    design: CanaryAuditDesign
    observe: str          # "mechanism" or "release"
    bound: float          # the largest valid ε lower bound at confidence 1 − α
    ceiling: float        # the audit's own ceiling (α split over the scores it actually tested)

    @property
    def tested(self) -> bool:
        """Whether the audit could have refuted the claim had the learner's noise been missing."""
        return self.design.testable


def check_canary_audit(learner) -> CanaryAuditResult | None:
    audit = _canary_audit(learner)
    if audit is None:
        return None  # nothing claimed, nothing to refute
    design, kind, observe, bounds, _ = audit
    if not design.testable:
        warnings.warn(UntestableClaimWarning(f"check_learner: {describe(learner)}: "
                                             + design.untestable_message()), stacklevel=3)
    g, bound = learner.guarantee(), bounds.epsilon
    if not bound <= g.epsilon:  # a raise, not an assert: ``python -O`` passed a noiseless learner (hostile XIII)
        raise AssertionError(
            f"{design.count} {kind} canaries on {'the mechanism' if observe else 'Φ'} prove ε ≥ {bound:.3f} at "
            f"δ = {g.delta:g} with confidence {1 - ALPHA:g}, above the claim ε = {g.epsilon:g} (this audit's "
            f"ceiling ε = {bounds.ceiling:.2f})")
    return CanaryAuditResult(design, "mechanism" if observe else "release", float(bound), float(bounds.ceiling))


def check_honest_record(learner) -> None:
    """The released Φ proves no more than the claim: Φ is computed from what the mechanism released, so a model
    built from anything else (a less noised draw, an average of several) shows here while its record looks right.

    The canary audit's own fit (the same design and seed), scored on Φ at its own α: a correct learner fails
    this check with probability at most ``ALPHA``, as it fails the canary audit.
    """
    audit = _canary_audit(learner)
    if audit is None or audit[4] is None:
        return  # no claim, or no record of the mechanism to compare Φ with
    design, kind, _, bounds, on_release = audit
    g = learner.guarantee()
    if not on_release.epsilon <= g.epsilon:
        raise AssertionError(
            f"the released Φ proves ε ≥ {on_release.epsilon:.3f} with {design.count} {kind} canaries (δ = "
            f"{g.delta:g}, confidence {1 - ALPHA:g}), above the claim ε = {g.epsilon:g}, while the recorded mechanism "
            f"proves {bounds.epsilon:.3f}: the model was not built from what the learner recorded")


def check_release_constants(learner) -> None:
    """What the learner records states the constants its claim was computed for, and something scores it."""
    mechanism = declared_mechanism(learner)
    if mechanism is None:
        return
    again = declared_mechanism(learner)
    if again != mechanism:  # one call's answer checked, another's used (a learner alternating passed)
        raise AssertionError(f"mechanism() changed between two calls ({mechanism!r}, then {again!r}): it must "
                             "follow from the constructor's parameters alone")
    found = disagreements(mechanism, learner.guarantee())
    if found:
        raise AssertionError("its declared release and its claim describe different mechanisms: " + "; ".join(found)
                             + " (one of them is wrong: the claim was computed for another mechanism, or the record "
                             "misdescribes the one that runs)")
    try:
        scorer_for(mechanism)
    except ValueError as error:
        raise AssertionError(str(error)) from None


# How much more of an observed word the ``record used`` check substitutes: this many times the largest
# recorded magnitude, plus one token a document.
SUBSTITUTED_BOOST = 10.0
# The observed word's share of Φ must grow at least this much (relative) when the boosted record is used.
SUBSTITUTION_EFFECT = 0.5


def _boost(mechanism: Mechanism, values: np.ndarray) -> np.ndarray:
    """The observed columns with far more of their words: every local report says the word (a bit set, a count
    raised), every topic's noisy count or sum raised well above anything recorded."""
    if values.dtype == np.bool_:
        return np.ones_like(values)
    lift = SUBSTITUTED_BOOST * (float(np.abs(values).max(initial=0.0)) + 1.0)
    return values + (np.ceil(lift) if np.issubdtype(values.dtype, np.integer) else lift)


def _unchanged(mechanism: Mechanism, values: np.ndarray) -> np.ndarray:
    return values


def check_record_used(learner) -> None:
    """Φ follows the recorded release: unchanged when the recorder returns an equal copy, more mass on the
    observed words when it returns them boosted."""
    if not records(learner.fit) or declared_mechanism(learner) is None:
        return  # nothing recorded: the release is audited on Φ alone
    X = _corpus(learner.k, seed=5)
    counts = np.asarray(X.sum(axis=0)).ravel()
    observed = np.sort(np.argsort(counts, kind="stable")[len(counts) // 2: len(counts) // 2 + 2])  # 2 mid words

    def fit(substitute):
        record = Recorder(observed, substitute=substitute)
        return np.asarray(learner.fit(X, 11, record=record), dtype=np.float64), record

    plain, record = fit(None)
    if record.mechanism is None:
        raise AssertionError("fit(X, seed, record) recorded no release although the learner declares "
                             f"one ({type(declared_mechanism(learner)).__name__}); call the recorder "
                             "where the mechanism releases")
    copied, _ = fit(_unchanged)
    if not np.allclose(copied, plain, rtol=1e-5, atol=1e-12):
        raise AssertionError(
            "Φ changed when the recorder returned an unchanged copy of the release: the learner does not build Φ "
            "from the array the recorder returns (use `noisy = record.<kind>(noisy, ...)` and go on with `noisy`)")
    boosted, _ = fit(_boost)
    before, after = plain[:, observed].sum(), boosted[:, observed].sum()
    if not after >= before * (1.0 + SUBSTITUTION_EFFECT):
        raise AssertionError(
            f"Φ did not follow the recorded {record.mechanism.kind} release: with far more of two observed words "
            f"substituted in it, their share of Φ went from {before:.4g} to {after:.4g}. The model is built from "
            "another array than the one recorded (a second noise draw, an average of draws, a copy made before the "
            "call), so the audit of the record says nothing about Φ")


def _canary_audit(learner):
    """(design, kind, whether the mechanism was observed, its bounds, the bounds on Φ when it was) of the
    conformance canary audit, one deterministic fit; None for a learner that claims no finite ε."""
    g = learner.guarantee()
    if math.isinf(g.epsilon):
        return None
    target = Pipeline(CorpusVocabulary(), learner, g)  # a public vocabulary: the learner's own claim is audited
    X = _corpus(learner.k, seed=4)
    kind = resolve_kind("auto", g.adjacency, g.relation)
    design = design_canary_audit(g, ALPHA, kind)
    canaries = make_canaries(X, design.count, kind, default_length(learner, X), seed=CANARY_SEED)
    observe = (target.observes_mechanism and canaries.observed_columns.size > 0
               and (g.adjacency is None or g.adjacency.document_level or canaries.word_level))
    release = target.fit(canaries.training_matrix(X), canaries.fit_seed,
                         observe=canaries.observed_columns if observe else None)
    _same_claim(learner, g, "the canary audit's fit")  # the bound is held against the claim read before it
    scores = all_canary_scores(release, [], canaries, tol=1e-8)
    audit = canary_results(canaries, scores, release, g.delta, ALPHA, "mechanism" if observe else "release")
    return design, kind, observe, audit.epsilon_lower_bounds, audit.release_epsilon_lower_bounds


# name → check, in the order they run (cheap and basic first).
CHECKS = {
    "parameters": check_parameters,
    "phi": check_phi,
    "same seed": check_same_seed,
    "pickle": check_pickle,
    "short documents": check_short_documents,
    "guarantee": check_guarantee,
    "release constants": check_release_constants,
    "record used": check_record_used,
    "canary audit": check_canary_audit,
    "honest record": check_honest_record,
}


def _unfinished(check: str) -> str:
    """How a check that crashed is named: never "fails the '…' check", the words of a finding, which a test of a
    planted bug matches (docs/adding-a-learner.md: ``pytest.raises(AssertionError, match="fails the 'record used'
    check")``), so a learner that crashed there passed that test with no check done (hostile pass XIX-s)."""
    return f"the {check!r} check did not finish"


def _raised(error: BaseException) -> str:
    """An exception from the learner's code as the failure names it: its repr, or its type and readable message
    when its own ``__repr__`` raises."""
    try:
        text = repr(error)
        if isinstance(text, str):
            return text
    except Exception:  # noqa: BLE001 - another's __repr__ failing in any way
        pass
    return f"{type(error).__name__}: {said(error)}"


def _raised_by_a_check(error: AssertionError) -> bool:
    """Whether a check raised ``error`` itself (its finding), not code it called (the learner's, a library's)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and os.path.realpath(frames[-1].filename) == os.path.realpath(__file__)


def check_learner(learner, checks: Sequence[str] | None = None) -> CanaryAuditResult | None:
    """Run every conformance check on ``learner`` (an instance, parameters as it will be audited).

    Raises AssertionError at the first failed check, naming the learner and the
    check: ``CheckFailed`` for the check's finding, ``CheckDidNotFinish`` when the
    learner's code (or a library) raised and the check could not finish. Pick parameters that fit in seconds on 150 short documents (few
    iterations): each check fits the learner once or twice, the canary audit
    once on up to MAX_CANARIES canaries (as many as its claim needs).
    checks: the names of the checks to run (``CHECKS``, in their order), default
    all; ``topicaudit.testing.parametrize_with_checks`` runs them one per test.

    Returns the canary audit's result (None for a learner that claims no
    finite ε, or when that check is not run). When the claim is beyond what the
    canary audit can refute, it warns (``UntestableClaimWarning``, naming the
    largest testable ε) and the result's ``tested`` is False: the learner passed
    every check but that claim was not tested.
    """
    if isinstance(checks, str):  # one check's name, not its letters (hostile pass XIX-zi, N10)
        checks = (checks,)
    checks = None if checks is None else tuple(checks)  # once: a generator, used up below, ran no check (XIX-zl)
    if checks is not None and not checks:
        # check_learner(l, []) ran nothing and said nothing: a test that passes without checking (pass XIX-v, CL3)
        raise ValueError(f"checks is empty, so no check would run; leave it out to run them all: {', '.join(CHECKS)}")
    unknown = sorted(set(checks or ()) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(map(repr, unknown))}; the checks: {', '.join(CHECKS)}")
    try:
        name = describe(learner)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        # Read before any check, outside them: a parameter's property, __eq__ or __repr__ calling sys.exit(0) left
        # check_learner and ended a script's conformance check with exit 0, read as a pass (hostile pass XIX-u).
        raise CheckDidNotFinish(f"check_learner: {_class_name(learner)}: no check ran: reading its parameters "
                                f"raised {_raised(error)} (from the learner's code: this is no finding on the "
                                "learner's claim)") from error
    result = None
    for check, run in CHECKS.items():
        if checks is not None and check not in checks:
            continue
        try:
            # The learner's code runs in the checks' process: a fork it returns from in both processes ends in the
            # child (a fork in its first fit had the child pass every check and print so, hostile pass XIX).
            with kept_process_state(f"the {check!r} check of {name}"):
                outcome = run(copy.deepcopy(learner))
            if check == "canary audit":
                result = outcome
        except AssertionError as error:
            if _raised_by_a_check(error):
                raise CheckFailed(f"check_learner: {name} fails the {check!r} check: {error}") from None
            # The learner's own `assert` (in its fit, say) read as the check's finding: "fails the 'canary audit'
            # check: <its message>", a refuted claim where no audit had finished.
            raise CheckDidNotFinish(f"check_learner: {name}: {_unfinished(check)}: it raised {_raised(error)} "
                                    "(from the learner's code, not this check: the check did not finish, so this is "
                                    "no finding on the learner's claim)") from error
        except PluginCodeError as error:  # the learner's own exception, raised in a pipeline's fit: no finding
            raise CheckDidNotFinish(f"check_learner: {name}: {_unfinished(check)}: it raised "
                                    f"{error.__cause__ or error!r} (from the learner's code, not this check: the "
                                    "check did not finish, so this is no finding on the learner's claim)") from error
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # a crash inside a check fails that check, never as its finding
            # SystemExit(0) from the learner's fit or guarantee() (called here directly, not through a pipeline)
            # left check_learner and ended a script's conformance check with exit 0, read as a pass (hostile XIX-s).
            raise CheckDidNotFinish(f"check_learner: {name}: {_unfinished(check)}: it raised {_raised(error)} "
                                    "(the check did not finish, so this is no finding on the learner's claim)") \
                from error
    return result
