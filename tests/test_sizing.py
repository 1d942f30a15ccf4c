"""A gate sized for its power: `check CONFIG --canaries auto` chooses the count from the verdict's own power
simulation, says why, and says when the budget cannot reach the power; a CONSISTENT short of 95% names the count
that would reach it. Canary-only DP-CGS audits of a small synthetic corpus (no Ray) keep these to seconds."""
from __future__ import annotations

import json
import time

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy, check_run
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.sizing import Sizing, _fit_time, parse_budget, size_canaries
from topicaudit.engine.power import nice_count
from topicaudit.errors import UserError

DP_CGS = {"synthetic": {"n_docs": 200, "n_words": 300}, "target": {"learner": "dp-cgs", "k": 3, "vocabulary": "all"},
          "attack": {"shadows": 0}}
TOML = ("[synthetic]\nn_docs = 200\nn_words = 300\n[target]\nlearner = \"dp-cgs\"\nk = 3\nvocabulary = \"all\"\n"
        "[attack]\nshadows = 0\n")


@pytest.fixture(scope="module")
def sized():
    return size_canaries(config_from_dict(DP_CGS), budget=None)


def test_the_count_chosen_is_a_margin_over_the_fewest_whose_simulated_power_reaches_95_percent(sized):
    assert sized.reached and sized.count == sized.needed
    tried = {int(m): p for m, (p, _) in sized.tried.items()}
    assert tried[sized.count] == sized.power
    first = min(m for m, p in tried.items() if p >= 0.95)
    assert all(p < 0.95 for m, p in tried.items() if m < first)  # every smaller count tried falls short
    assert sized.count == nice_count(2 * first)
    assert "2× the fewest whose simulated power" in sized.message() and f"{sized.count:,}" in sized.message()
    assert "Fit time estimated from fits of" in sized.message() and "× (tokens / " in sized.message()


def test_the_run_at_that_count_states_the_same_power(sized, tmp_path):
    """The sizing simulates the design the verdict will simulate: same mechanism, tests and share of α."""
    result = assert_privacy(DP_CGS, canaries=sized.count, output=tmp_path / "run")
    assert result.power["2x"] == sized.power
    assert result.canaries_for_power is None  # 95% reached: nothing to suggest


