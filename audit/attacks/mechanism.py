"""Canary scores on what a DP mechanism released: the likelihood ratio of the claimed mechanism.

A DP claim covers every output of its mechanism (each noisy step of DP-SVI,
the local reports of LP-LDA and LPPF, DP-CGS's noisy counts), and the final Φ
is only a blurred function of them; an audit that scores the outputs
themselves, by the log-likelihood ratio of "the canary trained" against "it
did not" under the mechanism the claim describes, is as strong as a test of
that mechanism can be (Neyman–Pearson). The scores read only the transcript
and public constants, never the coins, so every one-run bound stays valid.

One scorer per kind of release (``topicaudit.mechanisms``), registered
against its class (``register``; ``scorer_for`` finds the one that
``supports`` a release). What each scores, for each canary:

``RandomisedResponse``  a word canary's presence bit in its host's report:
                        ±ε_b (bit 1 / bit 0).
``GeometricNoise``      a word canary's count in its host's noisy report y:
                        a·(|y| − |y − 1|), a = ln(1/α): +a for y ≥ 1, −a for y ≤ 0.
``LaplaceNoise``        each release's noisy column (k topics) with L tokens
                        (the claimed cap) in one unknown topic:
                        log mean_t exp((|y_t| − |y_t − L|)/b), summed over
                        releases; and, for a single release after a noisy
                        sweep, as ``mechanism_mass``, log Σ_t max(y_t, 0) for
                        tokens the sweep spread over several topics.
``GaussianNoise``       every step's noisy column y_t: the canary's
                        contribution v_t is its N tokens, clipped as claimed,
                        in one topic: the recorded ``top_topics`` (where a
                        one-word document's E-step converges), else any topic
                        with equal probability; each step adds
                        log(1 − q + q·LR_t), LR_t the Gaussian ratio of v_t.
``SetUnion``            a DP vocabulary step: an anchored canary word (F fixed
                        one-word documents, F = 1) is a candidate either way,
                        and its noisy weight y is Laplace (Gaussian) around
                        min(F, Γ) or min(F + 1, Γ): their likelihood ratio,
                        the Laplace one continued linearly beyond its window
                        (so a weight far above it, as a wrong budget makes
                        it, still ranks above); any other canary scores by
                        the release of any of its document's words alone
                        (released: certainly trained; else neutral).

Paired canaries (replace-one claims) score heads-word minus tails-word. A
canary whose column the transcript lacks (a vocabulary step dropped it)
scores 0: no evidence either way.

Each scorer also simulates its scores under the claimed mechanism with the
privacy loss multiplied by a factor (``simulate_score_sets``), for the
verdict's power estimate.

Longer than 400 lines because it is one registry: a scorer per kind of release, each with the
simulation of its scores the power estimate needs, sharing the likelihood ratios they compute.
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from topicaudit.jit import njit
from scipy.special import logsumexp

from topicaudit.attacks.canaries import CanarySet, anchored_positions
from topicaudit.targets.mechanisms import (GaussianNoise, GeometricNoise, LaplaceNoise, Mechanism,
                                           RandomisedResponse, SetUnion, Transcript)

# The score of a released word that no fixed document holds: under the claim only δ could have released it.
RELEASED_FRESH = 1e6


class Scorer(Protocol):
    """Scores canaries on one kind of release and simulates those scores, for the power estimate."""

    def supports(self, mechanism: Mechanism) -> bool:
        """Whether this scorer reads releases of this kind."""
        ...

    def scores(self, transcript: Transcript, canaries: CanarySet) -> dict[str, np.ndarray]:
        """Each canary's scores, heads against tails: ``mechanism`` and any others the kind has; (m,) each."""
        ...

    def simulate(self, mechanism: Mechanism, coins: np.ndarray, tokens: int, factor: float,
                 rng: np.random.Generator, paired: bool, k: int, form: str, anchors: int,
                 arrays: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The same scores for canaries trained where ``coins``, the mechanism leaking ``factor`` times the
        claimed loss (``simulate_score_sets``)."""
        ...


SCORERS: list[Scorer] = []


def register(scorer: Scorer) -> Scorer:
    """Add a scorer; one registered later is asked first, so a package can refine a built-in kind."""
    SCORERS.insert(0, scorer)
    return scorer


def scorer_for(mechanism: Mechanism) -> Scorer:
    """The scorer of this kind of release; ValueError naming the kind when none supports it."""
    for scorer in SCORERS:
        if scorer.supports(mechanism):
            return scorer
    raise ValueError(f"no scorer reads a {type(mechanism).__name__} release (kind {mechanism.kind!r}); register "
                     "one with topicaudit.attacks.mechanism.register, or record the release with a built-in class "
                     "of topicaudit.mechanisms")


def mechanism_scores(transcript: Transcript, canaries: CanarySet) -> dict[str, np.ndarray]:
    """Each canary's scores on the transcript, heads against tails: ``mechanism`` (the claimed mechanism's
    log-likelihood ratio) and, for a noisy sweep's single release of counts, ``mechanism_mass``; (m,) each."""
    return scorer_for(transcript.mechanism).scores(transcript, canaries)


