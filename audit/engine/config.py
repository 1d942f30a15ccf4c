"""The audit configuration: TOML file + command-line overrides, validated once.

Every key is documented in the README. Unknown keys are errors (a typo must
not silently fall back to a default), and every message names the file, the
table and the key.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topicaudit.attacks.registry import ATTACKS, unknown_attacks
from topicaudit.bounds.epsilon import check_level
from topicaudit.engine.validation import check_run_config, check_shadows
from topicaudit.errors import UserError
from topicaudit.inputs.files import check_regular
from topicaudit.targets.params import check_topics


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
    learner: str = "lda"
    k: int = 5
    vocabulary: str = "observed"
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


CANARY_KINDS = ("auto", "unique-word", "rare-words", "natural", "word", "paired", "threshold")
OBSERVE = ("auto", "mechanism", "release")


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
class ModelConfig:
    """[model]: a released model to audit (``topicaudit audit``) instead of a target the run trains.

    The candidates are [corpus], the documents for the shadows [reference].
    """
    phi: str | None = None           # Φ file (or a saved gensim/tomotopy/scikit-learn model); None: `run` mode
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
    by: str = "recommended"
    top: int = 10
    show_text: bool = False


@dataclass
class RayConfig:
    address: str = ""   # "": start a local instance (or use RAY_ADDRESS); "auto" or host:port: join a cluster
    num_cpus: int = 0   # local instance size; 0: all cores


@dataclass
class Config:
    """The one configuration model: what a TOML file and the command-line flags both build.

    One attribute per top-level key (``name``, ``seed``, ``output``) and one
    section per table: ``run`` reads ``[corpus]``/``[synthetic]``, ``[target]``
    and ``[attack]``; ``audit`` reads ``[model]``, ``[corpus]`` (the
    candidates), ``[reference]``, ``[attack]`` and ``[ranking]``; both read
    ``[ray]``. Every key and its default: docs/configuration.md. Build one with
    ``Config()`` (the demo), :func:`load_config` (a file) or
    :func:`config_from_dict` (a dict shaped like the file); ``run_dir`` is the
    run directory it names, ``identity()`` what determines its numbers.
    """

    name: str = "demo"
    seed: int = 0
    output: str | None = None  # run directory; default runs/<name>-<learner>-k<k>-s<seed>-<hash>
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    attack: AttackConfig = field(default_factory=AttackConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    reference: CorpusConfig = field(default_factory=CorpusConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)

    @property
    def run_dir(self) -> Path:
        """``output``, else a directory named after what is audited, so that two audits never share one.

        runs/<corpus or name>-<learner>-k<k>-s<seed>-<6 hex of the configuration>: the same
        configuration (the same command) finds its directory again and resumes.
        """
        if self.output:
            return Path(self.output)
        return Path("runs") / (f"{self.stem}-{self.target.learner}-k{self.target.k}-s{self.seed}-"
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def identity(self) -> dict[str, Any]:
        """The parts that determine the numbers (not where or how they are computed)."""
        d = self.to_dict()
        for key in ("name", "output", "ray", "model", "reference", "ranking"):  # the last three: `audit` only
            d.pop(key)
        d["attack"].pop("attacks")  # which scores are reported does not change the models or statistics
        if self.corpus.path is not None:
            d.pop("synthetic")
        # The corpus is identified by its content (config_hash's fingerprint), not by how its path is spelled
        # or where the command runs from.
        d["corpus"].pop("path")
        # Likewise the files that name its words ([corpus.options] vocab, dictionary): their words are in the
        # fingerprint, so an absolute or a relative spelling of the same file is the same configuration.
        d["corpus"]["options"] = {k: v for k, v in d["corpus"]["options"].items() if k not in PATH_OPTIONS}
        # Keys added after runs were recorded: left out at their defaults so those runs still resume.
        if not self.attack.canaries.count:
            d["attack"].pop("canaries")
        if self.target.test_under_noise == 1.0:
            d["target"].pop("test_under_noise")
        if not self.target.test_bug:
            d["target"].pop("test_bug")
        if "canaries" in d["attack"] and self.attack.canaries.observe == "auto":
            d["attack"]["canaries"].pop("observe")
        return d


def corpus_stem(path: str) -> str:
    """A corpus file's short name: pheme_clean.json → pheme_clean, docword.kos.txt (UCI) → kos."""
    parts = Path(path).name.split(".")
    stem = parts[1] if parts[0] == "docword" and len(parts) > 2 else parts[0]
    return stem or "audit"


