"""``topicaudit audit``: rank a released model's candidate documents by membership evidence.

The user has a trained topic-word matrix Φ with its vocabulary, documents that
may have been in its training set (*candidates*), and documents from the same
distribution (*reference*). There is no ground truth: the output is a ranking.

1. Φ and the vocabulary are loaded and validated (:mod:`topicaudit.inputs.user_model`; a
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
and identified like ``run``'s; it and step 1 are :mod:`topicaudit.engine.audit_inputs`.
Everything is checked before the output directory is created. Shadow models are written one file each as they finish,
so an interrupted audit resumes; a directory made for other inputs or settings
is refused (config hash).
"""
from __future__ import annotations

import json
import math
import sys
import time
import warnings
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
from topicaudit.engine.audit_inputs import dropped_positions, load_audit_inputs, settings_line
from topicaudit.engine.configuration.config import AuditConfig, audit_config_of, config_hash
from topicaudit.engine.execution.experiment import Experiment, execute
from topicaudit.engine.storage.lock import writer_lock
from topicaudit.engine.execution.plan import make_plan
from topicaudit.engine.storage.audit_results import USER_AUDIT_SCHEMA, AuditLearner, AuditRanking, AuditResults
from topicaudit.engine.storage.results import GuaranteeInfo
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.engine.replay import check_first_shadow
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.storage.scores_csv import scores_csv
from topicaudit.targets.base import Release, claim


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
    check_first_shadow(experiment, m.learner)  # a plug-in's saved shadows, by fitting one again (engine.replay)
    for note in inputs.notes:
        warnings.warn(note, UserWarning, stacklevel=2)
    load_seconds = time.perf_counter() - started
    if not quiet:
        print(f"{'resuming' if resuming else 'auditing'} {model.phi_path} (k={model.k}, {model.vocabulary.size} words): "
              f"{n_c} candidates, {ref.n_docs} reference documents; {m.learner} k={m.k}, "
              f"{n_shadows} shadow models on {plan.n_docs // 2} documents each → {experiment.run.path.resolve()}",
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
    digest = atomic_write_text(run.path / "scores.csv", scores_csv(rows, csv_columns))
    run.record("scores.csv", written={"scores.csv": digest})
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

    guarantee = claim(inputs.target.learner)
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
    digest = atomic_write_text(run.path / "audit.json",
                               json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    run.record("audit.json", written={"audit.json": digest})
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
