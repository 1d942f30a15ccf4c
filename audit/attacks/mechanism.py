"""Canary scores on what a DP mechanism released: the likelihood ratio of the claimed mechanism.

A DP claim covers every output of its mechanism (each noisy step of DP-SVI,
the local reports of LP-LDA and LPPF, DP-CGS's noisy counts), and the final Φ
is only a blurred function of them; an audit that scores the outputs
themselves, by the log-likelihood ratio of "the canary trained" against "it
did not" under the mechanism the claim describes, is as strong as a test of
that mechanism can be (Neyman–Pearson). The scores read only the transcript
and public constants, never the coins, so every one-run bound stays valid.

One scorer per transcript kind (``Transcript.kind``, recorded by the learner):

``randomized-response``  a word canary's presence bit in its host's report:
                         ±ε_b (bit 1 / bit 0).
``geometric-counts``     a word canary's count in its host's noisy report y:
                         a·(|y| − |y − 1|), a = ln(1/α): +a for y ≥ 1, −a for y ≤ 0.
``laplace-counts``       the canary word's noisy column (k topics) with L tokens
                         (the claimed cap) in one unknown topic:
                         log mean_t exp((|y_t| − |y_t − L|)/b); and, as
                         ``mechanism_mass``, log Σ_t max(y_t, 0) for tokens
                         the sampler spread over several topics.
``dpsu``                 a DP vocabulary step: an anchored canary word (F fixed
                         one-word documents, F = 1) is a candidate either way,
                         and its noisy weight y is Laplace (Gaussian) around
                         min(F, Γ) or min(F + 1, Γ): their likelihood ratio,
                         the Laplace one continued linearly beyond its window
                         (so a weight far above it, as a wrong budget makes
                         it, still ranks above); any other canary scores by
                         the release of any of its document's words alone
                         (released: certainly trained; else 0).
``laplace-count-releases``  HDP-LDA's every release of the column: the
                         ``laplace-counts`` ratio of each, summed over releases.
``subsampled-gaussian-steps``  every step's noisy column y_t: the canary's
                         contribution v_t is its N tokens, clipped as claimed,
                         in the topic of the column's largest E[log β] at that
                         step (where a one-word document's E-step converges);
                         the step is log(1 − q + q·exp((⟨y_t, v_t⟩ −
                         ‖v_t‖²/2)/σ²)), summed over steps.

Paired canaries (replace-one claims) score heads-word minus tails-word. A
canary whose column the transcript lacks (a vocabulary step dropped it)
scores 0: no evidence either way.

``simulate_scores`` draws the same scores from the claimed mechanism with its
privacy loss multiplied by a factor, for the verdict's power estimate.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.special import logsumexp

from topicaudit.attacks.canaries import CanarySet, anchored_positions
from topicaudit.targets.base import Transcript

KINDS = ("randomized-response", "geometric-counts", "laplace-counts", "laplace-count-releases",
         "subsampled-gaussian-steps", "dpsu")
# The score of a released word that no fixed document holds: under the claim only δ could have released it.
RELEASED_FRESH = 1e6


def mechanism_scores(transcript: Transcript, canaries: CanarySet) -> dict[str, np.ndarray]:
    """Each canary's scores on the transcript, heads against tails: ``mechanism`` (the claimed mechanism's
    log-likelihood ratio) and, for noisy counts, ``mechanism_mass``; (m,) float64 each."""
    if transcript.kind not in KINDS:
        raise ValueError(f"no scorer for transcript kind {transcript.kind!r}; known: {', '.join(KINDS)}")
    if transcript.kind == "dpsu":
        return {"mechanism": _dpsu_canary_scores(transcript, canaries)}
    scores = {"mechanism": _column_scores(transcript, canaries, canaries.words)}
    if transcript.kind == "laplace-counts":
        scores["mechanism_mass"] = _positive_mass(transcript, canaries.words)
    if canaries.alternate_words is not None:
        scores["mechanism"] = scores["mechanism"] - _column_scores(transcript, canaries, canaries.alternate_words)
        if "mechanism_mass" in scores:
            scores["mechanism_mass"] = scores["mechanism_mass"] - _positive_mass(transcript, canaries.alternate_words)
    return scores


def _positions(transcript: Transcript, words: np.ndarray) -> np.ndarray:
    """Each word's index in the transcript's columns; −1 where it was not observed."""
    columns = np.asarray(transcript.columns, dtype=np.int64)
    words = np.asarray(words, dtype=np.int64)
    if columns.size == 0:
        return np.full(words.size, -1, dtype=np.int64)
    order = np.argsort(columns)
    at = order[np.searchsorted(columns, words, sorter=order).clip(0, columns.size - 1)]
    return np.where(columns[at] == words, at, -1)


def _positive_mass(transcript: Transcript, words: np.ndarray) -> np.ndarray:
    """log Σ_t max(y_t, 0) of each word's noisy column (0 mass counts as the smallest, 1e-3).

    The likelihood ratio assumes the canary's tokens sit in one topic; a
    sampler that spreads them over several (DP-CGS's noisy sweep draws them
    towards the topics whose noise is high) is better seen in the column's
    positive mass, which is what Φ's column keeps.
    """
    at = _positions(transcript, words)
    y = np.asarray(transcript.arrays["noisy_counts"], dtype=np.float64)
    mass = np.where(at >= 0, np.maximum(y[:, np.maximum(at, 0)], 0.0).sum(axis=0), 0.0)
    return np.log(mass + 1e-3)


def _column_scores(transcript: Transcript, canaries: CanarySet, words: np.ndarray) -> np.ndarray:
    """The log-likelihood ratio of each canary word's column having trained (0 where it was not observed)."""
    at = _positions(transcript, words)
    seen = at >= 0
    out = np.zeros(words.size)
    if not seen.any():
        return out
    p, a = transcript.parameters, transcript.arrays
    if transcript.kind in ("randomized-response", "geometric-counts"):
        if not canaries.word_level:
            raise ValueError(f"{transcript.kind} transcripts score word canaries (one word in a host's report)")
        reports = np.asarray(a["reports"])[canaries.hosts[seen], at[seen]]
        if transcript.kind == "randomized-response":
            q = float(p["keep_probability"])
            out[seen] = np.where(reports, 1.0, -1.0) * math.log(q / (1.0 - q))
        else:
            loss = math.log(1.0 / float(p["alpha"]))
            out[seen] = np.where(reports >= 1, loss, -loss)
        return out
    tokens = min(canaries.length, int(p["document_tokens"]))
    if transcript.kind == "laplace-counts":
        y = np.asarray(a["noisy_counts"], dtype=np.float64)[:, at[seen]]          # (k, seen)
        out[seen] = laplace_column_llr(y, tokens, float(p["scale"]))
        return out
    if transcript.kind == "laplace-count-releases":
        y = np.asarray(a["releases"], dtype=np.float64)[:, :, at[seen]]          # (T, k, seen)
        out[seen] = sum(laplace_column_llr(step, tokens, float(p["scale"])) for step in y)
        return out
    columns = at[seen]
    every = columns.size == np.asarray(transcript.columns).size and np.array_equal(columns, np.arange(columns.size))
    if "top_topics" not in a:  # a model file written before the transcript kept only each step's top topic
        a = {**a, "top_topics": np.asarray(a["expected_log_beta"]).argmax(axis=1)}
    y, top = (np.asarray(a[name]) if every else np.asarray(a[name])[..., columns]     # (T, k, seen), (T, seen)
              for name in ("noisy_sums", "top_topics"))
    out[seen] = subsampled_gaussian_step_scores(y, top, tokens, p.get("clip_norm"), float(p["noise_std"]),
                                                float(p["sampling_rate"]))
    return out


