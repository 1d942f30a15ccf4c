"""Hardening III (issue 32): the manifest cannot be switched off, the writer lock follows no link, closed or
broken standard streams never read as a verdict, and what a user points at is never overwritten or hung on.

Every run here is canary-only (``shadows = 0``): it fits in the test's process, without Ray, in ~2 s.
"""
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest

REPO = Path(__file__).resolve().parents[1]
CLAIM = "0.01"  # plain LDA's canaries prove more than this


def canary_run(output: Path, *extra: str) -> int:
    return main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(output), "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("h3") / "run"
    assert canary_run(out) == 0
    return out


@pytest.fixture
def run(finished, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    for name in ("check.json", "check.junit.xml"):
        (copy / name).unlink(missing_ok=True)
    return copy


def check(capsys, run_dir, *extra):
    code = main(["check", str(run_dir), "--epsilon", CLAIM, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shuffle_coins(run_dir: Path) -> None:
    with np.load(run_dir / "canaries.npz", allow_pickle=False) as z:
        data = dict(z)
    data["coins"] = np.random.default_rng(0).permutation(data["coins"])
    np.savez(run_dir / "canaries.npz", **data)


def edit_manifest(run_dir: Path, edit) -> None:
    path = run_dir / manifest.NAME
    data = json.loads(path.read_text())
    edit(data["files"])
    path.write_text(json.dumps(data))


# -- 1. the manifest cannot be switched off -------------------------------------------------------------
def test_the_untouched_canary_run_is_violated(run, capsys):
    code, out, err = check(capsys, run)
    assert code == 1 and out.startswith("VIOLATED") and "UNVERIFIED" not in out, err


def test_shuffled_coins_with_the_manifest_deleted_are_refused(run, capsys):
    shuffle_coins(run)
    (run / manifest.NAME).unlink()
    code, out, err = check(capsys, run)
    assert code == 2 and not out, err
    assert "manifest.json is missing" in err and "rerun the audit into a new directory" in err
    assert err.count("\n") == 1 and not (run / "check.json").exists()


@pytest.mark.parametrize("dropped", ["results.json", "canaries.npz", "canary_scores.npz", "config.toml",
                                     "models/canary-target.npz", "every entry"])
def test_a_manifest_missing_an_entry_is_refused_naming_the_file(run, capsys, dropped):
    shuffle_coins(run)  # what the shrunken manifest would otherwise let through
    edit_manifest(run, (lambda files: files.clear()) if dropped == "every entry" else
                  (lambda files: files.pop(dropped)))
    code, out, err = check(capsys, run)
    assert code == 2 and not out, err
    named = "config.toml" if dropped == "every entry" else dropped  # the first evidence file it lacks
    assert f"{named} is not listed in" in err and "new directory" in err and err.count("\n") == 1, err


def test_a_forged_verdict_with_the_manifest_deleted_is_refused_by_report_too(run, capsys, tmp_path):
    with np.load(run / "canary_scores.npz", allow_pickle=False) as z:
        data = dict(z)
    with np.load(run / "canaries.npz", allow_pickle=False) as z:
        coins = z["coins"]
    data["zeta"] = np.where(coins, 1e6, -1e6)  # fake scores that separate the canaries perfectly
    np.savez(run / "canary_scores.npz", **data)
    (run / manifest.NAME).unlink()
    assert main(["report", str(run), "-o", str(tmp_path / "report"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "manifest.json is missing" in err and not (tmp_path / "report").exists()


@pytest.mark.parametrize("content", ["{not json", '{"files": 3}'])
def test_a_damaged_manifest_is_not_advised_away(run, capsys, content):
    (run / manifest.NAME).write_text(content)
    code, out, err = check(capsys, run)
    assert code == 2 and "manifest.json" in err and "new directory" in err
    assert "delete" not in err, err


def to_pre_manifest_layout(run_dir: Path) -> None:
    """What a run written before manifests existed looks like: no manifest, no mark, no model slot."""
    (run_dir / manifest.NAME).unlink()
    results = json.loads((run_dir / "results.json").read_text())
    del results[manifest.MARK]
    (run_dir / "results.json").write_text(json.dumps(results))
    config = run_dir / "config.toml"
    config.write_text(re.sub(r"^manifest = .*\n", "", config.read_text(), flags=re.M))
    shutil.rmtree(run_dir / "models")


def test_the_pre_manifest_layout_is_read_and_its_verdict_says_it_is_unverified(run, capsys, tmp_path):
    to_pre_manifest_layout(run)
    code, out, err = check(capsys, run)
    assert code == 1 and out.startswith("VIOLATED") and "UNVERIFIED: this directory has no manifest.json" in out
    assert "UNVERIFIED" in json.loads((run / "check.json").read_text())["unverified"]
    assert main(["report", str(run), "-o", str(tmp_path / "report"), "--quiet"]) == 0
    assert "UNVERIFIED" in capsys.readouterr().err


@pytest.mark.parametrize("mark", ["results.json", "config.toml", "models"])
def test_any_one_mark_of_a_manifest_keeping_version_requires_the_manifest(run, capsys, mark):
    """Each mark alone is enough: the other two stripped, the manifest deleted."""
    to_pre_manifest_layout(run)
    finished_copy = run.parent / "again"
    assert canary_run(finished_copy) == 0
    if mark == "results.json":
        shutil.copy(finished_copy / "results.json", run / "results.json")
    elif mark == "config.toml":
        shutil.copy(finished_copy / "config.toml", run / "config.toml")
    else:
        shutil.copytree(finished_copy / "models", run / "models")
    capsys.readouterr()
    code, out, err = check(capsys, run)
    assert code == 2 and "manifest.json is missing" in err and mark in err, err


def test_resuming_without_the_manifest_is_refused(run, capsys):
    (run / manifest.NAME).unlink()
    assert canary_run(run) == 2
    err = capsys.readouterr().err
    assert "manifest.json is missing" in err and "new directory" in err


def test_a_model_the_manifest_does_not_list_is_refitted_on_resume(run, capsys):
    """A crash between writing a model and listing it: the model cannot be verified, so it is refitted."""
    (run / "results.json").unlink()
    edit_manifest(run, lambda files: (files.pop("models/canary-target.npz"), files.pop("results.json")))
    assert canary_run(run) == 0
    assert "not listed in manifest.json; refitting" in capsys.readouterr().err
    code, out, err = check(capsys, run)
    assert code == 1 and out.startswith("VIOLATED"), err


# -- 2. the writer lock follows no link and leaves a refused directory as it found it ----------------------
def lock_case(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """An output directory whose .lock is ``kind``; and the file a followed link would have written."""
    out, thesis = tmp_path / "out", tmp_path / "thesis.tex"
    out.mkdir()
    thesis.write_text("my thesis\n")
    lock = out / ".lock"
    if kind == "link to a file":
        lock.symlink_to(thesis)
    elif kind == "dangling link":
        lock.symlink_to(tmp_path / "elsewhere" / "created")
    elif kind == "directory":
        lock.mkdir()
    elif kind == "FIFO":
        import os

        os.mkfifo(lock)
    else:
        lock.write_text("my own lock notes\n")
    return out, thesis


@pytest.mark.parametrize("kind", ["link to a file", "dangling link", "directory", "FIFO", "user's own file"])
def test_a_lock_that_is_no_lock_file_is_refused_untouched(tmp_path, capsys, kind):
    out, thesis = lock_case(tmp_path, kind)
    before = sorted(p.name for p in out.iterdir())
    assert canary_run(out) == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error: ") and ".lock" in err and "remove or rename" in err, err
    assert err.count("\n") == 1
    assert thesis.read_text() == "my thesis\n" and not (tmp_path / "elsewhere").exists()
    assert sorted(p.name for p in out.iterdir()) == before
    if kind == "user's own file":
        assert (out / ".lock").read_text() == "my own lock notes\n"


def test_a_refused_directory_is_left_without_a_stray_lock(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert canary_run(out) == 2
    assert "is not empty and is not a topicaudit run" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_run_refused_as_another_configuration_keeps_its_lock_content(finished, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(finished, other)
    (other / ".lock").write_text("12345\n")
    assert canary_run(other, "--seed", "9") == 2
    assert "different configuration" in capsys.readouterr().err
    assert (other / ".lock").read_text() == "12345\n"


# -- 3. closed or broken standard streams never read as a verdict ------------------------------------------
def console(args, stdout="pipe", stderr="pipe"):
    """The console script with stdout/stderr "pipe", "closed", "broken" (a pipe whose reader has exited) or
    "full" (/dev/full); its exit code and whatever could be captured."""
    import os
    import subprocess
    import sys

    ends, closing, opened = {}, [], []
    for name, how in (("stdout", stdout), ("stderr", stderr)):
        if how == "pipe":
            ends[name] = subprocess.PIPE
        elif how == "broken":
            read, write = os.pipe()
            os.close(read)
            ends[name] = write
            opened.append(write)
        elif how == "full":
            ends[name] = open("/dev/full", "w")
            opened.append(ends[name])
        else:
            ends[name] = subprocess.DEVNULL
            closing.append(1 if name == "stdout" else 2)
    done = subprocess.run([sys.executable, "-m", "topicaudit.cli.supervisor", *map(str, args)], cwd=REPO,
                          preexec_fn=lambda: [os.close(fd) for fd in closing], timeout=120, **ends)
    for end in opened:
        end.close() if hasattr(end, "close") else os.close(end)
    decode = lambda b: b.decode() if b else ""  # noqa: E731
    return done.returncode, decode(done.stdout), decode(done.stderr)


def test_closed_or_broken_streams_never_turn_into_exit_1(run):
    from concurrent.futures import ThreadPoolExecutor

    cases = {  # name: (arguments, stdout, stderr, expected exit code)
        "stderr closed, consistent": (["check", run, "--epsilon", "5"], "pipe", "closed", 0),
        "stderr closed, violated": (["check", run, "--epsilon", CLAIM], "pipe", "closed", 1),
        "stderr closed, --version": (["--version"], "pipe", "closed", 0),
        "stderr closed, bad input": (["check", run / "absent"], "pipe", "closed", 2),
        "stderr closed, run resumes": (["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", run,
                                        "--quiet"], "pipe", "closed", 0),
        "stdout broken, consistent": (["check", run, "--epsilon", "5"], "broken", "pipe", 0),
        "both broken, bad input": (["check", run / "absent"], "broken", "broken", 2),
        "stdout broken, a run's summary": (["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output",
                                            run], "broken", "pipe", 2),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        ends = dict(zip(cases, pool.map(lambda c: console(c[0], c[1], c[2]), cases.values())))
    for name, (code, out, err) in ends.items():
        assert code == cases[name][3], (name, code, out, err)
        assert "internal error" not in err and "Traceback" not in err, (name, err)
    assert ends["stderr closed, consistent"][1].startswith("CONSISTENT")
    assert ends["stderr closed, violated"][1].startswith("VIOLATED")
    assert "could not be printed on standard output (Broken pipe)" in ends["stdout broken, consistent"][2]
    assert "the output stream was closed" in ends["stdout broken, a run's summary"][2]


@pytest.mark.parametrize("stdout", ["closed", "broken", "full"])
def test_a_violated_verdict_stdout_cannot_take_is_exit_1_because_check_json_records_it(run, stdout):
    code, out, err = console(["check", run, "--epsilon", CLAIM], stdout=stdout)
    assert code == 1, err
    assert json.loads((run / "check.json").read_text())["verdict"] == "VIOLATED"
    if stdout != "closed":  # closed: the line went to /dev/null, which took it
        assert "it is recorded in" in err and "check.json" in err and err.count("\n") == 1, err


# -- 5. manifest.json is opened like every other run file ---------------------------------------------------
@pytest.mark.parametrize("kind", ["FIFO", "link to /dev/zero", "too large"])
def test_a_manifest_that_is_no_regular_file_is_refused_at_once(run, capsys, kind):
    import os

    path = run / manifest.NAME
    path.unlink()
    if kind == "FIFO":
        os.mkfifo(path)  # blocked check forever
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")  # read until memory ran out
    else:
        with open(path, "wb") as handle:
            handle.truncate(manifest.MAX_BYTES + 1)
    code, out, err = check(capsys, run)
    assert code == 2 and not out and "manifest.json" in err and "new directory" in err, err


# -- 8 and 16. check --json/--junit never writes through a link nor over the run's own files ------------
@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_a_report_path_that_is_a_symbolic_link_is_refused(run, capsys, tmp_path, flag):
    mine = tmp_path / "mine.txt"
    mine.write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(mine)
    code, out, err = check(capsys, run, flag, str(link))
    assert code == 2 and not out and "symbolic link" in err and err.count("\n") == 1, err
    assert link.is_symlink() and mine.read_text() == "mine"


@pytest.mark.parametrize("flag, name", [("--json", "results.json"), ("--junit", "canaries.npz"),
                                        ("--json", "manifest.json"), ("--junit", "models/canary-target.npz")])
def test_a_report_path_over_the_runs_own_evidence_is_refused(run, capsys, flag, name):
    before = (run / name).read_bytes()
    code, out, err = check(capsys, run, flag, str(run / name))
    assert code == 2 and not out and name in err and "outside it" in err, err
    assert (run / name).read_bytes() == before
    code, out, err = check(capsys, run, flag, str(run / "elsewhere.json"))  # any other name there is fine
    assert code == 1 and out.startswith("VIOLATED"), err


# -- 9. what an interrupted start leaves is resumable ----------------------------------------------------
def interrupted_start(directory: Path) -> None:
    """What SIGINT at a run's start leaves: the lock and an empty models/ (no config.toml yet)."""
    for entry in list(directory.iterdir()) if directory.exists() else ():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    (directory / "models").mkdir(parents=True)
    (directory / ".lock").write_text("4242\n")


def test_a_run_directory_an_interrupted_start_left_is_used(tmp_path, capsys):
    out = tmp_path / "out"
    interrupted_start(out)
    assert canary_run(out) == 0, capsys.readouterr().err
    assert (out / "results.json").exists()


def test_an_interrupted_sweep_resumes(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 30\n[target]\nk = 3\n")
    argv = ["sweep", str(config), "--param", "target.k", "--values", "2,3", "--output", str(tmp_path / "sw"),
            "--quiet"]
    assert main(argv) == 0
    interrupted_start(tmp_path / "sw" / "k=3" / "rep-0")
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    assert (tmp_path / "sw" / "k=3" / "rep-0" / "results.json").exists()


def test_a_directory_with_a_nonempty_models_folder_is_still_refused(tmp_path, capsys):
    out = tmp_path / "out"
    interrupted_start(out)
    (out / "models" / "mine.txt").write_text("mine")
    assert canary_run(out) == 2
    assert "is not empty and is not a topicaudit run" in capsys.readouterr().err
    assert (out / "models" / "mine.txt").read_text() == "mine" and (out / ".lock").read_text() == "4242\n"


# -- 6 and 13. configuration files are bounded before they are parsed ------------------------------------
HOSTILE_TOML = {
    "a dotted key of 100,000 parts": ("[attack]\n" + ".".join(["a"] * 100_000) + " = 1\n", "dotted key"),
    "arrays nested 5,000 deep": ("[attack]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "nested more than"),
    "inline tables nested 3,000 deep": ("x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "nested more than"),
    "2 MiB": ("# " + "x" * (2 << 20) + "\n", "larger than"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_TOML))
def test_a_hostile_configuration_is_one_line_and_exit_2(tmp_path, capsys, case):
    import time

    text, words = HOSTILE_TOML[case]
    config = tmp_path / "hostile.toml"
    config.write_text(text)
    started = time.perf_counter()
    assert main(["run", str(config), "--output", str(tmp_path / "out")]) == 2
    assert time.perf_counter() - started < 5  # was: > 7 GB within 2 minutes, or RecursionError (exit 3)
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error: ") and "hostile.toml" in err and words in err, err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_a_deeply_nested_command_line_value_is_exit_2(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text("[attack]\nshadows = 0\n")
    nested = "[" * 2000 + "1" + "]" * 2000
    assert main(["sweep", str(config), "--param", "target.k", "--values", nested, "--output",
                 str(tmp_path / "sw")]) == 2
    assert "nested more than" in capsys.readouterr().err


def test_the_bounds_leave_ordinary_toml_alone():
    from topicaudit.engine.configuration import toml_reader

    text = ('# a comment with [[[ and a.b.c.d\n[corpus.options]\nvocab = "x.[y]{z}.txt"\n'
            "[target]\nparams = { max_iter = 5, doc_topic_prior = 0.5 }\nvalues = [1.5, 2.5e3, [1, [2]]]\n"
            "'a.b'.c = '''[[[\n{{{'''\n\"q\" = \"\"\"\\\"\"\"\\\" ]]]\"\"\"\n")
    import tomllib

    assert toml_reader.loads(text, "t") == tomllib.loads(text)
