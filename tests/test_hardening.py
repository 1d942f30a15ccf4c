"""Hostile input and failures: a crash is never a privacy verdict, and no run directory is left poisoned.

One section per failure found by trying the CLI as a new user would (exit codes
in docs/exit-codes.md). Most tests need no Ray: everything that can be refused
is refused before Ray starts, which is itself what they check.
"""
import csv
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from audit_files import audit_command

from topicaudit.cli import main as cli
from topicaudit.cli.main import main
from topicaudit.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def call(capsys, *args):
    code = main([*map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, err, expected_code=2):
    assert code == expected_code, err
    assert err.startswith("topicaudit: ") and err.strip().count("\n") == 0, err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- #
# A finished run directory, written by hand (no Ray): what `check` and `report` read
# --------------------------------------------------------------------------- #
def fake_run(path: Path, separable: bool, n: int = 400, seed: int = 0) -> Path:
    """results.json + scores.npz of a run; ``separable`` gives scores that prove a large ε."""
    rng = np.random.default_rng(seed)
    is_member = rng.random(n) < 0.5
    score = is_member.astype(float) + (0.0 if separable else rng.normal(size=n) * 100)
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({
        "schema": "topicaudit.results/1",
        "target": {"learner": "lda", "guarantee": {"epsilon": None, "delta": 0.0, "adjacency": None}},
        "epsilon_lower_bounds": {"delta": 1e-5},
    }))
    np.savez(path / "scores.npz", lira_online=score, lira_offline=score, is_member=is_member,
             doc_index=np.arange(n))
    return path


# --------------------------------------------------------------------------- #
# 1. `check` exits 1 only after a printed VIOLATED verdict
# --------------------------------------------------------------------------- #
def test_check_exits_1_only_with_a_violated_verdict(capsys, tmp_path):
    code, out, err = call(capsys, "check", fake_run(tmp_path / "leaky", separable=True), "--epsilon", 0.5)
    assert code == 1 and out.startswith("VIOLATED"), (out, err)
    # ε = 5, not 100: a claim that far above the audit's reach made the verdict search up to a million canaries
    code, out, err = call(capsys, "check", fake_run(tmp_path / "fine", separable=False), "--epsilon", 5)
    assert code == 0 and out.startswith("NO SIGNAL"), (out, err)  # scores of pure noise: not refuted, no signal


def _failure_paths(tmp_path: Path):
    """(name, argv, setup) for every way `check` can fail without a verdict."""
    run = lambda name: fake_run(tmp_path / name, separable=True)  # a violation, if it got that far  # noqa: E731
    nan_config = tmp_path / "nan.toml"
    nan_config.write_text("[target]\nparams = { doc_topic_prior = nan }\n[attack]\nshadows = 2\n")
    torn = run("torn")
    (torn / "scores.npz").write_bytes((torn / "scores.npz").read_bytes()[:60])
    empty = run("empty")
    (empty / "results.json").write_text("")
    foreign = run("foreign")
    (foreign / "results.json").write_text('{"target": 3}')
    (tmp_path / "a_file").write_text("x")
    return [
        ("json to /proc", ["check", run("proc"), "--epsilon", 0.5, "--json", "/proc/x.json"]),
        ("junit into a missing directory", ["check", run("junit"), "--epsilon", 0.5, "--junit",
                                            tmp_path / "no" / "such" / "x.xml"]),
        ("json path through a file", ["check", run("through"), "--epsilon", 0.5, "--json",
                                      tmp_path / "a_file" / "x.json"]),
        ("NaN learner prior in the config", ["check", nan_config, "--output", tmp_path / "nanrun"]),
        ("missing target", ["check", tmp_path / "absent"]),
        ("directory that is no run", ["check", tmp_path]),
        ("torn scores.npz", ["check", torn, "--epsilon", 0.5]),
        ("empty results.json", ["check", empty, "--epsilon", 0.5]),
        ("foreign results.json", ["check", foreign, "--epsilon", 0.5]),
        ("NaN claim", ["check", run("nan"), "--epsilon", "nan"]),
        ("claim the target does not make", ["check", run("noclaim")]),
    ]


