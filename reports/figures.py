"""The report's figures: pure functions that return the plotted data, and drawings of that data.

Each figure comes in two halves. ``*_data`` reads a run's stored arrays and
results (nothing is recomputed: metrics in legends come from results.json,
curves from scores.npz, ζ from statistics.npz, memberships from plan.npz) and
returns plain arrays, so tests check what is plotted rather than pixels.
``draw_*`` turns that data into a matplotlib Figure (Agg, no pyplot state);
:func:`save_figure` writes it as PNG and deterministic SVG.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.attacks.metrics import roc_curve
from topicaudit.bounds.dp_region import claim_of, dp_tpr_bound
from topicaudit.engine.presentation import roc_figure
from topicaudit.engine.check import canary_evidence  # the one reader of canary files
from topicaudit.owned_folders import open_folder
from topicaudit.engine.presentation.roc_figure import chance, corners, draw_roc, loglog, new_figure, render, roc_floor


IN_COLOR, OUT_COLOR = "#1f77b4", "#ff7f0e"  # the paper's Figure 1: members blue, non-members orange
KINDS = ("long", "short", "inlier", "outlier")
KIND_DESCRIPTIONS = {
    "long": "more words than one standard deviation above the mean length",
    "short": "fewer words than one standard deviation below the mean length",
    "inlier": "typical length, words that are frequent in the corpus",
    "outlier": "typical length, words that are rare in the corpus",
}
# (attacks a run does not have are skipped: the few-model ones appear in runs that report them)
BY_PARAMETER_ATTACKS = ("lira_online", "lira_offline", "lira_offline_shrunk", "rmia_online")


# -- helpers ---------------------------------------------------------------------------------------
SCALES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def readable_ticks(values) -> list[str]:
    """Tick labels a reader takes in at a glance: one scale for the axis (k from 10,000, M, G, T), as few
    decimals as tell the ticks apart, no scientific notation and no offset (``1.2M``, ``−350k``, ``0.25``).

    Matplotlib's default writes large scores as small numbers under an ``1e6`` (or ``+1.234e6``) offset at
    the axis's end, which a reader misses; this is the canary and ζ histograms' x axis.
    """
    values = np.asarray(values, dtype=float)
    if not values.size:
        return []
    top = float(np.max(np.abs(values)))
    factor, suffix = next(((f, s) for f, s in SCALES if top >= max(f, 1e4)), (1.0, ""))
    scaled = values / factor
    decimals = next((d for d in range(7) if np.allclose(np.round(scaled, d), scaled, rtol=0, atol=1e-9 * max(
        1.0, float(np.max(np.abs(scaled)))))), 6)
    labels = []
    for x in np.round(scaled, decimals):
        text = f"{x:,.{decimals}f}"
        labels.append("0" if x == 0 else text.replace("-", "\u2212") + suffix)
    return labels


def readable_axis(axis) -> None:
    """Give a matplotlib axis :func:`readable_ticks` labels (no offset text)."""
    from matplotlib.ticker import Formatter  # see topicaudit.engine.presentation.roc_figure.new_figure

    class Readable(Formatter):
        def format_ticks(self, values):
            return readable_ticks(values)

        def __call__(self, x, pos=None):
            return readable_ticks([x])[0]

    axis.set_major_formatter(Readable())


def tpr_at(fpr: np.ndarray, tpr: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The largest TPR over thresholds with FPR ≤ each grid value (the metrics convention)."""
    index = np.searchsorted(fpr, grid, side="right") - 1
    return np.asarray(tpr)[np.maximum(index, 0)]


# -- ROC of every attack in one run, with the claimed DP region ----------------------------------
def roc_data(run, attacks: list[str] | None = None) -> dict[str, Any]:
    """The run's ROC as roc.png draws it (:func:`topicaudit.engine.presentation.roc_figure.roc_data`): by default the same
    attacks (``drawn_attacks``)."""
    names = attacks if attacks is not None else roc_figure.drawn_attacks(run.results, run.scores)
    return roc_figure.roc_data(run.name, run.scores, run.results, names)