def simulate_score_sets(mechanism: Mechanism, coins: np.ndarray, tokens: int, factor: float,
                        rng: np.random.Generator, paired: bool = False, k: int = 1, form: str = "noise",
                        anchors: int = 0, arrays: tuple[str, ...] | None = None,
                        contribution=None) -> dict[str, np.ndarray]:
    """Every score the mechanism audit would give if the mechanism leaked ``factor`` times the claimed loss.

    The claimed mechanism with its noise divided by ``factor`` (randomised
    response and geometric noise at factor·ε), scored as the real audit
    scores it (by the claimed constants). Where the audit meets the model's
    own randomness: a noisy sweep (DP-CGS) redraws a canary's capped tokens one
    by one with the noise in the conditional (``_dp_cgs_sweep``: they drift
    to the topics whose noise is high, which the released counts then show);
    other Laplace releases put a canary's tokens in one topic, and a Gaussian
    step's contribution is the measured share of N in one topic (``contribution``).

    form (DP vocabulary steps): ``noise`` divides the noise by the factor;
    ``budget`` keeps the claimed noise and lets every document spend
    ``factor`` of budget, so the anchors move to min(factor·F, Γ) too and can
    reach the cap Γ, where nothing moves (the same privacy loss, a different
    mechanism: a check states the weaker of the two).
    arrays: the arrays the audit's transcript held (a Gaussian release
    without ``top_topics`` is scored over every topic).
    contribution: a Gaussian release's measured shares of a canary's
    contribution in its scored topic (``attacks.contribution``); None
    simulates the whole contribution, which overstates the power of a
    learner that adds less (DP-SVI's E-step).
    """
    arrays = mechanism.arrays if arrays is None else tuple(arrays)
    options = {} if contribution is None else {"contribution": contribution}
    return scorer_for(mechanism).simulate(mechanism, np.asarray(coins, dtype=bool), int(tokens), float(factor),
                                          rng, bool(paired), max(1, int(k)), form, int(anchors), arrays, **options)


def simulate_scores(mechanism: Mechanism, coins: np.ndarray, tokens: int, factor: float,
                    rng: np.random.Generator, paired: bool = False, k: int = 1, form: str = "noise",
                    anchors: int = 0) -> np.ndarray:
    """The ``mechanism`` score of :func:`simulate_score_sets`."""
    return simulate_score_sets(mechanism, coins, tokens, factor, rng, paired, k, form, anchors)["mechanism"]


