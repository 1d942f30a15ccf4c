"""Hardening III (issue 32): the non-critical leftovers of hostile passes VIII and IX (tests/hostile_ix_cases.md,
"Non-critical findings"; tests/hostile_viii_cases.md, "Not fixed"), each with a test that failed before its fix.
Module-scoped runs are made once and copied where a test changes them."""
from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import topicaudit
from topicaudit.cli.main import main
from topicaudit.errors import UserError
from topicaudit.inputs import cache as corpus_cache
from topicaudit.inputs.corpus import Corpus
from topicaudit.engine.storage import durable_write, manifest
from topicaudit.inputs import integrity_key
from topicaudit import memory


# -- hidden state: the writers return what they wrote ----------------------------------------------------------
def test_the_writers_return_the_digest_and_keep_no_process_wide_record(tmp_path):
    """durable_write kept a process-wide map of every file written (popped when the manifest listed it): state
    no caller could see. The writer now returns the digest, and the caller hands it to the manifest."""
    text = '{"claimed_epsilon": 1.0}\n'
    assert durable_write.atomic_write_text(tmp_path / "a.json", text) == hashlib.sha256(text.encode()).hexdigest()
    written = durable_write.atomic_write_all([(tmp_path / "b", b"bee"), (tmp_path / "c", b"sea")])
    assert written == {tmp_path / "b": hashlib.sha256(b"bee").hexdigest(),
                       tmp_path / "c": hashlib.sha256(b"sea").hexdigest()}
    assert not any(isinstance(value, dict) for name, value in vars(durable_write).items()
                   if not name.startswith("__") and not inspect.ismodule(value))
    (tmp_path / "b").write_bytes(b"forged")  # a file replaced after its write: the manifest lists what was written
    manifest.record(tmp_path, "b", write_text=durable_write.atomic_write_text, written={"b": written[tmp_path / "b"]})
    assert manifest.entries(tmp_path)["b"] == hashlib.sha256(b"bee").hexdigest()


# -- shared runs -------------------------------------------------------------------------------------------------
KEY = "k" * 40
RUN_ARGS = ["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--quiet"]
# A claim those runs never refute (no outcome of 60 canaries proves more than ε ≈ 2.2), near enough that the
# verdict's search for a count whose ceiling passes it stops at a few thousand canaries (ε = 50: 600,000, ~9 CPU-s).
GENEROUS = "5"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A canary-only run written with an integrity key (``keyed``) and one without (``plain``)."""
    root = tmp_path_factory.mktemp("leftovers")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
        assert main([*RUN_ARGS, "--output", str(root / "keyed")]) == 0
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
        assert main([*RUN_ARGS, "--output", str(root / "plain")]) == 0
    return root


def copy_run(runs, name: str, where: Path) -> Path:
    shutil.copytree(runs / name, where / name)
    return where / name


# -- N7: a config.toml present but not yet listed is never listed as found -------------------------------------
def test_a_resumed_start_does_not_mac_an_edit_to_its_unlisted_config(runs, tmp_path, monkeypatch):
    """A start interrupted after config.toml was written, before the manifest listed it: the resume listed the file
    by hashing it from disk, so with a key an edit made to it in that state was MAC'd. It is written afresh."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    out = tmp_path / "resumed"
    out.mkdir()
    edited = (runs / "keyed" / "config.toml").read_text() + "# edited while unlisted\n"
    (out / "config.toml").write_text(edited)  # same config hash: the resume takes the directory
    assert main([*RUN_ARGS, "--output", str(out)]) == 0
    text = (out / "config.toml").read_text()
    assert "edited while unlisted" not in text
    assert manifest.read(out).authenticated
    assert manifest.entries(out)["config.toml"] == hashlib.sha256(text.encode()).hexdigest()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# -- N3: --json/--junit never over another topicaudit directory's files ----------------------------------------
