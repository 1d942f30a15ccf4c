"""The verdict on a run's evidence: every test its claim admits, at one share of α, with the audit's strength.

``run`` stores it in results.json; ``check`` (with the run's own claim or
another), the summary, the report's card and ledger, ``sweep`` and the API
all reach it through :func:`run_verdict`, so one run has one ε per claim.

A claim (ε, δ) is *violated* when the data prove ε_LB > ε at confidence
1 − α. The bounds are one-run bounds, valid for a single training in which
each candidate was included independently with probability ½: the natural
documents of the LiRA target and the canaries of the canary release. α is
split over every test (Bonferroni, ``topicaudit.bounds.verdict.judge``), so the
largest bound is itself valid and a correct mechanism is flagged in at most α
of audits.

A claim is tested by the experiments of its adjacency: a document-level claim
by natural documents and document canaries, a word-level one (``word``,
``local-word``) by word canaries. CONSISTENT means "not refuted", never
"proven private": the result also states the audit's ceiling, the largest ε
any outcome of its coins could have proven, or the simulated power of a
mechanism audit and the bug families its design cannot see.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.canaries import UNRELEASED_PENALTY, WORD_KINDS, anchored_positions
from topicaudit.attacks.mechanism import RELEASED_FRESH, neutral_fresh_scores, simulate_score_sets
from topicaudit.attacks.registry import bounded_attacks
from topicaudit.bounds.epsilon import EpsilonBound, Method, check_level
from topicaudit.bounds.one_run import OneRunAuditor, delta_tail_bound
from topicaudit.bounds.verdict import (
    THREAT_MODELS,
    VALID_BOUNDS,
    Evidence,
    bound_ceiling,
    bound_tests,
    canary_verdict_scores,
    guess_family,
    judge,
)
from topicaudit.engine.storage.results import CURVE, DELTA_TAIL, CheckResult, GuaranteeInfo, MechanismInfo, RunResults
from topicaudit.errors import UserError
from topicaudit.targets.mechanisms import MECHANISMS, GaussianNoise, SetUnion
from topicaudit.targets.plugins import import_recorded
from topicaudit.targets.privacy.release_check import disagreements
from topicaudit.targets.privacy.analytic_gaussian import gaussian_step_profile
from topicaudit.targets.privacy.composition import privacy_profile
from topicaudit.targets.privacy.guarantee import RELEASE_SUPPORT, TRAINING_WORDS, adjacency_of, declared

DEFAULT_DELTA = 1e-5  # as [attack] delta, for runs that recorded none
DEFAULT_ALPHA = 0.05  # as [attack] alpha, for runs that recorded none
# The natural-document tests keep the one-run bound and guesses the run itself reports.
NATURAL_METHODS = (Method.ONE_RUN,)
# Canaries of fresh words whose coin decides whether their word trains at all: a δ-tail test can read them.
FRESH_WORD_KINDS = ("unique-word", "word")
# The released Φ's tests beside a mechanism audit: Steinke et al.'s bound on each release score.
RELEASE_METHODS = (Method.ONE_RUN,)
# Simulated audits per power estimate, and their seed (the estimate is reproducible).
POWER_REPLICATES = 20
POWER_SEED = 20240613
# The power a CONSISTENT verdict is held to: below it, check names the canary count that would reach it.
TARGET_POWER = 0.95
# How far that search goes: canaries, and seconds of simulation (the simulation's cost grows with the count).
POWER_SEARCH_LIMIT = 1_000_000
POWER_SEARCH_SECONDS = 10.0
# A bound at its ceiling (every guess right) is told what this many times its candidates, as canaries, could prove.
CEILING_FACTOR = 4



CanaryFiles = tuple[dict[str, np.ndarray], np.ndarray, str, "np.ndarray | None"]


def run_verdict(results: RunResults, natural: dict[str, np.ndarray] | None, canary_files: CanaryFiles | None,
                run_dir: Path, epsilon: float | None = None, delta: float | None = None,
                alpha: float | None = None, attacks: list[str] | None = None,
                suggest: float | None = None) -> CheckResult:
    """The verdict on a run's evidence (its records and scores, as read or as the run computed them).

    canary_files: the canaries' scores in coin order, their coins, kind and
    anchors. Every test the claim's adjacency admits is run at one share of α
    (``bounds.verdict.judge``): the natural documents', the canaries' on what
    they observed, and, when they observed a learner's mechanism, the same
    canaries on the released Φ too. Φ is a post-processing of what the
    mechanism released, so a Φ bound above the claim refutes it whatever the
    mechanism's own test says: the model was built from something other than
    its record, or the claim is wrong.
    """
    canaries, anchors = (None, None) if canary_files is None else (canary_files[:3], canary_files[3])
    composed = None  # the pipeline's composed ε, when its vocabulary step is held to its own claim instead
    target, guarantee = results.target, results.target.guarantee
    learner = target.learner
    word_canaries = canaries is not None and canaries[2] in WORD_KINDS
    adjacency = adjacency_of(guarantee.adjacency)
    word_claim = adjacency is not None and not adjacency.document_level and (epsilon is None or word_canaries)
    observe = results.canaries.observe if results.canaries is not None else None
    recorded_mechanism = results.canaries.mechanism if results.canaries is not None else None
    if recorded_mechanism is not None and recorded_mechanism.kind not in MECHANISMS:
        import_recorded(target.learner_source, target.vocabulary_source)  # a plug-in's own kind, and its scorer
    if recorded_mechanism is not None and recorded_mechanism.stage == "vocabulary" and observe == "mechanism":
        # The canaries observed the DP vocabulary step: by default, hold it to its own claim.
        step = recorded_mechanism.parameters or {}
        guarantee = dataclasses.replace(guarantee, epsilon=step["epsilon"], delta=step["delta"], event=None)
        learner = f"{target.vocabulary_step} (the vocabulary step's own claim)"
        composed = results.target.guarantee.epsilon
    if epsilon is None:
        epsilon = guarantee.epsilon
        if epsilon is None:
            raise UserError(f"the target of {run_dir} ({learner}) claims no ε; "
                            "pass the claim to test with --epsilon (and --delta)")
    if word_claim and not word_canaries:
        raise UserError(
            f"the target of {run_dir} ({learner}) claims ε = {epsilon:g} per word ({guarantee.adjacency} "
            "adjacency), which whole-document tests cannot hold it to; audit it with word canaries "
            "(--canaries M, kind auto or word), or pass a document-level claim (group privacy: L·ε for "
            "documents of L words) with --epsilon"
        )
    recorded = results.recorded_bounds
    if delta is None:
        delta = guarantee.delta if guarantee.epsilon is not None else (
            recorded.delta if recorded is not None and recorded.delta is not None else DEFAULT_DELTA)
    if alpha is None:
        alpha = (round(1 - recorded.confidence, 12) if recorded is not None and recorded.confidence is not None
                 else DEFAULT_ALPHA)
    if not (epsilon >= 0 and math.isfinite(epsilon)):
        raise UserError(f"--epsilon must be a finite number ≥ 0 (got {epsilon})")
    check_level(alpha, delta, "--alpha", "--delta")

    evidence: list[Evidence] = []
    mechanism: MechanismInfo | None = None
    shape: ClaimShape | None = None
    methods: tuple[Method, ...] = ()
    notes: list[str] = []
    if canaries is not None and word_canaries == word_claim:
        observe = observe or "release"  # runs from before canaries could observe a mechanism
        methods = tuple(VALID_BOUNDS)
        mechanism = recorded_mechanism if observe == "mechanism" else None
        if mechanism is not None and epsilon == guarantee.epsilon:
            shape = claim_shape(guarantee, mechanism, anchors)
            if shape is not None:
                # The curve test subsumes Steinke et al.'s bound here; dropping it leaves α to the tests that bite.
                methods = (Method.FDP_PURE, shape.method)
        if mechanism is not None and mechanism.fresh_released is not None:
            methods += (DELTA_TAIL,)
        # A learner's release (not a vocabulary step's own claim) may hold its δ to a δ-tail test too.
        # (Behind the non-private observed vocabulary, unreleased canary words are that step's doing.)
        learner_release = (mechanism is None or mechanism.stage != "vocabulary") \
            and target.vocabulary_step != "observed"
        tail, note = release_tail(canaries, results.target.guarantee.parameters) if learner_release else (None, None)
        notes += [note] if note else []
        shaped = _shaped_tests(shape, methods, mechanism, float(epsilon), float(delta))
        if mechanism is None and tail is not None:
            shaped, methods = _release_tail_test(tail, float(delta)), methods + (DELTA_TAIL,)
        evidence.append(Evidence("canaries/", canary_verdict_scores(canaries[0], observe), canaries[1],
                                 tuple(m for m in methods if m not in SHAPED),
                                 f"canaries on {THREAT_MODELS[observe]}",
                                 shaped=shaped, shaped_count=sum(m in SHAPED for m in methods)))
        if mechanism is not None and learner_release:
            # Φ is computed from the mechanism's outputs: the claim covers it too (not so for a vocabulary
            # step's own claim, which says nothing of the learner behind it).
            # One method each (the two valid ones agree to ~0.01 on these scores): α is spent where it bites.
            evidence.append(Evidence("canaries-release/", canary_verdict_scores(canaries[0], "release"),
                                     canaries[1], RELEASE_METHODS, f"canaries on {THREAT_MODELS['release']}",
                                     shaped=None if tail is None else _release_tail_test(tail, float(delta)),
                                     shaped_count=0 if tail is None else 1))
    if natural is not None and not word_claim:
        names = [n for n in natural if n not in ("is_member", "doc_index")]
        missing = [a for a in attacks or () if a not in names]
        if missing:
            raise UserError(f"--attack {missing[0]}: {run_dir} has no scores of that attack; "
                            f"it has: {', '.join(names)}")
        chosen = attacks or bounded_attacks(names)
        if not chosen:
            raise UserError(f"{run_dir / 'scores.npz'} holds no attack scores; rerun the audit")
        evidence.append(Evidence("natural/", {a: natural[a] for a in chosen}, natural["is_member"],
                                 NATURAL_METHODS, f"natural documents on {THREAT_MODELS['release']}", family=None))
    if not evidence:
        raise UserError(f"{run_dir} has only word canaries, which test word-level claims; the target claims "
                        f"{guarantee.adjacency or 'nothing'}-level privacy: rerun with document canaries "
                        "([attack.canaries] kind = \"unique-word\") or shadow models")
    judgement = judge(evidence, float(delta), float(alpha))
    if not judgement.bounds:
        raise UserError(f"{run_dir}: every candidate landed on the same side of its coin; nothing can be tested")
    power = None
    if mechanism is not None and (mechanism.stage != "vocabulary" or mechanism.anchors is not None):
        labels = evidence[0].labels
        try:
            power = simulated_power(mechanism, labels, float(epsilon), float(delta), judgement.alpha_each, shape,
                                    [m for m in methods if m not in SHAPED])
        except ValueError as error:  # a release kind this installation cannot simulate (a plug-in's own)
            notes = [*notes, f"no power estimate: {error}"]
        if power is not None and mechanism.kind == GaussianNoise.kind and mechanism.contribution is None:
            notes = [*notes, "a power simulated with each canary's whole contribution in its scored topic (the run "
                             "predates the measured one), which overstated DP-SVI's: rerun the audit to measure it"]
    needed = None
    if power is not None and suggest is not None and power["2x"] < suggest:
        assert mechanism is not None  # a power is simulated for a mechanism only
        methods_left = [m for m in methods if m not in SHAPED]
        needed = canaries_for_power(
            lambda m: simulated_power(mechanism, np.zeros(m, bool), float(epsilon), float(delta),
                                      judgement.alpha_each, shape, methods_left, factors=(2.0,))["2x"],
            evidence[0].labels.size, suggest)
    base = evidence[0].labels.size  # the canaries when there are any, else the natural documents
    raise_ceiling = canaries_for_ceiling(max(b.epsilon for b in judgement.bounds.values()), judgement.ceiling,
                                         float(epsilon), float(delta), judgement.alpha_each, base)
    result = CheckResult(run_dir, float(epsilon), float(delta), float(alpha), judgement.bounds, judgement.ceiling,
                         "word" if word_claim else "document", {e.prefix: e.observed for e in evidence}, False, power,
                         unseen=unseen_bugs(mechanism, composed, target.learner) + notes,
                         reversed_scores=list(judgement.reversed),
                         disagreements=recorded_disagreements(mechanism, guarantee),
                         canaries_for_power=needed, canaries_for_ceiling=raise_ceiling)
    # Tied scores never had a chance; scores at chance have none either, unless a simulation of the claimed
    # mechanism says what this design can catch (a correct mechanism audited well is often at chance).
    no_signal = not result.violated and (judgement.tied or (not judgement.signal and power is None))
    return dataclasses.replace(result, no_signal=no_signal)


def _shaped_tests(shape: ClaimShape | None, methods: tuple, mechanism: MechanismInfo | None, epsilon: float,
                  delta: float):
    """The canaries' tests outside the (ε, δ) family: the claimed curve, the δ-tail (None when neither runs)."""
    if not any(m in SHAPED for m in methods):
        return None

    def shaped(scores: dict[str, np.ndarray], labels: np.ndarray, alpha_each: float) -> dict[str, EpsilonBound]:
        tests = {}
        if shape is not None and shape.method in methods:
            tests.update(shape.tests(scores, labels, epsilon, alpha_each))
        if DELTA_TAIL in methods:
            assert mechanism is not None and mechanism.fresh_released is not None  # a DP vocabulary step's
            released, fresh = mechanism.fresh_released
            tests[f"mechanism:{DELTA_TAIL}"] = delta_tail_bound(released, fresh, delta, alpha_each)
        return tests
    return shaped


