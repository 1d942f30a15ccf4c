"""roc.png and the ROC data it draws, held against scikit-learn's ROC of the stored scores (independent values)."""
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sklearn_roc_curve

from topicaudit.engine.presentation.roc_figure import drawn_attacks
from topicaudit.reports.collect import read_run
from topicaudit.reports.figures import roc_data


def test_the_drawn_curves_are_sklearns_roc_of_the_stored_scores(finished_run):
    """Every drawn attack's curve is scikit-learn's ROC (all thresholds kept) and its AUC scikit-learn's."""
    config, results = finished_run
    run = read_run(config.run_dir)
    drawn = drawn_attacks(run.results, run.scores)
    data = roc_data(run)
    assert list(data["curves"]) == drawn == list(run.results.attacks)  # every attack the run scored
    with np.load(config.run_dir / "scores.npz") as z:
        labels = z["is_member"]
        assert data["floor"] == pytest.approx(1 / np.count_nonzero(~labels))  # the smallest non-zero FPR
        for name in drawn:
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


def test_roc_png_is_the_reports_roc_with_the_recommended_attack_bold(finished_run):
    """roc.png and the report's ROC are one drawing of the same attacks, the recommended one bold and named."""
    from topicaudit.attacks.registry import recommended_attack
    from topicaudit.engine.presentation.roc_figure import draw_roc, render

    run = read_run(finished_run[0].run_dir)
    data = roc_data(run)
    assert data["recommended"] == recommended_attack(run.results.n_shadows) in data["emphasised"]
    assert render(draw_roc(data), "png") == (run.path / "roc.png").read_bytes()
    labels = [text.get_text() for text in draw_roc(data).axes[0].get_legend().get_texts()]
    assert any(label.startswith(f"{data['recommended']} (recommended)") for label in labels)
    assert f"{len(data['curves']) - len(data['emphasised'])} other attacks (faded" in " ".join(labels)