def test_check_never_writes_its_verdict_over_another_runs_files(runs, tmp_path, monkeypatch, capsys):
    """`check RUN --json OTHER/results.json` overwrote another run's evidence (the guard covered only the run being
    read); OTHER was then refused by every later command."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    read, other = copy_run(runs, "plain", tmp_path / "a"), copy_run(runs, "plain", tmp_path / "b")
    assert main(["check", str(other), "--epsilon", GENEROUS, "--quiet"]) == 0  # other/check.json, listed
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"schema": "topicaudit.sweep/1", "runs": []}\n')
    before, capsys_before = snapshot(other), capsys.readouterr()
    for flag, target in (("--json", other / "results.json"), ("--json", other / "check.json"),
                         ("--junit", other / "check.junit.xml"), ("--json", other / "manifest.json"),
                         ("--junit", other / "models" / "new.xml"), ("--json", sweep / "sweep.json")):
        assert main(["check", str(read), "--epsilon", GENEROUS, flag, str(target)]) == 2, target
        err = capsys.readouterr().err
        assert str(target) in err and flag in err and err.count("\n") == 1, err
    assert snapshot(other) == before and "runs" in (sweep / "sweep.json").read_text()
    assert main(["check", str(read), "--epsilon", GENEROUS, "--json", "-"]) == 0  # standard output still works
    assert json.loads(capsys.readouterr().out)["verdict"] == "CONSISTENT"
    own = tmp_path / "mine"
    own.mkdir()
    (own / "results.json").write_text("{}\n")  # not topicaudit's: the user's own file to replace
    assert main(["check", str(read), "--epsilon", GENEROUS, "--json", str(own / "results.json")]) == 0
    assert main(["check", str(read), "--epsilon", GENEROUS, "--json", str(read / "check-generous.json")]) == 0


# -- N4: a check without the key never replaces the check.json a keyed manifest lists ----------------------------
def test_an_unkeyed_check_does_not_replace_a_keyed_runs_listed_check_json(runs, tmp_path, monkeypatch, capsys):
    """Checked with the key, then without it, then reported with it: the second check wrote check.json it could not
    list (the manifest carries a MAC), and report refused the run as edited (exit 2). It is refused before writing,
    naming the key; with its files elsewhere it gives its verdict as before."""
    run = copy_run(runs, "keyed", tmp_path)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    assert main(["check", str(run), "--epsilon", "1", "--quiet"]) == 1
    before = snapshot(run)
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    capsys.readouterr()
    assert main(["check", str(run), "--epsilon", GENEROUS, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert integrity_key.ENVIRONMENT_VARIABLE in err and "check.json" in err and err.count("\n") == 1, err
    assert snapshot(run) == before
    assert main(["check", str(run), "--epsilon", "1", "--quiet", "--json", str(tmp_path / "c.json"),
                 "--junit", str(tmp_path / "c.xml")]) == 1
    assert snapshot(run) == before
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    assert main(["report", str(run), "-o", str(tmp_path / "rep")]) == 0


# -- N6: the corpus cache's digest frames every field by its length ---------------------------------------------
def schema_1_digest(arrays) -> str:
    """The digest entries of schema 1 carry: ``name:dtype:shape`` then the bytes, no lengths."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def test_the_corpus_cache_digest_is_injective_and_old_entries_are_rebuilt(tmp_path):
    two = {"a": np.frombuffer(b"q", np.uint8), "b": np.frombuffer(b"B", np.uint8)}
    one = {"a:|u1:(1,)qb": np.frombuffer(b"B", np.uint8)}  # an array absorbed into a name
    assert schema_1_digest(two) == schema_1_digest(one)  # the old framing's collision
    assert corpus_cache._digest(two) != corpus_cache._digest(one)
    # An entry whose digest is framed the old way is rebuilt, never trusted (its key also names schema 1).
    corpus = Corpus(X=sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]])), vocabulary=np.array(["x", "y"]),
                    texts=None, source="test", doc_index=np.arange(2, dtype=np.int64), n_dropped_empty=0)
    entry = tmp_path / "entry.npz"
    corpus_cache.write_entry(entry, "k", corpus, [])
    assert corpus_cache.read_entry(entry, "k") is not None
    with np.load(entry) as z:
        arrays = {name: z[name] for name in z.files}
    plain = {name: values for name, values in arrays.items() if name not in ("key", "digest", "mac")}
    arrays["digest"] = np.frombuffer(schema_1_digest(plain).encode(), np.uint8)
    np.savez(entry, **arrays)
    assert corpus_cache.read_entry(entry, "k") is None


