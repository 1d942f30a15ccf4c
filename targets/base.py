"""What a target hands an adversary (Release) and what it promises (Guarantee, in targets/privacy/guarantee.py).

A target is a whole release pipeline: a vocabulary step followed by a learner.
The engine only ever calls ``fit`` and ``guarantee``; targets know nothing of
attacks. Targets are plain picklable objects built from config so Ray can ship
them and a run directory can rebuild them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.privacy.guarantee import NO_GUARANTEE, Adjacency, Basis, Guarantee

__all__ = ["NO_GUARANTEE", "Adjacency", "Basis", "Guarantee", "Release", "Target", "Transcript"]


@dataclass
class Transcript:
    """What a DP mechanism released on the way to Φ, for a few observed columns, as the fit computed it.

    A DP claim covers everything its mechanism outputs (every noisy step, every
    local report), not only the final Φ; an audit that sees those outputs can
    be as tight as the claim. The learner records them from the very arrays
    its model is built from, never recomputed beside them.

    kind: which mechanism produced the arrays (``topicaudit.attacks.mechanism``
        scores each kind by its likelihood ratio).
    columns: the observed corpus column ids, in the order of the arrays' last axis.
    arrays: the outputs restricted to those columns (shapes by kind).
    parameters: the mechanism's public constants as the claim states them (JSON).
    """

    kind: str
    columns: np.ndarray
    arrays: dict[str, np.ndarray]
    parameters: dict[str, Any] = field(default_factory=dict)


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