def _dpsu_canary_scores(transcript: Transcript, canaries: CanarySet) -> np.ndarray:
    """Anchored canaries by their word's noisy weight, the others by whether any word of theirs was released."""
    at = _positions(transcript, canaries.words)
    seen = at >= 0
    noisy = np.zeros(canaries.count)
    noisy[seen] = np.asarray(transcript.arrays["noisy_weights"], dtype=np.float64)[at[seen]]
    anchors = canaries.anchors if canaries.anchors is not None else np.zeros(canaries.count, np.int64)
    return np.where(seen | (anchors == 0), dpsu_scores(noisy, released_documents(transcript, canaries), anchors,
                                                       transcript.parameters), 0.0)


def released_documents(transcript: Transcript, canaries: CanarySet) -> np.ndarray:
    """(m,) bool: whether the step released any word of each canary's document (unobserved words: no)."""
    released = np.zeros(canaries.n_columns)
    columns = np.asarray(transcript.columns, dtype=np.int64)
    inside = columns < canaries.n_columns
    released[columns[inside]] = np.asarray(transcript.arrays["released"], dtype=bool)[inside]
    return np.asarray(canaries.documents @ released).ravel() > 0


def dpsu_scores(noisy: np.ndarray, released: np.ndarray, anchors: np.ndarray, parameters: dict) -> np.ndarray:
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
    gamma, scale = float(parameters["gamma"]), float(parameters["scale"])
    h_out, h_in = np.minimum(anchors, gamma), np.minimum(anchors + 1.0, gamma)
    if parameters["noise"] == "gaussian":
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