SECTIONS = {"corpus": CorpusConfig, "synthetic": SyntheticConfig, "target": TargetConfig,
            "attack": AttackConfig, "ray": RayConfig, "model": ModelConfig, "reference": CorpusConfig,
            "ranking": RankingConfig}
FREE_TABLES = {("corpus", "options"), ("target", "params"), ("target", "vocabulary_params"),
               ("reference", "options"), ("model", "params")}  # passed through to loaders and learners
NESTED_TABLES = {("attack", "canaries"): CanaryConfig}
PATH_OPTIONS = ("vocab", "dictionary")  # [corpus.options] that name files (uci, mm): relative to the config file

_EXPECTED = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _check_value(where: str, key: str, value: Any, annotation: str) -> Any:
    kinds = [k for k in (bool, int, float, str) if k.__name__ in annotation]
    if value is None and "None" in annotation:
        return value
    if isinstance(value, bool) and bool not in kinds:
        kinds_ok = False
    else:
        kinds_ok = any(isinstance(value, k) for k in kinds) or (float in kinds and isinstance(value, int))
    if not kinds_ok:
        wanted = " or ".join(_EXPECTED[k] for k in kinds)
        raise UserError(f"{where}: key {key!r} must be {wanted} (got {value!r})")
    if float in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UserError(f"{where}: key {key!r} must be finite (got {value!r})")
        if int not in kinds:
            value = float(value)
    return value


def _fill(obj: Any, table: dict[str, Any], where: str, section: str | None) -> None:
    fields = {f.name: f for f in dataclasses.fields(obj)}
    for key, value in table.items():
        if key in SECTIONS and section is None:
            continue
        if key not in fields or (section is None and key in SECTIONS):
            known = ", ".join(k for k in fields if k not in SECTIONS)
            tables = "; tables: " + ", ".join(f"[{name}]" for name in SECTIONS) if section is None else ""
            raise UserError(f"{where}: unknown key {key!r}; known keys: {known}{tables}")
        if (section, key) in FREE_TABLES:
            if not isinstance(value, dict):
                raise UserError(f"{where}: {key!r} must be a table, e.g. [{section}.{key}]")
            setattr(obj, key, dict(value))
            continue
        if (section, key) in NESTED_TABLES:
            if not isinstance(value, dict):
                raise UserError(f"{where}: {key!r} must be a table, e.g. [{section}.{key}]")
            _fill(getattr(obj, key), value, f"{where.rsplit(' [', 1)[0]} [{section}.{key}]", f"{section}.{key}")
            continue
        if "list" in str(fields[key].type):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UserError(f"{where}: key {key!r} must be a list of strings, e.g. {key} = [\"lira_online\"]")
            setattr(obj, key, list(value))
            continue
        setattr(obj, key, _check_value(where, key, value, str(fields[key].type)))


def config_from_dict(data: dict[str, Any], source: str = "configuration") -> Config:
    config = Config()
    _fill(config, data, source, None)
    for name, table in data.items():
        if name in SECTIONS:
            if not isinstance(table, dict):
                raise UserError(f"{source}: {name!r} must be a table ([{name}])")
            _fill(getattr(config, name), table, f"{source} [{name}]", name)
    return config


def load_config(path: str | Path) -> Config:
    """The Config a TOML file describes, every key checked (unknown keys and wrong types are UserErrors).

    Paths in the file (``[corpus] path``, ``[reference] path``, ``[model]``
    files, ``[corpus.options]`` vocabularies) are relative to the file, not to
    the working directory, so a configuration means the same from anywhere.
    """
    path = Path(path)
    check_regular(path, fix="give the path of the TOML file itself")  # a FIFO would block the read below
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"configuration file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read configuration file {path}: {error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UserError(f"{path} is not valid TOML: {error}") from None
    config = config_from_dict(data, str(path))
    # Paths in a config file are relative to the file, not to the shell.
    for section, key in (("corpus", "path"), ("reference", "path"), ("model", "phi"), ("model", "vocabulary")):
        table = getattr(config, section)
        value = getattr(table, key)
        if value is not None and not Path(value).is_absolute():
            setattr(table, key, str(path.parent / value))
    for table in (config.corpus, config.reference):
        for key in PATH_OPTIONS:
            value = table.options.get(key)
            if isinstance(value, str) and value and not Path(value).is_absolute():
                table.options[key] = str(path.parent / value)
    return config


