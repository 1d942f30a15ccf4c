"""The named membership attacks: each name maps to its score function and the inputs it needs.

Every attack gives one score per document, higher = more likely a member.
Names are part of the results interface: keys of ``results.json["attacks"]``
and ``scores.npz`` (``run``), score columns of ``scores.csv`` (``audit``),
``--attacks``, ``check --attack``, ``audit --rank-by`` and the reports.

A caller wraps what it has in :class:`AttackInputs` and asks
:func:`compute_attacks` for the names it wants: only those are computed, each
only when its inputs are there, and every derived input (the documents'
word-count features, a score another attack builds on) once.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, NamedTuple

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.features import document_features
from topicaudit.attacks.lira import offline_scores, online_scores
from topicaudit.attacks.quantile import quantile_scores
from topicaudit.attacks.rmia import population_scores, rmia_scores
from topicaudit.attacks.variance import shrunk_offline_scores, shrunk_online_scores
from topicaudit.bounds.epsilon import EpsilonBound
from topicaudit.bounds.one_run import eps_lb_one_run

# What an attack may need (AttackInputs.provides says which a caller has):
#   zeta              ζ under the model under audit and under every shadow, and which shadows trained on what
#   theta_statistics  the θ̂-derived statistics beside ζ (topicaudit.attacks.statistics), under every model
#   both_sides        every document has at least one IN and one OUT shadow
#   n_tokens          each document's tokens within the vocabulary ζ is computed on
#   counts            the documents' word counts over that vocabulary (documents × words)
#   population        RMIA's population: reference documents taken as non-members, scored like the documents
INPUT_KINDS = ("zeta", "theta_statistics", "both_sides", "n_tokens", "counts", "population")
# What `topicaudit run` and `topicaudit audit` can supply.
RUN_INPUTS = frozenset({"zeta", "theta_statistics", "both_sides", "n_tokens", "counts"})
AUDIT_INPUTS = frozenset({"zeta", "both_sides", "n_tokens", "counts", "population"})

# quantile_regression fits gradient boosting on every OUT (shadow, document) pair: ~1 s with 16 shadows on
# PHEME, ~6 s with 128, where LiRA is stronger anyway. Beyond this many shadows it is computed only when named.
QUANTILE_REGRESSION_MAX_SHADOWS = 16
# Attacks whose ε lower bound a run reports (each at α/len, so all hold jointly).
BOUNDED_ATTACKS = ("lira_online", "lira_offline")


class Population(NamedTuple):
    """RMIA's population: reference documents' ζ under the model (n,) and the shadows (N, n), with their
    shadow membership (N, n) and token counts (n,)."""

    zeta: np.ndarray
    shadow_zeta: np.ndarray
    shadow_in: np.ndarray
    n_tokens: np.ndarray


class AttackInputs:
    """What attacks are computed from, with the derived inputs and the scores computed at most once.

    target: statistic name → (n_docs,) under the model under audit; shadow:
    name → (n_shadows, n_docs); shadow_in: (n_shadows, n_docs) booleans. Only
    ``zeta`` is required among the statistics.
    """

    def __init__(self, target: dict[str, np.ndarray], shadow: dict[str, np.ndarray], shadow_in: np.ndarray,
                 n_tokens: np.ndarray | None = None, counts: sp.spmatrix | None = None,
                 population: Population | None = None):
        self.target, self.shadow, self.shadow_in = target, shadow, shadow_in
        self.n_tokens, self.counts, self.population = n_tokens, counts, population
        self._scores: dict[str, np.ndarray] = {}

    @property
    def zeta(self) -> np.ndarray:
        return self.target["zeta"]

    @property
    def shadow_zeta(self) -> np.ndarray:
        return self.shadow["zeta"]

    @cached_property
    def provides(self) -> frozenset[str]:
        have = {"zeta"}
        if all(name in self.target for name in ("neg_entropy", "logit_max", "std", "max")):
            have.add("theta_statistics")
        if self.shadow_in.any(axis=0).all() and (~self.shadow_in).any(axis=0).all():
            have.add("both_sides")
        have.update(name for name, value in (("n_tokens", self.n_tokens), ("counts", self.counts),
                                             ("population", self.population)) if value is not None)
        if self.population is not None and self.population.zeta.size == 0:
            have.discard("population")
        return frozenset(have)

    @property
    def needed_n_tokens(self) -> np.ndarray:
        """``n_tokens``, for an attack that needs it (compute_attacks scores an attack only when ``provides``
        holds what it needs)."""
        assert self.n_tokens is not None, "an attack that needs n_tokens is scored only when it is given"
        return self.n_tokens

    @property
    def needed_population(self) -> Population:
        """``population``, for an attack that needs it (as ``needed_n_tokens``)."""
        assert self.population is not None, "an attack that needs the population is scored only when it is given"
        return self.population

    @cached_property
    def features(self) -> np.ndarray | None:
        """The documents' word-count features (shrunk variances' prior, quantile regression), once."""
        return document_features(self.counts) if self.counts is not None else None

    def score(self, name: str) -> np.ndarray:
        """One attack's scores (computed on first use)."""
        if name not in self._scores:
            self._scores[name] = REGISTRY[name].score(self)
        return self._scores[name]


