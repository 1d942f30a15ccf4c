"""A canary audit sized for its power: ``check CONFIG --canaries auto`` (and ``assert_privacy(canaries="auto")``).

The verdict of a mechanism audit states its power: the share of simulated audits of its design that refute a
mechanism 2× less private than claimed (``engine.power.simulated_power``). That simulation needs only what the
learner declares before any fit (``mechanism()``, a ``topicaudit.mechanisms`` release), the canaries' kind and
length, the claim and the number of tests α is split over. So the count can be chosen before the audit: the
smallest one whose simulated power reaches the target (default 95%), found by doubling from 250 and two bisections
(``verdict.search_count``), times ``MARGIN`` (2: the power is a share of 20 simulated audits, so the first count to
reach the target is often a lucky draw), within a time budget. A Gaussian step's canaries are simulated with the
shares of their contribution that a pilot fit of ``PILOT`` canaries measured (``attacks.contribution``), as the
verdict simulates them with its own canaries' shares.

The time of an audit of m canaries is estimated as

    fit(m) + scoring(m) + 2 × simulation(m)

- fit(m): two timed fits of the target on parts of the corpus (about a tenth of its tokens, at least 20,000, and
  half that), after an untimed warm-up fit of a few documents (the first fit of a process compiles its kernels),
  give how the fit's time grows with its tokens (a power of them, between 0 and 1), applied to the tokens of the
  canary release's training set (the corpus and the canaries it trains on); ``check`` prints the estimate beside
  the time the audit took, so it can be judged.
- scoring(m): ``SCORING_SECONDS_PER_CANARY`` per canary (measured on PHEME).
- simulation(m): the power simulation at m as timed here; the run's own verdict and ``check``'s each run it once.

Only the canary release is estimated: shadow models (``[attack] shadows``) come on top, and are said to.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.canaries import PAIRED_KINDS
from topicaudit.attacks.contribution import measured_contribution
from topicaudit.attacks.mechanism import simulate_score_sets
from topicaudit.attacks.registry import bounded_attacks
from topicaudit.bounds.epsilon import Method
from topicaudit.bounds.verdict import VALID_BOUNDS
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.validation import MAX_CANARIES
from topicaudit.engine.execution.fitting import learner_refused
from topicaudit.engine.storage.results import GuaranteeInfo, MechanismInfo
from topicaudit.engine.storage.kept_sizing import read_kept, write_kept
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.engine.canary_audit import build_canaries, observed_mechanism
from topicaudit.engine.storage.run_cache import cache_key
from topicaudit.engine.claim_tests import FRESH_WORD_KINDS, SHAPED, claim_shape
from topicaudit.engine.power import (POWER_SEED, TARGET_POWER, claim_scale, own_loss, nice_count, search_count,
                                     simulated_power)
from topicaudit.errors import UserError
from topicaudit.loaded_code import fitting
from topicaudit.targets import configured_target
from topicaudit.targets.base import declared_mechanism
from topicaudit.targets.mechanisms import GaussianNoise
from topicaudit.targets.privacy.guarantee import RELEASE_SUPPORT, TRAINING_WORDS, declared

AUTO = "auto"
DEFAULT_BUDGET = 600.0  # seconds: a CI job's slot for the privacy gate
START = 250
LIMIT = int(MAX_CANARIES // 2)  # the search's last count: MARGIN (2) times it is still a count validation accepts
SCORING_SECONDS_PER_CANARY = 4e-4  # canary and mechanism scores: 0.33 s for 1,000 paired DP-CGS canaries, PHEME
TIMED_TOKENS = 20_000
MARGIN = 2.0  # the count chosen: this many times the first count whose simulated power reaches the target
SIZING_SCHEMA = "topicaudit.sizing/1"
# Releases whose simulated power was measured above the real audit's, at the count --canaries auto chose
# (benchmarks/results/sized_gate.jsonl): said beside the choice, so a count is not trusted beyond what it gave.
# Said when the count audited is short of the margin's (the budget's most): an estimate between 0 and 100% is a
# share of 20 pooled simulated audits, noisy (benchmarks/RESULTS.md §29). DP-SVI's whole-N simulation had
# overstated at every count (64,000 canaries: 100% simulated, 17 of 20 real) until it used the canaries'
# measured contribution (attacks/contribution.py); what is left is the estimate's own noise.
MEASURED_OPTIMISTIC = {
    "subsampled-gaussian-steps": "DP-SVI on PHEME at ε = 1: at 44,000 canaries, simulated 90%, a 2× bug was "
                                 "caught in 15 of 20 real audits and 32 of 40 independent simulations; at 130,000 "
                                 "(the count for 95%), in 20 of 20",
}
# Canaries of the pilot fit that measures a Gaussian step's contribution (thousands of sampled shares).
PILOT = 2_000


@dataclass
class Sizing:
    """What ``--canaries auto`` chose and why (``check.json["sizing"]``)."""

    count: int                 # the canaries audited
    power: float               # the simulated power at ``count`` against a mechanism 2× less private
    target: float              # the power asked for
    budget: float | None       # seconds
    seconds: float             # the estimated audit time at ``count``
    reached: bool              # ``power`` ≥ ``target`` within the budget
    needed: int | None         # the count whose simulated power reaches the target (None: beyond the search)
    needed_seconds: float | None
    fit_estimate: str          # how the fit time was estimated, in words
    tried: dict[str, list[float]] = field(default_factory=dict)  # count → [power, estimated seconds]
    took: float | None = None  # seconds the audit took (filled in after it ran)
    kept: str | None = None    # the file this sizing was read back from (sized by an earlier run)
    sizing_seconds: float | None = None  # what choosing took (the timed fit and the simulations), not in the estimates
    caveat: str | None = None  # a measurement of this kind of release whose real power fell short of the simulation

    def to_json(self) -> dict[str, Any]:
        return {"schema": SIZING_SCHEMA, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sizing:
        return cls(**{k: v for k, v in data.items() if k != "schema"})

    def message(self) -> str:
        """What was chosen and why, in one paragraph."""
        within = f"within the budget of {self.budget:.0f} s" if self.budget is not None else "(no time budget)"
        if self.reached and self.needed is not None and self.count < self.needed:
            head = (f"canaries: {self.count:,}, the most the budget of {self.budget:.0f} s allows (estimated "
                    f"{self.seconds:.0f} s): its simulated power against a mechanism 2× less private reaches "
                    f"{self.target:.0%} ({self.power:.0%}), short of the {MARGIN:g}× margin the count would have "
                    f"({self.needed:,}, estimated {self.needed_seconds:.0f} s)")
        elif self.reached:
            head = (f"canaries: {self.count:,}, {MARGIN:g}× the fewest whose simulated power against a mechanism "
                    f"2× less private reaches {self.target:.0%} (at {self.count:,}: {self.power:.0%}); estimated "
                    f"{self.seconds:.0f} s, {within}")
        elif self.budget is None:  # no budget: the search's own limits came first
            head = (f"canaries: {self.count:,}, the most the search simulated (estimated {self.seconds:.0f} s); its "
                    f"limits came before the power asked for: {self.power:.0%} against a mechanism 2× less private "
                    f"where {self.target:.0%} was asked; more than {self.count:,} canaries would be needed")
        else:
            need = (f"{self.needed:,} canaries would reach it (estimated {self.needed_seconds:.0f} s)"
                    if self.needed else f"more than {max(map(int, self.tried)):,} canaries would be needed")
            head = (f"canaries: {self.count:,}, the most the budget of {self.budget:.0f} s allows (estimated "
                    f"{self.seconds:.0f} s); the budget cannot reach the power asked for: {self.power:.0%} against "
                    f"a mechanism 2× less private where {self.target:.0%} was asked; {need}: raise --budget")
        fewer = [f"{int(m):,}: {p:.0%}" for m, (p, _) in sorted(self.tried.items(), key=lambda kv: int(kv[0]))]
        again = (f" (as sized before for this configuration and claim: {self.kept})" if self.kept else
                 f" Choosing took {self.sizing_seconds:.0f} s; it is kept with the run cache." if self.sizing_seconds
                 is not None else "")
        caveat = (f" Caution: this release's simulated power has been measured above its audits' ({self.caveat}); "
                  "the count may fall short of the power asked for." if self.caveat else "")
        return f"{head}. Simulated power by count: {', '.join(fewer)}. Fit time {self.fit_estimate}.{again}{caveat}"


def parse_budget(text: str | float | None) -> float | None:
    """Seconds from ``90``, ``90s``, ``5m`` or ``1h``; None for none."""
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        raw = str(text).strip().lower()
        scale = {"s": 1, "m": 60, "h": 3600}.get(raw[-1:], None)
        try:
            value = float(raw[:-1] if scale else raw) * (scale or 1)
        except ValueError:
            raise UserError(f"--budget {text!r}: give seconds (90), or minutes and hours (5m, 1h)") from None
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"--budget must be a positive time (got {text!r})")
    return value


def check_power(power: float | None) -> float:
    if power is None:
        return TARGET_POWER
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0 < power < 1:
        raise UserError(f"--power must be a share strictly between 0 and 1, e.g. 0.95 (got {power!r})")
    return float(power)


def _with_count(config: Config, count: int) -> Config:
    sized = copy.deepcopy(config)
    sized.attack.canaries.count = count
    return sized


def _design(config: Config, corpus, target, epsilon: float | None, delta: float | None, alpha: float | None):
    """The mechanism audit's design before any fit: the simulated mechanism, the claim, α's share per test,
    the claim's shape and the (ε, δ) methods, as ``verdict.run_verdict`` will find them in the run."""
    probe = build_canaries(_with_count(config, START), corpus.X, target, target.guarantee().adjacency)
    if not observed_mechanism(_with_count(config, START), target, probe):
        raise UserError(f"--canaries auto sizes mechanism audits, whose verdict states a simulated power; "
                        f"learner {config.target.learner!r} records no mechanism (or [attack.canaries] observe = "
                        "\"release\"), so its audit states a ceiling instead: give --canaries M")
    if target.observes_vocabulary:
        raise UserError("--canaries auto sizes a learner's mechanism audit; this audit observes the DP vocabulary "
                        f"step {config.target.vocabulary!r} (threshold canaries): give --canaries M "
                        "(docs/canaries.md lists the counts measured for the DPSU steps)")
    declared_release = declared_mechanism(target.learner)
    guarantee = target.guarantee()
    claimed = guarantee.epsilon
    epsilon = claimed if epsilon is None else float(epsilon)
    if epsilon is None or not math.isfinite(epsilon):
        raise UserError(f"the target ({config.target.learner}) claims no ε; pass the claim with --epsilon")
    delta = (guarantee.delta if math.isfinite(claimed) else config.attack.delta) if delta is None else float(delta)
    alpha = config.attack.alpha if alpha is None else float(alpha)
    mechanism = MechanismInfo(kind=declared_release.kind, parameters=declared_release.parameters(),
                              tokens=probe.length, topics=config.target.k, paired=probe.kind in PAIRED_KINDS,
                              stage="learner", arrays=sorted(declared_release.arrays))
    recorded = GuaranteeInfo.from_json(guarantee.to_json(), "guarantee")  # as the run records it
    shape = claim_shape(recorded, mechanism, None) if (epsilon, delta) == (claimed, recorded.delta) else None
    methods = (Method.FDP_PURE, shape.method) if shape is not None else tuple(VALID_BOUNDS)
    names = simulate_score_sets(mechanism.release(), np.array([True, False, True, False]), probe.length, 2.0,
                                np.random.default_rng(POWER_SEED), paired=bool(mechanism.paired), k=config.target.k,
                                arrays=tuple(mechanism.arrays))
    tests = len(names) * len(methods)  # each score, by each (ε, δ) method and each shaped test
    tail = probe.kind in FRESH_WORD_KINDS and declared(guarantee.parameters, RELEASE_SUPPORT) == TRAINING_WORDS
    release_scores = 1 + (probe.words is not None)
    tests += release_scores * (1 + tail)
    if config.attack.shadows:
        tests += len(bounded_attacks(list(config.attack.attacks)))
    return mechanism, epsilon, delta, alpha / max(tests, 1), shape, [m for m in methods if m not in SHAPED], probe


