"""Compiled batch variational LDA, a faithful port of scikit-learn's.

``fit_lda_vb`` reproduces ``sklearn.decomposition.LatentDirichletAllocation``
with ``learning_method='batch'`` (the default), ``n_jobs=None`` and
``evaluate_every<=0``: same random draws from the same ``random_state``, same
variational updates, same stopping rule, same M-step, so it returns the same
``components_`` up to floating-point rounding (see below). The per-document
E-step, which sklearn runs as a Python loop, is a numba kernel here.

What is replicated, in sklearn's order (sklearn 1.9, ``decomposition/_lda.py``
and ``_online_lda_fast.pyx``):

* ``components_ = rs.gamma(100, 0.01, (k, V))`` with ``rs =
  check_random_state(seed)`` (numpy's legacy ``RandomState``), then
  ``exp_dirichlet_component_ = np.exp(_dirichlet_expectation_2d(components_))``.
* each of ``max_iter`` EM iterations: one ``rs.gamma(100, 0.01, (n_docs, k))``
  draw for the document-topic parameters (``n_jobs=None`` means a single
  slice, hence a single draw), ``np.exp(_dirichlet_expectation_2d(.))`` of it,
  then per document the fixed-point loop
  ``norm_phi = e·W_d + eps; gamma_d = e * ((cnts / norm_phi) · W_dᵀ);
  gamma_d += alpha; e = exp(psi(gamma_d) - psi(sum gamma_d))`` stopped when
  ``mean|gamma_old - gamma_d| < mean_change_tol`` or after
  ``max_doc_update_iter`` passes, then the sufficient statistics
  ``S[:, ids] += outer(e, cnts / (e·W_d + eps))``; M-step
  ``components_ = eta + S * exp_dirichlet_component_`` and a new
  ``exp_dirichlet_component_``.
* psi is sklearn's own (Bernardo's AS 103 asymptotic series, not scipy's
  digamma), ported operation for operation; the 1-d Dirichlet expectation uses
  libm ``exp`` (as the Cython code does) and the 2-d ones ``np.exp`` (as
  sklearn does, computed by numpy here too).
* after the last iteration sklearn runs one more E-step with
  ``random_init=False`` only to compute ``bound_``; it draws nothing and does
  not touch ``components_``, so it is skipped.

The only difference is the order of floating-point operations inside the two
dot products of the inner loop: sklearn calls OpenBLAS ``dgemv`` (blocked,
FMA kernels, CPU-dependent), this kernel sums sequentially (topic by topic for
``norm_phi``, word by word for the topic sums) without FMA. That perturbs each
pass at the 1e-16 relative level; documents whose fixed point converges slowly
amplify it, so components_ differ by up to ~1e-11 relative (~1e-15 after
row normalisation) on PHEME and KOS. It could change a result visibly only
if a document's mean change landed within rounding of ``mean_change_tol`` so
that its loop stopped one pass apart; ``_fit`` returns per-document pass
counts so the tests check that this does not happen (the closest observed
mean change was 4e-7 relative away from the tolerance).

Always computes in float64 (sklearn would keep float32 input in float32).
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.targets.counts import check_counts

__all__ = ["fit_lda_vb", "fit_lda_sklearn"]

_INIT_GAMMA = 100.0
_INIT_VAR = 1.0 / _INIT_GAMMA
_EPS = float(np.finfo(np.float64).eps)


# --------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------

@njit(cache=True, nogil=True, error_model="numpy")
def _psi(x):
    """sklearn's psi (``_online_lda_fast.pyx``), operation for operation."""
    euler = 0.577215664901532860606512090082402431
    if x <= 1e-6:
        return -euler - 1.0 / x
    result = 0.0
    while x < 6:
        result -= 1.0 / x
        x += 1
    r = 1.0 / x
    result += np.log(x) - 0.5 * r
    r = r * r
    result -= r * ((1.0 / 12.0) - r * ((1.0 / 120.0) - r * (1.0 / 252.0)))
    return result


@njit(cache=True, nogil=True, error_model="numpy")
def _dirichlet_expectation_2d(arr):
    """psi(arr) - psi(arr.sum(1))[:, None], row sums taken left to right."""
    n_rows, n_cols = arr.shape
    out = np.empty((n_rows, n_cols), dtype=np.float64)
    for i in range(n_rows):
        row_total = 0.0
        for j in range(n_cols):
            row_total += arr[i, j]
        psi_total = _psi(row_total)
        for j in range(n_cols):
            out[i, j] = _psi(arr[i, j]) - psi_total
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _norm_phi(wd, e, n, eps, out):
    """out[:n] = e @ wd[:, :n] + eps, each sum taken over topics in order.

    wd is (k, max_len) so the loop runs over words innermost (vectorisable)
    while every word's sum still accumulates topic 0, 1, ..., k-1 in turn.
    """
    k = wd.shape[0]
    for j in range(n):
        out[j] = 0.0
    for t in range(k):
        et = e[t]
        for j in range(n):
            out[j] += et * wd[t, j]
    for j in range(n):
        out[j] += eps


