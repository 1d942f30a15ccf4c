"""Poisson factorisation by Gibbs sampling: non-private, locally private, naive.

docs/algorithms.md#locally-private-poisson-factorisation; Schein, Wu, Schofield, Zhou & Wallach (ICML 2019),
"Locally private Bayesian inference for count models".

Model (LDA as Poisson factorisation)
------------------------------------
y_dv ~ Pois(μ_dv), μ_dv = Σ_k θ_dk φ_kv, θ_dk, φ_kv ~ Gamma(a0, b0) (shape,
rate; a0 = 0.1, b0 = 1 as in the paper). One Gibbs sweep:

1. allocate each count over topics, (y_dv1..y_dvK) ~ Mult(y_dv, θ_d·φ_·v/μ_dv);
2. θ_dk ~ Gamma(a0 + Σ_v y_dvk, b0 + Σ_v φ_kv);
3. φ_kv ~ Gamma(a0 + Σ_d y_dvk, b0 + Σ_d θ_dk) (with the new θ).

The released topic-word matrix is φ normalised by row (float32), from the
final sweep or, with ``n_avg = m``, averaged over the last m sweeps.

Local privacy: the two-sided geometric mechanism
-------------------------------------------------
Each user privatises every count of their own document over the public
vocabulary before anything leaves them: ỹ_dv = y_dv + τ_dv,
τ ~ 2Geo(α), P(τ) = (1−α)/(1+α) · α^|τ| (Ghosh et al. 2012), zero counts
included, so the privatised matrix is dense (O(D·V) work per sweep: audit on
modest vocabularies). ``privatize_counts`` is that mechanism; ``fit`` runs it
with the fit's own seed, so a fit is the whole pipeline *user randomiser →
server inference*, and each shadow model of an audit draws fresh noise, as the
adversary simulating the mechanism would.

Guarantee (Schein et al. Thm 1): for documents y, y′ with ‖y − y′‖₁ ≤ N the
output distributions differ by at most a factor α^−N: (N, N·ln(1/α))-limited-
precision local privacy for every N ≥ 1. The canonical form is N = 1: one
token added to or removed from one user's document costs ln(1/α), which is the
``local-word`` adjacency; a document of L tokens against the empty document
costs L·ln(1/α). See ``LocallyPrivatePoissonFactorization.guarantee``.

Locally private sampler (Schein et al. §4, eqs 13–16)
-----------------------------------------------------
Per cell, with auxiliary rates λ⁺, λ⁻ (2Geo(α) = Skellam(λ⁺, λ⁻) with
λ± ~ Exp(mean α/(1−α)), Thm 2):

    μ = Σ_k θ_dk φ_kv
    m ~ Bes(|ỹ|, 2√((μ + λ⁺) λ⁻))                    (topicaudit.targets.learners.bessel)
    ỹ ≤ 0: ỹ⁺ = m, g⁻ = m − ỹ;   ỹ > 0: g⁻ = m, ỹ⁺ = m + ỹ
    y ~ Binom(ỹ⁺, μ/(μ + λ⁺)),  g⁺ = ỹ⁺ − y            (binomial thinning)
    λ± ~ Gamma(1 + g±, rate (1−α)/α + 1)
    allocate y over topics, then steps 2–3.

(The paper prints α = −exp(ε/N) once; the mechanism needs α = exp(−ε/N) ∈ (0, 1).)
The noise parameter may differ by document (``alpha`` of length D), as in
the paper's heterogeneous-noise synthetic experiment; the learners use one α.

Naive baseline: the same privatised data truncated at zero, max(ỹ, 0),
treated as if it were not privatised (ordinary PF on it) — the "truncated
geometric mechanism" reading of the paper's reference method.

Randomness: every draw comes from ``numpy.random.Generator`` objects handed to
the compiled sweeps (numba supports PCG64 generators); ``fit(X, seed)`` spawns
one stream for the privatisation and one for the sampler, so for one seed
``lppf`` and ``lppf-naive`` see the same privatised data.

Longer than 400 lines because it is one model family: the Poisson factorisation sampler's compiled
sweeps, shared by the non-private and the locally private learners, and its two-sided geometric
mechanism.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

import topicaudit.targets.privacy as privacy  # its events (dp-accounting) load when a guarantee is asked for
from topicaudit.targets.base import NO_GUARANTEE, Adjacency, Basis, Guarantee
from topicaudit.targets.mechanisms import GeometricNoise, Recorder
from topicaudit.targets.learners.bessel import bessel_sample
from topicaudit.targets.counts import check_counts
from topicaudit.targets.params import averaged_sweeps, iteration_count, positive, topic_count

__all__ = [
    "LocallyPrivatePoissonFactorization",
    "NaiveLocallyPrivatePoissonFactorization",
    "PoissonFactorization",
    "lppf_samples",
    "pf_samples",
    "privatize_counts",
    "two_sided_geometric",
]

MAX_DENSE_CELLS = 50_000_000  # the locally private sampler keeps three D×V arrays (~1.2 GB at the limit)


# -- the mechanism --------------------------------------------------------------------
def two_sided_geometric(alpha, size, rng: np.random.Generator) -> np.ndarray:
    """Draws of τ ~ 2Geo(α), P(τ) = (1−α)/(1+α)·α^|τ|, as int64.

    τ = G₁ − G₂ with G ~ Geometric on {0, 1, ...}, P(G = g) = (1−α)α^g
    (Schein et al., appendix, eq. 11). ``alpha`` may be an array broadcastable
    to ``size`` (e.g. one α per document as a column).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if np.any(~(alpha > 0)) or np.any(~(alpha < 1)):
        raise ValueError("the geometric mechanism needs 0 < α < 1")
    p = np.broadcast_to(1.0 - alpha, size)
    return rng.geometric(p).astype(np.int64) - rng.geometric(p).astype(np.int64)


