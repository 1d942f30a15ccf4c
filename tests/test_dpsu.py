"""topicaudit.targets.learners.dpsu: DP Set Union vocabulary steps (docs/algorithms.md#dp-set-union).

* the analytic Gaussian calibration against a numerical hockey-stick integral;
* the compiled histogram builders against plain-Python references, and the
  contraction lemma the privacy proofs rest on (H ≤ H', Σ(H' − H) ≤ 1);
* the privacy property itself, estimated over thousands of seeded runs on tiny
  corpora with one-sided Clopper–Pearson bounds: for each correct variant the
  worst-case unique-token document and a shared token, both directions, and a
  power check (a threshold that is too low is caught);
* the public-code GW leak of unreached tokens, and its absence in the fix;
* determinism, the Δ0 cap, output format, guarantees and their composition;
* PHEME vocabulary sizes at ε ∈ {1, 3, 10} and the time per call.
"""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import quad
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from topicaudit.targets.base import Guarantee
from topicaudit.targets.privacy.composition import compose
from topicaudit.targets.privacy.analytic_gaussian import gaussian_delta
from topicaudit.targets.learners.dpsu import (
    DPSU_STEPS,
    GreedyWeightedDPSU,
    GreedyWeightedPublicCode,
    PolicyGaussianDPSU,
    PolicyLaplaceDPSU,
    _document_sets,
    _greedy_histogram,
    _l2_histogram,
    _waterfill_histogram,
    analytic_gaussian_sigma,
    gaussian_policy_threshold,
    gw_corrected_threshold,
    gw_public_threshold,
    laplace_policy_threshold,
)

ALPHA_CP = 1e-3  # one-sided error of each Clopper–Pearson bound


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def cp_upper(k: int, n: int, a: float = ALPHA_CP) -> float:
    return 1.0 if k >= n else float(beta_dist.ppf(1 - a, k + 1, n - k))


def cp_lower(k: int, n: int, a: float = ALPHA_CP) -> float:
    return 0.0 if k <= 0 else float(beta_dist.ppf(a, k, n - k + 1))


def corpus(rows: list[dict[int, int]], n_words: int) -> sp.csr_matrix:
    """CSR count matrix from a list of {column: count} documents."""
    data, indices, indptr = [], [], [0]
    for row in rows:
        for col, c in sorted(row.items()):
            indices.append(col)
            data.append(float(c))
        indptr.append(len(indices))
    return sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=(len(rows), n_words))


def hits(step, X, event_cols, n_runs: int, seed0: int) -> int:
    """Number of seeded runs in which some column of event_cols is released."""
    event = np.zeros(X.shape[1], dtype=bool)
    event[list(event_cols)] = True
    return sum(bool(event[step.select(X, seed0 + r)].any()) for r in range(n_runs))


def background(n_shared: int = 6, n_docs: int = 12, rng_seed: int = 0) -> list[dict[int, int]]:
    """A few documents over shared columns 0..n_shared-1 (counts 1-3)."""
    rng = np.random.default_rng(rng_seed)
    docs = []
    for _ in range(n_docs):
        cols = rng.choice(n_shared, size=rng.integers(1, 4), replace=False)
        docs.append({int(c): int(rng.integers(1, 4)) for c in cols})
    return docs


# --------------------------------------------------------------------------
# analytic Gaussian mechanism and thresholds
# --------------------------------------------------------------------------

def _hockey_stick(sigma, eps, sens=1.0):
    """∫ max(0, p − e^ε q) for p = N(0, σ²), q = N(sens, σ²), numerically."""
    f = lambda x: max(0.0, norm.pdf(x, 0, sigma) - math.exp(eps) * norm.pdf(x, sens, sigma))
    cut = sens / 2 - eps * sigma ** 2 / sens  # p > e^ε q exactly left of this point
    val, _ = quad(f, cut - 40 * sigma, cut, epsabs=1e-14, epsrel=1e-10, limit=200)
    return val


