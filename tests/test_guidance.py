"""What an audit's figures mean and what to do next: the run summary, `check` and the report say the same.

A bound at its ceiling, a claim above the ceiling and a mechanism audit short of 95% power each get a next
step with the canary count that would lift it; the recommended attack is marked wherever attacks are listed.
"""
import json
import re
from pathlib import Path

import pytest

from topicaudit.attacks.registry import recommended_attack
from topicaudit.bounds.epsilon import EpsilonBound, Method
from topicaudit.cli.main import main
from topicaudit.engine.presentation.guidance import figure_meanings, next_steps
from topicaudit.engine.storage.check_result import CheckResult
from topicaudit.engine.presentation.summary import summary_table
from topicaudit.engine.power import CEILING_FACTOR, canaries_for_ceiling, canary_ceiling
from topicaudit.reports.build import build_report

# A canary-only audit of the non-private learner (one fit, no Ray): its canaries separate perfectly, so the
# bound is the ceiling of 100 canaries.
SATURATED = ("[synthetic]\nn_docs = 200\nn_words = 400\n[target]\nk = 3\n[attack]\nshadows = 0\n"
             "[attack.canaries]\ncount = 100\n")


# -- the count that lifts a ceiling ---------------------------------------------------------------------------
def test_a_bound_at_its_ceiling_is_told_what_four_times_the_canaries_would_prove():
    ceiling = canary_ceiling(100, 1e-5, 0.01)
    advice = canaries_for_ceiling(ceiling, ceiling, 0.0, 1e-5, 0.01, 100)
    assert advice == {"reason": "saturated", "count": CEILING_FACTOR * 100,
                      "ceiling": canary_ceiling(CEILING_FACTOR * 100, 1e-5, 0.01)}
    assert advice["ceiling"] > ceiling
    assert canaries_for_ceiling(ceiling * 0.9, ceiling, 0.0, 1e-5, 0.01, 100) is None  # below it: no advice


