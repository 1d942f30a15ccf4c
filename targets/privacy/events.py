"""Mechanisms described as dp-accounting events, and events to and from JSON.

dp-accounting describes a mechanism as a ``DpEvent`` (Laplace, Gaussian,
randomised response, Poisson subsampling, composition, ...) and leaves the
arithmetic to an accountant. One kind of statement it has no event for is the
one a proof often ends with: "this mechanism is (ε, δ)-DP", with nothing more
known about its privacy loss. ``EpsilonDeltaDpEvent`` is that statement; the
accountant of ``topicaudit.targets.privacy.composition`` gives it the privacy loss of
the worst (ε, δ)-DP mechanism (infinite loss with probability δ, ±ε
otherwise), which every (ε, δ)-DP mechanism is dominated by, so composing it
is sound.
"""
from __future__ import annotations

import math
from typing import Any

import attr
import dp_accounting
from dp_accounting import dp_event

from topicaudit.targets.privacy.guarantee import Basis, Guarantee


@attr.s(frozen=True, slots=True, auto_attribs=True)
class EpsilonDeltaDpEvent(dp_accounting.DpEvent):
    """A mechanism known only to be (ε, δ)-DP under the claim's adjacency."""

    epsilon: float
    delta: float = 0.0


# Class name → event class, for reading events back; nothing else is ever built from a file.
_EVENT_CLASSES: dict[str, type] = {
    name: cls for name, cls in vars(dp_event).items()
    if isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)
}
_EVENT_CLASSES[EpsilonDeltaDpEvent.__name__] = EpsilonDeltaDpEvent


def event_from_json(data: dict[str, Any]) -> dp_accounting.DpEvent:
    """The event ``event_to_json`` wrote."""
    fields = dict(data)
    name = fields.pop("class_name", None)
    if name not in _EVENT_CLASSES:
        raise ValueError(f"unknown dp-accounting event {name!r} in a guarantee")

    def value(v):
        if isinstance(v, dict) and "class_name" in v:
            return event_from_json(v)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return _EVENT_CLASSES[name](**{k: value(v) for k, v in fields.items()})


def laplace_event(noise_scale: float, sensitivity: float) -> dp_accounting.DpEvent:
    """Laplace noise of scale b on a query of L1 sensitivity Δ: multiplier b/Δ."""
    return dp_accounting.LaplaceDpEvent(noise_scale / sensitivity)


def binary_randomized_response_event(keep_probability: float) -> dp_accounting.DpEvent:
    """A bit kept with probability p, else flipped: dp-accounting's randomised response on
    2 buckets with noise parameter 2(1 − p) (a uniform bucket half the time keeps the bit)."""
    return dp_accounting.RandomizedResponseDpEvent(noise_parameter=2.0 * (1.0 - keep_probability), num_buckets=2)


def discrete_laplace_event(noise_parameter: float, sensitivity: int) -> dp_accounting.DpEvent:
    """Two-sided geometric noise P(k) ∝ e^{−a|k|} (a = noise_parameter) on an integer query of L1 sensitivity Δ."""
    return dp_event.DiscreteLaplaceDpEvent(noise_parameter=noise_parameter, sensitivity=sensitivity)


def composed_event(events: list[dp_accounting.DpEvent]) -> dp_accounting.DpEvent:
    """The mechanisms run one after the other (adaptively)."""
    return dp_accounting.ComposedDpEvent(list(events))


def repeated_event(event: dp_accounting.DpEvent, count: int) -> dp_accounting.DpEvent:
    """One mechanism run ``count`` times (adaptively)."""
    return dp_accounting.SelfComposedDpEvent(event, count)


# A step that reads no member's data (a public vocabulary) spends nothing.
NO_OP_EVENT = dp_accounting.NoOpDpEvent()


def guarantee_from_json(data: dict[str, Any]) -> Guarantee:
    """The Guarantee ``Guarantee.to_json`` wrote (results.json ``target.guarantee``), its event rebuilt."""
    epsilon = data.get("epsilon")
    event = data.get("event")
    return Guarantee(epsilon=math.inf if epsilon is None else float(epsilon), delta=float(data.get("delta") or 0.0),
                     adjacency=data.get("adjacency"), basis=data.get("basis", Basis.NONE),
                     accountant=data.get("accountant"),
                     parameters=dict(data.get("parameters") or {}),
                     event=None if event is None else event_from_json(event),
                     # written before the field: DP-CGS stated it in its parameters
                     neighbours=data.get("neighbours") or (data.get("parameters") or {}).get("neighbours"))
