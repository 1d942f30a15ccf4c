"""What ``run`` returns: ``results.json`` as typed, frozen records with versioned JSON.

:class:`RunResults` is ``results.json`` (``topicaudit run``, ``topicaudit.run()``); its parts (the corpus, the
target and its claim, the attacks' metrics, the bounds, the canary audit) are records of their own, which
``audit.json`` (:mod:`topicaudit.engine.storage.audit_results`) and ``check``
(:mod:`topicaudit.engine.storage.check_result`) reuse.

Each record holds exactly the JSON its command writes: ``X.from_json(d).to_json() == d``
for every file this version writes, key order included, so the file is written
from the record and read back into it. A key the file lacks (a run written
before that key existed, or a hand-made file) is ``None`` on the record and
stays absent when written again; a key this version does not know is kept
as it was (``extra``). A schema this version does not know, or a newer one,
is a ``UserError`` naming the file and the fix.

``RunResults`` and ``AuditResults`` are also read-only mappings of their JSON
(``results["canaries"]["count"]``), as the dicts they replace were.
"""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from topicaudit.bounds.epsilon import EpsilonBound
from topicaudit.engine.storage.check_result import CHECK_SCHEMA, CheckResult
from topicaudit.engine.storage.records import BOUNDS, JsonView, Record, check_schema, record, records
from topicaudit.targets.mechanisms import Mechanism, mechanism_from_json
from topicaudit.targets.privacy.events import guarantee_from_json
from topicaudit.targets.privacy.guarantee import Guarantee

RESULTS_SCHEMA = "topicaudit.results/1"          # results.json of `topicaudit run`


# -- results.json -------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CorpusInfo(Record):
    """``corpus``: what was audited (the fingerprint is a digest of the counts and the vocabulary)."""

    source: str | None = None
    n_docs: int | None = None
    n_words: int | None = None
    n_tokens: int | None = None
    n_dropped_empty: int | None = None
    path: str | None = None  # absolute; None for the synthetic corpus
    fingerprint: str | None = None


@dataclass(frozen=True, kw_only=True)
class GuaranteeInfo(Record):
    """``target.guarantee``: the claim as ``topicaudit.targets.privacy.guarantee.Guarantee.to_json`` wrote it."""

    REQUIRED = ("epsilon", "delta")

    epsilon: float | None  # None: no claim
    delta: float
    adjacency: str | None = None
    basis: str | None = None
    accountant: str | None = None
    parameters: dict[str, Any] | None = None
    event: dict[str, Any] | None = None  # the mechanism as a dp-accounting event
    neighbours: str | None = None  # which datasets the claim calls neighbours (None: the adjacency's usual)

    @classmethod
    def of(cls, guarantee: Guarantee) -> GuaranteeInfo:
        """The record of a claim, as ``Guarantee.to_json`` states it."""
        return cls.from_keys(guarantee.to_json())

    def guarantee(self) -> Guarantee:
        """The Guarantee itself, its event rebuilt (for the accountant)."""
        return guarantee_from_json(self.to_json())


@dataclass(frozen=True, kw_only=True)
class TargetInfo(Record):
    """``target``: the learner, its vocabulary step and its claim; the release's size once shadows ran."""

    REQUIRED = ("guarantee",)
    OPTIONAL = ("test_under_noise", "test_bug", "vocabulary_size", "n_members", "monitor", "learner_source",
                "vocabulary_source", "loaded_code")
    CODECS = {"guarantee": record(GuaranteeInfo)}

    learner: str | None = None
    k: int | None = None
    vocabulary_step: str | None = None
    guarantee: GuaranteeInfo
    test_under_noise: float | None = None
    test_bug: str | None = None
    vocabulary_size: int | None = None
    n_members: int | None = None
    monitor: dict[str, Any] | None = None  # cgs-monitor's data-dependent privacy trajectory
    # A plug-in's class path, and its distribution and version when known (topicaudit.targets.plugins.source).
    learner_source: dict[str, str] | None = None
    vocabulary_source: dict[str, str] | None = None
    # Code files the fitting process loaded from outside the cache key's digests (engine.storage.fitted_code).
    loaded_code: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True)
class ShadowsInfo(Record):
    n_shadows: int | None = None
    vocabulary: str | None = None
    in_per_document: int | None = None


