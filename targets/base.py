"""What a target hands an adversary (Release), what it promises (Guarantee, in targets/privacy/guarantee.py),
and the protocols of its parts (Learner, VocabularyStep).

A target is a whole release pipeline: a vocabulary step followed by a learner.
The engine only ever calls ``fit`` and ``guarantee``; targets know nothing of
attacks. Targets are plain picklable objects built from config so Ray can ship
them and a run directory can rebuild them.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from topicaudit.process_state import kept_process_state
from topicaudit.targets.mechanisms import Mechanism, Recorder, Transcript
from topicaudit.targets.privacy.guarantee import NO_GUARANTEE, Adjacency, Basis, Guarantee, Neighbours

__all__ = ["NO_GUARANTEE", "Adjacency", "Basis", "Guarantee", "Learner", "Neighbours", "Release", "Target", "Transcript",
           "VocabularyStep", "declared_mechanism", "document_cap", "records"]


@dataclass
class Release:
    """Everything the adversary sees: Φ and the words its columns stand for.

    phi: (k, len(vocabulary)) float32, rows on the simplex.
    vocabulary: sorted int64 column ids into the corpus vocabulary.
    info: what the learner reports about this fit beyond Φ, JSON-serialisable
        (e.g. a privacy monitor's trajectory, key ``"monitor"``). Not part of
        what the adversary sees; empty for most learners.
    """

    phi: np.ndarray
    vocabulary: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    transcript: Transcript | None = None  # the mechanism's outputs, when the fit was asked to observe them

    def dense_phi(self, n_words: int) -> np.ndarray:
        """Φ over the whole corpus vocabulary; words outside the release get 0.

        The ζ solver drops words whose Φ column is all zero, which is exactly
        "words outside the model's vocabulary are dropped".
        """
        full = np.zeros((self.phi.shape[0], n_words), dtype=np.float32)
        full[:, self.vocabulary] = self.phi
        return full


class Target(Protocol):
    """The protocol every target adapter implements."""

    def fit(self, X: sp.csr_matrix, seed: int, vocabulary: np.ndarray | None = None,
            observe: np.ndarray | None = None) -> Release:
        """Train on the rows of X (documents × corpus vocabulary, counts).

        vocabulary: when given, skip the vocabulary step and learn over exactly
        these corpus column ids (shadows reusing the target's released
        vocabulary, as the paper's code does).
        observe: corpus column ids whose mechanism outputs the release's
        ``transcript`` records (learners that can; others ignore it).
        """
        ...

    def guarantee(self) -> Guarantee:
        ...


class Learner(Protocol):
    """What the engine asks of a learner, built-in or a plug-in (docs/adding-a-learner.md).

    Required: ``k`` (the number of topics), ``fit`` and ``guarantee``.

    fit(X, seed, record=None): Φ (k × X's columns, float32, rows on the
    simplex) from the rows of X (documents × words, counts), deterministic
    in seed. A DP learner takes ``record`` (a ``topicaudit.mechanisms.Recorder``)
    and calls it where its mechanism releases, using the array the call
    returns; the engine then audits those releases, which is as tight as its
    claim allows. A learner without the parameter is audited on Φ alone.

    Optional: ``mechanism()``, the kind and constants of what ``fit`` records
    (a ``topicaudit.mechanisms.Mechanism``), known before any fit: it is
    checked against the claim and for a scorer when the target is built, and
    its ``document_tokens`` is the cap canaries are made longer than (for a
    document-level claim). Read through ``declared_mechanism``.
    """

    k: int

    def fit(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        ...

    def guarantee(self) -> Guarantee:
        ...


class VocabularyStep(Protocol):
    """What the engine asks of a vocabulary step: ``select(X, seed, record=None)`` → sorted int64 column ids, and
    ``guarantee``. A DP step records its release (``Recorder.set_union``) and declares it in ``mechanism()``."""

    def select(self, X: sp.csr_matrix, seed: int, record: Recorder | None = None) -> np.ndarray:
        ...

    def guarantee(self) -> Guarantee:
        ...


def records(method) -> bool:
    """Whether a learner's ``fit`` (a step's ``select``) takes a recorder: its declared ``record`` parameter."""
    try:
        return "record" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def declared_mechanism(part) -> Mechanism | None:
    """The mechanism a learner or step declares it records (its optional ``mechanism()``), else None; what the call
    changed of the process is put back, as for ``claim`` (a mechanism() calling os.chdir had the run written into
    another folder, hostile pass XIX-u)."""
    declare = getattr(type(part), "mechanism", None)
    if not callable(declare):
        return None
    with kept_process_state(f"the mechanism() of {type(part).__name__}"):
        return part.mechanism()


def claim(part) -> Guarantee:
    """``part.guarantee()``, with what it changed of the process put back (``kept_process_state``): a plug-in's
    guarantee() is called wherever the engine reads the claim, outside its fits' blocks, and one that changed the
    working directory had the run written into another folder; one that replaced ``print`` or ``sys.stdout`` left
    check exit 1 with no VIOLATED line printed (hostile pass XIX-u)."""
    with kept_process_state(f"the guarantee() of {type(part).__name__}"):
        return part.guarantee()


def document_cap(learner) -> int | None:
    """The most tokens a learner keeps of one document, as its declared mechanism states it (document-level
    claims only: a word-level release's ``document_tokens`` is one token of a word)."""
    mechanism = declared_mechanism(learner)
    adjacency = claim(learner).adjacency
    if mechanism is None or adjacency is None or not adjacency.document_level:
        return None
    return mechanism.document_cap()
