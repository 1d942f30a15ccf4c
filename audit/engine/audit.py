"""``topicaudit audit``: rank a released model's candidate documents by membership evidence.

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
   shadows (:func:`topicaudit.engine.execution.plan.make_plan`).
3. ζ of every candidate (and of a sample of reference documents, RMIA's
   population) under Φ and under each shadow: the shared experiment
   (:mod:`topicaudit.engine.execution.experiment`).
4. The registry's attacks on the candidates, ranked by the one chosen
   (:mod:`topicaudit.attacks.ranking`); scores.csv and audit.json written.

The configuration is :class:`topicaudit.engine.configuration.config.AuditConfig`, validated
and identified like ``run``'s. Everything is checked before the output
directory is created. Shadow models are written one file each as they finish,
so an interrupted audit resumes; a directory made for other inputs or settings
is refused (config hash).
"""
from __future__ import annotations

import copy
import json
import math
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks import exposure
from topicaudit.attacks.exposure import shadow_exposure
from topicaudit.attacks.ranking import (COLUMN_DESCRIPTIONS, EXTRA_COLUMNS, POPULATION_SIZE, RANKING_ORDER,
                                        RECOMMENDATION_RULE, SCORE_COLUMNS, beyond, candidate_scores, column,
                                        log10_p_columns, ranking, resolve_ranking, score_columns, unreliable_columns)
from topicaudit.attacks.registry import AttackInputs, Population, compute_attacks
from topicaudit.engine.configuration.config import AuditConfig, BaseConfig, audit_config_of, config_hash
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.execution.experiment import Experiment, execute
from topicaudit.engine.storage.lock import writer_lock
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.storage.audit_results import USER_AUDIT_SCHEMA, AuditLearner, AuditRanking, AuditResults
from topicaudit.engine.storage.results import GuaranteeInfo
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.storage.scores_csv import scores_csv
from topicaudit.engine.configuration.validation import warn_more_topics_than_words
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import Corpus, corpus_fingerprint, detect_format, load_corpus
from topicaudit.inputs.phi_io import UserModel, load_user_model
from topicaudit.targets import learner_class, shadow_pipeline
from topicaudit.targets.base import Release

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
        config = audit_config_of(phi)
    elif str(phi).endswith(".toml"):
        config = load_config(phi, AuditConfig)
    else:
        config = AuditConfig()
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
    n_duplicated = sum(key in reference_keys for key in _row_keys(candidates.X))
    if n_duplicated:
        notes.append(f"{n_duplicated} candidate document(s) have the same word counts as a reference document; their "
                     "OUT shadows may have seen a copy, which hides membership")
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


# -- orchestration ----------------------------------------------------------------------------
def execute_audit(config: AuditConfig, quiet: bool = False) -> AuditResults:
    """Run (or resume) the audit a configuration describes; writes the output directory and returns
    ``audit.json`` as its record (``to_json()`` is the file's content; ``directory`` the output directory).

    The output directory's writer lock is held throughout: a second writer is refused.
    """
    config = audit_config_of(config)
    with writer_lock(config.run_dir):
        return _execute_audit(config, quiet)


