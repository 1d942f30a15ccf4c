"""What ``run``, ``audit`` and ``check`` return: typed, frozen records with versioned JSON.

- :class:`RunResults` is ``results.json`` (``topicaudit run``, ``topicaudit.run()``);
- :class:`AuditResults` is ``audit.json`` (``topicaudit audit``, ``topicaudit.audit_model()``);
- :class:`CheckResult` is ``check --json``'s file (``topicaudit check``, ``topicaudit.check()``).

Each holds exactly the JSON its command writes: ``X.from_json(d).to_json() == d``
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

import csv
import dataclasses
import io
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from topicaudit.bounds.epsilon import EpsilonBound, Method
from topicaudit.bounds.verdict import THREAT_MODELS
from topicaudit.engine.storage.records import BOUNDS, JsonView, Record, check_schema, record, records
from topicaudit.errors import UserError, printable
from topicaudit.inputs.files import open_regular
from topicaudit.targets.mechanisms import Mechanism, mechanism_from_json
from topicaudit.targets.privacy.events import guarantee_from_json
from topicaudit.targets.privacy.guarantee import Guarantee

RESULTS_SCHEMA = "topicaudit.results/1"          # results.json of `topicaudit run`
# audit.json of `topicaudit audit`; /2: score columns and rankings named after the registry's attacks
USER_AUDIT_SCHEMA = "topicaudit.user-audit/2"
MAX_AUDIT_JSON_BYTES = 256 * 2**20  # far above any audit.json (its `top` and exposure's per-target values)
CHECK_SCHEMA = "topicaudit.check/1"              # check --json of `topicaudit check`

# The f-DP one-run test of the claimed mechanism's own curve (mechanism audits of Gaussian mechanisms).
CURVE = Method.FDP_CURVE
# The δ-tail test of a DP vocabulary step: canary words no fixed document holds, released at all.
DELTA_TAIL = Method.DELTA_TAIL


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


def confidence(alpha: float) -> str:
    """1 − α as a percentage with the digits it has: α = 0.999 is "0.1%" (":.0%" printed "0%"), 0.001 "99.9%"."""
    return f"{(1.0 - alpha) * 100:.10g}%"


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
                "vocabulary_source")
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

    OPTIONAL = ("arrays", "fresh_released", "anchors", "contribution")

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

    def release(self) -> Mechanism:
        """The typed constants (``topicaudit.mechanisms``); ValueError for a kind or constant nothing reads."""
        return mechanism_from_json(str(self.kind), dict(self.parameters or {}))


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
        result = CheckResult.from_json({**stored, "schema": CHECK_SCHEMA, "run_dir": str(run_dir)},
                                       f"{run_dir}/results.json verdict")
        return result, bool(self.verdict.get("claim_tested"))

    @property
    def recorded_bounds(self) -> NaturalBounds | CanaryBounds | None:
        """The bounds the run recorded: on the natural documents, else on the canaries."""
        if self.epsilon_lower_bounds is not None:
            return self.epsilon_lower_bounds
        return self.canaries.epsilon_lower_bounds if self.canaries is not None else None


# -- audit.json -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class AuditLearner(Record):
    """``learner``: the shadows' learner and where its settings came from."""

    CODECS = {"guarantee": record(GuaranteeInfo)}
    OPTIONAL = ("model_settings",)

    name: str | None = None
    k: int | None = None
    params: dict[str, Any] | None = None
    settings_from: str | None = None
    vocabulary: str | None = None
    guarantee: GuaranteeInfo | None = None
    # a saved scikit-learn model: the settings read from its file without unpickling, used and not, and why
    model_settings: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class AuditRanking(Record):
    """``ranking``: the score the candidates are ordered by, and whether it was the recommended one."""

    by: str | None = None
    rank_by: str | None = None
    recommended: bool | None = None
    rule: str | None = None
    order: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class AuditResults(JsonView, Record):
    """``audit.json``: one ``topicaudit audit`` of a released Φ (docs/user-audit.md lists every key).

    ``top`` holds the best-ranked candidates' rows of scores.csv; ``all_scores`` every candidate's, read from
    scores.csv on first use; ``paths`` the output directory's files; ``exposure`` the overall exposure figure
    (the attack measured on the shadow models, ``exposure["statement"]`` says it in one sentence).
    ``directory`` is where audit.json was written or read (None for a record built from a dict).
    """

    SCHEMA: ClassVar[str] = USER_AUDIT_SCHEMA
    REQUIRED = ("schema",)
    CODECS = {"learner": record(AuditLearner), "ranking": record(AuditRanking)}
    # roles of the output directory's files, for audit.json files written before it listed them
    FILES: ClassVar[dict[str, str]] = {"audit": "audit.json", "scores": "scores.csv", "statistics": "statistics.npz",
                                       "plan": "plan.npz", "config": "config.toml", "models": "models"}

    schema: str
    name: str | None = None
    config_hash: str | None = None
    inputs: dict[str, Any] | None = None
    learner: AuditLearner | None = None
    shadows: dict[str, Any] | None = None
    ranking: AuditRanking | None = None
    scores: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    exposure: dict[str, Any] | None = None   # the overall exposure figure (topicaudit.attacks.exposure)
    files: dict[str, str] | None = None      # role → file name in the output directory
    top: list[dict[str, Any]] = field(default_factory=list)
    statistics: dict[str, Any] | None = None
    seeds: dict[str, int] | None = None
    versions: dict[str, str] | None = None
    ray: dict[str, Any] | None = None
    timings_s: dict[str, float] | None = None
    resumed: bool | None = None
    warnings: list[str] = field(default_factory=list)
    directory: Path | None = field(default=None, compare=False, metadata={"json": False})

    @classmethod
    def from_json(cls, data: Any, where: str = "audit.json", directory: str | Path | None = None) -> AuditResults:
        check_schema(data, cls.SCHEMA, where)
        results = super().from_json(data, where)
        return dataclasses.replace(results, directory=Path(directory)) if directory is not None else results

    @classmethod
    def load(cls, directory: str | Path) -> AuditResults:
        """The audit.json of an output directory of ``topicaudit audit``, or a UserError saying why not."""
        path = Path(directory) / "audit.json"
        if not path.exists():
            raise UserError(f"{directory} holds no audit.json: it is not a finished `topicaudit audit` output "
                            "directory (rerun the same audit command to finish it)")
        with open_regular(path, "audit.json") as handle:
            raw = handle.read(MAX_AUDIT_JSON_BYTES + 1)
        if len(raw) > MAX_AUDIT_JSON_BYTES:
            raise UserError(f"{path} is larger than {MAX_AUDIT_JSON_BYTES // 2**20} MiB, which no audit.json is; "
                            "rerun the audit to rewrite it")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise UserError(f"{path} is unreadable ({type(error).__name__}); rerun the audit to rewrite it") from None
        return cls.from_json(data, str(path), directory)

    @property
    def paths(self) -> dict[str, Path]:
        """Each file of the output directory by role (audit, scores, statistics, exposure, plan, config, models,
        …), as a path; a UserError when the record does not know its directory."""
        if self.directory is None:
            raise UserError("this AuditResults was not read from an output directory, so it knows no file; "
                            "use topicaudit.AuditResults.load(directory)")
        return {role: self.directory / name for role, name in (self.files or self.FILES).items()}

    @cached_property
    def all_scores(self) -> dict[str, Any]:
        """Every scored candidate's row of scores.csv, strongest evidence first, as column → numpy array.

        Read from scores.csv on first use (``top`` holds only the first rows): ``rank``, ``candidate`` and
        ``n_tokens`` as integers, ``id`` and ``text`` as strings as scores.csv holds them (a cell a spreadsheet
        would read as a formula starts with ``'``), every score column as float64 (NaN where empty).
        """
        path = self.paths["scores"]
        if not path.exists():
            raise UserError(f"{path} is missing; rerun the same audit command to rewrite it")
        with open_regular(path, "scores.csv") as handle:
            try:
                reader = csv.reader(io.TextIOWrapper(handle, encoding="utf-8", newline=""))
                header = next(reader, None)
                rows = list(reader)
            except (UnicodeDecodeError, csv.Error) as error:
                raise UserError(f"{path} is unreadable ({type(error).__name__}); rerun the audit") from None
        if not header or any(len(row) != len(header) for row in rows):
            raise UserError(f"{path} is not the table `topicaudit audit` writes (ragged or empty); rerun the audit")
        columns: dict[str, Any] = {}
        for j, name in enumerate(header):
            cells = [row[j] for row in rows]
            try:
                if name in ("id", "text"):
                    columns[name] = np.array(cells, dtype=object)
                elif name in ("rank", "candidate", "n_tokens"):
                    columns[name] = np.array([int(c) for c in cells], dtype=np.int64)
                else:
                    columns[name] = np.array([float(c) if c else math.nan for c in cells], dtype=np.float64)
            except ValueError:
                raise UserError(f"{path}: column {name!r} holds a value that is not a number; the file was edited "
                                "or damaged — rerun the audit") from None
        return columns


