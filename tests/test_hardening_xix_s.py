"""Hostile pass XIX, helper s (tests/hostile_xix_s_cases.md): a closing pass on code the user hands in, and on
forged or crash-born verdicts.

- ``check_learner`` let a learner's ``SystemExit`` (or any BaseException of its own) out of the checks that call its
  ``fit`` or ``guarantee()`` directly (``phi``, ``same seed``, ``pickle``, ``guarantee``, …): a script running the
  conformance suite ended with exit 0 when the learner called ``sys.exit(0)``, read as a pass, although no check
  had finished. Now it is ``CheckDidNotFinish``, as a crash in any check; KeyboardInterrupt stays an interrupt.
- ``topicaudit.run(config, learner=...)`` (and every API call but ``assert_privacy``, which said it already) let a
  learner's ``sys.exit(0)`` in its ``guarantee()`` or its pickling out: the script ended 0 with no result. The API's
  boundary now makes it a RuntimeError saying it is no result and no verdict.
- An installed plug-in module's helper module of the same distribution (``py_modules=["leakxs", "leakxs_noise"]``)
  lies beside it in site-packages, where nothing beside is digested: the helper edited and reinstalled at the same
  version reused the cached run of the code before the edit (NO SIGNAL where the edited code gave VIOLATED). The
  digest now covers every code file the distribution lists (``plugin_code.with_distribution``).
- A check that the learner's code crashed (``CheckDidNotFinish``) said "fails the 'record used' check: it raised
  …", the words of a finding: docs/adding-a-learner.md's planted-bug test, ``pytest.raises(AssertionError,
  match="fails the 'record used' check")``, passed for a learner that crashed in that check, no check done. A crash
  now reads "the 'record used' check did not finish".
- The run cache's key held the versions of numpy, scipy, scikit-learn, numba and nltk, not of gensim or tomotopy,
  whose code ``gensim-lda`` and ``tomotopy-lda`` fit with: gensim upgraded (a copy with a changed ``get_topics``
  under another version) reused the cached run of the version before, NO SIGNAL where the installed gensim gave
  VIOLATED. The key now holds those (and dp-accounting's, which the claims come from).
"""
from __future__ import annotations

import os
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest

import topicaudit

from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.learner_checks import CheckDidNotFinish, CheckFailed
from topicaudit.process_state import kept_process_state
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.plugins import LEARNER_GROUP, source
from topicaudit.targets.privacy.guarantee import Guarantee
from topicaudit.testing import check_learner


class _OwnBase(BaseException):
    """A BaseException of the learner's own, not an Exception."""


class Exits(VariationalLDA):
    """Claims ε = 1; its fit or its guarantee() raises what ``how`` names."""

    def __init__(self, k: int, how: str = "fit-exit0", **params):
        super().__init__(k, **params)
        self.how = how

    def get_params(self) -> dict:
        return {**super().get_params(), "how": self.how}

    def fit(self, X, seed, record=None):
        if self.how == "fit-exit0":
            sys.exit(0)
        if self.how == "fit-base":
            raise _OwnBase("the learner's own")
        if self.how == "fit-interrupt":
            raise KeyboardInterrupt
        if self.how == "fit-raise":
            raise RuntimeError("CUDA out of memory")
        if self.how == "fit-assert":
            raise AssertionError("the learner's own")
        return super().fit(X, seed)

    def guarantee(self) -> Guarantee:
        if self.how == "guarantee-exit0":
            sys.exit(0)
        return Guarantee(epsilon=1.0, delta=1e-5, adjacency="document", basis="paper-claim")


@pytest.mark.parametrize("how, check", [("fit-exit0", "phi"), ("fit-exit0", "same seed"), ("fit-exit0", "pickle"),
                                        ("fit-base", "phi"), ("guarantee-exit0", "guarantee")])
def test_a_learners_exit_is_no_pass_of_the_conformance_suite(how, check):
    """A learner's sys.exit(0) in a check that calls it directly left check_learner: a script's check ended 0."""
    with pytest.raises(CheckDidNotFinish) as raised:
        check_learner(Exits(k=3, how=how), (check,))
    assert not isinstance(raised.value, CheckFailed)
    assert check in str(raised.value) and "no finding" in str(raised.value)


def test_an_interrupt_in_the_learner_stays_an_interrupt():
    with pytest.raises(KeyboardInterrupt):
        check_learner(Exits(k=3, how="fit-interrupt"), ("phi",))