@dataclass(frozen=True, kw_only=True)
class AttackMetrics(Record):
    """One attack's metrics (``topicaudit.attacks.metrics.summarize``)."""

    KEYS = {"tpr_at_fpr_0_001": "tpr_at_fpr_0.001", "tpr_at_fpr_0_01": "tpr_at_fpr_0.01"}

    auc: float | None = None
    tpr_at_fpr_0_001: float | None = None
    tpr_at_fpr_0_01: float | None = None
    balanced_accuracy: float | None = None

    @classmethod
    def of(cls, summary: dict[str, float]) -> AttackMetrics:
        """The metrics ``topicaudit.attacks.metrics.summarize`` computed, by their results.json keys."""
        return cls.from_keys(summary)

    def get(self, key: str) -> float | None:
        """A metric by its results.json key (``"tpr_at_fpr_0.001"``)."""
        return self.to_json().get(key)


@dataclass(frozen=True, kw_only=True)
class NaturalBounds(Record):
    """``epsilon_lower_bounds``: the one-run bound of each bounded attack on the natural documents."""

    CODECS = {"by_attack": BOUNDS}

    method: str | None = None
    confidence: float | None = None
    delta: float | None = None
    epsilon: float | None = None  # the largest
    by_attack: dict[str, EpsilonBound] | None = None


@dataclass(frozen=True, kw_only=True)
class StatisticsInfo(Record):
    names: list[str] | None = None
    max_zeta_gap: float | None = None
    zeta_tol: float | None = None


@dataclass(frozen=True, kw_only=True)
class Utility(Record):
    """``utility``: UMass coherence on the members, held-out perplexity on the non-members."""

    umass_coherence: float | None = None
    umass_coherence_per_topic: list[float] | None = None
    top_n: int | None = None
    coherence_documents: str | None = None
    coherence_skipped_pairs: int | None = None
    heldout_perplexity: float | None = None
    heldout_documents: str | None = None
    heldout_tokens: int | None = None

    @classmethod
    def of(cls, utility: dict[str, Any]) -> Utility:
        """The figures ``topicaudit.attacks.utility.release_utility`` computed."""
        return cls.from_keys(utility)


@dataclass(frozen=True, kw_only=True)
class CanaryBounds(Record):
    """A canary audit's bounds: every valid test, α split over them, and the audit's ceiling."""

    OPTIONAL = ("ceiling",)
    CODECS = {"by_test": BOUNDS}

    confidence: float | None = None
    delta: float | None = None
    epsilon: float | None = None  # the largest
    ceiling: float | None = None  # the largest ε any outcome could prove
    by_test: dict[str, EpsilonBound] | None = None


@dataclass(frozen=True, kw_only=True)
class MechanismInfo(Record):
    """What a power estimate simulates: the claimed mechanism's constants, as its transcript states them."""

    OPTIONAL = ("arrays", "fresh_released", "anchors", "contribution", "recorded")

    kind: str | None = None
    parameters: dict[str, Any] | None = None
    tokens: int | None = None
    topics: int | None = None
    paired: bool | None = None
    stage: str | None = None  # "learner" or "vocabulary"
    arrays: list[str] | None = None  # the arrays the transcript held (written since the typed releases)
    fresh_released: list[int] | None = None  # DP vocabulary steps: [released, fresh canary words]
    anchors: int | None = None
    # Gaussian steps: the measured shares of a canary's contribution in its scored topic (attacks/contribution.py)
    contribution: list[float] | None = None
    # the releases (Laplace) or steps (Gaussian) recorded, when not the count the constants declare
    recorded: int | None = None

    def release(self) -> Mechanism:
        """The typed constants (``topicaudit.mechanisms``); ValueError for a kind or constant nothing reads."""
        return mechanism_from_json(str(self.kind), dict(self.parameters or {}))

    @property
    def count_name(self) -> str:
        """The parameter that counts this mechanism's releases: ``steps`` (a sampler's), else ``releases``."""
        return "steps" if "steps" in (self.parameters or {}) else "releases"

    def as_recorded(self) -> MechanismInfo:
        """The mechanism with the count of releases the learner recorded, which a power estimate simulates."""
        if self.recorded is None or self.recorded < 1:  # a damaged record: the declared count
            return self
        return dataclasses.replace(self, parameters={**(self.parameters or {}), self.count_name: self.recorded})


