"""Privacy accounting for DP-SVI: the mechanism described as data, then accounted.

The mechanism of Park et al.'s private stochastic variational inference
(docs/algorithms.md#dp-svi) is, at the level accounting sees it, the *Poisson-
subsampled Gaussian mechanism composed over J steps*: every step includes each
document independently with probability q, sums a quantity whose L2 norm per
document is at most Δ, and adds N(0, (zΔ)²) noise to every coordinate; z is
the noise multiplier. Neighbouring corpora differ by adding or removing one
document. ``subsampled_gaussian_event`` describes exactly that as a
``dp_accounting`` event tree; the accountants below turn the description into
an (ε, δ) statement.

==============  ==========================================================  ==========
name            method                                                      basis
==============  ==========================================================  ==========
``rdp``         dp-accounting ``RdpAccountant`` (Mironov 2017; Mironov,     theorem
                Talwar, Zhang 2019 for the subsampled Gaussian; RDP → DP
                by Canonne, Kamath, Steinke 2020 Prop. 12). The moments
                accountant of Abadi et al. 2016 / Park et al. 2016a is
                the same RDP curve with the older conversion, reported by
                ``rdp_epsilon(..., conversion="abadi")``.
``pld``         dp-accounting ``PLDAccountant`` (privacy loss distributions  theorem
                with pessimistic discretisation; Koskela et al. 2020,
                Doroshenko et al. 2022): the tightest of these.
``zcdp``        ρ-zCDP without amplification (Bun & Steinke 2016): the       theorem
                Gaussian with sensitivity Δ and std zΔ is Δ²/(2(zΔ)²) =
                1/(2z²)-zCDP (Prop. 1.6), J steps add (Lemma 1.7), and
                ρ-zCDP implies (ρ + 2√(ρ ln 1/δ), δ)-DP (Prop. 1.3).
                Subsampling a zCDP mechanism does not improve ρ in general,
                so the sampling rate is not used.
``zcdp-park``   the zCDP route *as Park et al. 2016b (zCDP paper)           paper-claim
                computes it*: per step the classical Gaussian calibration
                ε_it = √(2 ln(1.25/δ_it))/z, amplification by sampling to
                ε' = ln(1 + q(e^ε_it − 1)), δ' = qδ_it, then each step is
                treated as a Gaussian mechanism calibrated to (ε', δ'), i.e.
                ρ' = ε'²/(4 ln(1.25/δ')), J steps add and ρ converts as
                above. Not a theorem: (ε', δ')-DP does not imply ρ'-zCDP,
                the classical calibration holds only for ε_it < 1, and the
                paper leaves δ_it open (here Jδ' = δ; the δ' are not added
                to the reported δ, as in the paper).
``advanced``    advanced composition (Dwork, Rothblum, Vadhan 2010; Dwork &  theorem
                Roth Thm 3.20) of J steps that are each (ε0, δ0)-DP, with
                ε0 = ln(1 + q(e^εg − 1)), δ0 = qδg (amplification by Poisson
                sampling: Li, Qardaji, Su 2012; Balle, Barthe, Gaboardi 2018)
                and εg(δg) the exact ε of the unsampled Gaussian (Balle &
                Wang 2018, dp-accounting ``get_epsilon_gaussian``):
                ε = √(2J ln(1/δ'')) ε0 + J ε0 (e^ε0 − 1), δ = δ'' + Jδ0, the
                split of δ between δ'' and Jδ0 chosen to minimise ε.
``linear``      basic composition (Dwork & Roth Thm 3.16) of the same         theorem
                per-step (ε0, δ0): (Jε0, Jδ0) with Jδ0 = δ.
==============  ==========================================================  ==========

``linear`` and ``advanced`` are the baselines both Park et al. papers compare
against; they use the same amplified per-step guarantee, so the comparison at
equal noise isolates the composition method.

Every accountant returns a ``PrivacySpent`` naming itself, so a ``Guarantee``
can say how its ε was computed. ``calibrate_noise_multiplier`` inverts any of
them by bisection on z. (dp-accounting's ``calibrate_dp_mechanism`` takes only
its own accountants and, by Brent's method, lands on other noise levels than the
ones runs have recorded, so it is not used here.)
"""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from contextlib import contextmanager

import dp_accounting
import numpy as np
from dp_accounting import pld, rdp

from topicaudit.targets.privacy.guarantee import Basis, PrivacySpent

