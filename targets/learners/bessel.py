"""The Bessel distribution: exact pmf and a compiled sampler.

Bes(ν, a), ν > −1, a > 0 (Yuan & Kalbfleisch 2000), on n = 0, 1, 2, ...:

    P(n) = (a/2)^(2n+ν) / (I_ν(a) · n! · Γ(n + ν + 1)).

Schein et al. (2019, Thm 3) use it for the minimum of two Poisson counts given
their difference: if y₁ ~ Pois(λ₁), y₂ ~ Pois(λ₂) then, given τ = y₁ − y₂,
min(y₁, y₂) ~ Bes(|τ|, 2√(λ₁λ₂)). The locally private Poisson factorisation
sampler draws one per cell per sweep, so the sampler is compiled and needs no
Bessel function: both methods work with the unnormalised pmf

    q(n) = exp((2n + ν) ln(a/2) − ln n! − ln Γ(n + ν + 1)),

whose successive ratios r(n) = q(n+1)/q(n) = (a/2)² / ((n+1)(n+ν+1)) decrease
in n, so the distribution is discrete log-concave with mode
m = ⌊(√(a² + ν²) − ν)/2⌋ (Devroye 2002).

Sampling (``bessel_sample``): inversion by sequential search from the mode when the spread is small,
otherwise rejection from a mode-centred hat built from log-concavity alone (its derivation and the
constant 1.45: docs/algorithms.md#bessel-sampler).

Both methods are exact samplers of Bes(ν, a); ``tests/test_bessel.py`` checks
each against the exact pmf over a grid of ν and a, including the regions where
the other method is the one used.

Randomness comes from a ``numpy.random.Generator`` handed to the compiled code
(numba supports PCG64 generators), so one seed fixes every draw.
"""
from __future__ import annotations

import math

import numpy as np
from topicaudit.jit import njit
from scipy.special import gammaln, ive, logsumexp

__all__ = ["bessel_logpmf", "bessel_mode", "bessel_sample", "sample_bessel"]

_INVERSION_MAX_VAR = 16.0   # σ̂² below which inversion from the mode is used
_TAIL_REL = 1e-16          # truncation of Z in the inversion method


@njit(cache=True)
def bessel_mode(nu: float, a: float) -> int:
    """The mode ⌊(√(a² + ν²) − ν)/2⌋ of Bes(ν, a)."""
    return math.floor(0.5 * (math.sqrt(a * a + nu * nu) - nu))


@njit(cache=True)
def _log_q(n, nu, log_half_a):
    return (2.0 * n + nu) * log_half_a - math.lgamma(n + 1.0) - math.lgamma(n + nu + 1.0)


@njit(cache=True)
def _spread2(m, nu):
    """Inverse curvature of ln q at the mode, a variance proxy."""
    return 1.0 / (1.0 / (m + 1.0) + 1.0 / (m + nu + 1.0))


@njit(cache=True)
def _bessel_inversion(rng, nu, a):
    """Inversion by sequential search from the mode (exact up to a 1e-16 tail)."""
    m = bessel_mode(nu, a)
    h2 = 0.25 * a * a  # (a/2)²
    # Z = Σ q(n)/q(m): right of the mode until the tail bound is negligible ...
    z = 1.0
    w = 1.0
    n = m
    while True:
        r = h2 / ((n + 1.0) * (n + nu + 1.0))
        w *= r
        n += 1
        z += w
        rn = h2 / ((n + 1.0) * (n + nu + 1.0))
        if rn < 1.0 and w * rn / (1.0 - rn) < _TAIL_REL * z:
            break
    # ... and left of it, down to 0; moving left the ratios q(n-1)/q(n) = n(n+ν)/(a/2)² decrease too.
    w = 1.0
    n = m
    while n > 0:
        w *= n * (n + nu) / h2
        n -= 1
        z += w
        rl = n * (n + nu) / h2
        if rl < 1.0 and w * rl / (1.0 - rl) < _TAIL_REL * z:
            break
    u = rng.random() * z
    # Visit n in order of decreasing weight, starting at the mode.
    acc = 1.0
    if u <= acc:
        return m
    left = m - 1
    right = m + 1
    w_left = m * (m + nu) / h2  # q(m-1)/q(m); unused when m = 0
    w_right = h2 / ((m + 1.0) * (m + nu + 1.0))
    while True:
        if left >= 0 and w_left >= w_right:
            acc += w_left
            if u <= acc:
                return left
            w_left *= left * (left + nu) / h2
            left -= 1
        else:
            acc += w_right
            if u <= acc or w_right == 0.0:
                return right
            w_right *= h2 / ((right + 1.0) * (right + nu + 1.0))
            right += 1