def _positions(transcript: Transcript, words: np.ndarray) -> np.ndarray:
    """Each word's index in the transcript's columns; −1 where it was not observed."""
    columns = np.asarray(transcript.columns, dtype=np.int64)
    words = np.asarray(words, dtype=np.int64)
    if columns.size == 0:
        return np.full(words.size, -1, dtype=np.int64)
    order = np.argsort(columns)
    at = order[np.searchsorted(columns, words, sorter=order).clip(0, columns.size - 1)]
    return np.where(columns[at] == words, at, -1)


class _ColumnScorer:
    """A scorer that reads each canary word's own column; paired canaries score heads minus tails."""

    mechanism_class: type[Mechanism] = Mechanism

    def supports(self, mechanism: Mechanism) -> bool:
        return isinstance(mechanism, self.mechanism_class)

    def column_scores(self, transcript: Transcript, canaries: CanarySet, seen: np.ndarray,
                      at: np.ndarray) -> dict[str, np.ndarray]:  # pragma: no cover
        """The scores of the canaries whose word was observed (``seen``), at their columns ``at``."""
        raise NotImplementedError

    def scores(self, transcript: Transcript, canaries: CanarySet) -> dict[str, np.ndarray]:
        out = self._scores(transcript, canaries, canaries.words)
        if canaries.alternate_words is not None:
            tails = self._scores(transcript, canaries, canaries.alternate_words)
            out = {name: out[name] - tails[name] for name in out}
        return out

    def _scores(self, transcript, canaries, words) -> dict[str, np.ndarray]:
        at = _positions(transcript, words)
        seen = at >= 0
        if not seen.any():
            return {name: np.zeros(words.size) for name in self.names(transcript.mechanism)}
        found = self.column_scores(transcript, canaries, seen, at[seen])
        out = {}
        for name, values in found.items():
            out[name] = np.zeros(words.size)
            out[name][seen] = values
        return out

    def names(self, mechanism: Mechanism) -> tuple[str, ...]:
        return ("mechanism",)

    def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays):
        tokens = min(tokens, mechanism.document_cap() or tokens)  # a correct learner caps the canary
        heads = self.simulate_column(mechanism, coins, tokens, factor, rng, k, arrays)
        if not paired:
            return heads
        tails = self.simulate_column(mechanism, ~coins, tokens, factor, rng, k, arrays)
        return {name: heads[name] - tails[name] for name in heads}

    def simulate_column(self, mechanism, present, tokens, factor, rng, k, arrays) -> dict[str, np.ndarray]:
        raise NotImplementedError  # pragma: no cover


class _LocalReportScorer(_ColumnScorer):
    """Local reports: a word canary's bit or count in its own host's report, ±(the claimed per-word loss)."""

    def loss(self, mechanism) -> float:  # pragma: no cover
        raise NotImplementedError

    def says_present(self, mechanism, reports: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def column_scores(self, transcript, canaries, seen, at):
        if not canaries.word_level:
            raise ValueError(f"{type(transcript.mechanism).__name__} releases score word canaries "
                             "(one word in a host's report)")
        reports = np.asarray(transcript.arrays[transcript.mechanism.values])[canaries.hosts[seen], at]
        loss = self.loss(transcript.mechanism)
        return {"mechanism": np.where(self.says_present(transcript.mechanism, reports), loss, -loss)}

    def simulate_column(self, mechanism, present, tokens, factor, rng, k, arrays):
        # P(report says "present" | present) at factor·ε is e^{fε}/(1 + e^{fε}) for both kinds (a geometric
        # count reads "present" when y ≥ 1, i.e. when its noise is ≥ 0).
        loss = self.loss(mechanism)
        keep = 1.0 / (1.0 + math.exp(-factor * loss))
        says = np.where(present, rng.random(present.size) < keep, rng.random(present.size) >= keep)
        return {"mechanism": np.where(says, loss, -loss)}

    def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays):
        # A paired word canary's host holds one of the two words: its report is one draw, scored once.
        return self.simulate_column(mechanism, coins, tokens, factor, rng, k, arrays)