def test_check_never_exits_1_on_a_failure(capsys, tmp_path):
    for name, argv in _failure_paths(tmp_path):
        code, out, err = call(capsys, *argv)
        assert code == 2, (name, code, out, err)
        assert_one_line_error(code, err)
        assert "VIOLATED" not in out, name
    assert not (tmp_path / "nanrun").exists()


@pytest.mark.parametrize("raised, expected_code, words", [
    (RuntimeError("boom"), 3, "internal error"),
    (SystemExit(1), 3, "internal error"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (cli.Terminated(), 130, "interrupted"),
    (MemoryError(), 2, "out of memory"),  # not a bug of ours: exit 2 naming memory and the fix
    (ValueError("a bug of ours"), 3, "internal error"),  # only UserError means bad input
    (UserError("[attack] alpha must be in (0, 1)"), 2, "error: [attack] alpha must be in (0, 1)"),
])
def test_check_crash_or_interrupt_is_not_a_verdict(capsys, tmp_path, monkeypatch, raised, expected_code, words):
    import topicaudit.engine.verdict

    def explode(*args, **kwargs):
        raise raised

    monkeypatch.setattr(topicaudit.engine.verdict, "judge", explode)
    monkeypatch.setattr(cli.tempfile, "tempdir", str(tmp_path))  # where the traceback is saved
    code, out, err = call(capsys, "check", fake_run(tmp_path / "run", separable=True), "--epsilon", 0.5)
    assert code == expected_code and words in err and "Traceback" not in err, err
    assert "VIOLATED" not in out
    if expected_code == 3:
        saved = re.search(r"traceback in (\S+)\)", err).group(1)
        assert "Traceback" in Path(saved).read_text()


def test_internal_error_prints_the_traceback_when_debugging(capsys, tmp_path, monkeypatch):
    import topicaudit.engine.verdict

    monkeypatch.setattr(topicaudit.engine.verdict, "judge", lambda *a, **k: 1 / 0)
    monkeypatch.setenv(cli.DEBUG_VARIABLE, "1")
    code, out, err = call(capsys, "check", fake_run(tmp_path / "run", separable=True), "--epsilon", 0.5)
    assert code == 3 and "Traceback" in err and "ZeroDivisionError" in err


def test_a_ray_failure_is_its_own_exit_code(capsys, tmp_path, monkeypatch):
    import ray.exceptions

    import topicaudit.engine.verdict

    def raylet_gone(*args, **kwargs):
        raise ray.exceptions.RaySystemError("the raylet died")

    monkeypatch.setattr(topicaudit.engine.verdict, "judge", raylet_gone)
    code, out, err = call(capsys, "check", fake_run(tmp_path / "run", separable=True), "--epsilon", 0.5)
    assert_one_line_error(code, err, expected_code=4)
    assert "rerun the same command" in err


def test_sigterm_during_check_of_a_config_exits_130(tmp_path):
    """A CI timeout (SIGTERM) while `check CONFIG` audits: 130 and one line, not 1 and a Ray dump."""
    config = tmp_path / "audit.toml"
    config.write_text("[synthetic]\nn_docs = 200\nn_words = 300\n[target]\nlearner = \"cgs\"\n"
                      "params = { n_iter = 100000 }\n[attack]\nshadows = 4\n[ray]\nnum_cpus = 1\n")
    process = subprocess.Popen([sys.executable, "-m", "topicaudit.cli.main", "check", str(config), "--epsilon", "1",
                                "--output", str(tmp_path / "run")], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TOPICAUDIT_DRIVER_FITS": "0"})  # Ray's workers fit every model
    deadline = time.monotonic() + 240
    while not (tmp_path / "run" / "plan.npz").exists():  # Ray is up and fitting
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, f"exit {process.returncode}\nstdout:\n{out}\nstderr:\n{err}"  # untruncated
    assert "VIOLATED" not in out and "Traceback" not in err and "interrupted" in err, err


def test_sigterm_while_the_driver_fits_and_ray_starts_exits_130_and_leaves_nothing(tmp_path):
    """SIGTERM while the driver fits the target (a CGS fit of minutes) and Ray starts beside it: 130 once Ray
    has started and stopped again, not after the fit, and no run directory (no model was saved)."""
    config = tmp_path / "audit.toml"
    config.write_text("[synthetic]\nn_docs = 4000\nn_words = 300\n[target]\nlearner = \"cgs\"\n"
                      "params = { n_iter = 100000 }\n[attack]\nshadows = 4\n[ray]\nnum_cpus = 1\n")
    trace = tmp_path / "trace.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "topicaudit.cli.main", "check", str(config), "--epsilon", "1",
                                "--output", str(tmp_path / "run")], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "TOPICAUDIT_PHASE_TRACE": str(trace)})
    deadline = time.monotonic() + 240
    while not (trace.exists() and '"figure"' in trace.read_text()):  # the driver's fits come next
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, f"exit {process.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    assert "VIOLATED" not in out and "Traceback" not in err and "interrupted" in err, err
    assert time.monotonic() - sent < 60  # the 100,000-sweep fit of 4,000 documents (minutes) was not waited for
    phases = [json.loads(line)["phase"] for line in trace.read_text().splitlines()]
    assert "driver_fits" in phases and "fits" not in phases, phases
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- #
# 2. CSV injection
# --------------------------------------------------------------------------- #
HOSTILE_CELLS = [
    "azz harmless\r=HYPERLINK('http://evil.example';'x')",
    "azz harmless;=HYPERLINK(\"http://evil.example\";\"x\")",
    "azz plain\t=1+1",
    "=cmd|' /C calc'!A0",
    "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1",
    "line one\nline two\r\nline three",
    'comma, and "quotes"',
]


