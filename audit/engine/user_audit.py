"""Audit a user's own released model: rank candidate documents by membership evidence.

The user has a trained topic-word matrix Φ with its vocabulary, documents that
may have been in its training set (*candidates*), and documents from the same
distribution (*reference*). There is no ground truth: the output is a ranking.

1. Φ and the vocabulary are loaded and validated (:mod:`topicaudit.inputs.phi_io`; a
   saved gensim or tomotopy model also names the shadows' learner and gives
   its training settings, :mod:`topicaudit.inputs.library_models`); both
   corpora are counted over that vocabulary (other words dropped, documents
   left empty reported and not scored).
2. Pool = candidates then reference. N shadow models (even), each trained with
   the named learner on a random half of the pool over the user's whole
   vocabulary, in complementary pairs: every candidate is IN exactly N/2
   shadows (:func:`topicaudit.engine.plan.make_plan`).
3. ζ of every candidate under Φ and under each shadow (one Ray task per batch).
4. Per candidate: online LiRA log-likelihood ratio log N(ζ; μ_in, σ_in²) −
   log N(ζ; μ_out, σ_out²) (per-document variances, and one variance per side
   pooled over documents), and the offline one-sided p-value P(ζ_OUT ≥ ζ) under the OUT
   Gaussian (small p = the model fits the document better than models that
   never saw it). Conventions as :mod:`topicaudit.attacks.lira`.

Everything is checked before the output directory is created. Shadow models
are written one file each as they finish, so an interrupted audit resumes; a
directory made for other inputs or settings is refused (config hash).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr

from topicaudit.attacks.features import document_features
from topicaudit.attacks.lira import offline_scores, online_scores
from topicaudit.attacks.quantile import quantile_scores
from topicaudit.attacks.registry import recommended_attack, wants_quantile_regression
from topicaudit.attacks.rmia import population_scores, rmia_scores
from topicaudit.attacks.variance import shrunk_offline_scores, shrunk_online_scores
from topicaudit.engine.config import Config, load_config
from topicaudit.engine.experiment import Experiment, execute
from topicaudit.engine.plan import make_plan
from topicaudit.engine.lock import writer_lock
from topicaudit.engine.rundir import USER_AUDIT_SCHEMA, RunDirectory, atomic_write_text
from topicaudit.engine.validation import check_output_directory, check_seed, check_shadows, warn_more_topics_than_words
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, detect_format, load_corpus
from topicaudit.inputs.phi_io import DEFAULT_ROW_SUM_TOLERANCE, UserModel, load_user_model
from topicaudit.targets import LEARNERS, shadow_pipeline
from topicaudit.targets.base import Release
from topicaudit.targets.params import check_topics

# Columns of scores.csv, in order ("text" only with show_text).
SCORE_COLUMNS = ("rank", "candidate", "id", "n_tokens", "zeta", "online_llr", "online_llr_global",
                 "offline_p", "offline_p_global", "online_shrunk_llr", "offline_shrunk_p", "rmia_online",
                 "rmia_offline", "rmia_population", "quantile_regression")
COLUMN_DESCRIPTIONS = {
    "rank": "1 = strongest membership evidence, by the ranking score",
    "candidate": "0-based position of the document in the candidates input",
    "id": "the input's own name of the document: file path in a folder, archive member of 20news, "
          "docID of UCI, list position of JSON",
    "n_tokens": "tokens of the document within the vocabulary (the words ζ is computed on)",
    "zeta": "ζ = max over θ of Σ_w x_w log(θ·Φ_w) under the user's Φ",
    "online_llr": "online LiRA log N(ζ; μ_in, σ_in²) − log N(ζ; μ_out, σ_out²), per-document variances "
                  "(> 0: ζ looks more like the IN shadows')",
    "online_llr_global": "the same with one variance per side pooled over candidates",
    "offline_p": "offline LiRA one-sided p-value P(ζ_OUT ≥ ζ) under the OUT shadows' Gaussian, per-document "
                 "variance (small = likely member); not corrected for multiple testing; values far below "
                 "1/(number of OUT shadows) extrapolate the Gaussian's tail: rank by them, do not read them literally",
    "offline_p_global": "the same with the pooled OUT variance",
    "online_shrunk_llr": "online LiRA log-likelihood ratio with each variance shrunk towards a prior (pooled, or "
                         "regressed on the documents' word-count features; Bayesian; strong with few shadows)",
    "offline_shrunk_p": "offline LiRA p-value with the OUT variance shrunk towards a prior (as online_shrunk_llr)",
    "rmia_online": "RMIA log ratio: log of the per-token likelihood under Φ over its mean under the shadows",
    "rmia_offline": "RMIA offline log ratio: over the OUT shadows' mean, the IN mean approximated with the fitted a",
    "rmia_population": "RMIA score: fraction of sampled reference documents z (taken as non-members of Φ) whose "
                       "rmia_online ratio this candidate's reaches (1 = beyond every one)",
    "quantile_regression": "quantile regression: per-token ζ under Φ above the non-member median that gradient "
                           "boosting predicts from word counts and the OUT shadows' ζ, in units of the predicted "
                           "90%−50% spread; computed with up to 16 shadows or with --rank-by quantile (else empty)",
    "text": "the document's text as read (cells starting with = + - @ or a tab are prefixed with ' so "
            "spreadsheets do not run them as formulas)",
}
# --rank-by value → (reported column, key ranked on: higher = more member-like).
# Offline ranks on z = (ζ − μ_out)/σ_out, the same order as p = 1 − Φ(z) but
# without the ties of p-values that round to 0 or 1.
RANKINGS = {
    "offline": ("offline_p", "offline_z"),
    "offline-global": ("offline_p_global", "offline_z_global"),
    "online": ("online_llr", "online_llr"),
    "online-global": ("online_llr_global", "online_llr_global"),
    "offline-shrunk": ("offline_shrunk_p", "offline_shrunk_z"),
    "online-shrunk": ("online_shrunk_llr", "online_shrunk_llr"),
    "rmia-online": ("rmia_online", "rmia_online"),
    "rmia-offline": ("rmia_offline", "rmia_offline"),
    "quantile": ("quantile_regression", "quantile_regression"),
}
# "recommended": the ranking topicaudit.attacks.registry.recommended_attack picks for the number of shadows.
DEFAULT_RANKING = "recommended"
RECOMMENDED_RANKINGS = {"lira_online": "online", "lira_offline_shrunk": "offline-shrunk", "rmia_online": "rmia-online"}
RECOMMENDATION_RULE = "1 shadow: RMIA online; 2 or more: offline LiRA with shrunk variance (docs/attacks.md)"
# Reference documents whose RMIA ratios form the population (a seeded sample when there are more).
POPULATION_SIZE = 1000
RANKING_LABELS = {
    "offline": "offline LiRA p-value (OUT shadows, per-document variance)",
    "offline-global": "offline LiRA p-value (OUT shadows, pooled variance)",
    "online": "online LiRA log-likelihood ratio (per-document variances)",
    "online-global": "online LiRA log-likelihood ratio (pooled variances)",
    "offline-shrunk": "offline LiRA p-value (OUT shadows, variance shrunk towards a prior)",
    "online-shrunk": "online LiRA log-likelihood ratio (variances shrunk towards a prior)",
    "rmia-online": "RMIA log likelihood ratio (per token, all shadows)",
    "rmia-offline": "RMIA offline log likelihood ratio (per token, OUT shadows and fitted a)",
    "quantile": "quantile regression (per-token ζ against the predicted non-member quantiles)",
}


def resolve_ranking(rank_by: str, n_shadows: int) -> tuple[str, bool]:
    """(--rank-by value to use, whether it was chosen by the recommendation rule)."""
    if rank_by != "recommended":
        return rank_by, False
    return RECOMMENDED_RANKINGS[recommended_attack(n_shadows)], True
RANKING_ORDER = ("strongest evidence first: by the chosen score (offline: smallest p-value first, ordered by z so "
                 "p-values that round to 0 keep their order; online: largest log-ratio first), ties by the other "
                 "family (online log-ratio, or offline z), then by candidate position")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_RESERVED_OPTIONS = ("path", "format", "preprocess", "vocabulary")


# An audit's settings by name (flags, ``topicaudit.audit_model`` keywords) → (section, key) of the Config they set.
AUDIT_SETTINGS = {
    "vocabulary": ("model", "vocabulary"), "learner": ("model", "learner"), "k": ("model", "k"),
    "normalize": ("model", "normalize"), "tolerance": ("model", "tolerance"),
    "trust_pickle": ("model", "trust_pickle"), "candidates": ("corpus", "path"), "reference": ("reference", "path"),
    "text_field": ("corpus", "text_field"), "preprocess": ("corpus", "preprocess"),
    "shadows": ("attack", "shadows"), "tol": ("attack", "tol"), "seed": ("", "seed"), "rank_by": ("ranking", "by"),
    "show_text": ("ranking", "show_text"), "top": ("ranking", "top"), "name": ("", "name"),
    "output": ("", "output"), "ray_address": ("ray", "address"), "num_cpus": ("ray", "num_cpus"),
}


def audit_config(phi: str | Path | Config, format: str | None = None, candidates_options: dict | None = None,
                 reference_options: dict | None = None, params: dict | None = None, **settings: Any) -> Config:
    """The Config of an audit: from a Config, a TOML file (``*.toml``) or a Φ path, with the settings given
    (None: not given) overriding it. Flags and ``topicaudit.audit_model`` both build their audit here."""
    unknown = sorted(set(settings) - set(AUDIT_SETTINGS))
    if unknown:
        raise UserError(f"unknown audit setting(s) {', '.join(unknown)}; known: {', '.join(AUDIT_SETTINGS)}")
    if isinstance(phi, Config):
        config = phi
    elif str(phi).endswith(".toml"):
        config = load_config(phi)
    else:
        config = Config(name=Path(phi).name.split(".")[0] or "model")
        config.model.phi = str(phi)
    for name, value in settings.items():
        if value is not None:
            section, key = AUDIT_SETTINGS[name]
            setattr(getattr(config, section) if section else config, key, str(value) if key == "path" else value)
    if format is not None:
        config.corpus.format = config.reference.format = format
    if config.reference.format is None:
        config.reference.format = config.corpus.format
    config.reference.text_field = config.corpus.text_field
    config.reference.preprocess = config.corpus.preprocess
    config.corpus.options.update(candidates_options or {})
    config.reference.options.update(reference_options or {})
    config.model.params.update(params or {})
    return config


@dataclass
class UserAuditSpec:
    """Everything ``topicaudit audit`` is told (flags map one to one)."""

    phi: str
    candidates: str
    reference: str
    vocabulary: str | None = None
    format: str | None = None
    text_field: str = "text"
    candidates_options: dict[str, Any] = field(default_factory=dict)
    reference_options: dict[str, Any] = field(default_factory=dict)
    preprocess: bool | None = None
    learner: str | None = None         # None: the saved model's library (gensim, tomotopy), else lda
    k: int | None = None               # None: Φ's number of rows
    params: dict[str, Any] = field(default_factory=dict)
    shadows: int = 64
    seed: int = 0
    tol: float = 1e-8
    normalize: bool = False
    tolerance: float = DEFAULT_ROW_SUM_TOLERANCE
    trust_pickle: bool = False
    rank_by: str = DEFAULT_RANKING
    show_text: bool = False
    top: int = 10
    name: str | None = None
    output: str | None = None
    ray_address: str = ""
    num_cpus: int = 0

    @classmethod
    def from_config(cls, config: Config) -> "UserAuditSpec":
        """The audit a configuration describes: [model], [corpus] (the candidates), [reference], [ranking]."""
        m, c, r = config.model, config.corpus, config.reference
        if m.phi is None:
            raise UserError("no model to audit: give PHI on the command line, or [model] phi in the configuration")
        for role, corpus in (("corpus", c), ("reference", r)):
            if corpus.path is None:
                raise UserError(f"[{role}] path is missing: the {'candidates' if role == 'corpus' else 'reference'} "
                                f"documents (--{'candidates' if role == 'corpus' else 'reference'} PATH)")
        return cls(
            phi=m.phi, vocabulary=m.vocabulary, candidates=c.path, reference=r.path,
            format=c.format, text_field=c.text_field, candidates_options=dict(c.options),
            reference_options=dict(r.options), preprocess=c.preprocess, learner=m.learner, k=m.k,
            params=dict(m.params), shadows=config.attack.shadows, seed=config.seed, tol=config.attack.tol,
            normalize=m.normalize, tolerance=m.tolerance, trust_pickle=m.trust_pickle, rank_by=config.ranking.by,
            show_text=config.ranking.show_text, top=config.ranking.top,
            name=None if config.name == Config.name else config.name, output=config.output,
            ray_address=config.ray.address, num_cpus=config.ray.num_cpus)

    @property
    def run_name(self) -> str:
        return self.name or Path(self.phi).name.split(".")[0] or "model"

    @property
    def run_dir(self) -> Path:
        return Path(self.output) if self.output else Path("runs") / f"audit-{self.run_name}"


@dataclass
class Prepared:
    """The validated inputs of an audit; nothing is written yet."""

    spec: UserAuditSpec
    model: UserModel
    candidates: Corpus
    reference: Corpus
    target: Any                  # topicaudit.targets.learners.pipeline.Pipeline the shadows run
    k: int
    plan: Any                    # topicaudit.engine.plan.Plan over the pool (its target_in is unused)
    config: dict[str, Any]       # what config.toml records
    config_hash: str
    n_duplicated: int            # candidates whose counts equal a reference document's
    n_unseen_words: int          # vocabulary words in no candidate or reference document
    notes: list[str]
    learner: str                 # the shadows' learner and its parameters (saved model's settings + --param)
    params: dict[str, Any]
    settings_from: str           # where those parameters come from, for the output


# -- inputs ----------------------------------------------------------------------------
def _check_spec(spec: UserAuditSpec) -> None:
    if spec.learner is not None and spec.learner not in LEARNERS:
        raise UserError(f"unknown learner {spec.learner!r} (--learner); known learners: {', '.join(LEARNERS)}")
    check_shadows(spec.shadows, "--shadows")
    if spec.k is not None:
        check_topics(spec.k, "--k", "by default it is Φ's number of rows")
    if spec.rank_by not in RANKINGS and spec.rank_by != "recommended":
        raise UserError(f"unknown ranking {spec.rank_by!r} (--rank-by); choose recommended or one of "
                        f"{', '.join(RANKINGS)}")
    check_seed(spec.seed, "--seed")
    if spec.output is not None and str(spec.output).strip() == "":
        raise UserError("--output is empty; give a directory, or leave --output out for runs/audit-NAME")
    check_output_directory(spec.run_dir, "--output")
    if not 0 < spec.tol < 1:
        raise UserError(f"the ζ tolerance must be in (0, 1) (got {spec.tol})")
    if spec.top < 0:
        raise UserError(f"--top must be ≥ 0 (got {spec.top})")
    if spec.num_cpus < 0:
        raise UserError(f"--num-cpus must be ≥ 0 (got {spec.num_cpus})")


def _load_side(spec: UserAuditSpec, path: str, options: dict[str, Any], model: UserModel, role: str) -> Corpus:
    options = dict(options)
    reserved = sorted(set(options) & set(_RESERVED_OPTIONS))
    if reserved:
        raise UserError(f"--{role}-option {reserved[0]}=…: not a format option (set it with its own flag); "
                        "format options are vocab (uci), subset and remove (20news), encoding (folder), "
                        "text_field (json), dictionary (mm)")
    fmt = spec.format
    if fmt is None and isinstance(path, str):
        fmt = detect_format(Path(path))
    if spec.text_field != "text" and fmt == "json":
        options.setdefault("text_field", spec.text_field)
    if fmt == "mm" and "dictionary" not in options and model.column_words is not None:
        options["dictionary"] = list(model.column_words)  # term ids are the model's own column numbers
    try:
        return load_corpus(path, format=fmt, preprocess=spec.preprocess, vocabulary=model.vocabulary, **options)
    except UserError as error:
        raise UserError(f"{role}: {error}") from None


def _fingerprint(*matrices: sp.csr_matrix) -> str:
    digest = hashlib.sha256()
    for X in matrices:
        digest.update(np.int64(X.shape).tobytes())
        for array in (X.indptr, X.indices, X.data):
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def _row_keys(X: sp.csr_matrix) -> list[bytes]:
    return [X.indices[a:b].tobytes() + X.data[a:b].tobytes() for a, b in zip(X.indptr[:-1], X.indptr[1:])]


def prepare(spec: UserAuditSpec) -> Prepared:
    """Load and check every input; raise UserError on the first problem. Writes nothing."""
    _check_spec(spec)
    notes: list[str] = []
    model = load_user_model(spec.phi, spec.vocabulary, trust_pickle=spec.trust_pickle,
                            normalize=spec.normalize, tolerance=spec.tolerance)
    k = spec.k if spec.k is not None else model.k
    if k != model.k:
        notes.append(f"the shadows learn k={k} topics but Φ has {model.k} rows; LiRA assumes shadows trained "
                     "like the model under audit")
    learner, params, settings_from = _shadow_settings(spec, model, notes)
    target = shadow_pipeline(learner, k, params, _settings_place(spec, model, learner))
    warn_more_topics_than_words(k, int(model.vocabulary.size), "--k asks for" if spec.k else "Φ has")
    candidates = _load_side(spec, spec.candidates, spec.candidates_options, model, "candidates")
    reference = _load_side(spec, spec.reference, spec.reference_options, model, "reference")
    if spec.show_text and candidates.texts is None:
        raise UserError(
            f"--show-text: the candidates ({spec.candidates}) are bag-of-words counts with no text; drop --show-text"
        )
    if candidates.n_dropped_empty:
        shown = ", ".join(map(str, _dropped_positions(candidates)[:10]))
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
    n_duplicated = sum(key in reference_keys for key in _row_keys(candidates.X))
    if n_duplicated:
        notes.append(f"{n_duplicated} candidate document(s) have the same word counts as a reference document; their "
                     "OUT shadows may have seen a copy, which hides membership")
    n_pool = candidates.n_docs + reference.n_docs
    plan = make_plan(n_pool, spec.shadows, spec.seed)
    config = {
        "schema": USER_AUDIT_SCHEMA,
        "name": spec.run_name,
        "seed": spec.seed,
        "phi": {"path": str(spec.phi), "sha256": model.phi_sha256, "normalize": spec.normalize,
                "tolerance": spec.tolerance},
        "vocabulary": {"path": str(spec.vocabulary or spec.phi), "n_words": int(model.vocabulary.size)},
        "candidates": {"path": str(spec.candidates), "options": dict(spec.candidates_options)},
        "reference": {"path": str(spec.reference), "options": dict(spec.reference_options)},
        "preprocess": spec.preprocess,
        "learner": {"name": learner, "k": k, "params": dict(params), "settings_from": settings_from},
        "shadows": {"n_shadows": spec.shadows, "tol": spec.tol},
    }
    phi_digest = hashlib.sha256(np.ascontiguousarray(model.phi).tobytes()).hexdigest()[:16]
    identity = {
        "phi": phi_digest,
        "vocabulary": hashlib.sha256("\n".join(model.vocabulary).encode()).hexdigest()[:16],
        "pool": _fingerprint(candidates.X, reference.X),
        "learner": learner, "k": k, "params": params,
        "shadows": spec.shadows, "seed": spec.seed, "tol": spec.tol,
    }
    chash = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Prepared(spec, model, candidates, reference, target, k, plan, config, chash, n_duplicated, n_unseen,
                    notes, learner, params, settings_from)


def _shadow_settings(spec: UserAuditSpec, model: UserModel, notes: list[str]) -> tuple[str, dict, str]:
    """The shadows' learner and parameters, and where they come from.

    A saved gensim or tomotopy model names its learner and carries its
    settings; ``--param`` overrides single settings; an explicit ``--learner``
    other than the model's drops the model's settings (they are another
    library's) and says so.
    """
    learner = spec.learner or model.learner or "lda"
    if model.learner is None:
        return learner, dict(spec.params), "--param" if spec.params else "the learner's defaults"
    if learner != model.learner:
        notes.append(f"{model.phi_path} was trained with {model.library} ({model.learner}); the shadows use {learner}, "
                     "so the model's settings are not used. LiRA assumes shadows trained like the model under audit")
        return learner, dict(spec.params), "--param" if spec.params else "the learner's defaults"
    notes.extend(model.notes or [])
    params = {**(model.settings or {}), **spec.params}
    overridden = sorted(set(spec.params) & set(model.settings or {}))
    source = f"the saved {model.library} model"
    if spec.params:
        source += f", with --param {', '.join(sorted(spec.params))}" + (" overriding it" if overridden else "")
    return learner, params, source


def _settings_place(spec: UserAuditSpec, model: UserModel, learner: str) -> str:
    """Where the shadows' parameters came from, for a message about a bad one: --param only when the user gave it."""
    if model.learner is None or learner != model.learner:
        return "--param"
    return f"the settings saved in {model.phi_path}" + (" or --param" if spec.params else "")


def _dropped_positions(corpus: Corpus) -> list[int]:
    """Input positions of documents dropped as empty (within the vocabulary)."""
    total = corpus.n_docs + corpus.n_dropped_empty
    kept = np.zeros(total, dtype=bool)
    kept[corpus.doc_index] = True
    return np.flatnonzero(~kept).tolist()


# -- scores ----------------------------------------------------------------------------------
def candidate_scores(model_zeta: np.ndarray, shadow_zeta: np.ndarray, shadow_in: np.ndarray,
                     n_tokens: np.ndarray | None = None, population: tuple | None = None,
                     features: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-candidate scores from ζ under the user's Φ (n,) and the shadows (N, n).

    Keys: the score columns of ``scores.csv`` plus ``offline_z``,
    ``offline_z_global`` and ``offline_shrunk_z`` (the z behind each p-value,
    used for ranking). The shrunk and RMIA columns need n_tokens (each
    candidate's tokens); ``rmia_population`` needs population = (ζ under Φ,
    ζ under the shadows, shadow_in, n_tokens) of reference documents;
    features (the candidates' word-count features) let the shrunk variances'
    prior follow the documents.
    """
    z = offline_scores(model_zeta, shadow_zeta, shadow_in)
    z_global = offline_scores(model_zeta, shadow_zeta, shadow_in, global_variance=True)
    extra = {}
    if n_tokens is not None:
        z_shrunk = shrunk_offline_scores(model_zeta, shadow_zeta, shadow_in, features)
        extra = {"online_shrunk_llr": shrunk_online_scores(model_zeta, shadow_zeta, shadow_in, features),
                 "offline_shrunk_p": ndtr(-z_shrunk), "offline_shrunk_z": z_shrunk,
                 "rmia_online": rmia_scores(model_zeta, shadow_zeta, shadow_in, n_tokens, online=True)[0],
                 "rmia_offline": rmia_scores(model_zeta, shadow_zeta, shadow_in, n_tokens, online=False)[0]}
        if population is not None:
            ratio_z = rmia_scores(*population, online=True)[0]
            extra["rmia_population"] = population_scores(extra["rmia_online"], ratio_z)
    return {
        **extra,
        "zeta": model_zeta,
        "online_llr": online_scores(model_zeta, shadow_zeta, shadow_in),
        "online_llr_global": online_scores(model_zeta, shadow_zeta, shadow_in, global_variance=True),
        "offline_p": ndtr(-z),
        "offline_p_global": ndtr(-z_global),
        "offline_z": z,
        "offline_z_global": z_global,
    }


def ranking(scores: dict[str, np.ndarray], rank_by: str = DEFAULT_RANKING) -> np.ndarray:
    """Row order of the candidates: see ``RANKING_ORDER``."""
    _, key = RANKINGS[rank_by]
    other = "offline_z" if key.startswith("online") else "online_llr"
    return np.lexsort((np.arange(scores[key].size), -scores[other], -scores[key]))


# Per-document variances rest on N/2 shadows a side: below this many shadows they are too noisy to read.
RELIABLE_PER_DOCUMENT_SHADOWS = 16
PER_DOCUMENT_COLUMNS = ("online_llr", "offline_p")


def unreliable_columns(n_shadows: int) -> dict[str, str]:
    """Score columns that cannot be read literally with this many shadows, and why (docs/user-audit.md)."""
    why = {"offline_p": "not calibrated p-values (the Gaussian's tail is extrapolated far beyond the shadows): "
                        "rank by them, never count or correct them for multiple testing",
           "offline_p_global": "as offline_p", "offline_shrunk_p": "as offline_p"}
    if n_shadows < RELIABLE_PER_DOCUMENT_SHADOWS:
        few = (f"per-document variances from {n_shadows // 2} shadow(s) a side: values like LLR 1e14 or p = 0 "
               "are artefacts of a variance estimated near 0")
        why.update({"online_llr": few, "offline_p": few + "; " + why["offline_p"]})
    return why


def _score_text(column: str, value: float) -> str:
    """A score for the screen: p-values and log-ratios beyond what the shadows can support shown as bounds."""
    if column.endswith("_p"):
        return "< 1e-12" if value < 1e-12 else f"{value:.2e}"
    if abs(value) >= 1e6:
        return "> 1e6" if value > 0 else "< -1e6"
    return f"{value:.3f}"


# What a spreadsheet may skip before a formula: whitespace of every kind (\s: VT, FF, NEL, U+2028, NBSP, ...)
# and the invisible format characters (zero-width, bidi marks and controls, BOM).
_SKIPPED = r"[\s\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]*"
_FORMULA_AT_START = re.compile(_SKIPPED + r"[=+\-@]")
# A break a reader may take for a new cell or line: line breaks and separators of every kind, ; , and tab.
_FORMULA_AFTER_BREAK = re.compile(r"(?<=[\n;,\t\x0b\x0c\x1c-\x1e\x85\u2028\u2029])(?=" + _SKIPPED + r"[=+\-@])")


def _csv_cell(text: str) -> str:
    """Corpus text as a CSV cell that spreadsheets display rather than evaluate (OWASP CSV injection).

    A cell starting like a formula gets a ``'`` prefix, also when whitespace
    or invisible characters of any kind come before the ``=`` (a spreadsheet
    may skip them). So does a formula character after a line break or
    separator of any kind, ``;``, ``,`` or tab inside the cell: a spreadsheet
    assuming another separator or line ending would start a cell there.
    ``\r`` becomes ``\n`` (a bare carriage return ends a row for many readers).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _FORMULA_AFTER_BREAK.sub("'", text)
    return "'" + text if text.startswith(_FORMULA_START) or _FORMULA_AT_START.match(text) else text


def _number(x: float) -> str:
    return format(float(x), ".10g")


def scores_csv(rows: list[dict[str, Any]], show_text: bool) -> str:
    columns = SCORE_COLUMNS + (("text",) if show_text else ())
    out = io.StringIO()
    # Every cell quoted (OWASP): a "\r" (not in the line terminator, so QUOTE_MINIMAL left it bare),
    # a ";=" or a "\t=" inside a cell stays inside it whatever separator or line ending a reader assumes.
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(columns)
    for row in rows:
        cells = []
        for c in columns:
            value = row[c]
            if c in ("id", "text"):
                cells.append(_csv_cell(str(value)))
            elif isinstance(value, float):
                cells.append(_number(value))
            else:
                cells.append(str(value))
        writer.writerow(cells)
    return out.getvalue()


# -- orchestration ----------------------------------------------------------------------------
def run_user_audit(spec: UserAuditSpec | Config, quiet: bool = False, prepared: Prepared | None = None
                   ) -> dict[str, Any]:
    """Run (or resume) the audit; writes the output directory and returns ``audit.json``'s content.

    The output directory's writer lock is held throughout: a second writer is refused.
    """
    if isinstance(spec, Config):
        spec = UserAuditSpec.from_config(spec)
    with writer_lock(spec.run_dir):
        return _run_user_audit(spec, quiet, prepared)


def _run_user_audit(spec: UserAuditSpec, quiet: bool, prepared: Prepared | None) -> dict[str, Any]:
    started = time.perf_counter()
    prep = prepared if prepared is not None else prepare(spec)
    model, cands, ref, plan = prep.model, prep.candidates, prep.reference, prep.plan
    n_c = cands.n_docs
    # RMIA's population: a seeded sample of reference documents, scored with the candidates.
    population = np.sort(np.random.default_rng(spec.seed).permutation(ref.n_docs)[:POPULATION_SIZE])
    scored = sp.vstack([cands.X, ref.X[population]], format="csr")
    all_words = np.arange(model.vocabulary.size, dtype=np.int64)
    experiment = Experiment(
        run=RunDirectory(spec.run_dir), config_hash=prep.config_hash, record=prep.config, seeds={"seed": spec.seed},
        X=sp.vstack([cands.X, ref.X], format="csr"), target=prep.target, plan=plan,
        plan_arrays={"seed": np.int64(spec.seed), "shadow_in": plan.shadow_in, "shadow_seeds": plan.shadow_seeds,
                     "n_candidates": np.int64(n_c), "n_reference": np.int64(ref.n_docs)},
        released=Release(phi=model.phi, vocabulary=all_words), shadow_vocabulary=all_words, scored=scored,
        tol=spec.tol, ray_address=spec.ray_address, num_cpus=spec.num_cpus)
    resuming = experiment.resuming()
    for note in prep.notes:
        warnings.warn(note, UserWarning, stacklevel=2)
    load_seconds = time.perf_counter() - started
    if not quiet:
        print(f"{'resuming' if resuming else 'auditing'} {model.phi_path} (k={model.k}, {model.vocabulary.size} words): "
              f"{n_c} candidates, {ref.n_docs} reference documents; {prep.learner} k={prep.k}, "
              f"{spec.shadows} shadow models on {plan.n_docs // 2} documents each → {experiment.run.path}",
              file=sys.stderr)
        print(settings_line(prep.settings_from, prep.params), file=sys.stderr)
    outcome = execute(experiment, quiet)
    run, stats = experiment.run, outcome.statistics

    t = time.perf_counter()
    n_tokens = np.asarray(scored.sum(axis=1), dtype=np.float64).ravel()
    shadow_in = plan.shadow_in[:, :n_c]
    zeta, pop = stats["zeta"][:, :n_c], stats["zeta"][:, n_c:]
    population_stats = (pop[0], pop[1:], plan.shadow_in[:, n_c + population], n_tokens[n_c:]) if population.size else None
    scores = candidate_scores(zeta[0], zeta[1:], shadow_in, n_tokens[:n_c], population_stats,
                              document_features(cands.X))
    scores.setdefault("rmia_population", np.full(n_c, np.nan))
    if wants_quantile_regression(spec.shadows, ["quantile_regression"] if spec.rank_by == "quantile" else []):
        scores["quantile_regression"] = quantile_scores(zeta[0], zeta[1:], shadow_in, cands.X)
    scores.setdefault("quantile_regression", np.full(n_c, np.nan))
    rank_by, recommended = resolve_ranking(spec.rank_by, spec.shadows)
    order = ranking(scores, rank_by)
    n_tokens = n_tokens[:n_c]
    ids = cands.doc_ids if cands.doc_ids is not None else [str(i) for i in cands.doc_index]
    rows = []
    for rank, i in enumerate(order, start=1):
        row = {"rank": rank, "candidate": int(cands.doc_index[i]), "id": ids[i], "n_tokens": round(float(n_tokens[i]))}
        row.update({name: float(scores[name][i]) for name in SCORE_COLUMNS[4:]})
        if spec.show_text:
            row["text"] = cands.texts[i]
        rows.append(row)
    atomic_write_text(run.path / "scores.csv", scores_csv(rows, spec.show_text))
    run.save_arrays("statistics.npz", {
        **{f"model_{name}": values[0, :n_c] for name, values in stats.items()},
        **{f"shadow_{name}": values[1:, :n_c] for name, values in stats.items()},
        "shadow_in": shadow_in, "candidate": cands.doc_index,
        "population_model_zeta": pop[0], "population_shadow_zeta": pop[1:], "population_reference": population,
    })
    scoring_seconds = time.perf_counter() - t

    guarantee = prep.target.learner.guarantee()
    result = {
        "schema": USER_AUDIT_SCHEMA,
        "name": spec.run_name,
        "config_hash": prep.config_hash,
        "inputs": {
            "phi": {"path": str(model.phi_path), "sha256": model.phi_sha256, "format": model.phi_format,
                    "k": model.k, "n_words": int(model.vocabulary.size), "normalized": model.normalized,
                    "max_row_sum_error": model.max_row_sum_error, "n_zero_columns": model.n_zero_columns},
            "vocabulary": {"path": str(model.vocabulary_path or model.phi_path),
                           "sha256": model.vocabulary_sha256 or model.phi_sha256,
                           "n_words": int(model.vocabulary.size), "n_unseen": prep.n_unseen_words},
            "candidates": {"source": cands.source, "n_docs": n_c + cands.n_dropped_empty, "n_scored": n_c,
                           "n_dropped_empty": cands.n_dropped_empty, "dropped_empty": _dropped_positions(cands),
                           "n_tokens": cands.n_tokens, "n_duplicated_in_reference": prep.n_duplicated},
            "reference": {"source": ref.source, "n_docs": ref.n_docs + ref.n_dropped_empty, "n_used": ref.n_docs,
                          "n_dropped_empty": ref.n_dropped_empty, "n_tokens": ref.n_tokens},
            "preprocess": spec.preprocess,
        },
        "learner": {"name": prep.learner, "k": prep.k, "params": dict(prep.params),
                    "settings_from": prep.settings_from,
                    "vocabulary": "the user's (every column of Φ)", "guarantee": guarantee.to_json()},
        "shadows": {"n_shadows": spec.shadows, "in_per_candidate": spec.shadows // 2,
                    "pool_docs": plan.n_docs, "training_docs": plan.n_docs // 2, "reused": outcome.n_reused},
        "ranking": {"by": RANKINGS[rank_by][0], "rank_by": rank_by, "recommended": recommended,
                    "rule": RECOMMENDATION_RULE, "order": RANKING_ORDER},
        "scores": {"file": "scores.csv", "columns": {c: COLUMN_DESCRIPTIONS[c] for c in
                                                     SCORE_COLUMNS + (("text",) if spec.show_text else ())}},
        "summary": {
            "n_candidates": n_c,
            # No count of members or discoveries: these scores are not calibrated tests (docs/user-audit.md).
            "unreliable": unreliable_columns(spec.shadows),
        },
        "top": rows[: spec.top],
        "statistics": {"max_zeta_gap": float(stats["gap"].max()), "zeta_tol": spec.tol},
        "seeds": {"seed": spec.seed},
        "versions": outcome.versions,
        "ray": {"address": spec.ray_address or "local", **outcome.cluster},
        "timings_s": {"load": round(load_seconds, 3),
                      **{name: round(outcome.timings[name], 3) for name in ("fit_wall", "fit_cpu", "statistics")},
                      "scoring": round(scoring_seconds, 3), "total": round(time.perf_counter() - started, 3)},
        "resumed": resuming,
        "warnings": outcome.worker_warnings,
    }
    atomic_write_text(run.path / "audit.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return result


# -- the screen -----------------------------------------------------------------------------------
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


def _printable(text: str, width: int) -> str:
    """One line of corpus text safe for a terminal: control characters escaped, whitespace folded."""
    flat = " ".join(text.split())
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in flat)
    return safe if len(safe) <= width else safe[: width - 1] + "…"


def ranked_table(result: dict[str, Any], run_dir: Path) -> str:
    """The short summary printed at the end: the top of the ranking and where the files are."""
    inputs, s = result["inputs"], result["summary"]
    cands = inputs["candidates"]
    dropped = f" ({cands['n_dropped_empty']} without a vocabulary word, not scored)" if cands["n_dropped_empty"] else ""
    lines = [
        f"{inputs['phi']['path']}: k={inputs['phi']['k']}, {inputs['phi']['n_words']} words",
        (f"  {s['n_candidates']} candidates scored{dropped}; {inputs['reference']['n_used']} reference documents; "
         f"{result['learner']['name']} k={result['learner']['k']}, {result['shadows']['n_shadows']} shadow models "
         f"on {result['shadows']['training_docs']} documents each"),
        "  " + settings_line(result["learner"]["settings_from"], result["learner"]["params"]),
        f"  ranked by {RANKING_LABELS[result['ranking']['rank_by']]}, strongest membership evidence first",
        *([f"  (recommended for {result['shadows']['n_shadows']} shadow models: {result['ranking']['rule']}; "
           "choose another with --rank-by)"] if result["ranking"].get("recommended") else []),
        "",
    ]
    top = result["top"]
    show_text = any("text" in row for row in top)
    show_id = any(str(r["id"]) != str(r["candidate"]) for r in top)
    id_width = min(max([len(str(r["id"])) for r in top] + [2]), 30)
    id_head = f"{'id':<{id_width}}  " if show_id else ""
    column = result["ranking"]["by"]
    lines.append(f"  {'rank':>5}  {'candidate':>9}  {id_head}{'tokens':>6}  {'zeta':>10}  {column:>17}"
                 + ("  text" if show_text else ""))
    for r in top:
        id_cell = f"{_printable(str(r['id']), id_width):<{id_width}}  " if show_id else ""
        line = (f"  {r['rank']:>5}  {r['candidate']:>9}  {id_cell}{r['n_tokens']:>6}  {r['zeta']:>10.3f}  "
                f"{_score_text(column, r[column]):>17}")
        lines.append(line + (f"  {_printable(r['text'], 60)}" if show_text else ""))
    unreliable = s.get("unreliable", {})
    lines += [
        "",
        (f"  the shown scores ({column}) are the ranking's own; the ranking is evidence, not a test: it claims "
         "no number of members"),
        *[f"  unreliable with {result['shadows']['n_shadows']} shadows: {name} ({why})"
          for name, why in unreliable.items() if name in PER_DOCUMENT_COLUMNS and "shadow(s) a side" in why],
        *(["  this ranking rests on an unreliable statistic: --rank-by recommended ranks by one that holds up"]
          if column in PER_DOCUMENT_COLUMNS and "shadow(s) a side" in unreliable.get(column, "") else []),
        (f"  wall time {result['timings_s']['total']:.1f} s (fits {result['timings_s']['fit_wall']:.1f} s, "
         f"statistics {result['timings_s']['statistics']:.1f} s)"),
        "",
        f"  scores  {run_dir / 'scores.csv'}",
        f"  report  {run_dir / 'audit.json'}",
    ]
    return "\n".join(lines)
