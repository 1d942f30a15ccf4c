"""The tests of a claim's own shape, beside the (ε, δ) family every claim gets: the claimed mechanism's trade-off
curve (f-DP), the μ-GDP test of a Gaussian DP vocabulary step's anchored canaries, and the δ-tail tests of
releases that can hold only training words (``engine.verdict.run_verdict`` runs them)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from topicaudit.attacks.canaries import UNRELEASED_PENALTY
from topicaudit.bounds.epsilon import EpsilonBound, Method
from topicaudit.bounds.one_run import OneRunAuditor, delta_tail_bound
from topicaudit.bounds.verdict import guess_family
from topicaudit.engine.storage.check_result import CURVE, DELTA_TAIL
from topicaudit.engine.storage.results import GuaranteeInfo, MechanismInfo
from topicaudit.targets.privacy.analytic_gaussian import gaussian_step_profile
from topicaudit.targets.privacy.composition import privacy_profile
from topicaudit.targets.privacy.guarantee import RELEASE_SUPPORT, TRAINING_WORDS, declared

# Canaries of fresh words whose coin decides whether their word trains at all: a δ-tail test can read them.
FRESH_WORD_KINDS = ("unique-word", "word")


def shaped_tests(shape: ClaimShape | None, methods: tuple, mechanism: MechanismInfo | None, epsilon: float,
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


def release_tail_test(tail: tuple[int, int], delta: float):
    """The δ-tail test of a learner's release that can hold only training words (``release_tail``)."""
    def shaped(scores: dict[str, np.ndarray], labels: np.ndarray, alpha_each: float) -> dict[str, EpsilonBound]:
        released, fresh = tail
        return {f"column:{DELTA_TAIL}": delta_tail_bound(released, fresh, delta, alpha_each)}
    return shaped


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