class RandomisedResponseScorer(_LocalReportScorer):
    mechanism_class = RandomisedResponse

    def loss(self, mechanism):
        q = float(mechanism.keep_probability)
        return math.log(q / (1.0 - q))

    def says_present(self, mechanism, reports):
        return np.asarray(reports, dtype=bool)


class GeometricScorer(_LocalReportScorer):
    mechanism_class = GeometricNoise

    def loss(self, mechanism):
        return math.log(1.0 / float(mechanism.alpha))

    def says_present(self, mechanism, reports):
        return np.asarray(reports) >= 1


class LaplaceScorer(_ColumnScorer):
    mechanism_class = LaplaceNoise

    def names(self, mechanism):
        return ("mechanism", "mechanism_mass") if _mass_scored(mechanism) else ("mechanism",)

    def column_scores(self, transcript, canaries, seen, at):
        m = transcript.mechanism
        tokens = min(canaries.length, m.document_tokens)
        y = np.asarray(transcript.arrays["noisy_counts"], dtype=np.float64)
        y = y[None] if y.ndim == 2 else y                                     # (releases, k, columns)
        y = y[:, :, at]
        out = {"mechanism": sum(laplace_column_llr(release, tokens, m.scale) for release in y)}
        if _mass_scored(m):
            out["mechanism_mass"] = positive_mass(y[-1])
        return out

    def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays):
        capped = min(tokens, mechanism.document_tokens)
        if not mechanism.noisy_sweep:
            return super().simulate(mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays)
        ys = [_dp_cgs_sweep(present, capped, mechanism.scale, factor, k, rng)
              for present in ((coins, ~coins) if paired else (coins,))]
        scores = [{"mechanism": laplace_column_llr(y, capped, mechanism.scale), "mechanism_mass": positive_mass(y)}
                  for y in ys]
        return scores[0] if not paired else {name: scores[0][name] - scores[1][name] for name in scores[0]}

    def simulate_column(self, mechanism, present, tokens, factor, rng, k, arrays):
        m, total = present.size, np.zeros(present.size)
        for _ in range(mechanism.releases):
            y = rng.laplace(0.0, mechanism.scale / factor, (k, m))
            y[rng.integers(0, k, m), np.arange(m)] += tokens * present
            total += laplace_column_llr(y, tokens, mechanism.scale)
        return {"mechanism": total}


def _mass_scored(mechanism: LaplaceNoise) -> bool:
    """A single release after a noisy sweep is also scored by its positive mass: the sweep spreads a canary's
    tokens over the topics whose noise is high, where the one-topic ratio misses them. Elsewhere the tokens
    sit in one topic, so a second score would only split α."""
    return mechanism.noisy_sweep and mechanism.releases == 1


