"""The report page of a ``topicaudit audit`` of a user's own model: the answer first, then the figures.

It reads what the audit wrote and recomputes nothing: audit.json (the exposure
figure, the comparison with the reference, the settings), scores.csv (every
candidate's scores), statistics.npz (ζ under the model and the shadows),
exposure.npz (the attack's scores on each shadow in turn, for the ROC). The
page leads with how exposed the candidates are: the exposure level and its
figure in one sentence (what an attack achieves on models trained like the
user's, measured on the shadows, whose membership is known), how many
candidates stand out from the reference documents against how many would by
chance, and the most exposed candidates with their evidence. Figures and
details follow. Candidate text appears only with ``show_text`` (the page then
names likely members next to their words); every string goes through the
renderers' escaping like any other.
"""
from __future__ import annotations

import math
import tomllib
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.exposure import percent
from topicaudit.attacks.metrics import roc_curve
from topicaudit.attacks.ranking import RANKINGS
from topicaudit.engine.storage.check_result import integrity_phrase
from topicaudit.engine.storage.integrity import verify_audit_directory
from topicaudit.engine.audit_inputs import load_audit_inputs, settings_line
from topicaudit.engine.configuration.config import AuditConfig, config_hash
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.audit_results import AuditResults
from topicaudit.engine.presentation.roc_figure import chance, corners, loglog, new_figure, roc_floor
from topicaudit.engine.storage.bounded_read import read_arrays
from topicaudit.errors import UserError
from topicaudit.reports.document import Definitions, Headline, Paragraph, Report, Section, Table
from topicaudit.reports.figures import IN_COLOR, OUT_COLOR, _overlap_legend, tpr_at
from topicaudit.reports.collect import _is_user_audit
from topicaudit.reports.risk import TEXT_LIMIT, document_text
from topicaudit.version import __version__

# The files the page reads, checked against the manifest when it lists them.
READ_FILES = ["config.toml", "plan.npz", "statistics.npz", "audit.json", "scores.csv", "exposure.npz"]
# Exposure levels by the mean TPR at 0.1% FPR on the shadows (the page states the rule).
LEVELS = ((0.10, "HIGH EXPOSURE"), (0.01, "SOME EXPOSURE"), (0.0, "LITTLE EXPOSURE"))
LEVEL_RULE = ("HIGH: the attack finds 10% or more of the training documents at 0.1% FPR (100 times its false "
              "alarms); SOME: 1% to 10% (10 to 100 times); LITTLE: under 1%, within 10 times what guessing gives")
EXAMPLES = 4   # candidates whose ζ histograms are drawn


def is_user_audit(path: Path) -> bool:
    """A ``topicaudit audit`` output directory (finished or not)."""
    return Path(path).is_dir() and _is_user_audit(Path(path))


def level(tpr: float) -> str:
    return next(word for threshold, word in LEVELS if tpr >= threshold)


