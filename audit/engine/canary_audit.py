"""A run's canary audit: its canaries drawn for the target's claim, whether it observes the mechanism or the
release, every canary's scores, and their record in results.json (``canaries``: design, metrics, bounds,
ceiling). ``run`` calls it; the learner conformance suite and ``--canaries auto`` reuse it."""
from __future__ import annotations

import numpy as np

from topicaudit.attacks.canaries import (
    ANCHORS,
    CAP_MULTIPLE,
    PAIRED_KINDS,
    CanarySet,
    canary_scores,
    default_length,
    make_canaries,
    resolve_kind,
)
from topicaudit.attacks.contribution import measured_contribution
from topicaudit.attacks.lira import offline_scores, online_scores
from topicaudit.attacks.mechanism import mechanism_scores, released_fresh_canaries, scorer_for
from topicaudit.targets.mechanisms import GaussianNoise, LaplaceNoise, SetUnion, Transcript
from topicaudit.attacks.metrics import summarize
from topicaudit.bounds.verdict import THREAT_MODELS, VALID_BOUNDS, bound_ceiling, bound_tests, canary_verdict_scores
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.storage.results import AttackMetrics, CanaryBounds, CanaryResults, MechanismInfo
from topicaudit.errors import UserError
from topicaudit.targets.base import Release, claim, declared_mechanism
from topicaudit.targets.privacy.guarantee import RELEASE_TOP_N, declared


def build_canaries(config: Config, X, target, adjacency: str | None) -> CanarySet | None:
    """The run's canaries (None without any); a corpus too small for them is a UserError."""
    c = config.attack.canaries
    if not c.count:
        return None
    kind = resolve_kind(c.kind, adjacency, claim(target.learner).relation,
                        c.observe != "release" and target.observes_vocabulary)
    length = c.length or default_length(target.learner, X,
                                        declared(claim(target.learner).parameters, RELEASE_TOP_N))
    # Threshold canaries: ANCHORS one-word documents hold each anchored canary's word, a candidate with or without
    # it, far enough below the cap Γ that a step spending twice the budget does not saturate it; the fresh
    # documents are 4× the step's per-document cap long.
    step = declared_mechanism(target.vocabulary_step)
    rho = step.rho if isinstance(step, SetUnion) else None
    anchors = ANCHORS if kind == "threshold" and rho is not None else 0
    if kind == "threshold" and rho is None:
        raise UserError("[attack.canaries] kind = \"threshold\" audits a DP vocabulary step; "
                        f"[target] vocabulary = {config.target.vocabulary!r} has no threshold (choose a dpsu-* step)")
    if kind == "threshold" and not c.length:
        # (A step without a cap, the flawed public GW, gets the other steps' default Δ0 of 64.)
        length = CAP_MULTIPLE * (step.delta0 or 64)
    try:
        return make_canaries(X, c.count, kind, length, config.seed, c.shadows, anchors)
    except ValueError as error:
        raise UserError(f"[attack.canaries]: {error}") from None


def observed_mechanism(config: Config, target, canaries: CanarySet | None) -> bool:
    """Whether the canaries are scored on the mechanism's outputs (``[attack.canaries] observe``).

    ``auto`` observes the mechanism whenever the learner records it and the
    canaries have fresh columns to observe; ``mechanism`` insists (a clear
    error where it cannot); ``release`` scores the released Φ only.
    """
    if canaries is None:
        return False
    mode = config.attack.canaries.observe
    possible = (target.observes_mechanism or target.observes_vocabulary) and canaries.observed_columns.size > 0
    # A local learner's reports are scored per host (word canaries); a document canary has no host.
    adjacency = target.guarantee().adjacency
    if adjacency is not None and not adjacency.document_level and not canaries.word_level \
            and not target.observes_vocabulary:
        possible = False
    if mode == "mechanism" and not possible:
        why = ("learner {!r} does not record its mechanism's outputs".format(config.target.learner)
               if not (target.observes_mechanism or target.observes_vocabulary) else
               "only unique-word, paired, threshold and word canaries (word canaries for a word-level claim) "
               "have mechanism outputs to observe")
        raise UserError(f"[attack.canaries] observe = \"mechanism\": {why}; use observe = \"release\"")
    if possible and mode != "release":
        part, setting = ((target.vocabulary_step, f"vocabulary = {config.target.vocabulary!r}")
                         if target.observes_vocabulary else (target.learner, f"learner = {config.target.learner!r}"))
        try:
            scorer_for(declared_mechanism(part))
        except ValueError as error:
            raise UserError(f"[target] {setting}: {error}") from None
    return possible and mode != "release"