SMALL = {"synthetic": {"n_docs": 60, "n_words": 80, "k": 3}, "target": {"k": 3},
         "attack": {"shadows": 0, "canaries": {"count": 10}}}


def test_a_learners_exit_in_the_api_is_no_result(tmp_path, monkeypatch):
    """topicaudit.run with a learner whose guarantee() called sys.exit(0): the script ended 0, no result."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match=r"sys\.exit\(0\).*no result"):
        topicaudit.run(SMALL, learner=Exits(k=3, how="guarantee-exit0"))


def _installed_two_module_distribution(site: Path) -> Path:
    """``leakxs`` 0.1.0 as pip installs it into ``site`` (a folder named site-packages): two top-level modules."""
    site.mkdir(parents=True)
    (site / "leakxs.py").write_text("import leakxs_noise\nfrom topicaudit.targets.learners.lda import VariationalLDA"
                                    "\nclass Leak(VariationalLDA):\n    pass\n")
    (site / "leakxs_noise.py").write_text('MODE = "uniform"\n')
    info = site / "leakxs-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: leakxs\nVersion: 0.1.0\n")
    (info / "top_level.txt").write_text("leakxs\nleakxs_noise\n")
    (info / "RECORD").write_text("leakxs.py,,\nleakxs_noise.py,,\nleakxs-0.1.0.dist-info/METADATA,,\n")
    return site / "leakxs_noise.py"


def test_an_installed_plug_ins_helper_module_is_in_its_digest(tmp_path, monkeypatch):
    """The helper edited and reinstalled at the same version: the same source_sha256, so the cached run was reused."""
    helper = _installed_two_module_distribution(tmp_path / "site-packages")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    before = source("leakxs:Leak", LEARNER_GROUP)
    helper.write_text('MODE = "real"\n')
    after = source("leakxs:Leak", LEARNER_GROUP)
    assert before["distribution"] == after["distribution"] == "leakxs" and after["version"] == "0.1.0"
    assert before["source_sha256"] != after["source_sha256"]


@pytest.mark.parametrize("how, check", [("fit-raise", "phi"), ("fit-assert", "phi"), ("fit-raise", "canary audit")])
def test_a_crash_never_reads_as_a_checks_finding(how, check):
    """The documented planted-bug test matched "fails the '<check>' check", which a crash in that check said too."""
    with pytest.raises(CheckDidNotFinish) as raised:
        check_learner(Exits(k=3, how=how), (check,))
    assert f"fails the {check!r} check" not in str(raised.value)
    assert f"the {check!r} check did not finish" in str(raised.value)


@pytest.mark.parametrize("learner, library", [("gensim-lda", "gensim"), ("tomotopy-lda", "tomotopy"),
                                              ("lda", "dp-accounting")])
def test_an_upgrade_of_the_library_a_learner_fits_with_is_another_cache_entry(tmp_path, monkeypatch, learner,
                                                                               library):
    """gensim upgraded under the cache: the entry of the version before was reused (its verdict, not this one's)."""
    config = config_from_dict({**SMALL, "target": {"k": 3, "learner": learner}})
    before = cached_run_dir(config, tmp_path)
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "999.0" if name == library else real(name))
    assert cached_run_dir(config, tmp_path) != before


@pytest.mark.parametrize("action", ["error", "ignore"])
def test_a_fits_warnings_filter_is_put_back_before_topicaudits_note(tmp_path, monkeypatch, action):
    """PS3/PS4: a fit's simplefilter("error") turned topicaudit's note (the working directory put back) into an
    exception, exit 3 blamed on topicaudit; its simplefilter("ignore") hid the note."""
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        with kept_process_state("the fit of XS"):
            warnings.simplefilter(action)
            os.chdir("/")
        assert warnings.filters == before and os.getcwd() == str(tmp_path)
    notes = [str(w.message) for w in seen if "the fit of XS" in str(w.message)]
    assert len(notes) == 1 and "working directory" in notes[0]


def test_a_fit_that_only_silences_a_librarys_warnings_is_put_back_without_a_note():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        with kept_process_state("the fit of XS"):
            warnings.filterwarnings("ignore", category=DeprecationWarning)
        assert warnings.filters == before
    assert not [w for w in seen if "the fit of XS" in str(w.message)]
