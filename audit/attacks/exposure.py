"""How much models trained like the user's leak: the attack measured on the shadow models, whose membership is known.

``topicaudit audit`` has no ground truth for the user's model, but it has N
shadow models trained like it (same learner, settings and vocabulary, each on a
random half of candidates + reference), and knows which documents each trained
on. Leave-one-out over the shadows: each shadow in turn is the target, and the
attack scores every scored document (the candidates and the sampled reference
documents) against the remaining shadows, from which the target's
complementary twin is also left out (its membership is the target's, negated:
kept, the count of IN shadows left would give every document's membership
away). The attack's TPR at 0.1% and 1% FPR and its AUC on each target, against
the target's known membership, measure what the same attack achieves against
models trained like the user's; their mean ± standard deviation over the
targets is the overall exposure figure, and its spread is its uncertainty.

It describes models like the shadows: trained on half of candidates + reference
with the shadows' settings. The closer those are to how the user's model was
trained (the same settings, a reference about its training set's size), the
closer it describes the user's model. Each target is attacked with N − 2
shadows where the user's model has N, which leaves the figure slightly
conservative.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.metrics import auc, roc_curve, tpr_at_fpr
from topicaudit.attacks.registry import AttackInputs, compute_attacks

MIN_SHADOWS = 4          # two left as a target's shadows: one IN and one OUT of every document
MAX_TARGETS = 64         # targets measured (the first shadows; both of each pair): enough for a mean and a spread
FPRS = (0.001, 0.01)
METRICS = ("tpr_at_fpr_0.001", "tpr_at_fpr_0.01", "auc")


def _twin(shadow_in: np.ndarray, j: int) -> int | None:
    """The shadow whose membership is shadow j's negated (the plan's pairs are 2i, 2i + 1), or None."""
    other = j ^ 1
    if other < shadow_in.shape[0] and np.array_equal(shadow_in[other], ~shadow_in[j]):
        return other
    return None


def shadow_exposure(shadow_zeta: np.ndarray, shadow_in: np.ndarray, attack: str, n_tokens: np.ndarray,
                    counts: sp.spmatrix | None = None, max_targets: int = MAX_TARGETS) -> dict[str, Any] | None:
    """Leave-one-out over the shadows: each as the target, scored by ``attack`` against the others (twin left out).

    shadow_zeta, shadow_in: (N, n) ζ of the n scored documents under each shadow and which shadows trained on
    them. Returns None with fewer than MIN_SHADOWS shadows; else per-target metrics (arrays over the targets),
    their summaries, and per-target scores and labels (targets × n) for the ROC.
    """
    n_shadows, n_docs = shadow_in.shape
    if n_shadows < MIN_SHADOWS:
        return None
    features = None
    targets, scores, labels = [], [], []
    per_target: dict[str, list[float]] = {name: [] for name in METRICS}
    for j in range(min(n_shadows, max_targets)):
        twin = _twin(shadow_in, j)
        others = np.array([i for i in range(n_shadows) if i != j and i != twin])
        inputs = AttackInputs({"zeta": shadow_zeta[j]}, {"zeta": shadow_zeta[others]}, shadow_in[others], n_tokens,
                              counts)
        if features is not None:
            inputs.features = features  # the same documents each time: their features once
        computed = compute_attacks(inputs, [attack])
        if attack not in computed:
            return None  # the attack needs an input the leave-one-out cannot give (e.g. both sides of a document)
        features = inputs.features if counts is not None else None
        score = np.asarray(computed[attack], dtype=np.float64)
        member = shadow_in[j]
        if member.all() or not member.any():
            continue
        fpr, tpr, _ = roc_curve(score, member)
        per_target["auc"].append(auc(fpr, tpr))
        for f in FPRS:
            per_target[f"tpr_at_fpr_{f:g}"].append(tpr_at_fpr(fpr, tpr, f))
        targets.append(j)
        scores.append(score.astype(np.float32))
        labels.append(member)
    if not targets:
        return None
    members = np.array([m.sum() for m in labels])
    return {
        "attack": attack,
        "n_targets": len(targets),
        "n_shadows": n_shadows,
        "shadows_per_target": n_shadows - 2 if all(_twin(shadow_in, j) is not None for j in targets)
        else n_shadows - 1,
        "n_documents": n_docs,
        "members_per_target": float(members.mean()),
        "non_members_per_target": float((n_docs - members).mean()),
        "per_target": {name: np.array(values) for name, values in per_target.items()},
        "targets": np.array(targets),
        "scores": np.stack(scores),
        "labels": np.stack(labels),
    }


def summary(values: np.ndarray) -> dict[str, float]:
    """Mean, standard deviation (ddof 1; 0 for one value), minimum and maximum over the targets."""
    values = np.asarray(values, dtype=np.float64)
    return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
            "min": float(values.min()), "max": float(values.max())}


def percent(value: float) -> str:
    """A rate as a percentage with the digits it needs: 12.3%, 0.45%, 0%."""
    if value == 0 or not math.isfinite(value):
        return f"{100 * value:.0f}%"
    return f"{100 * value:.1f}%" if value >= 0.01 else f"{100 * value:.2g}%"


def statement(exposure: dict[str, Any]) -> str:
    """The figure in one plain-language sentence (the page's and the summary's headline)."""
    tpr, tpr1, area = (exposure["tpr_at_fpr_0.001"], exposure["tpr_at_fpr_0.01"], exposure["auc"])
    return (f"An attack on models trained like yours identifies {percent(tpr['mean'])} of their training documents "
            f"while wrongly flagging 0.1% of other documents ({percent(tpr1['mean'])} at 1%; AUC "
            f"{area['mean']:.2f}, where 0.5 is guessing)")


def uncertainty(exposure: dict[str, Any]) -> str:
    """How sure the figure is and what it rests on, in one sentence."""
    tpr, area = exposure["tpr_at_fpr_0.001"], exposure["auc"]
    resolution = exposure["non_members_per_target"]
    coarse = (f"; with {resolution:.0f} non-members per model, 0.1% FPR allows no false positive"
              if resolution < 1000 else "")
    return (f"Mean ± standard deviation over {exposure['n_targets']} shadow models, each in turn the target of "
            f"the attack ({exposure['attack']}) with {exposure['shadows_per_target']} others as its shadows: TPR at "
            f"0.1% FPR {percent(tpr['mean'])} ± {percent(tpr['sd'])} (range {percent(tpr['min'])}–"
            f"{percent(tpr['max'])}), AUC {area['mean']:.3f} ± {area['sd']:.3f}; "
            f"{exposure['n_documents']} documents each, about {exposure['members_per_target']:.0f} of them "
            f"members{coarse}")


def to_json(found: dict[str, Any]) -> dict[str, Any]:
    """audit.json's ``exposure``: the summaries and what they rest on (per-target arrays go to exposure.npz)."""
    out = {name: found[name] for name in ("attack", "n_targets", "n_shadows", "shadows_per_target", "n_documents",
                                          "members_per_target", "non_members_per_target")}
    for name in METRICS:
        out[name] = {**summary(found["per_target"][name]),
                     "per_target": [round(float(v), 6) for v in found["per_target"][name]]}
    out["statement"] = statement(out)
    out["uncertainty"] = uncertainty(out)
    out["meaning"] = ("measured on the shadow models, whose training documents are known: it describes models "
                      "trained like the shadows (this learner and these settings, on half of candidates + "
                      "reference); the closer that is to how your model was trained, the closer it describes "
                      "your model. Each target is attacked with two shadow models fewer than your model was, "
                      "which leaves the figure slightly conservative")
    return out
