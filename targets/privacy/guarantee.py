"""A privacy claim as data: (ε, δ), what it protects (Adjacency), why it holds (Basis), the mechanism (event).

Every learner and vocabulary step reports one ``Guarantee``; a pipeline composes
its parts' guarantees (``topicaudit.targets.privacy.composition``); ``results.json``
stores ``Guarantee.to_json()`` and readers rebuild it with
``topicaudit.targets.privacy.events.guarantee_from_json`` (or read single fields with ``adjacency_of`` and
``basis_of``). The enums are ``StrEnum``s, so their members compare equal to,
format as and serialise to the same strings the files always held.
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # dp-accounting takes ~1 s to import; a Ray worker fitting a non-private learner never needs it
    from dp_accounting import DpEvent


class Adjacency(enum.StrEnum):
    """Which neighbouring datasets a claim is about."""

    DOCUMENT = "document"      # add or remove one whole document
    WORD = "word"              # change one token's word in one document (central model)
    LOCAL_WORD = "local-word"  # change one word (presence bit or count) of one user's data, before it leaves them

    @property
    def document_level(self) -> bool:
        """True when the claim bounds what a release reveals about a whole document's membership."""
        return self is Adjacency.DOCUMENT


class Neighbours(enum.StrEnum):
    """Which pairs of datasets a claim calls neighbours, at its adjacency's unit (a document, a word): the one
    field the accountant (dp-accounting's neighbouring relation) and the canary design (paired canaries for
    replace-one) both read."""

    ADD_REMOVE = "add-remove"    # one unit added or removed
    REPLACE_ONE = "replace-one"  # one unit replaced by another


def neighbours_of(value: Neighbours | str | None) -> Neighbours | None:
    """The Neighbours named by a results.json string (None stays None); ValueError for an unknown name."""
    return None if value is None else _named(Neighbours, value, "neighbours")


def _named(kind: type[enum.StrEnum], value, what: str):
    """The member of ``kind`` that ``value`` is or names; ValueError listing the known names."""
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; known: {', '.join(m.value for m in kind)}") from None


class Basis(enum.StrEnum):
    """Why a claim is made; ``strength`` orders them, weakest first."""

    NONE = "none"                # no claim (ε = ∞)
    MONITOR = "monitor"          # measured on the data, not a guarantee
    PAPER_CLAIM = "paper-claim"  # stated by a paper, not proven (or known wrong)
    THEOREM = "theorem"          # proven; ``accountant`` names how ε was computed

    @property
    def strength(self) -> int:
        return _BASIS_STRENGTH[self]


_BASIS_STRENGTH = {Basis.NONE: 0, Basis.MONITOR: 1, Basis.PAPER_CLAIM: 2, Basis.THEOREM: 3}


def weakest_basis(bases) -> Basis:
    """A composition is only as well founded as its weakest part."""
    return min((basis_of(b) for b in bases), key=lambda b: b.strength)


def adjacency_of(value: Adjacency | str | None) -> Adjacency | None:
    """The Adjacency named by a results.json string (None stays None); ValueError for an unknown name."""
    return None if value is None else _named(Adjacency, value, "adjacency")


def basis_of(value: Basis | str | None) -> Basis:
    """The Basis named by a results.json string (missing means NONE); ValueError for an unknown name."""
    return Basis.NONE if value is None else _named(Basis, value, "basis")


@dataclass(frozen=True)
class PrivacySpent:
    """An (ε, δ) statement and how an accountant obtained it (targets/privacy/dp_svi_accounting.py).

    accountant: the human-readable name a ``Guarantee`` records. basis:
    ``Basis.THEOREM`` or ``Basis.PAPER_CLAIM``. details: intermediate quantities
    (per-step ε0, optimal RDP order, ρ, ...), for tables and tests. Defined
    here, beside ``Guarantee``, so that a learner holding one unpickles in a
    Ray worker without loading the accountants (dp-accounting).
    """

    epsilon: float
    delta: float
    accountant: str
    basis: Basis = Basis.THEOREM
    details: dict[str, Any] = field(default_factory=dict)


def _real(value, name: str, mechanism: str) -> float:
    """A claim's ε or δ as a float; TypeError naming it unless it is a real number (a numpy scalar or 0-d array
    too). A string, None, a complex or a 1-element array was an internal error once the run used it, True was
    read as ε = 1 and refused afterwards as a damaged results.json, a Fraction failed at results.json (hostile
    pass XIX)."""
    if getattr(value, "shape", None) == ():
        value = value[()]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"the guarantee of {mechanism}: {name} must be a real number (got {value!r})")
    return float(value)


