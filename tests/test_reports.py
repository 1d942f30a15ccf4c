import numpy as np
import pytest

from topicaudit.engine.config import config_from_dict
from topicaudit.attacks.metrics import roc_curve
from topicaudit.engine.run import execute_run
from topicaudit.reports.roc import MAIN_ATTACKS, roc_points, write_roc_figure


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports") / "run"
    execute_run(config_from_dict({"synthetic": {"n_docs": 200, "n_words": 600}, "attack": {"shadows": 4},
                                "target": {"k": 3}, "ray": {"num_cpus": 1}, "output": str(out)}), quiet=True)
    return out


def test_roc_points_are_the_curves_of_the_stored_scores(run_dir):
    curves = roc_points(run_dir)
    assert set(curves) == set(MAIN_ATTACKS)
    with np.load(run_dir / "scores.npz") as z:
        for name, (fpr, tpr) in curves.items():
            want_fpr, want_tpr, _ = roc_curve(z[name], z["is_member"])
            np.testing.assert_array_equal(fpr, want_fpr)
            np.testing.assert_array_equal(tpr, want_tpr)


def test_roc_figure_is_written_as_png(run_dir):
    path = write_roc_figure(run_dir)
    assert path == run_dir / "roc.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".roc.png")]  # written atomically


def test_roc_png_draws_the_reports_roc_data_for_the_main_attacks(run_dir):
    from topicaudit.reports.collect import read_run
    from topicaudit.reports.figures import roc_data

    data = roc_data(read_run(run_dir), list(MAIN_ATTACKS))
    for name, (fpr, tpr) in roc_points(run_dir).items():
        np.testing.assert_array_equal(data["curves"][name][0], fpr)
        np.testing.assert_array_equal(data["curves"][name][1], tpr)
