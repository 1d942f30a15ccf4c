"""Bad input: one clear message, exit code 2, no traceback, no run directory left behind."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topicaudit.cli.main import main

REPO = Path(__file__).resolve().parents[1]


def run_cli(capsys, *args):
    code = main(["run", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_refused(capsys, output: Path, *args, message: str):
    code, out, err = run_cli(capsys, *args, "--output", output)
    assert code == 2, (out, err)
    # progress lines ("  … reading the corpus: 5 s so far") come on a slow machine; the error is one line after them
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("  … "))
    assert err.startswith("topicaudit: error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert "Traceback" not in out + err
    assert not output.exists(), "a refused run must not leave a run directory"


@pytest.fixture
def tiny_json(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"text": ["apple banana cherry"] * 6}))
    return path


def test_missing_corpus_file(capsys, tmp_path):
    assert_refused(capsys, tmp_path / "run", "--corpus", tmp_path / "absent.json", message="absent.json")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_corpus_file(capsys, tmp_path, tiny_json):
    tiny_json.chmod(0)
    assert_refused(capsys, tmp_path / "run", "--corpus", tiny_json, message="tiny.json")


def test_corpus_path_is_a_directory_of_nothing(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    assert_refused(capsys, tmp_path / "run", "--corpus", tmp_path / "empty", message="empty")


def test_empty_corpus(capsys, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"text": []}')
    assert_refused(capsys, tmp_path / "run", "--corpus", path, message="empty.json")


def test_every_document_empty_after_preprocessing(capsys, tmp_path):
    path = tmp_path / "stop.json"
    path.write_text(json.dumps({"text": ["the and of", "12 34 !!", "a an it", "is was be"]}))
    assert_refused(capsys, tmp_path / "run", "--corpus", path, message="stop.json")


def test_malformed_uci_line_names_the_line(capsys, tmp_path):
    docword = tmp_path / "docword.bad.txt"
    docword.write_text("2\n3\n3\n1 1 2\n1 2 x\n2 3 1\n")
    (tmp_path / "vocab.bad.txt").write_text("alpha\nbeta\ngamma\n")
    assert_refused(capsys, tmp_path / "run", "--corpus", docword, message="line 5")


def test_too_few_topics(capsys, tmp_path, tiny_json):
    assert_refused(capsys, tmp_path / "run", "--corpus", tiny_json, "--k", 1, message="k")


@pytest.mark.parametrize("shadows", [0, 1, 3])
def test_odd_or_too_few_shadows(capsys, tmp_path, tiny_json, shadows):
    assert_refused(capsys, tmp_path / "run", "--corpus", tiny_json, "--shadows", shadows, message="even number")


def test_unknown_learner(capsys, tmp_path, tiny_json):
    assert_refused(capsys, tmp_path / "run", "--corpus", tiny_json, "--learner", "bert",
                   message="unknown learner 'bert'")


def test_unknown_config_key(capsys, tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text("[attack]\nshadow_models = 8\n")
    assert_refused(capsys, tmp_path / "run", config, message="unknown key 'shadow_models'")


def test_unknown_learner_parameter(capsys, tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text("[target.params]\nlearning_rate = 0.1\n")
    assert_refused(capsys, tmp_path / "run", config, message="learning_rate")


def test_console_script_reports_without_traceback(tmp_path):
    script = Path(sys.executable).with_name("topicaudit")
    proc = subprocess.run([str(script), "run", "--corpus", str(tmp_path / "nope.json"),
                           "--output", str(tmp_path / "run")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "nope.json" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_directory_where_a_corpus_file_is_expected(capsys, tmp_path):
    (tmp_path / "corpus.json").mkdir()
    assert_refused(capsys, tmp_path / "run", "--corpus", tmp_path / "corpus.json", "--format", "json",
                   message="corpus.json")


def test_undecodable_corpus_file(capsys, tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00\x81garbage")
    assert_refused(capsys, tmp_path / "run", "--corpus", path, message="binary.json")