class GaussianScorer(_ColumnScorer):
    mechanism_class = GaussianNoise

    def column_scores(self, transcript, canaries, seen, at):
        m = transcript.mechanism
        tokens = min(canaries.length, m.document_tokens)
        a = transcript.arrays
        every = at.size == np.asarray(transcript.columns).size and np.array_equal(at, np.arange(at.size))
        y = np.asarray(a["noisy_sums"]) if every else np.asarray(a["noisy_sums"])[..., at]       # (T, k, seen)
        if "top_topics" in a:
            top = np.asarray(a["top_topics"]) if every else np.asarray(a["top_topics"])[..., at]  # (T, seen)
            scores = subsampled_gaussian_step_scores(y, top, tokens, m.clip_norm, m.noise_std, m.sampling_rate)
        else:
            scores = any_topic_gaussian_step_scores(y, tokens, m.clip_norm, m.noise_std, m.sampling_rate)
        return {"mechanism": scores}

    def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays, contribution=None):
        """As every column scorer, with ``contribution``: the shares of its clipped contribution a sampled
        trained canary really adds to its scored topic (``attacks.contribution``), drawn at random for each
        sampled step; None: the whole contribution, as the score assumes."""
        tokens = min(tokens, mechanism.document_cap() or tokens)
        shares = None if contribution is None else np.clip(np.asarray(contribution, dtype=np.float64), 0.0, 1.0)
        columns = [self.simulate_column(mechanism, present, tokens, factor, rng, k, arrays, shares)
                   for present in ((coins, ~coins) if paired else (coins,))]
        return columns[0] if not paired else {name: columns[0][name] - columns[1][name] for name in columns[0]}

    def simulate_column(self, mechanism, present, tokens, factor, rng, k, arrays, shares=None):
        sigma, q = mechanism.noise_std, mechanism.sampling_rate
        size = tokens if mechanism.clip_norm is None else min(tokens, float(mechanism.clip_norm))
        m, total = present.size, np.zeros(present.size)
        known_topic = "top_topics" in arrays or k == 1
        for _ in range(mechanism.steps):
            sampled = present & (rng.random(m) < q)
            added = size * sampled if shares is None else size * sampled * shares[rng.integers(0, shares.size, m)]
            if known_topic:   # one topic's coordinate carries the contribution; the others are noise only
                y = rng.normal(0.0, sigma / factor, m) + added
                z = (y * size - 0.5 * size**2) / sigma**2
                total += np.logaddexp(math.log1p(-q), math.log(q) + z) if q < 1 else z
            else:
                y = rng.normal(0.0, sigma / factor, (1, k, m))
                y[0, rng.integers(0, k, m), np.arange(m)] += added
                total += any_topic_gaussian_step_scores(y, size, None, sigma, q)
        return {"mechanism": total}


class SetUnionScorer:
    """Anchored canaries by their word's noisy weight, the others by whether any word of theirs was released."""

    def supports(self, mechanism: Mechanism) -> bool:
        return isinstance(mechanism, SetUnion)

    def scores(self, transcript: Transcript, canaries: CanarySet) -> dict[str, np.ndarray]:
        return {"mechanism": _dpsu_canary_scores(transcript, canaries)}

    def simulate(self, mechanism, coins, tokens, factor, rng, paired, k, form, anchors, arrays):
        return {"mechanism": _simulate_dpsu(mechanism, coins, tokens, factor, rng, form, anchors)}


for _scorer in (RandomisedResponseScorer(), GeometricScorer(), LaplaceScorer(), GaussianScorer(), SetUnionScorer()):
    register(_scorer)


def positive_mass(y: np.ndarray) -> np.ndarray:
    """log Σ_t max(y_t, 0) of each noisy column of y (k × columns; 0 mass counts as the smallest, 1e-3).

    The likelihood ratio assumes the canary's tokens sit in one topic; a
    sampler that spreads them over several (DP-CGS's noisy sweep draws them
    towards the topics whose noise is high) is better seen in the column's
    positive mass, which is what Φ's column keeps.
    """
    return np.log(np.maximum(y, 0.0).sum(axis=0) + 1e-3)


def _dpsu_canary_scores(transcript: Transcript, canaries: CanarySet) -> np.ndarray:
    """Anchored canaries by their word's noisy weight, the others by whether any word of theirs was released."""
    step = transcript.mechanism
    assert isinstance(step, SetUnion) and canaries.words is not None
    at = _positions(transcript, canaries.words)
    seen = at >= 0
    noisy = np.zeros(canaries.count)
    noisy[seen] = np.asarray(transcript.arrays["noisy_weights"], dtype=np.float64)[at[seen]]
    anchors = canaries.anchors if canaries.anchors is not None else np.zeros(canaries.count, np.int64)
    return np.where(seen | (anchors == 0), dpsu_scores(noisy, released_documents(transcript, canaries), anchors,
                                                       step), 0.0)


