"""Hardening VIII (issue 32, a fourth hostile pass): three leftovers of pass VII, then what the new pass found.

Every case the pass ran, with what was expected and what happened, is in tests/hostile_viii_cases.md. Runs here
are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.errors import UserError
from topicaudit.inputs import files, integrity_key


def canary_run(output: Path, *extra: str) -> int:
    return main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(output), "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h8") / "plain"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
        assert canary_run(out) == 0
    return out


@pytest.fixture
def run(plain_run, tmp_path, monkeypatch):
    """A copy of the plain (no key) canary run, with no key configured."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    copy = tmp_path / "run"
    shutil.copytree(plain_run, copy)
    return copy


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


# -- leftover 1: `--json -` and `--junit -` mean standard output ----------------------------------------------
def test_json_dash_writes_the_verdict_to_stdout_not_a_file_named_dash(run, tmp_path, monkeypatch, capsys):
    """`check RUN --json -` wrote a file named "-" in the working directory; `-` is standard output."""
    monkeypatch.chdir(tmp_path)
    code = main(["check", str(run), "--epsilon", "0.5", "--json", "-"])
    captured = capsys.readouterr()
    assert code == 1 and not (tmp_path / "-").exists()
    document = json.loads(captured.out)  # stdout holds the document alone
    assert document["verdict"] == "VIOLATED" and captured.err.startswith("VIOLATED"), captured
    assert (run / "check.junit.xml").exists() and not (run / "check.json").exists()