def fresh_documents_released(parameters: dict, tokens: int, budget: float, scale: float, n: int,
                             rng: np.random.Generator) -> np.ndarray:
    """(n,) bool: whether the step releases any word of each of n trained fresh canary documents of ``tokens``
    distinct words, capped at Δ0, each document spending ``budget`` by the step's policy, noise at ``scale``."""
    delta0 = parameters.get("delta0")
    words = max(1, int(tokens) if delta0 is None else min(int(tokens), int(delta0)))
    w = fresh_document_weights(str(parameters["policy"]), words, budget, float(parameters["gamma"]))
    noise = rng.normal(0.0, scale, (n, words)) if parameters["noise"] == "gaussian" else \
        rng.laplace(0.0, scale, (n, words))
    return ((w + noise) > float(parameters["rho"])).any(axis=1)


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


# --------------------------------------------------------------------------
# Simulation of the claimed mechanism, for power estimates
# --------------------------------------------------------------------------


def simulate_scores(kind: str, parameters: dict, coins: np.ndarray, tokens: int, factor: float,
                    rng: np.random.Generator, paired: bool = False, k: int = 1, form: str = "noise") -> np.ndarray:
    """The ``mechanism`` score of :func:`simulate_score_sets`."""
    return simulate_score_sets(kind, parameters, coins, tokens, factor, rng, paired, k, form)["mechanism"]


def simulate_score_sets(kind: str, parameters: dict, coins: np.ndarray, tokens: int, factor: float,
                        rng: np.random.Generator, paired: bool = False, k: int = 1,
                        form: str = "noise") -> dict[str, np.ndarray]:
    """Every score the mechanism audit would give if the mechanism leaked ``factor`` times the claimed loss.

    The claimed mechanism with its noise divided by ``factor`` (randomised
    response and geometric noise at factor·ε), scored as the real audit
    scores it (by the claimed constants), ``mechanism_mass`` beside
    ``mechanism`` for noisy counts. Where the audit meets the model's own
    randomness: DP-CGS's noisy sweep redraws a canary's capped tokens one by
    one with the noise in the conditional (``_dp_cgs_sweep``: they drift to
    the topics whose noise is high, which the released counts then show);
    HDP-LDA's releases put a canary's tokens in one topic, and a DP-SVI
    step's contribution is the full N in one topic.

    form (DP vocabulary steps): ``noise`` divides the noise by the factor;
    ``budget`` keeps the claimed noise and lets every document spend
    ``factor`` of budget, so the anchors move to min(factor·F, Γ) too and can
    reach the cap Γ, where nothing moves (the same privacy loss, a different
    mechanism: a check states the weaker of the two).
    """
    if kind == "laplace-counts":
        scale, topics = float(parameters["scale"]), max(1, int(k))
        capped = min(tokens, int(parameters.get("document_tokens", tokens)))
        ys = [_dp_cgs_sweep(present, capped, scale, factor, topics, rng)
              for present in ((coins, ~coins) if paired else (coins,))]
        scores = [{"mechanism": laplace_column_llr(y, capped, scale),
                   "mechanism_mass": np.log(np.maximum(y, 0.0).sum(axis=0) + 1e-3)} for y in ys]
        return scores[0] if not paired else {name: scores[0][name] - scores[1][name] for name in scores[0]}
    return {"mechanism": _simulate_mechanism(kind, parameters, coins, tokens, factor, rng, paired, k, form)}


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


