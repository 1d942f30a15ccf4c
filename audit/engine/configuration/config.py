"""The configuration of both commands: TOML file + command-line overrides, validated once.

One model with two variants: :class:`Config` for ``run`` (a target trained
and attacked here: [corpus], [synthetic], [target], [attack]) and
:class:`AuditConfig` for ``audit`` (a released model: [model], [corpus] = the
candidates, [reference], [attack], [ranking]); both have ``name``, ``seed``,
``output`` and [ray]. The same code loads them (``loading``), validates them
(``config_checks.validate``) and gives their identity (here). Unknown keys are
errors (a typo must not silently fall back to a default), and every message
names the file, the table and the key.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from topicaudit.attacks.canaries import KINDS as canary_kinds
from topicaudit.errors import UserError
from topicaudit.folder_anchors import absolute
from topicaudit.targets import learner_settings, sources, vocabulary_of
from topicaudit.targets.plugins import is_class_path


@dataclass
class CorpusConfig:
    path: str | None = None          # None: the embedded synthetic corpus
    format: str | None = None        # json | uci | 20news | folder (None: from the path)
    preprocess: bool | None = None   # None: pre-process raw text, not bag-of-words
    text_field: str = "text"
    options: dict[str, Any] = field(default_factory=dict)  # format-specific loader options
    max_words: int = 0               # keep the N words of highest document frequency (0: all words)


@dataclass
class SyntheticConfig:
    n_docs: int = 1000
    n_words: int = 1500
    k: int = 5
    mean_length: float = 40.0
    topic_concentration: float = 0.05
    doc_concentration: float = 0.3


@dataclass
class TargetConfig:
    learner: str = "lda"             # a built-in name, "package.module:Class", or an installed plug-in's name
    k: int = 5
    # auto: the public vocabulary ("all") for a learner claiming a finite ε, else "observed" (registry.default_vocabulary)
    vocabulary: str = "auto"
    params: dict[str, Any] = field(default_factory=dict)
    vocabulary_params: dict[str, Any] = field(default_factory=dict)
    # For testing the audit only: the learner's noise divided by this factor, its claim unchanged.
    test_under_noise: float = 1.0
    # For testing the audit only: a planted bug (topicaudit.targets.bug_variants.BUGS), its claim unchanged.
    test_bug: str = ""


@dataclass
class CanaryConfig:
    count: int = 0       # canaries in the canary release (0: none); each is in its training with probability ½
    kind: str = "auto"   # auto | unique-word | rare-words | natural | word | paired | threshold (docs/canaries.md)
    length: int = 0      # tokens per canary document; 0: 4× the learner's document cap, else the median document
    # What the canaries are scored on: mechanism (everything the DP mechanism releases, as its proof
    # assumes), release (the released Φ only), auto (mechanism when the learner records it).
    observe: str = "auto"
    shadows: int = 0     # shadow canary releases for LiRA scores on the canaries (even; 0: shadow-free only)


CANARY_KINDS = ("auto", *canary_kinds)  # "auto": chosen from the target (attacks.canaries.resolve_kind)
OBSERVE = ("auto", "mechanism", "release")
PATH_OPTIONS = ("vocab", "dictionary")  # [corpus.options] that name files (uci, mm): relative to the config file


@dataclass
class AttackConfig:
    shadows: int = 64
    shadow_vocabulary: str = "target"  # target: reuse the target's released vocabulary; own: run the full pipeline
    tol: float = 1e-8                  # ζ duality-gap tolerance
    alpha: float = 0.05                # ε lower bounds hold with confidence 1 − alpha
    delta: float = 1e-5                # δ for ε lower bounds when the target claims none
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
    attacks: list[str] = field(default_factory=list)  # attacks to report (docs/attacks.md); empty: all


@dataclass
class AuditAttackConfig:
    """[attack] of an audit: the shadow models and ζ (no target is trained, so no bound, canary or filter)."""
    shadows: int = 64
    tol: float = 1e-8


@dataclass
class ModelConfig:
    """[model]: the released model ``topicaudit audit`` audits; the candidates are [corpus], the shadows' documents
    [reference]."""
    phi: str | None = None           # Φ file (or a saved gensim/tomotopy/scikit-learn model)
    vocabulary: str | None = None    # Φ's words in column order, when the Φ file does not carry them
    learner: str | None = None       # the learner that trained Φ (None: the saved model's library, else lda)
    k: int | None = None             # topics of the shadows (None: Φ's rows)
    params: dict[str, Any] = field(default_factory=dict)  # the shadows' learner parameters
    normalize: bool = False          # divide each row of Φ by its sum
    tolerance: float = 1e-3          # how far a row of Φ may sum from 1 without normalize
    trust_pickle: bool = False       # allow .joblib/.pkl Φ files (unpickling runs their code)


@dataclass
class RankingConfig:
    """[ranking]: how ``topicaudit audit`` orders and shows the candidates."""
    by: str = "recommended"          # an attack's name (topicaudit.attacks.ranking.RANKINGS), or recommended
    top: int = 10
    show_text: bool = False


@dataclass
class RayConfig:
    address: str = ""   # "": start a local instance (or use RAY_ADDRESS); "auto" or host:port: join a cluster
    num_cpus: int = 0   # local instance size; 0: all cores


@dataclass
class BaseConfig:
    """What both commands' configurations share; :class:`Config` (``run``) and :class:`AuditConfig` (``audit``)
    are its two variants, loaded, validated and identified by the same code."""

    SECTIONS: ClassVar[dict[str, type]] = {}
    FREE_TABLES: ClassVar[set[tuple[str, str]]] = set()  # passed through to loaders and learners
    NESTED_TABLES: ClassVar[dict[tuple[str, str], type]] = {}
    PATHS: ClassVar[tuple[tuple[str, str], ...]] = ()  # (table, key) naming files: relative to the config file
    COMMAND: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """The parts that determine the numbers (not where or how they are computed, nor how they are shown).

        Inputs are identified by their content (the fingerprint ``config_hash``
        is given), not by how their paths are spelled or where the command runs.
        """
        d = self.to_dict()
        for key in ("name", "output", "ray"):
            d.pop(key)
        for table, key in self.PATHS:
            d[table].pop(key)
        for table in ("corpus", "reference"):
            if table in d:  # files naming a corpus's words ([corpus.options] vocab, dictionary): in the fingerprint
                d[table]["options"] = {k: v for k, v in d[table]["options"].items() if k not in PATH_OPTIONS}
        return d


@dataclass
class Config(BaseConfig):
    """The configuration of ``topicaudit run`` (and ``sweep``, ``check``): a target trained and attacked here.

    Build it from a TOML file (:func:`load_config`), a dict shaped like one
    (:func:`config_from_dict`) or keywords; every key: docs/configuration.md.
    """

    name: str = "demo"
    seed: int = 0
    output: str | None = None  # run directory; default runs/<name>-<learner>-k<k>-s<seed>-<hash>
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    attack: AttackConfig = field(default_factory=AttackConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    SECTIONS: ClassVar[dict[str, type]] = {"corpus": CorpusConfig, "synthetic": SyntheticConfig,
                                           "target": TargetConfig, "attack": AttackConfig, "ray": RayConfig}
    FREE_TABLES: ClassVar[set[tuple[str, str]]] = {("corpus", "options"), ("target", "params"),
                                                   ("target", "vocabulary_params")}
    NESTED_TABLES: ClassVar[dict[tuple[str, str], type]] = {("attack", "canaries"): CanaryConfig}
    PATHS: ClassVar[tuple[tuple[str, str], ...]] = (("corpus", "path"),)
    COMMAND: ClassVar[str] = "run"

    @property
    def run_dir(self) -> Path:
        """``output``, else a directory named after what is audited, so that two audits never share one.

        runs/<corpus or name>-<learner>-k<k>-s<seed>-<6 hex of the configuration>: the same
        configuration (the same command) finds its directory again and resumes. An output holding ``..`` is
        the folder the system names, where the run is written (``check --output P/gone/../r`` read it by the
        text, which names nothing while P/gone is absent: "not a finished run" after the run was made).
        """
        if self.output:
            return Path(absolute(self.output)) if ".." in Path(self.output).parts else Path(self.output)
        return Path("runs") / (f"{self.stem}-{learner_label(self.target.learner)}-k{self.target.k}-s{self.seed}-"
                               f"{self.short_hash()}")

    @property
    def stem(self) -> str:
        """The name a default directory starts with: ``name``, or the corpus file's when ``name`` is unset."""
        if self.name != Config.name or self.corpus.path is None:
            return self.name
        return corpus_stem(self.corpus.path)

    def short_hash(self) -> str:
        """Six hex digits of the numbers-determining settings and the corpus's place (no file is read)."""
        where = None if self.corpus.path is None else str(Path(self.corpus.path).resolve())
        payload = json.dumps({"config": self.identity(), "corpus": where}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:6]

    def identity(self) -> dict[str, Any]:
        d = super().identity()
        d["attack"].pop("attacks")  # which scores are reported does not change the models or statistics
        if self.corpus.path is not None:
            d.pop("synthetic")
        # Keys added after runs were recorded: left out at their defaults so those runs still resume.
        if not self.attack.canaries.count:
            d["attack"].pop("canaries")
        if self.target.test_under_noise == 1.0:
            d["target"].pop("test_under_noise")
        if not self.target.test_bug:
            d["target"].pop("test_bug")
        if "canaries" in d["attack"] and self.attack.canaries.observe == "auto":
            d["attack"]["canaries"].pop("observe")
        t = self.target
        # The vocabulary step meant, so that "auto" and the step it stands for are one run (and runs recorded when
        # "observed" was the default still resume); a plug-in's class path and version, so that another version
        # of the user's package is another run.
        if t.vocabulary == "auto":
            try:
                d["target"]["vocabulary"] = vocabulary_of(t.learner, t.k, t.params, t.vocabulary)
            except UserError:
                pass  # a target that cannot be built never runs; validation says why
        d["target"].update(sources(t.learner, d["target"]["vocabulary"]))
        return d