# -- check ----------------------------------------------------------------------------------------------------
# What protected a run directory a verdict was read from (topicaudit.engine.storage.integrity; docs/run-directory.md#integrity).
HMAC, SHA256, NONE = "hmac-sha256", "sha256", "none"
# What a verdict on a directory in the pre-manifest layout says about itself.
UNVERIFIED = ("UNVERIFIED: this directory has no manifest.json (the layout written before manifests existed), "
              "so its files' hashes were not checked")


def ceiling_remedy(advice: dict[str, Any] | None) -> str:
    """What would lift an audit's ceiling (``CheckResult.canaries_for_ceiling``), in words."""
    if advice is None:
        return "add canaries, --canaries M"
    if advice.get("count") is None:
        return (f"even {advice['searched_to']:,} canaries would raise it only to ε ≈ {advice['ceiling']:.2f}: no "
                f"audit of this size can refute ε = {advice['claimed_epsilon']:g}")
    above = ", above the claim" if advice.get("reason") == "claim" else ""
    return (f"{advice['count']:,} canaries would raise it to ε ≈ {advice['ceiling']:.2f}{above}: "
            f"--canaries {advice['count']}")


def integrity_phrase(mode: str | None, key_id: str | None = None) -> str | None:
    """What a verdict line or a report says about the mode that protected the run (None: not known)."""
    if mode == HMAC:
        return f"integrity: authenticated (manifest HMAC-SHA256 verified with integrity key {key_id})"
    if mode == SHA256:
        return ("integrity: hashes only (manifest SHA-256 verified; no integrity key configured, so a forger who "
                "rewrites the manifest is not caught)")
    if mode == NONE:
        return UNVERIFIED
    return None


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one claim: every test's bound, what the tests observed, and how strong they were.

    What ``topicaudit check`` prints and ``topicaudit.check()`` returns. A
    claim (ε, δ) is violated when some test proves ε_LB > ε at confidence
    1 − α (α split over the tests).

    Attributes
    ----------
    run_dir : the run directory checked.
    claimed_epsilon, delta, alpha : the claim held against the run, and 1 − confidence.
    bounds : test ("natural/lira_online:one-run", "canaries/zeta:one-run") → its bound.
    ceiling : the largest ε any outcome of these tests could prove.
    adjacency : the claim's adjacency ("document" or "word"), which chose the tests.
    observed : test prefix ("natural/", "canaries/") → what its scores observed, in words.
    no_signal : the scores did not separate the candidates at all (then CONSISTENT would overstate
        what was tested).
    power : "2x" / "10x" → the simulated share of audits of this design that refute a mechanism 2× and
        10× less private than claimed (mechanism audits only), and "replicates".
    unseen : the bug families this design cannot see, which the power does not cover (mechanism audits).
    reversed_scores : tests whose scores rank members *below* non-members: a defect of that score (it cannot
        refute anything), reported rather than silently outvoted by the others.
    unverified : None when the run directory's manifest verified its files; else why not (a directory in the
        layout written before manifests existed), which the verdict line and the JSON repeat.
    disagreements : the constants the learner's record states otherwise than its claim's dp-accounting event
        (``targets.privacy.release_check``): the claim was computed for another mechanism than the one recorded.
    integrity : what protected the run directory: ``hmac-sha256`` (its manifest's MAC verified with the
        configured integrity key, ``integrity_key_id``), ``sha256`` (its hashes alone: no key configured) or
        ``none`` (unverified); None for a result not read from a directory (the verdict ``run`` stores).
    canaries_for_power : when the simulated power against a 2× weaker mechanism is below ``power`` (95%):
        the canary ``count`` whose simulated power reaches it (and that power, ``simulated``), or the largest
        count the search tried and its power (``searched_to``, ``searched_power``; count None) when the search's
        limits came first (``engine.verdict.canaries_for_power``).
    sizing : how ``check --canaries auto`` chose the canary count (``engine.sizing.Sizing.to_json``).
    canaries_for_ceiling : when the ceiling stopped the audit short (``engine.verdict.canaries_for_ceiling``):
        ``reason`` "claim" (no outcome could refute the claim: the canary ``count`` whose ceiling passes it, or
        None with ``searched_to``) or "saturated" (the bound is the ceiling: the ceiling, ``ceiling``, of
        ``count`` canaries, 4× the candidates).

    ``violated`` and ``verdict`` are the outcome; ``to_json`` / ``from_json``
    are ``check --json``'s file (schema ``topicaudit.check/1``), ``to_junit``
    its JUnit XML.
    """

    run_dir: Path
    claimed_epsilon: float
    delta: float
    alpha: float
    bounds: dict[str, EpsilonBound]
    ceiling: float = math.inf
    adjacency: str = "document"
    observed: dict[str, str] = field(default_factory=dict)
    no_signal: bool = False
    power: dict[str, float] | None = None
    unseen: list[str] = field(default_factory=list)
    reversed_scores: list[str] = field(default_factory=list)
    unverified: str | None = None
    disagreements: list[str] = field(default_factory=list)
    integrity: str | None = None
    integrity_key_id: str | None = None
    canaries_for_power: dict[str, Any] | None = None
    sizing: dict[str, Any] | None = None
    canaries_for_ceiling: dict[str, Any] | None = None

    @property
    def saturated(self) -> bool:
        """The bound is the audit's ceiling: the design, not the model, capped it."""
        return (self.canaries_for_ceiling or {}).get("reason") == "saturated"

    @property
    def epsilon_lower_bound(self) -> float:
        return max(b.epsilon for b in self.bounds.values())

    @property
    def strongest_attack(self) -> str:
        return max(self.bounds, key=lambda name: self.bounds[name].epsilon)

    @property
    def violated(self) -> bool:
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def verdict(self) -> str:
        """VIOLATED, NO SIGNAL or CONSISTENT."""
        return "VIOLATED" if self.violated else "NO SIGNAL" if self.no_signal else "CONSISTENT"

    @property
    def threat_model(self) -> str:
        """What the strongest test observed, in words."""
        return self.observed.get(self.strongest_attack.split("/")[0] + "/", THREAT_MODELS["release"])

    def message(self) -> str:
        """The verdict line; after it, a record that disagrees with its claim, and what protected the run
        directory (unverified, hashes, or authenticated)."""
        body = printable(self._message())  # the run directory's name is anyone's: one visible line, encodable
        if self.disagreements:
            body += (" — the learner's record and its claim describe different mechanisms: "
                     + "; ".join(self.disagreements))
        said = self.unverified or integrity_phrase(self.integrity, self.integrity_key_id)
        return body if not said else f"{body} — {said}"

    def _message(self) -> str:
        level = f"{self.adjacency}-level, {confidence(self.alpha)} confidence, δ = {self.delta:g}"
        # A refutation names what its test observed; a claim not refuted, everything every test observed.
        observed = f"observed: {self.threat_model}" if self.violated else \
            f"observed: {'; '.join(dict.fromkeys(self.observed.values())) or self.threat_model}"
        if self.violated:
            best = self.bounds[self.strongest_attack]
            if best.method == DELTA_TAIL:
                d = best.details
                return (f"VIOLATED: {d['released']} of {d['fresh_canaries']} canary words that no other document "
                        f"holds were released (p ≤ {d['p_value']:.2g} under the claim): its δ = {self.delta:g} "
                        f"fails, for every ε; {observed} [{self.run_dir}]")
            if best.method == CURVE:
                return (f"VIOLATED: {self.strongest_attack} refutes the claimed mechanism's own trade-off curve "
                        f"(its privacy loss would have to be ≥ {best.details['curve_scale_lb']:.2f}× the claimed "
                        f"one; {level}); this refutes the mechanism the claim describes, not every (ε, δ) reading "
                        f"of it; {observed} [{self.run_dir}]")
            why = ("; the released Φ proves more than the recorded mechanism allows: the model was not built "
                   "from what the learner recorded, or the claim is wrong"
                   if self.strongest_attack.startswith("canaries-release/") else "")
            return (f"VIOLATED: {self.strongest_attack} proves ε ≥ {self.epsilon_lower_bound:.3f} ({level}) "
                    f"> claimed ε = {self.claimed_epsilon:g}; {observed}{why} [{self.run_dir}]")
        if self.no_signal:
            unseen = f"; nor could it see {'; nor '.join(self.unseen)}" if self.unseen else ""
            return (f"NO SIGNAL: the scores do not separate the candidates (tied, or at chance); this audit "
                    f"cannot refute any claim; {observed}{unseen} [{self.run_dir}]")
        if self.power is not None:
            reach = (f"power: a mechanism 2× less private than claimed is refuted in {self.power['2x']:.0%} "
                     f"of simulated audits of this design, 10× in {self.power['10x']:.0%}")
            needed = self.canaries_for_power
            if needed is not None and needed.get("count"):
                reach += (f" ({needed['count']:,} canaries would reach {needed['power']:.0%}: --canaries "
                          f"{needed['count']}, or --canaries auto)")
            elif needed is not None:
                reach += (f" (the search for a count reaching {needed['power']:.0%} stopped at "
                          f"{needed['searched_to']:,} canaries, {needed['searched_power']:.0%} in simulation: "
                          "more are needed, --canaries auto says how many)")

        elif self.ceiling > self.claimed_epsilon:
            reach = f"this audit could refute claims up to ε = {self.ceiling:.2f} with a perfect attack"
        else:
            reach = (f"this audit could not refute it whatever the outcome (its ceiling is ε = {self.ceiling:.2f}: "
                     f"{ceiling_remedy(self.canaries_for_ceiling)})")
        if self.unseen:
            reach += f"; this design cannot see {'; nor '.join(self.unseen)}"
        defect = (f"; {', '.join(self.reversed_scores)} rank members below non-members (a defect of "
                  f"{'that score' if len(self.reversed_scores) == 1 else 'those scores'}: it cannot refute)"
                  if self.reversed_scores else "")
        return (f"CONSISTENT: not refuted; {self.strongest_attack} proves ε ≥ {self.epsilon_lower_bound:.3f} "
                f"({level}) ≤ claimed ε = {self.claimed_epsilon:g}; {observed}; {reach}{defect} [{self.run_dir}]")

    def to_json(self) -> dict[str, Any]:
        """``check --json``'s content; the derived verdict, bound and threat model are written out too."""
        return {
            "schema": CHECK_SCHEMA,
            "run_dir": str(self.run_dir),
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "alpha": self.alpha,
            "adjacency": self.adjacency,
            # ∞ (a δ-tail refutation) as the string "inf", as every bound's JSON has it: strict JSON has no ∞
            "epsilon_lower_bound": (self.epsilon_lower_bound if math.isfinite(self.epsilon_lower_bound)
                                    else str(self.epsilon_lower_bound)),
            "strongest_attack": self.strongest_attack,
            "ceiling": self.ceiling,
            "violated": self.violated,
            "verdict": self.verdict,
            "no_signal": self.no_signal,
            "observed": self.observed,
            "threat_model": self.threat_model,
            "power": self.power,
            **({"unseen": self.unseen} if self.unseen else {}),
            **({"reversed_scores": self.reversed_scores} if self.reversed_scores else {}),
            **({"unverified": self.unverified} if self.unverified else {}),
            **({"disagreements": self.disagreements} if self.disagreements else {}),
            **({"integrity": self.integrity} if self.integrity else {}),
            **({"integrity_key_id": self.integrity_key_id} if self.integrity_key_id else {}),
            **({"canaries_for_power": self.canaries_for_power} if self.canaries_for_power else {}),
            **({"sizing": self.sizing} if self.sizing else {}),
            **({"canaries_for_ceiling": self.canaries_for_ceiling} if self.canaries_for_ceiling else {}),
            "bounds": {name: b.to_json() for name, b in self.bounds.items()},
        }

    @classmethod
    def from_json(cls, data: Any, where: str = "check.json") -> CheckResult:
        """The result ``to_json`` wrote; its verdict must be the one its bounds give (else the file was edited)."""
        check_schema(data, CHECK_SCHEMA, where)
        try:
            result = cls(Path(data["run_dir"]), data["claimed_epsilon"], data["delta"], data["alpha"],
                         BOUNDS.decode(data["bounds"], f"{where}.bounds"), data["ceiling"], data["adjacency"],
                         dict(data["observed"]), bool(data["no_signal"]), data["power"],
                         list(data.get("unseen", [])), list(data.get("reversed_scores", [])),
                         data.get("unverified"), list(data.get("disagreements", [])), data.get("integrity"),
                         data.get("integrity_key_id"), data.get("canaries_for_power"), data.get("sizing"),
                         data.get("canaries_for_ceiling"))
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{where} is not a check result this topicaudit wrote ({type(error).__name__}: "
                            f"{error}); rerun `topicaudit check --json` to rewrite it") from None
        if not result.bounds or result.verdict != data.get("verdict"):
            raise UserError(f"{where}: its verdict is not the one its bounds give; the file was edited — rerun "
                            "`topicaudit check --json` to rewrite it")
        return result

    def to_junit(self) -> str:
        """One test case per run, failed when the claim is violated (any CI renders this)."""
        failure = (f'<failure message={quoteattr(self.message())} type="PrivacyClaimViolated">'
                   f"{escape(json.dumps(self.to_json(), indent=2))}</failure>") if self.violated else (
            f"<skipped message={quoteattr(self.message())}/>" if self.no_signal else "")
        name = quoteattr(printable(f"epsilon <= {self.claimed_epsilon:g} ({self.run_dir.name})"))
        return ('<?xml version="1.0" encoding="utf-8"?>\n'
                f'<testsuite name="topicaudit.check" tests="1" failures="{int(self.violated)}" errors="0">\n'
                f'  <testcase classname="topicaudit" name={name}>{failure}</testcase>\n'
                "</testsuite>\n")