@pytest.mark.parametrize("eps,delta", [(0.1, 1e-5), (1.0, 1e-5), (1.0, 0.025), (3.0, 5e-6), (10.0, 1e-5)])
def test_analytic_gaussian_calibration(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    assert gaussian_delta(sigma, eps) <= delta
    assert gaussian_delta(sigma * (1 - 1e-6), eps) > delta  # smallest such σ
    assert _hockey_stick(sigma, eps) == pytest.approx(delta, rel=1e-5)
    # sensitivity scales σ linearly; the classical bound is looser where it applies
    assert analytic_gaussian_sigma(eps, delta, 2.5) == pytest.approx(2.5 * sigma, rel=1e-9)
    if eps < 1:
        assert sigma < math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_known_analytic_gaussian_value():
    # Balle & Wang 2018: ε = 1, δ = 1e-5 needs σ ≈ 3.73 (classical bound 4.84)
    assert analytic_gaussian_sigma(1.0, 1e-5) == pytest.approx(3.7306, abs=1e-3)


def test_thresholds_reduce_to_single_token_case():
    eps, delta = 2.0, 1e-5
    one = 1 + math.log(1 / (2 * delta)) / eps
    assert laplace_policy_threshold(eps, delta, 1) == pytest.approx(one)
    assert gw_corrected_threshold(eps, delta, 1) == pytest.approx(one)
    assert gw_public_threshold(eps, delta) == pytest.approx(one)
    sigma = analytic_gaussian_sigma(eps, delta / 2)
    assert gaussian_policy_threshold(sigma, delta, 1) == pytest.approx(1 + sigma * norm.isf(delta / 2))
    # the corrected GW threshold: ½e^{−ερ}(e^ε + Δ0 − 1) = δ
    for d0 in (2, 50, 300):
        rho = gw_corrected_threshold(eps, delta, d0)
        assert 0.5 * math.exp(-eps * rho) * (math.exp(eps) + d0 - 1) == pytest.approx(delta, rel=1e-12)
        assert rho > one
    # ρ_Lap: for every t ≤ Δ0, t new tokens at weight 1/t stay below ρ w.p. ≥ 1 − δ
    rho = laplace_policy_threshold(eps, delta, 40)
    for t in range(1, 41):
        assert (1 - 0.5 * math.exp(-eps * (rho - 1 / t))) ** t >= 1 - delta * (1 + 1e-9)


# --------------------------------------------------------------------------
# histogram builders: references and the contraction lemma
# --------------------------------------------------------------------------

def _rows(indptr, indices):
    return [list(indices[indptr[d]:indptr[d + 1]]) for d in range(len(indptr) - 1)]


def ref_greedy(rows, order, gamma, n):  # the public code's run_greedy_descent_step, on ordered rows
    H = np.zeros(n)
    for d in order:
        budget = 1.0
        for w in [w for w in rows[d] if H[w] < gamma]:
            cost = gamma - H[w]
            if cost < budget:
                H[w] += cost
                budget -= cost
            else:
                H[w] += budget
                break
    return H


def ref_waterfill(rows, order, gamma, n):  # level c by bisection: Σ min(gap, c) = 1
    H = np.zeros(n)
    for d in order:
        ws = [w for w in rows[d] if H[w] < gamma]
        if not ws:
            continue
        gaps = np.array([gamma - H[w] for w in ws])
        if gaps.sum() <= 1:
            c = np.inf
        else:
            lo, hi = 0.0, 1.0
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if np.minimum(gaps, mid).sum() < 1 else (lo, mid)
            c = hi
        for w, g in zip(ws, gaps):
            H[w] += min(g, c)
    return H


def ref_l2(rows, order, gamma, n):
    H = np.zeros(n)
    for d in order:
        ws = [w for w in rows[d] if H[w] < gamma]
        if not ws:
            continue
        g = np.array([gamma - H[w] for w in ws])
        z = np.linalg.norm(g)
        for w, gi in zip(ws, g):
            H[w] += min(1.0, z) * gi / z
    return H


def _random_corpus(rng, n_docs=40, n_words=30):
    X = sp.random(n_docs, n_words, density=0.2, random_state=rng, format="csr",
                  data_rvs=lambda k: rng.integers(1, 5, k).astype(float))
    return X


KERNELS = [(_greedy_histogram, ref_greedy, True), (_waterfill_histogram, ref_waterfill, False),
           (_l2_histogram, ref_l2, False)]


@pytest.mark.parametrize("kernel,ref,by_count", KERNELS)
@pytest.mark.parametrize("gamma", [0.7, 2.5])
def test_kernels_match_references(kernel, ref, by_count, gamma):
    rng = np.random.default_rng(1)
    for _ in range(20):
        X = _random_corpus(rng)
        indptr, indices, _ = _document_sets(X, rng, 6, by_count)
        order = rng.permutation(X.shape[0]).astype(np.int64)
        H = kernel(indptr, indices, order, gamma, X.shape[1])
        np.testing.assert_allclose(H, ref(_rows(indptr, indices), order, gamma, X.shape[1]), atol=1e-9)
        assert H.max() <= gamma + 1e-12


@pytest.mark.parametrize("kernel,ref,by_count", KERNELS)
def test_contraction_lemma(kernel, ref, by_count):
    """Adding one document anywhere in the order: H ≤ H' and Σ(H' − H) ≤ 1
    (‖H' − H‖₂ ≤ 1 for the L2 policy), under the coupling of the proofs."""
    rng = np.random.default_rng(2)
    l2 = kernel is _l2_histogram
    for trial in range(300):
        X = _random_corpus(rng, n_docs=int(rng.integers(5, 40)), n_words=int(rng.integers(5, 30)))
        indptr, indices, _ = _document_sets(X, rng, 8, by_count)
        rows = _rows(indptr, indices)
        n = X.shape[0]
        u = int(rng.integers(n))
        order_p = rng.permutation(n)
        gamma = float(rng.choice([0.5, 1.5, 4.0]))
        Hp = ref(rows, order_p, gamma, X.shape[1])
        H = ref(rows, [d for d in order_p if d != u], gamma, X.shape[1])
        diff = Hp - H
        assert diff.min() >= -1e-9
        assert (np.linalg.norm(diff) if l2 else diff.sum()) <= 1 + 1e-9


# --------------------------------------------------------------------------
# the privacy property, estimated
# --------------------------------------------------------------------------

EPS, DELTA, D0 = 1.0, 0.05, 8
N_RUNS = 4000
CORRECT = {
    "dpsu-laplace": lambda: PolicyLaplaceDPSU(EPS, DELTA, alpha=3.0, delta0=D0),
    "dpsu-gaussian": lambda: PolicyGaussianDPSU(EPS, DELTA, alpha=3.0, delta0=D0),
    "dpsu-gw": lambda: GreedyWeightedDPSU(EPS, DELTA, alpha=3.0, delta0=D0),
}


def worst_document(name: str, n_bg_words: int) -> tuple[dict[int, int], float]:
    """The variant's worst-case document of unshared tokens, and the exact
    probability that at least one of them is released (its δ-part)."""
    step = CORRECT[name]()
    if name == "dpsu-laplace":  # t equal weights 1/t; the worst t maximises ρ_Lap's bracket
        t = np.arange(1, D0 + 1)
        q = -np.expm1(np.log1p(-DELTA) / t)
        t_star = int(np.argmax(1 / t + np.log(1 / (2 * q)) / EPS)) + 1
        p = 1 - (1 - 0.5 * math.exp(-EPS * (step.rho - 1 / t_star))) ** t_star
        return {n_bg_words + j: 1 for j in range(t_star)}, p
    if name == "dpsu-gaussian":  # t equal weights 1/√t
        t = np.arange(1, D0 + 1)
        q = -np.expm1(np.log1p(-DELTA / 2) / t)
        t_star = int(np.argmax(1 / np.sqrt(t) - step.noise_scale * norm.ppf(q))) + 1
        p = 1 - norm.cdf((step.rho - 1 / math.sqrt(t_star)) / step.noise_scale) ** t_star
        return {n_bg_words + j: 1 for j in range(t_star)}, p
    # GW: the most frequent token takes weight 1, the other Δ0 − 1 stay at 0
    doc = {n_bg_words + j: (2 if j == 0 else 1) for j in range(D0)}
    p = 1 - (1 - 0.5 * math.exp(-EPS * (step.rho - 1))) * (1 - 0.5 * math.exp(-EPS * step.rho)) ** (D0 - 1)
    return doc, p


@pytest.mark.parametrize("name", list(CORRECT))
def test_unique_tokens_released_below_delta(name):
    """Worst case for the δ-part: a document whose tokens nobody else has.
    p₁ ≤ e^ε·p₀ + δ, with p₀ = 0 (absent tokens are never candidates)."""
    bg = background()
    d, p_theory = worst_document(name, 6)
    n_words = 6 + len(d)
    X1, X0 = corpus(bg + [d], n_words), corpus(bg, n_words)
    step = CORRECT[name]()
    k1 = hits(step, X1, d, N_RUNS, 10_000)
    k0 = hits(step, X0, d, N_RUNS, 20_000)
    assert k0 == 0
    assert p_theory <= DELTA * (1 + 1e-12)  # the threshold formula does its job ...
    assert cp_lower(k1, N_RUNS) <= p_theory <= cp_upper(k1, N_RUNS)  # ... and the code matches it
    assert cp_lower(k1, N_RUNS) <= math.exp(EPS) * cp_upper(k0, N_RUNS) + DELTA


@pytest.mark.parametrize("name", list(CORRECT))
def test_too_low_threshold_is_caught(name):
    """Power: the same estimate rejects the step when ρ is lowered by ln(2)/ε
    for Laplace noise (about twice the release probability), or by σ/2 for
    Gaussian noise (about four times its δ/2)."""
    bg = background()
    d, _ = worst_document(name, 6)
    X1 = corpus(bg + [d], 6 + len(d))
    step = CORRECT[name]()
    shift = math.log(2.0) / EPS if name != "dpsu-gaussian" else 0.5 * step.noise_scale
    step.rho -= shift
    k1 = hits(step, X1, d, N_RUNS, 10_000)
    assert cp_lower(k1, N_RUNS) > DELTA


@pytest.mark.parametrize("name", list(CORRECT))
def test_shared_token_both_directions(name):
    """The ε-part: a token s held by k single-token documents, with and without
    one more such document d; weights k vs k + 1, both below ρ, so the release
    probabilities sit at the tight ratio e^ε for Laplace noise. Checked for the
    events "s released" and "s not released", in both directions."""
    step = CORRECT[name]()
    k = int(math.floor(step.rho)) - 1
    X0 = corpus([{0: 1}] * k + [{1: 1}], 2)
    X1 = corpus([{0: 1}] * (k + 1) + [{1: 1}], 2)
    k1 = hits(step, X1, [0], N_RUNS, 30_000)
    k0 = hits(step, X0, [0], N_RUNS, 40_000)
    e = math.exp(EPS)
    for a, b in ((k1, k0), (k0, k1), (N_RUNS - k1, N_RUNS - k0), (N_RUNS - k0, N_RUNS - k1)):
        assert cp_lower(a, N_RUNS) <= e * cp_upper(b, N_RUNS) + DELTA
    if name != "dpsu-gaussian":  # the ratio really is e^ε: the check is tight
        p0 = 0.5 * math.exp(-EPS * (step.rho - k))
        assert cp_lower(k0, N_RUNS) <= p0 <= cp_upper(k0, N_RUNS)
        assert cp_lower(k1, N_RUNS) <= e * p0 <= cp_upper(k1, N_RUNS)


def test_public_code_leaks_unreached_tokens():
    """A document with one frequent and m = 300 further tokens nobody else has:
    the public-code GW spends its budget on the first and still releases each
    unreached one w.p. δe^{−ε}; the corrected GW (Δ0 = 301) stays below δ."""
    eps, delta, m, n_runs = 1.0, 1e-3, 300, 2000
    bg = background()
    d = {6 + j: (3 if j == 0 else 1) for j in range(m + 1)}
    X1 = corpus(bg + [d], 6 + m + 1)
    unreached = [6 + j for j in range(1, m + 1)]

    public = GreedyWeightedPublicCode(eps, delta)
    k_pub = hits(public, X1, unreached, n_runs, 50_000)
    p_theory = 1 - (1 - delta * math.exp(-eps)) ** m  # ≈ 0.104
    assert cp_lower(k_pub, n_runs) <= p_theory <= cp_upper(k_pub, n_runs)
    assert cp_lower(k_pub, n_runs) > 20 * delta  # far beyond the claimed δ
    assert public.effective_delta(m + 1) == pytest.approx(1 - (1 - delta) * (1 - delta * math.exp(-eps)) ** m)
    assert public.effective_delta(m + 1) == pytest.approx(delta * (1 + m * math.exp(-eps)), rel=0.1)

    fixed = GreedyWeightedDPSU(eps, delta, delta0=m + 1)
    k_fix = hits(fixed, X1, list(d), n_runs, 50_000)
    assert cp_lower(k_fix, n_runs) <= delta


# --------------------------------------------------------------------------
# determinism, Δ0 cap, output format
# --------------------------------------------------------------------------

ALL = {
    "dpsu-laplace": lambda **kw: PolicyLaplaceDPSU(**kw),
    "dpsu-gaussian": lambda **kw: PolicyGaussianDPSU(**kw),
    "dpsu-gw": lambda **kw: GreedyWeightedDPSU(**kw),
    "dpsu-gw-public-code": lambda **kw: GreedyWeightedPublicCode(**{k: v for k, v in kw.items() if k != "delta0"}),
}


def _zipf_corpus(seed=3, n_docs=600, n_words=400):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, n_words + 1)
    p /= p.sum()
    rows = []
    for _ in range(n_docs):
        toks = rng.choice(n_words, size=rng.integers(3, 30), p=p)
        rows.append(dict(zip(*np.unique(toks, return_counts=True))))
    return corpus([{int(a): int(b) for a, b in r.items()} for r in rows], n_words)


