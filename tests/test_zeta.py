"""Tests for topicaudit.attacks.zeta: ζ(Φ, d) = max_θ Σ_w x_w log(θ·Φ_·w), certified.

Real data: a sklearn LDA (k = 5) fitted to a random half of PHEME, all 5,698
tweets as queries; a k = 10 LDA on part of KOS. Data are read in place from
../shared/data beside the repository (tests/conftest.py; tests skip if it is absent).
"""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.attacks.zeta import ZetaResult, evaluate_theta, solve_zeta, solve_zeta_slsqp

TOL = 1e-8


# ---------------------------------------------------------------- helpers


def fit_phi(X_all: sp.csr_matrix, rows: np.ndarray, k: int, seed: int = 0,
            max_iter: int = 10) -> np.ndarray:
    """sklearn LDA on X_all[rows], restricted to the words those rows use; Φ is
    embedded back into the full vocabulary with all-zero columns for the other
    words (how the engine represents a model's released vocabulary)."""
    from sklearn.decomposition import LatentDirichletAllocation

    Xtr = X_all[rows]
    vocab = np.flatnonzero(np.asarray(Xtr.sum(axis=0)).ravel() > 0)
    lda = LatentDirichletAllocation(n_components=k, random_state=seed, max_iter=max_iter)
    lda.fit(Xtr[:, vocab])
    comp = lda.components_ / lda.components_.sum(axis=1, keepdims=True)
    phi = np.zeros((k, X_all.shape[1]))
    phi[:, vocab] = comp
    return phi


def f_and_grad(phi, x_row: np.ndarray, theta: np.ndarray):
    """Dense NumPy f(θ) and g(θ) for one document (kept words only)."""
    keep = phi.sum(axis=0) > 0
    w = np.flatnonzero((x_row > 0) & keep)
    P = np.asarray(phi, dtype=np.float64)[:, w]
    x = x_row[w]
    p = theta @ P
    return float(x @ np.log(p)), P @ (x / p), float(x.sum())


def load_kos(path) -> sp.csr_matrix:
    with open(path) as fh:
        D, W, _ = int(fh.readline()), int(fh.readline()), int(fh.readline())
        a = np.loadtxt(fh, dtype=np.int64)
    return sp.csr_matrix((a[:, 2].astype(np.float64), (a[:, 0] - 1, a[:, 1] - 1)),
                         shape=(D, W))


