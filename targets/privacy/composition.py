"""A pipeline's guarantee from its parts': an accountant over their events, else basic composition.

Rules (docs/targets.md, "Guarantees as data"):

* no claim if any part has none (ε = ∞);
* the parts must share an adjacency (a part with none, ε = 0 and
  data-independent, composes with any);
* the parts' neighbours (``Guarantee.relation``) agree, or the composition is
  stated for replace-one neighbours: an add/remove (ε, δ) part is a
  replace-one (2ε, (1 + e^ε)δ) part (group privacy: a replacement is a removal
  and an addition; the converse does not hold), composed by basic composition;
* the basis is the weakest part's (``Basis.strength``);
* δ is the sum of the parts' δ, as in basic composition: each part keeps the δ
  it was configured with, and the accountant only tightens ε at that δ;
* ε: when only one part spends privacy it is that part's guarantee unchanged.
  Otherwise, when every spending part has an event, dp-accounting's PLD
  accountant (privacy loss distributions, pessimistic discretisation: an upper
  bound, and the tightest accountant dp-accounting has for Laplace, Gaussian,
  subsampled Gaussian and randomised response alike; RDP cannot represent an
  (ε, δ) part at all) composes them, and the result is the smaller of its ε and
  the sum of the parts' ε (both are valid). With δ = 0 (pure ε-DP parts) the
  PLD accountant gives ε = ∞ (its truncated tails leave mass at infinity), so
  pure parts are composed by basic composition, which is exact for them. A
  part without an event, or an event the accountant cannot take, also means
  basic composition; ``accountant`` says which rule gave ε and why.
"""
from __future__ import annotations

import dataclasses
import math

import dp_accounting
from dp_accounting import dp_event, pld
from dp_accounting.pld import privacy_loss_distribution as PLD
from dp_accounting.pld.common import DifferentialPrivacyParameters
import numpy as np

from topicaudit.targets.privacy.events import EpsilonDeltaDpEvent
from topicaudit.targets.privacy.guarantee import NO_GUARANTEE, Adjacency, Basis, Guarantee, Neighbours, weakest_basis

_RELATION = dp_accounting.NeighboringRelation
# How dp-accounting reads a claim's neighbours (``Guarantee.relation``).
NEIGHBORING_RELATIONS = {Neighbours.ADD_REMOVE: _RELATION.ADD_OR_REMOVE_ONE, Neighbours.REPLACE_ONE: _RELATION.REPLACE_ONE}
# 1e-4 keeps the discretisation error of ε below ~1e-3 on our settings; the
# accountant runs once per pipeline (a 200-step subsampled Gaussian: ~0.5 s).
VALUE_DISCRETIZATION_INTERVAL = 1e-4

BASIC = "basic composition (ε and δ add)"
# Coarser for a privacy profile: 10× faster, and the pessimistic discretisation keeps every δ an upper bound.
PROFILE_DISCRETIZATION_INTERVAL = 1e-3


class PLDAccountant(pld.PLDAccountant):
    """dp-accounting's PLD accountant, taught two more cases.

    * ``EpsilonDeltaDpEvent``: the privacy loss of the worst (ε, δ)-DP mechanism
      (dp-accounting's ``from_privacy_parameters``).
    * Laplace and discrete Laplace noise under REPLACE_ONE: with the noise
      multiplier taken relative to the sensitivity under substitution (how our
      word-level learners state it, and how dp-accounting reads a Gaussian
      under REPLACE_ONE) the pair of output distributions is the same shifted
      pair as under add/remove, so the same privacy loss applies.

    It extends ``_maybe_compose``, the method dp-accounting's accountants
    implement, and composes into the parent's ``_pld`` as the parent does.
    """

    def _maybe_compose(self, event, count, do_compose):
        interval = self._value_discretization_interval
        if isinstance(event, EpsilonDeltaDpEvent):
            if do_compose:
                params = DifferentialPrivacyParameters(event.epsilon, event.delta)
                self._pld = self._pld.compose(PLD.from_privacy_parameters(params, interval).self_compose(count))
            return None
        if self.neighboring_relation is _RELATION.REPLACE_ONE and isinstance(event, dp_accounting.LaplaceDpEvent):
            if do_compose:
                self._pld = self._pld.compose(
                    PLD.from_laplace_mechanism(event.noise_multiplier, value_discretization_interval=interval)
                    .self_compose(count))
            return None
        if self.neighboring_relation is _RELATION.REPLACE_ONE and isinstance(event, dp_event.DiscreteLaplaceDpEvent):
            if do_compose:
                self._pld = self._pld.compose(
                    PLD.from_discrete_laplace_mechanism(event.noise_parameter, sensitivity=event.sensitivity,
                                                        value_discretization_interval=interval)
                    .self_compose(count))
            return None
        return super()._maybe_compose(event, count, do_compose)