@dataclass(frozen=True)
class Attack:
    name: str
    score: Callable[[AttackInputs], np.ndarray]
    needs: frozenset[str]


def _online(stat: str, global_variance: bool = False) -> Callable[[AttackInputs], np.ndarray]:
    return lambda i: online_scores(i.target[stat], i.shadow[stat], i.shadow_in, global_variance=global_variance)


def _offline(global_variance: bool) -> Callable[[AttackInputs], np.ndarray]:
    return lambda i: offline_scores(i.zeta, i.shadow_zeta, i.shadow_in, global_variance=global_variance)


def _threshold(stat: str) -> Callable[[AttackInputs], np.ndarray]:
    return lambda i: i.target[stat]


def _rmia(online: bool) -> Callable[[AttackInputs], np.ndarray]:
    return lambda i: rmia_scores(i.zeta, i.shadow_zeta, i.shadow_in, i.needed_n_tokens, online=online)[0]


def _rmia_population(i: AttackInputs) -> np.ndarray:
    p = i.needed_population
    ratio = rmia_scores(p.zeta, p.shadow_zeta, p.shadow_in, p.n_tokens, online=True)[0]
    return population_scores(i.score("rmia_online"), ratio)


def _quantile(i: AttackInputs) -> np.ndarray:
    return quantile_scores(i.zeta, i.shadow_zeta, i.shadow_in, i.counts, features=i.features)


def _needs(*names: str) -> frozenset[str]:
    return frozenset({"zeta", *names})


# Every attack, in the order results list them; what each computes: docs/attacks.md.
REGISTRY: dict[str, Attack] = {attack.name: attack for attack in (
    Attack("lira_online", _online("zeta"), _needs()),
    Attack("lira_online_global", _online("zeta", global_variance=True), _needs()),
    Attack("lira_offline", _offline(False), _needs()),
    Attack("lira_offline_global", _offline(True), _needs()),
    Attack("lira_online_neg_entropy", _online("neg_entropy"), _needs("theta_statistics")),
    Attack("lira_online_logit_max", _online("logit_max"), _needs("theta_statistics")),
    Attack("lira_online_std", _online("std"), _needs("theta_statistics")),
    Attack("threshold_max_theta", _threshold("max"), _needs("theta_statistics")),
    Attack("threshold_std_theta", _threshold("std"), _needs("theta_statistics")),
    Attack("threshold_entropy_theta", _threshold("neg_entropy"), _needs("theta_statistics")),
    Attack("lira_online_shrunk", lambda i: shrunk_online_scores(i.zeta, i.shadow_zeta, i.shadow_in, i.features),
           _needs("both_sides", "n_tokens")),
    Attack("lira_offline_shrunk", lambda i: shrunk_offline_scores(i.zeta, i.shadow_zeta, i.shadow_in, i.features),
           _needs("both_sides", "n_tokens")),
    Attack("rmia_online", _rmia(True), _needs("n_tokens")),
    Attack("rmia_offline", _rmia(False), _needs("n_tokens")),
    Attack("rmia_population", _rmia_population, _needs("n_tokens", "population")),
    Attack("quantile_regression", _quantile, _needs("counts")),
)}


