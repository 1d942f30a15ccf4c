"""The analytic Gaussian mechanism (Balle & Wang 2018): its exact δ(ε), and the smallest σ for a claim.

The Gaussian DP vocabulary step calibrates its noise with it, and a mechanism
audit tests that step against the curve δ(ε) it gives.
"""
from __future__ import annotations

import math

import numpy as np

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The exact δ(ε) of the Gaussian mechanism N(0, σ²) with this L2 sensitivity.

    Balle & Wang 2018, Theorem 8: δ = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ).
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest σ for which N(0, σ²) noise is (ε, δ)-DP at this L2 sensitivity.

    Calibration of the analytic Gaussian mechanism (Balle & Wang 2018): δ(σ)
    above is strictly decreasing in σ, so solve δ(σ) = δ by bracketing and
    Brent's method, then step up until δ(σ) ≤ δ holds in floating point.
    (dp-accounting's ``get_sigma_gaussian`` stops within 1e-12 of the root, on
    either side, so its σ can claim slightly more than δ: not used here.)
    """
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity > 0):
        raise ValueError("need epsilon > 0, 0 < delta < 1, sensitivity > 0")
    hi = sensitivity
    while gaussian_delta(hi, epsilon, sensitivity) > delta:
        hi *= 2.0
    lo = hi
    while gaussian_delta(lo, epsilon, sensitivity) <= delta:
        lo /= 2.0
        if lo < 1e-12 * sensitivity:  # δ this large needs (almost) no noise
            return lo
    sigma = brentq(lambda s: gaussian_delta(s, epsilon, sensitivity) - delta, lo, hi,
                   xtol=1e-14 * hi, rtol=1e-15, maxiter=500)
    while gaussian_delta(sigma, epsilon, sensitivity) > delta:
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-15)
    return float(sigma)


def gaussian_step_profile(sigma: float, epsilon: float, delta: float, points: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """(ε_i, δ_i) pairs the Gaussian step satisfies: its whole curve, which its (ε, δ) alone hides.

    On the shared candidates the step is the Gaussian mechanism N(0, σ²) at L2
    sensitivity 1, (ε_i, δ_G(ε_i))-DP for every ε_i; the threshold adds the
    δ/2 of the new candidates, in both directions by the DP set union's proof (targets/learners/dpsu.py) with
    δ_G(ε_i) in place of δ/2. So δ_i = δ_G(ε_i) + δ/2, and at the claimed ε,
    where the calibration makes δ_G ≤ δ/2, the claim itself.
    """
    epsilons = np.linspace(0.0, 4.0 * epsilon, points)
    deltas = np.minimum(1.0, np.array([gaussian_delta(sigma, float(e)) for e in epsilons]) + delta / 2.0)
    return np.append(epsilons, epsilon), np.append(deltas, delta)