def test_scores_csv_keeps_every_cell_in_its_cell():
    from topicaudit.attacks.ranking import SCORE_COLUMNS
    from topicaudit.engine.storage.scores_csv import scores_csv

    rows = [{**{c: 0.5 for c in SCORE_COLUMNS}, "rank": i + 1, "candidate": i, "id": f"doc{i}", "n_tokens": 3,
             "text": text} for i, text in enumerate(HOSTILE_CELLS)]
    rows.append({**rows[0], "id": "=evil()", "text": "fine"})
    written = scores_csv(rows, SCORE_COLUMNS + ("text",))
    parsed = list(csv.reader(io.StringIO(written, newline="")))
    assert len(parsed) == len(rows) + 1  # no cell broke out into a row of its own
    for row, record in zip(parsed[1:], rows):
        assert len(row) == len(SCORE_COLUMNS) + 1
        text = re.sub(r"(?<=[\n;,\t])(?=[=+\-@])", "'", record["text"].replace("\r\n", "\n").replace("\r", "\n"))
        assert row[-1] == ("'" + text if text[0] in "=+-@\t" else text)
        assert "\r" not in row[-1]
        assert row[2] == ("'" + record["id"] if record["id"][0] in "=+-@" else record["id"])
        assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in row[2:3] + row[-1:])
    # a spreadsheet whose locale separates cells with ";" or a tab meets no formula either
    for delimiter in (";", "\t", ","):
        for row in csv.reader(io.StringIO(written, newline=""), delimiter=delimiter):
            assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row), row


# --------------------------------------------------------------------------- #
# 3. learner parameters are checked in every learner's constructor
# --------------------------------------------------------------------------- #
BAD_PARAMETERS = {  # learner → (required params, [(key, bad value), ...])
    "lda": ({}, [("doc_topic_prior", math.nan), ("doc_topic_prior", -1.0), ("topic_word_prior", math.inf),
                 ("max_iter", -1), ("max_iter", 0), ("max_iter", 2.5)]),
    "sklearn-lda": ({}, [("doc_topic_prior", math.nan), ("topic_word_prior", -1.0), ("max_iter", 0)]),
    "cgs": ({}, [("alpha", math.nan), ("alpha", -1.0), ("beta", math.inf), ("beta", math.nan), ("n_iter", 0),
                 ("n_iter", -1), ("n_avg", 0), ("n_avg", 500)]),
    "cgs-monitor": ({}, [("alpha", math.inf), ("beta", math.inf), ("n_iter", 0), ("max_doc_length", 0)]),
    "dp-cgs": ({}, [("alpha", math.nan), ("beta", math.inf), ("n_iter", 0), ("epsilon", math.nan)]),
    "hdp-lda": ({}, [("alpha", math.inf), ("beta", math.inf), ("n_iter", 0), ("epsilon_l", math.nan)]),
    "dp-svi": ({}, [("eta", math.inf), ("alpha", math.nan), ("n_iter", 0), ("tau0", math.inf),
                    ("mean_change_tol", math.inf), ("epsilon", math.nan)]),
    "lp-lda": ({"epsilon": 1.0}, [("alpha", math.inf), ("beta", math.nan), ("n_iter", 0)]),
    "pf": ({}, [("a0", math.nan), ("b0", math.inf), ("n_iter", 0)]),
    "lppf": ({"epsilon": 1.0}, [("a0", math.inf), ("n_iter", -1), ("epsilon", math.nan)]),
    "lppf-naive": ({"epsilon": 1.0}, [("b0", -1.0), ("n_avg", 0)]),
    "gensim-lda": ({}, [("alpha", math.nan), ("alpha", "sometimes"), ("eta", math.inf), ("passes", 0),
                        ("chunksize", 2.5), ("iterations", 0), ("decay", math.nan), ("eval_every", -1)]),
    "tomotopy-lda": ({}, [("alpha", math.nan), ("alpha", [0.1, 0.2]), ("eta", -1.0), ("tw", "bm25"),
                          ("min_cf", -1), ("iterations", 0), ("optim_interval", 1.5)]),
    "bertopic": ({}, [("clustering", "umap"), ("min_topic_size", 1), ("min_df", math.nan), ("max_df", 2.0),
                      ("svd_components", 0), ("bm25_weighting", 1)]),
}


