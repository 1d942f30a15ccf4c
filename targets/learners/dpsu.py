"""DP vocabulary selection by Differentially Private Set Union (docs/algorithms.md#dp-set-union).

Users are documents (document-level adjacency). Document i contributes the
set W_i of its distinct tokens: the columns of its row of the count matrix with
a positive count. Every step builds a weighted histogram H over tokens in which
each document spends an update budget of 1 (L1, or L2 for the Gaussian policy),
adds noise to H on every *candidate* token and releases the tokens whose noisy
weight exceeds a threshold ρ. Four steps, each a vocabulary step with the
interface of ``topicaudit.targets.learners.vocabulary`` (``select(X, seed)``, ``guarantee()``):

==========================  ===============================================
``dpsu-laplace``            Gopi et al. 2020, policy Laplace
``dpsu-gaussian``           Gopi et al. 2020, policy Gaussian
``dpsu-gw``                 Carvalho et al. 2022 GW, corrected (derived here)
``dpsu-gw-public-code``     GW as in the public code the paper used; its
                            claimed (ε, δ) does NOT hold (see below)
==========================  ===============================================

Randomness. One ``np.random.default_rng(seed)`` per call draws, in this order:
one uniform key per non-zero of X (random Δ0 subsets and tie-breaks inside a
document), the random processing order of the documents, then one noise value
per corpus column. The same seed on the same X gives the same selection.

Why these thresholds are right (the proof pattern of Gopi et al. 2020).
Let D' = D ∪ {u}. Couple the runs on D and D' through the same order of D's
documents and the same per-document random choices (a document's Δ0 subset and
its tie-breaks do not depend on anybody else). Every update policy used here
is *contractive*: if two histograms satisfy G ≤ G' coordinatewise, updating
both with the same document keeps G_new ≤ G'_new and does not increase
Σ(G' − G). By induction over the documents processed after u, the final
histograms satisfy H ≤ H' and Σ(H' − H) ≤ 1 (resp. ‖H' − H‖₂ ≤ 1). Hence

* on the candidates of D (every token of the documents' possibly capped sets,
  noised on both sides whatever its weight), the output is the Laplace (resp.
  Gaussian) mechanism with L1 (resp. L2) sensitivity 1: ε-DP (resp. (ε, δ/2));
* the new candidates W_u \\ U_D (at most Δ0 of them) carry the weight u put
  there, and the threshold ρ is chosen so that P[any of them released] ≤ δ
  (resp. δ/2).

Together: (ε, δ)-DP for add/remove-one-document adjacency, with the same δ in
both directions. Write p = P[some new candidate is released] ≤ δ (resp. δ/2);
the new candidates' noise is independent of the shared candidates' noise. For
a set S of outputs let S₀ be its members that release no new candidate (the
only outputs D can give) and x = P[the shared-candidate part of the run on D'
lies in S₀], so P_{D'}[S₀] = (1 − p)x and P_D[S] = P_D[S₀].

* Adding u (D' against D): P_{D'}[S] ≤ P_{D'}[S₀] + p ≤ x + p
  ≤ e^ε P_D[S] + δ, as x ≤ e^ε P_D[S₀] by the first bullet above.
  Gaussian: x ≤ e^ε P_D[S] + δ/2, plus p ≤ δ/2.
* Removing u (D against D'): P_D[S] ≤ e^ε x and P_D[S] ≤ 1. The first bound
  alone gives P_D[S] ≤ e^ε P_{D'}[S₀]/(1 − p), i.e. only P_D[S] ≤
  e^ε P_{D'}[S] + e^ε·p: δ inflated to e^ε·δ. Keeping both bounds,
  P_D[S] − e^ε P_{D'}[S] ≤ min(1, e^ε x) − e^ε(1 − p)x ≤ p ≤ δ (the
  difference is largest at e^ε x = 1). Gaussian: min(1, e^ε x + δ/2) −
  e^ε(1 − p)x ≤ δ/2 + p ≤ δ.

So the (ε, δ) recorded in ``guarantee()`` holds for add and for remove
neighbours; no e^ε·δ term is needed in either direction.

Longer than 400 lines because it is one algorithm family: DP set union's thresholds, its compiled
histogram policies and the four variants built from them.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit
from scipy.special import ndtri

from topicaudit.targets.base import Adjacency, Basis, Guarantee
from topicaudit.targets.mechanisms import Recorder, SetUnion
from topicaudit.targets.params import non_negative, positive
from topicaudit.targets.privacy.analytic_gaussian import analytic_gaussian_sigma
import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for


# --------------------------------------------------------------------------
# thresholds
# --------------------------------------------------------------------------


def laplace_policy_threshold(epsilon: float, delta: float, delta0: int) -> float:
    """Gopi et al. ρ_Lap = max_{t=1..Δ0} [1/t + λ ln(1/(2(1 − (1 − δ)^{1/t})))], λ = 1/ε.

    With the water-filling policy a document's t new tokens (at most Δ0) all
    have the same gap Γ, so they get equal weights ≤ 1/t, and
    P[none released] = (1 − ½e^{−(ρ − 1/t)/λ})^t ≥ 1 − δ for every t.
    """
    t = np.arange(1, delta0 + 1, dtype=np.float64)
    q = -np.expm1(np.log1p(-delta) / t)  # 1 − (1 − δ)^{1/t}, accurately
    return float(np.max(1.0 / t + np.log(1.0 / (2.0 * q)) / epsilon))


def gaussian_policy_threshold(sigma: float, delta: float, delta0: int) -> float:
    """Gopi et al. ρ_Gauss = max_{t=1..Δ0} [1/√t + σ Φ⁻¹((1 − δ/2)^{1/t})].

    A document's t new tokens get equal weights ≤ 1/√t (L2 budget 1), so
    P[none released] = Φ((ρ − 1/√t)/σ)^t ≥ 1 − δ/2 for every t.
    """
    t = np.arange(1, delta0 + 1, dtype=np.float64)
    q = -np.expm1(np.log1p(-delta / 2.0) / t)  # 1 − (1 − δ/2)^{1/t}
    return float(np.max(1.0 / np.sqrt(t) - sigma * ndtri(q)))  # Φ⁻¹(1 − q) = −Φ⁻¹(q)


def gw_corrected_threshold(epsilon: float, delta: float, delta0: int) -> float:
    """ρ = (1/ε) ln((e^ε + Δ0 − 1)/(2δ)) for GW with every token a candidate (derived).

    A document u adds at most Δ0 new candidates, with weights w_j ≥ 0,
    Σ w_j ≤ 1. Each is released with probability ½e^{−ε(ρ − w_j)} (ρ ≥ 1).
    The union bound Σ_j ½e^{−ερ} e^{ε w_j} is convex in w, so over that
    polytope it is largest at a vertex: one token at weight 1, Δ0 − 1 at 0,
    giving ½e^{−ερ}(e^ε + Δ0 − 1) = δ. (The greedy fill puts positive weight
    on at most one new token anyway, since a new token's gap Γ exceeds 1.)
    Computed as 1 + (1/ε) ln((1 + (Δ0 − 1)e^{−ε})/(2δ)) to avoid overflow.
    """
    return 1.0 + (math.log1p((delta0 - 1) * math.exp(-epsilon)) - math.log(2.0 * delta)) / epsilon


def gw_public_threshold(epsilon: float, delta: float) -> float:
    """Carvalho et al.'s ρ = 1 + (1/ε) ln(1/(2δ)): covers one new token at weight 1 only."""
    return 1.0 + math.log(1.0 / (2.0 * delta)) / epsilon


# --------------------------------------------------------------------------
# compiled histogram builders (one pass over documents in the given order)
# --------------------------------------------------------------------------


@njit(cache=True)
def _greedy_histogram(indptr, indices, order, gamma, n_words, budget=1.0):
    """Greedy fill: each document walks its tokens in the stored order and fills
    each gap Γ − H up to Γ until its budget (1) is spent (tokens at Γ are skipped)."""
    H = np.zeros(n_words)
    for d in order:
        rem = budget
        for p in range(indptr[d], indptr[d + 1]):
            t = indices[p]
            gap = gamma - H[t]
            if gap <= 0.0:
                continue
            if gap <= rem:
                H[t] = gamma
                rem -= gap
                if rem <= 0.0:
                    break
            else:
                H[t] += rem
                break
    return H


@njit(cache=True)
def _waterfill_histogram(indptr, indices, order, gamma, n_words, budget=1.0):
    """Policy Laplace (L1 descent): raise all of a document's tokens below Γ by
    a common amount c, each capped at its gap, with Σ min(gap, c) = budget (1;
    smallest gaps reach Γ first, equal shares otherwise); all to Γ if Σ gaps ≤ budget."""
    H = np.zeros(n_words)
    longest = 0
    for d in range(indptr.size - 1):
        longest = max(longest, indptr[d + 1] - indptr[d])
    gaps = np.empty(longest)
    for d in order:
        s, e = indptr[d], indptr[d + 1]
        k = 0
        total = 0.0
        for p in range(s, e):
            g = gamma - H[indices[p]]
            if g > 0.0:
                gaps[k] = g
                k += 1
                total += g
        if k == 0:
            continue
        if total <= budget:
            c = np.inf
        else:
            gs = np.sort(gaps[:k])
            used = 0.0
            c = 0.0
            for i in range(k):
                if used + gs[i] * (k - i) >= budget:
                    c = (budget - used) / (k - i)
                    break
                used += gs[i]
        for p in range(s, e):
            t = indices[p]
            g = gamma - H[t]
            if g > 0.0:
                if g <= c:
                    H[t] = gamma
                else:
                    H[t] += c
    return H


@njit(cache=True)
def _l2_histogram(indptr, indices, order, gamma, n_words, budget=1.0):
    """Policy Gaussian (L2 descent): H += min(budget, ‖g‖₂) g/‖g‖₂, g = (Γ − H)₊ on
    the document's tokens (budget 1)."""
    H = np.zeros(n_words)
    for d in order:
        s, e = indptr[d], indptr[d + 1]
        norm2 = 0.0
        for p in range(s, e):
            g = gamma - H[indices[p]]
            if g > 0.0:
                norm2 += g * g
        if norm2 <= 0.0:
            continue
        norm = math.sqrt(norm2)
        if norm <= budget:
            for p in range(s, e):
                t = indices[p]
                if H[t] < gamma:
                    H[t] = gamma
        else:
            scale = budget / norm
            for p in range(s, e):
                t = indices[p]
                g = gamma - H[t]
                if g > 0.0:
                    H[t] += scale * g
    return H


# --------------------------------------------------------------------------
# shared preparation
# --------------------------------------------------------------------------


def _document_sets(X, rng, delta0, by_count):
    """Each document's distinct tokens, optionally capped and ordered, as CSR arrays.

    Returns (indptr, indices, candidates) where row d of (indptr, indices) lists
    the tokens document d contributes, in the order a greedy policy visits them,
    and ``candidates`` marks every token contributed by some document.

    delta0:   None (no cap), or the most distinct tokens a document contributes.
    by_count: order each document's tokens by its own count, descending, ties
              in random order; the cap then keeps the most frequent ones.
              Otherwise the cap keeps a uniformly random subset.
    """
    X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    n_docs, n_words = X.shape
    rows = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(X.indptr))
    keep = X.data > 0
    rows, cols, counts = rows[keep], X.indices[keep].astype(np.int64), X.data[keep]
    keys = rng.random(rows.size)
    if by_count:
        perm = np.lexsort((keys, -counts, rows))
    elif delta0 is not None:
        perm = np.lexsort((keys, rows))
    else:
        perm = np.arange(rows.size)
    rows, cols = rows[perm], cols[perm]
    lengths = np.bincount(rows, minlength=n_docs)
    if delta0 is not None and rows.size and lengths.max() > delta0:
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        rank = np.arange(rows.size) - starts[rows]
        kept = rank < delta0
        rows, cols = rows[kept], cols[kept]
        lengths = np.bincount(rows, minlength=n_docs)
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    candidates = np.zeros(n_words, dtype=bool)
    candidates[cols] = True
    return indptr, cols, candidates


