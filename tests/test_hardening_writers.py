"""What a run writes survives any name, any disk and any spelling of its paths (none of these tests start Ray).

Canary-only audits (``shadows = 0``) fit in the test's process, so each case is
a real `run` and resume in a few seconds.
"""
import errno
import os
import tomllib
from pathlib import Path

import pytest

from topicaudit.cli import supervisor
from topicaudit.cli.main import main
from topicaudit.engine.configuration.config import config_hash
from topicaudit.engine.configuration.loading import load_config
from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import corpus_fingerprint

NAMES = ["audit😀", "cost_$5_$", "x$\\foo$", 'quo"te', "back\\slash", "tab\tnew\nline\x01\x7f", "é ü ß",
         "[table]", "a = b", "\u202eright-to-left"]


@pytest.mark.parametrize("name", NAMES)
def test_every_name_round_trips_through_the_toml_writer(name):
    data = {"name": name, "output": f"/tmp/{name}/run", "corpus": {"path": name, "options": {name: [name, 1]}},
            name: {"key": name}}
    assert tomllib.loads(to_toml(data)) == data


def test_a_name_python_cannot_encode_is_written_as_a_replacement():
    assert tomllib.loads(to_toml({"path": "caf\udce9"})) == {"path": "caf\ufffd"}


def _canary_run(tmp_path, name, output):
    return main(["run", "--shadows", "0", "--canaries", "20", "--k", "3", "--name", name, "--output", str(output),
                 "--quiet"])


def test_a_run_with_an_emoji_and_dollars_in_its_names_resumes(tmp_path, capsys):
    output = tmp_path / 'out 😀 $x$ "q" \\ b'
    assert _canary_run(tmp_path, "audit😀 x$\\foo$", output) == 0
    config = tomllib.loads((output / "config.toml").read_text(encoding="utf-8"))
    assert config["name"] == "audit😀 x$\\foo$" and config["output"] == str(output)
    capsys.readouterr()
    assert _canary_run(tmp_path, "audit😀 x$\\foo$", output) == 0, capsys.readouterr().err


def test_a_full_disk_is_exit_2_naming_the_disk_and_the_file(tmp_path, capsys, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(UserError, match=r"cannot write .*x\.txt: no space left on the disk mounted at /"):
        atomic_write_text(tmp_path / "x.txt", "x")
    assert not list(tmp_path.iterdir())  # the temporary file is gone too
    assert _canary_run(tmp_path, "full", tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error: cannot write ") and "no space left on the disk mounted at" in err
    assert "internal error" not in err and err.count("\n") == 1


def test_a_dangling_symlink_output_is_refused_before_ray(tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    assert main(["run", "--shadows", "2", "--output", str(link), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is a symbolic link to" in err and "does not exist" in err
    assert not supervisor.said(supervisor.RAY_IN_USE)


def _uci(directory: Path) -> None:
    directory.mkdir(parents=True)
    rows = [(d, w, 1 + (d * w) % 3) for d in range(1, 41) for w in range(1, 13) if (d + w) % 3]
    (directory / "docword.t.txt").write_text(f"40\n12\n{len(rows)}\n" + "".join(f"{d} {w} {c}\n" for d, w, c in rows))
    (directory / "words.txt").write_text("".join(f"word{w}\n" for w in range(1, 13)))


def test_option_paths_are_relative_to_the_config_file_and_spelling_free(tmp_path, monkeypatch):
    _uci(tmp_path / "data")
    relative = tmp_path / "relative.toml"
    relative.write_text('[corpus]\npath = "data/docword.t.txt"\n[corpus.options]\nvocab = "data/words.txt"\n')
    absolute = tmp_path / "conf" / "absolute.toml"
    absolute.parent.mkdir()
    absolute.write_text(f'[corpus]\npath = "{tmp_path}/data/docword.t.txt"\n'
                        f'[corpus.options]\nvocab = "{tmp_path}/data/words.txt"\n')
    monkeypatch.chdir(tmp_path / "conf")  # the shell is elsewhere than the relative config file
    hashes = set()
    for path in (relative, absolute):
        config = load_config(path)
        corpus = load_audit_corpus(config)
        assert list(corpus.vocabulary[:2]) == ["word1", "word10"] or corpus.X.shape[1] == 12
        hashes.add(config_hash(config, corpus_fingerprint(corpus)))
    assert len(hashes) == 1


def test_an_address_space_limit_too_small_for_ray_is_one_line_and_exit_4(tmp_path):
    """`ulimit -v 1500000` made Ray's C++ layer abort (exit 134) with a stack dump of every module."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000 * 1024, resource.getrlimit(resource.RLIMIT_AS)[1]))

    done = subprocess.run([sys.executable, "-m", "topicaudit.cli.supervisor", "run", "--shadows", "2", "--output",
                           str(tmp_path / "run"), "--quiet"], preexec_fn=limit, capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 4, done.stderr[-2000:]
    assert done.stderr.startswith("topicaudit: error: the address-space limit") and "ulimit -v" in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_in_process_exit_1_needs_a_printed_verdict(monkeypatch, capsys):
    """Without the supervisor (the Python API's main), a command returning 1 without VIOLATED is a bug,
    and Ray's sys.exit(1) while it is in use is exit 4."""
    from topicaudit.cli import check

    monkeypatch.setattr(check, "execute", lambda args: 1)
    assert main(["check", "x"]) == 3
    assert "internal error" in capsys.readouterr().err

    def ray_exits(args):
        supervisor.tell(supervisor.RAY_IN_USE)
        raise SystemExit(1)

    monkeypatch.setattr(check, "execute", ray_exits)
    assert main(["check", "x"]) == 4
    assert "Ray runtime failed" in capsys.readouterr().err

    def verdict(args):
        print("VIOLATED: x")
        return supervisor.refuted()

    monkeypatch.setattr(check, "execute", verdict)
    assert main(["check", "x"]) == 1


def test_an_output_file_below_a_file_is_named_as_below_a_file(tmp_path):
    """O7 (pass XIX-w): ``--json thesis.tex/o.json`` said "directory thesis.tex does not exist" of a file."""
    from topicaudit.engine.configuration.validation import check_output_file
    from topicaudit.errors import UserError
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(UserError, match="thesis.tex is a file, not a directory"):
        check_output_file(tmp_path / "thesis.tex" / "o.json", "--json")
    with pytest.raises(UserError, match="absent does not exist"):
        check_output_file(tmp_path / "absent" / "o.json", "--json")
    assert (tmp_path / "thesis.tex").read_text() == "mine"