def compose(*guarantees: Guarantee) -> Guarantee:
    """The guarantee of running every part on the same data (module docstring has the rules)."""
    if any(math.isinf(g.epsilon) for g in guarantees):
        return NO_GUARANTEE
    adjacencies = {g.adjacency for g in guarantees if g.adjacency is not None}
    if len(adjacencies) > 1:
        raise ValueError("cannot compose guarantees with different adjacencies: "
                         f"{sorted(a.value for a in adjacencies)}")
    adjacency = next(iter(adjacencies), None)
    # Parts that read no member's data (ε = δ = 0) hold under any relation.
    relations = {g.relation for g in guarantees if g.adjacency is not None and (g.epsilon > 0 or g.delta > 0)}
    mixed = len(relations) > 1
    if mixed:
        guarantees = tuple(as_replace_one(g) for g in guarantees)
    stated = {g.neighbours for g in guarantees if g.neighbours is not None and (g.epsilon > 0 or g.delta > 0)}
    neighbours = next(iter(stated), None)
    basis = weakest_basis(g.basis for g in guarantees)
    parameters = {"parts": [g.to_json() for g in guarantees]}
    spending = [g for g in guarantees if g.epsilon > 0 or g.delta > 0]
    if len(spending) <= 1:
        only = spending[0] if spending else guarantees[0]
        return dataclasses.replace(only, adjacency=adjacency, basis=basis, neighbours=neighbours, parameters={
            **parameters, "composition": "one part spends privacy; the others read no member's data"})
    epsilon_sum, delta = sum(g.epsilon for g in spending), sum(g.delta for g in spending)
    events = [g.event for g in spending]
    event = None if any(e is None for e in events) else dp_accounting.ComposedDpEvent(events)
    composed = Guarantee(adjacency=adjacency, neighbours=neighbours)
    epsilon, why_not = _pld_epsilon(spending, event, adjacency, composed.relation, delta)
    if mixed:
        why_not = ("the parts' neighbours differ: each add/remove part is restated for replace-one by group "
                   "privacy, (2ε, (1 + e^ε)δ)")
    if epsilon is not None and epsilon < epsilon_sum:
        accountant = (f"dp-accounting PLD over the parts' events ({NEIGHBORING_RELATIONS[composed.relation].name}, "
                      f"discretisation {VALUE_DISCRETIZATION_INTERVAL:g}) at the parts' total δ; "
                      f"basic composition would give ε = {epsilon_sum:.6g}")
    else:
        epsilon, accountant = epsilon_sum, f"{BASIC}: {why_not or 'the PLD accountant is not tighter here'}"
    return Guarantee(epsilon=epsilon, delta=delta, adjacency=adjacency, basis=basis, accountant=accountant,
                     parameters=parameters, event=event, neighbours=neighbours)


def as_replace_one(g: Guarantee) -> Guarantee:
    """An add/remove guarantee restated for replace-one neighbours, (2ε, (1 + e^ε)δ) by group privacy, its event
    dropped (it describes the add/remove loss); other guarantees unchanged."""
    if g.relation is not Neighbours.ADD_REMOVE or (g.epsilon == 0 and g.delta == 0) or g.adjacency is None:
        return g
    return dataclasses.replace(
        g, epsilon=2.0 * g.epsilon, delta=min(1.0, (1.0 + math.exp(g.epsilon)) * g.delta), event=None,
        neighbours=Neighbours.REPLACE_ONE,
        accountant=f"{g.accountant or g.mechanism} (ε = {g.epsilon:g}, δ = {g.delta:g} for add/remove neighbours), "
                   "restated for replace-one by group privacy: (2ε, (1 + e^ε)δ)")


def _pld_epsilon(spending, event, adjacency, neighbours, delta) -> tuple[float | None, str | None]:
    """(ε of the composed event at δ by the PLD accountant, None) or (None, why it cannot be used)."""
    if event is None:
        return None, "no dp-accounting event for " + ", ".join(g.mechanism for g in spending if g.event is None)
    if adjacency is None:
        return None, "the parts state no adjacency"
    if delta == 0:
        return None, "pure ε-DP parts, for which the sum is exact (the PLD accountant gives ε = ∞ at δ = 0)"
    relation = NEIGHBORING_RELATIONS[neighbours]
    accountant = PLDAccountant(relation, VALUE_DISCRETIZATION_INTERVAL)
    if not accountant.supports(event):
        return None, f"the PLD accountant does not support these events under {relation.name}"
    accountant.compose(event)
    return float(accountant.get_epsilon(delta)), None


def privacy_profile(guarantee: Guarantee, points: int = 48) -> tuple[np.ndarray, np.ndarray] | None:
    """(ε_i, δ(ε_i)) pairs the guarantee's mechanism satisfies, by the PLD accountant; None without one.

    The pairs describe the claimed mechanism's whole trade-off curve, not just
    its headline (ε, δ), so an audit can test the mechanism itself. Only
    Gaussian mechanisms get one (their curve is what the (ε, δ) family misses
    most); the discretisation is the accountant's pessimistic one, so each δ
    is an upper bound and the profile errs on the claim's side.
    """
    event = guarantee.event
    if event is None or guarantee.adjacency is None or guarantee.basis is not Basis.THEOREM \
            or "GaussianDpEvent" not in repr(event):
        return None
    accountant = PLDAccountant(NEIGHBORING_RELATIONS[guarantee.relation], PROFILE_DISCRETIZATION_INTERVAL)
    if not accountant.supports(event):
        return None
    accountant.compose(event)
    epsilons = np.linspace(0.0, 4.0 * guarantee.epsilon, points)
    deltas = np.array([accountant.get_delta(float(e)) for e in epsilons])
    return np.append(epsilons, guarantee.epsilon), np.append(deltas, guarantee.delta)
