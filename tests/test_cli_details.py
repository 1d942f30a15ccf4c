"""Small things a new user meets: --version, notes that are theirs, honest timings and wording."""
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.cli.main import _show_note, main
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.execution.tasks import fit_release, recorded_warnings
from topicaudit.engine.audit_inputs import settings_line
from topicaudit.errors import UserError
from topicaudit.targets.base import Release
from topicaudit.version import __version__


def test_version_flag_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"topicaudit {__version__}"


def test_a_library_deprecation_is_not_relayed_as_a_note(capsys):
    _show_note("the old name is deprecated", DeprecationWarning, "tomotopy.py", 1)
    _show_note("a line of the corpus is empty", UserWarning, "corpus.py", 1)
    err = capsys.readouterr().err
    assert "deprecated" not in err and "topicaudit: note: a line of the corpus is empty" in err


def test_worker_warnings_leave_out_deprecations():
    with recorded_warnings() as messages:
        warnings.warn("old API", DeprecationWarning)
        warnings.warn("ζ not certified", RuntimeWarning)
    assert messages == ["RuntimeWarning: ζ not certified"]


class _Sleeper:
    """A learner that waits instead of computing: wall time without CPU time."""

    def fit(self, X, seed, vocabulary):
        time.sleep(0.4)
        return Release(np.full((1, X.shape[1]), 1 / X.shape[1], dtype=np.float32), np.arange(X.shape[1]))


def test_fit_seconds_are_cpu_time_not_wall_time():
    X = sp.csr_matrix(np.ones((3, 4)))
    _, seconds, _, _, _ = fit_release(_Sleeper(), X, np.arange(3), 0, None)
    assert seconds < 0.2  # it slept 0.4 s of wall time


def test_shadow_settings_never_say_defaults_twice():
    assert settings_line("the learner's defaults", {}) == "shadow settings: the learner's defaults"
    assert settings_line("--param", {"alpha": 0.1}) == "shadow settings (--param): alpha=0.1"


def test_a_run_directory_error_names_the_setting_and_the_flag(tmp_path):
    (tmp_path / "stray.txt").write_text("x")
    with pytest.raises(UserError, match=r"choose another output \(--output\)"):
        RunDirectory(tmp_path).check_compatible("abc")