def _simulate_mechanism(kind: str, parameters: dict, coins: np.ndarray, tokens: int, factor: float,
                        rng: np.random.Generator, paired: bool = False, k: int = 1, form: str = "noise") -> np.ndarray:
    """``simulate_score_sets``'s ``mechanism`` score for every kind but DP-CGS's noisy counts."""
    coins = np.asarray(coins, dtype=bool)
    m = coins.size
    tokens = min(tokens, int(parameters.get("document_tokens", tokens)))  # a correct learner caps the canary
    if kind in ("randomized-response", "geometric-counts"):
        if kind == "randomized-response":
            q = float(parameters["keep_probability"])
            loss = math.log(q / (1 - q))
        else:
            loss = math.log(1.0 / float(parameters["alpha"]))
        # P(report says "present" | present) at factor·ε: e^{fε}/(1 + e^{fε}) for both kinds (the geometric
        # count reads "present" when y ≥ 1, i.e. when its noise is ≥ 0).
        keep = 1.0 / (1.0 + math.exp(-factor * loss))
        says = np.where(coins, rng.random(m) < keep, rng.random(m) >= keep)
        return np.where(says, loss, -loss)

    def column(present: np.ndarray) -> np.ndarray:
        if kind == "laplace-count-releases":
            scale = float(parameters["scale"])
            total = np.zeros(m)
            for _ in range(int(parameters.get("releases", 1))):
                y = rng.laplace(0.0, scale / factor, (k, m))
                y[rng.integers(0, k, m), np.arange(m)] += tokens * present
                total += laplace_column_llr(y, tokens, scale)
            return total
        sigma, q, steps = float(parameters["noise_std"]), float(parameters["sampling_rate"]), int(parameters["steps"])
        clip = parameters.get("clip_norm")
        size = tokens if clip is None else min(tokens, float(clip))
        total = np.zeros(m)
        for _ in range(steps):   # one topic's coordinate carries the contribution; the others are noise only
            y = rng.normal(0.0, sigma / factor, m) + size * (present & (rng.random(m) < q))
            z = (y * size - 0.5 * size**2) / sigma**2
            total += np.logaddexp(math.log1p(-q), math.log(q) + z) if q < 1 else z
        return total

    if kind not in KINDS:
        raise ValueError(f"no simulator for transcript kind {kind!r}")
    if kind == "dpsu":  # even-numbered canaries anchored by `anchors` one-word documents, odd ones fresh
        anchors = np.where(anchored_positions(m), int(parameters["anchors"]), 0)
        if form not in ("noise", "budget"):
            raise ValueError(f"unknown form {form!r} of a DP vocabulary step's extra privacy loss")
        budget = factor if form == "budget" else 1.0
        scale = float(parameters["scale"]) / (factor if form == "noise" else 1.0)
        noise = rng.normal(0.0, scale, m) if parameters["noise"] == "gaussian" else rng.laplace(0.0, scale, m)
        # One-word documents, each adding min(budget, Γ − H), in any order: min(budget·count, Γ) in all.
        weight = np.minimum(budget * (anchors + coins), float(parameters["gamma"])) + noise
        fresh = anchors == 0
        if parameters.get("policy"):
            released = np.zeros(m, bool)
            released[fresh] = coins[fresh] & fresh_documents_released(parameters, tokens, budget, scale,
                                                                      int(fresh.sum()), rng)
        else:  # a transcript from before the policy was recorded: the whole budget on one word
            released = coins & fresh & (weight > float(parameters["rho"]))
        return dpsu_scores(weight, released, anchors, parameters)
    scores = column(coins)
    if paired:
        scores = scores - column(~coins)
    return scores