def test_every_learner_is_covered():
    from topicaudit.targets import LEARNERS

    assert set(BAD_PARAMETERS) == set(LEARNERS)


@pytest.mark.parametrize("learner", sorted(BAD_PARAMETERS))
def test_a_learner_refuses_bad_parameters_when_built(learner):
    from topicaudit.targets import build_target

    optional = {"gensim-lda": "gensim", "tomotopy-lda": "tomotopy"}
    if learner in optional:
        pytest.importorskip(optional[learner])  # an optional extra (topicaudit[gensim], [tomotopy])
    required, bad = BAD_PARAMETERS[learner]
    build_target(learner, 3, "all", dict(required))  # the defaults are valid
    for key, value in bad:
        with pytest.raises(UserError, match=rf"\[target\.params\]: {key} "):
            build_target(learner, 3, "all", {**required, key: value})


def test_run_with_a_nan_prior_costs_milliseconds_and_leaves_nothing(capsys, tmp_path):
    config = tmp_path / "nan.toml"
    config.write_text("[target]\nparams = { doc_topic_prior = nan }\n")
    started = time.perf_counter()
    code, out, err = call(capsys, "run", config, "--output", tmp_path / "run")
    assert_one_line_error(code, err)
    assert "doc_topic_prior" in err and "[target.params]" in err
    assert time.perf_counter() - started < 30  # no Ray (a loaded machine still answers in seconds)
    assert not (tmp_path / "run").exists()


@pytest.fixture
def audit_inputs(tmp_path):
    return [*audit_command(tmp_path, documents=20, candidates=8), "--shadows", 2]


@pytest.mark.parametrize("param", ["doc_topic_prior=nan", "doc_topic_prior=-1.0", "max_iter=-1"])
def test_audit_refuses_a_bad_param_and_leaves_nothing(capsys, tmp_path, audit_inputs, param):
    code, out, err = call(capsys, *audit_inputs, "--param", param, "--output", tmp_path / "run")
    assert_one_line_error(code, err)
    assert "--param" in err and param.split("=")[0] in err
    assert not (tmp_path / "run").exists()


# --------------------------------------------------------------------------- #
# 4. seeds
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("seed", [10**23, 2**63, -1])
def test_a_seed_out_of_range_is_refused_before_anything(capsys, tmp_path, audit_inputs, seed):
    code, out, err = call(capsys, "run", "--seed", seed, "--output", tmp_path / "run")
    assert_one_line_error(code, err)
    assert "[0, 2**63 − 1]" in err or "non-negative" in err
    code, out, err = call(capsys, *audit_inputs, "--seed", seed, "--output", tmp_path / "audit")
    assert_one_line_error(code, err)
    assert not (tmp_path / "run").exists() and not (tmp_path / "audit").exists()


def test_the_largest_seed_plans():
    from topicaudit.engine.execution.plan import make_plan

    plan = make_plan(10, 2, 2**63 - 1)
    assert plan.seed == 2**63 - 1 and int(plan.arrays()["seed"]) == 2**63 - 1
    with pytest.raises(UserError, match="2\\*\\*63"):
        make_plan(10, 2, 2**63)


