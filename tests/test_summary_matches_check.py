"""The run summary prints the very bound and ceiling that `check` computes (one code path)."""
import json
import re

import pytest

from topicaudit.cli.main import main

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

CONFIG = """
[synthetic]
n_docs = 300
n_words = 800
[target]
k = 4
[attack]
shadows = 2
[attack.canaries]
count = 100
[ray]
num_cpus = 2
"""


def test_summary_bound_and_ceiling_equal_checks(tmp_path, capsys):
    config = tmp_path / "audit.toml"
    config.write_text(CONFIG)
    out = tmp_path / "run"
    assert main(["run", str(config), "--output", str(out)]) == 0
    summary = capsys.readouterr().out
    found = re.search(r"empirical ε ≥ ([0-9.]+) \(([^;]+);.*can prove at most ([0-9.]+)", summary)
    assert found, summary
    assert "no claim tested here" in summary  # plain LDA claims nothing
    assert main(["check", str(out), "--epsilon", "3"]) in (0, 1)
    check = json.loads((out / "check.json").read_text())
    assert float(found.group(1)) == round(check["epsilon_lower_bound"], 3)
    assert found.group(2) == check["strongest_attack"]
    assert float(found.group(3)) == round(check["ceiling"], 2)
    assert any(name.startswith("natural/") for name in check["bounds"])  # both experiments, α split over both
    assert any(name.startswith("canaries/") for name in check["bounds"])


def test_a_run_whose_bound_no_test_can_state_still_finishes(tmp_path, capsys):
    """Word canaries on a target with no word-level claim: the audit succeeds, the summary says why no bound."""
    config = tmp_path / "word.toml"
    config.write_text("[synthetic]\nn_docs = 200\nn_words = 500\n[target]\nk = 3\n[attack]\nshadows = 0\n"
                      "[attack.canaries]\ncount = 60\nkind = \"word\"\n")
    assert main(["run", str(config), "--output", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "no ε bound:" in out and "word canaries" in out


def test_one_run_has_one_epsilon_everywhere(tmp_path, capsys):
    """results.json's verdict, the summary, `check`, the API, the report's card and ledger and a sweep's table
    give the same ε for the run's own claim (a run with shadows and canaries together, a DP learner)."""
    import topicaudit
    from topicaudit.engine.sweep import verdict_epsilon
    from topicaudit.reports.collect import collect
    from topicaudit.reports.ledger import ledger_rows
    from topicaudit.reports.verdict import run_verdict

    config = tmp_path / "audit.toml"
    config.write_text(CONFIG.replace("k = 4", "k = 4\nlearner = \"dp-cgs\"\nvocabulary = \"all\"\n"
                                                "params = {epsilon = 3.0, n_iter = 20}"))
    out = tmp_path / "run"
    assert main(["run", str(config), "--output", str(out)]) == 0
    summary = capsys.readouterr().out
    stored = json.loads((out / "results.json").read_text())["verdict"]
    assert stored["claim_tested"] and stored["claimed_epsilon"] == 3
    assert any(name.startswith("natural/") for name in stored["bounds"])
    assert any(name.startswith("canaries/mechanism") for name in stored["bounds"])
    assert any(name.startswith("canaries-release/") for name in stored["bounds"])  # Φ is held to the claim too
    eps = stored["epsilon_lower_bound"]
    assert f"empirical ε ≥ {eps:.3f} ({stored['strongest_attack']};" in summary
    assert main(["check", str(out)]) in (0, 1)
    assert f"proves ε ≥ {eps:.3f}" in capsys.readouterr().out
    api = topicaudit.check(out)
    assert api.epsilon_lower_bound == eps and api.verdict == stored["verdict"] and api.power == stored["power"]
    run = collect([out]).runs[0]
    card = run_verdict(run)
    assert card.status == stored["verdict"] and f"ε ≥ {eps:.2f}" in card.headline
    assert ledger_rows(collect([out]))[0]["eps_lb"] == eps
    assert verdict_epsilon(json.loads((out / "results.json").read_text())) == eps