def released_documents(transcript: Transcript, canaries: CanarySet) -> np.ndarray:
    """(m,) bool: whether the step released any word of each canary's document (unobserved words: no)."""
    released = np.zeros(canaries.n_columns)
    columns = np.asarray(transcript.columns, dtype=np.int64)
    inside = columns < canaries.n_columns
    released[columns[inside]] = np.asarray(transcript.arrays["released"], dtype=bool)[inside]
    return np.asarray(canaries.documents @ released).ravel() > 0


def dpsu_scores(noisy: np.ndarray, released: np.ndarray, anchors: np.ndarray, step: SetUnion) -> np.ndarray:
    """DP vocabulary canaries: the noisy weight's likelihood ratio where anchored, the release otherwise.

    A one-word document adds min(1, Γ − H) to its word whatever the policy, so F
    anchors give H = min(F, Γ) without the canary and min(F + 1, Γ) with it.

    Gaussian noise: the ratio ((y − h_out)² − (y − h_in)²)/2σ², linear in y.
    Laplace noise: (2y − h_out − h_in)/b, the ratio (2·clip(y, h_out, h_in) −
    h_out − h_in)/b inside its window, continued linearly outside it. Under the
    claim the two order the canaries alike (beyond the window the ratio is flat,
    so which of the saturated canaries rank first does not change how many of
    them trained); a step whose documents spend f > 1 of budget puts the word
    at fF without the canary and f(F + 1) with it, at or above the window's top
    F + 1 (f ≥ 2, F = 1), where the clipped ratio ties most canaries at +ε and
    the linear one still separates them by f (benchmarks/RESULTS.md §23). No
    saturated value, so no rounding bits to tie.
    """
    gamma, scale = float(step.gamma), float(step.scale)
    h_out, h_in = np.minimum(anchors, gamma), np.minimum(anchors + 1.0, gamma)
    if step.noise == "gaussian":
        weight_llr = ((noisy - h_out) ** 2 - (noisy - h_in) ** 2) / (2.0 * scale**2)
    else:
        weight_llr = (2.0 * noisy - (h_out + h_in)) / scale
    return neutral_fresh_scores(np.where(anchors > 0, weight_llr, np.where(released, RELEASED_FRESH, 0.0)),
                                anchors > 0)


def neutral_fresh_scores(scores: np.ndarray, anchored: np.ndarray) -> np.ndarray:
    """The scores with every unreleased fresh canary's set to the anchored canaries' median.

    Such a canary carries no evidence, so it belongs in the middle of the
    ranking, where the guesses abstain. Under the claim the middle is 0 (half
    the anchored canaries trained, symmetrically around it); a step with a wrong
    budget moves every anchored score, trained or not, and a fixed 0 would
    then sit at one end and be guessed with its coin at chance. The median is a
    function of the scores alone, never of the coins, so every bound stays valid.
    """
    scores = np.array(scores, dtype=np.float64)
    anchored = np.asarray(anchored, dtype=bool)
    fresh = ~anchored & (scores < RELEASED_FRESH)
    if anchored.any() and fresh.any():
        scores[fresh] = np.median(scores[anchored])
    return scores


def fresh_document_weights(policy: str, words: int, budget: float, gamma: float) -> np.ndarray:
    """The weights a lone document of ``words`` fresh words (after the cap) puts on them, spending ``budget``:
    water-filling and L2 give equal shares (budget/t, budget/√t, each at most Γ); the greedy fill takes the
    words in turn up to Γ, the ones it does not reach stay candidates at weight 0."""
    if policy == "waterfill":
        return np.full(words, min(budget / words, gamma))
    if policy == "l2":
        return np.full(words, min(budget / math.sqrt(words), gamma))
    if policy == "greedy":
        return np.clip(budget - gamma * np.arange(words), 0.0, gamma)
    raise ValueError(f"unknown DPSU policy {policy!r}")