def release_tail(canaries, parameters: dict | None) -> tuple[tuple[int, int] | None, str | None]:
    """(released, fresh) for the δ-tail test of a learner's release, and a note when the test cannot run.

    It runs when the learner declares that its release can hold only words
    some training document holds (``release_support = "training-words"``):
    then a canary's fresh word is released with probability 0 without its
    canary and at most δ with it, whatever ε. A released word of a canary
    that did not train contradicts that declaration: the test is void, and
    the note says so. A release that leaves canary words out without the
    declaration gets a note naming what the test would need.
    """
    scores, coins, kind = canaries
    if kind not in FRESH_WORD_KINDS or "column" not in scores:
        return None, None
    released = np.asarray(scores["column"]) > -UNRELEASED_PENALTY / 2
    if declared(parameters, RELEASE_SUPPORT) != TRAINING_WORDS:
        if (~released).any():
            return None, ("a δ the release cannot keep: it leaves canary words out, but the learner does not "
                          "declare that it can hold only training words ([target] guarantee parameter "
                          "release_support = \"training-words\"), which the δ-tail test needs")
        return None, None
    strays = int((released & ~coins).sum())
    if strays:
        return None, (f"a δ the release cannot keep: the learner declares that its release holds only training "
                      f"words, yet {strays} canary words that did not train were released (the declaration is "
                      "false, so its δ-tail test is void)")
    return (int(released.sum()), int(coins.size)), None