@njit(cache=True, nogil=True, error_model="numpy")
def _topic_sums(r, wdt, n, out):
    """out[t] = sum_j r[j] * wdt[j, t] for j = 0, ..., n-1 in order.

    Topics are taken four (then two, then one) at a time with scalar
    accumulators so the running sums stay in registers; each topic's sum is
    still accumulated word by word in order, from 0.0.
    """
    k = wdt.shape[1]
    t = 0
    while t + 4 <= k:
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for j in range(n):
            rj = r[j]
            s0 += rj * wdt[j, t]
            s1 += rj * wdt[j, t + 1]
            s2 += rj * wdt[j, t + 2]
            s3 += rj * wdt[j, t + 3]
        out[t] = s0
        out[t + 1] = s1
        out[t + 2] = s2
        out[t + 3] = s3
        t += 4
    while t + 2 <= k:
        s0 = 0.0
        s1 = 0.0
        for j in range(n):
            rj = r[j]
            s0 += rj * wdt[j, t]
            s1 += rj * wdt[j, t + 1]
        out[t] = s0
        out[t + 1] = s1
        t += 2
    while t < k:
        s0 = 0.0
        for j in range(n):
            s0 += r[j] * wdt[j, t]
        out[t] = s0
        t += 1


@njit(cache=True, nogil=True, error_model="numpy")
def _e_step(indptr, indices, data, exp_wt, doc_topic, exp_doc_topic,
            doc_topic_prior, max_doc_update_iter, mean_change_tol, eps,
            sstats_t, n_passes):
    """sklearn's ``_update_doc_distribution`` with ``cal_sstats=True``.

    exp_wt: (V, k) C-contiguous, exp(E[log beta]) transposed (one word's k
    values adjacent). doc_topic: (n, k) initial gamma, overwritten with the
    final one. exp_doc_topic: (n, k) exp(E[log theta]) of the initial gamma
    (read only). sstats_t: (V, k) zeros, accumulates the sufficient
    statistics before the M-step's scaling (transposed). n_passes: (n,)
    int32, receives the number of inner passes per document.
    """
    n_docs = indptr.shape[0] - 1
    k = exp_wt.shape[1]
    max_len = 0
    for d in range(n_docs):
        ln = indptr[d + 1] - indptr[d]
        if ln > max_len:
            max_len = ln
    wd = np.empty((k, max_len), dtype=np.float64)    # exp_topic_word_d
    wdt = np.empty((max_len, k), dtype=np.float64)   # its transpose
    norm_phi = np.empty(max_len, dtype=np.float64)
    ratio = np.empty(max_len, dtype=np.float64)      # cnts / norm_phi
    e = np.empty(k, dtype=np.float64)
    last = np.empty(k, dtype=np.float64)
    cur = np.empty(k, dtype=np.float64)
    acc = np.empty(k, dtype=np.float64)

    for d in range(n_docs):
        start = indptr[d]
        n = indptr[d + 1] - start
        for j in range(n):
            w = indices[start + j]
            for t in range(k):
                v = exp_wt[w, t]
                wd[t, j] = v
                wdt[j, t] = v
        for t in range(k):
            e[t] = exp_doc_topic[d, t]
            cur[t] = doc_topic[d, t]
        passes = 0
        for _ in range(max_doc_update_iter):
            passes += 1
            for t in range(k):
                last[t] = cur[t]
            # norm_phi = np.dot(exp_doc_topic_d, exp_topic_word_d) + eps
            _norm_phi(wd, e, n, eps, norm_phi)
            # doc_topic_d = exp_doc_topic_d * np.dot(cnts / norm_phi, W_d.T)
            for j in range(n):
                ratio[j] = data[start + j] / norm_phi[j]
            _topic_sums(ratio, wdt, n, acc)
            # _dirichlet_expectation_1d(doc_topic_d, prior, exp_doc_topic_d)
            total = 0.0
            for t in range(k):
                dt = e[t] * acc[t] + doc_topic_prior
                cur[t] = dt
                total += dt
            psi_total = _psi(total)
            for t in range(k):
                e[t] = np.exp(_psi(cur[t]) - psi_total)
            # mean_change(last_d, doc_topic_d) < mean_change_tol
            change = 0.0
            for t in range(k):
                change += abs(last[t] - cur[t])
            if change / k < mean_change_tol:
                break
        n_passes[d] = passes
        for t in range(k):
            doc_topic[d, t] = cur[t]
        # suff_stats[:, ids] += np.outer(exp_doc_topic_d, cnts / norm_phi)
        _norm_phi(wd, e, n, eps, norm_phi)
        for j in range(n):
            r = data[start + j] / norm_phi[j]
            w = indices[start + j]
            for t in range(k):
                sstats_t[w, t] += e[t] * r


@njit(cache=True, nogil=True, error_model="numpy")
def _m_step(sstats_t, exp_dirichlet_component, topic_word_prior):
    """components_ = eta + sstats * exp_dirichlet_component_ (k, V)."""
    k, n_words = exp_dirichlet_component.shape
    comp = np.empty((k, n_words), dtype=np.float64)
    for t in range(k):
        for w in range(n_words):
            comp[t, w] = topic_word_prior + sstats_t[w, t] * exp_dirichlet_component[t, w]
    return comp