# -- reading --------------------------------------------------------------------------------------------
class AuditDirectory:
    """A finished audit output directory: audit.json eagerly (checked against the manifest), the rest on demand."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not (self.path / "audit.json").exists():
            raise UserError(f"{self.path} is an unfinished `topicaudit audit` (no audit.json yet); rerun the same "
                            "audit command to finish it, then report")
        try:
            self.protection = protection = verify_audit_directory(self.path, READ_FILES)
            self.results = AuditResults.load(self.path)
        except UserError as error:
            raise UserError(f"{self.path} is a `topicaudit audit` output directory, but {error}") from None
        if protection.unverified is not None:  # said once the directory is read, not before its refusal
            warnings.warn(f"{self.path}: {protection.unverified}", stacklevel=2)

    def arrays(self, name: str, required: tuple[str, ...] = ()) -> dict[str, np.ndarray] | None:
        path = self.path / name
        if not path.exists():
            return None
        return read_arrays(path, required)


# -- figures -----------------------------------------------------------------------------------------------
def exposure_roc_data(arrays: dict[str, np.ndarray], points: int = 300) -> dict[str, Any]:
    """The attack's ROC on the shadows, each in turn the target: mean and sd over the targets of the TPR at
    FPR ≤ f on a log grid (as the report draws replicates), from exposure.npz."""
    scores, labels = arrays["score"], arrays["is_member"].astype(bool)
    floor = min(roc_floor(row) for row in labels)
    grid = np.logspace(np.log10(floor), 0, points)
    curves = np.stack([tpr_at(*roc_curve(s, m)[:2], grid) for s, m in zip(scores, labels)])
    return {"fpr": grid, "tpr": curves.mean(axis=0), "sd": curves.std(axis=0, ddof=1) if len(curves) > 1 else None,
            "n": len(curves), "floor": floor}


def draw_exposure_roc(data: dict[str, Any], attack: str):
    fig = new_figure(6.0, 5.0)
    ax = fig.add_subplot()
    floor = data["floor"]
    chance(ax, floor)
    ax.plot(*corners(np.maximum(data["fpr"], floor), np.maximum(data["tpr"], floor)), color="#b00020", lw=1.6,
            label=f"{attack}, mean of {data['n']} shadow models")
    if data["sd"] is not None:
        ax.fill_between(data["fpr"], np.maximum(data["tpr"] - data["sd"], floor),
                        np.minimum(data["tpr"] + data["sd"], 1), color="#b00020", alpha=0.15, lw=0,
                        label="± one standard deviation")
    for x in (0.001, 0.01):
        if x >= floor:
            ax.axvline(x, color="0.75", lw=0.8, ls=":")
    loglog(ax, floor, "The attack on models trained like yours")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def draw_versus_reference(candidate: np.ndarray, reference: np.ndarray, attack: str, cut: float | None):
    fig = new_figure(6.0, 3.6)
    ax = fig.add_subplot()
    values = np.concatenate([candidate, reference])
    values = values[np.isfinite(values)]
    bins = np.histogram_bin_edges(values, bins=40) if values.size else 10
    ax.hist(reference[np.isfinite(reference)], bins=bins, color=OUT_COLOR, alpha=0.6, density=True,
            label=f"reference documents ({reference.size}, taken as non-members)")
    ax.hist(candidate[np.isfinite(candidate)], bins=bins, color=IN_COLOR, alpha=0.6, density=True,
            label=f"candidates ({candidate.size})")
    if cut is not None:
        ax.axvline(cut, color="k", lw=1, ls=":", label="beyond 99% of the reference")
    ax.set_xlabel(f"{attack} score under your model (higher: more like a training document)", fontsize=7)
    ax.set_ylabel("density", fontsize=7)
    ax.tick_params(labelsize=6.5)
    _overlap_legend(ax, fontsize=6.5)
    return fig


def draw_candidate_zeta(examples: list[dict[str, Any]]):
    cols = 2 if len(examples) > 1 else 1
    rows = math.ceil(len(examples) / cols)
    fig = new_figure(3.4 * cols, 2.7 * rows + 0.3)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, d in zip(axes, examples):
        values = np.concatenate([d["in"], d["out"], [d["model"]]])
        bins = np.histogram_bin_edges(values, bins=min(30, max(8, int(np.sqrt(values.size)) + 2)))
        ax.hist(d["out"], bins=bins, color=OUT_COLOR, alpha=0.6, label=f"OUT ({d['out'].size} shadows)")
        ax.hist(d["in"], bins=bins, color=IN_COLOR, alpha=0.6, label=f"IN ({d['in'].size} shadows)")
        ax.axvline(d["model"], color="k", lw=1.2, ls=":", label="your model")
        ax.set_title(f"rank {d['rank']}: candidate {d['candidate']}, {d['n_tokens']} words", fontsize=8)
        ax.set_xlabel("ζ(Φ, d)", fontsize=7)
        ax.set_ylabel("shadow models", fontsize=7)
        ax.tick_params(labelsize=6.5)
        _overlap_legend(ax)
    for ax in axes[len(examples):]:
        ax.set_visible(False)
    return fig


# -- the page ---------------------------------------------------------------------------------------------
def _score_cell(row: dict[str, Any], by: str) -> str:
    if by.endswith("_p"):
        value = row.get(by[: -len("_p")] + "_log10_p")
        if value is None or not math.isfinite(value):
            p = row.get(by, math.nan)
            value = math.log10(p) if p and p > 0 else -math.inf
        return "< -1e6" if value < -1e6 else f"{value:.2f}"
    value = row.get(by, math.nan)
    return ("> 1e6" if value > 0 else "< -1e6") if abs(value) >= 1e6 else f"{value:.3f}"


def _beyond_cell(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "–"
    return "100%" if value >= 1 else f"{100 * value:.1f}%"


def _texts(audit: AuditDirectory, candidates: list[int]) -> dict[int, str]:
    """The candidates' text, from scores.csv when the audit kept it, else reloaded (and proven the audited one)."""
    scores = audit.results.all_scores
    if "text" in scores:
        return {int(c): str(t) for c, t in zip(scores["candidate"], scores["text"])}
    try:
        data = tomllib.loads((audit.path / "config.toml").read_text(encoding="utf-8"))
        config = config_from_dict({k: v for k, v in data.items() if k != "provenance"},
                                  str(audit.path / "config.toml"))
        if not isinstance(config, AuditConfig):
            raise UserError("its config.toml is not an audit's")
        config.output = str(audit.path)
        config, inputs = load_audit_inputs(config)
    except (OSError, ValueError, UserError) as error:
        raise UserError(f"--show-text needs the candidates of {audit.path}: {error} (config.toml paths are "
                        "relative to where the audit ran; run `topicaudit report` from there)") from None
    if config_hash(config, inputs.fingerprint()) != audit.results.config_hash:
        raise UserError(f"--show-text: the candidates or the model at the paths {audit.path / 'config.toml'} names are "
                        "not the ones this audit read (their content differs); the text is left out")
    cands = inputs.candidates
    row_of = {int(position): row for row, position in enumerate(cands.doc_index)}
    return {c: document_text(cands, row_of[c]) for c in candidates if c in row_of}