def _release_tail_test(tail: tuple[int, int], delta: float):
    """The δ-tail test of a learner's release that can hold only training words (``release_tail``)."""
    def shaped(scores: dict[str, np.ndarray], labels: np.ndarray, alpha_each: float) -> dict[str, EpsilonBound]:
        released, fresh = tail
        return {f"column:{DELTA_TAIL}": delta_tail_bound(released, fresh, delta, alpha_each)}
    return shaped


def recorded_disagreements(mechanism: MechanismInfo | None, guarantee: GuaranteeInfo) -> list[str]:
    """The learner's recorded constants that its claim's event states otherwise (a vocabulary step's claim is
    read from its record, so it cannot disagree)."""
    if mechanism is None or mechanism.stage == "vocabulary":
        return []
    try:
        return disagreements(mechanism.release(), guarantee.guarantee())
    except ValueError:  # a kind or event this installation does not know: nothing to compare
        return []


def unseen_bugs(mechanism: MechanismInfo | None, composed: float | None = None,
                learner: str | None = None) -> list[str]:
    """The bug families this mechanism audit's design cannot see, so its stated power does not cover them.

    composed: the pipeline's composed ε when the audit held its DP vocabulary
    step to the step's own claim (the learner behind it is then untested).
    """
    if mechanism is None:
        return []
    unseen = []
    if composed is not None:
        unseen.append(f"the learner {learner} behind the vocabulary step, nor the pipeline's composed claim "
                      f"ε = {composed:g}: threshold canaries observe the step only; audit the learner with "
                      "[target] vocabulary = \"all\"")
    if mechanism.stage != "vocabulary":
        unseen.append("a model built from other than what the learner recorded: seen only by the released Φ's "
                      "own tests, whose power is not simulated")
    else:
        # A skipped cap leaves ε alone and moves δ by about a factor Δ0: tens of millions of fresh canary words
        # would show it (docs/canaries.md). The power covers noise and budget errors (both forms are simulated).
        unseen.append("a skipped per-document cap Δ0 (it changes only δ, which no audit of practical size sees)")
    return unseen


