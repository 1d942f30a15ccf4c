"""Hardening XII (issue 32, hostile pass XII): what it found. Every case it ran is in tests/hostile_xii_cases.md.

Critical (a crash-born exit 0): a learner that calls ``sys.exit(0)`` (or ``sys.exit()``, or ``os._exit(0)``) in
its fit — as code built on a command-line library may — ended ``topicaudit check CONFIG`` with exit 0, nothing
printed and no check.json: a CI gate passed on an audit that never ran. The command line took any SystemExit
with code 0 for success, and the supervising process passed on every exit 0 it saw.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.check import assert_privacy
from topicaudit.errors import UserError

# A learner that ends the process as some libraries do; EXIT says how.
LEARNER = textwrap.dedent("""
    import os, sys
    from topicaudit.targets.learners.lda import VariationalLDA

    class Exits(VariationalLDA):
        def fit(self, X, seed):
            how = os.environ["EXIT"]
            if how == "os._exit":
                os._exit(0)
            sys.exit(None if how == "none" else int(how))
""")
SMALL = {"synthetic": {"n_docs": 200, "n_words": 300, "k": 3}, "target": {"k": 3, "learner": "exiting_learner:Exits"},
         "attack": {"shadows": 0, "canaries": {"count": 40}}}


@pytest.fixture
def exiting_learner(tmp_path, monkeypatch):
    (tmp_path / "exiting_learner.py").write_text(LEARNER)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "exits.toml"
    config.write_text('[synthetic]\nn_docs = 200\nn_words = 300\nk = 3\n[target]\nk = 3\n'
                      'learner = "exiting_learner:Exits"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 40\n')
    return config


@pytest.mark.parametrize("how", ["0", "none"])
def test_a_learner_calling_sys_exit_0_is_no_verdict(exiting_learner, tmp_path, monkeypatch, capsys, how):
    monkeypatch.setenv("EXIT", how)
    code = main(["check", str(exiting_learner), "--epsilon", "1", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "its own fit raised SystemExit" in err, (code, err)  # was 0, nothing said
    assert not (tmp_path / "run" / "check.json").exists()


@pytest.mark.parametrize("how", ["0", "none"])
def test_assert_privacy_turns_a_learners_sys_exit_into_no_verdict(exiting_learner, tmp_path, monkeypatch, how):
    """A script `assert_privacy(...)` whose learner called sys.exit(0) exited 0: read as a pass."""
    monkeypatch.setenv("EXIT", how)
    with pytest.raises(UserError, match="its own fit raised SystemExit"):  # the learner's, named: no verdict
        assert_privacy(str(exiting_learner), epsilon=1, output=tmp_path / "run")


SUPERVISED = """
import os, sys
from topicaudit.cli import supervisor
def body():
    {body}
sys.exit(supervisor.supervise(body, ["check"]))
"""


@pytest.mark.parametrize("body, code, line", [
    ("os._exit(0)", 3, "exited 0 before the command finished"),  # a learner's os._exit(0), a native exit(0)
    ("supervisor.tell(supervisor.RAY_IN_USE); os._exit(0)", 4, "the Ray runtime ended the process with exit 0"),
    ("return 0", 0, None),
    ("raise SystemExit(0)", 0, None),  # argparse's own exit (--help, --version) keeps its code
    ("print('CONSISTENT: x'); return 0", 0, None),
])
def test_the_supervisor_passes_on_only_the_exit_0_its_command_gave(body, code, line):
    done = subprocess.run([sys.executable, "-c", SUPERVISED.format(body=body)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == code, done.stderr
    if line:
        assert line in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def test_the_console_script_says_help_and_version_with_exit_0():
    for flag in (["--version"], ["check", "--help"]):
        done = subprocess.run([str(Path(sys.executable).parent / "topicaudit"), *flag], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and done.stdout, (flag, done.stderr)


# -- non-critical findings fixed ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A finished canary-only run of the small synthetic corpus."""
    import topicaudit

    run_dir = tmp_path_factory.mktemp("xii") / "run"
    topicaudit.run({**{k: v for k, v in SMALL.items() if k != "target"}, "target": {"k": 3},
                    "output": str(run_dir)})
    return run_dir