# -- canary scores of the canaries in and out of the canary release ---------------------------------------
def canary_data(run) -> dict[str, Any] | None:
    """Each canary score, split by the canaries' coins (in the release or not); None without canaries."""
    evidence = canary_evidence(run.path)
    if evidence is None:
        return None
    scores, coins, kind = evidence
    coins = coins.astype(bool)
    return {"kind": kind, "panels": {name: {"in": values[coins], "out": values[~coins]}
                                     for name, values in scores.items()}}


def draw_canary_histograms(data: dict[str, Any], title: str):
    panels = list(data["panels"].items())
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = new_figure(3.4 * cols, 2.6 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (name, d) in zip(axes, panels):
        values = np.concatenate([d["in"], d["out"]])
        values = values[np.isfinite(values)]
        bins = np.histogram_bin_edges(values, bins=30) if values.size else 10
        ax.hist(d["out"][np.isfinite(d["out"])], bins=bins, color=OUT_COLOR, alpha=0.6,
                label=f"out of the release ({d['out'].size})")
        ax.hist(d["in"][np.isfinite(d["in"])], bins=bins, color=IN_COLOR, alpha=0.6,
                label=f"in the release ({d['in'].size})")
        _overlap_legend(ax)
        readable_axis(ax.xaxis)
        ax.set_title(f"score: {name}", fontsize=8)
        ax.set_xlabel("canary score (higher: more likely in)", fontsize=7)
        ax.set_ylabel("canaries", fontsize=7)
        ax.tick_params(labelsize=6.5)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    return fig


def _overlap_legend(ax, fontsize: float = 6) -> None:
    """The legend with the colour where the IN and OUT bars overlap named too."""
    from matplotlib.colors import to_rgb  # see topicaudit.engine.presentation.roc_figure.new_figure
    from matplotlib.patches import Patch  # see topicaudit.engine.presentation.roc_figure.new_figure

    white = np.ones(3)
    out = 0.6 * np.array(to_rgb(OUT_COLOR)) + 0.4 * white
    both = 0.6 * np.array(to_rgb(IN_COLOR)) + 0.4 * out  # IN drawn over OUT, both at alpha 0.6
    handles, labels = ax.get_legend_handles_labels()
    ax.legend([*handles, Patch(color=both)], [*labels, "both (bars overlap)"], fontsize=fontsize)


def _palette(n: int, sequential: bool = False):
    from matplotlib import colormaps  # see topicaudit.engine.presentation.roc_figure.new_figure

    if sequential and n > 1:
        return [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, n)]
    cmap = colormaps["tab10"] if n <= 10 else colormaps["tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


# -- overlay of several runs / sweep values -----------------------------------------------------
def overlay_data(groups, attack: str = "lira_online", points: int = 300) -> dict[str, Any]:
    """One ROC per group for ``attack``.

    A group of one run gives its exact curve (``sd`` None); a group of
    replicates gives, on a log grid of FPR, the mean over replicates of the
    TPR at FPR ≤ f and its standard deviation (ddof 1). ``boundary`` is the
    group's claimed DP boundary on the grid (a sweep over ε shows each value's
    curve against its own claim), None when it claims no document-level ε.
    """
    floor = min(roc_floor(g.representative.scores["is_member"]) for g in groups)
    grid = np.logspace(np.log10(floor), 0, points)
    series = []
    for group in groups:
        curves = [roc_curve(run.scores[attack], run.scores["is_member"])[:2] for run in group.runs]
        claim = claim_of(group.representative.results)
        boundary = dp_tpr_bound(grid, claim.epsilon, claim.delta) if claim and claim.document_level else None
        if len(curves) == 1:
            fpr, tpr = curves[0]
            entry = {"label": group.label, "n": 1, "fpr": fpr, "tpr": tpr, "sd": None}
        else:
            stacked = np.stack([tpr_at(f, t, grid) for f, t in curves])
            entry = {"label": group.label, "n": len(curves), "fpr": grid, "tpr": stacked.mean(axis=0),
                     "sd": stacked.std(axis=0, ddof=1)}
        series.append({**entry, "claim": claim, "boundary": boundary})
    return {"attack": attack, "series": series, "floor": floor, "grid": grid}


def draw_overlay(data: dict[str, Any], legend_title: str, sequential: bool = False):
    fig = new_figure(6.4, 5.4)
    ax = fig.add_subplot()
    floor = data["floor"]
    chance(ax, floor)
    for color, s in zip(_palette(len(data["series"]), sequential), data["series"]):
        label = s["label"] + (f" (mean of {s['n']})" if s["n"] > 1 else "")
        ax.plot(*corners(np.maximum(s["fpr"], floor), np.maximum(s["tpr"], floor)), color=color, lw=1.4,
                label=label)
        if s["sd"] is not None:
            ax.fill_between(s["fpr"], np.maximum(s["tpr"] - s["sd"], floor), np.minimum(s["tpr"] + s["sd"], 1),
                            color=color, alpha=0.15, lw=0)
        if s["boundary"] is not None:
            ax.plot(data["grid"], np.maximum(s["boundary"], floor), color=color, lw=0.9, ls="-.",
                    label=f"{s['label']}: claimed ({s['claim'].epsilon:g}, {s['claim'].delta:g})-DP ceiling")
    loglog(ax, floor, f"{data['attack']}: ROC by run")
    ax.legend(fontsize=7, loc="lower right", title=legend_title, title_fontsize=7)
    return fig


# -- metrics against the varied parameter ------------------------------------------------------------
def x_axis(groups) -> tuple[list[Any], bool]:
    values = [g.value for g in groups]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    return values, numeric


def _mean_sd(values: list[float]) -> tuple[float, float, int]:
    xs = np.array([v for v in values if v is not None], dtype=float)
    if not xs.size:
        return math.nan, math.nan, 0
    return float(xs.mean()), float(xs.std(ddof=1)) if xs.size > 1 else 0.0, int(xs.size)


def by_parameter_data(groups, metric: str = "tpr_at_fpr_0.001",
                      attacks: tuple[str, ...] = BY_PARAMETER_ATTACKS) -> dict[str, Any]:
    """Mean ± sd over replicates of a results.json attack metric, one point per group."""
    x, numeric = x_axis(groups)
    series = {}
    for attack in attacks:
        stats = [_mean_sd([run.results.attacks[attack].get(metric) for run in g.runs
                           if attack in run.results.attacks]) for g in groups]
        if any(n for _, _, n in stats):
            series[attack] = {"mean": np.array([s[0] for s in stats]), "sd": np.array([s[1] for s in stats]),
                              "n": np.array([s[2] for s in stats])}
    return {"x": x, "numeric": numeric, "labels": [g.label for g in groups], "metric": metric, "series": series}


UTILITY_METRICS = {"umass_coherence": "UMass coherence (higher is better)",
                   "heldout_perplexity": "held-out perplexity (lower is better)"}


def utility_data(groups) -> dict[str, Any] | None:
    """Mean ± sd of results.json ``utility`` metrics per group; None when no run carries utility."""
    if not any(run.results.utility for g in groups for run in g.runs):
        return None
    x, numeric = x_axis(groups)
    series = {}
    for metric in UTILITY_METRICS:
        stats = [_mean_sd([getattr(run.results.utility, metric) for run in g.runs if run.results.utility])
                 for g in groups]
        if any(n for _, _, n in stats):
            series[metric] = {"mean": np.array([s[0] for s in stats]), "sd": np.array([s[1] for s in stats]),
                              "n": np.array([s[2] for s in stats])}
    return {"x": x, "numeric": numeric, "labels": [g.label for g in groups], "series": series} if series else None


def _positions(data):
    if data["numeric"]:
        return np.array(data["x"], dtype=float), None
    return np.arange(len(data["labels"]), dtype=float), data["labels"]


def draw_by_parameter(data: dict[str, Any], parameter: str):
    fig = new_figure(6.0, 4.2)
    ax = fig.add_subplot()
    xs, ticks = _positions(data)
    for i, (attack, s) in enumerate(data["series"].items()):
        offset = (i - (len(data["series"]) - 1) / 2) * (0.06 if ticks is not None else 0)
        ax.errorbar(xs + offset, 100 * s["mean"], yerr=100 * s["sd"], marker="o", ms=4, capsize=3, lw=1.2,
                    label=attack)
    if ticks is not None:
        ax.set_xticks(xs, ticks, rotation=20 if max(map(len, ticks)) > 8 else 0, fontsize=7)
    fpr = data["metric"].removeprefix("tpr_at_fpr_")
    ax.set(xlabel=parameter, ylabel=f"TPR at FPR ≤ {100 * float(fpr):g}% (%)",
           title=f"TPR at {100 * float(fpr):g}% FPR (mean ± sd over replicates)")
    ax.set_ylim(bottom=0)
    ax.grid(True, color="0.9", lw=0.6)
    ax.legend(fontsize=7)
    return fig


def draw_utility(data: dict[str, Any], parameter: str):
    panels = list(data["series"].items())
    fig = new_figure(4.0 * len(panels), 3.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    xs, ticks = _positions(data)
    for ax, (metric, s) in zip(axes, panels):
        ax.errorbar(xs, s["mean"], yerr=s["sd"], marker="o", ms=4, capsize=3, lw=1.2, color="#2ca02c")
        if ticks is not None:
            ax.set_xticks(xs, ticks, fontsize=7)
        ax.set(xlabel=parameter, title=UTILITY_METRICS[metric])
        ax.grid(True, color="0.9", lw=0.6)
    return fig


def privacy_utility_data(groups, attack: str = "lira_online",
                         metric: str = "tpr_at_fpr_0.001") -> dict[str, Any] | None:
    """One point per group: its utility (each results.json ``utility`` metric) against its leakage (``attack``'s
    ``metric``), mean ± sd over replicates; None when no run carries utility or none has the attack."""
    utility = utility_data(groups)
    leak = by_parameter_data(groups, metric, (attack,))["series"].get(attack)
    if utility is None or leak is None:
        return None
    return {"labels": [g.label for g in groups], "attack": attack, "metric": metric, "privacy": leak,
            "utility": utility["series"]}


def draw_privacy_utility(data: dict[str, Any], parameter: str):
    """Leakage (y) against each utility metric (x), one point per swept value, joined in the sweep's order."""
    panels = list(data["utility"].items())
    fig = new_figure(4.2 * len(panels), 4.0)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    fpr = 100 * float(data["metric"].removeprefix("tpr_at_fpr_"))
    y, dy = 100 * data["privacy"]["mean"], 100 * data["privacy"]["sd"]
    for ax, (metric, s) in zip(axes, panels):
        ax.plot(s["mean"], y, color="0.6", lw=0.9, zorder=1)
        ax.errorbar(s["mean"], y, xerr=s["sd"], yerr=dy, fmt="o", ms=4, capsize=3, color="#6a1b9a", zorder=2)
        for label, xi, yi in zip(data["labels"], s["mean"], y):
            if math.isfinite(xi) and math.isfinite(yi):
                ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize=6.5)
        ax.set(xlabel=UTILITY_METRICS[metric], ylabel=f"{data['attack']}: TPR at {fpr:g}% FPR (%)",
               title=f"privacy–utility by {parameter}")
        ax.set_ylim(bottom=0)
        ax.grid(True, color="0.9", lw=0.6)
    return fig


# -- ζ under IN and OUT shadows for example documents of each kind (the paper's Figure 1) -----------
def document_kinds(X) -> dict[str, int]:
    """Rows of one example document of each kind the paper's Figure 1 shows.

    Length L = tokens; a word's frequency = its count in the whole corpus;
    a document's commonness = mean over its tokens of log(word frequency).
    long / short: more / fewer words than one standard deviation from the mean
    length (the one of median length among them); inlier / outlier: among
    documents within one standard deviation of the mean length, the most / least
    common words. Kinds with no document are left out.
    """
    X = X.tocsr()
    lengths = np.asarray(X.sum(axis=1)).ravel()
    log_freq = np.log(np.maximum(np.asarray(X.sum(axis=0)).ravel(), 1.0))
    commonness = np.asarray(X @ log_freq).ravel() / np.maximum(lengths, 1.0)
    mean, sd = lengths.mean(), lengths.std()
    rows = np.arange(X.shape[0])
    kinds = {}
    for kind, mask in (("long", lengths > mean + sd), ("short", lengths < mean - sd)):
        members = rows[mask]
        if members.size:
            ordered = members[np.lexsort((members, lengths[members]))]
            kinds[kind] = int(ordered[(ordered.size - 1) // 2])
    typical = rows[np.abs(lengths - mean) <= sd]
    if typical.size:
        kinds["inlier"] = int(typical[np.argmax(commonness[typical])])
        kinds["outlier"] = int(typical[np.argmin(commonness[typical])])
    return {kind: kinds[kind] for kind in KINDS if kind in kinds}


def zeta_examples(run, X, attack: str = "lira_online") -> dict[str, dict[str, Any]]:
    """For each document kind: ζ of the shadows it was IN and OUT of, and the target's ζ.

    From statistics.npz (``shadow_zeta``, ``target_zeta``), plan.npz
    (``shadow_in``) and scores.npz (``is_member``, ``doc_index``, the attack's score).
    """
    stats, shadow_in, scores = run.statistics, run.shadow_in, run.scores
    lengths = np.asarray(X.sum(axis=1)).ravel()
    out = {}
    for kind, row in document_kinds(X).items():
        column, inside = stats["shadow_zeta"][:, row], shadow_in[:, row]
        out[kind] = {"row": row, "doc_index": int(scores["doc_index"][row]), "length": int(lengths[row]),
                     "in": column[inside], "out": column[~inside], "target": float(stats["target_zeta"][row]),
                     "member": bool(scores["is_member"][row]),
                     "score": float(scores[attack][row]) if attack in scores else math.nan}
    return out


def draw_zeta_examples(data: dict[str, dict[str, Any]], title: str):
    kinds = list(data)
    cols = 2 if len(kinds) > 1 else 1
    rows = math.ceil(len(kinds) / cols)
    fig = new_figure(3.4 * cols, 2.7 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, kind in zip(axes, kinds):
        d = data[kind]
        values = np.concatenate([d["in"], d["out"], [d["target"]]])
        bins = np.histogram_bin_edges(values, bins=min(30, max(8, int(np.sqrt(values.size)) + 2)))
        ax.hist(d["out"], bins=bins, color=OUT_COLOR, alpha=0.6, label=f"OUT ({d['out'].size} shadows)")
        ax.hist(d["in"], bins=bins, color=IN_COLOR, alpha=0.6, label=f"IN ({d['in'].size} shadows)")
        ax.axvline(d["target"], color="k", lw=1.2, ls=":",
                   label=f"target ({'member' if d['member'] else 'non-member'})")
        ax.set_title(f"{kind}: document {d['doc_index']}, {d['length']} words", fontsize=8)
        ax.set_xlabel("ζ(Φ, d)", fontsize=7)
        readable_axis(ax.xaxis)
        ax.set_ylabel("shadow models", fontsize=7)
        ax.tick_params(labelsize=6.5)
        _overlap_legend(ax)
    for ax in axes[len(kinds):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    return fig


def save_figure(fig, directory: Path, stem: str) -> dict[str, bytes]:
    """Write ``stem.png`` and ``stem.svg`` into ``directory``; returns the bytes of each."""
    encoded = {fmt: render(fig, fmt) for fmt in ("png", "svg")}
    with open_folder(directory, create=True) as folder:  # a report's own folder: never through a link
        for fmt, data in encoded.items():
            folder.put(f"{stem}.{fmt}", data)
    return encoded