def check_result(R: ZetaResult, n_docs: int, k: int, tol: float = TOL):
    assert R.zeta.shape == (n_docs,) and R.zeta.dtype == np.float64
    assert R.theta.shape == (n_docs, k) and R.theta.dtype == np.float64
    assert R.gap.shape == (n_docs,) and R.gap.dtype == np.float64
    assert np.all(np.isfinite(R.zeta))
    assert np.all(R.theta >= 0.0)
    np.testing.assert_allclose(R.theta.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(R.gap >= 0.0)
    assert R.gap.max() <= tol, f"largest gap {R.gap.max():.3g}"
    assert R.converged.all()


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pheme(pheme_path):
    from sklearn.feature_extraction.text import CountVectorizer

    texts = json.loads(pheme_path.read_text())["text"]
    X = CountVectorizer().fit_transform(texts).astype(np.float64).tocsr()
    rng = np.random.default_rng(0)
    half = rng.permutation(X.shape[0])[: X.shape[0] // 2]
    phi = fit_phi(X, half, k=5, seed=0)
    R = solve_zeta(phi, X)
    return phi, X, R


@pytest.fixture(scope="module")
def kos(kos_path):
    X = load_kos(kos_path)
    rng = np.random.default_rng(1)
    rows = rng.permutation(X.shape[0])[:800]
    phi = fit_phi(X, rows, k=10, seed=0, max_iter=5)
    return phi, X


# ---------------------------------------------------------------- real data


def test_pheme_all_documents_certified(pheme):
    phi, X, R = pheme
    assert X.shape[0] == 5698
    assert (phi.sum(axis=0) == 0).any(), "the fixture should exercise dropped words"
    check_result(R, X.shape[0], 5)
    # the optimum is often on a face of the simplex: exact zeros must appear
    assert (R.theta == 0.0).any(axis=1).mean() > 0.3


def test_pheme_never_below_slsqp(pheme):
    phi, X, R = pheme
    rng = np.random.default_rng(123)
    s = np.sort(rng.choice(X.shape[0], 300, replace=False))
    sl, sl_theta = solve_zeta_slsqp(phi, X[s], return_theta=True)
    diff = sl - R.zeta[s]
    assert diff.max() <= 1e-6
    # SLSQP's (feasible) value is a lower bound on ζ*, and ζ* − ζ ≤ gap ≤ tol
    assert diff.max() <= TOL + 1e-10
    # the paper's raw value (−out.fun, θ possibly off the simplex by SLSQP's tolerance)
    raw = solve_zeta_slsqp(phi, X[s], raw=True)
    assert (raw - R.zeta[s]).max() <= 1e-6
    np.testing.assert_allclose(sl_theta.sum(axis=1), 1.0, atol=1e-12)


def test_certificate_is_valid(pheme):
    phi, X, R = pheme
    rng = np.random.default_rng(7)
    n = X.shape[0]
    # (1) no feasible θ beats ζ (beyond rounding) ...
    for _ in range(3):
        th = rng.dirichlet(np.ones(5), size=n)
        f, gap = evaluate_theta(phi, X, th)
        assert np.all(f <= R.zeta + 1e-9)
        # (2) ... and the gap at a non-optimal θ bounds its true suboptimality
        assert np.all(R.zeta - f <= gap + 1e-9)
        assert np.median(gap) > 1e-3  # these θ really are far from optimal
    # (3) same for partially converged iterates (EM only, no Newton)
    P = solve_zeta(phi, X, max_em=3, max_newton=0, max_fallback=0, warn=False)
    assert (~P.converged).sum() > 100
    assert np.all(P.zeta <= R.zeta + 1e-9)
    assert np.all(R.zeta - P.zeta <= P.gap + 1e-9)
    # (4) evaluate_theta at θ̂ reproduces ζ and the reported gap
    f, gap = evaluate_theta(phi, X, R.theta)
    np.testing.assert_allclose(f, R.zeta, rtol=0, atol=1e-9)
    assert np.all(np.maximum(gap, 0.0) <= TOL + 1e-12)


def test_kkt_at_the_solution(pheme):
    """g_z = n on the support, g_z ≤ n + tol off it (checked in dense NumPy)."""
    phi, X, R = pheme
    Xd = X[:400].toarray()
    for i in range(400):
        if Xd[i][phi.sum(axis=0) > 0].sum() == 0:
            continue
        f, g, n = f_and_grad(phi, Xd[i], R.theta[i])
        assert abs(f - R.zeta[i]) <= 1e-9 * max(1.0, abs(f))
        assert g.max() - n <= TOL + 1e-10
        supp = R.theta[i] > 1e-6
        assert np.all(np.abs(g[supp] - n) <= 1e-5 * n + TOL)


def test_kos_k10(kos):
    phi, X = kos
    R = solve_zeta(phi, X)
    check_result(R, X.shape[0], 10)
    rng = np.random.default_rng(5)
    s = np.sort(rng.choice(X.shape[0], 25, replace=False))
    sl = solve_zeta_slsqp(phi, X[s])
    assert (sl - R.zeta[s]).max() <= TOL + 1e-10
    th = rng.dirichlet(np.ones(10), size=X.shape[0])
    f, gap = evaluate_theta(phi, X, th)
    assert np.all(f <= R.zeta + 1e-8)
    assert np.all(R.zeta - f <= gap + 1e-8)


# ---------------------------------------------------------------- hand-checkable


def test_single_word_is_best_topic():
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(30, 0.5), size=6)
    rows, cols, vals = [], [], []
    for i, (w, c) in enumerate([(0, 1), (3, 2), (7, 5), (29, 17), (12, 0.5)]):
        rows.append(i), cols.append(w), vals.append(float(c))
    X = sp.csr_matrix((vals, (rows, cols)), shape=(5, 30))
    R = solve_zeta(phi, X)
    check_result(R, 5, 6)
    for i, (w, c) in enumerate(zip(cols, vals)):
        assert R.zeta[i] == pytest.approx(c * np.log(phi[:, w].max()), abs=1e-12)
        assert R.theta[i, np.argmax(phi[:, w])] == pytest.approx(1.0, abs=1e-12)


def test_single_word_on_real_model(pheme):
    phi, X, _ = pheme
    words = np.flatnonzero(phi.sum(axis=0) > 0)[:50]
    X1 = sp.csr_matrix((np.full(50, 3.0), (np.arange(50), words)), shape=(50, phi.shape[1]))
    R = solve_zeta(phi, X1)
    check_result(R, 50, 5)
    np.testing.assert_allclose(R.zeta, 3.0 * np.log(phi[:, words].max(axis=0)), rtol=0,
                               atol=1e-12)


def test_identical_rows():
    rng = np.random.default_rng(1)
    row = rng.dirichlet(np.ones(40))
    phi = np.tile(row, (4, 1))
    X = sp.csr_matrix(rng.poisson(0.5, size=(30, 40)).astype(np.float64))
    R = solve_zeta(phi, X)
    check_result(R, 30, 4)
    expected = X @ np.log(row)
    np.testing.assert_allclose(R.zeta, expected, rtol=0, atol=1e-10)


def test_k2_two_words_closed_form():
    """k = 2, two words: f'(t) = 0 is linear in t (θ = (t, 1 − t)), clipped to [0, 1]."""
    rng = np.random.default_rng(2)
    n_hit_face = 0
    for trial in range(200):
        phi = rng.dirichlet(np.ones(5), size=2)
        x1, x2 = rng.integers(1, 6, size=2).astype(float)
        a1, a2 = phi[0, 0], phi[0, 1]
        b1, b2 = phi[1, 0], phi[1, 1]
        c1, c2 = a1 - b1, a2 - b2
        t = -(x1 * c1 * b2 + x2 * c2 * b1) / ((x1 + x2) * c1 * c2)
        ts = [0.0, 1.0] + ([t] if 0.0 < t < 1.0 else [])
        vals = [x1 * np.log(b1 + s * c1) + x2 * np.log(b2 + s * c2) for s in ts]
        best = int(np.argmax(vals))
        X = sp.csr_matrix(np.array([[x1, x2, 0, 0, 0]]))
        R = solve_zeta(phi, X)
        check_result(R, 1, 2)
        assert R.zeta[0] == pytest.approx(vals[best], abs=1e-9)
        assert R.theta[0, 0] == pytest.approx(ts[best], abs=1e-6)
        if best < 2:  # the optimum is a vertex: θ̂ must hit it exactly
            n_hit_face += 1
            assert R.theta[0, best] == 0.0  # t = 0 ⇒ θ_0 = 0; t = 1 ⇒ θ_1 = 0
    assert n_hit_face > 20


def test_k2_brute_force_grid():
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(3)
    phi = rng.dirichlet(np.full(50, 0.3), size=2)
    X = sp.csr_matrix(rng.poisson(0.3, size=(40, 50)).astype(np.float64))
    R = solve_zeta(phi, X)
    check_result(R, 40, 2)
    grid = np.linspace(0.0, 1.0, 20001)
    for i in range(40):
        x = X[i].toarray().ravel()
        if x.sum() == 0:
            assert R.zeta[i] == 0.0
            continue
        with np.errstate(divide="ignore"):
            F = np.log(np.outer(grid, phi[0]) + np.outer(1 - grid, phi[1])) @ x
        res = minimize_scalar(
            lambda t: -(x @ np.log(t * phi[0] + (1 - t) * phi[1])),
            bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-12})
        best = max(F.max(), -res.fun)
        assert R.zeta[i] >= best - 1e-9
        assert R.zeta[i] <= best + 1e-6  # the grid + Brent are within 1e-6 of the optimum


