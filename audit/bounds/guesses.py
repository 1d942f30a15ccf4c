"""The guesses of the one-run experiment, which every one-run bound tests.

m canaries, each included in ONE training independently with probability ½;
from the release, guess "in" for the k+ highest scores and "out" for the k−
lowest (r = k+ + k− guesses, v correct). Steinke et al.'s analysis
(:mod:`topicaudit.bounds.one_run`) and the f-DP one (:mod:`topicaudit.bounds.fdp`)
differ only in what they make of (m, r, v).
"""
from __future__ import annotations

import math

import numpy as np

from topicaudit.bounds.epsilon import check_level, prepare_scores


def default_guess_counts(n: int, min_guesses: int = 32) -> list[tuple[int, int]]:
    """Label-free (k+, k−) family: k = n/2, n/4, … down to min_guesses/2, as (k, k) and (k, 0).

    (k, k) suits attacks that separate both tails; (k, 0) suits attacks
    like LiRA whose evidence sits in the members' top scores. Fewer than ~32
    guesses cannot prove much at α/|family| anyway.
    """
    pairs, k = [], n // 2
    while k >= max(min_guesses // 2, 1):
        pairs += [(k, k), (k, 0)]
        k //= 2
    if not pairs and n:
        pairs = [(n // 2, n - n // 2)]
    return pairs


def margin_guess_counts(n: int, zs=(1.5, 2.5, 3.5)) -> list[tuple[int, int]]:
    """Label-free (k, k) pairs just inside the member count: k = ⌊n/2 − z·√n/2⌋ for each z.

    With independent ½ coins the members number Bin(n, ½) (sd √n/2), so k
    sits below both class sizes with probability ≈ (2Φ(z) − 1): a perfect
    attack then gets all 2k guesses right. The family for near-perfect
    attacks (canaries a non-private learner memorises); the default family
    wastes guesses on (n/2, n/2), which a perfect attack gets wrong by
    |#members − n/2|, and pays Bonferroni for pairs that cannot win.
    """
    ks = sorted({int(n // 2 - z * math.sqrt(n) / 2) for z in zs}, reverse=True)
    return [(k, k) for k in ks if k >= 1]


def guess_pairs(n: int, k_plus=None, k_minus=None) -> list[tuple[int, int]]:
    """The (k+, k−) guess counts to test: ``default_guess_counts(n)`` unless given.

    k_plus/k_minus: ints (one pre-registered test) or equal-length sequences
    (a family); a missing one counts as 0. Raises ValueError for counts
    outside 0 ≤ k+, k− and k+ + k− ≤ n.
    """
    if k_plus is None and k_minus is None:
        return default_guess_counts(n)
    kp = np.atleast_1d(np.asarray(0 if k_plus is None else k_plus, np.int64))
    km = np.atleast_1d(np.asarray(0 if k_minus is None else k_minus, np.int64))
    kp, km = np.broadcast_arrays(kp, km)
    pairs = list(zip(kp.tolist(), km.tolist()))
    for kp_, km_ in pairs:
        if kp_ < 0 or km_ < 0 or kp_ + km_ > n:
            raise ValueError(f"need k+, k- >= 0 and k+ + k- <= n = {n}; got ({kp_}, {km_})")
    return pairs


def guess_outcomes(scores, labels, pairs, seed=0) -> list[tuple[int, int, int, int]]:
    """(k+, k−, r, v) per pair: guess "in" for the k+ highest scores, "out" for the k− lowest.

    r = k+ + k− guesses, v of them correct. A guess among tied scores is counted as the worst the tie allows (the
    tied non-members taken first for "in", the tied members first for "out"): a tie says nothing of who is in. A
    seeded random order was used, but the canaries' coins are seeded too (CANARY_SEED), so a learner whose scores
    all tie was graded by one fixed order: for the default 10 canaries it put the five members first, and a uniform
    Φ was VIOLATED ε ≥ 0.247 (hostile pass XIX-x, R1). ``seed`` is kept for the details it is recorded in.
    ``scores``/``labels`` as from ``prepare_scores``.
    """
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    ascending = np.sort(scores)
    outcomes = []
    for kp, km in pairs:
        v = 0
        if kp > 0:
            cut = ascending[-kp]  # the k+-th highest score
            above = scores > cut
            tied = scores == cut
            v += int(np.sum(labels & above)) + max(0, kp - int(above.sum()) - int(np.sum(~labels & tied)))
        if km > 0:
            cut = ascending[km - 1]  # the k−-th lowest score
            below = scores < cut
            tied = scores == cut
            v += int(np.sum(~labels & below)) + max(0, km - int(below.sum()) - int(np.sum(labels & tied)))
        outcomes.append((kp, km, kp + km, v))
    return outcomes


def one_run_guesses(scores, labels, delta, alpha, k_plus, k_minus, m, seed):
    """What every one-run bound starts from: checked inputs, m, each guess pair's outcome, α per pair.

    Returns (m, outcomes [(k+, k−, r, v), …], α per pair), or (m, reason, None)
    when nothing can be tested: no guesses, or labels of one class only (then
    inclusion was evidently not randomised; claim nothing rather than lean on
    a 2^-n event).
    """
    check_level(alpha, delta)
    scores, labels = prepare_scores(scores, labels)
    n = scores.size
    m = n if m is None else int(m)
    if m < n:
        raise ValueError("m (canaries randomised) cannot be below the number scored")
    pairs = guess_pairs(n, k_plus, k_minus)
    if not pairs or labels.all() or not labels.any():
        return m, "no canaries" if not pairs else "labels contain one class only", None
    return m, guess_outcomes(scores, labels, pairs, seed), alpha / len(pairs)


def one_run_details(m, outcomes, best_i, alpha_each, seed) -> dict:
    """The ``details`` of a one-run bound: the winning guess pair and the family it was chosen from."""
    k_plus, k_minus, r, v = outcomes[best_i]
    return {"m": m, "k_plus": k_plus, "k_minus": k_minus, "guesses": r, "correct": v,
            "family_size": len(outcomes), "alpha_per_test": alpha_each,
            "family": [list(x) for x in outcomes], "seed": seed}