__all__ = [
    "ACCOUNTANTS",
    "PrivacySpent",
    "advanced_composition_epsilon",
    "amplify_by_sampling",
    "calibrate_noise_multiplier",
    "compute_epsilon",
    "linear_composition_epsilon",
    "pld_epsilon",
    "rdp_epsilon",
    "subsampled_gaussian_event",
    "zcdp_epsilon",
    "zcdp_park_epsilon",
    "zcdp_to_dp",
]


class _QuietLogA(logging.Filter):
    """Drop dp-accounting's warning that a small fractional RDP order did not converge.

    For noise multipliers below ~1 the series for orders ≤ ~1.6 can fail to
    converge; dp-accounting then leaves that order out of the minimum, which
    keeps the bound valid (only possibly looser). Bisection visits such
    multipliers many times, so the warning would flood the log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "_compute_log_a_frac failed to converge" not in record.getMessage()


@contextmanager
def _quiet_log_a():
    """``_QuietLogA`` on absl's logger for the duration of one RDP computation only: the application's logging
    is the application's (a filter added at import would hide the message from every other user of absl)."""
    absl = logging.getLogger("absl")
    quiet = _QuietLogA()
    absl.addFilter(quiet)
    try:
        yield
    finally:
        absl.removeFilter(quiet)


# --------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------

MIN_NOISE_MULTIPLIER = 1e-100  # below it the accountants overflow (hostile pass XIX-zj)


def _check(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> None:
    if not noise_multiplier >= 0:
        raise ValueError(f"noise_multiplier must be ≥ 0 (got {noise_multiplier!r})")
    if 0 < noise_multiplier < MIN_NOISE_MULTIPLIER:  # RDP's arithmetic overflows: it said ε = 0 at z = 1e-160
        raise ValueError(f"noise_multiplier {noise_multiplier!r} is too small for any accountant to state ε (at "
                         f"least {MIN_NOISE_MULTIPLIER:g}, or 0 for no noise)")
    if not 0 < sampling_rate <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1] (got {sampling_rate!r})")
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer (got {steps!r})")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1) (got {delta!r})")


def subsampled_gaussian_event(noise_multiplier: float, sampling_rate: float,
                              steps: int) -> dp_accounting.DpEvent:
    """J steps of the Poisson-subsampled Gaussian mechanism, as a dp-accounting event.

    noise_multiplier: z = noise std / L2 sensitivity. sampling_rate: q, each
    record's independent inclusion probability. q = 1 is the plain Gaussian.
    """
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier)
    step = gaussian if sampling_rate == 1 else dp_accounting.PoissonSampledDpEvent(sampling_rate, gaussian)
    return dp_accounting.SelfComposedDpEvent(step, int(steps))


# --------------------------------------------------------------------------
# account: dp-accounting
# --------------------------------------------------------------------------

def rdp_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                orders=None, conversion: str = "optimal") -> PrivacySpent:
    """ε of J subsampled-Gaussian steps by dp-accounting's RDP accountant.

    conversion: "optimal" is dp-accounting's RDP → (ε, δ) conversion (Canonne,
    Kamath, Steinke 2020); "abadi" is the moments accountant's original one,
    ε = min_α RDP(α) + ln(1/δ)/(α − 1) (Abadi et al. 2016, Mironov 2017
    Prop. 3), which the published DP-SGD numbers used. Both are theorems; the
    first is never larger.
    """
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["rdp"], details={"order": None})
    accountant = rdp.RdpAccountant(orders=orders, neighboring_relation=_ADD_REMOVE)
    with _quiet_log_a():
        accountant.compose(subsampled_gaussian_event(noise_multiplier, sampling_rate, steps))
    if conversion == "optimal":
        epsilon, order = accountant.get_epsilon_and_optimal_order(delta)
        name = _NAMES["rdp"]
    elif conversion == "abadi":
        orders_, curve = np.asarray(accountant.orders, dtype=float), np.asarray(accountant.rdp)
        keep = orders_ > 1
        values = curve[keep] + math.log(1 / delta) / (orders_[keep] - 1)
        i = int(np.argmin(values))
        epsilon, order = float(values[i]), float(orders_[keep][i])
        name = "dp-accounting RDP curve, moments-accountant conversion (Abadi et al. 2016)"
    else:
        raise ValueError(f"conversion must be 'optimal' or 'abadi' (got {conversion!r})")
    return PrivacySpent(float(epsilon), delta, name, details={"order": float(order)})