def attack_names(inputs=None) -> tuple[str, ...]:
    """Every attack's name in order; with ``inputs`` (input kinds, e.g. RUN_INPUTS) those computable from them."""
    return tuple(name for name, attack in REGISTRY.items() if inputs is None or attack.needs <= set(inputs))


# The attacks `topicaudit run` reports (and `--attacks`, `check --attack` accept).
ATTACKS = attack_names(RUN_INPUTS)


def unknown_attacks(names, known=ATTACKS) -> list[str]:
    return [name for name in names if name not in known]


def requested_attacks(n_shadows: int, names=None) -> tuple[str, ...]:
    """The attacks to compute: ``names`` when given, else every one except quantile_regression beyond
    QUANTILE_REGRESSION_MAX_SHADOWS shadows (it is slow there and LiRA is stronger)."""
    if names:
        return tuple(names)
    return tuple(name for name in REGISTRY
                 if name != "quantile_regression" or n_shadows <= QUANTILE_REGRESSION_MAX_SHADOWS)


def compute_attacks(inputs: AttackInputs, names) -> dict[str, np.ndarray]:
    """Scores of the named attacks whose inputs are there, in registry order (unknown names are the caller's to
    refuse; an attack whose inputs are missing is left out)."""
    wanted = set(names)
    return {name: inputs.score(name) for name, attack in REGISTRY.items()
            if name in wanted and attack.needs <= inputs.provides}


def attack_scores(target: dict[str, np.ndarray], shadow: dict[str, np.ndarray], shadow_in: np.ndarray,
                  n_tokens: np.ndarray | None = None, attacks=None, counts=None) -> dict[str, np.ndarray]:
    """A run's attack scores from target statistics (n_docs,) and shadow ones (n_shadows, n_docs).

    n_tokens: each document's tokens within the target's vocabulary (RMIA's
    per-token likelihood, the few-model attacks); counts: the documents' word
    counts over that vocabulary (the shrunk variances' features, quantile
    regression); attacks: the names to compute (default: ``requested_attacks``).
    """
    inputs = AttackInputs(target, shadow, shadow_in, n_tokens, counts)
    return compute_attacks(inputs, requested_attacks(shadow_in.shape[0], attacks))


def recommended_attack(n_shadows: int) -> str:
    """The attack to rank by with N shadow (reference) models; the rule and its measurements: docs/attacks.md.

    One model: only RMIA is defined (LiRA needs a shadow on each side of every
    document). Two or more: offline LiRA with shrunk variance, the best mean
    TPR at 0.1% FPR measured with 4–16 shadows, and with 128 within the seeds'
    spread of online LiRA at a higher AUC.
    """
    if n_shadows < 1:
        raise ValueError(f"need at least one shadow model (got {n_shadows})")
    return "rmia_online" if n_shadows == 1 else "lira_offline_shrunk"


def bounded_attacks(names) -> list[str]:
    """The attacks whose ε bound a run reports: the usual ones among ``names``, else all of ``names``."""
    chosen = [name for name in BOUNDED_ATTACKS if name in names]
    return chosen or [name for name in names if name in ATTACKS]


def epsilon_lower_bounds(scores: dict[str, np.ndarray], is_member: np.ndarray, delta: float,
                         alpha: float, attacks=BOUNDED_ATTACKS) -> dict[str, EpsilonBound]:
    """One-run ε lower bounds (Steinke, Nasr & Jagielski 2023) for the main attacks on natural documents.

    One-run auditing is the valid route for a single target training in which
    every document was included independently with probability ½ — exactly
    the plan's target membership. The α is split over the attacks (Bonferroni),
    so the largest of the bounds is itself a valid bound at confidence 1 − α.
    """
    attacks = [name for name in attacks if name in scores]
    if not attacks:
        raise ValueError("no attack to bound")
    share = alpha / len(attacks)
    return {name: eps_lb_one_run(scores[name], is_member, delta=delta, alpha=share) for name in attacks}