def privatize_counts(Y, alpha, rng: np.random.Generator) -> np.ndarray:
    """The geometric mechanism applied to every cell of Y (documents × words).

    Y: dense or sparse non-negative integer counts. alpha: a scalar or one
    value per document. Returns the dense int64 privatised matrix ỹ = y + τ.
    """
    dense = _as_counts(Y, "Y").toarray().astype(np.int64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 1:
        alpha = alpha[:, None]
    return dense + two_sided_geometric(alpha, dense.shape, rng)


def _as_counts(X, name: str = "X") -> sp.csr_matrix:
    """The counts as int64 CSR without stored zeros (a copy: the caller's matrix is left alone)."""
    X = check_counts(X, name).astype(np.int64)
    X.eliminate_zeros()
    return X


# -- compiled sweeps ------------------------------------------------------------------
@njit(cache=True)
def _allocate(rng, count, d, v, theta, phi, mu, ydk, ykv):
    """Split ``count`` over topics ∝ θ_dk φ_kv (sum μ) into ydk[d] and ykv[:, v]."""
    K = theta.shape[1]
    if count == 1:
        r = rng.random() * mu
        acc = 0.0
        t = K - 1
        for j in range(K):
            acc += theta[d, j] * phi[j, v]
            if r < acc:
                t = j
                break
        ydk[d, t] += 1
        ykv[t, v] += 1
        return
    left = count
    rest = mu
    for j in range(K):
        if left == 0:
            break
        w = theta[d, j] * phi[j, v]
        if j == K - 1 or w >= rest:
            c = left
        else:
            c = rng.binomial(left, w / rest)
        rest -= w
        if c > 0:
            ydk[d, j] += c
            ykv[j, v] += c
            left -= c


@njit(cache=True)
def _pf_allocate(rng, indptr, indices, data, theta, phi, ydk, ykv):
    """Step 1 of the non-private sweep over the non-zero counts (CSR)."""
    ydk[:] = 0
    ykv[:] = 0
    K = theta.shape[1]
    for d in range(theta.shape[0]):
        for j in range(indptr[d], indptr[d + 1]):
            v = indices[j]
            mu = 0.0
            for t in range(K):
                mu += theta[d, t] * phi[t, v]
            if mu > 0.0:
                _allocate(rng, data[j], d, v, theta, phi, mu, ydk, ykv)


@njit(cache=True)
def _lppf_augment_allocate(rng, y_noisy, rate, theta, phi, lam_p, lam_m, ydk, ykv):
    """Schein et al. eqs 13–16 on every cell, then step 1 on the sampled y.

    rate[d] = (1 − α_d)/α_d + 1 is the posterior rate of λ±. Returns Σ y.
    """
    ydk[:] = 0
    ykv[:] = 0
    D, V = y_noisy.shape
    K = theta.shape[1]
    total = 0
    for d in range(D):
        scale = 1.0 / rate[d]
        for v in range(V):
            mu = 0.0
            for t in range(K):
                mu += theta[d, t] * phi[t, v]
            yt = y_noisy[d, v]
            lp = lam_p[d, v]
            lm = lam_m[d, v]
            m = bessel_sample(rng, float(abs(yt)), 2.0 * math.sqrt((mu + lp) * lm))
            if yt <= 0:
                y_plus = m
                g_minus = m - yt
            else:
                g_minus = m
                y_plus = m + yt
            y = 0
            if y_plus > 0 and mu > 0.0:
                y = rng.binomial(y_plus, mu / (mu + lp))
            g_plus = y_plus - y
            lam_p[d, v] = rng.gamma(1.0 + g_plus, scale)
            lam_m[d, v] = rng.gamma(1.0 + g_minus, scale)
            if y > 0:
                total += y
                _allocate(rng, y, d, v, theta, phi, mu, ydk, ykv)
    return total


@njit(cache=True)
def _update_factors(rng, theta, phi, ydk, ykv, a0, b0):
    """Steps 2–3: θ | φ, allocations; then φ | θ, allocations (shape-rate gammas)."""
    D, K = theta.shape
    V = phi.shape[1]
    for k in range(K):
        s = b0
        for v in range(V):
            s += phi[k, v]
        scale = 1.0 / s
        for d in range(D):
            theta[d, k] = rng.gamma(a0 + ydk[d, k], scale)
    for k in range(K):
        s = b0
        for d in range(D):
            s += theta[d, k]
        scale = 1.0 / s
        for v in range(V):
            phi[k, v] = rng.gamma(a0 + ykv[k, v], scale)


# -- chains ---------------------------------------------------------------------------
def _init_factors(rng: np.random.Generator, n_docs: int, n_words: int, k: int):
    # Gamma(1, 1) rather than the sparse prior Gamma(0.1, 1), whose draws can be
    # ~1e-30 and start the chain with dead topics; the first sweep rescales both.
    theta = rng.gamma(1.0, 1.0, (n_docs, k))
    phi = rng.gamma(1.0, 1.0, (k, n_words))
    return theta, phi


def pf_samples(X, k: int, rng: np.random.Generator, n_iter: int, a0: float = 0.1,
               b0: float = 1.0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Non-private PF Gibbs on counts X; yields (θ, φ) after each sweep.

    The arrays are the sampler's own state, updated in place: copy to keep.
    """
    X = _as_counts(X)
    n_docs, n_words = X.shape
    theta, phi = _init_factors(rng, n_docs, n_words, k)
    ydk = np.zeros((n_docs, k), dtype=np.int64)
    ykv = np.zeros((k, n_words), dtype=np.int64)
    indptr = X.indptr.astype(np.int64)
    indices = X.indices.astype(np.int64)
    data = X.data.astype(np.int64)
    for _ in range(n_iter):
        _pf_allocate(rng, indptr, indices, data, theta, phi, ydk, ykv)
        _update_factors(rng, theta, phi, ydk, ykv, a0, b0)
        yield theta, phi


def lppf_samples(y_noisy: np.ndarray, alpha, k: int, rng: np.random.Generator, n_iter: int,
                 a0: float = 0.1, b0: float = 1.0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Schein et al.'s locally private PF Gibbs on privatised counts; yields (θ, φ) per sweep.

    y_noisy: dense integer (documents × words), may be negative. alpha: the
    mechanism's α, a scalar or one per document (the mechanism is public, so
    the sampler knows it). The arrays yielded are updated in place.
    """
    y_noisy = np.ascontiguousarray(y_noisy, dtype=np.int64)
    n_docs, n_words = y_noisy.shape
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_docs,)).copy()
    if np.any(~(alpha > 0)) or np.any(~(alpha < 1)):
        raise ValueError("the geometric mechanism needs 0 < α < 1")
    theta, phi = _init_factors(rng, n_docs, n_words, k)
    prior_scale = (alpha / (1.0 - alpha))[:, None]  # λ± ~ Exp(mean α/(1−α))
    lam_p = rng.exponential(1.0, (n_docs, n_words)) * prior_scale
    lam_m = rng.exponential(1.0, (n_docs, n_words)) * prior_scale
    rate = (1.0 - alpha) / alpha + 1.0
    ydk = np.zeros((n_docs, k), dtype=np.int64)
    ykv = np.zeros((k, n_words), dtype=np.int64)
    for _ in range(n_iter):
        _lppf_augment_allocate(rng, y_noisy, rate, theta, phi, lam_p, lam_m, ydk, ykv)
        _update_factors(rng, theta, phi, ydk, ykv, a0, b0)
        yield theta, phi


