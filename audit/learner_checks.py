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
* ``canary audit``: for a learner claiming a finite ε, a small canary audit
  through the engine's canary path (a few hundred canaries, one fit) proves no
  ε above the claim. A correct learner passes except with probability ``ALPHA``
  for a given seed; a learner whose noise is missing is caught.
"""
from __future__ import annotations

import copy
import inspect
import math
import pickle

import dp_accounting
import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.canaries import default_length, make_canaries, resolve_kind
from topicaudit.engine.run import all_canary_scores, canary_results
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets.privacy.composition import NEIGHBORING_RELATIONS, PLDAccountant
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.targets.learners.pipeline import Pipeline
from topicaudit.targets.learners.vocabulary import CorpusVocabulary

# The canary audit's confidence is 1 − ALPHA: a correct learner fails it with probability ≤ ALPHA per seed.
ALPHA = 0.01
CANARIES = 300
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
    assert not missing, (f"the constructor's parameter(s) {', '.join(missing)} are not stored under their own "
                         "names, so the learner cannot be rebuilt from its parameters")
    return {name: getattr(learner, name) for name in names}


def _describe(learner) -> str:
    """Its class and the parameters set away from their defaults, e.g. ``ZhuDPCollapsedGibbsLDA(k=3, epsilon=1.0)``."""
    try:
        signature = inspect.signature(type(learner)).parameters
    except (TypeError, ValueError):
        return repr(learner)
    shown = ", ".join(f"{name}={getattr(learner, name)!r}" for name, p in signature.items()
                      if hasattr(learner, name) and (name == "k" or not _same(getattr(learner, name), p.default)))
    return f"{type(learner).__name__}({shown})"


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _fit(learner, X: sp.csr_matrix, seed: int) -> np.ndarray:
    return np.asarray(learner.fit(X, seed))


def check_parameters(learner) -> None:
    params = _parameters(learner)
    rebuilt = type(learner)(**params)
    assert _parameters(rebuilt).keys() == params.keys()
    for name in params:
        if name == "k":
            continue
        try:
            type(learner)(**{**params, name: math.nan})
        except ValueError as error:  # topicaudit.errors.UserError is a ValueError too
            assert name in str(error), f"refusing {name} = nan, the message does not name it: {error}"
        else:
            raise AssertionError(f"{name} = nan was accepted by the constructor; check it there "
                                 "(topicaudit.targets.params)")


def check_phi(learner) -> None:
    X = _corpus(learner.k, seed=0)
    phi = _fit(learner, X, seed=0)
    want = (learner.k, X.shape[1])
    assert phi.shape == want, f"Φ has shape {phi.shape}, not (k, n_words) = {want}"
    assert phi.dtype == np.float32, f"Φ is {phi.dtype}, not float32"
    _assert_on_simplex(phi)


def _assert_on_simplex(phi: np.ndarray) -> None:
    assert np.all(np.isfinite(phi)), "Φ has entries that are not finite"
    assert phi.min() >= 0, f"Φ has a negative entry ({phi.min():g})"
    sums = phi.sum(axis=1, dtype=np.float64)
    assert np.allclose(sums, 1, atol=1e-5), f"Φ's rows do not sum to 1 (sums {sums.min():.6g}..{sums.max():.6g})"


def check_same_seed(learner) -> None:
    X = _corpus(learner.k, seed=1)
    first, second = _fit(learner, X, seed=7), _fit(learner, X, seed=7)
    assert np.array_equal(first, second), (f"two fits with seed 7 differ (largest difference "
                                           f"{np.abs(first - second).max():g}); take every random choice from seed")


def check_pickle(learner) -> None:
    try:
        clone = pickle.loads(pickle.dumps(learner))
    except Exception as error:  # any failure to pickle is the finding
        raise AssertionError(f"the learner does not survive a pickle round trip (Ray ships it): {error!r}") from None
    X = _corpus(learner.k, seed=2)
    assert np.array_equal(_fit(clone, X, seed=3), _fit(learner, X, seed=3)), \
        "the unpickled learner fits another Φ than the original with the same seed"


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
    assert phi.shape == (learner.k, X.shape[1]), f"Φ has shape {phi.shape}"
    _assert_on_simplex(phi)


def check_guarantee(learner) -> None:
    g = learner.guarantee()
    assert isinstance(g, Guarantee), f"guarantee() returned {type(g).__name__}, not a Guarantee"
    if math.isinf(g.epsilon) or g.event is None:
        return
    assert g.adjacency is not None, f"the claim ε = {g.epsilon:g} states no adjacency"
    relation = NEIGHBORING_RELATIONS[g.adjacency]
    accounted = []
    pld = PLDAccountant(relation)
    if pld.supports(g.event):
        pld.compose(g.event)
        accounted.append(("PLD", float(pld.get_epsilon(g.delta or PURE_DELTA))))
    rdp = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    if g.delta > 0 and rdp.supports(g.event):
        rdp.compose(g.event)
        accounted.append(("RDP", float(rdp.get_epsilon(g.delta))))
    assert accounted, f"no dp-accounting accountant supports the claim's event {type(g.event).__name__}"
    close = [eps for _, eps in accounted if math.isclose(eps, g.epsilon, rel_tol=1e-3, abs_tol=EPSILON_TOLERANCE)]
    assert close, (f"the claim ε = {g.epsilon:.6g} at δ = {g.delta:g} is not what its event gives: "
                   + ", ".join(f"{name} accountant ε = {eps:.6g}" for name, eps in accounted))


def check_canary_audit(learner) -> None:
    g = learner.guarantee()
    if math.isinf(g.epsilon):
        return  # nothing claimed, nothing to refute
    target = Pipeline(CorpusVocabulary(), learner, g)  # a public vocabulary: the learner's own claim is audited
    X = _corpus(learner.k, seed=4)
    kind = resolve_kind("auto", g.adjacency, g.parameters.get("neighbours"))
    canaries = make_canaries(X, CANARIES, kind, default_length(learner, X), seed=0)
    observe = (target.observes_mechanism and canaries.observed_columns.size > 0
               and (g.adjacency is None or g.adjacency.document_level or canaries.word_level))
    release = target.fit(canaries.training_matrix(X), canaries.fit_seed,
                         observe=canaries.observed_columns if observe else None)
    scores = all_canary_scores(release, [], canaries, tol=1e-8)
    audit = canary_results(canaries, scores, release, g.delta, ALPHA, "mechanism" if observe else "release")
    bound = audit["epsilon_lower_bounds"]["epsilon"]
    assert bound <= g.epsilon, (
        f"{CANARIES} {kind} canaries on {'the mechanism' if observe else 'Φ'} prove ε ≥ {bound:.3f} at "
        f"δ = {g.delta:g} with confidence {1 - ALPHA:g}, above the claim ε = {g.epsilon:g}")


# name → check, in the order they run (cheap and basic first).
CHECKS = {
    "parameters": check_parameters,
    "phi": check_phi,
    "same seed": check_same_seed,
    "pickle": check_pickle,
    "short documents": check_short_documents,
    "guarantee": check_guarantee,
    "canary audit": check_canary_audit,
}


def check_learner(learner) -> None:
    """Run every conformance check on ``learner`` (an instance, parameters as it will be audited).

    Raises AssertionError at the first failed check, naming the learner and the
    check. Pick parameters that fit in seconds on 150 short documents (few
    iterations): each check fits the learner once or twice.
    """
    name = _describe(learner)
    for check, run in CHECKS.items():
        try:
            run(copy.deepcopy(learner))
        except AssertionError as error:
            raise AssertionError(f"check_learner: {name} fails the {check!r} check: {error}") from None
        except Exception as error:  # a crash inside a check fails that check, named like any other failure
            raise AssertionError(f"check_learner: {name} fails the {check!r} check: it raised {error!r}") from error