def fresh_documents_released(step: SetUnion, tokens: int, budget: float, scale: float, n: int,
                             rng: np.random.Generator) -> np.ndarray:
    """(n,) bool: whether the step releases any word of each of n trained fresh canary documents of ``tokens``
    distinct words, capped at Δ0, each document spending ``budget`` by the step's policy, noise at ``scale``."""
    words = max(1, int(tokens) if step.delta0 is None else min(int(tokens), int(step.delta0)))
    w = fresh_document_weights(step.policy, words, budget, float(step.gamma))
    noise = rng.normal(0.0, scale, (n, words)) if step.noise == "gaussian" else rng.laplace(0.0, scale, (n, words))
    return np.asarray(((w + noise) > float(step.rho)).any(axis=1))


def released_fresh_canaries(transcript: Transcript, canaries: CanarySet) -> tuple[int, int]:
    """(released, count) of the canary documents whose words no fixed document holds, for the δ-tail test:
    released counts those of which the step released any word."""
    fresh = np.ones(canaries.count, bool) if canaries.anchors is None else canaries.anchors == 0
    return int(released_documents(transcript, canaries)[fresh].sum()), int(fresh.sum())


def laplace_llr(y: np.ndarray, low: float, high: float, scale: float) -> np.ndarray:
    """(|y − low| − |y − high|)/b, the Laplace ratio of a value centred on ``high`` against ``low`` (high ≥ low).

    Computed as (2·clip(y, low, high) − low − high)/b, so it is exactly ±(high
    − low)/b wherever it saturates. The textbook form rounds differently for
    y = count + noise than for y = noise, and those rounding bits are
    correlated with the count: they would break the ties among saturated
    scores in the coins' favour (a floating-point leak, Mironov 2012),
    which the audit must neither exploit nor hide.
    """
    return (2.0 * np.clip(y, low, high) - (low + high)) / scale


def laplace_column_llr(y: np.ndarray, tokens: int, scale: float) -> np.ndarray:
    """log mean_t exp((|y_t| − |y_t − L|)/b) over the k rows of y (k × canaries)."""
    ratio = laplace_llr(y, 0.0, float(tokens), scale)
    return logsumexp(ratio, axis=0) - math.log(y.shape[0])


@njit(cache=True, nogil=True)
def _subsampled_gaussian_step_scores(noisy_sums, top_topics, size, sigma, q):
    """Σ_t log(1 − q + q·exp((size·y_tj − size²/2)/σ²)) per canary, j = top_topics[t] (memory flat in m)."""
    steps, _, m = noisy_sums.shape
    out = np.zeros(m)
    log_keep = math.log1p(-q) if q < 1 else -np.inf
    log_q = math.log(q)
    for s in range(steps):
        for c in range(m):
            z = (size * noisy_sums[s, top_topics[s, c], c] - 0.5 * size * size) / (sigma * sigma)
            if q < 1:
                a, b = log_keep, log_q + z
                out[c] += max(a, b) + math.log1p(math.exp(-abs(a - b)))
            else:
                out[c] += z
    return out


def subsampled_gaussian_step_scores(noisy_sums: np.ndarray, top_topics: np.ndarray, tokens: int,
                                    clip_norm: float | None, sigma: float, q: float) -> np.ndarray:
    """Each canary's log-likelihood ratio over every step of a Poisson-subsampled Gaussian.

    noisy_sums (T × k × canaries): each step's noisy column; top_topics (T ×
    canaries): the topic of the column's largest E[log β] at that step. The
    canary's contribution v_t is its N tokens (N clipped to C) in that topic:
    the E-step of a one-word document of N ≫ k tokens converges there from a
    symmetric start (docs/canaries.md measures how close the learner's own
    E-step comes).
    """
    size = float(tokens) if clip_norm is None else min(float(tokens), float(clip_norm))
    return _subsampled_gaussian_step_scores(np.ascontiguousarray(noisy_sums), np.ascontiguousarray(top_topics),
                                            size, float(sigma), float(q))


