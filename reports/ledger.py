"""The privacy ledger: one row per run, every number read from its results.json.

Rows are plain values (None where a run does not carry the number) so that
tests compare them with results.json; :func:`format_cell` makes the text the
HTML page and the Markdown summary show.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from topicaudit.engine.storage.results import AttackMetrics, RunResults, TargetInfo, Utility
from topicaudit.errors import UserError
from topicaudit.reports.verdict import own_verdict

# key, heading, what it is (the README's column list is this table)
COLUMNS = (
    ("run", "run", "the run directory"),
    ("group", "group", "what distinguishes the run from the others in the report (the swept value)"),
    ("replicate", "replicate", "replicate r of R of its group (seed)"),
    ("pipeline", "target pipeline", "learner, number of topics k, vocabulary step and the size of the released vocabulary"),
    ("epsilon", "claimed ε", "the ε the target's pipeline claims (— = no claim: a non-private learner)"),
    ("delta", "claimed δ", "the δ of that claim"),
    ("adjacency", "adjacency", "what the claim protects: a document, a word, or the local versions"),
    ("basis", "basis", "why it is claimed: theorem (with its accountant), paper-claim, or monitor (measured, not a guarantee)"),
    ("monitor_eps", "monitor ε", ("a learner's data-dependent privacy monitor (document-level ε after its last "
                                  "iteration), when it has one: a diagnostic, not a guarantee")),
    ("tpr_0.001", "TPR@0.1%FPR", "fraction of members the attack finds while flagging at most 0.1% of non-members"),
    ("tpr_0.01", "TPR@1%FPR", "the same at 1% of non-members"),
    ("auc", "AUC", "area under the ROC curve (0.5 = chance)"),
    ("eps_lb", "empirical ε ≥", ("the verdict's ε lower bound: the largest over every test of the run (natural "
                                 "documents and canaries), α split over them, at the stated confidence; the number "
                                 "`topicaudit check` prints for the run's own claim")),
    ("coherence", "coherence", "UMass coherence of the target's topics (higher is better), when the run measured it"),
    ("perplexity", "perplexity", "held-out perplexity (lower is better), when the run measured it"),
    ("shadows", "shadows", "number of shadow models behind the attack"),
    ("wall_s", "wall time", "the run's total wall time"),
)
HEADINGS = {key: heading for key, heading, _ in COLUMNS}


def _pipeline(target: TargetInfo) -> str:
    text = f"{_known(target.learner)} k={_known(target.k)}, vocabulary {_known(target.vocabulary_step)}"
    if target.vocabulary_size is not None:
        text += f" ({target.vocabulary_size} words)"
    return text


def _known(value: Any) -> Any:
    return "?" if value is None else value


def _monitor_epsilon(monitor: dict[str, Any] | None) -> float | None:
    trajectory = (monitor or {}).get("epsilon_document") or []
    return float(trajectory[-1]) if trajectory else None


def _verdict_bound(run) -> tuple[float, float, float] | None:
    """(ε_LB, confidence, δ) of the run's verdict on its own claim as ``check`` computes it now (the card's);
    None when no test can bound anything (e.g. word canaries only, for a document-level claim)."""
    try:
        result, _ = own_verdict(run.path)
    except UserError:
        return None
    return result.epsilon_lower_bound, 1 - result.alpha, result.delta


def ledger_row(run, group_label: str, attack: str = "lira_online") -> dict[str, Any]:
    r: RunResults = run.results
    target, guarantee = r.target, r.target.guarantee
    metrics = r.attacks.get(attack) or AttackMetrics()
    bounds = _verdict_bound(run)
    utility = r.utility or Utility()
    return {
        "run": str(run.path),
        "group": group_label,
        "replicate": f"{run.replicate + 1}/{run.replicates} (seed {run.seed})",
        "pipeline": _pipeline(target),
        "epsilon": guarantee.epsilon,
        "delta": guarantee.delta if guarantee.epsilon is not None else None,
        "adjacency": guarantee.adjacency,
        "basis": guarantee.basis if guarantee.basis not in (None, "none") else None,
        "monitor_eps": _monitor_epsilon(target.monitor),
        "tpr_0.001": metrics.tpr_at_fpr_0_001,
        "tpr_0.01": metrics.tpr_at_fpr_0_01,
        "auc": metrics.auc,
        "eps_lb": bounds[0] if bounds is not None else None,
        "eps_lb_confidence": bounds[1] if bounds is not None else None,
        "eps_lb_delta": bounds[2] if bounds is not None else None,
        "coherence": utility.umass_coherence,
        "perplexity": utility.heldout_perplexity,
        "shadows": r.shadows.n_shadows if r.shadows is not None else None,
        "wall_s": (r.timings_s or {}).get("total"),
    }


def ledger_rows(collection, attack: str = "lira_online") -> list[dict[str, Any]]:
    """One row per run of the collection, in group order."""
    return [ledger_row(run, group.label, attack) for group in collection.groups for run in group.runs]


def format_cell(key: str, row: dict[str, Any]) -> str:
    value = row.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if key in ("tpr_0.001", "tpr_0.01"):
        return f"{100 * value:.2f}%"
    if key == "auc":
        return f"{value:.3f}"
    if key == "eps_lb":
        conf = row.get("eps_lb_confidence")
        return f"{value:.2f}" + (f" ({100 * conf:.0f}%, δ={row['eps_lb_delta']:g})" if conf is not None else "")
    if key in ("epsilon", "delta", "monitor_eps"):
        return f"{value:g}"
    if key == "coherence":
        return f"{value:.3f}"
    if key == "perplexity":
        return f"{value:.1f}"
    if key == "wall_s":
        return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"
    return str(value)


def formatted(rows: list[dict[str, Any]], keys=None) -> tuple[list[str], list[list[str]]]:
    keys = keys or [key for key, _, _ in COLUMNS]
    return [HEADINGS[k] for k in keys], [[format_cell(k, row) for k in keys] for row in rows]


# -- the same, aggregated over replicates ------------------------------------------------------------
SUMMARY_METRICS = (("tpr_at_fpr_0.001", "TPR@0.1%FPR", True), ("tpr_at_fpr_0.01", "TPR@1%FPR", True),
                   ("auc", "AUC", False))


def group_summary(collection, attacks=None) -> tuple[list[str], list[list[str]]]:
    """Mean ± sd over each group's replicates of the main metrics (the paper's Table 2 layout).

    Default attacks: online and offline LiRA, and the few-model offline LiRA
    with shrunk variance when the runs report it.
    """
    if attacks is None:
        has_shrunk = any("lira_offline_shrunk" in run.results.attacks for run in collection.runs)
        attacks = ("lira_online", "lira_offline") + (("lira_offline_shrunk",) if has_shrunk else ())
    headers = [collection.parameter or "group", "runs"]
    for attack in attacks:
        headers += [f"{attack} {label}" for _, label, _ in SUMMARY_METRICS]
    headers.append("empirical ε ≥")
    body = []
    for group in collection.groups:
        cells = [group.label, str(len(group.runs))]
        for attack in attacks:
            for metric, _, percent in SUMMARY_METRICS:
                xs = [run.results.attacks[attack].get(metric) for run in group.runs if attack in run.results.attacks]
                cells.append(_mean_sd_text([x for x in xs if x is not None], percent))
        eps = [bound[0] for bound in map(_verdict_bound, group.runs) if bound is not None]
        cells.append(_mean_sd_text([x for x in eps if x is not None], False))
        body.append(cells)
    return headers, body


def _mean_sd_text(xs: list[float], percent: bool) -> str:
    if not xs:
        return "—"
    a = np.asarray(xs, dtype=float) * (100 if percent else 1)
    unit = "%" if percent else ""
    mean = f"{a.mean():.2f}{unit}" if percent else f"{a.mean():.3f}"
    if a.size == 1:
        return mean
    sd = f"{a.std(ddof=1):.2f}" if percent else f"{a.std(ddof=1):.3f}"
    return f"{mean} ± {sd}"