def all_canary_scores(release: Release, shadows: list[Release], canaries: CanarySet, tol: float) -> dict[str, np.ndarray]:
    """Shadow-free scores, plus online and offline LiRA on ζ when there are shadow canary releases,
    plus ``mechanism`` (the claimed mechanism's likelihood ratio) when the release has a transcript."""
    scores = canary_scores(release, canaries, tol)
    if release.transcript is not None:
        scores.update(mechanism_scores(release.transcript, canaries))
    if shadows:
        zeta = np.stack([canary_scores(r, canaries, tol)["zeta"] for r in shadows])
        scores["lira_online"] = online_scores(scores["zeta"], zeta, canaries.shadow_in)
        scores["lira_offline"] = offline_scores(scores["zeta"], zeta, canaries.shadow_in)
    return scores


def canary_results(canaries: CanarySet, scores: dict[str, np.ndarray], release: Release, delta: float,
                   alpha: float, observe: str = "release") -> CanaryResults:
    """``results.json["canaries"]``: metrics, every valid ε bound (α split over them), the audit's ceiling.

    The bounds use the scores of what the audit observes (the mechanism's
    outputs or the released Φ); the other scores' metrics are reported beside.
    """
    coins = canaries.coins
    tested = canary_verdict_scores(scores, observe)
    share = alpha / (len(tested) * len(VALID_BOUNDS))
    both_classes = 0 < coins.sum() < coins.size
    bounds = bound_tests(tested, coins, delta, share) if both_classes else {}
    on_release = None
    # The release (Φ) audit of the same canaries, for comparison; not for a vocabulary step's audit, whose claim
    # says nothing of the (possibly non-private) learner's Φ behind it.
    transcript = release.transcript
    vocabulary_stage = transcript is not None and transcript.mechanism.stage == "vocabulary"
    if observe == "mechanism" and both_classes and transcript is not None and not vocabulary_stage:
        release_scores = canary_verdict_scores(scores, "release")
        release_share = alpha / (len(release_scores) * len(VALID_BOUNDS))
        release_bounds = bound_tests(release_scores, coins, delta, release_share)
        on_release = CanaryBounds(confidence=1 - alpha, delta=delta,
                                  epsilon=max(b.epsilon for b in release_bounds.values()), by_test=release_bounds)
    mechanism = None
    if observe == "mechanism" and transcript is not None:
        # What a power estimate simulates: the claimed mechanism's constants, as the transcript states them.
        set_union = isinstance(transcript.mechanism, SetUnion)
        mechanism = MechanismInfo(
            kind=transcript.kind, parameters=transcript.parameters, tokens=canaries.length,
            topics=int(release.phi.shape[0]), paired=canaries.kind in PAIRED_KINDS,
            stage=transcript.mechanism.stage, arrays=sorted(transcript.arrays),
            fresh_released=list(released_fresh_canaries(transcript, canaries)) if set_union else None,
            anchors=(int(canaries.anchors.max(initial=0)) if canaries.anchors is not None else 0) if set_union
            else None,
            contribution=measured_contribution(transcript, canaries), recorded=_recorded_count(transcript))
    return CanaryResults(
        observe=observe,
        threat_model=THREAT_MODELS[observe],
        paired=canaries.kind in PAIRED_KINDS,
        mechanism=mechanism,
        kind=canaries.kind,
        count=canaries.count,
        length=canaries.length,
        members=int(coins.sum()),
        fixed_training_documents=int(canaries.fixed_rows.size),
        shadows=0 if canaries.shadow_in is None else len(canaries.shadow_in),
        release_vocabulary_size=int(release.vocabulary.size),
        adjacency="word" if canaries.word_level else "document",
        scores={name: AttackMetrics.of(summarize(values, coins)) for name, values in scores.items()} if bounds
        else {},
        epsilon_lower_bounds=CanaryBounds(
            confidence=1 - alpha,
            delta=delta,
            epsilon=max((b.epsilon for b in bounds.values()), default=0.0),
            ceiling=bound_ceiling(coins, delta, share) if bounds else 0.0,
            by_test=bounds),
        release_epsilon_lower_bounds=on_release,
    )


def _recorded_count(transcript: Transcript) -> int | None:
    """How many releases (Laplace) or steps (Gaussian) the learner recorded, when not the count its constants
    declare: a learner declaring 5 releases recorded only its last (hostile pass XIX-zd, L2)."""
    release = transcript.mechanism
    declared = release.releases if isinstance(release, LaplaceNoise) else \
        release.steps if isinstance(release, GaussianNoise) else None
    values = transcript.arrays.get(release.values)
    if declared is None or values is None or values.ndim != 3 or values.shape[-1] == 0:
        return None
    return int(values.shape[0]) if values.shape[0] != declared else None