def claimed_profile(guarantee: GuaranteeInfo, mechanism: MechanismInfo) -> tuple[np.ndarray, np.ndarray] | None:
    """The (ε_i, δ_i) pairs of the claimed mechanism's whole curve where its shape is known, else None.

    Gaussian mechanisms have one: a learner's from its dp-accounting event, a
    Gaussian DP vocabulary step's from its σ (its event states only (ε, δ)).
    """
    if mechanism.stage == "vocabulary":
        p = mechanism.parameters or {}
        if p.get("noise") != "gaussian":
            return None
        return gaussian_step_profile(float(p["scale"]), float(p["epsilon"]), float(p["delta"]))
    return privacy_profile(guarantee.guarantee()) if guarantee.event else None


@dataclass(frozen=True)
class ClaimShape:
    """The claimed mechanism's own trade-off curve, where its shape is known: tested beside the (ε, δ) family.

    Either a ``profile`` of (ε_i, δ_i) pairs, tested on every canary by the
    f-DP curve test (``Method.FDP_CURVE``), or, for a Gaussian DP vocabulary
    step audited with anchored canaries, the Gaussian mechanism itself: an
    anchored canary's word is a candidate with or without it, so the step
    releases its weight through N(0, σ²) at L2 sensitivity 1, exactly μ-GDP
    with μ = 1/σ, and the threshold (post-processing) spends none of its δ
    there; the fresh canaries' δ-tail test holds that δ. The μ-GDP test
    (``Method.FDP_GDP``) on the anchored canaries reads μ_LB as ε at δ/2,
    the point the step's σ was calibrated to, so it exceeds the claimed ε
    exactly when μ_LB > 1/σ.
    """

    method: Method
    profile: tuple[np.ndarray, np.ndarray] | None = None
    gaussian_delta: float = 0.0     # δ at which μ-GDP is read as ε (half the step's δ)
    anchored: np.ndarray | None = None  # (m,) bool: the canaries the μ-GDP test scores

    def tests(self, scores: dict[str, np.ndarray], labels: np.ndarray, claimed_epsilon: float, alpha_each: float,
              anchored: np.ndarray | None = None) -> dict[str, EpsilonBound]:
        """This shape's test of each score; ``anchored`` replaces the run's own mask (simulated audits)."""
        if self.profile is not None:
            return curve_tests(scores, labels, self.profile, claimed_epsilon, alpha_each, guess_family)
        keep = self.anchored if anchored is None else anchored
        out = {}
        for name, values in scores.items():
            k_plus, k_minus = guess_family(values[keep])
            bound = OneRunAuditor(values[keep], labels[keep]).bound(Method.FDP_GDP, self.gaussian_delta, alpha_each,
                                                                    k_plus=k_plus, k_minus=k_minus)
            out[f"{name}:{Method.FDP_GDP}"] = dataclasses.replace(bound, details={
                **bound.details, "canaries": "anchored", "scored": int(keep.sum()),
                "assumes": "the step's mechanism is the claimed one: Gaussian noise at L2 sensitivity 1"})
        return out