def _execute_audit(config: AuditConfig, quiet: bool) -> AuditResults:
    started = time.perf_counter()
    config, inputs = load_audit_inputs(config)
    model, cands, ref, m = inputs.model, inputs.candidates, inputs.reference, config.model
    seed, n_shadows, n_c = config.seed, config.attack.shadows, cands.n_docs
    plan = make_plan(n_c + ref.n_docs, n_shadows, seed)
    # RMIA's population: a seeded sample of reference documents, scored with the candidates.
    population = np.sort(np.random.default_rng(seed).permutation(ref.n_docs)[:POPULATION_SIZE])
    scored = sp.vstack([cands.X, ref.X[population]], format="csr")
    all_words = np.arange(model.vocabulary.size, dtype=np.int64)
    experiment = Experiment(
        run=RunDirectory(config.run_dir), config_hash=config_hash(config, inputs.fingerprint()),
        record=config.to_dict(), seeds={"seed": seed},
        X=sp.vstack([cands.X, ref.X], format="csr"), target=inputs.target, plan=plan,
        plan_arrays={"seed": np.int64(seed), "shadow_in": plan.shadow_in, "shadow_seeds": plan.shadow_seeds,
                     "n_candidates": np.int64(n_c), "n_reference": np.int64(ref.n_docs)},
        released=Release(phi=model.phi, vocabulary=all_words), shadow_vocabulary=all_words, scored=scored,
        tol=config.attack.tol, ray_address=config.ray.address, num_cpus=config.ray.num_cpus)
    resuming = experiment.resuming()
    for note in inputs.notes:
        warnings.warn(note, UserWarning, stacklevel=2)
    load_seconds = time.perf_counter() - started
    if not quiet:
        print(f"{'resuming' if resuming else 'auditing'} {model.phi_path} (k={model.k}, {model.vocabulary.size} words): "
              f"{n_c} candidates, {ref.n_docs} reference documents; {m.learner} k={m.k}, "
              f"{n_shadows} shadow models on {plan.n_docs // 2} documents each → {experiment.run.path}",
              file=sys.stderr)
        print(settings_line(inputs.settings_from, m.params), file=sys.stderr)
    outcome = execute(experiment, quiet)
    run, stats = experiment.run, outcome.statistics

    t = time.perf_counter()
    n_tokens = np.asarray(scored.sum(axis=1), dtype=np.float64).ravel()
    shadow_in = plan.shadow_in[:, :n_c]
    zeta, pop = stats["zeta"][:, :n_c], stats["zeta"][:, n_c:]
    rank_by, recommended = resolve_ranking(config.ranking.by, n_shadows)
    attack_inputs = AttackInputs(
        {"zeta": zeta[0]}, {"zeta": zeta[1:]}, shadow_in, n_tokens[:n_c], cands.X,
        Population(pop[0], pop[1:], plan.shadow_in[:, n_c + population], n_tokens[n_c:]))
    scores = candidate_scores(attack_inputs, rank_by)
    # The reference sample (RMIA's population, taken as non-members of Φ) scored like the candidates under Φ.
    population_in = plan.shadow_in[:, n_c + population]
    reference_inputs = AttackInputs({"zeta": pop[0]}, {"zeta": pop[1:]}, population_in, n_tokens[n_c:],
                                    ref.X[population])
    reference_score = compute_attacks(reference_inputs, [rank_by]).get(rank_by)
    columns = {"zeta": zeta[0], **score_columns(scores), **log10_p_columns(scores),
               "beyond_reference": (beyond(scores[rank_by], reference_score) if reference_score is not None
                                    else np.full(n_c, np.nan))}
    order = ranking(scores, rank_by)
    ids = cands.doc_ids if cands.doc_ids is not None else [str(i) for i in cands.doc_index]
    show_text = config.ranking.show_text
    csv_columns = SCORE_COLUMNS + EXTRA_COLUMNS + (("text",) if show_text else ())
    rows = []
    for rank, i in enumerate(order, start=1):
        row = {"rank": rank, "candidate": int(cands.doc_index[i]), "id": ids[i], "n_tokens": round(float(n_tokens[i]))}
        row.update({name: float(columns[name][i]) for name in SCORE_COLUMNS[4:] + EXTRA_COLUMNS})
        if show_text:
            row["text"] = cands.texts[i]
        rows.append(row)
    atomic_write_text(run.path / "scores.csv", scores_csv(rows, csv_columns))
    run.record("scores.csv")
    run.save_arrays("statistics.npz", {
        **{f"model_{name}": values[0, :n_c] for name, values in stats.items()},
        **{f"shadow_{name}": values[1:, :n_c] for name, values in stats.items()},
        "shadow_in": shadow_in, "candidate": cands.doc_index,
        "population_model_zeta": pop[0], "population_shadow_zeta": pop[1:], "population_reference": population,
    })
    # How much models trained like Φ leak: the ranking's attack on each shadow in turn (exposure.py).
    scored_in = plan.shadow_in[:, np.r_[np.arange(n_c), n_c + population]]
    found = shadow_exposure(stats["zeta"][1:], scored_in, rank_by, n_tokens, scored,
                            max_targets=EXPOSURE_TARGETS.get(rank_by, exposure.MAX_TARGETS))
    exposure_json = _exposure_json(found, n_shadows, rank_by)
    if found is not None:
        run.save_arrays("exposure.npz", {
            "target": found["targets"], "score": found["scores"], "is_member": found["labels"],
            "is_candidate": np.r_[np.ones(n_c, bool), np.zeros(population.size, bool)],
            **{name: values for name, values in found["per_target"].items()},
            "candidate_score": scores[rank_by].astype(np.float64),
            "reference_score": (reference_score if reference_score is not None else np.empty(0)).astype(np.float64),
        })
    versus = _versus_reference(columns["beyond_reference"], reference_score, rank_by)
    scoring_seconds = time.perf_counter() - t

    guarantee = inputs.target.learner.guarantee()
    result = AuditResults(
        schema=USER_AUDIT_SCHEMA,
        name=config.name,
        config_hash=experiment.config_hash,
        inputs={
            "phi": {"path": str(model.phi_path), "sha256": model.phi_sha256, "format": model.phi_format,
                    "k": model.k, "n_words": int(model.vocabulary.size), "normalized": model.normalized,
                    "max_row_sum_error": model.max_row_sum_error, "n_zero_columns": model.n_zero_columns,
                    **({"verbatim_text": list(model.verbatim)} if model.verbatim else {})},
            "vocabulary": {"path": str(model.vocabulary_path or model.phi_path),
                           "sha256": model.vocabulary_sha256 or model.phi_sha256,
                           "n_words": int(model.vocabulary.size), "n_unseen": inputs.n_unseen_words},
            "candidates": {"source": cands.source, "n_docs": n_c + cands.n_dropped_empty, "n_scored": n_c,
                           "n_dropped_empty": cands.n_dropped_empty, "dropped_empty": dropped_positions(cands),
                           "n_tokens": cands.n_tokens, "n_duplicated_in_reference": inputs.n_duplicated},
            "reference": {"source": ref.source, "n_docs": ref.n_docs + ref.n_dropped_empty, "n_used": ref.n_docs,
                          "n_dropped_empty": ref.n_dropped_empty, "n_tokens": ref.n_tokens},
            "preprocess": config.corpus.preprocess,
        },
        learner=AuditLearner(name=m.learner, k=m.k, params=dict(m.params), settings_from=inputs.settings_from,
                             vocabulary="the user's (every column of Φ)", guarantee=GuaranteeInfo.of(guarantee),
                             model_settings=model.settings_record or None),
        shadows={"n_shadows": n_shadows, "in_per_candidate": n_shadows // 2,
                 "pool_docs": plan.n_docs, "training_docs": plan.n_docs // 2, "reused": outcome.n_reused},
        ranking=AuditRanking(by=column(rank_by), rank_by=rank_by, recommended=recommended,
                             rule=RECOMMENDATION_RULE, order=RANKING_ORDER),
        scores={"file": "scores.csv", "columns": {c: COLUMN_DESCRIPTIONS[c] for c in csv_columns}},
        summary={
            "n_candidates": n_c,
            # No count of members or discoveries: these scores are not calibrated tests (docs/user-audit.md).
            "unreliable": unreliable_columns(n_shadows),
            "versus_reference": versus,
        },
        exposure=exposure_json,
        files=dict(FILES),
        top=rows[: config.ranking.top],
        statistics={"max_zeta_gap": float(stats["gap"].max()), "zeta_tol": config.attack.tol},
        seeds={"seed": seed},
        versions=outcome.versions,
        ray={"address": config.ray.address or "local", **outcome.cluster},
        timings_s={"load": round(load_seconds, 3),
                   **{name: round(outcome.timings[name], 3) for name in ("fit_wall", "fit_cpu", "statistics")},
                   "scoring": round(scoring_seconds, 3), "total": round(time.perf_counter() - started, 3)},
        resumed=resuming,
        warnings=outcome.worker_warnings,
        directory=Path(config.run_dir),
    )
    atomic_write_text(run.path / "audit.json", json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    run.record("audit.json")
    return result


# The output directory's files, by role (audit.json's ``files``; AuditResults.paths makes them absolute).
FILES = {"audit": "audit.json", "scores": "scores.csv", "statistics": "statistics.npz", "exposure": "exposure.npz",
         "plan": "plan.npz", "config": "config.toml", "manifest": "manifest.json", "models": "models"}
# Leave-one-out targets per attack where scoring is slow (quantile regression fits gradient boosting each time).
EXPOSURE_TARGETS = {"quantile_regression": 8}
# The shares of the reference a candidate's score may exceed, for the comparison with the reference.
VERSUS_LEVELS = (0.99,)


def _exposure_json(found: dict[str, Any] | None, n_shadows: int, attack: str) -> dict[str, Any]:
    if found is not None:
        return exposure.to_json(found)
    why = (f"needs at least {exposure.MIN_SHADOWS} shadow models (each target is attacked with the others but its "
           f"complementary twin; this audit has {n_shadows})" if n_shadows < exposure.MIN_SHADOWS
           else f"{attack} cannot be computed with one shadow model left out")
    return {"attack": attack, "n_targets": 0, "not_measured": why}


def _versus_reference(beyond_reference: np.ndarray, reference_score: np.ndarray | None,
                      attack: str) -> dict[str, Any]:
    """How many candidates score beyond most reference documents under Φ, and how many would by chance.

    Under Φ the reference documents are taken as non-members (as RMIA's population is). A non-member candidate
    exchangeable with them exceeds at least c of m reference scores with probability (m − c + 1)/(m + 1), so
    that many candidates are expected beyond that level if none were a member. An observation with its chance
    level, not a count of members (docs/user-audit.md).
    """
    if reference_score is None or not np.isfinite(reference_score).any():
        return {"attack": attack, "n_reference": 0}
    m = int(np.isfinite(reference_score).sum())
    n = int(np.isfinite(beyond_reference).sum())
    levels = []
    for level in VERSUS_LEVELS:
        c = math.ceil(level * m)
        levels.append({"beyond": level, "n_candidates": int((beyond_reference * m >= c - 1e-9).sum()),
                       "expected_if_no_member": round(n * (m - c + 1) / (m + 1), 3)})
    everything = {"beyond": 1.0, "n_candidates": int((beyond_reference >= 1.0).sum()),
                  "expected_if_no_member": round(n / (m + 1), 3)}
    return {"attack": attack, "n_reference": m, "n_candidates": n, "levels": [*levels, everything]}