# --------------------------------------------------------------------------- #
# 5. durable files; torn models are refitted, a torn plan or config is named
# --------------------------------------------------------------------------- #
def _release():
    from topicaudit.targets.base import Release

    return Release(phi=np.full((2, 3), 1 / 3, dtype=np.float32), vocabulary=np.arange(3))


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "zip without entries"])
def test_an_unreadable_model_is_refitted_with_a_note(tmp_path, damage):
    import zipfile

    from topicaudit.engine.storage.rundir import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.create({"name": "x"}, {"config_hash": "abc"})
    run.save_model(6, _release(), "abc", 1.0)
    path = run.model_path(6)
    data = path.read_bytes()
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(os.urandom(200))
    else:
        with zipfile.ZipFile(path, "w"):
            pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run.load_model(6, "abc") is None
    assert not path.exists()
    assert any("shadow-0007.npz is unreadable" in str(w.message) and "refitting" in str(w.message)
               for w in caught)


def test_every_run_file_is_written_durably(tmp_path, monkeypatch):
    from topicaudit.engine.storage import rundir
    from topicaudit.engine.execution.plan import make_plan
    from topicaudit.engine.storage.results import RunResults

    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else fd)
        real_fsync(fd)

    monkeypatch.setattr(rundir.os, "fsync", fsync)
    run = rundir.RunDirectory(tmp_path / "run")
    run.create({"name": "x"}, {"config_hash": "abc"})
    run.keep_plan(make_plan(10, 2, 0).arrays())
    run.save_model(None, _release(), "abc", 1.0)
    run.save_arrays("scores.npz", {"a": np.zeros(3)})
    run.save_results(RunResults.from_json({"schema": "topicaudit.results/1",
                                           "target": {"guarantee": {"epsilon": None, "delta": 0.0}}}))
    files = [s for s in synced if ".tmp" in str(s) and ".manifest.json." not in str(s)]
    assert any(".manifest.json." in str(s) for s in synced)  # the manifest is as durable as the files
    directories = [s for s in synced if str(s) in (str(run.path), str(run.models))]
    assert len(files) == 5, synced  # config.toml, plan.npz, target.npz, scores.npz, results.json
    assert str(run.path) in directories and str(run.models) in directories
    assert not list(run.path.rglob("*.tmp"))


def test_a_failed_write_leaves_the_old_file(tmp_path):
    from topicaudit.engine.storage.durable_write import atomic_write_bytes

    path = tmp_path / "plan.npz"
    path.write_bytes(b"old")

    def fails(handle):
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write_bytes(path, fails)
    assert path.read_bytes() == b"old" and list(tmp_path.iterdir()) == [path]


def test_a_torn_plan_or_config_is_a_clear_error(tmp_path):
    from topicaudit.engine.execution.plan import make_plan
    from topicaudit.engine.storage.rundir import RunDirectory

    run = RunDirectory(tmp_path / "run")
    run.create({"name": "x"}, {"config_hash": "abc"})
    plan = make_plan(10, 2, 0).arrays()
    run.keep_plan(plan)
    run.keep_plan(plan)  # resuming: the same plan
    with pytest.raises(UserError, match="not the plan of this configuration"):
        run.keep_plan(make_plan(10, 2, 1).arrays())
    (run.path / "plan.npz").write_bytes((run.path / "plan.npz").read_bytes()[:40])
    with pytest.raises(UserError, match=r"plan\.npz is unreadable"):
        run.keep_plan(plan)
    (run.path / "config.toml").write_text("")
    with pytest.raises(UserError, match=r"config\.toml cannot be read"):
        run.check_compatible("abc")


def test_report_names_a_torn_plan(capsys, tmp_path):
    from topicaudit.reports.collect import Run

    path = fake_run(tmp_path / "run", separable=False)
    (path / "plan.npz").write_bytes(b"PK\x03\x04 torn")
    run = Run(path=path, results={}, config={})
    with pytest.raises(UserError, match=r"plan\.npz is unreadable"):
        run._arrays("plan.npz")


