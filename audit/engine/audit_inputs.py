"""What ``audit`` audits, before anything is computed: its configuration from the API's arguments
(``audit_config``), its inputs loaded and checked (``load_audit_inputs``: the released Φ and its vocabulary,
the candidates and the reference counted over it), and the shadows' learner settings with where they came
from (``settings_line``)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.engine.configuration.config import AuditConfig, BaseConfig, audit_config_of
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.loading import check_fields, load_config, set_checked
from topicaudit.engine.configuration.validation import warn_more_topics_than_words
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, corpus_fingerprint, detect_format, load_corpus
from topicaudit.inputs.user_model import UserModel, load_user_model
from topicaudit.targets import learner_class, shadow_pipeline

_RESERVED_OPTIONS = ("path", "format", "preprocess", "vocabulary")

# An audit's settings by name (flags, ``topicaudit.audit_model`` keywords) → (section, key) of the AuditConfig.
AUDIT_SETTINGS = {
    "vocabulary": ("model", "vocabulary"), "learner": ("model", "learner"), "k": ("model", "k"),
    "normalize": ("model", "normalize"), "tolerance": ("model", "tolerance"),
    "trust_pickle": ("model", "trust_pickle"), "candidates": ("corpus", "path"), "reference": ("reference", "path"),
    "text_field": ("corpus", "text_field"), "preprocess": ("corpus", "preprocess"),
    "shadows": ("attack", "shadows"), "tol": ("attack", "tol"), "seed": ("", "seed"), "rank_by": ("ranking", "by"),
    "show_text": ("ranking", "show_text"), "top": ("ranking", "top"), "name": ("", "name"),
    "output": ("", "output"), "ray_address": ("ray", "address"), "num_cpus": ("ray", "num_cpus"),
}


def audit_config(phi: str | Path | BaseConfig, format: str | None = None, candidates_options: dict | None = None,
                 reference_options: dict | None = None, params: dict | None = None, **settings: Any) -> AuditConfig:
    """The AuditConfig of an audit: from a configuration, a TOML file (``*.toml``) or a Φ path, with the settings
    given (None: not given) overriding it. Flags and ``topicaudit.audit_model`` both build their audit here."""
    unknown = sorted(set(settings) - set(AUDIT_SETTINGS))
    if unknown:
        raise UserError(f"unknown audit setting(s) {', '.join(unknown)}; known: {', '.join(AUDIT_SETTINGS)}")
    if isinstance(phi, BaseConfig):
        # An AuditConfig set in Python: read as a file's keys are, into a copy the settings below change (they
        # stayed in the caller's object: its next audit unpickled another Φ, hostile pass XIX-zj).
        config = audit_config_of(check_fields(phi))
    elif str(phi).endswith(".toml"):
        config = load_config(phi, AuditConfig)
    else:
        config = AuditConfig()
        config.model.phi = str(phi)
    for name, value in settings.items():
        if value is not None:
            section, key = AUDIT_SETTINGS[name]
            set_checked(getattr(config, section) if section else config, key,
                        str(value) if key == "path" else value, section or None, AuditConfig)
    # These too as a file's keys (type, length; numbers and strings by their own value): set as given, a str
    # subclass holding "json" was read as json and recorded as its __str__, a float subclass in params fitted as
    # its value and recorded as its __repr__ (hostile pass XIX-zl).
    if format is not None:
        set_checked(config.corpus, "format", format, "corpus", AuditConfig)
        config.reference.format = config.corpus.format
    if config.reference.format is None:
        config.reference.format = config.corpus.format
    config.reference.text_field = config.corpus.text_field
    config.reference.preprocess = config.corpus.preprocess
    for table, section, key, given in ((config.corpus, "corpus", "options", candidates_options),
                                       (config.reference, "reference", "options", reference_options),
                                       (config.model, "model", "params", params)):
        if given is not None:
            set_checked(table, key, {**getattr(table, key), **given}, section, AuditConfig)
    return config


@dataclass
class AuditInputs:
    """What an audit reads from its files, checked; nothing is written yet."""

    model: UserModel
    candidates: Corpus
    reference: Corpus
    target: Any                  # topicaudit.targets.learners.pipeline.Pipeline the shadows run
    settings_from: str           # where the shadows' parameters come from, for the output
    notes: list[str]
    n_duplicated: int            # candidates whose counts equal a reference document's
    n_unseen_words: int          # vocabulary words in no candidate or reference document

    def fingerprint(self) -> str:
        """The content the audit's numbers rest on: Φ's file, its vocabulary, and both corpora's counts."""
        model = self.model
        return ":".join((model.phi_sha256, model.vocabulary_sha256 or model.phi_sha256,
                         corpus_fingerprint(self.candidates), corpus_fingerprint(self.reference)))


