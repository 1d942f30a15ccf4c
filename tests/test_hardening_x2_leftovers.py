"""Hardening X' leftovers: the non-critical findings of hostile pass X' fixed afterwards (N8–N16).

Each finding, and what was done, is in tests/hostile_x2_cases.md ("Not fixed, with what to do").
"""
from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import textwrap
import tomllib

import numpy as np
import pytest

from topicaudit import api
from topicaudit.cli import main as cli_main
from topicaudit.cli.main import main
from topicaudit.engine import run as engine_run
from topicaudit.engine.check import assert_privacy
from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import _json as bertopic_json
from topicaudit.inputs.formats.json_file import read_json
from topicaudit.inputs.user_model import load_user_model
from topicaudit.inputs.vocabulary_file import read_vocabulary


class _BytesPath:
    """A path-like whose ``__fspath__`` gives bytes, as os.PathLike allows."""

    def __fspath__(self):
        return b"/tmp/somewhere"


class _ShiftingPath:
    """A path-like that gives another value each time it is asked."""

    def __init__(self, first: str, then: str):
        self.values, self.calls = [first, then], 0

    def __fspath__(self):
        self.calls += 1
        return self.values[min(self.calls, 2) - 1]


def test_a_path_like_giving_bytes_is_refused_naming_the_argument():
    """N10: bytes from ``__fspath__`` went on and failed later as a TypeError (a traceback)."""
    with pytest.raises(UserError, match="run_dir"):
        api.check(_BytesPath(), epsilon=1.0)


def test_a_path_like_is_read_once_and_the_value_checked_is_the_value_used(tmp_path):
    """N10: the value was checked on one ``__fspath__`` call and used from another, so a name with a NUL could pass."""
    shifting = _ShiftingPath(str(tmp_path / "nothing-here"), "a\0b")
    with pytest.raises(UserError) as caught:
        api.check(shifting, epsilon=1.0)
    assert shifting.calls == 1
    assert "NUL" not in str(caught.value)  # the first value was the one checked and used


def test_a_dict_configuration_takes_numpy_numbers_as_the_keywords_do():
    """N9: ``{"target": {"k": np.int64(5)}}`` was refused as not an integer, where ``k=np.int64(5)`` is taken."""
    config = api.as_config({"seed": np.int32(3), "target": {"k": np.int64(5)},
                            "attack": {"alpha": np.float32(0.25), "tol": np.float64(1e-6)}})
    assert (config.seed, config.target.k) == (3, 5) and type(config.target.k) is int
    assert config.attack.alpha == pytest.approx(0.25) and type(config.attack.alpha) is float
    assert type(config.attack.tol) is float


def test_a_dict_configuration_still_refuses_bools_and_non_finite_numpy_numbers():
    """N9: a bool is not a number there, NumPy's no more than Python's."""
    for bad, key in (({"target": {"k": np.bool_(True)}}, "k"), ({"target": {"k": True}}, "k"),
                     ({"attack": {"alpha": np.bool_(False)}}, "alpha"), ({"attack": {"alpha": np.float64("nan")}},
                                                                         "alpha"),
                     ({"target": {"k": np.float64(5)}}, "k")):
        with pytest.raises(UserError, match=key):
            api.as_config(bad)


def test_numpy_numbers_in_a_free_table_are_written_back_as_toml_numbers():
    """N9: [target.params] passed np.int64(5) on, and config.toml wrote it as the string "5"."""
    config = api.as_config({"target": {"params": {"max_iter": np.int64(5), "rates": [np.float64(0.5)]}}})
    assert tomllib.loads(to_toml(config.to_dict()))["target"]["params"] == {"max_iter": 5, "rates": [0.5]}


def test_assert_privacy_and_run_read_a_dict_with_numpy_numbers_past_them():
    """N9: both stopped at ``k``; the unknown key after it is now the first thing refused."""
    config = {"target": {"k": np.int64(3)}, "seed": np.int64(1), "bogus": 1}
    for call in (lambda: assert_privacy(config, epsilon=1.0), lambda: api.run(config)):
        with pytest.raises(UserError, match="bogus"):
            call()


