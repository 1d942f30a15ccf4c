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

The canary audit's size follows the claim (``design_canary_audit``): m
canaries at confidence 1 − α prove at most their ceiling, every canary
guessed right (``bounds.verdict.bound_ceiling``), and refuting ε takes about
e^ε·ln(1/α′) right guesses (α′ one test's share of α), so a fixed 300 (ceiling
ε ≈ 3.55 at α = 0.01) let a learner with no noise pass any larger claim. The
check takes the least count on the ladder MIN_CANARIES·GROWTH^j, up to
MAX_CANARIES, at which a noiseless learner, one that gives away every member
canary its mechanism reaches (``reach_probability`` of the claim's
dp-accounting event: all, unless it subsamples), proves the claim + MARGIN,
with the audit's own coins and α split. The count is a function of the claim
only, so the audit stays valid at α. Measured (docs/adding-a-learner.md, "The
conformance suite's canary audit"): 300 canaries up to ε = 3, 2,235 at ε = 5, 50,822 at
ε = 8 (ceiling 8.61); DP-SVI (64% of canaries reached) 1,431, 10,658 and
242,338. A claim no count up to MAX_CANARIES can test (ε > 9.69 when every
canary is reached) is not passed silently: the audit runs at MIN_CANARIES and
warns (``UntestableClaimWarning``, naming the largest testable ε), and the
``CanaryAuditResult`` that ``check_learner`` returns has ``tested`` False.
"""
from __future__ import annotations

import copy
import functools
import inspect
import math
import pickle
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import dp_accounting
import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.canaries import PAIRED_KINDS, canary_coins, default_length, make_canaries, resolve_kind
from topicaudit.attacks.mechanism import scorer_for
from topicaudit.bounds.verdict import VALID_BOUNDS, bound_ceiling, bound_tests
from topicaudit.engine.canary_audit import all_canary_scores, canary_results
from topicaudit.inputs.synthetic import synthetic_corpus
from topicaudit.targets.privacy.composition import NEIGHBORING_RELATIONS, PLDAccountant
from topicaudit.targets.base import declared_mechanism, records
from topicaudit.targets.mechanisms import Mechanism, Recorder
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.targets.privacy.release_check import disagreements
from topicaudit.targets.learners.pipeline import Pipeline
from topicaudit.targets.learners.vocabulary import CorpusVocabulary

# The canary audit's confidence is 1 − ALPHA: a correct learner fails it with probability ≤ ALPHA per seed.
ALPHA = 0.01
# The canary audit's size, chosen from the claim (``design_canary_audit``): at least MIN_CANARIES, at most
# MAX_CANARIES, enough that a learner with no noise proves ε ≥ claim + MARGIN.
MIN_CANARIES = 300
MAX_CANARIES = 250_000
MARGIN = 0.5
# The design's canary counts: MIN_CANARIES·GROWTH^j (and MAX_CANARIES), so a design is within GROWTH of the least.
GROWTH = 1.25
# The most scores a canary audit tests (the mechanism's two for Laplace counts; ζ and the column on Φ): the design
# assumes α split over this many scores × VALID_BOUNDS, as ``canary_results`` splits it at most.
DESIGN_SCORES = 2
# The canaries' seed (their coins and the canary release's fit seed), and the design's draws of which canaries a
# subsampled mechanism reaches.
CANARY_SEED = 0
DESIGN_SEED = 1
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


def describe(learner) -> str:
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
    assert accounted, f"no dp-accounting accountant supports the claim's event {type(g.event).__name__}"
    close = [eps for _, eps in accounted if math.isclose(eps, g.epsilon, rel_tol=1e-3, abs_tol=EPSILON_TOLERANCE)]
    assert close, (f"the claim ε = {g.epsilon:.6g} at δ = {g.delta:g} is not what its event gives: "
                   + ", ".join(f"{name} accountant ε = {eps:.6g}" for name, eps in accounted))


class UntestableClaimWarning(UserWarning):
    """A learner's claim is beyond what the conformance check's canary audit can refute (see its message)."""


def reach_probability(event) -> float:
    """The probability that a canary reaches at least one output of the mechanism ``event`` describes.

    1 for a mechanism that reads every record (and for no event, or one this
    does not know); q for Poisson subsampling at rate q; over a composition,
    1 − Π(1 − reach). A learner whose noise is missing reveals a canary it
    reached and nothing of one it did not, so this is the share of member
    canaries a noiseless learner gives away: the design's model of it.
    """
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return 0.0
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return float(event.sampling_probability) * reach_probability(event.event)
    if isinstance(event, dp_accounting.SampledWithoutReplacementDpEvent):
        return event.sample_size / event.source_dataset_size * reach_probability(event.event)
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return 1.0 - (1.0 - reach_probability(event.event)) ** int(event.count)
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return 1.0 - math.prod(1.0 - reach_probability(e) for e in event.events)
    return 1.0


@dataclass(frozen=True)
class CanaryAuditDesign:
    """How large the conformance check's canary audit is for one claim, and what it can prove.

    ``ceiling``: the largest ε the audit's bounds could prove from these
    coins, every canary guessed right (``bound_ceiling``). ``noiseless``: the
    bound a learner with no noise gives, when it gives away exactly the
    member canaries its mechanism reaches (``reach``; all of them, the
    ceiling, unless the mechanism subsamples). ``testable``: the noiseless
    bound exceeds the claim by ``MARGIN``; when it is not, ``limit`` is the
    largest ε a check of at most MAX_CANARIES canaries can refute at this δ
    and α, and the audit runs at MIN_CANARIES canaries.
    """

    epsilon: float
    delta: float
    alpha: float
    kind: str
    reach: float
    count: int
    ceiling: float
    noiseless: float
    testable: bool
    limit: float | None = None

    def describe(self) -> str:
        return (f"{self.count} {self.kind} canaries, ceiling ε = {self.ceiling:.2f}, a noiseless learner's bound "
                f"ε = {self.noiseless:.2f}" + (f" (it reaches {self.reach:.0%} of the canaries)" if self.reach < 1
                                                else ""))

    def untestable_message(self) -> str:
        limit = max(self.limit or 0.0, 0.0)
        return (f"the claim ε = {self.epsilon:g} at δ = {self.delta:g} cannot be refuted by a conformance check of "
                f"this size: even with no noise at all, {MAX_CANARIES} {self.kind} canaries"
                + (f" (of which the mechanism reaches {self.reach:.0%})" if self.reach < 1 else "")
                + f" prove at most ε ≈ {limit + MARGIN:.2f} at confidence {1 - self.alpha:g}, so claims above "
                f"ε = {limit:.2f} at δ = {self.delta:g} are not tested; the canary audit ran at {self.count} "
                "canaries and proved nothing about the claim (audit it with `topicaudit run` and more canaries, "
                "or test a smaller ε)")


def _noiseless_scores(coins: np.ndarray, reach: float, paired: bool) -> np.ndarray:
    """The canary scores of a learner with no noise: its reached canaries separated, the others tied at 0."""
    if reach >= 1:
        return coins.astype(np.float64)
    reached = np.random.default_rng(DESIGN_SEED).random(coins.size) < reach
    if paired:  # both alternatives train: the one that trained shows when it is reached
        return np.where(reached, np.where(coins, 1.0, -1.0), 0.0)
    return (coins & reached).astype(np.float64)


def _design_share(alpha: float) -> float:
    return alpha / (DESIGN_SCORES * len(VALID_BOUNDS))


def _noiseless_bound(count: int, delta: float, alpha: float, reach: float, paired: bool) -> float:
    """The bound a noiseless learner gives with ``count`` of the check's canaries, α split as the audit may."""
    coins = canary_coins(count, CANARY_SEED)
    if coins.all() or not coins.any():
        return 0.0
    scores = {"noiseless": _noiseless_scores(coins, reach, paired)}
    return max(b.epsilon for b in bound_tests(scores, coins, delta, _design_share(alpha)).values())


def _ceiling(count: int, delta: float, alpha: float) -> float:
    coins = canary_coins(count, CANARY_SEED)
    return bound_ceiling(coins, delta, _design_share(alpha)) if 0 < coins.sum() < count else 0.0


def _ladder() -> list[int]:
    counts, m = [], float(MIN_CANARIES)
    while m < MAX_CANARIES:
        counts.append(int(round(m)))
        m *= GROWTH
    return counts + [MAX_CANARIES]


@functools.lru_cache(maxsize=64)
def _design(epsilon: float, delta: float, alpha: float, kind: str, reach: float) -> CanaryAuditDesign:
    paired = kind in PAIRED_KINDS
    target = epsilon + MARGIN
    ladder = _ladder()
    seen: dict[tuple[int, float], float] = {}

    def at(i: int, d: float) -> float:
        if (i, d) not in seen:
            seen[i, d] = _noiseless_bound(ladder[i], d, alpha, reach, paired)
        return seen[i, d]

    def design(i: int, testable: bool, limit: float | None = None) -> CanaryAuditDesign:
        return CanaryAuditDesign(epsilon, delta, alpha, kind, reach, ladder[i], _ceiling(ladder[i], delta, alpha),
                                 at(i, delta), testable, limit)

    def untestable(d: float) -> CanaryAuditDesign:
        return design(0, False, limit=max(bound for (_, at_d), bound in seen.items() if at_d == d) - MARGIN)

    # First at δ = 0 (closed forms, milliseconds): a δ > 0 only lowers the bounds, so no count below the least
    # that reaches the target at δ = 0 reaches it at δ. Doubling steps up the ladder (×GROWTH³ ≈ 2), then
    # bisection: the least count on the ladder, the noiseless bound growing with the count.
    below, i = -1, 0
    while at(i, 0.0) < target:
        if i == len(ladder) - 1:
            return untestable(0.0)  # what δ = 0 cannot reach, no δ > 0 reaches
        below, i = i, min(i + 3, len(ladder) - 1)
    while i - below > 1:
        mid = (below + i) // 2
        below, i = (below, mid) if at(mid, 0.0) >= target else (mid, i)
    # Then at the claim's δ, upwards from there (usually no step or one).
    while at(i, delta) < target:
        if i == len(ladder) - 1:
            return untestable(delta)
        i += 1
    return design(i, True)


def design_canary_audit(guarantee: Guarantee, alpha: float = ALPHA, kind: str | None = None) -> CanaryAuditDesign:
    """The canary audit that can refute ``guarantee``'s (ε, δ) when the learner's noise is missing.

    The least canary count on the ladder MIN_CANARIES·GROWTH^j (≤ MAX_CANARIES)
    whose noiseless bound (see ``CanaryAuditDesign``) at confidence 1 − α is at
    least ε + MARGIN. The count is a function of the claim alone, never of a
    fit, so the audit's α stays what it is. Under pure ε-DP one right guess
    has probability ≤ e^ε/(1 + e^ε), so refuting ε takes about
    e^ε·ln(1/α') right guesses (α' the share of α of one test).
    """
    kind = kind or resolve_kind("auto", guarantee.adjacency, guarantee.relation)
    return _design(float(guarantee.epsilon), float(guarantee.delta), float(alpha), kind,
                   reach_probability(guarantee.event))


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
    assert bound <= g.epsilon, (
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
    assert on_release.epsilon <= g.epsilon, (
        f"the released Φ proves ε ≥ {on_release.epsilon:.3f} with {design.count} {kind} canaries (δ = "
        f"{g.delta:g}, confidence {1 - ALPHA:g}), above the claim ε = {g.epsilon:g}, while the recorded mechanism "
        f"proves {bounds.epsilon:.3f}: the model was not built from what the learner recorded")


def check_release_constants(learner) -> None:
    """What the learner records states the constants its claim was computed for, and something scores it."""
    mechanism = declared_mechanism(learner)
    if mechanism is None:
        return
    found = disagreements(mechanism, learner.guarantee())
    assert not found, ("its declared release and its claim describe different mechanisms: " + "; ".join(found)
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
    assert record.mechanism is not None, ("fit(X, seed, record) recorded no release although the learner declares "
                                          f"one ({type(declared_mechanism(learner)).__name__}); call the recorder "
                                          "where the mechanism releases")
    copied, _ = fit(_unchanged)
    assert np.allclose(copied, plain, rtol=1e-5, atol=1e-12), (
        "Φ changed when the recorder returned an unchanged copy of the release: the learner does not build Φ "
        "from the array the recorder returns (use `noisy = record.<kind>(noisy, ...)` and go on with `noisy`)")
    boosted, _ = fit(_boost)
    before, after = plain[:, observed].sum(), boosted[:, observed].sum()
    assert after >= before * (1.0 + SUBSTITUTION_EFFECT), (
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


def check_learner(learner, checks: Sequence[str] | None = None) -> CanaryAuditResult | None:
    """Run every conformance check on ``learner`` (an instance, parameters as it will be audited).

    Raises AssertionError at the first failed check, naming the learner and the
    check. Pick parameters that fit in seconds on 150 short documents (few
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
    unknown = sorted(set(checks or ()) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(map(repr, unknown))}; the checks: {', '.join(CHECKS)}")
    name = describe(learner)
    result = None
    for check, run in CHECKS.items():
        if checks is not None and check not in checks:
            continue
        try:
            outcome = run(copy.deepcopy(learner))
            if check == "canary audit":
                result = outcome
        except AssertionError as error:
            raise AssertionError(f"check_learner: {name} fails the {check!r} check: {error}") from None
        except Exception as error:  # a crash inside a check fails that check, named like any other failure
            raise AssertionError(f"check_learner: {name} fails the {check!r} check: it raised {error!r}") from error
    return result