def compose(path: Path, figs, top: int = 20, show_text: bool = False) -> Report:
    """The report of one audit output directory (``figs``: the report's figure writer)."""
    audit = AuditDirectory(path)
    r = audit.results
    inputs, summary, learner = r.inputs or {}, r.summary or {}, r.learner
    phi, cands, ref = inputs.get("phi", {}), inputs.get("candidates", {}), inputs.get("reference", {})
    n_shadows = (r.shadows or {}).get("n_shadows")
    by = r.ranking.by if r.ranking else None
    attack = r.ranking.rank_by if r.ranking else None
    exposure = r.exposure or {}
    versus = summary.get("versus_reference") or {}
    notes: list[str] = []
    warnings: list[str] = []
    title = f"topicaudit report: your model {Path(str(phi.get('path', r.name))).name}"
    intro = [(f"Audit of {phi.get('path')} (k={phi.get('k')}, {phi.get('n_words')} words) in {path}: "
              f"{cands.get('n_scored')} candidate documents, {ref.get('n_used')} reference documents, "
              f"{n_shadows} shadow models ({learner.name if learner else '?'}, k={learner.k if learner else '?'}) "
              f"trained like it. Made by topicaudit {__version__} from what the audit wrote (nothing is "
              "recomputed).")]
    if show_text:
        warnings.append("This report shows the text of the candidates the attack is most sure were training "
                        "documents of your model: it discloses membership itself. Share it only as you would the "
                        "candidates.")

    # -- the answer -----------------------------------------------------------------------------------
    answer = Section("How exposed are the candidates?", anchor="answer")
    if exposure.get("n_targets"):
        tpr = exposure["tpr_at_fpr_0.001"]["mean"]
        word = level(tpr)
        answer.add(Headline(word, f"{word}: {exposure['statement']}."))
    elif r.exposure is None:
        answer.add(Headline("NOT MEASURED", "NOT MEASURED: this audit was written by an earlier version of "
                                           "topicaudit, which did not measure the exposure of models trained like "
                                           "yours; rerun the audit to add it (--output this directory reuses its "
                                           "shadow models when nothing else changed)."))
    else:
        answer.add(Headline("NOT MEASURED", "NOT MEASURED: the exposure of models trained like yours "
                                           f"{exposure.get('not_measured', 'was not measured')}."))
    if versus.get("levels"):
        said = [f"{lv['n_candidates']} score beyond "
                f"{'every one' if lv['beyond'] >= 1 else format(100 * lv['beyond'], 'g') + '%'} of them (about "
                f"{lv['expected_if_no_member']:.2g} would by chance)" for lv in versus["levels"]]
        answer.add(Paragraph(
            f"Under your model, the candidates stand against {versus['n_reference']} reference documents scored "
            f"the same way: of the {versus['n_candidates']} candidates, {' and '.join(said)}. \"By chance\": if no "
            "candidate had been a training document of your model, the reference documents not being any either "
            "(as the attack takes them). An observation beside its chance level, not a count of members: the "
            "scores are evidence, not calibrated tests."))
    items = []
    if exposure.get("n_targets"):
        items += [("what the figure rests on", exposure["uncertainty"] + "."),
                  ("what it describes", exposure["meaning"][:1].upper() + exposure["meaning"][1:] + "."),
                  ("levels", LEVEL_RULE + ".")]
    if attack and r.ranking is not None:  # (attack is the ranking's)
        items.append(("ranking", f"by {attack}: {RANKINGS.get(attack, attack)}, strongest evidence first"
                                 + (" (the attack recommended for this number of shadow models)"
                                    if r.ranking.recommended else "")))
    if learner:
        items.append(("shadows", f"{n_shadows} × {learner.name} k={learner.k} on "
                                 f"{(r.shadows or {}).get('training_docs')} documents each; "
                                 + settings_line(learner.settings_from or "", learner.params or {})))
    # what protected the files these numbers come from, as a run's card says it (an edited audit.json whose
    # manifest hash was recomputed showed its numbers with no word that only hashes were checked)
    protected = audit.protection.unverified or integrity_phrase(audit.protection.mode, audit.protection.key_id)
    if protected is not None:
        items.append(("integrity", protected.removeprefix("integrity: ")))
    answer.add(Definitions(items))

    # the most exposed candidates, with their evidence
    stats = audit.arrays("statistics.npz", ("model_zeta", "shadow_zeta", "shadow_in", "candidate"))
    table = r.all_scores
    shown = min(max(top, 0), len(table["rank"]))
    row_of = {int(c): i for i, c in enumerate(stats["candidate"])} if stats is not None else {}
    texts = _texts(audit, [int(c) for c in table["candidate"][:shown]]) if show_text and shown else {}
    with_id = any(str(table["id"][i]) != str(table["candidate"][i]) for i in range(shown))
    log_scale = bool(by and by.endswith("_p"))
    headers = ["rank", "candidate", *(["id"] if with_id else []), "words",
               f"log10 {by}" if log_scale else str(by), "> reference", "ζ your model", "mean ζ IN", "mean ζ OUT",
               *(["text"] if show_text else [])]
    body = []
    examples: list[dict[str, Any]] = []
    for i in range(shown):
        assert by is not None, "every audit.json ranks its candidates (engine/audit.py writes its ranking)"
        row = {name: values[i] for name, values in table.items()}
        c = int(row["candidate"])
        cells = [str(int(row["rank"])), str(c), *([str(row["id"])] if with_id else []), str(int(row["n_tokens"])),
                 _score_cell(row, by), _beyond_cell(row.get("beyond_reference"))]
        j = row_of.get(c)
        if stats is not None and j is not None:  # (row_of is empty without stats)
            inside = stats["shadow_in"][:, j].astype(bool)
            zeta = stats["shadow_zeta"][:, j]
            cells += [f"{stats['model_zeta'][j]:.2f}", f"{zeta[inside].mean():.2f}" if inside.any() else "–",
                      f"{zeta[~inside].mean():.2f}" if (~inside).any() else "–"]
            if len(examples) < EXAMPLES:
                examples.append({"rank": int(row["rank"]), "candidate": c, "n_tokens": int(row["n_tokens"]),
                                 "in": zeta[inside], "out": zeta[~inside], "model": float(stats["model_zeta"][j])})
        else:
            cells += ["–", "–", "–"]
        if show_text:
            text = texts.get(c, "")
            cells.append(text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " …")
        body.append(cells)
    answer.add(Table(headers, body,
                     f"The {shown} candidates with the strongest membership evidence (candidate = position in the "
                     "candidates input; > reference = share of the reference documents whose score this one "
                     "exceeds; ζ = the document's best log-likelihood under your model, and its mean under the "
                     "shadow models trained with it (IN) and without it (OUT): a ζ nearer the IN mean is the "
                     "evidence)", wide_columns=(len(headers) - 1,) if show_text else ()))
    if not show_text:
        notes.append("Candidate texts are left out; `topicaudit report --show-text` adds them (the page then "
                     "names likely members next to their words).")

    # -- figures ------------------------------------------------------------------------------------------
    figures = Section("Figures", anchor="figures")
    arrays = audit.arrays("exposure.npz", ("score", "is_member"))
    if arrays is not None and len(arrays["score"]):
        assert attack is not None, "an audit that wrote exposure.npz ranked its candidates by that attack"
        figures.add(figs.add(
            draw_exposure_roc(exposure_roc_data(arrays), attack), "exposure-roc",
            "The attack on models trained like yours",
            f"Log-log ROC of {attack} with each of the {len(arrays['score'])} shadow models in turn as the target "
            "(its training documents known) and the others, but its complementary twin, as its shadows: the mean "
            "over the targets of the TPR at FPR ≤ f, ± one standard deviation shaded; dotted: 0.1% and 1% FPR, "
            "where the figure above is read; dashed: chance. From exposure.npz."))
        if arrays.get("reference_score") is not None and arrays["reference_score"].size:
            reference = arrays["reference_score"]
            finite = np.sort(reference[np.isfinite(reference)])
            cut = float(finite[min(math.ceil(0.99 * finite.size), finite.size) - 1]) if finite.size >= 100 else None
            figures.add(figs.add(
                draw_versus_reference(arrays["candidate_score"], reference, attack, cut), "versus-reference",
                "The candidates against the reference under your model",
                f"Density of the {attack} score of every candidate (blue) and of the sampled reference documents "
                "(orange), both computed against the same shadow models under your model. Candidates far to the "
                "right of the reference are the exposed ones; if none had been a training document the two "
                "would overlap."))
    else:
        notes.append("No exposure.npz (the audit has fewer than 4 shadow models, or was written by an earlier "
                     "version): no ROC of the attack on the shadows.")
    if examples:
        figures.add(figs.add(
            draw_candidate_zeta(examples), "candidate-zeta", "ζ of the most exposed candidates",
            "For each of the top candidates: the histogram of ζ over the shadow models trained with it (IN, blue) "
            "and without it (OUT, orange), and its ζ under your model (dotted). From statistics.npz."))

    # -- details ------------------------------------------------------------------------------------------
    details = Section("Details", anchor="details")
    if exposure.get("n_targets"):
        metric_rows = [[label, percent(exposure[key]["mean"]) if key != "auc" else f"{exposure[key]['mean']:.3f}",
                        percent(exposure[key]["sd"]) if key != "auc" else f"{exposure[key]['sd']:.3f}",
                        percent(exposure[key]["min"]) if key != "auc" else f"{exposure[key]['min']:.3f}",
                        percent(exposure[key]["max"]) if key != "auc" else f"{exposure[key]['max']:.3f}"]
                       for key, label in (("tpr_at_fpr_0.001", "TPR at 0.1% FPR"), ("tpr_at_fpr_0.01", "TPR at 1% FPR"),
                                          ("auc", "AUC"))]
        details.add(Table(["metric", "mean", "sd", "min", "max"], metric_rows,
                          f"{exposure['attack']} on each of {exposure['n_targets']} shadow models in turn "
                          f"({exposure['n_documents']} documents each, about {exposure['members_per_target']:.0f} "
                          "members), from audit.json's exposure"))
    details.add(Definitions([
        ("Φ", f"{phi.get('path')}: {phi.get('format')}, k={phi.get('k')}, {phi.get('n_words')} words, sha256 "
              f"{str(phi.get('sha256', ''))[:16]}…" + ("; rows normalised" if phi.get("normalized") else "")),
        ("candidates", f"{cands.get('source')}: {cands.get('n_docs')} documents, {cands.get('n_scored')} scored, "
                       f"{cands.get('n_dropped_empty')} without a vocabulary word, "
                       f"{cands.get('n_duplicated_in_reference')} identical to a reference document"),
        ("reference", f"{ref.get('source')}: {ref.get('n_docs')} documents, {ref.get('n_used')} used"),
        ("files", ", ".join(f"{role}: {p.name}" for role, p in r.paths.items() if p.exists())),
    ]))
    model_settings = (learner.model_settings if learner else None) or {}
    if model_settings:
        read = model_settings.get("read_without_unpickling", {})
        details.add(Table(["setting of the saved model", "value", "shadows"],
                          [[name, str(value), "used" if name in model_settings.get("used", []) else
                            model_settings.get("not_used", {}).get(name, "—")] for name, value in read.items()],
                          f"{model_settings.get('estimator')}: settings read from the file without unpickling"))
        for name, why in (model_settings.get("not_readable") or {}).items():
            notes.append(f"Not read from the saved model: {name} ({why}).")
    unreliable = summary.get("unreliable") or {}
    for name, why in unreliable.items():
        if name == by or "shadow(s) a side" in why:
            if why.startswith("as ") and why[3:] in unreliable:
                why = unreliable[why[3:]]  # "as lira_offline_p": say it
            notes.append(f"{name}: {why}.")
    notes += [f"Warning raised while auditing: {w}" for w in r.warnings or []]
    return Report(title, intro, warnings, [answer, figures, details], notes)