# With no file descriptor left to open (`ulimit -n` just above those already open), write as `check` does and probe
# an output directory as every command does first.
NO_DESCRIPTORS = textwrap.dedent("""
    import os, resource, sys
    from pathlib import Path
    from topicaudit.engine.configuration.validation import check_output_directory
    from topicaudit.engine.storage.durable_write import atomic_write_all
    from topicaudit.errors import UserError
    folder = Path(sys.argv[1])
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    held = []
    try:
        while True:  # the gaps below the highest one
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for attempt in (lambda: atomic_write_all([(folder / "check.json", b"{}")]),
                    lambda: check_output_directory(folder / "run", "--output")):
        try:
            attempt()
        except UserError as error:
            print(error)
        else:
            print("written")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/fd lists the open descriptors")
def test_too_many_open_files_says_raise_ulimit_n_not_choose_another_place(tmp_path):
    """N8: `ulimit -n 5` made `check` say "cannot write check.json: Too many open files; choose another place"."""
    result = subprocess.run([sys.executable, "-c", NO_DESCRIPTORS, str(tmp_path)], capture_output=True, text=True,
                            timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and len(lines) == 2, result.stdout + result.stderr
    for line in lines:
        assert "too many open files" in line and "ulimit -n" in line and "another place" not in line, line
    assert "check.json" in lines[0] and "--output" in lines[1]


def test_a_json_corpus_with_its_text_key_twice_is_refused_naming_the_file_and_key(tmp_path):
    """N14: ``{"text": [...], "text": [...]}`` was read from its second list, silently."""
    corpus = tmp_path / "corpus.json"
    corpus.write_text('{"text": ["first document here"], "text": ["another one entirely"]}')
    with pytest.raises(UserError, match="corpus.json") as caught:
        read_json(corpus)
    assert "'text'" in str(caught.value) and "twice" in str(caught.value)


def test_a_json_vocabulary_with_a_word_twice_names_that_word(tmp_path):
    """N14: the word → column object kept the last index, and the refusal then named another word."""
    vocabulary = tmp_path / "vocabulary.json"
    vocabulary.write_text('{"apple": 0, "banana": 1, "apple": 1}')
    with pytest.raises(UserError, match="vocabulary.json") as caught:
        read_vocabulary(vocabulary)
    assert "'apple'" in str(caught.value) and "banana" not in str(caught.value)


def test_a_bertopic_json_file_with_a_key_twice_is_refused_naming_it(tmp_path):
    """N14: BERTopic's topics.json and configs: the same rule."""
    topics = tmp_path / "topics.json"
    topics.write_text('{"topic_sizes": {"0": 3}, "topic_sizes": {"0": 4}}')
    with pytest.raises(UserError, match="topics.json") as caught:
        bertopic_json(topics, "BERTopic topics file")
    assert "'topic_sizes'" in str(caught.value)


def test_a_npy_header_over_the_limit_is_refused_without_advising_allow_pickle(tmp_path):
    """N15: NumPy's own refusal was relayed, telling the user to "fully trust the file using allow_pickle=True"."""
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }"
    header = (header + " " * (20_000 - len(header)) + "\n").encode("ascii")
    phi = tmp_path / "phi.npy"
    phi.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header + np.full(6, 1 / 3).tobytes())
    vocabulary = tmp_path / "words.txt"
    vocabulary.write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="phi.npy") as caught:
        load_user_model(phi, vocabulary)
    message = str(caught.value)
    assert "allow_pickle" not in message and "header" in message and "too large" in message


def test_a_npz_holding_both_phi_and_components_is_refused_naming_both(tmp_path):
    """N12: ``phi`` was read and ``components_`` ignored, and nothing said which of two models was audited."""
    archive = tmp_path / "model.npz"
    np.savez(archive, phi=np.full((2, 3), 1 / 3), components_=np.ones((2, 3)))
    vocabulary = tmp_path / "words.txt"
    vocabulary.write_text("a\nb\nc\n")
    with pytest.raises(UserError, match="model.npz") as caught:
        load_user_model(archive, vocabulary)
    message = str(caught.value)
    assert "'phi'" in message and "'components_'" in message and "numpy.savez" in message


@pytest.mark.parametrize("name", [" ", " lda", "lda ", "lda\u00a0"])
def test_a_run_name_with_leading_or_trailing_blanks_is_refused(name, tmp_path, monkeypatch):
    """N11: ``name = " "`` made a run directory named one space, taken as a plain name."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="blank"):
        api.run({"name": name})
    assert list(tmp_path.iterdir()) == []


class _StopAfterTheLine(Exception):
    """Raised where the run would start its work, once its progress line is printed."""


def test_the_progress_line_prints_where_the_run_directory_really_is(tmp_path, monkeypatch, capsys):
    """N11: ``output = "~"`` makes a folder named ~ (TOML does not expand it), and the line printed "→ ~"."""
    monkeypatch.chdir(tmp_path)

    def stop(*_, **__):
        raise _StopAfterTheLine

    monkeypatch.setattr(engine_run, "_Prepared", stop)
    config = api.as_config({"output": "~", "synthetic": {"n_docs": 40, "n_words": 60, "mean_length": 10},
                            "target": {"k": 2}, "attack": {"shadows": 2}})
    with pytest.raises(_StopAfterTheLine):
        engine_run.execute_run(config, quiet=False)
    line = next(line for line in capsys.readouterr().err.splitlines() if "→" in line)
    assert line.rsplit("→ ", 1)[1] == str(tmp_path.resolve() / "~")


@pytest.mark.parametrize("argv", [["check", "RUN_DIR", "--eps", "1"], ["run", "--att", "lira_online"],
                                  ["--vers"]])
def test_a_flag_is_taken_only_whole_never_by_its_prefix(argv, tmp_path, monkeypatch, capsys):
    """N16: argparse's prefix matching took ``--eps 1`` as ``--epsilon 1``: a later flag beginning --eps… would
    change what an old script means. A prefix is now an unknown flag (exit 2, named)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert argv[-2 if len(argv) > 1 else -1] in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_every_parser_refuses_prefixes():
    """N16: the subcommands' parsers too (argparse gives each its own allow_abbrev)."""
    parser = cli_main._build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert parser.allow_abbrev is False
    assert all(sub.allow_abbrev is False for sub in commands.choices.values())
