"""The size of the conformance suite's canary audit (``topicaudit.learner_checks``), chosen from the claim alone.

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
canary is reached) gets a design that is not ``testable``, at MIN_CANARIES,
with the largest ε it could test (``limit``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import dp_accounting
import numpy as np

from topicaudit.attacks.canaries import PAIRED_KINDS, canary_coins, resolve_kind
from topicaudit.bounds.verdict import VALID_BOUNDS, bound_ceiling, bound_tests
from topicaudit.targets.privacy.guarantee import Guarantee

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
        # ``limit`` is the largest bound seen less MARGIN: the bound itself is what canaries could prove (at δ near 1
        # nothing, where "at most ε ≈ 0.50 … claims above ε = 0.00" was said, two numbers that disagreed)
        proven = max((self.limit or 0.0) + MARGIN, 0.0)
        limit = max(self.limit or 0.0, 0.0)
        untested = (f"claims above ε = {limit:.2f} at δ = {self.delta:g} are not tested" if limit > 0 else
                    f"no claim at δ = {self.delta:g} is tested (a refutation needs a bound {MARGIN:g} above the claim)")
        return (f"the claim ε = {self.epsilon:g} at δ = {self.delta:g} cannot be refuted by a conformance check of "
                f"this size: even with no noise at all, {MAX_CANARIES} {self.kind} canaries"
                + (f" (of which the mechanism reaches {self.reach:.0%})" if self.reach < 1 else "")
                + f" prove at most ε ≈ {proven:.2f} at confidence {1 - self.alpha:g}, so {untested}; the canary "
                f"audit ran at {self.count} canaries and proved nothing about the claim (audit it with `topicaudit "
                "run` and more canaries, or test a smaller ε)")


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