# --------------------------------------------------------------------------- #
# 6. outputs that cannot be written are refused before Ray starts
# --------------------------------------------------------------------------- #
def test_unwritable_outputs_are_refused_at_once(capsys, tmp_path, audit_inputs):
    (tmp_path / "a_file").write_text("x")
    through_file = tmp_path / "a_file" / "run"
    for argv in (["run", "--output", "/proc/x"], ["run", "--output", through_file],
                 [*audit_inputs, "--output", "/proc/x"], [*audit_inputs, "--output", through_file],
                 ["report", fake_run(tmp_path / "r", separable=False), "-o", "/proc/x"],
                 ["report", tmp_path / "r", "-o", through_file]):
        started = time.perf_counter()
        code, out, err = call(capsys, *argv)
        assert_one_line_error(code, err)
        assert "cannot write" in err, err
        assert time.perf_counter() - started < 30


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the permissions")
def test_a_read_only_parent_is_refused(capsys, tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    code, out, err = call(capsys, "run", "--output", parent / "run")
    assert_one_line_error(code, err)
    assert "not writable" in err


# --------------------------------------------------------------------------- #
# 7. absurd sizes
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("table, message", [
    ("[attack]\nshadows = 100000000000\n", "4,096"),  # the documented bound (pass VIII), before memory
    ("[synthetic]\nn_docs = 0\n", "n_docs"),
    ("[synthetic]\nn_words = 0\n", "n_words"),
    ("[synthetic]\nmean_length = -1.0\n", "mean_length"),
    ("[synthetic]\nn_docs = 100000000000\nn_words = 100000000\n", "10,000,000"),
    ("[synthetic]\nn_docs = 10000000\nn_words = 10000000\nk = 10000\n", "memory"),
])
def test_absurd_sizes_are_refused(capsys, tmp_path, table, message):
    config = tmp_path / "absurd.toml"
    config.write_text(table)
    code, out, err = call(capsys, "run", config, "--output", tmp_path / "run")
    assert_one_line_error(code, err)
    assert message in err and not (tmp_path / "run").exists()


def test_a_device_is_not_read_as_a_corpus(capsys, tmp_path):
    code, out, err = call(capsys, "run", "--corpus", "/dev/zero", "--format", "json", "--output", tmp_path / "r")
    assert_one_line_error(code, err)
    assert "not a regular file" in err


# --------------------------------------------------------------------------- #
# 8. Ray: a local instance without runtime_env, quiet banners
# --------------------------------------------------------------------------- #
def test_raylet_banners_become_one_note(capsys):
    import ray._private.worker as worker

    from topicaudit.engine.execution.ray_local import quiet_raylet_banners

    original = worker.print_to_stdstream
    try:
        quiet_raylet_banners(sys.modules["ray"])
        worker.print_to_stdstream({"lines": ["A worker died or was killed while executing a task.\nline 2\n"
                                             "line 3"], "pid": "raylet", "is_err": False})
    finally:
        worker.print_to_stdstream = original
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "A worker died" in captured.err


# --------------------------------------------------------------------------- #
# 9. messages
# --------------------------------------------------------------------------- #
def test_a_file_that_is_no_tarball_gives_one_line(capsys, tmp_path):
    (tmp_path / "news.tar.gz").write_text("not a tarball")
    code, out, err = call(capsys, "run", "--corpus", tmp_path / "news.tar.gz", "--output", tmp_path / "r")
    assert_one_line_error(code, err)
    assert "not a readable tar archive" in err


def test_report_on_an_audit_directory_says_what_it_is(capsys, tmp_path):
    path = tmp_path / "audit-run"
    path.mkdir()
    (path / "config.toml").write_text('schema = "topicaudit.user-audit/1"\n')
    (path / "audit.json").write_text("{}")
    code, out, err = call(capsys, "report", path)
    assert_one_line_error(code, err)
    assert "`topicaudit audit`" in err and "rerun the same `topicaudit run`" not in err


def test_an_unknown_top_level_key_lists_the_tables(capsys, tmp_path):
    config = tmp_path / "typo.toml"
    config.write_text("shadows = 4\n")
    code, out, err = call(capsys, "run", config)
    assert_one_line_error(code, err)
    assert "[attack]" in err and "[synthetic]" in err


def test_out_of_vocabulary_words_are_quoted_plainly():
    from topicaudit.inputs.corpus import load_corpus

    with pytest.raises(UserError) as refused:
        load_corpus(["apple banana", "cherry date"], vocabulary=np.array(["azz", "bzz"]))
    assert "'azz'" in str(refused.value) and "np.str_" not in str(refused.value)


def test_the_format_hint_names_the_flag(capsys, tmp_path):
    (tmp_path / "corpus.dat").write_text("x")
    code, out, err = call(capsys, "run", "--corpus", tmp_path / "corpus.dat", "--output", tmp_path / "r")
    assert_one_line_error(code, err)
    assert "--format" in err and "format=" not in err


def test_control_and_bidi_characters_are_visible_in_reports():
    from topicaudit.reports.document import Paragraph, Report, Section, Table
    from topicaudit.reports.html import render_html
    from topicaudit.reports.markdown import render_markdown

    hostile = "doc\x00name \u202egnp.exe \u2066x\u2069 \x1b[31m"
    report = Report(title=hostile, summary=[hostile], sections=[
        Section(hostile, [Paragraph(hostile), Table([hostile], [[hostile]])])])
    for page in (render_html(report), render_markdown(report)):
        assert not re.search("[\x00\x1b\u202a-\u202e\u2066-\u2069]", page)
        assert "\\x00" in page and "\\u202e" in page and "\\u2066" in page


def test_more_topics_than_words_is_noted(capsys, tmp_path, monkeypatch):
    import topicaudit.engine.execution.experiment

    def stop_before_ray(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(topicaudit.engine.execution.experiment, "ray_session", stop_before_ray)
    (tmp_path / "tiny.json").write_text(json.dumps({"text": [f"w{i % 8} w{(i + 1) % 8}" for i in range(20)]}))
    code, out, err = call(capsys, "run", "--corpus", tmp_path / "tiny.json", "--no-preprocess", "--k", 50,
                          "--output", tmp_path / "run")
    assert code == 130
    assert "50 topics for a vocabulary of 8 words" in err


def test_an_empty_output_is_refused(capsys, tmp_path, audit_inputs):
    for argv in (["run", "--output", ""], [*audit_inputs, "--output", ""]):
        code, out, err = call(capsys, *argv)
        assert_one_line_error(code, err)
        assert "empty" in err


# --------------------------------------------------------------------------- #
# the exit-code table is the one the code uses
# --------------------------------------------------------------------------- #
def test_the_documented_exit_codes_are_the_codes():
    table = (REPO / "docs" / "exit-codes.md").read_text()
    documented = {int(code) for code in re.findall(r"^\|\s*`?(\d+)`?\s*\|", table, flags=re.M)}
    assert documented == {cli.EXIT_OK, cli.EXIT_REFUTED, cli.EXIT_USER_ERROR, cli.EXIT_INTERNAL_ERROR,
                          cli.EXIT_RAY_FAILED, cli.EXIT_INTERRUPTED}


def test_sweep_refuses_an_empty_or_unwritable_output(capsys, tmp_path):
    config = tmp_path / "base.toml"
    config.write_text("[attack]\nshadows = 2\n")
    for output in ("", "/proc/x"):
        code, out, err = call(capsys, "sweep", config, "--param", "target.k", "--values", "2,3", "--output", output)
        assert_one_line_error(code, err)


def test_ray_that_does_not_start_is_a_ray_failure(capsys, tmp_path, monkeypatch, own_ray):
    import ray

    def overloaded(*args, **kwargs):
        raise Exception("The current node timed out during startup.")

    monkeypatch.setattr(ray, "init", overloaded)
    code, out, err = call(capsys, "run", "--quiet", "--output", tmp_path / "run")
    assert_one_line_error(code, err, expected_code=4)
    assert "timed out during startup" in err and not (tmp_path / "run").exists()


def test_library_code_raises_a_standard_exception(tmp_path):
    """Python callers catch bad input as ValueError (UserError is one); the message still names file and fix."""
    from topicaudit.inputs.user_model import load_user_model

    np.save(tmp_path / "phi.npy", np.full((3, 4), np.nan))
    (tmp_path / "vocab.txt").write_text("a\nb\nc\nd\n")
    with pytest.raises(ValueError, match=r"phi\.npy: Φ holds 12 NaN") as caught:
        load_user_model(tmp_path / "phi.npy", tmp_path / "vocab.txt")
    assert isinstance(caught.value, UserError)
