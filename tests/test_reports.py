"""roc.png and the ROC data it draws, held against scikit-learn's ROC of the stored scores (independent values)."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sklearn_roc_curve

from topicaudit.engine.presentation.roc_figure import MAIN_ATTACKS
from topicaudit.reports.collect import read_run
from topicaudit.reports.figures import roc_data


def test_the_drawn_curves_are_sklearns_roc_of_the_stored_scores(finished_run):
    """Every main attack's curve is scikit-learn's ROC (all thresholds kept) and its AUC scikit-learn's."""
    config, results = finished_run
    data = roc_data(read_run(config.run_dir), list(MAIN_ATTACKS))
    assert set(data["curves"]) == set(MAIN_ATTACKS)
    with np.load(config.run_dir / "scores.npz") as z:
        labels = z["is_member"]
        assert data["floor"] == pytest.approx(1 / np.count_nonzero(~labels))  # the smallest non-zero FPR
        for name in MAIN_ATTACKS:
            fpr, tpr = data["curves"][name]
            want_fpr, want_tpr, _ = sklearn_roc_curve(labels, z[name], drop_intermediate=False)
            np.testing.assert_allclose(fpr, want_fpr, rtol=0, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(tpr, want_tpr, rtol=0, atol=1e-12, err_msg=name)
            assert results["attacks"][name]["auc"] == pytest.approx(roc_auc_score(labels, z[name]), abs=1e-12)


def test_the_run_itself_leaves_roc_png(finished_run):
    """The engine draws roc.png (not the command line), so ``topicaudit.run()`` leaves one too."""
    run_dir = finished_run[0].run_dir
    path = run_dir / "roc.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".roc.png")]  # written atomically