def any_topic_gaussian_step_scores(noisy_sums: np.ndarray, tokens: int, clip_norm: float | None, sigma: float,
                                   q: float) -> np.ndarray:
    """Each canary's log-likelihood ratio over every step of a Poisson-subsampled Gaussian when nothing says
    which topic its contribution lands in: each of the k topics with probability 1/k, so each step adds
    log(1 − q + q·mean_j exp((N·y_tj − N²/2)/σ²)) (noisy_sums: T × k × canaries)."""
    size = float(tokens) if clip_norm is None else min(float(tokens), float(clip_norm))
    total = np.zeros(noisy_sums.shape[-1])
    for y in noisy_sums:
        z = logsumexp((size * np.asarray(y, dtype=np.float64) - 0.5 * size * size) / (sigma * sigma), axis=0) \
            - math.log(y.shape[0])
        total += np.logaddexp(math.log1p(-q), math.log(q) + z) if q < 1 else z
    return total


# --------------------------------------------------------------------------
# Simulation of the claimed mechanism, for power estimates
# --------------------------------------------------------------------------


def _dp_cgs_sweep(present: np.ndarray, tokens: int, scale: float, factor: float, k: int, rng: np.random.Generator,
                  beta: float = 0.01) -> np.ndarray:
    """The noisy counts (k × m) DP-CGS releases for canaries of ``tokens`` tokens of one fresh word each.

    A canary's tokens start in one topic (the noiseless sweeps gather a
    one-word document there) and the private sweep redraws each in turn from
    (n_dt + α)(max(n_wt + e_t, 0) + β), n_dt = n_wt for a one-word document,
    α = 1/k, the topic totals' denominators alike across topics; the release
    is n_wt + e_t, e ~ Laplace(b/factor).
    """
    present = np.asarray(present, dtype=bool)
    m = present.size
    noise = rng.laplace(0.0, scale / factor, (k, m))
    counts = np.zeros((k, m))
    at = np.arange(m)
    counts[rng.integers(0, k, m), at] = tokens * present
    for _ in range(tokens):
        held = np.argmax(counts, axis=0)
        moving = present & (counts[held, at] > 0)
        counts[held[moving], at[moving]] -= 1
        weights = (counts + 1.0 / k) * (np.maximum(counts + noise, 0.0) + beta)
        cumulative = np.cumsum(weights / weights.sum(axis=0), axis=0)
        drawn = np.minimum((cumulative < rng.random(m)).sum(axis=0), k - 1)
        counts[drawn[moving], at[moving]] += 1
    return counts + noise



def _simulate_dpsu(mechanism: SetUnion, coins: np.ndarray, tokens: int, factor: float, rng: np.random.Generator,
                   form: str, anchors: int) -> np.ndarray:
    """A DP vocabulary step's canary scores: even-numbered canaries anchored by ``anchors`` one-word documents,
    odd ones fresh."""
    m = coins.size
    anchor_counts = np.where(anchored_positions(m), anchors, 0)
    if form not in ("noise", "budget"):
        raise ValueError(f"unknown form {form!r} of a DP vocabulary step's extra privacy loss")
    budget = factor if form == "budget" else 1.0
    scale = mechanism.scale / (factor if form == "noise" else 1.0)
    noise = rng.normal(0.0, scale, m) if mechanism.noise == "gaussian" else rng.laplace(0.0, scale, m)
    # One-word documents, each adding min(budget, Γ − H), in any order: min(budget·count, Γ) in all.
    weight = np.minimum(budget * (anchor_counts + coins), mechanism.gamma) + noise
    fresh = anchor_counts == 0
    if mechanism.policy:
        released = np.zeros(m, bool)
        released[fresh] = coins[fresh] & fresh_documents_released(mechanism, tokens, budget, scale,
                                                                  int(fresh.sum()), rng)
    else:  # a step recorded before its policy was: the whole budget on one word
        released = coins & fresh & (weight > mechanism.rho)
    return dpsu_scores(weight, released, anchor_counts, mechanism)