# The tests a ClaimShape or the δ-tail run, outside the (ε, δ) family ``bound_tests`` computes.
SHAPED = (CURVE, Method.FDP_GDP, DELTA_TAIL)


def claim_shape(guarantee: GuaranteeInfo, mechanism: MechanismInfo, anchors: np.ndarray | None) -> ClaimShape | None:
    """The claimed mechanism's curve test for this audit, or None where its shape is not known."""
    p = mechanism.parameters or {}
    if mechanism.stage == "vocabulary" and p.get("noise") == "gaussian" and anchors is not None and \
            (anchors > 0).sum() >= 2:
        return ClaimShape(Method.FDP_GDP, gaussian_delta=float(p["delta"]) / 2.0, anchored=anchors > 0)
    profile = claimed_profile(guarantee, mechanism)
    return ClaimShape(CURVE, profile=profile) if profile is not None else None


def curve_tests(scores: dict[str, np.ndarray], labels: np.ndarray, profile, claimed_epsilon: float,
                alpha_each: float, family) -> dict[str, EpsilonBound]:
    """The f-DP one-run test of the claimed mechanism's own trade-off curve, for each score."""
    out = {}
    for name, values in scores.items():
        k_plus, k_minus = family(values)
        out[f"{name}:{CURVE}"] = OneRunAuditor(values, labels).curve(profile, claimed_epsilon, alpha_each,
                                                                     k_plus=k_plus, k_minus=k_minus)
    return out