def pld_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                value_discretization_interval: float = 1e-3) -> PrivacySpent:
    """ε of J subsampled-Gaussian steps by dp-accounting's PLD accountant.

    The discretisation is pessimistic, so the result is an upper bound at any
    interval; a finer interval is tighter and slower. 1e-3 is within 0.015 of
    1e-4 at ε ≳ 0.4 on Park et al.'s settings, at a fraction of the cost, but
    loose in relative terms at tiny ε (0.038 against 0.011 for Park et al. 2016b's
    S = 10). Calibrating by PLD at very small noise (ε in the hundreds) is slow.
    """
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["pld"])
    accountant = pld.PLDAccountant(neighboring_relation=_ADD_REMOVE,
                                   value_discretization_interval=value_discretization_interval)
    accountant.compose(subsampled_gaussian_event(noise_multiplier, sampling_rate, steps))
    return PrivacySpent(float(accountant.get_epsilon(delta)), delta, _NAMES["pld"],
                        details={"value_discretization_interval": value_discretization_interval})


# --------------------------------------------------------------------------
# account: closed forms (zCDP, composition theorems)
# --------------------------------------------------------------------------

def zcdp_to_dp(rho: float, delta: float) -> float:
    """ε of a ρ-zCDP mechanism at δ: ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def amplify_by_sampling(epsilon: float, delta: float, sampling_rate: float) -> tuple[float, float]:
    """(ε, δ)-DP on a Poisson sample of rate q gives (ln(1 + q(e^ε − 1)), qδ)-DP.

    Add/remove adjacency (Li, Qardaji, Su 2012; Balle, Barthe, Gaboardi 2018, Thm 8).
    """
    return math.log1p(sampling_rate * math.expm1(epsilon)), sampling_rate * delta


def zcdp_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> PrivacySpent:
    """ε from ρ = J/(2z²)-zCDP (no amplification by sampling; ``sampling_rate`` unused)."""
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["zcdp"], details={"rho": math.inf})
    rho = steps / (2.0 * noise_multiplier ** 2)
    return PrivacySpent(zcdp_to_dp(rho, delta), delta, _NAMES["zcdp"], details={"rho": rho})


def zcdp_park_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                      delta: float) -> PrivacySpent:
    """ε by the zCDP route of Park et al. 2016b (eqs. 3, 5, 6); a paper claim, not a theorem.

    δ_it is fixed by Jδ' = δ with δ' = qδ_it (the paper does not say).
    """
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["zcdp-park"], basis=Basis.PAPER_CLAIM)
    delta_step = delta / steps                                # δ'
    delta_iter = min(delta_step / sampling_rate, 0.5)         # δ_it
    eps_iter = math.sqrt(2.0 * math.log(1.25 / delta_iter)) / noise_multiplier
    eps_step, _ = amplify_by_sampling(eps_iter, delta_iter, sampling_rate)
    rho_step = eps_step ** 2 / (4.0 * math.log(1.25 / delta_step))
    rho = steps * rho_step
    return PrivacySpent(zcdp_to_dp(rho, delta), delta, _NAMES["zcdp-park"], basis=Basis.PAPER_CLAIM,
                        details={"epsilon_iter": eps_iter, "delta_iter": delta_iter, "epsilon_step": eps_step,
                                 "delta_step": delta_step, "rho": rho,
                                 "classical_calibration_valid": eps_iter < 1})


def _per_step(noise_multiplier: float, sampling_rate: float, delta_gaussian: float) -> tuple[float, float]:
    eps_g = dp_accounting.get_epsilon_gaussian(noise_multiplier, delta_gaussian)
    return amplify_by_sampling(eps_g, delta_gaussian, sampling_rate)


def linear_composition_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                               delta: float) -> PrivacySpent:
    """(Jε0, Jδ0) with Jδ0 = δ, each step amplified by sampling (see module docstring)."""
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["linear"])
    delta_gaussian = min(delta / (steps * sampling_rate), 1.0)
    eps0, delta0 = _per_step(noise_multiplier, sampling_rate, delta_gaussian)
    return PrivacySpent(steps * eps0, steps * delta0, _NAMES["linear"],
                        details={"epsilon_step": eps0, "delta_step": delta0})


def _advanced(eps0: float, steps: int, delta_slack: float) -> float:
    return math.sqrt(2.0 * steps * math.log(1.0 / delta_slack)) * eps0 + steps * eps0 * math.expm1(eps0)


def advanced_composition_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float, *,
                                 n_splits: int = 64) -> PrivacySpent:
    """Advanced composition of J amplified Gaussian steps, δ split optimally.

    δ = δ'' + Jδ0 with Jδ0 = fδ for f on a log grid in [1e-4, 1 − 1e-4]; the
    reported ε is the smallest over the grid (each split is a valid bound).
    """
    _check(noise_multiplier, sampling_rate, steps, delta)
    if noise_multiplier == 0:
        return PrivacySpent(math.inf, delta, _NAMES["advanced"])
    best = None
    for f in np.concatenate([np.geomspace(1e-4, 0.5, n_splits // 2), 1 - np.geomspace(0.5, 1e-4, n_splits // 2)]):
        delta_gaussian = min(f * delta / (steps * sampling_rate), 1.0)
        eps0, delta0 = _per_step(noise_multiplier, sampling_rate, delta_gaussian)
        slack = delta - steps * delta0
        if slack <= 0:
            continue
        eps = _advanced(eps0, steps, slack)
        if best is None or eps < best[0]:
            best = (eps, eps0, delta0, slack)
    # every split has slack = δ − Jδ0 ≥ (1 − f)δ > 0 (δ0 = q·δ_gaussian), so the grid's first one sets best
    assert best is not None, f"no split of δ left slack (n_splits = {n_splits})"
    eps, eps0, delta0, slack = best
    return PrivacySpent(eps, slack + steps * delta0, _NAMES["advanced"],
                        details={"epsilon_step": eps0, "delta_step": delta0, "delta_slack": slack})


# --------------------------------------------------------------------------
# registry and calibration
# --------------------------------------------------------------------------

_ADD_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE

_NAMES = {
    "rdp": "dp-accounting RDP (Poisson-subsampled Gaussian)",
    "pld": "dp-accounting PLD (Poisson-subsampled Gaussian)",
    "zcdp": "zCDP of the Gaussian, no amplification (Bun & Steinke 2016)",
    "zcdp-park": "zCDP route of Park et al. 2016 (amplified (ε, δ) treated as zCDP; not a theorem)",
    "advanced": "advanced composition (Dwork, Rothblum, Vadhan 2010) of amplified analytic-Gaussian steps",
    "linear": "linear composition of amplified analytic-Gaussian steps",
}

ACCOUNTANTS: dict[str, Callable[..., PrivacySpent]] = {
    "rdp": rdp_epsilon,
    "pld": pld_epsilon,
    "zcdp": zcdp_epsilon,
    "zcdp-park": zcdp_park_epsilon,
    "advanced": advanced_composition_epsilon,
    "linear": linear_composition_epsilon,
}


def compute_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float,
                    accountant: str = "rdp") -> PrivacySpent:
    """ε at δ for J subsampled-Gaussian steps, by the named accountant (see ``ACCOUNTANTS``)."""
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; known: {', '.join(ACCOUNTANTS)}")
    return ACCOUNTANTS[accountant](noise_multiplier, sampling_rate, steps, delta)


@functools.lru_cache(maxsize=1024)
def calibrate_noise_multiplier(epsilon: float, delta: float, sampling_rate: float, steps: int,
                               accountant: str = "rdp", *, rtol: float = 1e-4) -> float:
    """The smallest noise multiplier z (to relative precision rtol) whose ε is ≤ epsilon.

    Kept per arguments (a pure function): each bisection step composes the accountant over every step, seconds
    per calibration, and a run builds its learner more than once (the target, a planted bug's variant, the
    guarantee `check` reads back, the power search's learners).

    Bisection on z, in log space, over the named accountant's ε(z), which is
    non-increasing in z: bracket [lo, hi] with ε(lo) > epsilon ≥ ε(hi) by
    doubling, halve until hi/lo ≤ 1 + rtol, return hi, so the calibrated
    mechanism never claims more than was asked. epsilon = inf gives 0 (no noise).
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; known: {', '.join(ACCOUNTANTS)}")
    if math.isinf(epsilon) and epsilon > 0:
        return 0.0
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0 (got {epsilon!r})")
    _check(1.0, sampling_rate, steps, delta)

    def eps(z: float) -> float:
        return compute_epsilon(z, sampling_rate, steps, delta, accountant).epsilon

    lo, hi = 0.5, 1.0
    while eps(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier ≤ 1e6 reaches ε = {epsilon} with the {accountant} accountant")
    while eps(lo) <= epsilon:
        lo, hi = lo / 2.0, lo
        if lo < 1e-6:
            return hi
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if eps(mid) > epsilon:
            lo = mid
        else:
            hi = mid
    return hi