@pytest.mark.parametrize("name", list(ALL))
def test_determinism_and_format(name):
    X = _zipf_corpus()
    step = ALL[name](epsilon=2.0, delta=1e-3, delta0=10)
    a, b = step.select(X, 7), step.select(X, 7)
    assert a.dtype == np.int64 and np.array_equal(a, b)
    assert np.all(np.diff(a) > 0) and (a.size == 0 or (a[0] >= 0 and a[-1] < X.shape[1]))
    assert set(a) <= set(np.flatnonzero(np.bincount(X.indices, minlength=X.shape[1])))
    assert a.size > 10
    assert any(not np.array_equal(a, step.select(X, s)) for s in range(8, 12))
    assert step.select(X[:0], 7).size == 0
    assert name in DPSU_STEPS and DPSU_STEPS[name] is type(step)


@pytest.mark.parametrize("name", ["dpsu-laplace", "dpsu-gaussian", "dpsu-gw"])
def test_delta0_cap(name):
    """With ρ = −∞ every candidate is released: exactly Δ0 of a long document's
    tokens, a random subset (Gopi) or its most frequent ones (GW)."""
    n = 50
    counts = {j: (10 + (n - j) if j < 5 else 1) for j in range(n)}
    X = corpus([counts, {n: 1}], n + 1)
    step = ALL[name](epsilon=1.0, delta=1e-5, delta0=5)
    step.rho = -np.inf
    seen = set()
    for s in range(20):
        out = step.select(X, s)
        assert out.size == 5 + 1 and n in out
        seen |= set(out.tolist())
    if name == "dpsu-gw":
        assert seen == {0, 1, 2, 3, 4, n}
    else:
        assert len(seen) > 20
    public = GreedyWeightedPublicCode(1.0, 1e-5)
    public.rho = -np.inf
    assert public.select(X, 0).size == n + 1  # no cap