def test_a_claim_above_the_ceiling_gets_the_first_doubling_whose_ceiling_passes_it():
    ceiling = canary_ceiling(100, 1e-5, 0.01)
    advice = canaries_for_ceiling(0.5, ceiling, 5.0, 1e-5, 0.01, 100)
    assert advice["reason"] == "claim" and advice["count"] > 200
    assert advice["ceiling"] == canary_ceiling(advice["count"], 1e-5, 0.01) > 5.0
    assert canary_ceiling(advice["count"] // 2, 1e-5, 0.01) <= 5.0  # the doubling before it does not
    far = canaries_for_ceiling(0.5, ceiling, 50.0, 1e-5, 0.01, 100, limit=10_000)
    assert far["count"] is None and far["searched_to"] <= 10_000 and far["ceiling"] < 50
    assert canaries_for_ceiling(0.5, ceiling, 1.0, 1e-5, 0.01, 100) is None  # the ceiling passes the claim
    assert canaries_for_ceiling(1.5, 2.0, 1.0, 1e-5, 0.01, 100) is None  # refuted, below its ceiling


def _verdict(**changes) -> CheckResult:
    fields = {"run_dir": Path("runs/dp"), "claimed_epsilon": 1.0, "delta": 0.0, "alpha": 0.05,
              "bounds": {"canaries/mechanism:one-run": EpsilonBound(0.2, Method.ONE_RUN, 0.95, 0.0)},
              "ceiling": 2.6, "power": {"2x": 0.3, "10x": 1.0, "replicates": 20}}
    return CheckResult(**{**fields, **changes})


def test_a_powerless_mechanism_audit_is_told_how_many_canaries_reach_95_percent():
    found = _verdict(canaries_for_power={"power": 0.95, "count": 1600, "simulated": 0.95})
    [step] = next_steps(found, True)
    assert "30% of audits" in step and "1,600 canaries would reach 95%" in step and "--canaries 1600" in step
    [step] = next_steps(_verdict(), True)  # the run leaves the search to check: it says so
    assert "`topicaudit check runs/dp` names the canary count" in step
    searched = _verdict(canaries_for_power={"power": 0.95, "count": None, "searched_to": 1_024_000,
                                            "searched_power": 0.6})
    assert "stopped at 1,024,000 canaries (60% in simulation)" in next_steps(searched, True)[0]
    assert next_steps(_verdict(power={"2x": 0.96, "10x": 1.0, "replicates": 20}), True) == []
    assert next_steps(_verdict(), False) == []  # no claim tested: power against it means nothing


def test_figure_sentences_say_what_the_numbers_are():
    verdict = _verdict(bounds={"natural/lira_online:one-run": EpsilonBound(2.0, Method.ONE_RUN, 0.95, 1e-5)},
                       delta=1e-5, power=None)

    class Results:  # the fields figure_meanings reads, without a run
        attacks, canaries = {}, None
    meanings = dict(figure_meanings(Results(), verdict))
    assert "with 95% confidence, no privacy guarantee with ε below 2.00 (at δ = 1e-05)" in meanings["ε ≥ 2.00"]
    assert "e^2.00 ≈ 7.39" in meanings["ε ≥ 2.00"]
    assert "even if every guess were right" in meanings["ceiling ε = 2.60"]
    assert "ε ≥ 0" in dict(figure_meanings(Results(), _verdict(bounds={
        "canaries/zeta:one-run": EpsilonBound(0.0, Method.ONE_RUN, 0.95, 0.0)})))


# -- a run with shadow models: the recommended attack and its figures ----------------------------------------
def test_the_summary_marks_the_recommended_attack_and_explains_its_figures(finished_run):
    config, results = finished_run
    recommended = recommended_attack(results.n_shadows)
    summary = summary_table(results)
    marked = [line for line in summary.splitlines() if "← recommended" in line]
    assert len(marked) == 1 and marked[0].split()[0] == recommended
    assert f"← recommended for {results.n_shadows} shadow models" in marked[0]
    meanings = dict(figure_meanings(results))
    m, members = results.attacks[recommended], results.target.n_members
    tpr = next(text for figure, text in meanings.items() if figure.startswith("TPR "))
    assert f"TPR {100 * m.tpr_at_fpr_0_001:.2f}% at 0.1% FPR ({recommended}, the recommended attack)" in meanings
    assert f"(about {round(m.tpr_at_fpr_0_001 * members):,} of {members:,})" in tpr
    non_members = results.corpus.n_docs - members
    allowed = non_members // 1000
    assert (f"{allowed:,} of the {non_members:,} here" if allowed else f"with {non_members:,} here") in tpr
    assert f"{100 * m.auc:.1f}% of the time" in meanings[f"AUC {m.auc:.3f} ({recommended})"]


def test_the_report_marks_the_recommended_attack_in_its_table(finished_run, tmp_path):
    config, results = finished_run
    out = build_report(config.run_dir, tmp_path / "report")
    md = (out / "report.md").read_text()
    recommended = recommended_attack(results.n_shadows)
    header = "| attack | AUC | TPR@0.1%FPR | TPR@1%FPR | recommended |"
    assert header in md
    rows = [line for line in md.splitlines() if line.endswith(f"| yes, for {results.n_shadows} shadow models |")]
    assert len(rows) == 1 and rows[0].startswith(f"| {recommended.replace('_', chr(92) + '_')} |")
    assert "What the headline figures mean:" in md and "the recommended attack)**" in md


# -- a bound at its ceiling: summary, check and report agree ----------------------------------------------------
@pytest.fixture(scope="module")
def saturated_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("saturated")
    config = tmp / "audit.toml"
    config.write_text(SATURATED)
    return config, tmp / "run"


def test_a_saturated_audit_says_how_to_raise_its_ceiling_everywhere(saturated_run, capsys):
    config, run = saturated_run
    assert main(["run", str(config), "--output", str(run)]) == 0
    summary = capsys.readouterr().out
    lines = summary.splitlines()
    header = lines.index(next(line for line in lines if line.strip().startswith("canary score")))
    assert lines[header].split() == ["canary", "score", "AUC", "TPR@0.1%FPR", "TPR@1%FPR"]
    assert lines[header + 1].strip().startswith("canary zeta")  # the rows follow their header
    stored = json.loads((run / "results.json").read_text())["verdict"]
    advice = stored["canaries_for_ceiling"]
    assert advice["reason"] == "saturated" and advice["count"] == CEILING_FACTOR * 100
    assert stored["epsilon_lower_bound"] == pytest.approx(stored["ceiling"])
    step = next(line for line in lines if line.strip().startswith("next:"))
    assert f"{advice['count']:,} canaries would raise it to ε ≈ {advice['ceiling']:.2f}" in step
    assert f"--canaries {advice['count']}" in step

    # a claim above the ceiling: check names the count whose ceiling passes it, in its one line and its JSON
    assert main(["check", str(run), "--epsilon", "5"]) == 0
    line = capsys.readouterr().out
    claim = json.loads((run / "check.json").read_text())["canaries_for_ceiling"]
    assert claim["reason"] == "claim" and claim["ceiling"] > 5
    assert f"{claim['count']:,} canaries would raise it to ε ≈ {claim['ceiling']:.2f}, above the claim" in line
    assert re.search(rf"--canaries {claim['count']}\b", line)

    # the report's card (its claim now check's: ε = 5) gives the same step and explains the figures
    assert main(["report", str(run), "--quiet"]) == 0
    md = (run / "report" / "report.md").read_text()
    assert f"**next step**: no outcome of this audit could refute ε = 5" in md
    assert f"--canaries {claim['count']}" in md
    assert "**ceiling ε = " in md and "even if every guess were right" in md


# -- a powerless mechanism audit: the summary points to check, the report's card and check give the count ------
POWERLESS = ("[synthetic]\nn_docs = 200\nn_words = 400\n[target]\nlearner = \"dp-cgs\"\nk = 3\n[target.params]\n"
             "epsilon = 1.0\nn_iter = 5\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 100\n")


def test_a_powerless_audit_is_told_the_canaries_that_reach_95_percent_power(tmp_path, capsys):
    config, run = tmp_path / "dp.toml", tmp_path / "run"
    config.write_text(POWERLESS)
    assert main(["run", str(config), "--output", str(run)]) == 0
    step = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("next:"))
    assert "twice as leaky as claimed in only" in step and f"`topicaudit check {run}` names the canary count" in step
    assert main(["report", str(run), "--quiet"]) == 0
    md = (run / "report" / "report.md").read_text()
    assert main(["check", str(run)]) == 0
    needed = json.loads((run / "check.json").read_text())["canaries_for_power"]
    assert needed["count"] and needed["simulated"] >= 0.95
    assert f"{needed['count']:,} canaries would reach 95%: --canaries {needed['count']}" in capsys.readouterr().out
    assert (f"**next step**: this audit would catch a mechanism twice as leaky as claimed in only" in md
            and f"{needed['count']:,} canaries would reach 95% (--canaries {needed['count']}" in md)
    assert "**power " in md and "if the mechanism leaked twice as much as claimed" in md


@pytest.mark.slow  # reads the run the test above makes, which tests/slow_tests.txt marks slow
def test_the_cards_headline_names_the_count_too(saturated_run):
    """After the test above: the card's headline (claim ε = 5, check's) quantifies its remedy as check does."""
    from topicaudit.reports.collect import read_run
    from topicaudit.reports.verdict import run_verdict

    config, run = saturated_run
    claim = json.loads((run / "check.json").read_text())["canaries_for_ceiling"]
    card = run_verdict(read_run(run))
    assert card.status == "CONSISTENT"
    assert f"(its ceiling is ε = " in card.headline and f"--canaries {claim['count']}" in card.headline