def test_junit_on_an_ascii_standard_output_is_printed_with_the_verdict_line(small_run, tmp_path):
    """ENC1: `--junit -` to an ASCII stdout was "could not be printed" (UnicodeEncodeError), and the verdict line
    meant for stderr went unsaid with it: exit 0 or 1 with no verdict printed anywhere."""
    import shutil
    import xml.etree.ElementTree as ElementTree

    run = shutil.copytree(small_run, tmp_path / "run")
    script = Path(sys.executable).parent / "topicaudit"
    done = subprocess.run([str(script), "check", str(run), "--epsilon", "0", "--junit", "-"], capture_output=True,
                          env={**__import__("os").environ, "PYTHONIOENCODING": "ascii"}, timeout=120)
    suite = ElementTree.fromstring(done.stdout)
    assert suite.tag == "testsuite" and int(suite.get("tests")) == 1, done.stderr
    verdict = "VIOLATED" if done.returncode == 1 else "CONSISTENT"
    assert done.stderr.decode("ascii").startswith(verdict) or f"\n{verdict}" in done.stderr.decode(), done.stderr
    assert "could not be printed" not in done.stderr.decode()


def test_json_and_junit_may_not_name_the_same_file(small_run, tmp_path, monkeypatch, capsys):
    """M7: `--json same.json --junit ./same.json` wrote both there, the XML over the JSON asked for, unsaid."""
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(small_run), "--epsilon", "0", "--json", "same.json", "--junit", "./same.json"]) == 2
    assert "same file" in capsys.readouterr().err and not (tmp_path / "same.json").exists()


def test_api_numbers_and_paths_by_their_own_value(small_run, tmp_path):
    """A float subclass is its value, not what its __float__ says; a str subclass is the text checked, not what its
    __str__ says (Path calls it)."""
    import topicaudit

    class Lies(float):
        def __float__(self):
            return 100.0

    class Elsewhere(str):
        def __str__(self):
            return str(tmp_path / "nonexistent")

    assert topicaudit.check(small_run, epsilon=Lies(0.0)).claimed_epsilon == 0.0  # was 100
    assert topicaudit.check(Elsewhere(str(small_run)), epsilon=0).run_dir.name == "run"  # was refused, elsewhere


@pytest.mark.parametrize("setting, value", [("output", 5), ("vocabulary", b"vocab.txt"), ("params", "max_iter=3")])
def test_audit_model_names_a_setting_of_the_wrong_type(tmp_path, setting, value):
    """output=5 was a TypeError, params="max_iter=3" a ValueError about dictionary update sequences."""
    import topicaudit

    with pytest.raises(UserError, match=setting):
        topicaudit.audit_model(tmp_path / "phi.npy", candidates=tmp_path / "c.json", **{setting: value})


@pytest.mark.parametrize("umask", [0o277, 0o777])
def test_an_output_made_without_rights_to_its_own_lock_is_removed_again(tmp_path, umask):
    """Pass XII's F1: a umask that leaves the owner no write or search right on the folder `run` makes (and no
    CAP_DAC_OVERRIDE) refused the run at its .lock (exit 2) and left the new, empty folder behind."""
    import os
    import shutil

    drop = []
    if os.geteuid() == 0:  # root would write the folder anyway: run without its capabilities
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv cannot drop CAP_DAC_OVERRIDE")
        drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-all"]
    launcher = Path(sys.executable).parent / "topicaudit"
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run([*drop, "sh", "-c", f'umask {umask:o}; exec "$0" "$@"', str(launcher), "run",
                           "--shadows", "0", "--canaries", "60", "--k", "3", "--output", "deep/out", "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "--output" in done.stderr, (done.returncode, done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # neither out/ nor the deep/ made for it