def test_parameter_validation():
    for bad in (dict(epsilon=0.0), dict(epsilon=-1.0), dict(delta=0.0), dict(delta=0.7), dict(alpha=-1.0),
                dict(delta0=0), dict(delta0=2.5)):
        with pytest.raises(ValueError):
            PolicyLaplaceDPSU(**bad)
    with pytest.raises(TypeError):
        GreedyWeightedPublicCode(delta0=5)


# --------------------------------------------------------------------------
# guarantees
# --------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ALL))
def test_guarantee_and_composition(name):
    step = ALL[name](epsilon=1.5, delta=2e-5, alpha=3.0, delta0=32)
    g = step.guarantee()
    assert (g.epsilon, g.delta, g.adjacency) == (1.5, 2e-5, "document")
    assert g.parameters["alpha"] == 3.0 and g.parameters["rho"] == step.rho
    assert g.parameters["Gamma"] == pytest.approx(step.rho + 3.0 * step.noise_scale)
    if name == "dpsu-gw-public-code":
        assert g.basis == "paper-claim" and g.parameters["flawed"] is True
        assert g.parameters["effective_delta_m300"] > 10 * g.delta
    else:
        assert g.basis == "theorem" and g.accountant and g.parameters["delta0"] == 32
    learner = Guarantee(epsilon=3.0, delta=1e-6, adjacency="document", basis="theorem", accountant="dummy")
    total = compose(g, learner)
    assert total.epsilon == pytest.approx(4.5) and total.delta == pytest.approx(2e-5 + 1e-6)
    assert total.parameters["parts"][0] == g.to_json()
    json.dumps(total.to_json())