def test_junit_dash_writes_the_xml_to_stdout(run, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # ε = 5: above what 60 canaries can prove (≈ 2.2), and near enough that the verdict's search for a count
    # that could refute it stops early (50 searched up to a million canaries)
    code = main(["check", str(run), "--epsilon", "5", "--junit", "-"])
    captured = capsys.readouterr()
    assert code == 0 and not (tmp_path / "-").exists()
    assert ElementTree.fromstring(captured.out).tag == "testsuite"
    assert json.loads((run / "check.json").read_text())["verdict"] == "CONSISTENT"


def test_json_and_junit_both_dash_is_refused(run, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = snapshot(run)
    assert main(["check", str(run), "--epsilon", "0.5", "--json", "-", "--junit", "-"]) == 2
    err = capsys.readouterr().err
    assert "--json" in err and "--junit" in err and err.count("\n") == 1
    assert snapshot(run) == before and not (tmp_path / "-").exists()


# -- leftover 2: a check racing a run's manifest update --------------------------------------------------------
SLOW_CHECK = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from topicaudit.engine import check
    from topicaudit.engine.storage import manifest
    run = Path(sys.argv[1])
    result = check.check_run(run, 0.5)
    real = manifest.listed_digest  # what record() asks for each file, once it has read the manifest

    def slow(path, written):  # check has read the manifest; the run's update lands now
        print("read", flush=True)
        time.sleep(1.5)
        return real(path, written)

    manifest.listed_digest = slow
    with check.one_check_at_a_time(run):
        check.record_check_files(run, check.write_reports(result, run / "check.json", run / "check.junit.xml"))
""")


def test_a_run_listing_a_model_while_a_check_lists_its_verdict_loses_neither(run):
    """`check` held a lock of its own (flock on the directory) and `run` its `.lock`: they did not exclude each
    other, so a check that read the manifest before a resumed run listed a new model, and wrote it after, lost
    the model's entry (the run then refused its own model as unlisted). Every manifest update now takes the
    directory's lock."""
    env = {**os.environ, integrity_key.ENVIRONMENT_VARIABLE: "off"}
    checker = subprocess.Popen([sys.executable, "-c", SLOW_CHECK, str(run)], stdout=subprocess.PIPE, text=True,
                               env=env)
    try:
        assert checker.stdout.readline().strip() == "read"
        shutil.copy(run / "models" / "canary-target.npz", run / "models" / "canary-shadow-0001.npz")
        manifest.record(run, "models/canary-shadow-0001.npz", write_text=files_write)  # the run's update
    finally:
        assert checker.wait(timeout=60) == 0
    listed = manifest.entries(run)
    assert listed["models/canary-shadow-0001.npz"] == files.file_sha256(run / "models" / "canary-shadow-0001.npz")
    assert listed["check.json"] == files.file_sha256(run / "check.json")


def files_write(path: Path, text: str) -> None:
    from topicaudit.engine.storage.rundir import atomic_write_text
    atomic_write_text(path, text)


def test_a_manifest_update_waits_for_a_check_and_gives_up_clearly(run, monkeypatch):
    """Held elsewhere past the wait, a manifest update is one UserError naming the directory, nothing written."""
    import fcntl

    before = (run / manifest.NAME).read_bytes()
    fd = os.open(run, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(UserError, match="locked"):
            with manifest.directory_lock(run, seconds=0.2):
                pass
    finally:
        os.close(fd)
    assert (run / manifest.NAME).read_bytes() == before


# -- leftover 3: sizes have documented upper bounds --------------------------------------------------------------
@pytest.mark.parametrize("flags, names", [
    (["--k", "99999"], ["[target] k", "10,000"]),
    (["--shadows", "100000"], ["shadows", "4,096"]),
    (["--canaries", "3000000", "--shadows", "0"], ["[attack.canaries] count", "2,000,000"]),
])
def test_run_size_flags_have_an_upper_bound(tmp_path, capsys, monkeypatch, flags, names):
    """`run --k 99999` fitted for minutes (the note "at most 1500 topics can differ", then nothing)."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", *flags, "--output", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in names) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("toml, names", [
    ("[target.params]\nmax_iter = 1000000\n", ["max_iter", "100,000"]),
    ("[target]\nlearner = \"cgs\"\n[target.params]\nn_iter = 200000\n", ["n_iter", "100,000"]),
    ("[corpus]\nmax_words = 100000000\n", ["max_words", "10,000,000"]),
    ("[attack.canaries]\ncount = 10\nlength = 100000000\n", ["length", "100,000"]),
    ("[attack.canaries]\ncount = 10\nshadows = 10000\n", ["[attack.canaries] shadows", "4,096"]),
    ("[synthetic]\nn_docs = 100000000\n", ["n_docs", "10,000,000"]),
    ("[synthetic]\nk = 20000\n", ["[synthetic] k", "10,000"]),
])
def test_configuration_size_keys_have_an_upper_bound(tmp_path, capsys, monkeypatch, toml, names):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(toml)
    assert main(["run", str(tmp_path / "c.toml"), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in names) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_the_api_has_the_same_bounds(tmp_path, monkeypatch):
    import topicaudit
    from topicaudit.targets.learners.dp_svi import DPStochasticVariationalLDA
    from topicaudit.targets.learners.lda import VariationalLDA

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="10,000"):
        topicaudit.run({"target": {"k": 99999}, "output": str(tmp_path / "out")})
    with pytest.raises(UserError, match="2,000,000"):
        topicaudit.assert_privacy({"target": {"learner": "dp-cgs"}, "attack": {"shadows": 0}}, canaries=10**7,
                                  output=tmp_path / "out")
    with pytest.raises(ValueError, match="100,000"):
        VariationalLDA(k=5, max_iter=10**6)
    with pytest.raises(ValueError, match="10,000"):
        DPStochasticVariationalLDA(k=20000)
    assert not (tmp_path / "out").exists()


# -- the pass: a corpus file that changes while it is read is not cached under its former content ------------
def test_a_corpus_file_changed_while_it_is_read_does_not_poison_the_cache(tmp_path, monkeypatch):
    """The cache key hashed the corpus file, and the loader read it again: a file rewritten in between (a CI step
    regenerating it, or a forger) was stored under the key of the content it no longer had — MAC'd, with a key —
    and every later run of the original file was served the other corpus from the cache."""
    from topicaudit.inputs import cache
    from topicaudit.inputs.corpus import corpus_fingerprint, load_corpus

    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    corpus = tmp_path / "corpus.json"
    original = json.dumps({"text": [f"alpha beta gamma {i}" for i in range(20)]})
    other = json.dumps({"text": [f"delta epsilon {i}" for i in range(30)]})
    corpus.write_text(original)
    settings = {"preprocess": False, "text_field": "text"}

    def rewritten_before_it_is_read():
        corpus.write_text(other)
        return load_corpus(corpus, preprocess=False)

    with pytest.warns(UserWarning, match="changed while"):
        cache.cached_corpus(corpus, None, settings, rewritten_before_it_is_read)
    corpus.write_text(original)
    served = cache.cached_corpus(corpus, None, settings, lambda: load_corpus(corpus, preprocess=False))
    assert served.X.shape[0] == 20 and corpus_fingerprint(served) == corpus_fingerprint(load_corpus(corpus, preprocess=False))


# -- the pass: a signal whose exception Python cannot propagate is taken again --------------------------------
IGNORED = textwrap.dedent("""
    import ctypes, os, signal, time
    from topicaudit.cli import main as cli
    def inside():  # as llvmlite's object-cache hook, called from C while numba compiles a kernel
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    callback = ctypes.CFUNCTYPE(None)(inside)
    with cli._signals("run"):
        try:
            callback()
            print("returned", flush=True)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.001)
            print("never taken", flush=True)
        except cli.Terminated:
            print("taken", flush=True)
""")


def test_a_sigterm_raised_inside_a_ctypes_callback_is_taken_again():
    """A first SIGTERM 0.5 s into a CGS fit landed in numba's JIT (a ctypes callback of llvmlite): its exception
    was printed as "Exception ignored on calling ctypes callback function … Terminated" and lost, and the command
    fitted on until the supervisor forced it 30 s later (found by the pass in test_hardening.py's driver-fit
    test). Python's unraisable hook now hands it back to the handler, which takes it again once out of there."""
    done = subprocess.run([sys.executable, "-c", IGNORED], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["returned", "taken"], (done.stdout, done.stderr)
    assert "Exception ignored" not in done.stderr and done.returncode == 0, done.stderr


# -- the pass: manifests, names, paths and levels --------------------------------------------------------------
@pytest.mark.parametrize("entry", ["/dev/zero", "../plain/results.json", "", "models", "canaries.npz"])
def test_a_manifest_listing_no_file_of_the_run_is_refused(run, capsys, entry):
    """Entries outside the directory (`/dev/zero`, `../other/results.json`, ``) or with no SHA-256 were ignored
    without a word: a manifest topicaudit never writes was read as the run's."""
    data = json.loads((run / manifest.NAME).read_text())
    data["files"][entry] = "00"
    (run / manifest.NAME).write_text(json.dumps(data))
    assert main(["check", str(run), "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "manifest.json" in err and err.count("\n") == 1, err


def test_a_manifest_that_is_a_dangling_link_names_the_link(run, capsys):
    """It said "manifest.json is unreadable (UserError)"."""
    (run / manifest.NAME).unlink()
    (run / manifest.NAME).symlink_to(run / "nowhere")
    assert main(["check", str(run), "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "UserError" not in err, err


def test_a_deleted_working_directory_is_a_user_error(tmp_path, monkeypatch, capsys):
    """`run` (default output runs/…) from a directory deleted under the shell was exit 3, FileNotFoundError."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert main(["run", "--shadows", "0", "--canaries", "10", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "working directory" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("flags, names", [
    (["--num-cpus", "1000000000000", "--shadows", "2"], ["[ray] num_cpus", "4,096"]),
    (["--name", "a\u202eb", "--shadows", "0", "--canaries", "10"], ["name (--name)", "bidi"]),
    (["--corpus", "", "--shadows", "0", "--canaries", "10"], ["[corpus] path", "empty"]),
])
def test_run_refuses_what_the_pass_found(tmp_path, capsys, monkeypatch, flags, names):
    """--num-cpus 10**12 was exit 4 after Ray timed out starting; a name with a right-to-left override was
    accepted (a figure title reads backwards); `path = ""` read the configuration's own folder as the corpus."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", *flags, "--output", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert all(name in err for name in names) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_an_empty_path_in_a_configuration_file_is_not_its_folder(tmp_path, capsys):
    (tmp_path / "c.toml").write_text('[corpus]\npath = ""\n')
    assert main(["run", str(tmp_path / "c.toml"), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert "[corpus] path is empty" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["flag", "api", "toml"])
def test_alpha_above_one_half_is_refused(run, tmp_path, capsys, where):
    """`check --alpha 0.95` (α read as the confidence) said VIOLATED "at 5% confidence": a test that refutes a
    learner keeping its claim exactly more often than not. α ≤ 0.5, with the likely meaning named."""
    import topicaudit

    if where == "api":
        with pytest.raises(UserError, match="did you mean 0.05"):
            topicaudit.check(run, epsilon=1, alpha=0.95)
        return
    if where == "flag":
        code = main(["check", str(run), "--epsilon", "1", "--alpha", "0.95"])
    else:
        (tmp_path / "c.toml").write_text("[attack]\nalpha = 0.95\n")
        code = main(["run", str(tmp_path / "c.toml"), "--output", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "alpha" in err and "0.5" in err and err.count("\n") == 1, err


# -- the pass: parallel checks of one cached configuration -----------------------------------------------------
# Held long enough for assert_privacy's new process (``engine.cached_audit``) to start and find it held.
HOLD_WRITER = textwrap.dedent("""
    import sys, time
    from topicaudit.engine.storage.lock import writer_lock
    with writer_lock(sys.argv[1]):
        print("holding", flush=True)
        time.sleep(12.0)
""")


def test_a_check_of_a_cached_run_another_check_is_writing_waits_for_it(tmp_path, monkeypatch):
    """Two CI jobs (or pytest workers) checking claims of one configuration share its cache entry: the second was
    exit 2 "is being written by another topicaudit command" while the first fitted. It now waits, then reuses."""
    import topicaudit
    from topicaudit.api import as_config
    from topicaudit.engine.storage.run_cache import cached_run_dir

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    monkeypatch.chdir(tmp_path)
    settings = {"target": {"learner": "dp-cgs", "k": 3}, "attack": {"shadows": 0, "canaries": {"count": 40}}}
    entry = cached_run_dir(as_config(settings), tmp_path / "cache")
    entry.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, str(entry)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.warns(UserWarning, match="waiting for process"):
            result = topicaudit.assert_privacy(settings, cache=tmp_path / "cache")
    finally:
        holder.wait(timeout=60)
    assert not result.violated and result.run_dir == entry