def test_optimum_on_a_face():
    # topic 2 is dominated on the document's words: θ̂ = (½, ½, 0) exactly
    phi = np.array([[0.6, 0.1, 0.3],
                    [0.1, 0.6, 0.3],
                    [0.2, 0.2, 0.6]])
    X = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [4.0, 4.0, 0.0]]))
    R = solve_zeta(phi, X)
    check_result(R, 2, 3)
    assert np.all(R.theta[:, 2] == 0.0)
    np.testing.assert_allclose(R.theta[:, :2], 0.5, atol=1e-8)
    np.testing.assert_allclose(R.zeta, [2 * np.log(0.35), 8 * np.log(0.35)], atol=1e-12)


def test_face_random_with_kkt():
    """Random sparse problems: zeros in θ̂ are exact and satisfy g_z ≤ n."""
    rng = np.random.default_rng(4)
    k, V = 12, 80
    phi = rng.dirichlet(np.full(V, 0.1), size=k)
    X = sp.csr_matrix(rng.poisson(0.2, size=(200, V)).astype(np.float64))
    R = solve_zeta(phi, X)
    check_result(R, 200, k)
    Xd = X.toarray()
    zeros = 0
    for i in range(200):
        if Xd[i].sum() == 0:
            continue
        _, g, n = f_and_grad(phi, Xd[i], R.theta[i])
        off = R.theta[i] == 0.0
        zeros += off.sum()
        assert np.all(g[off] <= n + TOL)
    assert zeros > 500


