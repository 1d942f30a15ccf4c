"""Log-log ROC curves of every attack in a finished run directory."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from audit.metrics import roc_curve

# The attacks drawn by default: the paper's two LiRA variants and its baselines.
MAIN_ATTACKS = ("lira_online", "lira_online_global", "lira_offline", "threshold_max_theta",
                "threshold_entropy_theta")


def roc_points(run_dir: Path, attacks=MAIN_ATTACKS) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    with np.load(Path(run_dir) / "scores.npz", allow_pickle=False) as z:
        labels = z["is_member"]
        return {name: roc_curve(z[name], labels)[:2] for name in attacks if name in z}


def write_roc_figure(run_dir: Path, attacks=MAIN_ATTACKS) -> Path:
    """Draw roc.png (log-log, down to 1/#non-members) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from audit.metrics import auc, tpr_at_fpr

    run_dir = Path(run_dir)
    curves = roc_points(run_dir, attacks)
    with np.load(run_dir / "scores.npz", allow_pickle=False) as z:
        n_neg = int((~z["is_member"]).sum())
    floor = 1.0 / max(n_neg, 1)
    fig, ax = plt.subplots(figsize=(5.2, 4.6), dpi=120)
    grid = np.logspace(np.log10(floor), 0, 200)
    ax.plot(grid, grid, color="0.6", lw=1, ls="--", label="chance")
    for name, (fpr, tpr) in curves.items():
        label = f"{name} (AUC {auc(fpr, tpr):.3f}, TPR@0.1% {tpr_at_fpr(fpr, tpr, 1e-3):.1%})"
        ax.plot(np.maximum(fpr, floor), np.maximum(tpr, floor), lw=1.4, label=label)
    ax.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1.05),
           xlabel="false positive rate", ylabel="true positive rate", title=run_dir.name)
    ax.legend(fontsize=6.5, loc="lower right")
    fig.tight_layout()
    path = run_dir / "roc.png"
    fig.savefig(path)
    plt.close(fig)
    return path
