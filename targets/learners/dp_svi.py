"""Park et al. 2016 differentially private stochastic variational inference for LDA.

Park et al. 2016a (moments accountant) and Park et al. 2016b (zCDP);
see docs/algorithms.md#dp-svi.

One step t = 1, ..., J, given the variational topic parameters λ (k × V):

1. **Poisson sampling.** Each training document enters the minibatch B_t
   independently with probability q (``sampling_rate``), as the accountants
   assume (the expected batch size is S = qD).
2. **Token cap.** A document with more than N (``max_doc_tokens``) tokens is
   replaced by N of its tokens drawn uniformly without replacement, afresh at
   every visit.
3. **E-step** (scikit-learn's variational E-step, ``topicaudit.targets.learners.vb_lda._e_step``,
   reused unchanged, one document at a time): from E[log β] under λ, the
   document's γ_d and the responsibilities φ_dvk; its expected sufficient
   statistics are x_d[k, v] = c_dv φ_dvk (c_dv its capped count of word v).
4. **Optional per-document clipping** (``clip_norm`` C): x_d ← x_d ·
   min(1, C / ‖x_d‖_F).
5. **Gaussian mechanism.** s̃ = max(Σ_{d ∈ B_t} x_d + Y, 0) with Y_kv ~
   N(0, (zΔ)²) i.i.d. — noise on every coordinate of the k × V *sum*, then
   negatives clamped to 0 (post-processing).
6. **Stochastic M-step.** λ ← (1 − ρ_t) λ + ρ_t (η + s̃ / q), ρ_t = (τ0 + t)^(−κ);
   s̃/q is (D/S)·s̃ with S = qD the expected batch size, so D itself is never
   used (the corpus size is not released).

Φ is λ normalised by row. λ starts from Gamma(100, 1/100) draws (Hoffman et
al.'s and scikit-learn's initialisation), which do not depend on the data.

Why the sensitivity of the minibatch sum is Δ = min(C, N), and why per-document clipping replaces the
first paper's aggregate clipping: docs/algorithms.md#dp-svi.

Non-private counterpart: ``epsilon=inf`` or ``noise_multiplier=0`` runs the
same procedure (sampling, cap, clipping, M-step) with no noise, and claims
nothing.

Longer than 400 lines because it is one learner: its compiled kernels, the token cap and the noisy
M-step are read together.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

import topicaudit.targets.privacy as privacy  # its accountants (dp-accounting) load when a learner is built
from topicaudit.targets.base import NO_GUARANTEE, Adjacency, Basis, Guarantee
from topicaudit.targets.mechanisms import GaussianNoise, Recorder
from topicaudit.targets.counts import check_counts
from topicaudit.targets.params import MAX_INTEGER, MAX_ITERATIONS, MAX_TOPICS, non_negative, positive
from topicaudit.targets.learners.vb_lda import (
    _EPS,
    _INIT_GAMMA,
    _INIT_VAR,
    _dirichlet_expectation_2d,
    _e_step,
)

__all__ = ["DPStochasticVariationalLDA", "cap_tokens", "minibatch_statistics"]


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _cap_counts(indptr, data, cap, uniforms):
    """Counts after keeping ``cap`` uniformly chosen tokens of every longer document.

    Selection sampling (Knuth's Algorithm S) over each document's tokens in
    order, one uniform per token of the documents that are capped (in row
    order); ``uniforms`` must hold exactly that many.
    """
    out = data.copy()
    pos = 0
    for d in range(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        length = 0
        for j in range(start, stop):
            length += int(data[j])
        if length <= cap:
            continue
        if stop - start == 1:  # one word: it keeps cap tokens whatever the uniforms say
            out[start] = cap
            pos += length
            continue
        need = cap
        left = length
        for j in range(start, stop):
            kept = 0
            for _ in range(int(data[j])):
                if uniforms[pos] * left < need:
                    kept += 1
                    need -= 1
                left -= 1
                pos += 1
            out[j] = kept
    return out


@njit(cache=True, nogil=True)
def _minibatch_sstats(indptr, indices, data, exp_wt, doc_topic, exp_doc_topic, doc_topic_prior,
                      max_doc_update_iter, mean_change_tol, clip_norm, sstats_t, norms):
    """Σ_d clip(x_d), transposed (V × k), with x_d from vb_lda's E-step one document at a time.

    exp_wt: (V, k) exp(E[log β])ᵀ. doc_topic, exp_doc_topic: (n, k) initial γ
    and exp(E[log θ]). sstats_t: (V, k) zeros, receives the clipped sum.
    norms: (n,) receives each document's ‖x_d‖_F before clipping.
    """
    k = exp_wt.shape[1]
    local_indptr = np.zeros(2, dtype=np.int64)
    passes = np.zeros(1, dtype=np.int32)
    for d in range(indptr.shape[0] - 1):
        start, stop = indptr[d], indptr[d + 1]
        n = stop - start
        if n == 0:
            norms[d] = 0.0
            continue
        local_indptr[1] = n
        local_indices = np.arange(n)
        local_wt = np.empty((n, k), dtype=np.float64)
        for j in range(n):
            for t in range(k):
                local_wt[j, t] = exp_wt[indices[start + j], t]
        local_sstats = np.zeros((n, k), dtype=np.float64)
        _e_step(local_indptr, local_indices, data[start:stop], local_wt, doc_topic[d:d + 1],
                exp_doc_topic[d:d + 1], doc_topic_prior, max_doc_update_iter, mean_change_tol,
                _EPS, local_sstats, passes)
        # x_d[t, w] = sstats[w, t] * exp(E[log β_tw]) = c_dw φ_dwt (the M-step's scaling)
        sq = 0.0
        for j in range(n):
            for t in range(k):
                v = local_sstats[j, t] * local_wt[j, t]
                local_sstats[j, t] = v
                sq += v * v
        norm = math.sqrt(sq)
        norms[d] = norm
        scale = 1.0
        if norm > clip_norm:
            scale = clip_norm / norm
        for j in range(n):
            w = indices[start + j]
            for t in range(k):
                sstats_t[w, t] += scale * local_sstats[j, t]


# --------------------------------------------------------------------------
# one step's pieces (public so tests can check them)
# --------------------------------------------------------------------------

def cap_tokens(X: sp.csr_matrix, cap: int, rng: np.random.Generator) -> sp.csr_matrix:
    """X with every document of more than ``cap`` tokens cut to ``cap`` uniformly drawn tokens."""
    lengths = np.asarray(X.sum(axis=1)).ravel()
    n_uniforms = int(lengths[lengths > cap].sum())
    if n_uniforms == 0:
        return X
    data = _cap_counts(X.indptr.astype(np.int64), X.data, int(cap), _cap_uniforms(X, lengths, cap, rng))
    return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)


def _cap_uniforms(X: sp.csr_matrix, lengths: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """One uniform per token of the capped documents, in row order, as ``rng.random`` would draw them.

    A capped one-word document (a canary of 4× the cap) ignores its uniforms,
    so the generator is advanced past them instead of filling them: the
    stream, and every later draw, stay exactly what drawing them gives.
    """
    capped = np.flatnonzero(lengths > cap)
    sizes = lengths[capped].astype(np.int64)
    needed = np.diff(X.indptr)[capped] > 1
    advance = getattr(rng.bit_generator, "advance", None)
    if advance is None or needed.all():
        return rng.random(int(sizes.sum()))
    uniforms = np.zeros(int(sizes.sum()))
    offsets = np.r_[0, np.cumsum(sizes)]
    position = 0  # uniforms the generator has passed
    for i in np.flatnonzero(needed):
        if offsets[i] > position:
            advance(int(offsets[i] - position))
        uniforms[offsets[i]:offsets[i + 1]] = rng.random(int(sizes[i]))
        position = int(offsets[i + 1])
    if uniforms.size > position:
        advance(int(uniforms.size - position))
    return uniforms


def minibatch_statistics(X: sp.csr_matrix, lam: np.ndarray, rng: np.random.Generator, *,
                         doc_topic_prior: float, clip_norm: float = math.inf,
                         max_doc_update_iter: int = 100, mean_change_tol: float = 1e-3,
                         elog_beta: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The (clipped) sum of the expected sufficient statistics of X's rows under λ.

    Returns (s, norms): s (k × V) = Σ_d clip(x_d), norms (n_docs,) = ‖x_d‖_F
    before clipping. Draws the documents' initial γ from rng (Gamma(100, 1/100),
    as scikit-learn). elog_beta: E[log β] of λ when the caller has it already.
    """
    k, n_words = lam.shape
    exp_wt = np.ascontiguousarray(np.exp(_dirichlet_expectation_2d(lam) if elog_beta is None else elog_beta).T)
    doc_topic = rng.gamma(_INIT_GAMMA, _INIT_VAR, (X.shape[0], k))
    exp_doc_topic = np.exp(_dirichlet_expectation_2d(doc_topic)) if X.shape[0] else doc_topic
    sstats_t = np.zeros((n_words, k))
    norms = np.zeros(X.shape[0])
    _minibatch_sstats(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data, exp_wt,
                      doc_topic, exp_doc_topic, float(doc_topic_prior), int(max_doc_update_iter),
                      float(mean_change_tol), float(clip_norm), sstats_t, norms)
    return np.ascontiguousarray(sstats_t.T), norms


# --------------------------------------------------------------------------
# the learner
# --------------------------------------------------------------------------

class DPStochasticVariationalLDA:
    """Park et al.'s DP stochastic variational LDA (module docstring has the mechanism).

    Parameters
    ----------
    k : number of topics.
    epsilon : target ε; the noise multiplier is calibrated by bisection on
        the accountant. None means 1.0 unless ``noise_multiplier`` is given;
        ``inf`` means no noise (the non-private counterpart).
    delta : δ of the guarantee.
    sampling_rate : q, each document's inclusion probability per step.
    n_iter : J, the number of steps (J·q passes over the corpus on average).
    max_doc_tokens : N, the per-document token cap.
    clip_norm : C, per-document Frobenius clipping of the expected sufficient
        statistics; None means no clipping (sensitivity N).
    noise_multiplier : z = noise std / sensitivity, instead of ``epsilon``;
        0 means no noise. The claimed ε is then the accountant's.
    accountant : "rdp" (default), "pld", "zcdp", "advanced", "linear" or
        "zcdp-park" (see ``topicaudit.targets.privacy.dp_svi_accounting``; the last is not a theorem).
    tau0, kappa : step sizes ρ_t = (τ0 + t)^(−κ), κ ∈ (0.5, 1]; defaults are
        scikit-learn's online LDA (learning_offset 10, learning_decay 0.7).
    eta, alpha : topic-word and document-topic Dirichlet priors; None = 1/k.
    max_doc_update_iter, mean_change_tol : the E-step's stopping rule
        (scikit-learn's defaults).

    After ``fit``: ``components_`` (λ, k × V) and ``batch_sizes_`` (J,).
    """

    def __init__(self, k: int, epsilon: float | None = None, delta: float = 1e-5,
                 sampling_rate: float = 0.05, n_iter: int = 200, max_doc_tokens: int = 200,
                 clip_norm: float | None = None, noise_multiplier: float | None = None,
                 accountant: str = "rdp", tau0: float = 10.0, kappa: float = 0.7,
                 eta: float | None = None, alpha: float | None = None,
                 max_doc_update_iter: int = 100, mean_change_tol: float = 1e-3):
        self.k = k
        self.epsilon = epsilon
        self.delta = delta
        self.sampling_rate = sampling_rate
        self.n_iter = n_iter
        self.max_doc_tokens = max_doc_tokens
        self.clip_norm = clip_norm
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.tau0 = tau0
        self.kappa = kappa
        self.eta = eta
        self.alpha = alpha
        self.max_doc_update_iter = max_doc_update_iter
        self.mean_change_tol = mean_change_tol
        self._validate()
        # Data-independent, so done once here and shipped with the object.
        if noise_multiplier is None:
            self.noise_multiplier_ = privacy.dp_svi_accounting.calibrate_noise_multiplier(
                self._requested_epsilon(), delta, sampling_rate, n_iter, accountant)
        else:
            self.noise_multiplier_ = float(noise_multiplier)
        self.spent_ = (None if self.noise_multiplier_ == 0 else
                       privacy.dp_svi_accounting.compute_epsilon(self.noise_multiplier_, sampling_rate, n_iter,
                                                                 delta, accountant))

    def _validate(self) -> None:
        def positive_int(name, maximum=MAX_INTEGER):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer (got {value!r})")
            if value > maximum:
                raise ValueError(f"{name} must be an integer ≤ {maximum:,} (got {value!r}); it is a count, and no "
                                 "fit needs more")

        for name, maximum in (("k", MAX_TOPICS), ("n_iter", MAX_ITERATIONS), ("max_doc_tokens", MAX_INTEGER),
                              ("max_doc_update_iter", MAX_ITERATIONS)):
            positive_int(name, maximum)
        if self.epsilon is not None and self.noise_multiplier is not None:
            raise ValueError("give epsilon or noise_multiplier, not both")
        positive("epsilon", self.epsilon, optional=True, infinite=True)  # not True (ε = 1) or "2" (a TypeError)
        if self.noise_multiplier is not None:
            non_negative("noise_multiplier", self.noise_multiplier)  # finite and ≥ 0, not True (z = 1) or "1"
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1) (got {self.delta!r})")
        if not 0 < self.sampling_rate <= 1:
            raise ValueError(f"sampling_rate must be in (0, 1] (got {self.sampling_rate!r})")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0 or None (got {self.clip_norm!r})")
        accountants = privacy.dp_svi_accounting.ACCOUNTANTS
        if self.accountant not in accountants:
            raise ValueError(f"accountant must be one of {', '.join(accountants)} (got {self.accountant!r})")
        non_negative("tau0", self.tau0)
        if not 0.5 < self.kappa <= 1:
            raise ValueError(f"kappa must be in (0.5, 1] (got {self.kappa!r})")
        for name in ("eta", "alpha"):
            positive(name, getattr(self, name), optional=True)
        positive("mean_change_tol", self.mean_change_tol)

    def _requested_epsilon(self) -> float | None:
        if self.noise_multiplier is not None:
            return None
        return 1.0 if self.epsilon is None else float(self.epsilon)

    # -- the mechanism's constants ------------------------------------------------
    @property
    def sensitivity(self) -> float:
        """Δ: the L2 sensitivity of the minibatch sum, min(C, N) (docs/algorithms.md#dp-svi)."""
        n = float(self.max_doc_tokens)
        return n if self.clip_norm is None else min(float(self.clip_norm), n)

    @property
    def noise_std(self) -> float:
        """σ = zΔ, the std of the Gaussian noise on every coordinate of the sum."""
        return self.noise_multiplier_ * self.sensitivity

    def _noise(self, rng: np.random.Generator, shape) -> np.ndarray:
        return rng.normal(0.0, self.noise_std, shape) if self.noise_std > 0 else np.zeros(shape)

    # -- fitting --------------------------------------------------------------------
    def fit_lambda(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """λ (k × V, float64) after J steps; also stored as ``components_``.

        record: receives every step's noisy minibatch sum before the clamp
        (``Recorder.gaussian``), with the E[log β] the step's E-step used (the
        topic where a one-word document of a column puts its tokens) and the
        sum before its noise (what a canary really added, for the power
        estimate); the step goes on with what it returns.
        """
        X = check_counts(X, nonempty=True)  # whole counts: the token cap draws tokens
        n_docs, n_words = X.shape
        k = self.k
        eta = 1.0 / k if self.eta is None else float(self.eta)
        alpha = 1.0 / k if self.alpha is None else float(self.alpha)
        clip = math.inf if self.clip_norm is None else float(self.clip_norm)
        q = float(self.sampling_rate)
        rng = np.random.default_rng(seed)
        lam = rng.gamma(_INIT_GAMMA, _INIT_VAR, (k, n_words))
        batch_sizes = np.zeros(self.n_iter, dtype=np.int64)
        record = Recorder() if record is None else record
        m = self.mechanism()
        for t in range(1, self.n_iter + 1):
            elog_beta = _dirichlet_expectation_2d(lam)   # what this step's E-step uses
            batch = np.flatnonzero(rng.random(n_docs) < q)
            batch_sizes[t - 1] = batch.size
            Xb = cap_tokens(X[batch], self.max_doc_tokens, rng)
            s, _ = minibatch_statistics(Xb, lam, rng, doc_topic_prior=alpha, clip_norm=clip,
                                        max_doc_update_iter=self.max_doc_update_iter,
                                        mean_change_tol=self.mean_change_tol, elog_beta=elog_beta)
            clean = s.copy() if m is not None and record.columns.size else None  # for the power estimate only
            s += self._noise(rng, s.shape)
            if m is not None:
                s = record.gaussian(s, noise_std=m.noise_std, document_tokens=m.document_tokens,
                                    sampling_rate=m.sampling_rate, clip_norm=m.clip_norm, steps=m.steps,
                                    topic_affinity=elog_beta, clean=clean)
            np.maximum(s, 0.0, out=s)
            rho = (self.tau0 + t) ** (-self.kappa)
            lam *= 1.0 - rho
            lam += rho * (eta + s / q)
        self.components_ = lam
        self.batch_sizes_ = batch_sizes
        return lam

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × n_words, float32, rows on the simplex) learned from X's rows; ``record`` receives every
        step's noisy sums."""
        lam = self.fit_lambda(X, seed, record)
        return (lam / lam.sum(axis=1, keepdims=True)).astype(np.float32)

    def mechanism(self) -> GaussianNoise | None:
        """The constants the claim's accountant assumed: what a step's likelihood ratio needs (None for the
        non-private counterpart, which adds no noise and releases nothing private)."""
        if self.noise_std <= 0:
            return None
        return GaussianNoise(self.noise_std, int(self.max_doc_tokens), float(self.sampling_rate),
                             None if self.clip_norm is None else float(self.clip_norm), int(self.n_iter))

    def guarantee(self) -> Guarantee:
        if self.spent_ is None:
            return NO_GUARANTEE
        spent = self.spent_
        return Guarantee(
            epsilon=spent.epsilon, delta=spent.delta, adjacency=Adjacency.DOCUMENT, basis=spent.basis,
            accountant=spent.accountant,
            # The mechanism as the theorem accountants read it; none for a paper's route to ε, which a
            # pipeline's accountant would otherwise silently replace by the true ε of the mechanism.
            event=(privacy.dp_svi_accounting.subsampled_gaussian_event(self.noise_multiplier_, self.sampling_rate,
                                                                       self.n_iter)
                   if spent.basis is Basis.THEOREM else None),
            parameters={
                "mechanism": "Poisson-subsampled Gaussian on the minibatch sum of expected "
                             "sufficient statistics (k × V), negatives clamped to 0",
                "neighboring_relation": "add or remove one document",
                "requested_epsilon": self._requested_epsilon(),
                "noise_multiplier": self.noise_multiplier_,
                "sensitivity": self.sensitivity,
                "noise_std": self.noise_std,
                "sampling_rate": self.sampling_rate,
                "steps": self.n_iter,
                "max_doc_tokens": self.max_doc_tokens,
                "clip_norm": self.clip_norm,
                "accountant_key": self.accountant,
                **{k: v for k, v in spent.details.items() if isinstance(v, (int, float, bool))},
            },
        )