@dataclass
class AuditConfig(BaseConfig):
    """The configuration of ``topicaudit audit``: a released model ([model]), candidates ([corpus]), reference
    documents for the shadows ([reference]) and how the ranking is shown ([ranking])."""

    name: str | None = None    # None: the Φ file's name
    seed: int = 0
    output: str | None = None  # output directory; default runs/audit-<name>-<hash>
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    reference: CorpusConfig = field(default_factory=CorpusConfig)
    attack: AuditAttackConfig = field(default_factory=AuditAttackConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    SECTIONS: ClassVar[dict[str, type]] = {"model": ModelConfig, "corpus": CorpusConfig, "reference": CorpusConfig,
                                           "attack": AuditAttackConfig, "ranking": RankingConfig, "ray": RayConfig}
    FREE_TABLES: ClassVar[set[tuple[str, str]]] = {("corpus", "options"), ("reference", "options"),
                                                   ("model", "params")}
    PATHS: ClassVar[tuple[tuple[str, str], ...]] = (("corpus", "path"), ("reference", "path"), ("model", "phi"),
                                                    ("model", "vocabulary"))
    COMMAND: ClassVar[str] = "audit"

    @property
    def run_name(self) -> str:
        return self.name or Path(self.model.phi or "").name.split(".")[0] or "model"

    @property
    def run_dir(self) -> Path:
        """``output``, else runs/audit-<name>-<6 hex of the settings and the inputs' places>: the same command
        finds its directory again and resumes; the same Φ audited with other candidates, another reference or
        other settings gets a directory of its own (as ``run``'s default does)."""
        if self.output:
            return Path(self.output)
        return Path("runs") / f"audit-{self.run_name}-{self.short_hash()}"

    def short_hash(self) -> str:
        """Six hex digits of the numbers-determining settings and where the inputs are (no file is read)."""
        places: dict[str, Any] = {}
        for table, key in self.PATHS:
            value = getattr(getattr(self, table), key)
            places[f"{table}.{key}"] = None if value is None else str(Path(value).resolve())
        for table in ("corpus", "reference"):
            for key, value in getattr(self, table).options.items():
                if key in PATH_OPTIONS and isinstance(value, str):
                    places[f"{table}.options.{key}"] = str(Path(value).resolve())
        payload = json.dumps({"config": self.identity(), "inputs": places}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:6]

    def identity(self) -> dict[str, Any]:
        d = super().identity()
        d.pop("ranking")  # how the candidates are ordered and shown does not change the models or statistics
        # Φ's content is in the fingerprint; how far its rows may stray and whether pickles may load do not
        # change the numbers.
        for key in ("tolerance", "trust_pickle"):
            d["model"].pop(key)
        return d


def learner_label(learner: str) -> str:
    """A learner's name as a default run directory shows it: a "module:Class" path by its class's name."""
    return learner.rpartition(":")[2].replace(".", "-") if is_class_path(learner) else learner


def corpus_stem(path: str) -> str:
    """A corpus file's short name: pheme_clean.json → pheme_clean, docword.kos.txt (UCI) → kos."""
    parts = Path(path).name.split(".")
    stem = parts[1] if parts[0] == "docword" and len(parts) > 2 else parts[0]
    return stem or "audit"


def run_config(config: BaseConfig) -> Config:
    """``config`` if it describes ``topicaudit run``; an audit's configuration is refused, naming its command."""
    if isinstance(config, AuditConfig):
        raise UserError("[model] phi is set: this configuration audits a released model; run it with "
                        "`topicaudit audit CONFIG.toml`, or remove [model] to train and audit a target")
    return config


def with_learner(config: Config, learner: Any) -> Config:
    """A copy of ``config`` whose target is a learner object, recorded as the configuration that rebuilds it
    (its name or ``module:Class``, k, its parameters away from their defaults: ``targets.learner_settings``), so
    the run directory's config.toml and hash identify it; ``learner`` None leaves ``config`` as it is."""
    if learner is None:
        return config
    name, k, params = learner_settings(learner)
    config = copy.deepcopy(config)
    config.target.learner, config.target.k, config.target.params = name, k, params
    return config


def audit_config_of(config: BaseConfig) -> AuditConfig:
    """``config`` if it describes ``topicaudit audit``; a run's configuration is refused with the fix."""
    if not isinstance(config, AuditConfig):
        raise UserError("no model to audit: give PHI on the command line, or [model] phi in the configuration")
    return config


def config_hash(config: BaseConfig, fingerprint: str) -> str:
    """The identity of a run's numbers: the configuration's identity and its inputs' content fingerprint."""
    payload = json.dumps({"config": config.identity(), "corpus": fingerprint}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
