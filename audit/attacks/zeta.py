"""The LiRA query statistic ζ, solved exactly (to a certified tolerance) and fast.

For a topic-word matrix Φ (k × V, rows on the simplex) and a document with word
counts x over the vocabulary (n = Σ_w x_w)::

    ζ(Φ, d) = max_{θ ∈ Δ_k} f(θ),   f(θ) = Σ_w x_w log(Σ_z θ_z Φ_zw)

Words whose Φ column is all zero are outside the model's released vocabulary
and are dropped; a document with no remaining words has ζ = 0 and θ̂ uniform.

Each document is solved by one EM step, then an active-set Newton method on the simplex, and
stopped on a duality-gap certificate gap(θ) = max_z g_z − n ≤ tol (absolute), never on relative change;
Φ may be float32, everything is computed in float64. The method, its certificate and measurements:
docs/algorithms.md#zeta-statistic.

``solve_zeta_slsqp`` reproduces the paper's per-document SciPy SLSQP solver
(nicomanzonelli/topic_model_attacks, ``model_stats.py``) as a reference.

Longer than 400 lines because the ζ solver is one algorithm: its compiled kernels (the KKT system,
the Newton and EM steps, the fallback) share their arrays and conventions and are read together,
with the SLSQP reference beside them.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from topicaudit.jit import njit

from topicaudit.inputs.phi_io import check_phi
from topicaudit.targets.counts import check_counts

__all__ = [
    "ZetaResult",
    "solve_zeta",
    "solve_zeta_slsqp",
    "evaluate_theta",
    "warmup",
]

@dataclass
class ZetaResult:
    """ζ for every document, the maximiser θ̂ and its certificate.

    zeta:      (n_docs,) float64, f(θ̂) (0 for documents with no in-vocabulary word)
    theta:     (n_docs, k) float64, θ̂ (rows on the simplex; uniform for empty documents)
    gap:       (n_docs,) float64, max_z g_z(θ̂) − n ≥ ζ* − ζ (clipped at 0)
    converged: (n_docs,) bool, gap ≤ tol
    n_iter:    (n_docs,) int32, EM + Newton iterations used
    """

    zeta: np.ndarray
    theta: np.ndarray
    gap: np.ndarray
    converged: np.ndarray | None = None
    n_iter: np.ndarray | None = None


# --------------------------------------------------------------------------
# numba kernels
#
# Per document the m in-vocabulary words are gathered into At (k × m, one
# contiguous row per topic), so that p = Σ_z θ_z At[z] and g_z = r·At[z] are
# unit-stride loops. Kernels whose only freedom is the order of a sum carry the
# fastmath flags {reassoc, contract} (lets LLVM vectorise the reductions); no
# kernel assumes finite values.
# --------------------------------------------------------------------------

_FM = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FM)
def _probs(At, m, k, theta, p):
    """p_w = Σ_z θ_z At[z, w] for the m gathered words; returns min_w p_w."""
    for w in range(m):
        p[w] = 0.0
    for z in range(k):
        t = theta[z]
        if t != 0.0:
            for w in range(m):
                p[w] += t * At[z, w]
    pmin = p[0]
    for w in range(1, m):
        if p[w] < pmin:
            pmin = p[w]
    return pmin


@njit(cache=True, fastmath=_FM)
def _grad(At, x, m, k, p, r, g):
    """r_w = x_w / p_w and g_z = Σ_w r_w At[z, w]; returns max_z g_z."""
    for w in range(m):
        r[w] = x[w] / p[w]
    mx = -np.inf
    for z in range(k):
        s = 0.0
        for w in range(m):
            s += r[w] * At[z, w]
        g[z] = s
        if s > mx:
            mx = s
    return mx


@njit(cache=True, fastmath=_FM)
def _hess(At, m, p, r, fidx, nf, Ct, M):
    """M_ij = Σ_w x_w At[a, w] At[b, w] / p_w² for a = fidx[i], b = fidx[j] (local
    indices i, j < nf); r holds x / p. Returns max_i M_ii."""
    for i in range(nf):
        a = fidx[i]
        for w in range(m):
            Ct[i, w] = At[a, w] * (r[w] / p[w])
    mdiag = 0.0
    for i in range(nf):
        for j in range(i, nf):
            b = fidx[j]
            s = 0.0
            for w in range(m):
                s += Ct[i, w] * At[b, w]
            M[i, j] = s
            M[j, i] = s
        if M[i, i] > mdiag:
            mdiag = M[i, i]
    return mdiag


@njit(cache=True)
def _max(g, k):
    mx = g[0]
    for z in range(1, k):
        if g[z] > mx:
            mx = g[z]
    return mx


@njit(cache=True)
def _fval(x, m, p):
    """f = Σ_w x_w log p_w."""
    f = 0.0
    for w in range(m):
        f += x[w] * np.log(p[w])
    return f


@njit(cache=True)
def _log1p(u):
    """log(1 + u); a short series for |u| < 1e-2 (relative error < 1e-17), libm otherwise."""
    if -1e-2 < u < 1e-2:
        return u * (1.0 + u * (-1.0 / 2.0 + u * (1.0 / 3.0 + u * (-1.0 / 4.0 + u * (
            1.0 / 5.0 + u * (-1.0 / 6.0 + u * (1.0 / 7.0 + u * (-1.0 / 8.0 + u / 9.0))))))))
    return np.log1p(u)


@njit(cache=True)
def _dfval(x, m, p, p_new):
    """f(θ_new) − f(θ) = Σ_w x_w log(p_new_w / p_w), summed directly.

    No cancellation between two large sums (|f| can be ~10³ while the change is
    ~10⁻¹⁰), so Armijo stays checkable almost down to the optimum."""
    s = 0.0
    for w in range(m):
        s += x[w] * _log1p((p_new[w] - p[w]) / p[w])
    return s


@njit(cache=True)
def _dnoise(k, n):
    """A generous bound on the rounding noise of _dfval (each p carries ~k ulps)."""
    return 16.0 * (k + 1) * 2.220446049250313e-16 * n


@njit(cache=True)
def _solve_kkt(M, sel, ns, rhs, K, sol, ridge):
    """Solve [M_SS + ridge·I, 1; 1ᵀ, 0] [d; μ] = [rhs_S; 0] (S = sel[:ns], local
    indices into M and rhs) by Gaussian elimination with partial pivoting.
    K is an (nf+1)×(nf+2) scratch. Returns False if numerically singular."""
    n1 = ns + 1
    for i in range(ns):
        a = sel[i]
        for j in range(ns):
            K[i, j] = M[a, sel[j]]
        K[i, i] += ridge
        K[i, ns] = 1.0
        K[i, n1] = rhs[a]
    for j in range(ns):
        K[ns, j] = 1.0
    K[ns, ns] = 0.0
    K[ns, n1] = 0.0
    for c in range(n1):
        piv = c
        best = abs(K[c, c])
        for rr in range(c + 1, n1):
            v = abs(K[rr, c])
            if v > best:
                best = v
                piv = rr
        if best == 0.0 or not np.isfinite(best):
            return False
        if piv != c:
            for j in range(c, n1 + 1):
                t = K[c, j]
                K[c, j] = K[piv, j]
                K[piv, j] = t
        inv = 1.0 / K[c, c]
        for rr in range(c + 1, n1):
            fct = K[rr, c] * inv
            if fct != 0.0:
                for j in range(c, n1 + 1):
                    K[rr, j] -= fct * K[c, j]
    for rr in range(n1 - 1, -1, -1):
        s = K[rr, n1]
        for j in range(rr + 1, n1):
            s -= K[rr, j] * sol[j]
        sol[rr] = s / K[rr, rr]
    for i in range(n1):
        if not np.isfinite(sol[i]):
            return False
    return True


@njit(cache=True)
def _em_step(At, x, m, k, n, theta, p, r, g):
    """θ ← θ ⊙ g / n (renormalised against drift); updates p, r, g; returns max g."""
    s = 0.0
    for z in range(k):
        theta[z] *= g[z] / n
        s += theta[z]
    for z in range(k):
        theta[z] /= s
    _probs(At, m, k, theta, p)
    return _grad(At, x, m, k, p, r, g)


@njit(cache=True)
def _solve_doc(At, x, m, k, n, theta, tol, max_em, max_newton, max_fallback, snap,
               p, p_new, r, g, g_new, th_new, M, Ct, K, sol, d, fidx, sel, rhs):
    """Maximise f over the simplex for one document (gathered words At: k × m).

    theta is the start (on the simplex, p_w > 0 for every word) and is
    overwritten with θ̂. Returns (f(θ̂), gap(θ̂), iterations)."""
    it = 0
    _probs(At, m, k, theta, p)
    gap = _grad(At, x, m, k, p, r, g) - n
    # ---- 1. plain EM --------------------------------------------------
    while gap > tol and it < max_em:
        gap = _em_step(At, x, m, k, n, theta, p, r, g) - n
        it += 1
    # ---- 2. active-set Newton on the simplex ---------------------------
    nit = 0
    stalled = False
    dnoise = _dnoise(k, n)
    while gap > tol and nit < max_newton:
        nit += 1
        it += 1
        # (a) snap to 0 tiny weights that the KKT conditions push out (g_z < n):
        # to first order this raises f by θ_z (n − g_z) > 0 and spares Newton a
        # step per such coordinate; kept only if f did not measurably drop
        nsnap = 0
        s = 0.0
        for z in range(k):
            v = theta[z]
            if v > 0.0 and v <= snap and g[z] < n:
                v = 0.0
                nsnap += 1
            th_new[z] = v
            s += v
        if nsnap > 0 and s > 0.0:
            for z in range(k):
                th_new[z] /= s
            if _probs(At, m, k, th_new, p_new) > 0.0:
                if _dfval(x, m, p, p_new) >= -dnoise:
                    for z in range(k):
                        theta[z] = th_new[z]
                    for w in range(m):
                        p[w] = p_new[w]
                    gap = _grad(At, x, m, k, p, r, g) - n
                    if gap <= tol:
                        break
        # (b) free set F: the support plus KKT violators at the bound
        nf = 0
        for z in range(k):
            if theta[z] > 0.0 or g[z] > n:
                fidx[nf] = z
                rhs[nf] = g[z] - n  # shifted gradient: same d since Σd = 0
                sel[nf] = nf
                nf += 1
        # (c) M = −∇²f on F. A tiny ridge keeps the KKT system solvable when M is
        # singular (fewer distinct words than free topics, duplicated topics);
        # f is constant along M's null directions, so nothing is lost.
        ridge = 1e-12 * _hess(At, m, p, r, fidx, nf, Ct, M) + 1e-300
        # (d) equality-constrained Newton step; a coordinate at its bound may
        # only enter the support with d_z > 0, else it is put back and re-solved
        ok = False
        ns = nf
        while ns > 0:
            if not _solve_kkt(M, sel, ns, rhs, K, sol, ridge):
                break
            worst = -1
            wv = 0.0
            for t in range(ns):
                if theta[fidx[sel[t]]] <= 0.0 and sol[t] <= wv:
                    wv = sol[t]
                    worst = t
            if worst < 0:
                ok = True
                break
            for t in range(worst, ns - 1):
                sel[t] = sel[t + 1]
            ns -= 1
        if not ok:
            stalled = True
            break
        for z in range(k):
            d[z] = 0.0
        for t in range(ns):
            d[fidx[sel[t]]] = sol[t]
        slope = 0.0
        for z in range(k):
            slope += (g[z] - n) * d[z]
        if not slope > 0.0:
            stalled = True
            break
        # (e) projected backtracking: θ(α) = normalise(max(θ + α d, 0)); several
        # coordinates may reach their bound in one step
        nz0 = 0
        for z in range(k):
            if theta[z] <= 0.0:
                nz0 += 1
        alpha = 1.0
        accepted = False
        for _ls in range(60):
            s = 0.0
            nz = 0
            for z in range(k):
                v = theta[z] + alpha * d[z]
                if v <= 0.0:
                    v = 0.0
                    nz += 1
                th_new[z] = v
                s += v
            for z in range(k):
                th_new[z] /= s
            if _probs(At, m, k, th_new, p_new) > 0.0:
                df = _dfval(x, m, p, p_new)
                lin = 0.0
                for z in range(k):
                    lin += (g[z] - n) * (th_new[z] - theta[z])
                if df > 0.0 and df >= 1e-4 * lin:
                    accepted = True
                    break
                if df >= -dnoise:
                    if nz > nz0:
                        # parks coordinates on their bound at no measurable cost
                        accepted = True
                        break
                    if _ls == 0:
                        # the predicted gain is below the rounding noise of f:
                        # judge the step by the certificate instead (safe: ζ is
                        # reported as f(θ̂) with ζ* − f(θ̂) ≤ gap(θ̂))
                        if _grad(At, x, m, k, p_new, r, g_new) - n < gap:
                            accepted = True
                            break
            alpha *= 0.5
        if not accepted:
            stalled = True
            break
        for z in range(k):
            theta[z] = th_new[z]
        for w in range(m):
            p[w] = p_new[w]
        gap = _grad(At, x, m, k, p, r, g) - n
    # ---- 3. fallback: monotone EM on stragglers -------------------------
    if gap > tol and (stalled or nit >= max_newton) and max_fallback > 0:
        best_gap = gap
        for z in range(k):
            th_new[z] = theta[z]
        for _e in range(max_fallback):
            gap = _em_step(At, x, m, k, n, theta, p, r, g) - n
            it += 1
            if gap < best_gap:
                best_gap = gap
                for z in range(k):
                    th_new[z] = theta[z]
            if gap <= tol:
                break
        if gap > best_gap:
            for z in range(k):
                theta[z] = th_new[z]
            _probs(At, m, k, theta, p)
            gap = _grad(At, x, m, k, p, r, g) - n
    return _fval(x, m, p), gap, it


@njit(cache=True)
def _solve_all(PT, keep, indptr, indices, data, tol, max_em, max_newton, max_fallback, snap,
               zeta, theta_out, gap_out, iters):
    V, k = PT.shape
    n_docs = indptr.shape[0] - 1
    maxlen = 1
    for i in range(n_docs):
        ln = indptr[i + 1] - indptr[i]
        if ln > maxlen:
            maxlen = ln
    At = np.empty((k, maxlen))
    Ct = np.empty((k, maxlen))
    x = np.empty(maxlen)
    p = np.empty(maxlen)
    p_new = np.empty(maxlen)
    r = np.empty(maxlen)
    g = np.empty(k)
    g_new = np.empty(k)
    th = np.empty(k)
    th_new = np.empty(k)
    M = np.empty((k, k))
    K = np.empty((k + 1, k + 2))
    sol = np.empty(k + 1)
    d = np.empty(k)
    rhs = np.empty(k)
    fidx = np.empty(k, dtype=np.int64)
    sel = np.empty(k, dtype=np.int64)
    for i in range(n_docs):
        m = 0
        n = 0.0
        for jj in range(indptr[i], indptr[i + 1]):
            w = indices[jj]
            c = data[jj]
            if c > 0.0 and keep[w]:
                for z in range(k):
                    At[z, m] = PT[w, z]
                x[m] = c
                n += c
                m += 1
        for z in range(k):
            th[z] = 1.0 / k
        if m == 0:
            zeta[i] = 0.0
            gap_out[i] = 0.0
            iters[i] = 0
        else:
            f, gp, it = _solve_doc(At, x, m, k, n, th, tol, max_em, max_newton, max_fallback,
                                   snap, p, p_new, r, g, g_new, th_new, M, Ct, K, sol, d,
                                   fidx, sel, rhs)
            zeta[i] = f
            gap_out[i] = gp if gp > 0.0 else 0.0
            iters[i] = it
        for z in range(k):
            theta_out[i, z] = th[z]


@njit(cache=True)
def _evaluate_all(PT, keep, indptr, indices, data, theta_in, f_out, gap_out):
    V, k = PT.shape
    n_docs = indptr.shape[0] - 1
    g = np.empty(k)
    for i in range(n_docs):
        for z in range(k):
            g[z] = 0.0
        f = 0.0
        n = 0.0
        bad = False
        for jj in range(indptr[i], indptr[i + 1]):
            w = indices[jj]
            c = data[jj]
            if c > 0.0 and keep[w]:
                s = 0.0
                for z in range(k):
                    s += PT[w, z] * theta_in[i, z]
                n += c
                if s <= 0.0:
                    bad = True
                    continue
                f += c * np.log(s)
                r = c / s
                for z in range(k):
                    g[z] += r * PT[w, z]
        if bad:
            f_out[i] = -np.inf
            gap_out[i] = np.inf
        elif n == 0.0:
            f_out[i] = 0.0
            gap_out[i] = 0.0
        else:
            f_out[i] = f
            gap_out[i] = _max(g, k) - n


# --------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------


def _prepare(phi, X):
    phi64 = check_phi(phi, "phi")
    X = check_counts(X, "X", whole=False, n_columns=phi64.shape[1], columns_of="phi")
    PT = np.ascontiguousarray(phi64.T)
    keep = np.ascontiguousarray(phi64.sum(axis=0) > 0)
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(X.indices, dtype=np.int64)
    data = np.ascontiguousarray(X.data, dtype=np.float64)
    return PT, keep, indptr, indices, data, X.shape[0]


def solve_zeta(phi: np.ndarray, X: sp.csr_matrix, tol: float = 1e-8, *,
               max_em: int = 1, max_newton: int = 200, max_fallback: int = 2000,
               snap: float = 1e-6, warn: bool = True) -> ZetaResult:
    """ζ(Φ, d) for every row d of X, with θ̂ and a duality-gap certificate.

    phi: (k, V) topic-word matrix (float32 or float64; rows on the simplex).
    X:   (n_docs, V) word counts, CSR (converted to float64 CSR if needed).
    tol: absolute target for the certificate gap = max_z g_z − n ≥ ζ* − ζ.

    Documents that end with gap > tol (not seen on real data; possible only when
    rounding prevents progress) are flagged in ``converged`` and, if ``warn``,
    reported with a RuntimeWarning giving their number and the largest gap.
    """
    if not tol > 0:
        raise ValueError("tol must be positive")
    PT, keep, indptr, indices, data, n_docs = _prepare(phi, X)
    k = PT.shape[1]
    zeta = np.empty(n_docs)
    theta = np.empty((n_docs, k))
    gap = np.empty(n_docs)
    iters = np.empty(n_docs, dtype=np.int32)
    _solve_all(PT, keep, indptr, indices, data, float(tol), int(max_em), int(max_newton),
               int(max_fallback), float(snap), zeta, theta, gap, iters)
    converged = gap <= tol
    if warn and not converged.all():
        bad = np.flatnonzero(~converged)
        warnings.warn(
            f"solve_zeta: {bad.size} of {n_docs} documents ended with gap > tol={tol:g} "
            f"(largest gap {gap[bad].max():.3g}, documents {bad[:10].tolist()}...)",
            RuntimeWarning, stacklevel=2)
    return ZetaResult(zeta=zeta, theta=theta, gap=gap, converged=converged, n_iter=iters)


def evaluate_theta(phi: np.ndarray, X: sp.csr_matrix, theta: np.ndarray):
    """f(θ_d) and the certificate max_z g_z(θ_d) − n for given θ rows (one per document).

    For any θ on the simplex, f(θ) ≤ ζ ≤ f(θ) + gap. Returns (f, gap), float64
    arrays; f = −inf, gap = +inf where θ gives zero probability to a word.
    """
    PT, keep, indptr, indices, data, n_docs = _prepare(phi, X)
    theta = np.ascontiguousarray(np.broadcast_to(np.asarray(theta, dtype=np.float64),
                                                 (n_docs, PT.shape[1])))
    f = np.empty(n_docs)
    gap = np.empty(n_docs)
    _evaluate_all(PT, keep, indptr, indices, data, theta, f, gap)
    return f, gap


def warmup() -> None:
    """Compile (or load from the numba cache) the kernels on a tiny problem."""
    phi = np.array([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7]])
    X = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [3.0, 0.0, 1.0]]))
    solve_zeta(phi, X)
    evaluate_theta(phi, X, np.full((3, 2), 0.5))


# --------------------------------------------------------------------------
# Reference: the paper's per-document SLSQP
# --------------------------------------------------------------------------

_TINY = np.finfo(np.float64).tiny


def _neg_logll(q, P, x):
    # the paper's neg_logll with counts instead of repeated indices; log(0) is
    # guarded (SLSQP may step onto / a hair past a bound) so SciPy never sees inf/nan
    return -np.dot(x, np.log(np.maximum(q @ P, _TINY)))


def solve_zeta_slsqp(phi, X, *, raw: bool = False, return_theta: bool = False):
    """Per-document SciPy SLSQP, as in the paper's ``model_stats.max_lda_logll``.

    minimize −Σ_w x_w log(θ·Φ_·w) from θ = uniform, bounds [0, 1] per coordinate,
    equality constraint Σθ = 1, SciPy's default SLSQP settings and
    finite-difference gradient (as the paper). Out-of-vocabulary words (all-zero
    Φ column) are dropped; documents with no words get 0.

    By default the value returned is f evaluated at SLSQP's θ after making it
    feasible (clip to [0, 1], renormalise), so it is an honest lower bound on ζ;
    ``raw=True`` returns the paper's ``-out.fun`` instead. SLSQP's θ may leave
    the simplex by its constraint tolerance (Σθ − 1 up to ~1e-7 measured on KOS),
    which inflates the raw value by ≈ n·(Σθ − 1): up to ~3e-5 above the true
    maximum for a 400-token document. ``return_theta=True`` also returns the θ
    rows the values were computed at (SLSQP's raw θ when ``raw``).
    """
    from scipy.optimize import minimize  # the SLSQP cross-check only, never on the hot path

    phi64 = np.asarray(phi, dtype=np.float64)
    k = phi64.shape[0]
    X = sp.csr_matrix(X, dtype=np.float64)
    keep = phi64.sum(axis=0) > 0
    init = np.repeat(1.0 / k, k)
    bounds = [(0.0, 1.0)] * k
    cons = {"type": "eq", "fun": lambda q: np.sum(q) - 1.0}
    out = np.zeros(X.shape[0])
    thetas = np.tile(init, (X.shape[0], 1))
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        w = X.indices[lo:hi]
        c = X.data[lo:hi]
        sel = keep[w] & (c > 0)
        if not sel.any():
            continue
        P = phi64[:, w[sel]]
        xc = c[sel]
        res = minimize(_neg_logll, init, args=(P, xc), method="SLSQP",
                       bounds=bounds, constraints=cons)
        q = np.clip(res.x, 0.0, 1.0)
        q = q / q.sum()
        if raw:
            thetas[i] = res.x
            out[i] = -res.fun
        else:
            thetas[i] = q
            pw = q @ P
            out[i] = float(np.dot(xc, np.log(pw))) if (pw > 0).all() else -np.inf
    if return_theta:
        return out, thetas
    return out
