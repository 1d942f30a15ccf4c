"""Hostile pass XVII, helper i (tests/hostile_xvii_i_cases.md): forged and crash-born verdicts.

Each test failed before its fix: the report's verdict card tested a recorded claim with the default attacks, not the
ones the check was given (CONSISTENT on the card where the run's check.json said VIOLATED); the learner conformance
suite passed a learner whose claim changed between calls or with a fit (read as "no claim", nothing tested).
"""
from __future__ import annotations

import itertools
import json
import shutil

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import check_run
from topicaudit.learner_checks import check_learner
from topicaudit.reports.build import build_report
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.privacy.guarantee import Guarantee

ONE = Guarantee(epsilon=1.0, delta=0.0, adjacency="document", basis="paper-claim", parameters={"learner": "x"})


def _card(report_dir) -> str:
    """The verdict card's first word (VIOLATED, CONSISTENT, …) from report.md's headline."""
    line = next(line for line in (report_dir / "report.md").read_text().splitlines() if line.startswith("> "))
    return line[2:].split(":")[0]


def test_the_report_card_tests_a_recorded_claim_with_the_checks_attacks(finished_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(finished_run[0].run_dir, run)
    names = [n for n in json.loads((run / "results.json").read_text())["attacks"]]
    default = check_run(run, epsilon=0.0).epsilon_lower_bound
    # one attack: α split over fewer tests, so a larger bound; a claim between the two tells them apart
    attack, one = max(((a, check_run(run, epsilon=0.0, attacks=[a]).epsilon_lower_bound) for a in names),
                      key=lambda pair: pair[1])
    assert one > default
    claim = (one + default) / 2
    code = main(["check", str(run), "--epsilon", repr(claim), "--attack", attack])
    assert code == 1 and capsys.readouterr().out.startswith("VIOLATED")
    assert json.loads((run / "check.json").read_text())["attacks"] == [attack]
    build_report(run, tmp_path / "report")
    assert _card(tmp_path / "report") == "VIOLATED"  # was CONSISTENT: the default attacks' bound


CALLS = itertools.count()


class Alternating(VariationalLDA):
    """Claims ε = 1 on every other call, nothing in between (a counter shared by every copy)."""

    def guarantee(self):
        return ONE if next(CALLS) % 2 == 0 else Guarantee()


class ClaimsOnceFitted(VariationalLDA):
    """Noiseless, and claims ε = 1 only once fitted: the suite's checks each take an unfitted copy."""

    fitted = False

    def fit(self, X, seed):
        self.fitted = True
        return super().fit(X, seed)

    def guarantee(self):
        return ONE if self.fitted else Guarantee()


@pytest.mark.parametrize("learner", [Alternating, ClaimsOnceFitted], ids=["alternating", "once-fitted"])
def test_a_claim_that_changes_between_calls_or_with_a_fit_fails_the_suite(learner):
    with pytest.raises(AssertionError, match="guarantee"):  # each passed every check (the canary audit saw no claim)
        check_learner(learner(k=3, max_iter=20))