@dataclass(frozen=True, kw_only=True)
class CanaryResults(Record):
    """``canaries``: the canary audit's design, metrics and bounds."""

    OPTIONAL = ("mechanism", "release_epsilon_lower_bounds")
    CODECS = {"mechanism": record(MechanismInfo), "scores": records(AttackMetrics),
              "epsilon_lower_bounds": record(CanaryBounds), "release_epsilon_lower_bounds": record(CanaryBounds)}

    observe: str | None = None  # "mechanism" or "release"
    threat_model: str | None = None
    paired: bool | None = None
    mechanism: MechanismInfo | None = None
    kind: str | None = None
    count: int | None = None
    length: int | None = None
    members: int | None = None
    fixed_training_documents: int | None = None
    shadows: int | None = None
    release_vocabulary_size: int | None = None
    adjacency: str | None = None
    scores: dict[str, AttackMetrics] | None = None
    epsilon_lower_bounds: CanaryBounds | None = None
    release_epsilon_lower_bounds: CanaryBounds | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class RunResults(JsonView, Record):
    """``results.json``: what one ``topicaudit run`` computed (docs/run-directory.md lists every key)."""

    SCHEMA: ClassVar[str] = RESULTS_SCHEMA
    REQUIRED = ("schema", "target")
    OPTIONAL = ("epsilon_lower_bounds", "statistics", "utility", "canaries", "verdict", "manifest")
    CODECS = {"corpus": record(CorpusInfo), "target": record(TargetInfo), "shadows": record(ShadowsInfo),
              "attacks": records(AttackMetrics), "epsilon_lower_bounds": record(NaturalBounds),
              "statistics": record(StatisticsInfo), "utility": record(Utility), "canaries": record(CanaryResults)}

    schema: str
    name: str | None = None
    config_hash: str | None = None
    corpus: CorpusInfo | None = None
    target: TargetInfo
    shadows: ShadowsInfo | None = None
    metrics_convention: str | None = None
    attacks: dict[str, AttackMetrics] = field(default_factory=dict)  # empty: a canary-only run
    seeds: dict[str, int] | None = None
    versions: dict[str, str] | None = None
    # The manifest's schema: this run keeps one, so it is refused without it (engine/storage/integrity.py).
    manifest: str | None = None
    ray: dict[str, Any] | None = None
    resumed: bool | None = None
    warnings: list[str] = field(default_factory=list)  # raised inside Ray workers, each once
    epsilon_lower_bounds: NaturalBounds | None = None
    statistics: StatisticsInfo | None = None
    utility: Utility | None = None
    canaries: CanaryResults | None = None
    # The verdict on the run's own claim (``check``'s, without its schema and run directory), and
    # "claim_tested": False when these tests cannot hold the target to its claim (then at ε = 0: bounds only).
    verdict: dict[str, Any] | None = None
    timings_s: dict[str, float] | None = None

    @classmethod
    def from_json(cls, data: Any, where: str = "results.json") -> RunResults:
        check_schema(data, cls.SCHEMA, where)
        return super().from_json(data, where)

    @property
    def n_shadows(self) -> int:
        return int(self.shadows.n_shadows or 0) if self.shadows is not None else 0

    def own_verdict(self, run_dir: str | Path) -> tuple[CheckResult, bool] | None:
        """The verdict ``run`` stored on the run's own claim, and whether the claim was tested (None for runs
        from before it was stored). ``check`` with no claim recomputes exactly this."""
        if self.verdict is None:
            return None
        stored = {key: value for key, value in self.verdict.items() if key != "claim_tested"}
        tested = bool(self.verdict.get("claim_tested"))
        result = CheckResult.from_json({**stored, "schema": CHECK_SCHEMA, "run_dir": str(run_dir)},
                                       f"{run_dir}/results.json verdict", untested=not tested)
        return result, tested

    @property
    def recorded_bounds(self) -> NaturalBounds | CanaryBounds | None:
        """The bounds the run recorded: on the natural documents, else on the canaries."""
        if self.epsilon_lower_bounds is not None:
            return self.epsilon_lower_bounds
        return self.canaries.epsilon_lower_bounds if self.canaries is not None else None