def test_dropped_words_and_empty_documents():
    rng = np.random.default_rng(5)
    k, V = 4, 30
    phi = rng.dirichlet(np.ones(V), size=k)
    dropped = np.array([0, 5, 6, 29])
    phi[:, dropped] = 0.0
    phi /= phi.sum(axis=1, keepdims=True)
    Xd = rng.poisson(0.7, size=(25, V)).astype(np.float64)
    Xd[3] = 0.0                      # empty document
    Xd[4] = 0.0
    Xd[4, dropped] = [2, 1, 1, 3]    # only out-of-vocabulary words
    R = solve_zeta(phi, sp.csr_matrix(Xd))
    check_result(R, 25, k)
    for i in (3, 4):
        assert R.zeta[i] == 0.0 and R.gap[i] == 0.0
        np.testing.assert_array_equal(R.theta[i], np.full(k, 1.0 / k))
    # dropping = deleting those columns from X
    Xk = Xd.copy()
    Xk[:, dropped] = 0.0
    R2 = solve_zeta(phi, sp.csr_matrix(Xk))
    np.testing.assert_array_equal(R.zeta, R2.zeta)
    np.testing.assert_array_equal(R.theta, R2.theta)
    # an all-empty matrix and a matrix with no rows
    R3 = solve_zeta(phi, sp.csr_matrix((3, V)))
    assert np.all(R3.zeta == 0.0) and np.all(R3.theta == 1.0 / k)
    R4 = solve_zeta(phi, sp.csr_matrix((0, V)))
    assert R4.zeta.shape == (0,) and R4.theta.shape == (0, k)
    # SLSQP reference agrees on the conventions
    sl = solve_zeta_slsqp(phi, sp.csr_matrix(Xd))
    assert sl[3] == 0.0 and sl[4] == 0.0
    assert (sl - R.zeta).max() <= TOL + 1e-10


def test_float32_phi(pheme):
    phi, X, R64 = pheme
    phi32 = phi.astype(np.float32)
    R32 = solve_zeta(phi32, X)
    check_result(R32, X.shape[0], 5)
    # computed in float64 internally: identical to the up-cast matrix
    Rup = solve_zeta(phi32.astype(np.float64), X)
    np.testing.assert_array_equal(R32.zeta, Rup.zeta)
    np.testing.assert_array_equal(R32.theta, Rup.theta)
    # and close to the float64 model (Φ rounded to float32: relative 6e-8 per entry)
    assert np.max(np.abs(R32.zeta - R64.zeta) / np.maximum(1.0, np.abs(R64.zeta))) < 1e-6
    # float32 vocabulary = float64 vocabulary (no column rounds to zero)
    assert np.array_equal(phi32.sum(axis=0) > 0, phi.sum(axis=0) > 0)