def _load_side(config: AuditConfig, role: str, model: UserModel) -> Corpus:
    side = config.corpus if role == "candidates" else config.reference
    options = dict(side.options)
    reserved = sorted(set(options) & set(_RESERVED_OPTIONS))
    if reserved:
        raise UserError(f"--{role}-option {reserved[0]}=…: not a format option (set it with its own flag); "
                        "format options are vocab (uci), subset and remove (20news), encoding (folder), "
                        "text_field (json), dictionary (mm)")
    fmt = side.format
    if fmt is None and isinstance(side.path, str):
        fmt = detect_format(Path(side.path))
    if side.text_field != "text" and fmt == "json":
        options.setdefault("text_field", side.text_field)
    if fmt == "mm" and "dictionary" not in options and model.column_words is not None:
        options["dictionary"] = list(model.column_words)  # term ids are the model's own column numbers
    try:
        return load_corpus(side.path, format=fmt, preprocess=side.preprocess, vocabulary=model.vocabulary, **options)
    except UserError as error:
        raise UserError(f"{role}: {error}") from None


def _row_keys(X: sp.csr_matrix) -> list[bytes]:
    return [X.indices[a:b].tobytes() + X.data[a:b].tobytes() for a, b in zip(X.indptr[:-1], X.indptr[1:])]


def load_audit_inputs(config: AuditConfig) -> tuple[AuditConfig, AuditInputs]:
    """Validate the configuration and load every input; raise UserError on the first problem. Writes nothing.

    Returns the configuration resolved (the shadows' learner, k and parameters
    as the saved model and the settings give them: what config.toml records
    and the identity keys on) and the inputs.
    """
    validate(config)
    run_dir = config.run_dir  # before the learner, k and parameters are resolved: the directory the command named
    config = copy.deepcopy(config)
    config.output = str(run_dir)
    m = config.model
    notes: list[str] = []
    model = load_user_model(m.phi, m.vocabulary, trust_pickle=m.trust_pickle, normalize=m.normalize,
                            tolerance=m.tolerance)
    learner, params, settings_from = _shadow_settings(config, model, notes)
    k = m.k if m.k is not None else model.k
    # A learner whose k is a cap rather than a count (bertopic with HDBSCAN) may ask for more rows than Φ has.
    cap = getattr(learner_class(learner, _settings_place(config, model, learner))[0], "shadow_k", None)
    if m.k is None and callable(cap) and cap(model.k, params) != model.k:
        k = cap(model.k, params)
        notes.append(f"{learner}: k is a cap on the shadows' topics, not a count; they keep up to k={k} (twice Φ's "
                     f"{model.k} rows) so that they need not merge topics your model did not, and a fit that finds "
                     "fewer repeats a row, which changes no document's ζ (--k sets another cap)")
    elif k != model.k:
        notes.append(f"the shadows learn k={k} topics but Φ has {model.k} rows; LiRA assumes shadows trained "
                     "like the model under audit")
    target = shadow_pipeline(learner, k, params, _settings_place(config, model, learner))
    # A learner may score every Φ through one fixed transformation (the bertopic learner's ``smoothing``): the
    # released Φ then goes through it too, so that it is compared with its shadows on the same footing.
    scored_as = getattr(target.learner, "scored_phi", None)
    if callable(scored_as):
        phi = scored_as(model.phi)
        if phi is not model.phi:
            notes.append(f"{learner}'s settings transform every Φ before it is scored ({scored_as.__doc__.strip()}); "
                         f"your Φ is scored the same way")
            model.phi = np.asarray(phi, dtype=np.float64)
    warn_more_topics_than_words(k, int(model.vocabulary.size), "--k asks for" if m.k else "Φ has")
    candidates = _load_side(config, "candidates", model)
    reference = _load_side(config, "reference", model)
    if config.ranking.show_text and candidates.texts is None:
        raise UserError(f"--show-text: the candidates ({config.corpus.path}) are bag-of-words counts with no text; "
                        "drop --show-text")
    if candidates.n_dropped_empty:
        shown = ", ".join(map(str, dropped_positions(candidates)[:10]))
        notes.append(f"{candidates.n_dropped_empty} candidate document(s) have no word of the vocabulary and are not "
                     f"scored (input positions {shown}{', …' if candidates.n_dropped_empty > 10 else ''}); "
                     "audit.json lists them all")
    if model.n_zero_columns:
        notes.append(f"{model.n_zero_columns} vocabulary word(s) have probability 0 under every topic of Φ; ζ under Φ "
                     "ignores them")
    seen = np.zeros(model.vocabulary.size, dtype=bool)
    seen[candidates.X.indices] = True
    seen[reference.X.indices] = True
    n_unseen = int((~seen).sum())
    if n_unseen > model.vocabulary.size / 2:
        notes.append(f"{n_unseen} of the {model.vocabulary.size} vocabulary words occur in no candidate or reference "
                     "document; check that the corpora are prepared like the model's text (--preprocess / "
                     "--no-preprocess) and come from its distribution")
    reference_keys = set(_row_keys(reference.X))
    candidate_keys = _row_keys(candidates.X)
    n_duplicated = sum(key in reference_keys for key in candidate_keys)
    if n_duplicated:
        notes.append(f"{n_duplicated} candidate document(s) have the same word counts as a reference document; their "
                     "OUT shadows may have seen a copy, which hides membership")
    n_repeated = len(candidate_keys) - len(set(candidate_keys))
    if n_repeated:  # a shadow that trains on one copy has seen every other
        notes.append(f"{n_repeated} candidate document(s) repeat the word counts of another candidate; their OUT "
                     "shadows may have seen a copy, which hides membership, and the copies' ranks are not separate "
                     "evidence")
    if model.verbatim:  # said before anything else: the release itself gives training documents away
        notes.insert(0, f"{model.phi_path} holds training text verbatim ({'; '.join(model.verbatim)}): whoever has "
                        "the saved model reads those documents directly, whatever the membership attack finds; remove "
                        "them before publishing the model")
    m.learner, m.k, m.params = learner, k, params
    config.name = config.run_name
    return config, AuditInputs(model, candidates, reference, target, settings_from, notes, n_duplicated, n_unseen)