def _check(epsilon, delta, alpha, delta0=None):
    positive("epsilon", epsilon)
    if not (0 < delta < 0.5):
        raise ValueError(f"delta must lie in (0, 0.5) (got {delta!r})")
    non_negative("alpha", alpha)
    if delta0 is not None and (isinstance(delta0, bool) or int(delta0) != delta0 or delta0 < 1):
        raise ValueError(f"delta0 must be an integer ≥ 1 (got {delta0!r})")


class _DPSU:
    """Common parts: parameters, the select skeleton and the guarantee record."""

    name = "dpsu"
    accountant = ""
    basis = Basis.THEOREM

    epsilon: float
    delta: float
    alpha: float
    delta0: int | None
    rho: float
    gamma: float
    noise_scale: float
    # Each document's update budget (L1, or L2 for policy Gaussian): 1 in every correct step, the
    # sensitivity the noise and the threshold are calibrated to. Only a planted bug changes it
    # (topicaudit.targets.bug_variants, ``dpsu-budget-2``).
    budget: float = 1.0
    policy: str = ""  # how a document spends its budget: "waterfill", "l2" or "greedy"

    def _histogram(self, indptr, indices, order, n_words):  # pragma: no cover
        raise NotImplementedError

    def _noise(self, rng, n):
        return rng.laplace(0.0, self.noise_scale, n)

    def _by_count(self) -> bool:
        return False

    def select(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Sorted int64 corpus column ids released for the documents (rows) of X; ``record`` receives the
        noisy weights H + noise (and whether each word is a candidate), and the threshold is applied to what
        it returns."""
        rng = np.random.default_rng(seed)
        n_docs, n_words = X.shape
        indptr, indices, candidates = _document_sets(X, rng, self.delta0, self._by_count())
        order = rng.permutation(n_docs).astype(np.int64)
        H = self._histogram(indptr, indices, order, n_words)
        noisy = H + self._noise(rng, n_words)
        if record is not None:
            m = self.mechanism()
            noisy = record.set_union(noisy, candidate=candidates, noise=m.noise, scale=m.scale, rho=m.rho,
                                     gamma=m.gamma, epsilon=m.epsilon, delta=m.delta, policy=m.policy,
                                     delta0=m.delta0)
        released = candidates & (noisy > self.rho)
        return np.flatnonzero(released).astype(np.int64)

    def mechanism(self) -> SetUnion:
        """The claimed constants: noise law and scale, threshold ρ, cap Γ, the step's own (ε, δ), and how a
        document spends its budget (``policy``: waterfill, l2 or greedy) over at most Δ0 words (``delta0``)."""
        return SetUnion("gaussian" if self.name == "dpsu-gaussian" else "laplace", self.noise_scale, self.rho,
                        self.gamma, self.epsilon, self.delta, self.policy, self.delta0)

    def _parameters(self) -> dict:
        return {"step": self.name, "alpha": self.alpha, "delta0": self.delta0,
                "rho": self.rho, "Gamma": self.gamma, "noise_scale": self.noise_scale}

    def guarantee(self) -> Guarantee:
        # The event is the theorem's (ε, δ) statement, not "Laplace (or Gaussian) noise plus δ": the
        # threshold's δ is not an independent mechanism, so only the (ε, δ) pair is known to hold.
        return Guarantee(epsilon=self.epsilon, delta=self.delta, adjacency=Adjacency.DOCUMENT,
                         basis=self.basis, accountant=self.accountant, parameters=self._parameters(),
                         event=privacy.events.EpsilonDeltaDpEvent(self.epsilon, self.delta))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(epsilon={self.epsilon}, delta={self.delta}, "
                f"alpha={self.alpha}, delta0={self.delta0})")


class PolicyLaplaceDPSU(_DPSU):
    """Gopi et al. 2020 DPSU with the Laplace update policy.

    Documents in random order; each keeps a uniformly random subset of at most
    Δ0 of its distinct tokens; skips tokens with H ≥ Γ; water-fills its budget
    1 over the remaining gaps Γ − H (smallest gaps first, equal shares
    otherwise). Release tokens with H + Lap(λ) > ρ, λ = 1/ε,
    ρ = max_{t ≤ Δ0}[1/t + λ ln(1/(2(1 − (1 − δ)^{1/t})))], Γ = ρ + αλ.

    Parameters
    ----------
    epsilon, delta: the (ε, δ) of the step (document-level adjacency).
    alpha: cut-off margin in noise scales, Γ = ρ + α/ε.
    delta0: Δ0, the most distinct tokens a document contributes. It must not
        be chosen from the data; use a public bound on document length.
    """

    name = "dpsu-laplace"
    policy = "waterfill"
    accountant = "Gopi et al. 2020, DPSU policy Laplace (ρ_Lap with L1 sensitivity 1)"

    def __init__(self, epsilon: float = 3.0, delta: float = 1e-5, alpha: float = 3.0, delta0: int = 64):
        _check(epsilon, delta, alpha, delta0)
        self.epsilon, self.delta, self.alpha, self.delta0 = float(epsilon), float(delta), float(alpha), int(delta0)
        self.noise_scale = 1.0 / self.epsilon
        self.rho = laplace_policy_threshold(self.epsilon, self.delta, self.delta0)
        self.gamma = self.rho + self.alpha * self.noise_scale

    def _histogram(self, indptr, indices, order, n_words):
        return _waterfill_histogram(indptr, indices, order, self.gamma, n_words, self.budget)


class PolicyGaussianDPSU(_DPSU):
    """Gopi et al. 2020 DPSU with the Gaussian update policy.

    As policy Laplace, but each document takes an L2 step
    H += min(1, ‖g‖₂) g/‖g‖₂ with g = Γ − H on its tokens below Γ; noise
    N(0, σ²) with σ the analytic Gaussian mechanism's at (ε, δ/2) and L2
    sensitivity 1 (Balle & Wang 2018); ρ = max_{t ≤ Δ0}[1/√t + σΦ⁻¹((1 − δ/2)^{1/t})];
    Γ = ρ + ασ. Parameters as for :class:`PolicyLaplaceDPSU`.
    """

    name = "dpsu-gaussian"
    policy = "l2"
    accountant = ("Gopi et al. 2020, DPSU policy Gaussian (ρ_Gauss at δ/2) + analytic Gaussian "
                  "mechanism at (ε, δ/2), L2 sensitivity 1 (Balle & Wang 2018)")

    def __init__(self, epsilon: float = 3.0, delta: float = 1e-5, alpha: float = 3.0, delta0: int = 64):
        _check(epsilon, delta, alpha, delta0)
        self.epsilon, self.delta, self.alpha, self.delta0 = float(epsilon), float(delta), float(alpha), int(delta0)
        self.noise_scale = analytic_gaussian_sigma(self.epsilon, self.delta / 2.0)
        self.rho = gaussian_policy_threshold(self.noise_scale, self.delta, self.delta0)
        self.gamma = self.rho + self.alpha * self.noise_scale

    def _noise(self, rng, n):
        return rng.normal(0.0, self.noise_scale, n)

    def _histogram(self, indptr, indices, order, n_words):
        return _l2_histogram(indptr, indices, order, self.gamma, n_words, self.budget)


class GreedyWeightedDPSU(_DPSU):
    """Carvalho, Wang & Gondara 2022 GW (greedy updates, without sampling), corrected.

    Documents in random order; each keeps at most Δ0 distinct tokens, its most
    frequent ones (own counts, ties at random); visits them in descending own
    count and greedily fills each gap Γ − H up to Γ until its budget 1 is spent.
    EVERY contributed token is a candidate (weight 0 or not) and gets Lap(1/ε)
    noise; release when above ρ = (1/ε) ln((e^ε + Δ0 − 1)/(2δ)); Γ = ρ + α/ε.

    Why this is (ε, δ)-DP (derived for this project, not taken from a paper):
    docs/algorithms.md#dp-set-union-defect.

    Parameters
    ----------
    epsilon, delta: the (ε, δ) of the step (document-level adjacency); the
        paper uses δ = 1e-5.
    alpha: Γ = ρ + α/ε (the paper: α = 3).
    delta0: Δ0, the most distinct tokens a document contributes (a public bound).
    """

    name = "dpsu-gw"
    policy = "greedy"
    accountant = ("derived (docs/algorithms.md#dp-set-union-defect): L1-contraction of fixed-order greedy fill "
                  "(Gopi et al. 2020 framework, Carvalho et al. 2022 policy) + union bound over ≤ Δ0 "
                  "new candidates, ρ = (1/ε) ln((e^ε + Δ0 − 1)/(2δ))")

    def __init__(self, epsilon: float = 3.0, delta: float = 1e-5, alpha: float = 3.0, delta0: int = 64):
        _check(epsilon, delta, alpha, delta0)
        self.epsilon, self.delta, self.alpha, self.delta0 = float(epsilon), float(delta), float(alpha), int(delta0)
        self.noise_scale = 1.0 / self.epsilon
        self.rho = gw_corrected_threshold(self.epsilon, self.delta, self.delta0)
        self.gamma = self.rho + self.alpha * self.noise_scale

    def _by_count(self) -> bool:
        return True

    def _histogram(self, indptr, indices, order, n_words):
        return _greedy_histogram(indptr, indices, order, self.gamma, n_words, self.budget)


class GreedyWeightedPublicCode(_DPSU):
    """GW as implemented in the public code (Carvalho et al.; used by the paper). FLAWED.

    No Δ0 cap; documents (in random order here) visit their tokens below Γ in
    descending own count and greedily fill up to Γ until the budget 1 is spent.
    The histogram is a ``defaultdict``: the look-up ``hist[w] < Γ`` made for
    every token of every document inserts it with weight 0, and every key gets
    Lap(1/ε) noise and is released above ρ = 1 + (1/ε) ln(1/(2δ)); Γ = ρ + α/ε.

    The threshold only covers one new token at weight 1. A document whose m
    distinct tokens nobody else has puts its budget on one of them; the other
    m − 1 are candidates at weight 0, each released with probability
    ½e^{−ερ} = δe^{−ε}: the effective δ is about δ(1 + (m − 1)e^{−ε}), unbounded
    in m. The guarantee therefore records the paper's claim, not a theorem.

    Parameters
    ----------
    epsilon, delta: the claimed (ε, δ) (paper: δ = 1e-5).
    alpha: Γ = ρ + α/ε (paper: α = 3).
    """

    name = "dpsu-gw-public-code"
    policy = "greedy"
    basis = Basis.PAPER_CLAIM
    accountant = "Carvalho et al. 2022 claim (public code); not valid, see parameters"

    def __init__(self, epsilon: float = 3.0, delta: float = 1e-5, alpha: float = 3.0):
        _check(epsilon, delta, alpha)
        self.epsilon, self.delta, self.alpha, self.delta0 = float(epsilon), float(delta), float(alpha), None
        self.noise_scale = 1.0 / self.epsilon
        self.rho = gw_public_threshold(self.epsilon, self.delta)
        self.gamma = self.rho + self.alpha * self.noise_scale

    def _by_count(self) -> bool:
        return True

    def _histogram(self, indptr, indices, order, n_words):
        return _greedy_histogram(indptr, indices, order, self.gamma, n_words, self.budget)

    def effective_delta(self, m: int) -> float:
        """δ actually incurred for a document with m distinct tokens nobody else has:
        1 − (1 − δ)(1 − δe^{−ε})^{m−1} ≈ δ(1 + (m − 1)e^{−ε})."""
        p0 = 0.5 * math.exp(-self.epsilon * self.rho)  # = δ e^{−ε}
        return 1.0 - (1.0 - self.delta) * (1.0 - p0) ** (m - 1)

    def _parameters(self) -> dict:
        out = super()._parameters()
        out.update({
            "flawed": True,
            "defect": ("defaultdict look-up makes every token seen a candidate; a document's unreached "
                       "tokens (weight 0) are each released with probability δe^{−ε}, and there is no Δ0 cap"),
            "effective_delta": "≈ δ(1 + (m − 1)e^{−ε}) for a document with m distinct unshared tokens; unbounded in m",
            "effective_delta_m300": self.effective_delta(300),
        })
        return out


DPSU_STEPS = {cls.name: cls for cls in (PolicyLaplaceDPSU, PolicyGaussianDPSU,
                                        GreedyWeightedDPSU, GreedyWeightedPublicCode)}