def _fit(target, *args, **kwargs):
    """One fit of the sizing's, as a run's: a refusal of the learner's (its ValueError: a Φ that is no k × V
    matrix of distributions) one message naming it."""
    try:
        with fitting():  # code compiled from text meanwhile is noted (loaded_code)
            return target.fit(*args, **kwargs)
    except ValueError as error:
        raise learner_refused(target, error, "a fit of the canary count's sizing") from None


def _pilot_contribution(config: Config, corpus, target) -> list[float] | None:
    """A Gaussian step's measured shares of a canary's contribution (``attacks.contribution``), from one fit
    of ``PILOT`` canaries: the verdict simulates the audit with the shares its own canaries show, so the sizing
    must too (the whole contribution, which DP-SVI's E-step does not add, overstated its power)."""
    pilot = build_canaries(_with_count(config, PILOT), corpus.X, target, target.guarantee().adjacency)
    release = _fit(target, pilot.training_matrix(corpus.X), pilot.fit_seed, observe=pilot.observed_columns)
    return measured_contribution(release.transcript, pilot)


def _fit_time(target, X, seed: int) -> tuple[Callable[[float], float], str]:
    """A fit's seconds as a function of its training tokens, ``s₂ · (tokens / t₂)^e``, from two timed fits of
    the target on parts of the corpus, the second with twice the first's tokens (after an untimed warm-up fit
    of a few documents, which compiles the kernels): e = log₂(s₂ / s₁), kept within [0, 1]; and how, in words.

    One fit scaled by tokens (e = 1) put a 14,000-canary DP-SVI audit's fit at minutes where it took 2 s of
    CPU: its cost is set by its number of steps (e near 0); DP-CGS's sweeps grow with the tokens (e near 1).
    """
    lengths = np.asarray(X.sum(axis=1)).ravel()
    order = np.random.default_rng(seed).permutation(X.shape[0])
    total = float(lengths.sum())
    cumulative = np.cumsum(lengths[order])

    def rows_for(tokens: float) -> np.ndarray:
        return np.sort(order[:max(int(np.searchsorted(cumulative, tokens)) + 1, 2)])

    large = min(total, max(TIMED_TOKENS, total / 10))
    warm = np.sort(order[:min(20, X.shape[0])])
    _fit(target, X[warm], seed)
    timed = []
    for rows in (rows_for(large / 2), rows_for(large)):
        started = time.perf_counter()
        _fit(target, X[rows], seed)
        timed.append((float(lengths[rows].sum()), max(time.perf_counter() - started, 1e-6), rows.size))
    (t1, s1, n1), (t2, s2, n2) = timed
    exponent = min(max(math.log(s2 / s1) / math.log(t2 / t1), 0.0), 1.0) if t2 > t1 else 1.0

    def seconds(tokens: float) -> float:
        return s2 * (max(tokens, 1.0) / t2) ** exponent

    how = (f"estimated from fits of {n1:,} and {n2:,} documents ({t1:,.0f} and {t2:,.0f} tokens) in {s1:.2f} and "
           f"{s2:.2f} s, as {s2:.2f} s × (tokens / {t2:,.0f})^{exponent:.2f}")
    return seconds, how