def _shadow_settings(config: AuditConfig, model: UserModel, notes: list[str]) -> tuple[str, dict, str]:
    """The shadows' learner and parameters, and where they come from.

    A saved gensim, tomotopy or scikit-learn model names its learner and
    carries its settings; ``--param`` overrides single settings; an explicit
    ``--learner`` the settings do not apply to drops them (they are another
    library's) and says so. A scikit-learn LDA's batch settings apply to both
    ``lda`` (the compiled port) and ``sklearn-lda``.
    """
    given = config.model.params
    learner = config.model.learner or model.learner or "lda"
    if model.learner is None:
        notes.extend(model.notes or [])
        return learner, dict(given), "--param" if given else "the learner's defaults"
    if learner not in _settings_learners(model):
        notes.append(f"{model.phi_path} was trained with {model.library} ({model.learner}); the shadows use {learner}, "
                     "so the model's settings are not used. LiRA assumes shadows trained like the model under audit")
        return learner, dict(given), "--param" if given else "the learner's defaults"
    notes.extend(model.notes or [])
    params = {**(model.settings or {}), **given}
    overridden = sorted(set(given) & set(model.settings or {}))
    source = f"the saved {model.library} model" + (", read without unpickling" if model.settings_record else "")
    if given:
        source += f", with --param {', '.join(sorted(given))}" + (" overriding it" if overridden else "")
    return learner, params, source


def _settings_learners(model: UserModel) -> tuple[str, ...]:
    return model.learners or ((model.learner,) if model.learner else ())


def _settings_place(config: AuditConfig, model: UserModel, learner: str) -> str:
    """Where the shadows' parameters came from, for a message about a bad one: --param only when the user gave it."""
    if model.learner is None or learner not in _settings_learners(model):
        return "--param"
    return f"the settings saved in {model.phi_path}" + (" or --param" if config.model.params else "")


def dropped_positions(corpus: Corpus) -> list[int]:
    """Input positions of documents dropped as empty (within the vocabulary)."""
    total = corpus.n_docs + corpus.n_dropped_empty
    kept = np.zeros(total, dtype=bool)
    kept[corpus.doc_index] = True
    return np.flatnonzero(~kept).tolist()


def settings_text(params: dict[str, Any]) -> str:
    """Learner parameters on one line; long lists (per-word priors) summarised."""
    def show(value):
        if isinstance(value, list) and len(value) > 8:
            return f"[{len(value)} values]"
        if isinstance(value, list):
            return "[" + ", ".join(format(v, ".4g") if isinstance(v, float) else str(v) for v in value) + "]"
        return format(value, ".6g") if isinstance(value, float) else str(value)
    return ", ".join(f"{name}={show(value)}" for name, value in params.items()) or "defaults"


def settings_line(settings_from: str, params: dict[str, Any]) -> str:
    """Where the shadows' settings came from and what they are, without saying "defaults" twice."""
    if not params:
        return f"shadow settings: {settings_from}" if "default" in settings_from else "shadow settings: defaults"
    return f"shadow settings ({settings_from}): {settings_text(params)}"
