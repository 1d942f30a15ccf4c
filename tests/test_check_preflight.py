"""`check CONFIG` rejects what it cannot test before the audit: no fit, no run directory, in seconds."""
import time

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy
from linked_cache import run_dir  # noqa: F401 — run_dir: a fixture (a canary-only run)

CONFIG = """
[synthetic]
n_docs = 300
n_words = 1000
[target]
k = 4
{target}
[attack]
shadows = {shadows}
{canaries}
"""


def write(tmp_path, target="", shadows=8, canaries=""):
    path = tmp_path / "audit.toml"
    path.write_text(CONFIG.format(target=target, shadows=shadows, canaries=canaries))
    return path


@pytest.mark.parametrize("setting, args, message", [
    ({}, [], "claims no ε"),
    ({}, ["--epsilon", "-1"], "--epsilon must be"),
    ({}, ["--epsilon", "nan"], "--epsilon must be"),
    ({}, ["--epsilon", "1", "--delta", "1"], "--delta must be"),
    ({}, ["--epsilon", "1", "--alpha", "0"], "--alpha must be"),
    ({}, ["--epsilon", "1", "--attack", "lira_nope"], "--attack lira_nope: unknown attack"),
    ({"shadows": 0, "canaries": "[attack.canaries]\ncount = 50"}, ["--epsilon", "1", "--attack", "lira_online"],
     "trains no shadow model"),
    ({"target": 'learner = "lp-lda"\nvocabulary = "all"\n[target.params]\nepsilon = 1.0'}, [],
     "per word (local-word adjacency)"),
    ({"shadows": 1}, ["--epsilon", "1"], "shadows"),
])
def test_check_of_a_configuration_fails_before_any_fit(tmp_path, capsys, setting, args, message):
    config = write(tmp_path, **setting)
    out = tmp_path / "run"
    started = time.perf_counter()
    assert main(["check", str(config), "--output", str(out), *args]) == 2
    assert time.perf_counter() - started < 5
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()  # nothing was fitted, nothing written


def test_assert_privacy_names_its_arguments_before_any_fit(tmp_path):
    from topicaudit.errors import UserError
    with pytest.raises(UserError, match="pass the claim to test with epsilon"):
        assert_privacy({"synthetic": {"n_docs": 300}, "output": str(tmp_path / "run")})
    assert not (tmp_path / "run").exists()


def test_an_attack_asked_of_a_run_without_shadows_is_refused_not_ignored(run_dir, capsys):
    """`check RUN --attack nonsense` on a canary-only run printed its verdict (the attack ignored) and recorded
    "attacks": ["nonsense"] in check.json, as if the verdict had been tested with it."""
    for attack in ("nonsense", "lira_online"):
        assert main(["check", str(run_dir), "--epsilon", "5", "--attack", attack]) == 2
        err = capsys.readouterr().err
        assert f"--attack {attack}" in err and "no shadow models" in err and "leave it out" in err, err
    assert not (run_dir / "check.json").exists()
    assert main(["check", str(run_dir), "--epsilon", "5"]) == 0
