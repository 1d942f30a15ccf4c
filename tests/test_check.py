"""`topicaudit check` and assert_privacy: exit 0 consistent, 1 violated, 2 error; JSON and JUnit written."""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from topicaudit.engine.check import assert_privacy, check_run
from topicaudit.cli.main import main
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

# A canary-only audit: one fit, no Ray, a few seconds; the non-private learner is refuted at small ε.
CANARY_ONLY = {"synthetic": {"n_docs": 200, "n_words": 300}, "target": {"k": 3},
               "attack": {"shadows": 0, "canaries": {"count": 100}}}
# A claim these small audits never refute: above their ceilings (no outcome of 100 canaries proves more than
# ε ≈ 2.8, none of the session's small run's 300 documents more than ≈ 3.9), and near them, so the verdict's search
# for a count whose ceiling passes the claim stops at a few thousand (ε = 50, 100 or 1000 searched to 600,000 and
# 800,000, 5-7 CPU-s each).
GENEROUS = 5


@pytest.fixture
def run_dir(finished_run):
    """The session's finished small audit (tests/conftest.py): checking it only adds check.json and its JUnit file."""
    return finished_run[0].run_dir


def test_results_record_a_one_run_epsilon_lower_bound(run_dir):
    bounds = json.loads((run_dir / "results.json").read_text())["epsilon_lower_bounds"]
    assert bounds["method"] == "one-run" and bounds["confidence"] == 0.95 and bounds["delta"] == 1e-5
    assert bounds["epsilon"] == max(b["epsilon"] for b in bounds["by_attack"].values())
    # the non-private synthetic model leaks: something is proven
    assert bounds["epsilon"] > 0.5


def test_a_claim_below_the_bound_is_violated(run_dir, capsys, tmp_path):
    bound = check_run(run_dir, epsilon=GENEROUS).epsilon_lower_bound
    claim = bound / 2
    code = main(["check", str(run_dir), "--epsilon", str(claim), "--json", str(tmp_path / "v.json"),
                 "--junit", str(tmp_path / "v.xml")])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("VIOLATED") and f"{bound:.3f}" in out
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["violated"] is True and verdict["claimed_epsilon"] == claim
    suite = ET.parse(tmp_path / "v.xml").getroot()
    assert suite.get("failures") == "1" and suite.find("testcase/failure") is not None


def test_a_generous_claim_is_consistent(run_dir, capsys):
    assert main(["check", str(run_dir), "--epsilon", str(GENEROUS)]) == 0
    assert capsys.readouterr().out.startswith("CONSISTENT")
    suite = ET.parse(run_dir / "check.junit.xml").getroot()
    assert suite.get("failures") == "0" and suite.find("testcase/failure") is None
    assert json.loads((run_dir / "check.json").read_text())["violated"] is False


@pytest.mark.parametrize("args, message", [
    ([], "claims no ε"),
    (["--epsilon", "-1"], "--epsilon"),
    (["--epsilon", "1", "--alpha", "2"], "--alpha"),
])
def test_bad_check_input_exits_2(run_dir, capsys, args, message):
    assert main(["check", str(run_dir), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_checking_something_that_is_not_a_run_exits_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty"), "--epsilon", "1"]) == 2
    assert "not a finished topicaudit run" in capsys.readouterr().err


def test_assert_privacy_raises_with_the_refuting_bound(tmp_path):
    config = {**CANARY_ONLY, "output": str(tmp_path / "run")}
    assert assert_privacy(config, epsilon=GENEROUS).violated is False
    with pytest.raises(AssertionError, match="VIOLATED"):
        assert_privacy(config, epsilon=0.1)  # the same configuration: resumes, refits nothing


def test_assert_privacy_fails_a_violated_claim_under_python_O(tmp_path):
    """``python -O`` strips assert statements; assert_privacy must still raise (a canary-only audit: no Ray)."""
    script = f"""
import sys
from topicaudit.engine.check import assert_privacy
assert sys.flags.optimize == 0, "unreachable: -O strips this"
config = {{**{CANARY_ONLY!r}, "output": {str(tmp_path / "run")!r}}}
try:
    assert_privacy(config, epsilon=0.01, delta=0)
except AssertionError as error:
    print("raised", sys.flags.optimize, str(error).splitlines()[0])
else:
    print("returned", sys.flags.optimize)
"""
    done = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("raised 1 VIOLATED"), done.stdout


def test_the_pytest_fixture_is_installed(assert_privacy):
    assert assert_privacy(dict(CANARY_ONLY), epsilon=GENEROUS).claimed_epsilon == GENEROUS  # in a fresh directory


def test_a_dp_target_checked_against_its_own_claim_is_consistent(tmp_path, capsys, small_settings):
    """DP-CGS at ε = 2 on a public vocabulary: its own claim, read from results.json, stands."""
    out = tmp_path / "dp"
    config = {**small_settings, "output": str(out), "attack": {"shadows": 2},  # two shadows suffice for a verdict
              "target": {"k": 4, "learner": "dp-cgs", "vocabulary": "all", "params": {"epsilon": 2.0}}}
    results = execute_run(config_from_dict(config), quiet=True)
    assert results["target"]["guarantee"]["epsilon"] == 2.0
    assert main(["check", str(out)]) == 0
    # LiRA on natural documents cannot tell this learner's members apart: not refuted, and said to be no signal
    assert capsys.readouterr().out.startswith(("CONSISTENT", "NO SIGNAL"))
    verdict = json.loads((out / "check.json").read_text())
    assert verdict["claimed_epsilon"] == 2.0 and verdict["epsilon_lower_bound"] < 2.0 and not verdict["violated"]


def test_a_word_level_claim_is_not_held_against_a_document_audit(tmp_path, capsys, small_settings):
    out = tmp_path / "lp-lda"
    config = config_from_dict({**small_settings, "target": {"k": 4, "learner": "lp-lda", "vocabulary": "all",
                                                            "params": {"epsilon": 1.0, "n_iter": 20}},
                               "attack": {"shadows": 2}, "output": str(out)})
    execute_run(config, quiet=True)
    assert main(["check", str(out)]) == 2
    err = capsys.readouterr().err
    assert "per word (local-word adjacency)" in err and "--epsilon" in err and "Traceback" not in err
    # a document-level claim stated by the user is checked (here a generous one: consistent)
    assert main(["check", str(out), "--epsilon", str(GENEROUS)]) == 0
    assert capsys.readouterr().out.startswith("CONSISTENT")