def test_singular_hessians_converge():
    """Duplicated topics, a topic that is a mixture of two others, more free
    topics than distinct words: the Hessian is singular; all must certify."""
    rng = np.random.default_rng(6)
    V = 60
    base = rng.dirichlet(np.full(V, 0.3), size=4)
    mix = 0.3 * base[0] + 0.7 * base[1]
    X = sp.csr_matrix(rng.poisson(0.1, size=(300, V)).astype(np.float64))
    for phi in (np.vstack([base, base[:2]]), np.vstack([base, mix]),
                np.vstack([base, base[0] * (1 + 1e-9 * rng.random(V))])):
        R = solve_zeta(phi, X)
        check_result(R, 300, phi.shape[0])
        sl = solve_zeta_slsqp(phi, X[:30])
        assert (sl - R.zeta[:30]).max() <= TOL + 1e-10


def test_long_documents_and_large_counts():
    rng = np.random.default_rng(7)
    k, V = 25, 400
    phi = rng.dirichlet(np.full(V, 0.05), size=k)
    X = sp.csr_matrix(rng.poisson(5.0, size=(20, V)).astype(np.float64))
    for scale in (1.0, 1000.0):
        R = solve_zeta(phi, X * scale)
        check_result(R, 20, k)
        th = rng.dirichlet(np.ones(k), size=20)
        f, gap = evaluate_theta(phi, X * scale, th)
        assert np.all(f <= R.zeta + 1e-9 * np.abs(R.zeta))


def test_k1_and_input_conversions():
    rng = np.random.default_rng(8)
    phi = rng.dirichlet(np.ones(10), size=1)
    Xd = rng.poisson(1.0, size=(5, 10))
    R = solve_zeta(phi, sp.csr_matrix(Xd))       # integer CSR is converted
    np.testing.assert_allclose(R.zeta, Xd @ np.log(phi[0]), atol=1e-12)
    assert np.all(R.theta == 1.0)
    R2 = solve_zeta(phi, Xd.astype(float))       # dense input accepted too
    np.testing.assert_array_equal(R.zeta, R2.zeta)


def test_input_validation():
    phi = np.full((2, 4), 0.25)
    with pytest.raises(ValueError, match="columns"):
        solve_zeta(phi, sp.csr_matrix((2, 5)))
    with pytest.raises(ValueError, match="non-negative"):
        solve_zeta(-phi, sp.csr_matrix((2, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        solve_zeta(phi, sp.csr_matrix(np.array([[1.0, -1.0, 0.0, 0.0]])))
    with pytest.raises(ValueError, match="tol"):
        solve_zeta(phi, sp.csr_matrix((2, 4)), tol=0.0)


def test_nonconvergence_is_reported():
    # starve the solver: the warning and the converged flags must say so
    rng = np.random.default_rng(9)
    phi = rng.dirichlet(np.ones(20), size=5)
    X = sp.csr_matrix(rng.poisson(1.0, size=(10, 20)).astype(np.float64))
    with pytest.warns(RuntimeWarning, match="gap > tol"):
        R = solve_zeta(phi, X, max_em=1, max_newton=0, max_fallback=0)
    assert not R.converged.all()
    assert np.all(R.gap[~R.converged] > TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_zeta(phi, X, max_em=1, max_newton=0, max_fallback=0, warn=False)


def test_em_fallback_alone_certifies_interior_optima():
    # with Newton disabled the monotone EM fallback must still reach the
    # certificate where EM converges linearly (interior optimum, long documents)
    rng = np.random.default_rng(10)
    phi = rng.dirichlet(np.full(50, 2.0), size=3)
    X = sp.csr_matrix(rng.poisson(3.0, size=(10, 50)).astype(np.float64))
    R = solve_zeta(phi, X)
    E = solve_zeta(phi, X, max_em=0, max_newton=0, max_fallback=100_000, warn=False)
    assert np.all(R.theta > 0)
    check_result(E, 10, 3)
    np.testing.assert_allclose(E.zeta, R.zeta, rtol=0, atol=2e-8)