@njit(cache=True)
def _bessel_rejection(rng, nu, a):
    """Rejection from the mode-centred flat-plus-geometric hat (exact)."""
    m = bessel_mode(nu, a)
    lha = math.log(0.5 * a)
    lq_m = _log_q(m, nu, lha)
    t = max(2, int(1.45 * math.sqrt(_spread2(m, nu)) + 0.5))
    # Right side: flat for k = 0..t-1, then ρ_R^k.
    log_rho_r = (_log_q(m + t, nu, lha) - lq_m) / t
    rho_r = math.exp(log_rho_r)
    w_flat_r = float(t)
    w_tail_r = math.exp(t * log_rho_r) / (1.0 - rho_r)
    # Left side: flat for k = 1..min(t-1, m), then ρ_L^k for t ≤ k ≤ m.
    n_flat_l = min(t - 1, m)
    w_flat_l = float(n_flat_l)
    if m >= t:
        log_rho_l = (_log_q(m - t, nu, lha) - lq_m) / t
        rho_l = math.exp(log_rho_l)
        w_tail_l = math.exp(t * log_rho_l) / (1.0 - rho_l)
    else:
        log_rho_l = 0.0
        w_tail_l = 0.0
    total = w_flat_r + w_tail_r + w_flat_l + w_tail_l
    while True:
        u = rng.random() * total
        if u < w_flat_r:
            k = min(int(u), t - 1)  # uniform on 0..t-1
            n = m + k
            log_hat = 0.0
        elif u < w_flat_r + w_tail_r:
            g = math.floor(math.log(1.0 - rng.random()) / log_rho_r)
            k = t + g
            n = m + k
            log_hat = k * log_rho_r
        elif u < w_flat_r + w_tail_r + w_flat_l:
            k = min(1 + int(rng.random() * n_flat_l), n_flat_l)
            n = m - k
            log_hat = 0.0
        else:
            g = math.floor(math.log(1.0 - rng.random()) / log_rho_l)
            k = t + g
            if k > m:
                continue
            n = m - k
            log_hat = k * log_rho_l
        if math.log(1.0 - rng.random()) <= _log_q(n, nu, lha) - lq_m - log_hat:
            return n


@njit(cache=True)
def bessel_sample(rng, nu, a):
    """One draw from Bes(ν, a); a ≤ 0 gives 0 (the a → 0 limit for ν ≥ 0)."""
    if not a > 0.0:
        return 0
    m = bessel_mode(nu, a)
    if _spread2(m, nu) < _INVERSION_MAX_VAR:
        return _bessel_inversion(rng, nu, a)
    return _bessel_rejection(rng, nu, a)


@njit(cache=True)
def _fill(rng, nu, a, out, method):
    for i in range(out.shape[0]):
        if method == 0:
            out[i] = bessel_sample(rng, nu, a)
        elif method == 1:
            out[i] = _bessel_inversion(rng, nu, a)
        else:
            out[i] = _bessel_rejection(rng, nu, a)


def sample_bessel(nu: float, a: float, size: int, rng: np.random.Generator,
                  method: str = "auto") -> np.ndarray:
    """``size`` independent draws (int64) from Bes(ν, a).

    method: "auto" (what the samplers use), or "inversion" / "rejection" to
    force one of the two exact methods (for testing each on its own).
    """
    if not nu > -1 or not a >= 0 or not math.isfinite(nu) or not math.isfinite(a):
        raise ValueError(f"need ν > −1 and a ≥ 0 finite, got ν={nu!r}, a={a!r}")
    if nu < 0:
        raise ValueError("this sampler supports ν ≥ 0 (the Skellam/Bessel use has ν = |ỹ|)")
    codes = {"auto": 0, "inversion": 1, "rejection": 2}
    if method not in codes:
        raise ValueError(f"method must be one of {', '.join(codes)}, got {method!r}")
    out = np.empty(int(size), dtype=np.int64)
    if a == 0:
        out[:] = 0
        return out
    _fill(rng, float(nu), float(a), out, codes[method])
    return out


def bessel_logpmf(n, nu: float, a: float) -> np.ndarray:
    """Exact log P(n) of Bes(ν, a) (scipy's exponentially scaled I_ν)."""
    n = np.asarray(n, dtype=np.float64)
    scaled = ive(nu, a)
    if np.isfinite(scaled) and scaled > 1e-280:
        log_norm = np.log(scaled) + a
    else:  # I_ν(a) under- or overflows: sum its series, Σ_n q(n), in log space
        m = bessel_mode(float(nu), float(a))
        terms = np.arange(m + 60 * math.sqrt(m + 1.0) + 200)
        log_norm = logsumexp((2 * terms + nu) * np.log(a / 2) - gammaln(terms + 1) - gammaln(terms + nu + 1))
    return (2 * n + nu) * np.log(a / 2) - gammaln(n + 1) - gammaln(n + nu + 1) - log_norm
