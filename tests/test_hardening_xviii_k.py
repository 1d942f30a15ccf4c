"""Hostile pass XVIII, helper k (tests/hostile_xviii_k_cases.md): forged and crash-born verdicts."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.cli.main import main
from topicaudit.learner_checks import check_learner
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.learners.pipeline import Pipeline
from topicaudit.targets.privacy.guarantee import Guarantee

ONE = Guarantee(epsilon=1.0, delta=0.0, adjacency="document", basis="paper-claim", parameters={"learner": "x"})


class AssertsOnLargeCorpora(VariationalLDA):
    """Claims ε = 1; its fit's own `assert` fails on the canary audit's corpus (more than 150 documents)."""

    def fit(self, X, seed):
        assert X.shape[0] <= 150, "the learner's own assert"
        return super().fit(X, seed)

    def guarantee(self):
        return ONE


def test_a_learners_own_assertion_in_fit_is_no_finding_of_the_canary_audit():
    # It read "fails the 'canary audit' check: the learner's own assert": a refuted claim where no audit finished.
    with pytest.raises(AssertionError, match="canary audit") as raised:
        check_learner(AssertsOnLargeCorpora(k=3, max_iter=5), checks=("canary audit",))
    assert "not this check" in str(raised.value) and "no finding" in str(raised.value)


def test_the_canary_audits_own_finding_still_reads_as_one():
    with pytest.raises(AssertionError, match="prove") as raised:  # noiseless, claims ε = 1: refuted
        check_learner(type("Noiseless", (VariationalLDA,), {"guarantee": lambda self: ONE})(k=3, max_iter=20),
                      checks=("canary audit",))
    assert "not this check" not in str(raised.value)


class Mask:
    """A vocabulary step returning a boolean mask of the words it keeps, not their ids."""

    name = "mask"

    def select(self, X, seed):
        return np.bincount(X.indices, minlength=X.shape[1]) > 0

    def guarantee(self):
        return Guarantee()


@pytest.mark.parametrize("selection", [
    lambda v, n: v > -1,  # a boolean mask: read as ids (column 1, n times), audited NO SIGNAL, exit 0
    lambda v, n: v[::-1].copy(), lambda v, n: np.concatenate([v, v[:5]]), lambda v, n: v + 0.5,
    lambda v, n: v - n, lambda v, n: np.append(v, n + 5), lambda v, n: v.reshape(1, -1)],
    ids=["mask", "unsorted", "repeated", "floats", "negative", "past the corpus", "2-D"])
def test_a_vocabulary_selection_the_release_cannot_hold_is_refused_naming_the_step(selection):
    X = sp.random(30, 20, density=0.3, format="csr", random_state=0) * 10
    step = type("Lying", (), {"name": "lying", "select": lambda self, X, seed: selection(np.arange(X.shape[1]),
                                                                                           X.shape[1]),
                              "guarantee": lambda self: Guarantee()})()
    with pytest.raises(ValueError, match="vocabulary step"):
        Pipeline(step, VariationalLDA(k=2, max_iter=2), Guarantee()).fit(X.tocsr(), 0)


def test_a_run_whose_step_returns_a_mask_is_refused(tmp_path, capsys):
    import sys
    (tmp_path / "maskstep.py").write_text("from tests_mask import *\n")
    sys.modules["tests_mask"] = sys.modules[__name__]
    sys.path.insert(0, str(tmp_path))
    try:
        code = main(["check", _config(tmp_path, 'vocabulary = "maskstep:Mask"'), "--epsilon", "0.01",
                     "--output", str(tmp_path / "run")])
    finally:
        sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err  # was 0: NO SIGNAL on column 1 × 300
    assert code == 2 and "vocabulary step (Mask)" in err and "the learner" not in err


def _config(tmp_path, line: str) -> str:
    path = tmp_path / "c.toml"
    path.write_text("seed = 0\n[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nlearner = \"lda\"\n"
                    f"{line}\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    return str(path)


def test_a_sweep_whose_replicates_were_swapped_is_refused_by_report(tmp_path, capsys):
    config, sweep = _config(tmp_path, 'vocabulary = "observed"'), tmp_path / "sweep"
    assert main(["sweep", config, "--param", "attack.canaries.count", "--values", "20,60", "--output", str(sweep),
                 "--quiet"]) == 0
    (sweep / "count=20/rep-0").rename(sweep / "moved")
    (sweep / "count=60/rep-0").rename(sweep / "count=20/rep-0")
    (sweep / "moved").rename(sweep / "count=60/rep-0")
    capsys.readouterr()
    # was 0: grouped under the index's values, the ledger listed count=60's ε under count=20 and the reverse
    assert main(["report", str(sweep), "-o", str(tmp_path / "report")]) == 2
    assert "attack.canaries.count = 60, not 20" in capsys.readouterr().err


def test_a_recorded_check_the_card_cannot_repeat_is_said(tmp_path, monkeypatch):
    import topicaudit.reports.verdict as verdict
    from topicaudit.errors import UserError
    from topicaudit.reports.collect import read_run

    run = tmp_path / "run"
    assert main(["check", _config(tmp_path, 'vocabulary = "observed"'), "--epsilon", "0.01", "--output",
                 str(run)]) == 1

    def cannot(*args, **kwargs):  # e.g. check.json's `attacks` names one the run has no scores of
        raise UserError("--attack bogus: the run has no scores of that attack")

    monkeypatch.setattr(verdict, "check_run", cannot)
    with pytest.warns(UserWarning, match="cannot repeat"):  # was silent: the card went to the target's claim
        verdict.run_verdict(read_run(run))