# --------------------------------------------------------------------------
# drivers
# --------------------------------------------------------------------------

def _check_random_state(seed) -> np.random.RandomState:
    """sklearn.utils.check_random_state, without importing sklearn."""
    if seed is None or seed is np.random:
        return np.random.mtrand._rand
    if isinstance(seed, numbers.Integral):
        return np.random.RandomState(int(seed))  # (numpy's stubs do not take numbers.Integral; same seed)
    if isinstance(seed, np.random.RandomState):
        return seed
    raise ValueError(f"{seed!r} cannot be used to seed a numpy.random.RandomState")


def _check_X(X) -> sp.csr_matrix:
    # Duplicated entries are summed (sklearn's fancy-index += would count one); weights are allowed, as in sklearn.
    return check_counts(X, whole=False, nonempty=True)


def _fit(X, k, seed, *, doc_topic_prior=None, topic_word_prior=None, max_iter=10,
         mean_change_tol=1e-3, max_doc_update_iter=100):
    """Fit; returns (components_, passes) with passes (max_iter, n_docs) int32."""
    X = _check_X(X)
    k = int(k)
    if k < 1:
        raise ValueError("k must be >= 1")
    n_docs, n_words = X.shape
    alpha = 1.0 / k if doc_topic_prior is None else float(doc_topic_prior)
    eta = 1.0 / k if topic_word_prior is None else float(topic_word_prior)
    rs = _check_random_state(seed)

    indptr = X.indptr.astype(np.int64, copy=False)
    indices = X.indices.astype(np.int64, copy=False)
    data = X.data

    components = rs.gamma(_INIT_GAMMA, _INIT_VAR, (k, n_words))
    exp_dirichlet_component = np.exp(_dirichlet_expectation_2d(components))
    passes = np.zeros((max_iter, n_docs), dtype=np.int32)
    for it in range(max_iter):
        doc_topic = rs.gamma(_INIT_GAMMA, _INIT_VAR, (n_docs, k))
        exp_doc_topic = np.exp(_dirichlet_expectation_2d(doc_topic))
        exp_wt = np.ascontiguousarray(exp_dirichlet_component.T)
        sstats_t = np.zeros((n_words, k), dtype=np.float64)
        _e_step(indptr, indices, data, exp_wt, doc_topic, exp_doc_topic,
                alpha, int(max_doc_update_iter), float(mean_change_tol), _EPS,
                sstats_t, passes[it])
        components = _m_step(sstats_t, exp_dirichlet_component, eta)
        exp_dirichlet_component = np.exp(_dirichlet_expectation_2d(components))
    return components, passes


def fit_lda_vb(X: sp.csr_matrix, k: int, seed: int | np.random.RandomState, *,
               doc_topic_prior: float | None = None,
               topic_word_prior: float | None = None, max_iter: int = 10,
               mean_change_tol: float = 1e-3,
               max_doc_update_iter: int = 100) -> np.ndarray:
    """Batch variational LDA; returns ``components_`` (k, V) float64.

    Same result as ``fit_lda_sklearn`` with the same arguments (see module
    docstring). X: documents x words counts, CSR (any other sparse format or
    dtype is converted). seed: int, RandomState (advanced in place, as sklearn
    does) or None (numpy's global RandomState). Priors default to 1/k.
    """
    components, _ = _fit(X, k, seed, doc_topic_prior=doc_topic_prior,
                         topic_word_prior=topic_word_prior, max_iter=max_iter,
                         mean_change_tol=mean_change_tol,
                         max_doc_update_iter=max_doc_update_iter)
    return components


def fit_lda_sklearn(X: sp.csr_matrix, k: int, seed: int | np.random.RandomState, *,
                    doc_topic_prior: float | None = None,
                    topic_word_prior: float | None = None, max_iter: int = 10,
                    mean_change_tol: float = 1e-3,
                    max_doc_update_iter: int = 100, learning_method: str = "batch",
                    **online: float) -> np.ndarray:
    """scikit-learn's ``LatentDirichletAllocation`` (batch, or online with ``online``'s learning_decay,
    learning_offset, batch_size and total_samples), for comparison and for models trained online.

    ``n_jobs=1``: the same as sklearn's default ``None`` except inside a joblib
    ``parallel_backend`` context, where sklearn would split the E-step into
    slices that each draw their own document-topic initialisation.
    """
    from sklearn.decomposition import LatentDirichletAllocation  # heavy; the reference implementation only

    X = _check_X(X)
    lda = LatentDirichletAllocation(
        n_components=int(k), doc_topic_prior=doc_topic_prior,
        topic_word_prior=topic_word_prior, learning_method=learning_method,
        max_iter=max_iter, mean_change_tol=mean_change_tol,
        max_doc_update_iter=max_doc_update_iter, evaluate_every=-1,
        n_jobs=1, random_state=seed, **online)
    lda.fit(X)
    return np.asarray(lda.components_, dtype=np.float64)