def test_a_budget_that_cannot_reach_the_power_says_so_and_names_the_count_that_would(tmp_path, capsys):
    config = tmp_path / "dp.toml"
    config.write_text(TOML)
    code = main(["check", str(config), "--canaries", "auto", "--budget", "0.001", "--cache", str(tmp_path / "c"),
                 "--json", str(tmp_path / "check.json")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "the budget cannot reach the power asked for" in err and "raise --budget" in err
    sizing = Sizing.from_json(json.loads((tmp_path / "check.json").read_text())["sizing"])
    assert not sizing.reached and sizing.needed is not None and sizing.count < sizing.needed
    assert f"{sizing.needed:,} canaries would reach it" in err
    # the verdict itself then names the count that reaches 95%
    out = json.loads((tmp_path / "check.json").read_text())
    assert out["canaries_for_power"]["count"] >= sizing.count


def test_a_consistent_verdict_short_of_95_percent_names_the_count_that_would_reach_it(tmp_path):
    assert_privacy(DP_CGS, canaries=250, output=tmp_path / "run")
    result = check_run(tmp_path / "run")
    assert result.power["2x"] < 0.95
    needed = result.canaries_for_power
    assert needed["count"] > 250 and needed["simulated"] >= 0.95
    assert f"({needed['count']:,} canaries would reach 95%: --canaries {needed['count']}, or --canaries auto)" \
        in result.message()


def test_the_sizing_is_kept_with_the_cache_and_read_back(tmp_path):
    root = tmp_path / "cache"
    first = size_canaries(config_from_dict(DP_CGS), budget=60, cache_root=root)
    again = size_canaries(config_from_dict(DP_CGS), budget=60, cache_root=root)
    assert again.count == first.count and again.kept and "as sized before" in again.message()
    other = size_canaries(config_from_dict(DP_CGS), power=0.5, budget=60, cache_root=root)
    assert other.kept is None and other.count <= first.count


@pytest.mark.parametrize("argv, message", [
    (["--power", "0.9"], "give them with --canaries auto"),
    (["--canaries", "auto", "--power", "1.5"], "--power must be a share strictly between 0 and 1"),
    (["--canaries", "auto", "--budget", "soon"], "--budget 'soon': give seconds"),
    (["--canaries", "auto", "--budget", "-3"], "--budget must be a positive time"),
])
def test_bad_sizing_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    config = tmp_path / "dp.toml"
    config.write_text(TOML)
    assert main(["check", str(config), *argv, "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) <= 2, err  # argparse adds its usage line


def test_a_count_that_is_neither_a_number_nor_auto_is_an_argument_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["check", str(tmp_path / "dp.toml"), "--canaries", "many"])
    assert stopped.value.code == 2 and "give a number of canaries or auto (got 'many')" in capsys.readouterr().err


def test_a_learner_without_a_mechanism_cannot_be_sized(tmp_path, capsys):
    config = tmp_path / "lda.toml"
    config.write_text("[synthetic]\nn_docs = 200\nn_words = 300\n[target]\nk = 3\n[attack]\nshadows = 0\n")
    assert main(["check", str(config), "--epsilon", "3", "--canaries", "auto", "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip()
    assert "records no mechanism" in err and "give --canaries M" in err and len(err.splitlines()) == 1


def test_budgets_read_as_seconds_minutes_and_hours():
    assert parse_budget("90") == 90 and parse_budget("5m") == 300 and parse_budget("1h") == 3600
    assert parse_budget(None) is None and parse_budget(2.5) == 2.5
    with pytest.raises(UserError):
        parse_budget("0")
    with pytest.raises(UserError, match="power and budget"):
        assert_privacy(DP_CGS, canaries=100, power=0.9)


class Sleeper:
    """A target whose fit takes a fixed time, or a time proportional to its tokens (sleeps: immune to load)."""

    def __init__(self, per_token: float, fixed: float):
        self.per_token, self.fixed = per_token, fixed

    def fit(self, X, seed):
        time.sleep(self.fixed + self.per_token * float(X.sum()))


def test_the_fit_time_follows_how_the_learners_cost_grows_with_its_tokens():
    """A cost set by steps (DP-SVI) is not scaled by tokens; a cost per token (DP-CGS's sweeps) is."""
    X = config_from_dict(DP_CGS)
    from topicaudit.engine.storage.run_corpus import load_audit_corpus
    corpus = load_audit_corpus(X)
    tokens = float(corpus.X.sum())
    steps, how = _fit_time(Sleeper(0.0, 0.05), corpus.X, 0)
    assert steps(100 * tokens) < 0.5, how  # not 100× the fit's time (5 s)
    sweeps, how = _fit_time(Sleeper(2e-5, 0.0), corpus.X, 0)
    assert 0.5 * 2e-5 * 100 * tokens <= sweeps(100 * tokens) <= 2 * 2e-5 * 100 * tokens, how


def test_a_release_measured_optimistic_is_said_beside_the_choice():
    sizing = Sizing(count=64000, power=1.0, target=0.95, budget=600, seconds=255, reached=True, needed=64000,
                    needed_seconds=255, fit_estimate="estimated", tried={"32000": [0.95, 130], "64000": [1.0, 255]},
                    caveat="DP-SVI … 17 of 20")
    assert "Caution: this release's simulated power has been measured above its audits' (DP-SVI … 17 of 20)" \
        in sizing.message()
    assert Sizing.from_json(sizing.to_json()).caveat == sizing.caveat


def test_without_a_budget_a_search_that_never_reaches_the_power_says_its_limits_came_first():
    sizing = Sizing(count=520000, power=0.0, target=0.95, budget=None, seconds=298, reached=False, needed=None,
                    needed_seconds=None, fit_estimate="estimated", tried={"260000": [0.0, 150], "520000": [0.0, 298]})
    message = sizing.message()
    assert "its limits came before the power asked for" in message and "more than 520,000" in message