def validate(config: Config) -> None:
    """Checks that need no data: numbers in range, names known."""
    if config.model.phi is not None:
        raise UserError("[model] phi is set: this configuration audits a released model; run it with "
                        "`topicaudit audit CONFIG.toml`, or remove [model] to train and audit a target")
    canaries = config.attack.canaries
    check_shadows(config.attack.shadows, "[attack] shadows", 0 if canaries.count else 2,
                  "; 0 is allowed with canaries ([attack.canaries] count or --canaries), whose scores need no "
                  "shadow model")
    if canaries.count < 0:
        raise UserError(f"[attack.canaries] count must be ≥ 0 (got {canaries.count}); 0 means no canaries")
    if canaries.observe not in OBSERVE:
        raise UserError(f"[attack.canaries] observe must be one of {', '.join(OBSERVE)} (got {canaries.observe!r})")
    if canaries.kind not in CANARY_KINDS:
        raise UserError(f"[attack.canaries] kind must be one of {', '.join(CANARY_KINDS)} (got {canaries.kind!r})")
    check_shadows(canaries.shadows, "[attack.canaries] shadows", 0)
    if canaries.length < 0:
        raise UserError(f"[attack.canaries] length must be ≥ 0 (got {canaries.length}); 0 picks it from the "
                        "learner's document cap or the corpus")
    if not config.target.test_under_noise >= 1.0:
        raise UserError(f"[target] test_under_noise must be ≥ 1 (got {config.target.test_under_noise})")
    check_topics(config.target.k, "[target] k")
    if config.attack.shadow_vocabulary not in ("target", "own"):
        raise UserError(
            f"[attack] shadow_vocabulary must be 'target' or 'own' (got {config.attack.shadow_vocabulary!r})"
        )
    if not 0 < config.attack.tol < 1:
        raise UserError(f"[attack] tol must be in (0, 1) (got {config.attack.tol})")
    check_level(config.attack.alpha, config.attack.delta, "[attack] alpha", "[attack] delta")
    unknown = unknown_attacks(config.attack.attacks)
    if unknown:
        raise UserError(f"[attack] attacks: unknown attack {unknown[0]!r}; known: {', '.join(ATTACKS)}")
    if config.corpus.max_words < 0:
        raise UserError(f"[corpus] max_words must be ≥ 0 (got {config.corpus.max_words}); 0 keeps every word")
    if config.ray.num_cpus < 0:
        raise UserError(f"[ray] num_cpus must be ≥ 0 (got {config.ray.num_cpus})")
    check_run_config(config)  # seed range, writable output, [synthetic] sizes: before any work


def config_hash(config: Config, corpus_fingerprint: str) -> str:
    payload = json.dumps({"config": config.identity(), "corpus": corpus_fingerprint}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: any Unicode as itself (an emoji stays one character), quotes,
    backslashes and control characters escaped. A lone surrogate (a non-UTF-8 file name as Python decodes
    it) has no TOML spelling and is written as U+FFFD."""
    out = []
    for char in str(text):
        code = ord(char)
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\uFFFD")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A bare key when TOML allows one, else a quoted key."""
    key = str(key)
    return key if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else toml_string(key)


def to_toml(data: dict[str, Any]) -> str:
    """Serialise the resolved configuration (flat values and nested tables only); ``tomllib`` reads it back."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v) if not (isinstance(v, float) and math.isinf(v)) else ("inf" if v > 0 else "-inf")
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return toml_string(v)

    def table(prefix: str, d: dict[str, Any]) -> list[str]:
        lines = [f"{toml_key(k)} = {value(v)}" for k, v in d.items() if v is not None and not isinstance(v, dict)]
        out = ([f"[{prefix}]"] if prefix else []) + lines
        for k, v in d.items():
            if isinstance(v, dict):
                out += [""] + table(f"{prefix}.{toml_key(k)}" if prefix else toml_key(k), v)
        return out

    return "\n".join(table("", data)) + "\n"
