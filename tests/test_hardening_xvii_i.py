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


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    """A canary-only audit (lda, no shadows, no Ray): ε ≥ 2.2213…, its ceiling."""
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.run import execute_run
    config = config_from_dict({"seed": 0, "synthetic": {"n_docs": 200, "n_words": 300, "k": 3},
                               "target": {"learner": "lda", "k": 3},
                               "attack": {"shadows": 0, "canaries": {"count": 60}},
                               "output": str(tmp_path_factory.mktemp("xvii-i") / "run")})
    execute_run(config, quiet=True)
    return config


def test_a_verdict_line_never_prints_its_bound_on_the_wrong_side_of_the_claim(canary_run):
    bound = check_run(canary_run.run_dir, epsilon=0.0).epsilon_lower_bound
    for claim in (float(f"{bound:.4f}") - 1e-4, float(f"{bound:.3f}")):  # just below the bound: VIOLATED
        line = check_run(canary_run.run_dir, epsilon=claim).message()
        shown, claimed = line.split("ε ≥ ")[1].split(" ")[0], line.split("claimed ε = ")[1].split(";")[0]
        assert line.startswith("VIOLATED") and float(shown) > float(claimed), line  # was "2.221 > … 2.2213"


def test_a_resume_refuses_a_config_toml_edited_since_the_run_wrote_it(canary_run, tmp_path):
    from topicaudit.engine.run import execute_run
    from topicaudit.errors import UserError
    run = tmp_path / "copy"
    shutil.copytree(canary_run.run_dir, run)
    text = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text.replace("seed = 0", "seed = 1", 1))
    config = canary_run.__class__(**{**canary_run.__dict__, "output": str(run)})
    with pytest.raises(UserError, match="config.toml"):  # resumed, rewrote results.json, left it refused by check
        execute_run(config, quiet=True)


MECHANISM_CALLS = itertools.count()


def test_a_declared_mechanism_that_changes_between_calls_fails_the_release_constants_check():
    from topicaudit.targets.learners.lp_lda import LocallyPrivateLDA
    from topicaudit.targets.mechanisms import RandomisedResponse

    class Moving(LocallyPrivateLDA):
        def mechanism(self):  # the claimed randomiser, then one keeping 99% of the bits
            return RandomisedResponse(self.keep_probability if next(MECHANISM_CALLS) % 2 == 0 else 0.99)

    with pytest.raises(AssertionError, match="mechanism"):  # passed: the check read one call's answer
        check_learner(Moving(k=3, epsilon=1.0, n_iter=20), checks=["release constants"])
