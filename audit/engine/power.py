"""A verdict's strength: the simulated power of a mechanism audit against a 2× and a 10× weaker mechanism, and
the canary counts that would reach ``TARGET_POWER`` or lift a ceiling that stopped the audit short (what
``check`` suggests and ``--canaries auto`` sizes)."""
from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np

from topicaudit.attacks.canaries import anchored_positions
from topicaudit.attacks.mechanism import RELEASED_FRESH, neutral_fresh_scores, simulate_score_sets
from topicaudit.bounds.one_run import delta_tail_bound
from topicaudit.bounds.verdict import bound_ceiling, bound_tests
from topicaudit.engine.claim_tests import ClaimShape
from topicaudit.engine.storage.results import MechanismInfo
from topicaudit.targets.mechanisms import SetUnion
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.targets.privacy.release_check import realised_epsilon

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


def power_pool_size(m: int) -> int:
    """How many trained (and untrained) canaries' scores a power estimate draws per factor: 4m, fewer from
    100,000 canaries on (each replicate takes half of m from the pool), never fewer than m."""
    return m * max(1, min(4, 400_000 // max(m, 1)))


def claim_scale(epsilon: float, own: float | None) -> float:
    """The share of the recorded mechanism's loss the claim tested allows: 1 for its own claim or a larger one,
    ε / own for a smaller one (0 for ε = 0).

    "A mechanism f× less private than claimed" is the recorded one with its noise divided by f × this: for a
    claim below the learner's own, the recorded mechanism divided by f alone is f× less private than its own
    claim, far beyond f× the claim tested (DP-CGS at ε = 6 held to ε = 3.1: "2× less private is refuted in
    100%", where the learner, 1.94× less private than that claim, had just passed; hostile pass XIX-zd). Exact
    for the pure-ε releases (Laplace, randomised response, geometric); a Gaussian's ε grows at least linearly
    with 1 / noise, so there the simulated mechanism leaks no more than f× the claim (the power is not
    overstated). A larger claim keeps the recorded mechanism: f× its loss is below f× the claim."""
    if own is None or not math.isfinite(own) or own <= 0 or epsilon >= own:
        return 1.0
    return max(float(epsilon), 0.0) / float(own)


def own_loss(mechanism: MechanismInfo, guarantee: Guarantee) -> tuple[float | None, str | None]:
    """The learner's own ε for ``claim_scale``, and a note when the record cannot be checked against it.

    Its claim, or more when its recorded pure-ε release realises more: a plug-in claiming ε = 1 whose record
    realises 14 was checked at 3 with "2× less private refuted in 100%" (hostile pass XIX-zd, L1). A release
    whose ε the record alone does not give (Gaussian, local) and whose claim has no dp-accounting event to compare
    the record with is taken to realise the claim, and the note says so."""
    own = guarantee.epsilon
    if mechanism.stage == "vocabulary":
        return own, None
    release = mechanism.release()
    realised = realised_epsilon(release, guarantee.relation)
    if realised is not None:
        return (realised if own is None else max(own, realised)), None
    if guarantee.event is None and own is not None:
        return own, (f"the stated power takes the recorded {release.kind} release to realise the learner's claim "
                     f"ε = {own:g}: the claim has no dp-accounting event to check the record against")
    return own, None


def simulated_power(mechanism: MechanismInfo, labels: np.ndarray, epsilon: float, delta: float, alpha_each: float,
                    shape: ClaimShape | None, methods, replicates: int = POWER_REPLICATES,
                    factors: tuple[float, ...] = (2.0, 10.0), scale: float = 1.0) -> dict[str, float]:
    """The share of simulated audits of this design that refute a mechanism 2× and 10× less private than ε.

    scale: ``claim_scale`` of the claim tested; each factor simulates the recorded mechanism at factor × scale
    (0: no mechanism is "f× less private" than ε = 0 in a way a simulation can show, and every share is 0).

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
    out: dict[str, float] = {}
    if scale <= 0:
        return {**{f"{factor:g}x": 0.0 for factor in factors}, "replicates": replicates}
    for factor, form in ((f, form) for f in factors for form in forms):
        if step:
            rng = np.random.default_rng((POWER_SEED, int(factor)))
        trained, untrained = (simulate_score_sets(release, np.full(pool, present), int(mechanism.tokens),
                                                  factor * scale,
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
                 seconds: float | None = None, refine: int = 2) -> tuple[int | None, dict[int, float]]:
    """The smallest count found whose simulated power reaches ``target``: doubling from ``start``, then
    ``refine`` bisections between the last count short of it and the first that reaches it.

    power_at(m): the simulated power of the design at m canaries. Stops past ``limit`` canaries or after
    ``seconds`` of simulation (None: ``POWER_SEARCH_SECONDS`` as it is when called, so a test that asserts
    nothing of the search can shorten it); returns (the count, or None when none was found, and every count
    tried → its power). The power is a share of ``POWER_REPLICATES`` simulated audits, so it is not exactly
    monotone: the count returned is one whose own simulation reached the target.
    """
    seconds = POWER_SEARCH_SECONDS if seconds is None else seconds
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


@functools.lru_cache(maxsize=256)
def canary_ceiling(m: int, delta: float, alpha_each: float) -> float:
    """The ceiling of an audit of m canaries, half of them in, at α_each per test: what a perfect attack proves.

    Kept per (m, δ, α): a claim no outcome of the audit could refute searches 2×, 4×, … its canaries up to
    POWER_SEARCH_LIMIT, seconds of one-run bounds over large m, and every verdict of a run (the summary, check,
    each later check in the same process) searched the same counts again."""
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


