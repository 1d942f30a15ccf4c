"""Do the constants a learner records agree with the mechanism its claim describes?

A learner states its release's constants twice: in what it records
(``topicaudit.mechanisms``: noise std, sensitivity, sampling rate, steps) and in
its guarantee's dp-accounting event, from which the claimed ε was computed. When
the two disagree, one of them is wrong: the claim was computed for another
mechanism than the one run, or the record misdescribes it (and the audit would
score it by the wrong likelihood ratio). ``disagreements`` lists every such
difference, for ``check_learner`` and the verdict.

What each kind is compared with (the event's leaves, wherever they sit in its
compositions):

- ``GaussianNoise``: a GaussianDpEvent's noise multiplier z = noise_std /
  (the canary's clipped contribution), a PoissonSampledDpEvent's rate =
  sampling_rate, and the number of Gaussian steps composed = steps.
- ``LaplaceNoise``: a LaplaceDpEvent's noise multiplier = scale / Δ, Δ the L1
  sensitivity: document_tokens for add/remove neighbours, twice that for
  replace-one (one unit's tokens leave, another's arrive); and the releases
  composed = releases.
- ``GeometricNoise``: a DiscreteLaplaceDpEvent's parameter a = ln(1/alpha).
- ``RandomisedResponse``: a two-bucket RandomizedResponseDpEvent's parameter
  2(1 − keep_probability).
- ``SetUnion``: the step's own (ε, δ) = the claim's.

Kinds or events outside this list are not compared (nothing is said about them).
"""
from __future__ import annotations

import math

from topicaudit.targets.mechanisms import (GaussianNoise, GeometricNoise, LaplaceNoise, Mechanism,
                                           RandomisedResponse, SetUnion)
from topicaudit.targets.privacy.guarantee import Guarantee, Neighbours

# Relative tolerance: the two sides are computed by different arithmetic (a calibrated multiplier times a
# sensitivity, a scale divided by one).
TOLERANCE = 1e-6


def _leaves(event, count: int = 1, rate: float = 1.0):
    """(leaf event, how many times it is composed, the Poisson rate above it) for every leaf of an event."""
    name = type(event).__name__
    if name == "SelfComposedDpEvent":
        yield from _leaves(event.event, count * int(event.count), rate)
    elif name == "ComposedDpEvent":
        for part in event.events:
            yield from _leaves(part, count, rate)
    elif name == "PoissonSampledDpEvent":
        yield from _leaves(event.event, count, rate * float(event.sampling_probability))
    else:
        yield event, count, rate


def _differ(a: float, b: float) -> bool:
    return not math.isclose(float(a), float(b), rel_tol=TOLERANCE, abs_tol=0.0)