def power_pool_size(m: int) -> int:
    """How many trained (and untrained) canaries' scores a power estimate draws per factor: 4m, fewer from
    100,000 canaries on (each replicate takes half of m from the pool), never fewer than m."""
    return m * max(1, min(4, 400_000 // max(m, 1)))


def simulated_power(mechanism: MechanismInfo, labels: np.ndarray, epsilon: float, delta: float, alpha_each: float,
                    shape: ClaimShape | None, methods, replicates: int = POWER_REPLICATES,
                    factors: tuple[float, ...] = (2.0, 10.0)) -> dict[str, float]:
    """The share of simulated audits of this design that refute a mechanism 2× and 10× less private.

    The claimed mechanism is simulated with its privacy loss multiplied by the
    factor, scored and bounded exactly as the audit was (same coins' count,
    same tests at the same α); a refutation is a bound above the claimed ε.
    ``factors``: the multiples simulated, in order (2× first: its share is the same with or without 10×, so the
    search for a count in ``check`` simulates 2× alone). Each factor draws pools of trained and of untrained canaries' scores
    once, up to four times m (``power_pool_size``); every replicate tosses
    its own coins and takes its members' and non-members' scores from those
    pools without replacement (a fraction of the cost of drawing each
    replicate afresh, which 100,000 canaries over 200 steps would make the
    slowest part of ``check``). A pool of only m made the replicates share
    most of their scores, so one unlucky pool decided them all: DP-CGS's
    noise ÷ 2 at 1,000 canaries, estimated at 0% that way, is 40% by
    independent simulations and 55% measured (benchmarks/RESULTS.md §24).

    A DP vocabulary step's loss is multiplied two ways, its noise divided or
    every document's budget multiplied (anchors included, up to the cap Γ);
    the estimate is the smaller share of the two. Both forms of a factor draw
    the same random numbers, so they differ only where the mechanisms do (the
    cap, the fresh canaries' releases) and the minimum is not biased down by
    the simulation's own noise.
    """
    rng = np.random.default_rng(POWER_SEED)
    m = labels.size
    pool = power_pool_size(m)
    release = mechanism.release()
    step = isinstance(release, SetUnion)
    # the anchored canaries, placed as the simulation places them
    anchored = anchored_positions(pool) if step else np.ones(pool, bool)
    forms = ("noise", "budget") if step else ("noise",)
    arrays = tuple(mechanism.arrays) if mechanism.arrays is not None else None
    contribution = mechanism.contribution  # a Gaussian step's measured shares (None: the whole contribution)
    out = {}
    for factor, form in ((f, form) for f in factors for form in forms):
        if step:
            rng = np.random.default_rng((POWER_SEED, int(factor)))
        trained, untrained = (simulate_score_sets(release, np.full(pool, present), int(mechanism.tokens), factor,
                                                  rng, paired=bool(mechanism.paired), k=int(mechanism.topics),
                                                  form=form, anchors=mechanism.anchors or 0, arrays=arrays,
                                                  contribution=contribution)
                              for present in (True, False))
        hits = 0
        for _ in range(replicates):
            coins = rng.random(m) < 0.5
            members = rng.choice(pool, int(coins.sum()), replace=False)
            others = rng.choice(pool, int((~coins).sum()), replace=False)
            scores, picked = {}, np.empty(m, bool)
            for name in trained:  # every score the audit ran (mechanism, and mechanism_mass for noisy counts)
                scores[name] = np.empty(m)
                scores[name][coins], scores[name][~coins] = trained[name][members], untrained[name][others]
            picked[coins], picked[~coins] = anchored[members], anchored[others]
            if step:  # the fresh canaries' neutral score is the mixed anchored scores' median
                scores["mechanism"] = neutral_fresh_scores(scores["mechanism"], picked)
            values = scores["mechanism"]
            tests = bound_tests(scores, coins, delta, alpha_each, methods)
            if step:
                released = int((values >= RELEASED_FRESH).sum())
                tests["delta-tail"] = delta_tail_bound(released, m // 2, delta, alpha_each)
            if shape is not None:
                tests.update(shape.tests(scores, coins, epsilon, alpha_each, anchored=picked))
            hits += max(b.epsilon for b in tests.values()) > epsilon
        out[f"{factor:g}x"] = min(hits / replicates, out.get(f"{factor:g}x", 1.0))
    out["replicates"] = replicates
    return out


def nice_count(m: float) -> int:
    """A canary count rounded to two significant digits (1,250 → 1,300; 48,000 stays)."""
    m = max(int(round(m)), 1)
    step = 10 ** max(len(str(m)) - 2, 0)
    return int(round(m / step) * step)


def search_count(power_at, start: int, target: float, limit: int = POWER_SEARCH_LIMIT,
                 seconds: float = POWER_SEARCH_SECONDS, refine: int = 2) -> tuple[int | None, dict[int, float]]:
    """The smallest count found whose simulated power reaches ``target``: doubling from ``start``, then
    ``refine`` bisections between the last count short of it and the first that reaches it.

    power_at(m): the simulated power of the design at m canaries. Stops past ``limit`` canaries or after
    ``seconds`` of simulation; returns (the count, or None when none was found, and every count tried → its
    power). The power is a share of ``POWER_REPLICATES`` simulated audits, so it is not exactly monotone: the
    count returned is one whose own simulation reached the target.
    """
    tried: dict[int, float] = {}
    started = time.perf_counter()
    m, low = nice_count(start), None
    while True:
        tried[m] = power_at(m)
        if tried[m] >= target:
            break
        low = m
        m = nice_count(2 * m)
        if m > limit or time.perf_counter() - started > seconds:
            return None, tried
    high = m
    for _ in range(refine):
        if low is None:  # the first count tried reached the target: nothing below it was tried
            break
        middle = nice_count((low + high) / 2)
        if middle in (low, high) or middle in tried or time.perf_counter() - started > seconds:
            break
        tried[middle] = power_at(middle)
        low, high = (low, middle) if tried[middle] >= target else (middle, high)
    return high, tried


def canaries_for_power(power_at, count: int, target: float = TARGET_POWER) -> dict[str, Any]:
    """What ``check`` says of a design short of ``target``: the canary count whose simulated power reaches it
    (``count``), or the largest count tried and its power (``searched_to``, ``searched_power``) when the
    search's limits (``POWER_SEARCH_LIMIT`` canaries, ``POWER_SEARCH_SECONDS`` of simulation) came first."""
    found, tried = search_count(power_at, 2 * count, target)
    out: dict[str, Any] = {"power": target, "count": found}
    if found is None:  # the search's limits came first: what it reached, not a claim about what would be needed
        out["searched_to"] = max(tried)
        out["searched_power"] = tried[max(tried)]
    else:
        out["simulated"] = tried[found]
    return out


def canary_ceiling(m: int, delta: float, alpha_each: float) -> float:
    """The ceiling of an audit of m canaries, half of them in, at α_each per test: what a perfect attack proves."""
    return bound_ceiling(np.arange(m) % 2 == 0, delta, alpha_each)


def at_ceiling(bound: float, ceiling: float) -> bool:
    """The bound is the audit's ceiling: every guess of its strongest test was right, so the design capped it."""
    return math.isfinite(bound) and math.isfinite(ceiling) and ceiling > 0 and bound >= ceiling * (1 - 1e-9)


def canaries_for_ceiling(bound: float, ceiling: float, claimed_epsilon: float, delta: float, alpha_each: float,
                         count: int, limit: int = POWER_SEARCH_LIMIT) -> dict[str, Any] | None:
    """What would lift a ceiling that stopped the audit short: None when none did.

    ``reason`` "claim": no outcome could refute the claim (ceiling ≤ claimed ε > 0, not refuted): ``count`` is
    the first of 2×, 4×, … the ``count`` candidates whose canaries' ceiling passes the claim (None when
    ``limit`` canaries do not; then ``searched_to``), ``ceiling`` the ceiling there. ``reason`` "saturated":
    the bound is the ceiling (``at_ceiling``): ``count`` is ``CEILING_FACTOR`` × ``count`` canaries and
    ``ceiling`` theirs. The canaries' tests are taken at the audit's own α per test (an audit that adds them
    to natural documents splits α a little further).
    """
    if not (math.isfinite(bound) and math.isfinite(ceiling)):
        return None
    if 0 < claimed_epsilon and bound <= claimed_epsilon and ceiling <= claimed_epsilon:
        m = nice_count(2 * count)
        while True:
            reached = canary_ceiling(m, delta, alpha_each)
            if reached > claimed_epsilon:
                return {"reason": "claim", "claimed_epsilon": claimed_epsilon, "count": m, "ceiling": reached}
            if 2 * m > limit:
                return {"reason": "claim", "claimed_epsilon": claimed_epsilon, "count": None, "searched_to": m,
                        "ceiling": reached}
            m = nice_count(2 * m)
    if at_ceiling(bound, ceiling):
        m = nice_count(CEILING_FACTOR * count)
        return {"reason": "saturated", "count": m, "ceiling": canary_ceiling(m, delta, alpha_each)}
    return None


def own_claim_verdict(results: RunResults, natural: dict[str, np.ndarray] | None,
                      canary_files: CanaryFiles | None, run_dir: Path,
                      suggest: float | None = None) -> tuple[CheckResult, bool]:
    """The verdict on the run's own claim when these tests can hold it to it, else at no claim (ε = 0 stands
    in; the bounds do not depend on it); and whether the claim was tested.

    suggest: a power (``TARGET_POWER``) whose canary count a mechanism audit short of it searches for
    (``CheckResult.canaries_for_power``: seconds of simulation, which ``run`` leaves to ``check``)."""
    try:
        return run_verdict(results, natural, canary_files, run_dir, suggest=suggest), True
    except UserError:
        return run_verdict(results, natural, canary_files, run_dir, epsilon=0.0), False


