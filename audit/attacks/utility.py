"""Utility of a released topic model: UMass coherence and held-out perplexity.

Both are learner-agnostic functions of a release's Φ and a count matrix over
the same columns (the release's vocabulary). ``release_utility`` computes
what an audit stores in ``results.json["utility"]`` (keys documented there).

UMass coherence (Mimno et al. 2011; Manzonelli et al. 2024, Eq. 4)
------------------------------------------------------------------
For topic t with its M most probable words v₁, …, v_M (descending Φ_tv,
ties broken by lower column index),

    coherence(t) = Σ_{m=2..M} Σ_{l=1..m−1} ln((D(v_m, v_l) + 1) / D(v_l)),

D(v) the number of reference documents containing v and D(v, v') the number
containing both. The denominator is the document frequency of the
*higher-ranked* word v_l, as in Eq. 4 and Mimno et al. (the paper's public
code divides by the lower-ranked word's instead). The reference corpus follows
the paper: its FDPTM code computes coherence on the sanitised corpus the model
was trained on, i.e. the training documents restricted to the released
vocabulary. A pair whose D(v_l) is 0 (a released word absent from the
reference documents, possible only when Φ was not trained on them) has no
defined term and is skipped, as the paper's code does; ``skipped_pairs``
counts them. The audit reports the mean over topics (the paper's figure) and
each topic's value.

Held-out perplexity (the standard fixed-Φ estimator)
----------------------------------------------------
Each held-out document's topic proportions θ are inferred with Φ held fixed,
by the LDA variational E-step under a symmetric Dirichlet(α) prior
(α = 1/k by default, the prior of the ``lda`` and ``cgs`` learners):

    γ ← α + e ⊙ Σ_w x_w Φ_·w / (e·Φ_·w),   e = exp(ψ(γ) − ψ(Σγ)),

iterated from γ = α + n_d/k until the mean absolute change of γ is below
``tol`` (or ``max_iter`` passes); θ̂ = γ / Σγ, the variational posterior
mean. Then

    perplexity = exp(− Σ_d Σ_w x_dw ln(Σ_t θ̂_dt Φ_tw) / Σ_d Σ_w x_dw).

Words outside the release's vocabulary are dropped (the count matrix is over
the released columns); documents left empty contribute nothing. A word to
which every topic gives probability 0 would make the perplexity infinite; its
probability is floored at 1e-12. θ̂ is estimated from the same words it is
scored on, so this is optimistic compared with document completion or the
left-to-right estimator (Wallach et al. 2009), but it is the common fixed-Φ
approach, cheap and comparable across learners evaluated on the same
documents. Lower is better.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.inputs.phi_io import check_phi
from topicaudit.targets.counts import check_counts

__all__ = ["Coherence", "umass_coherence", "infer_theta", "heldout_perplexity", "release_utility"]

_FLOOR = 1e-12


class Coherence(NamedTuple):
    mean: float                 # mean over topics (the paper's figure)
    per_topic: np.ndarray       # (k,) float64
    top_words: np.ndarray       # (k, M) int64 column ids, most probable first
    skipped_pairs: int          # pairs whose higher-ranked word occurs in no reference document


def _top_words(phi: np.ndarray, top_n: int) -> np.ndarray:
    order = np.argsort(-phi, axis=1, kind="stable")  # ties: lower column id first
    return order[:, :top_n].astype(np.int64)


def umass_coherence(phi: np.ndarray, X, top_n: int = 10) -> Coherence:
    """UMass coherence of every topic's top ``top_n`` words on the reference counts X.

    phi: (k, V) topic-word matrix; X: (documents × V) counts over the same
    columns. See the module docstring for the formula and conventions.
    """
    phi = check_phi(phi, "phi")
    _check_top_n(top_n)
    X = check_counts(X, "X", whole=False, n_columns=phi.shape[1], columns_of="Φ")
    return _umass_coherence(phi, X, top_n)


def _check_top_n(top_n) -> None:
    if isinstance(top_n, bool) or int(top_n) != top_n or top_n < 2:
        raise ValueError(f"top_n must be an integer ≥ 2, got {top_n!r}")


def _umass_coherence(phi: np.ndarray, X: sp.csr_matrix, top_n: int) -> Coherence:
    """``umass_coherence`` on inputs already checked."""
    top = _top_words(phi, min(int(top_n), phi.shape[1]))
    words, local = np.unique(top, return_inverse=True)
    local = local.reshape(top.shape)
    present = X[:, words]
    present.data = (present.data > 0).astype(np.float64)
    present.eliminate_zeros()
    co = (present.T @ present).toarray()  # co[a, b] = D(a, b); diagonal = D(a)
    df = np.diag(co)
    M = top.shape[1]
    later, earlier = np.tril_indices(M, k=-1)  # pairs (m, l) with l < m
    per_topic = np.zeros(top.shape[0])
    skipped = 0
    for t in range(top.shape[0]):
        vm, vl = local[t, later], local[t, earlier]
        denom = df[vl]
        ok = denom > 0
        skipped += int((~ok).sum())
        per_topic[t] = np.sum(np.log((co[vm[ok], vl[ok]] + 1.0) / denom[ok]))
    return Coherence(mean=float(per_topic.mean()), per_topic=per_topic, top_words=top, skipped_pairs=skipped)


@njit(cache=True, nogil=True)
def _digamma(x):
    """ψ(x) for x > 0: recurrence up to x ≥ 6, then the asymptotic series."""
    result = 0.0
    while x < 6.0:
        result -= 1.0 / x
        x += 1.0
    r = 1.0 / x
    result += math.log(x) - 0.5 * r
    r2 = r * r
    result -= r2 * (1.0 / 12.0 - r2 * (1.0 / 120.0 - r2 * (1.0 / 252.0 - r2 * (1.0 / 240.0 - r2 / 132.0))))
    return result


@njit(cache=True, nogil=True)
def _e_step(indptr, indices, data, phi_t, alpha, max_iter, tol, floor, theta, loglik):
    """Per document: γ by the fixed-Φ variational E-step, θ̂ = γ/Σγ, and Σ_w x_w ln(θ̂·Φ_·w)."""
    n_docs = indptr.shape[0] - 1
    k = phi_t.shape[1]
    gamma = np.empty(k)
    new = np.empty(k)
    e = np.empty(k)
    for d in range(n_docs):
        start, end = indptr[d], indptr[d + 1]
        n = 0.0
        for p in range(start, end):
            n += data[p]
        for t in range(k):
            gamma[t] = alpha + n / k
        if n > 0.0:
            for _ in range(max_iter):
                total = 0.0
                for t in range(k):
                    total += gamma[t]
                psi_total = _digamma(total)
                for t in range(k):
                    e[t] = math.exp(_digamma(gamma[t]) - psi_total)
                    new[t] = 0.0
                for p in range(start, end):
                    w = indices[p]
                    norm = 0.0
                    for t in range(k):
                        norm += e[t] * phi_t[w, t]
                    if norm <= 0.0:
                        continue
                    ratio = data[p] / norm
                    for t in range(k):
                        new[t] += phi_t[w, t] * ratio
                change = 0.0
                for t in range(k):
                    g = alpha + e[t] * new[t]
                    change += abs(g - gamma[t])
                    gamma[t] = g
                if change / k < tol:
                    break
        total = 0.0
        for t in range(k):
            total += gamma[t]
        for t in range(k):
            theta[d, t] = gamma[t] / total
        ll = 0.0
        for p in range(start, end):
            w = indices[p]
            prob = 0.0
            for t in range(k):
                prob += theta[d, t] * phi_t[w, t]
            if prob < floor:
                prob = floor
            ll += data[p] * math.log(prob)
        loglik[d] = ll


def infer_theta(phi: np.ndarray, X, alpha: float | None = None, max_iter: int = 200,
                tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """θ̂ (documents × k) by the fixed-Φ variational E-step, and each document's Σ_w x_w ln p(w)."""
    phi = check_phi(phi, "phi")
    _check_alpha(alpha)
    X = check_counts(X, "X", whole=False, n_columns=phi.shape[1], columns_of="Φ")
    return _infer_theta(phi, X, alpha, max_iter, tol)