def _within(budget: float, tried: dict[int, float], estimates: dict[int, float], power_at) -> int:
    """The most canaries the budget allows: the largest count tried within it, or the count the estimates
    (linear in the count) put at the budget between it and the next, simulated too; the fewest tried when
    none fits."""
    fits = [m for m in tried if estimates[m] <= budget]
    if not fits:
        return min(tried)
    low = max(fits)
    above = [m for m in tried if m > low]
    if above:
        high = min(above)
        slope = (estimates[high] - estimates[low]) / (high - low)
        guess = nice_count(low + (budget - estimates[low]) / slope * 0.95) if slope > 0 else low
        if low < guess < high and guess not in tried:
            tried[guess] = power_at(guess)
            if estimates[guess] <= budget:
                return guess
    return low


def size_canaries(config: Config, epsilon: float | None = None, delta: float | None = None,
                  alpha: float | None = None, power: float | None = None, budget: float | None = DEFAULT_BUDGET,
                  cache_root: Path | None = None) -> Sizing:
    """Choose the canary count of ``config``'s audit for ``power`` against a mechanism 2× less private, within
    ``budget`` seconds (None: no limit). With ``cache_root`` the choice is kept beside the cached runs, under
    a key of the configuration, the claim, the power and the budget, and read back next time."""
    target_power = check_power(power)
    validate(_with_count(config, START))
    key = _kept_key(config, epsilon, delta, alpha, target_power, budget)  # before the design settles the config
    found = _read(cache_root, key)
    if found is not None:
        return found
    started = time.perf_counter()
    corpus = load_audit_corpus(config)
    target = configured_target(config.target)
    mechanism, epsilon, delta, alpha_each, shape, methods, probe = _design(config, corpus, target, epsilon, delta,
                                                                           alpha)
    if isinstance(mechanism.release(), GaussianNoise):
        mechanism = dataclasses.replace(mechanism, contribution=_pilot_contribution(config, corpus, target))
    scale = claim_scale(epsilon, own_loss(mechanism, target.guarantee())[0])  # against f× the claim tested
    if scale == 0:
        raise UserError("--canaries auto sizes an audit for its power against a mechanism 2× less private than the "
                        "claim; at ε = 0 there is none to simulate (any leak refutes the claim): give a count "
                        "(--canaries N)")
    fit_seconds, how = _fit_time(target, corpus.X, config.seed)
    fixed = float(corpus.X[probe.fixed_rows].sum())
    per_canary = (float(probe.training_matrix(corpus.X).sum()) - fixed) / max(probe.count, 1)
    estimates: dict[int, float] = {}

    def power_at(m: int) -> float:
        started = time.perf_counter()
        value = simulated_power(mechanism, np.zeros(m, bool), epsilon, delta, alpha_each, shape, methods,
                                scale=scale)["2x"]
        simulation = time.perf_counter() - started
        estimates[m] = fit_seconds(fixed + per_canary * m) + SCORING_SECONDS_PER_CANARY * m + 2 * simulation
        return value

    first, tried = search_count(power_at, START, target_power, LIMIT, seconds=120.0)
    needed = None
    if first is not None:
        # The first count whose 20 simulated audits reach the target is a lucky draw as often as not, and the
        # simulation is not the audit (DP-CGS on PHEME: 1,800 reached 100% in simulation, 2,000 95%; real audits
        # of a 2× bug caught it in 18 of 20 at 1,800 and 7 of 9 at 2,200): a margin.
        needed = nice_count(MARGIN * first)
        if needed not in tried:
            tried[needed] = power_at(needed)
    if needed is not None and (budget is None or estimates[needed] <= budget):
        count, reached = needed, True
    else:
        # No budget and no count found within the search's limits: the largest count simulated.
        count = max(tried) if budget is None else _within(budget, tried, estimates, power_at)
        reached = tried[count] >= target_power  # short of the margin, but the simulation reaches the power
    sizing = Sizing(count=count, power=tried[count], target=target_power, budget=budget,
                    seconds=round(estimates[count], 1), reached=reached, needed=needed,
                    needed_seconds=None if needed is None else round(estimates[needed], 1), fit_estimate=how,
                    tried={str(m): [tried[m], round(estimates[m], 1)] for m in sorted(tried)},
                    sizing_seconds=round(time.perf_counter() - started, 1),
                    caveat=MEASURED_OPTIMISTIC.get(str(mechanism.kind)) if count != needed else None)
    if config.attack.shadows:
        sizing.fit_estimate += f"; the {config.attack.shadows} shadow models come on top of these estimates"
    if cache_root is not None:
        write_kept(cache_root, key, sizing.to_json())
    return sizing


def _kept_key(config: Config, epsilon, delta, alpha, power: float, budget) -> str:
    """The key a sizing is kept under (``storage.kept_sizing``): the run's cache key with no canaries, the claim,
    the power and the budget."""
    return json.dumps({"run": cache_key(_with_count(config, 0)), "claim": [epsilon, delta, alpha], "power": power,
                       "budget": budget}, sort_keys=True, default=str)


def kept_sizing(config: Config, epsilon: float | None, delta: float | None, alpha: float | None,
                power: float | None, budget: float | None, cache_root: Path | None) -> Sizing | None:
    """The choice ``size_canaries`` kept in ``cache_root`` for this very audit; None when there is none."""
    return _read(cache_root, _kept_key(config, epsilon, delta, alpha, check_power(power), budget))


def _read(cache_root: Path | None, key: str) -> Sizing | None:
    if cache_root is None:
        return None
    data = read_kept(cache_root, key)
    try:
        return None if data is None else Sizing.from_json(data)
    except (TypeError, ValueError):
        return None


__all__ = ["AUTO", "DEFAULT_BUDGET", "Sizing", "check_power", "kept_sizing", "nice_count", "parse_budget",
           "size_canaries"]