def disagreements(mechanism: Mechanism, guarantee: Guarantee) -> list[str]:
    """Every constant of ``mechanism`` that the claim's event states otherwise, as sentences (empty: they agree,
    or the claim has no event to compare with)."""
    if isinstance(mechanism, SetUnion):
        found = []
        if _differ(mechanism.epsilon, guarantee.epsilon):
            found.append(f"the step records ε = {mechanism.epsilon:g}, its claim says {guarantee.epsilon:g}")
        if _differ(mechanism.delta, guarantee.delta) and (mechanism.delta or guarantee.delta):
            found.append(f"the step records δ = {mechanism.delta:g}, its claim says {guarantee.delta:g}")
        return found
    if guarantee.event is None:
        return []
    leaves = list(_leaves(guarantee.event))
    names = {type(leaf).__name__ for leaf, _, _ in leaves}
    if isinstance(mechanism, GaussianNoise):
        return _gaussian(mechanism, [(leaf, count, rate) for leaf, count, rate in leaves
                                     if type(leaf).__name__ == "GaussianDpEvent"])
    if isinstance(mechanism, LaplaceNoise) and "LaplaceDpEvent" in names:
        return _laplace(mechanism, [(leaf, count) for leaf, count, _ in leaves
                                    if type(leaf).__name__ == "LaplaceDpEvent"], guarantee.relation)
    if isinstance(mechanism, GeometricNoise) and "DiscreteLaplaceDpEvent" in names:
        leaf = next(leaf for leaf, _, _ in leaves if type(leaf).__name__ == "DiscreteLaplaceDpEvent")
        a = math.log(1.0 / mechanism.alpha) * int(getattr(leaf, "sensitivity", 1))
        if _differ(a, leaf.noise_parameter * int(getattr(leaf, "sensitivity", 1))):
            return [f"the release records geometric noise α = {mechanism.alpha:.6g} (a = ln(1/α) = {a:.6g}), the "
                    f"claim's event a discrete Laplace parameter {leaf.noise_parameter:.6g}"]
        return []
    if isinstance(mechanism, RandomisedResponse) and "RandomizedResponseDpEvent" in names:
        leaf = next(leaf for leaf, _, _ in leaves if type(leaf).__name__ == "RandomizedResponseDpEvent")
        recorded = 2.0 * (1.0 - mechanism.keep_probability)
        if int(leaf.num_buckets) == 2 and _differ(recorded, leaf.noise_parameter):
            return [f"the release records bits kept with probability {mechanism.keep_probability:.6g}, the claim's "
                    f"event randomised response with noise parameter {leaf.noise_parameter:.6g} (keep "
                    f"probability {1 - leaf.noise_parameter / 2:.6g})"]
    return []


def realised_epsilon(mechanism: Mechanism, relation: Neighbours) -> float | None:
    """The ε a central pure-ε release's recorded constants realise whatever the claim says (None: not computable
    from the record alone). Laplace: releases × Δ / scale, Δ as in ``_laplace``."""
    if isinstance(mechanism, LaplaceNoise):
        sensitivity = mechanism.document_tokens * (2 if relation is Neighbours.REPLACE_ONE else 1)
        return mechanism.releases * sensitivity / mechanism.scale
    return None


def _gaussian(mechanism: GaussianNoise, leaves) -> list[str]:
    if not leaves:
        return ["the release records Gaussian noise, the claim's event has no Gaussian mechanism"]
    found = []
    leaf, count, rate = leaves[0]
    z = mechanism.noise_std / mechanism.contribution
    if _differ(z, leaf.noise_multiplier):
        found.append(f"the release records noise std {mechanism.noise_std:.6g} for a contribution of L2 norm "
                     f"{mechanism.contribution:g} (noise multiplier {z:.6g}), the claim's event a noise multiplier "
                     f"of {leaf.noise_multiplier:.6g}")
    if _differ(mechanism.sampling_rate, rate):
        found.append(f"the release records sampling rate {mechanism.sampling_rate:g}, the claim's event {rate:g}")
    steps = sum(c for _, c, _ in leaves)
    if mechanism.steps != steps:
        found.append(f"the release records {mechanism.steps} Gaussian steps, the claim's event composes {steps}")
    return found


def _laplace(mechanism: LaplaceNoise, leaves, relation: Neighbours) -> list[str]:
    found = []
    leaf, _ = leaves[0]
    sensitivity = mechanism.document_tokens * (2 if relation is Neighbours.REPLACE_ONE else 1)
    multiplier = mechanism.scale / sensitivity
    if _differ(multiplier, leaf.noise_multiplier):
        found.append(f"the release records Laplace scale {mechanism.scale:.6g} for {mechanism.document_tokens} "
                     f"tokens a document (L1 sensitivity {sensitivity:g} under {relation.value} neighbours: noise "
                     f"multiplier {multiplier:.6g}), the claim's event a noise multiplier of "
                     f"{leaf.noise_multiplier:.6g}")
    releases = sum(c for _, c in leaves)
    if mechanism.releases != releases:
        found.append(f"the release records {mechanism.releases} Laplace releases, the claim's event composes "
                     f"{releases}")
    return found