def _check_alpha(alpha) -> None:
    if alpha is not None and not float(alpha) > 0:
        raise ValueError(f"alpha must be positive, got {alpha!r}")


def _infer_theta(phi: np.ndarray, X: sp.csr_matrix, alpha: float | None, max_iter: int,
                 tol: float) -> tuple[np.ndarray, np.ndarray]:
    """``infer_theta`` on inputs already checked."""
    k = phi.shape[0]
    alpha = 1.0 / k if alpha is None else float(alpha)
    theta = np.empty((X.shape[0], k))
    loglik = np.zeros(X.shape[0])
    _e_step(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
            np.ascontiguousarray(phi.T), alpha, int(max_iter), float(tol), _FLOOR, theta, loglik)
    return theta, loglik


def heldout_perplexity(phi: np.ndarray, X_heldout, alpha: float | None = None, max_iter: int = 200,
                       tol: float = 1e-6) -> float:
    """exp(−Σ log p(w) / N) over the held-out tokens, θ̂ inferred with Φ fixed (module docstring)."""
    phi = check_phi(phi, "phi")
    _check_alpha(alpha)
    X_heldout = check_counts(X_heldout, "X_heldout", whole=False, n_columns=phi.shape[1], columns_of="Φ")
    return _heldout_perplexity(phi, X_heldout, alpha, max_iter, tol)


def _heldout_perplexity(phi: np.ndarray, X_heldout: sp.csr_matrix, alpha: float | None = None,
                        max_iter: int = 200, tol: float = 1e-6) -> float:
    """``heldout_perplexity`` on inputs already checked."""
    n_tokens = float(X_heldout.sum())
    if n_tokens <= 0:
        raise ValueError("the held-out documents have no tokens in Φ's vocabulary; perplexity is undefined")
    _, loglik = _infer_theta(phi, X_heldout, alpha, max_iter, tol)
    return float(math.exp(-loglik.sum() / n_tokens))


def release_utility(X: sp.csr_matrix, release, is_member: np.ndarray, top_n: int = 10) -> dict[str, Any]:
    """``results.json["utility"]`` for a target release trained on the rows ``is_member`` of X.

    Coherence on the training documents, perplexity on the non-members (held
    out from the target by construction), both over the released vocabulary.
    Φ and the counts are checked once, here.
    """
    is_member = np.asarray(is_member, dtype=bool)
    phi = check_phi(release.phi, "phi")
    _check_top_n(top_n)
    Xv = check_counts(sp.csr_matrix(X)[:, release.vocabulary], "X", whole=False, n_columns=phi.shape[1],
                      columns_of="Φ")
    members, others = Xv[is_member], Xv[~is_member]
    coherence = _umass_coherence(phi, members, top_n)
    n_heldout = float(others.sum())
    perplexity = _heldout_perplexity(phi, others) if n_heldout > 0 else None
    return {
        "umass_coherence": coherence.mean,
        "umass_coherence_per_topic": [float(v) for v in coherence.per_topic],
        "top_n": int(coherence.top_words.shape[1]),
        "coherence_documents": "target members (training documents, released vocabulary)",
        "coherence_skipped_pairs": coherence.skipped_pairs,
        "heldout_perplexity": perplexity,
        "heldout_documents": "target non-members",
        "heldout_tokens": int(n_heldout),
    }