# -- N5: an address-space limit is exit 2 naming memory --------------------------------------------------------
@pytest.mark.parametrize("kib", [300_000, 400_000, 500_000])
def test_an_address_space_limit_is_exit_2_naming_memory(kib, tmp_path):
    """`ulimit -v` of 300–500 MB: importing scipy or numba failed (ImportError "failed to map segment", llvmlite's
    OSError, MemoryError), each exit 3 "internal error" with a traceback saved; then, at a place that changed from
    one start to the next (CI: numba's printed line and exit 3), so a limit below the libraries' need is said
    before they load."""
    env = {**os.environ, integrity_key.ENVIRONMENT_VARIABLE: "off", "TMPDIR": str(tmp_path)}
    command = (f"ulimit -v {kib} && exec {shlex.quote(sys.executable)} -m topicaudit.cli.main run --shadows 0 "
               f"--canaries 60 --k 3 --quiet --output {shlex.quote(str(tmp_path / 'run'))}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "memory" in done.stderr and "ulimit -v" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and not list(tmp_path.glob("topicaudit-crash-*"))


def test_a_limit_just_below_the_libraries_need_is_said_before_they_load(tmp_path):
    kib = memory.LIBRARIES_ADDRESS_SPACE // 1024 - 1
    code = (f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({kib} * 1024, resource.RLIM_INFINITY))\n"
            "from topicaudit.cli.main import run_command\n"
            f"code = run_command(['check', {str(tmp_path / 'no-run')!r}, '--epsilon', '3'])\n"
            "print(code, 'numba' in sys.modules, 'scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["2", "False", "False"], (done.stdout, done.stderr[-2000:])
    assert f"ulimit -v {kib}" in done.stderr and "memory" in done.stderr and done.stderr.count("\n") == 1


# numba's compiled part that could not be mapped (CI, `ulimit -v 500000`): numba printed the loader's
# "failed to map segment" itself, then raised "numba._devicearray failed to import", exit 3 with two lines.
_REFUSE_DEVICEARRAY = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "numba._devicearray":
            raise ImportError("/x/numba/_devicearray.so: failed to map segment from shared object")
sys.meta_path.insert(0, Refuse())
from topicaudit.cli.main import main
sys.exit(main())
"""


def test_numbas_part_that_could_not_be_mapped_is_one_line_naming_memory(tmp_path):
    env = {**os.environ, integrity_key.ENVIRONMENT_VARIABLE: "off", "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _REFUSE_DEVICEARRAY, "run", "--shadows", "0", "--canaries", "60",
                           "--k", "3", "--quiet", "--output", str(tmp_path / "run")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "out of memory" in done.stderr and "failed to map segment" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("error", [SystemError("error return without exception set"),
                                   SystemError("<function _find_and_load> returned NULL without setting an exception"),
                                   ImportError("numba._devicearray failed to import")])
def test_what_compiled_code_says_when_an_allocation_failed_is_memory_under_a_limit(error, monkeypatch):
    """Seen at `ulimit -v` of 300–500 MB: a C function's failed allocation that set no exception, and numba's
    import error that dropped the loader's; each exit 3 before. With no limit they are not taken for memory."""
    monkeypatch.setattr(memory, "address_space_limit", lambda: 500_000 * 1024)
    found = memory.out_of_memory(error)
    assert isinstance(found, UserError) and "ulimit -v 500000" in str(found), found
    monkeypatch.setattr(memory, "address_space_limit", lambda: None)
    assert memory.out_of_memory(error) is None


# -- pass VIII's low leftovers ---------------------------------------------------------------------------------
def test_report_names_itself_for_an_unknown_option(runs, tmp_path):
    """A23: ``report(R, bogus=1)`` was a TypeError naming the internal build_report()."""
    with pytest.raises(TypeError, match=r"\breport\(\)") as raised:
        topicaudit.report(runs / "plain", tmp_path / "rep", bogus=1)
    assert "build_report" not in str(raised.value)


def test_a_cache_dir_that_is_no_directory_names_the_variable(tmp_path, monkeypatch, capsys):
    """K3: TOPICAUDIT_CACHE_DIR=/dev/null was refused naming `--output /dev/null/runs/…`, a flag never given."""
    config = tmp_path / "priv.toml"
    config.write_text("[target]\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    monkeypatch.setenv(corpus_cache.ENVIRONMENT_VARIABLE, "/dev/null")
    assert main(["check", str(config), "--epsilon", "50", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert corpus_cache.ENVIRONMENT_VARIABLE in err and "--output" not in err and err.count("\n") == 1, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_report_whose_standard_output_is_full_says_so(runs, tmp_path):
    """D1: `report > /dev/full` blamed "the disk mounted at /"; the report itself is written."""
    env = {**os.environ, integrity_key.ENVIRONMENT_VARIABLE: "off"}
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "topicaudit.cli.main", "report", str(runs / "plain"), "-o",
                               str(tmp_path / "rep"), "--quiet"], stdout=full, stderr=subprocess.PIPE, text=True,
                              env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "standard output" in done.stderr and "disk mounted" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and (tmp_path / "rep" / "report.html").is_file()


@pytest.mark.parametrize("zero", ["-0", "-0.0"])
def test_a_claim_of_minus_zero_is_zero(runs, zero, tmp_path, monkeypatch, capsys):
    """V9: `--delta -0` printed "δ = -0" and recorded -0.0."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = copy_run(runs, "plain", tmp_path)
    assert main(["check", str(run), "--epsilon", zero, "--delta", zero, "--json", "-"]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert math.copysign(1, document["delta"]) == 1 and math.copysign(1, document["claimed_epsilon"]) == 1
    assert "-0" not in captured.err and "δ = 0" in captured.err


def test_a_blank_integrity_key_is_refused_not_read_as_none(runs, tmp_path, monkeypatch, capsys):
    """E9: TOPICAUDIT_INTEGRITY_KEY of blanks (a CI secret that expanded to spaces) read as "no key" without a word;
    empty stays "no key", as documented; an empty or blank key file is refused."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, " " * 40)
    assert main(["check", str(runs / "plain"), "--epsilon", "50", "--quiet", "--json", "-"]) == 2
    err = capsys.readouterr().err
    assert integrity_key.ENVIRONMENT_VARIABLE in err and "blank" in err and err.count("\n") == 1, err
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "")
    assert integrity_key.integrity_key() is None
    monkeypatch.delenv(integrity_key.ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "topicaudit").mkdir()
    (tmp_path / "topicaudit" / "integrity.key").write_text(" \n")
    (tmp_path / "topicaudit" / "integrity.key").chmod(0o600)
    with pytest.raises(UserError, match="empty"):
        integrity_key.integrity_key()