def _row_normalised(phi: np.ndarray) -> np.ndarray:
    sums = phi.sum(axis=1, keepdims=True)
    out = np.where(sums > 0, phi / np.where(sums > 0, sums, 1.0), 1.0 / phi.shape[1])
    return out


def _released_phi(samples: Iterator, n_iter: int, n_avg: int) -> np.ndarray:
    phi_sum: np.ndarray | None = None
    for sweep, (_, phi) in enumerate(samples):
        if sweep >= n_iter - n_avg:
            row = _row_normalised(phi)
            phi_sum = row if phi_sum is None else phi_sum + row
    assert phi_sum is not None  # n_avg ≥ 1 of the n_iter sweeps
    phi = (phi_sum / n_avg).astype(np.float32)
    return phi / phi.sum(axis=1, keepdims=True)


# -- learners -------------------------------------------------------------------------
def _check_common(k, a0, b0, n_iter, n_avg) -> None:
    topic_count("k", k)
    positive("a0", a0)
    positive("b0", b0)
    iteration_count("n_iter", n_iter)
    averaged_sweeps(n_avg, n_iter)


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(privatisation, sampler) generators spawned from the fit's seed."""
    privatise, sample = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(privatise), np.random.default_rng(sample)


class PoissonFactorization:
    """Non-private Poisson factorisation (gamma priors) by Gibbs sampling, compiled.

    The non-private counterpart of ``lppf``: the same model and sweep, on the
    counts themselves (sparse: work per sweep ∝ non-zero counts).

    Parameters
    ----------
    k : number of topics.
    a0, b0 : shape and rate of the gamma priors on θ and φ (0.1, 1: Schein et al.).
    n_iter : Gibbs sweeps (default 500).
    n_avg : the released Φ is the row-normalised φ averaged over the last
        n_avg sweeps (default 1: the final sample).
    """

    def __init__(self, k: int, a0: float = 0.1, b0: float = 1.0, n_iter: int = 500, n_avg: int = 1):
        _check_common(k, a0, b0, n_iter, n_avg)
        self.k = k
        self.a0 = a0
        self.b0 = b0
        self.n_iter = n_iter
        self.n_avg = n_avg

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows."""
        _, rng = _streams(seed)
        samples = pf_samples(X, self.k, rng, self.n_iter, self.a0, self.b0)
        return _released_phi(samples, self.n_iter, self.n_avg)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE


class LocallyPrivatePoissonFactorization:
    """Schein et al. (2019): geometric-mechanism local privacy + their Gibbs sampler.

    ``fit`` first plays every user: each document's counts over the vocabulary
    it is given (use the public-vocabulary step ``all``; a data-dependent
    vocabulary is outside the guarantee) get independent 2Geo(α) noise, then
    the server runs the locally private sampler on the privatised matrix.

    Parameters
    ----------
    k : number of topics.
    epsilon : privacy loss for documents at L1 distance ≤ ``precision``
        (Schein et al.'s ε with N = precision): α = exp(−epsilon/precision).
        Give exactly one of ``epsilon`` and ``alpha``.
    alpha : the geometric mechanism's parameter in (0, 1) directly.
    precision : N of (N, ε)-limited-precision local privacy (default 1: ε per
        token). Only used to turn ``epsilon`` into α and to report.
    a0, b0 : gamma prior shape and rate (0.1, 1).
    n_iter : Gibbs sweeps (default 500). n_avg : as ``PoissonFactorization``.
    max_cells : the largest documents × words matrix to privatise (default
        50,000,000; the sampler holds three such arrays, ~1.2 GB at the limit).
        A larger training set is refused with the fix (``[corpus] max_words``).
    """

    def __init__(self, k: int, epsilon: float | None = None, alpha: float | None = None,
                 precision: int = 1, a0: float = 0.1, b0: float = 1.0, n_iter: int = 500,
                 n_avg: int = 1, max_cells: int = MAX_DENSE_CELLS):
        _check_common(k, a0, b0, n_iter, n_avg)
        if (epsilon is None) == (alpha is None):
            raise ValueError("give exactly one of epsilon (with precision) and alpha")
        if not isinstance(precision, numbers.Integral) or isinstance(precision, bool) or precision < 1:
            raise ValueError(f"precision (N) must be an integer ≥ 1, got {precision!r}")
        if epsilon is not None and not (isinstance(epsilon, numbers.Real) and 0 < epsilon < math.inf):
            raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
        if alpha is not None and not (isinstance(alpha, numbers.Real) and 0 < alpha < 1):
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        if not isinstance(max_cells, numbers.Integral) or isinstance(max_cells, bool) or max_cells < 1:
            raise ValueError(f"max_cells must be a positive integer, got {max_cells!r}")
        # Annotated: the isinstance checks above narrow the arguments to types mypy cannot carry to attributes.
        self.k: int = k
        self.epsilon: float | None = epsilon
        self.alpha: float | None = alpha
        self.precision: int = precision
        self.max_cells: int = max_cells
        self.a0: float = a0
        self.b0: float = b0
        self.n_iter: int = n_iter
        self.n_avg: int = n_avg

    # Set only by the test-only bug variants (targets/bug_variants.py): users send their true counts while the
    # server still de-noises with α.
    randomiser_dropped: bool = False

    @property
    def mechanism_alpha(self) -> float:
        """The geometric mechanism's α."""
        if self.alpha is not None:
            return self.alpha
        assert self.epsilon is not None  # exactly one of them is given (the constructor checks)
        return math.exp(-self.epsilon / self.precision)

    def _privatize(self, X, rng: np.random.Generator) -> np.ndarray:
        X = _as_counts(X)
        if X.shape[0] * X.shape[1] > self.max_cells:
            raise ValueError(
                f"{X.shape[0]} documents × {X.shape[1]} words is too large for the dense locally "
                f"private sampler (max_cells = {self.max_cells:,}); restrict the vocabulary with "
                "[corpus] max_words, or raise [target.params] max_cells if the memory is there"
            )
        if self.randomiser_dropped:
            return X.toarray().astype(np.int64)
        return privatize_counts(X, self.mechanism_alpha, rng)

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Privatise X's rows locally, then Φ (k × n_words, float32) by Schein et al.'s sampler; ``record``
        receives the users' privatised counts, as the sampler sees them."""
        privatize_rng, rng = _streams(seed)
        y_noisy = self._privatize(X, privatize_rng)
        if record is not None:
            y_noisy = record.geometric(y_noisy, alpha=self.mechanism_alpha)
        return self._infer(y_noisy, rng)

    def mechanism(self) -> GeometricNoise:
        """The claimed two-sided geometric noise: P(x) ∝ α^|x| on every count."""
        return GeometricNoise(self.mechanism_alpha)

    def _infer(self, y_noisy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        samples = lppf_samples(y_noisy, self.mechanism_alpha, self.k, rng, self.n_iter, self.a0, self.b0)
        return _released_phi(samples, self.n_iter, self.n_avg)

    def guarantee(self) -> Guarantee:
        """Per-token local privacy ln(1/α) (adjacency ``local-word``); see the module docstring.

        The ``epsilon`` field carries the N = 1 form of Schein et al.'s
        Theorem 1: neighbouring inputs are one user's document and the same
        document with one token more or less (L1 distance 1). By the same
        theorem every (N, N·ln(1/α)) holds; ``parameters`` lists the
        configured N's ε and the per-document reading (a document of L tokens
        against the empty document: L·ln(1/α) — what a membership test on
        whole documents faces; no finite ε covers documents of unbounded
        length, so there is no document-level claim).
        """
        alpha = self.mechanism_alpha
        per_token = math.log(1.0 / alpha)
        return Guarantee(
            epsilon=per_token,
            delta=0.0,
            adjacency=Adjacency.LOCAL_WORD,
            basis=Basis.THEOREM,
            # Two-sided geometric noise = discrete Laplace, pmf ∝ e^{−a|x|} with a = ln(1/α), on one count.
            event=privacy.events.discrete_laplace_event(per_token, 1),
            accountant="geometric mechanism, Schein et al. 2019 Thm 1: (N, N·ln(1/α))-limited-precision "
                       "local privacy; N = 1 reported",
            parameters={
                "mechanism": "two-sided geometric noise on every count of each document (local)",
                "alpha": alpha,
                "epsilon_per_token": per_token,
                "limited_precision": {"N": self.precision, "epsilon": self.precision * per_token},
                "epsilon_per_document": "L·ln(1/α) for a document of L tokens against the empty document; "
                                        "‖y − y′‖₁·ln(1/α) between two documents y, y′",
                "vocabulary": "the guarantee covers the counts over a public vocabulary (step 'all')",
            },
        )


class NaiveLocallyPrivatePoissonFactorization(LocallyPrivatePoissonFactorization):
    """The naive reference method: the same local mechanism, then ordinary PF on max(ỹ, 0).

    Same parameters and the same guarantee as ``lppf`` (privatisation is
    identical, inference is post-processing); for one seed it sees the very
    same privatised data as ``lppf``.
    """

    def _infer(self, y_noisy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        samples = pf_samples(sp.csr_matrix(np.maximum(y_noisy, 0)), self.k, rng, self.n_iter, self.a0, self.b0)
        return _released_phi(samples, self.n_iter, self.n_avg)
