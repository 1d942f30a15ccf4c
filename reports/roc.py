"""roc.png: the log-log ROC that ``topicaudit run`` leaves in every run directory.

The same figure as the report's per-run ROC (:mod:`topicaudit.reports.figures`), for the
paper's main attacks only: chance line, and the region the target's claimed
(ε, δ) excludes when it claims one.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from topicaudit.attacks.metrics import roc_curve
from topicaudit.engine.rundir import atomic_write_bytes
from topicaudit.reports.collect import read_run
from topicaudit.reports.figures import draw_roc, render, roc_data

# The attacks drawn by default: the paper's LiRA variants, the few-model ones (docs/attacks.md), baselines.
MAIN_ATTACKS = ("lira_online", "lira_online_global", "lira_offline", "lira_offline_shrunk", "rmia_online",
                "threshold_max_theta", "threshold_entropy_theta")


def roc_points(run_dir: Path, attacks=MAIN_ATTACKS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """FPR and TPR of each attack's ROC, from the run's scores.npz."""
    with np.load(Path(run_dir) / "scores.npz", allow_pickle=False) as z:
        labels = z["is_member"]
        return {name: roc_curve(z[name], labels)[:2] for name in attacks if name in z}


def write_roc_figure(run_dir: Path, attacks=MAIN_ATTACKS) -> Path:
    """Draw roc.png (log-log, down to 1/#non-members) into a finished run directory; return its path."""

    run = read_run(Path(run_dir))
    data = roc_data(run, [name for name in attacks if name in run.scores])
    png = render(draw_roc(data), "png")
    path = run.path / "roc.png"
    atomic_write_bytes(path, lambda handle: handle.write(png))
    return path
