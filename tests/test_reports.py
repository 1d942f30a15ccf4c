import numpy as np
import pytest

from topicaudit.attacks.metrics import roc_curve
from topicaudit.engine.config import config_from_dict
from topicaudit.engine.roc_figure import MAIN_ATTACKS
from topicaudit.engine.run import run_audit
from topicaudit.engine.rundir import read_arrays
from topicaudit.reports.collect import read_run
from topicaudit.reports.figures import roc_data


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports") / "run"
    run_audit(config_from_dict({"synthetic": {"n_docs": 200, "n_words": 600}, "attack": {"shadows": 4},
                                "target": {"k": 3}, "ray": {"num_cpus": 1}, "output": str(out)}), quiet=True)
    return out


def test_the_run_itself_leaves_roc_png(run_dir):
    """The engine draws roc.png (not the command line), so ``topicaudit.run()`` leaves one too."""
    path = run_dir / "roc.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".roc.png")]  # written atomically


def test_roc_png_draws_the_stored_scores_of_the_main_attacks(run_dir):
    data = roc_data(read_run(run_dir), list(MAIN_ATTACKS))
    scores = read_arrays(run_dir / "scores.npz")
    assert set(data["curves"]) == set(MAIN_ATTACKS)
    for name, (fpr, tpr) in data["curves"].items():
        want_fpr, want_tpr, _ = roc_curve(scores[name], scores["is_member"])
        np.testing.assert_array_equal(fpr, want_fpr)
        np.testing.assert_array_equal(tpr, want_tpr)
