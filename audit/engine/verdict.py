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

The tests of a claim's own shape (its curve, the δ-tail) are in
``topicaudit.engine.claim_tests``; the simulated power and the canary counts
that would reach it or lift the ceiling, in ``topicaudit.engine.power``.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from topicaudit.attacks.canaries import WORD_KINDS
from topicaudit.attacks.registry import bounded_attacks
from topicaudit.bounds.epsilon import Method, check_level
from topicaudit.bounds.verdict import THREAT_MODELS, VALID_BOUNDS, Evidence, canary_verdict_scores, judge
from topicaudit.engine.claim_tests import SHAPED, ClaimShape, claim_shape, release_tail, release_tail_test, shaped_tests
from topicaudit.engine.power import (canaries_for_ceiling, canaries_for_power, claim_scale, own_loss,
                                     simulated_power)
from topicaudit.engine.storage.check_result import DELTA_TAIL, CheckResult
from topicaudit.engine.storage.results import GuaranteeInfo, MechanismInfo, RunResults
from topicaudit.errors import UserError
from topicaudit.targets.mechanisms import MECHANISMS, GaussianNoise
from topicaudit.targets.plugins import import_recorded
from topicaudit.targets.privacy.release_check import disagreements
from topicaudit.targets.privacy.guarantee import adjacency_of

DEFAULT_DELTA = 1e-5  # as [attack] delta, for runs that recorded none
DEFAULT_ALPHA = 0.05  # as [attack] alpha, for runs that recorded none
# The natural-document tests keep the one-run bound and guesses the run itself reports.
NATURAL_METHODS = (Method.ONE_RUN,)
# The released Φ's tests beside a mechanism audit: Steinke et al.'s bound on each release score.
RELEASE_METHODS = (Method.ONE_RUN,)



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
        if mechanism is not None and (epsilon, delta) == (guarantee.epsilon, guarantee.delta):  # its own claim only
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
        shaped = shaped_tests(shape, methods, mechanism, float(epsilon), float(delta))
        if mechanism is None and tail is not None:
            shaped, methods = release_tail_test(tail, float(delta)), methods + (DELTA_TAIL,)
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
                                     shaped=None if tail is None else release_tail_test(tail, float(delta)),
                                     shaped_count=0 if tail is None else 1))
    if attacks and (natural is None or word_claim):
        # was ignored, and check.json recorded it as the attacks the verdict was tested with
        why = ("has no shadow models, so no attack scores on natural documents" if natural is None else
               "is held to a word-level claim, which only its word canaries test")
        raise UserError(f"--attack {attacks[0]}: {run_dir} {why}; --attack chooses among those attacks: leave it "
                        "out")
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
    power, scale = None, 1.0
    if mechanism is not None and (mechanism.stage != "vocabulary" or mechanism.anchors is not None):
        try:
            own, noted = own_loss(mechanism, guarantee.guarantee())
        except ValueError:  # an event this installation cannot rebuild: the claim as stated
            own, noted = guarantee.epsilon, None
        scale = claim_scale(float(epsilon), own)  # "2× less private" than the claim tested (XIX-zd)
        notes = [*notes, *filter(None, [noted, _recorded_note(mechanism)])]
        simulated = mechanism.as_recorded()  # the power simulates the releases the learner recorded
        labels = evidence[0].labels
        try:
            power = simulated_power(simulated, labels, float(epsilon), float(delta), judgement.alpha_each, shape,
                                    [m for m in methods if m not in SHAPED], scale=scale)
        except ValueError as error:  # a release kind this installation cannot simulate (a plug-in's own)
            notes = [*notes, f"no power estimate: {error}"]
        if power is not None and mechanism.kind == GaussianNoise.kind and mechanism.contribution is None:
            notes = [*notes, "a power simulated with each canary's whole contribution in its scored topic (the run "
                             "predates the measured one), which overstated DP-SVI's: rerun the audit to measure it"]
    needed = None
    if power is not None and suggest is not None and power["2x"] < suggest and scale > 0:  # ε = 0: no count can
        assert mechanism is not None  # a power is simulated for a mechanism only
        methods_left = [m for m in methods if m not in SHAPED]
        needed = canaries_for_power(
            lambda m: simulated_power(simulated, np.zeros(m, bool), float(epsilon), float(delta),
                                      judgement.alpha_each, shape, methods_left, factors=(2.0,),
                                      scale=scale)["2x"],
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


def recorded_disagreements(mechanism: MechanismInfo | None, guarantee: GuaranteeInfo) -> list[str]:
    """The learner's recorded constants that its claim's event states otherwise (a vocabulary step's claim is
    read from its record, so it cannot disagree)."""
    if mechanism is None or mechanism.stage == "vocabulary":
        return []
    try:
        return disagreements(mechanism.release(), guarantee.guarantee())
    except ValueError:  # a kind or event this installation does not know: nothing to compare
        return []


def _recorded_note(mechanism: MechanismInfo) -> str | None:
    """A learner that recorded another count of releases than its constants declare (hostile pass XIX-zd, L2)."""
    if mechanism.recorded is None:
        return None
    count = mechanism.count_name
    declared = (mechanism.parameters or {}).get(count)
    return (f"the learner recorded {mechanism.recorded} {count} where its constants declare {declared}: the "
            f"power is simulated for the {mechanism.recorded} recorded, and what it did not record is not audited")


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


