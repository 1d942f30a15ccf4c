"""DP variational EM for LDA: Gaussian noise on the expected word-topic counts of every iteration.

One iteration, given the topic parameters λ (k × V):

1. E-step: each document's expected word-topic counts x_d[k, v] = c_dv φ_dvk
   under E[log β] of λ (the variational E-step of LDA, all documents at once);
2. release: s = Σ_d x_d + Y, Y ~ N(0, σ²) on each of the k × V entries;
3. M-step: λ = η + max(s, 0).

Every document is first cut to at most N tokens (``max_doc_tokens``, drawn
without replacement), so x_d sums to at most N and its L2 norm is at most N:
σ = z·N, with the noise multiplier z calibrated by dp-accounting's PLD
accountant for ``n_iter`` Gaussian releases. Φ is the last λ, normalised.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma

from topicaudit.mechanisms import GaussianNoise, Recorder
from topicaudit.targets.base import Adjacency, Basis, Guarantee

E_STEP_ITERATIONS = 100   # at most, per E-step
E_STEP_TOLERANCE = 1e-3   # a document's γ has converged when it moves less than this (mean over topics)
PLD_INTERVAL = 1e-3       # dp-accounting's PLD discretisation: pessimistic, so ε stays an upper bound


def _event(noise_multiplier: float, steps: int):
    import dp_accounting  # here, not at the top: Ray workers import this module only to fit

    return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise_multiplier), steps)


def _accountant():
    from dp_accounting.pld import PLDAccountant

    return PLDAccountant(value_discretization_interval=PLD_INTERVAL)


@functools.lru_cache(maxsize=32)
def noise_multiplier(epsilon: float, delta: float, steps: int) -> float:
    """The least z for which ``steps`` Gaussian releases of noise z·Δ are (ε, δ)-DP."""
    import dp_accounting

    return float(dp_accounting.calibrate_dp_mechanism(_accountant, lambda z: _event(z, steps), epsilon, delta))


@functools.lru_cache(maxsize=32)
def spent_epsilon(z: float, delta: float, steps: int) -> float:
    accountant = _accountant()
    accountant.compose(_event(z, steps))
    return float(accountant.get_epsilon(delta))


def _check(name: str, value, *, integer: bool = False, below: float | None = None) -> None:
    """A positive number (an integer), less than ``below``; ValueError naming the parameter otherwise."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and 0 < value and (below is None or value < below) and (not integer or float(value).is_integer())):
        what = "a positive integer" if integer else "a positive number"
        raise ValueError(f"{name} must be {what}{'' if below is None else f' below {below:g}'} (got {value!r})")