@dataclass(frozen=True)
class Guarantee:
    """A privacy claim described as data.

    ``epsilon = inf`` means no claim (a non-private learner, or a monitor).
    A finite ε must say why it holds (a ``basis`` other than NONE).
    ``event`` is the mechanism as a dp-accounting ``DpEvent`` when one
    describes it (docs/targets.md lists them), else None; a pipeline's
    accountant composes the events. ``neighbours`` says which datasets the
    claim calls neighbours; None takes the adjacency's usual relation
    (``relation``). Strings are accepted for the enums.
    """

    epsilon: float = math.inf
    delta: float = 0.0
    adjacency: Adjacency | None = None
    basis: Basis = Basis.NONE
    accountant: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    event: DpEvent | None = None
    neighbours: Neighbours | None = None

    def __post_init__(self):
        object.__setattr__(self, "adjacency", adjacency_of(self.adjacency))
        object.__setattr__(self, "neighbours", neighbours_of(self.neighbours))
        object.__setattr__(self, "basis", basis_of(self.basis))
        for name in ("epsilon", "delta"):
            object.__setattr__(self, name, _real(getattr(self, name), name, self.mechanism))
        if not (self.epsilon >= 0) or not (0 <= self.delta <= 1):
            raise ValueError(f"the guarantee of {self.mechanism}: need ε ≥ 0 and δ in [0, 1] "
                             f"(got ε={self.epsilon}, δ={self.delta})")
        if math.isfinite(self.epsilon) and self.basis is Basis.NONE:
            raise ValueError(f"the guarantee of {self.mechanism} claims ε = {self.epsilon:g} but sets no basis: "
                             "say why it holds (Basis.THEOREM, Basis.PAPER_CLAIM or Basis.MONITOR)")

    @property
    def relation(self) -> Neighbours:
        """The neighbours the claim is about: as stated, else add/remove for whole documents and replace-one
        for words (changing one token's word, one presence bit or count)."""
        if self.neighbours is not None:
            return self.neighbours
        word = self.adjacency in (Adjacency.WORD, Adjacency.LOCAL_WORD)
        return Neighbours.REPLACE_ONE if word else Neighbours.ADD_REMOVE

    @property
    def mechanism(self) -> str:
        """What the guarantee is about, for messages: the learner or step, else the mechanism or accountant."""
        p = self.parameters
        name = p.get("learner") or p.get("step") or p.get("mechanism") or self.accountant
        return str(name or "an unnamed mechanism")

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": None if math.isinf(self.epsilon) else self.epsilon,
            "delta": self.delta,
            "adjacency": None if self.adjacency is None else self.adjacency.value,
            "basis": self.basis.value,
            "accountant": self.accountant,
            "parameters": self.parameters,
            "event": event_to_json(self.event),
            "neighbours": None if self.neighbours is None else self.neighbours.value,
        }


def event_to_json(event) -> dict[str, Any] | None:
    """A DpEvent as plain JSON: ``{"class_name": ..., field: value, ...}``, nested events likewise.

    Read back with ``topicaudit.targets.privacy.events.event_from_json``.
    """
    return None if event is None else _named_tuple_to_json(event.to_named_tuple())


def _named_tuple_to_json(value):
    # dp-accounting's own dependency-free form of an event: a named tuple with its class name.
    if hasattr(value, "class_name") and hasattr(value, "_fields"):
        return {"class_name": value.class_name,
                **{k: _named_tuple_to_json(getattr(value, k)) for k in value._fields
                   if k not in ("module_name", "class_name")}}
    if isinstance(value, (list, tuple)):
        return [_named_tuple_to_json(x) for x in value]
    return value


# A non-private learner's (or an unselected vocabulary's) claim: none.
NO_GUARANTEE = Guarantee()


# What a learner may declare of its release in its guarantee's parameters, beside the claim itself.
# release_support = "training-words": the release can hold only words that some training document holds
# (a selection of observed words, e.g. each topic's top words chosen from counts). A fresh canary word in
# such a release could not be there without its canary, which the δ-tail test turns into a test of δ.
RELEASE_SUPPORT = "release_support"
TRAINING_WORDS = "training-words"
# release_top_n = n: each topic releases its n most probable words only (canaries are made long enough to
# enter such a release).
RELEASE_TOP_N = "release_top_n"


def declared(parameters: dict[str, Any] | None, key: str) -> Any:
    """A declaration of the guarantee's ``parameters`` or of one of its composed parts (None when absent)."""
    parameters = parameters or {}
    if key in parameters:
        return parameters[key]
    for part in parameters.get("parts") or ():
        found = declared(part.get("parameters"), key)
        if found is not None:
            return found
    return None