def test_paper_defaults():
    for cls in (PolicyLaplaceDPSU, PolicyGaussianDPSU, GreedyWeightedDPSU, GreedyWeightedPublicCode):
        step = cls()
        assert (step.epsilon, step.delta, step.alpha) == (3.0, 1e-5, 3.0)
    # docs/algorithms.md#dp-set-union-defect: public code, m = 300, ε = 3 → effective δ ≈ 1.6e-4
    assert GreedyWeightedPublicCode(3.0, 1e-5).effective_delta(300) == pytest.approx(1.6e-4, rel=0.05)


# --------------------------------------------------------------------------
# PHEME
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pheme(pheme_path):
    from sklearn.feature_extraction.text import CountVectorizer
    texts = json.loads(pheme_path.read_text())["text"]
    return CountVectorizer().fit_transform(texts).tocsr()


def test_pheme_vocabulary_grows_with_epsilon(pheme):
    X = pheme
    assert X.shape[1] == 5942  # the paper's Figure 8: original vocabulary 5,942
    report = []
    for name, make in ALL.items():
        sizes, times = [], []
        for eps in (1.0, 3.0, 10.0):
            step = make(epsilon=eps, delta=1e-5, alpha=3.0, delta0=64)
            step.select(X, 0)  # compile / warm up
            t0 = time.perf_counter()
            sizes.append(int(step.select(X, 1).size))
            times.append(time.perf_counter() - t0)
        report.append(f"{name:22s} |V| at ε=1,3,10: {sizes}  seconds/call: {[round(t, 3) for t in times]}")
        assert sizes[0] < sizes[1] < sizes[2] < X.shape[1]
        assert sizes[0] > 50
        assert max(times) < 1.0
    print("\nPHEME (5,698 docs, 5,942 words), δ = 1e-5, α = 3, Δ0 = 64\n" + "\n".join(report))