class DPEMTopics:
    """DP variational EM for LDA, (ε, δ)-DP for adding or removing one document.

    k: topics. epsilon, delta: the claim. n_iter: EM iterations (each one a
    Gaussian release). max_doc_tokens: N, the per-document token cap.
    alpha, eta: the document-topic and topic-word priors (None: 1/k).
    """

    def __init__(self, k: int, epsilon: float = 1.0, delta: float = 1e-5, n_iter: int = 20,
                 max_doc_tokens: int = 64, alpha: float | None = None, eta: float | None = None):
        for name, value in (("k", k), ("n_iter", n_iter), ("max_doc_tokens", max_doc_tokens)):
            _check(name, value, integer=True)
        _check("epsilon", epsilon)
        _check("delta", delta, below=1.0)
        for name, prior in (("alpha", alpha), ("eta", eta)):
            if prior is not None:
                _check(name, prior)
        self.k, self.epsilon, self.delta, self.n_iter = k, epsilon, delta, n_iter
        self.max_doc_tokens, self.alpha, self.eta = max_doc_tokens, alpha, eta
        self.noise_multiplier = noise_multiplier(float(epsilon), float(delta), int(n_iter))

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * self.max_doc_tokens

    def mechanism(self) -> GaussianNoise:
        """What ``fit`` releases: n_iter Gaussian sums, each document at most N tokens."""
        return GaussianNoise(noise_std=self.noise_std, document_tokens=self.max_doc_tokens, steps=self.n_iter)

    def guarantee(self) -> Guarantee:
        return Guarantee(
            epsilon=spent_epsilon(self.noise_multiplier, float(self.delta), int(self.n_iter)), delta=self.delta,
            adjacency=Adjacency.DOCUMENT, basis=Basis.THEOREM, accountant="dp-accounting PLD",
            event=_event(self.noise_multiplier, int(self.n_iter)),
            parameters={"learner": "dpem-topics", "noise_multiplier": self.noise_multiplier,
                        "noise_std": self.noise_std, "max_doc_tokens": self.max_doc_tokens, "steps": self.n_iter})

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        """Φ (k × X's columns, float32, rows on the simplex); ``record`` receives every noisy sum."""
        record = Recorder() if record is None else record
        rng = np.random.default_rng(seed)
        k, n_words = self.k, X.shape[1]
        alpha = 1.0 / k if self.alpha is None else self.alpha
        eta = 1.0 / k if self.eta is None else self.eta
        X = self._cap(sp.csr_matrix(X), rng)
        lam = rng.gamma(100.0, 0.01, (k, n_words))
        for _ in range(self.n_iter):
            elog_beta = digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))
            counts = expected_counts(X, elog_beta, alpha)
            noisy = self._release(counts, rng, record, elog_beta)
            lam = eta + np.maximum(noisy, 0.0)
        return (lam / lam.sum(axis=1, keepdims=True)).astype(np.float32)

    def _release(self, counts, rng, record, elog_beta) -> np.ndarray:
        """The noisy sum the M-step uses: recorded, and what the recorder returns."""
        noisy = counts + self._noise(rng, counts.shape)
        return record.gaussian(noisy, noise_std=self.noise_std, document_tokens=self.max_doc_tokens,
                               steps=self.n_iter, topic_affinity=elog_beta)

    def _noise(self, rng, shape) -> np.ndarray:
        return rng.normal(0.0, self.noise_std, shape)

    def _cap(self, X: sp.csr_matrix, rng) -> sp.csr_matrix:
        """X with every document of more than N tokens cut to N of them, drawn without replacement."""
        X = X.astype(np.int64)
        lengths = np.asarray(X.sum(axis=1)).ravel()
        for d in np.flatnonzero(lengths > self.max_doc_tokens):
            row = slice(X.indptr[d], X.indptr[d + 1])
            X.data[row] = rng.multivariate_hypergeometric(X.data[row], self.max_doc_tokens)
        X.eliminate_zeros()
        return X


def expected_counts(X: sp.csr_matrix, elog_beta: np.ndarray, alpha: float) -> np.ndarray:
    """Σ_d x_d (k × V), x_d[k, v] = c_dv φ_dvk from LDA's variational E-step under E[log β]."""
    exp_beta = np.exp(elog_beta)
    k, n_docs = exp_beta.shape[0], X.shape[0]
    sizes = np.diff(X.indptr)
    beta = exp_beta[:, X.indices].T                                   # each count's word, over topics (nnz × k)
    gamma = alpha + np.add.reduceat(X.data, X.indptr[:-1])[:, None] * (sizes > 0)[:, None] / k * np.ones(k)
    todo = np.flatnonzero(sizes)                                      # the documents whose γ still moves
    at = np.arange(X.nnz)                                             # their counts, document by document
    for _ in range(E_STEP_ITERATIONS):
        exp_theta = np.exp(digamma(gamma[todo]))
        where = np.repeat(np.arange(todo.size), sizes[todo])
        share = X.data[at] / np.einsum("ij,ij->i", exp_theta[where], beta[at])
        starts = np.concatenate([[0], np.cumsum(sizes[todo])[:-1]])
        updated = alpha + exp_theta * np.add.reduceat(share[:, None] * beta[at], starts, axis=0)
        moving = np.abs(updated - gamma[todo]).mean(axis=1) >= E_STEP_TOLERANCE
        gamma[todo] = updated
        todo, at = todo[moving], at[moving[where]]
        if todo.size == 0:
            break
    exp_theta = np.exp(digamma(gamma))
    rows = np.repeat(np.arange(n_docs), sizes)
    share = X.data / np.einsum("ij,ij->i", exp_theta[rows], beta)
    counts = np.stack([np.bincount(X.indices, share * exp_theta[rows, t], X.shape[1]) for t in range(k)])
    return exp_beta * counts
