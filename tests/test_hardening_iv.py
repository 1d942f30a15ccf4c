"""Hardening III, the remaining items (issue 32): recorded mechanism constants, the API's argument checks,
clearer messages, run names, failed writes, the lock, signals at start-up and the corpus cache's limit.

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in a few seconds.
"""
import json
import shutil
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.engine.storage.durable_write import atomic_write_text

REPO = Path(__file__).resolve().parents[1]


# -- 12. results.json's recorded mechanism constants are type-checked -------------------------------------
@pytest.fixture(scope="module")
def mechanism_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h4") / "dp"
    assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--learner", "dp-cgs", "--output",
                 str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["canaries"]["mechanism"]["parameters"]["scale"] > 0
    return out


def forge_results(run_dir: Path, edit) -> None:
    """Edit results.json and record its new hash, as a forger who rewrites the manifest too would."""
    path = run_dir / "results.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    manifest.record(run_dir, "results.json", write_text=atomic_write_text)


@pytest.mark.parametrize("key, value", [
    ("scale", "21.3"), ("scale", float("nan")), ("scale", -1.0), ("scale", float("inf")), ("scale", None),
    ("scale", [1.0]), ("scale", 10**400), ("document_tokens", 2.5), ("document_tokens", True),
    ("noise_std", 0), ("sampling_rate", 1.5), ("keep_probability", "0.9"), ("alpha", 1.0), ("rho", -2),
    ("gamma", {}), ("noise", "cauchy"), ("delta", 1.0),
])
def test_a_recorded_mechanism_constant_of_the_wrong_type_is_refused_naming_it(mechanism_run, tmp_path, capsys,
                                                                                 key, value):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: data["canaries"]["mechanism"]["parameters"].__setitem__(key, value))
    code = main(["check", str(run), "--epsilon", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("topicaudit: error: ") and err.count("\n") == 1
    assert f"canaries.mechanism.parameters.{key} must be" in err and "rerun the audit" in err


@pytest.mark.parametrize("edit, named", [
    (lambda m: m.__setitem__("parameters", [1, 2]), "canaries.mechanism.parameters must be an object"),
    (lambda m: m.__setitem__("tokens", "128"), "canaries.mechanism.tokens must be an integer"),
    (lambda m: m.__setitem__("topics", -3), "canaries.mechanism.topics must be an integer"),
    (lambda m: m.__setitem__("kind", None), "canaries.mechanism.kind must be a string"),
])
def test_a_recorded_mechanism_of_the_wrong_shape_is_refused(mechanism_run, tmp_path, capsys, edit, named):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: edit(data["canaries"]["mechanism"]))
    assert main(["check", str(run), "--epsilon", "1"]) == 2
    assert named in capsys.readouterr().err


def test_the_untouched_mechanism_run_is_checked(mechanism_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: None)  # the same content, rehashed: still a run check reads
    assert main(["check", str(run), "--epsilon", "1"]) in (0, 1)
    assert capsys.readouterr().out.split(":")[0] in ("CONSISTENT", "VIOLATED", "NO SIGNAL")


# -- 18. the API's boundary is the command line's: arguments are checked, UserError (a ValueError) -----------
@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": "3"}, "epsilon must be a number (got '3')"),
    ({"epsilon": 10**400}, "epsilon must be a finite number (got an integer of 401 digits)"),
    ({"epsilon": True}, "epsilon must be a number (got True)"),
    ({"epsilon": -1.0}, "--epsilon must be a finite number ≥ 0"),
    ({"epsilon": 1.0, "delta": "0"}, "delta must be a number (got '0')"),
    ({"epsilon": 1.0, "alpha": [0.05]}, "alpha must be a number (got list)"),
])
def test_the_api_check_refuses_arguments_the_flags_would(mechanism_run, kwargs, message):
    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError) as caught:
        topicaudit.check(mechanism_run, **kwargs)
    assert isinstance(caught.value, ValueError) and message in str(caught.value)


def test_the_api_check_takes_numpy_numbers_and_a_path_string(mechanism_run):
    import numpy as np

    import topicaudit

    assert topicaudit.check(str(mechanism_run), epsilon=np.float64(1.0)).verdict in ("CONSISTENT", "VIOLATED",
                                                                                     "NO SIGNAL")


@pytest.mark.parametrize("kwargs, message", [
    ({"canaries": 50.5}, "canaries must be an integer (got 50.5)"),
    ({"canaries": "50"}, "canaries must be an integer (got '50')"),
    ({"epsilon": "1"}, "epsilon must be a number (got '1')"),
    ({"output": 3}, "output must be a path"),
])
def test_assert_privacy_refuses_arguments_before_any_fit(tmp_path, kwargs, message):
    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError, match=None) as caught:
        topicaudit.assert_privacy(None, **{"output": tmp_path / "out", **kwargs})
    assert message in str(caught.value) and not (tmp_path / "out").exists()


def test_report_of_one_path_string_is_that_directory_not_its_letters(tmp_path):
    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError) as caught:
        topicaudit.report(str(tmp_path / "RUN"), output=tmp_path / "report")
    assert str(tmp_path / "RUN") in str(caught.value)
    with pytest.raises(UserError, match="paths must be a path or a list of paths"):
        topicaudit.report(42)
    with pytest.raises(UserError, match="top must be an integer"):
        topicaudit.report([tmp_path], top="5")


def test_audit_model_refuses_a_matrix_for_phi_saying_to_save_it():
    import numpy as np

    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError, match=r"phi must be the path of Φ's file.*numpy.save") as caught:
        topicaudit.audit_model(np.full((2, 4), 0.25), "candidates.txt", "reference.txt")
    assert "'.25]]'" not in str(caught.value)


def test_run_refuses_a_configuration_of_another_type():
    import topicaudit
    from topicaudit.errors import UserError

    with pytest.raises(UserError, match="config .* must be a path"):
        topicaudit.run(12)


# -- 19. messages that say what is wrong --------------------------------------------------------------------
@pytest.mark.parametrize("count, message", [
    ("9223372036854775808", "[attack.canaries] count (--canaries) must be at most 2,000,000"),
    ("2000000000", "[attack.canaries] count (--canaries) must be at most 2,000,000"),  # was: memory (pass VIII)
])
def test_an_impossible_canary_count_is_named(tmp_path, capsys, count, message):
    out = tmp_path / "out"
    assert main(["run", "--shadows", "0", "--canaries", count, "--output", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Maximum allowed dimension" not in err and not out.exists()


def test_a_huge_integer_learner_parameter_is_named(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('[synthetic]\nn_docs = 50\nn_words = 60\n[target]\nlearner = "lda"\nk = 3\n'
                      '[target.params]\nmax_iter = 1000000000000000000000\n[attack]\nshadows = 0\n'
                      '[attack.canaries]\ncount = 20\n')
    assert main(["run", str(config), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "max_iter must be an integer ≤ 100,000" in err and "Maximum allowed dimension" not in err


def test_a_toml_file_with_a_byte_order_mark_is_read(tmp_path):
    from topicaudit.engine.configuration.loading import load_config

    config = tmp_path / "bom.toml"
    config.write_bytes(b"\xef\xbb\xbf[synthetic]\nn_docs = 57\n")
    assert load_config(config).synthetic.n_docs == 57


@pytest.mark.parametrize("alpha, shown", [(0.4999, "50.01% confidence"), (0.05, "95% confidence"),
                                          (0.001, "99.9% confidence")])
def test_the_confidence_is_printed_with_its_digits(mechanism_run, tmp_path, capsys, alpha, shown):
    main(["check", str(mechanism_run), "--epsilon", "1", "--alpha", str(alpha), "--json", str(tmp_path / "c.json"),
          "--junit", str(tmp_path / "c.xml")])
    out = capsys.readouterr().out
    assert shown in out, out


# -- 20 (and 15). a run's name is a plain, short directory name -------------------------------------------------
@pytest.mark.parametrize("name", ["../../x", "/ABSOLUTE/elsewhere", "a/b", "..", "", "tab\there"])
def test_a_name_that_is_no_plain_name_is_refused(tmp_path, capsys, monkeypatch, name):
    work = tmp_path / "a" / "b"  # "../../x" stays inside tmp_path whatever happens
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    name = name.replace("/ABSOLUTE", str(tmp_path / "abs"))
    assert main(["run", "--shadows", "0", "--canaries", "20", "--name", name, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("topicaudit: error: name (--name) ") and err.count("\n") == 1
    assert "give a plain name" in err and "--output" in err
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/b"]


def test_a_name_in_the_configuration_file_is_checked_too(tmp_path, capsys, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    (work / "c.toml").write_text('name = "../../x"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n')
    assert main(["run", "c.toml", "--quiet"]) == 2
    assert "name (--name) '../../x' is not a plain name" in capsys.readouterr().err


def test_a_long_name_is_refused_before_any_work(tmp_path, capsys):
    import time

    import topicaudit
    from topicaudit.errors import UserError

    assert main(["run", "--shadows", "0", "--canaries", "20", "--name", "x" * 101, "--output",
                 str(tmp_path / "out"), "--quiet"]) == 2
    assert "at most 100 bytes" in capsys.readouterr().err and not (tmp_path / "out").exists()
    start = time.monotonic()
    with pytest.raises(UserError, match="at most 4096"):
        topicaudit.run({"name": "n" * 10_000_000, "output": str(tmp_path / "big"),
                        "attack": {"shadows": 0, "canaries": {"count": 20}}})
    assert time.monotonic() - start < 10 and not (tmp_path / "big").exists()


def test_a_plain_name_still_names_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--shadows", "0", "--canaries", "20", "--k", "3", "--name", "pheme.v2 ünï", "--quiet"]) == 0
    assert [p.name.split("-")[0] for p in (tmp_path / "runs").iterdir()] == ["pheme.v2 ünï"]


def test_a_sweep_whose_runs_names_would_be_too_long_is_refused_before_any_run(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text(f'name = "{"s" * 95}"\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 20\n')
    assert main(["sweep", str(config), "--param", "target.k", "--values", "3", "--output", str(tmp_path / "sw"),
                 "--quiet"]) == 2
    assert "at most 100 bytes" in capsys.readouterr().err and not (tmp_path / "sw").exists()


# -- 14. a write over the file size limit (EFBIG) is a user error naming the file, like a full disk -------------
def test_a_file_size_limit_is_exit_2_naming_the_file(tmp_path):
    import resource
    import subprocess
    import sys

    out = tmp_path / "out"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))  # noqa: E731
    done = subprocess.run([sys.executable, "-m", "topicaudit.cli.supervisor", "run", "--shadows", "0", "--canaries",
                           "60", "--k", "3", "--output", str(out), "--quiet"], cwd=REPO, preexec_fn=limit,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"topicaudit: error: cannot write {out}") and done.stderr.count("\n") == 1
    assert "ulimit -f" in done.stderr and "16384 bytes" in done.stderr
    assert not out.exists()  # nothing half-written: the run directory an error stops before any model goes away


# -- 10. a signal at start-up: 130 with the interrupted line, once, never a traceback -------------------------
def _holds_sigint(pid: int) -> bool:
    """Whether the process holds SIGINT (the console script's first instruction), or has forked already."""
    import signal

    try:
        status = Path(f"/proc/{pid}/status").read_text()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return False
    blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    return bool(blocked & (1 << (signal.SIGINT - 1))) or bool(children.split())


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the signal mask from /proc (Linux)")
def test_a_ctrl_c_to_the_process_group_at_start_up_is_130_with_one_line():
    """SIGINT sent to the whole process group (a terminal, a CI runner) reaches the child and, passed on by the
    parent, reaches it again: the second one cut the child's line (exit 130 silently) or its exit code (3)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = Path(sys.executable).parent / "topicaudit"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "topicaudit.cli.supervisor"]
    ends = []
    for delay in (0.0, 0.005, 0.01, 0.02, 0.03, 0.05) * 2:
        process = subprocess.Popen([*command, "--version"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        while not _holds_sigint(process.pid):
            assert process.poll() is None
            time.sleep(0.0005)
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
        ends.append((delay, process.returncode, err))
    for delay, code, err in ends:
        if code == 0:  # --version finished before the signal came: nothing to interrupt
            continue
        assert code == 130 and err.count("interrupted") == 1 and "Traceback" not in err, (delay, code, err)


def test_the_console_script_holds_the_signals_from_its_entry_module():
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    # the `topicaudit` command is the shell launcher, which runs this console script (tests/test_launcher.py)
    assert pyproject["project"]["scripts"]["topicaudit-python"] == "topicaudit.cli.console:main"
    assert pyproject["tool"]["setuptools"]["script-files"] == ["audit/cli/topicaudit"]
    source = (REPO / "audit" / "cli" / "console.py").read_text()
    assert source.index("pthread_sigmask") < source.index("def main")  # on import, before anything else


# -- 7. the corpus cache's limit is stated ----------------------------------------------------------------------
def test_the_corpus_cache_docs_state_that_a_forged_entry_is_used():
    text = " ".join((REPO / "docs" / "corpora.md").read_text().split())
    assert "What it does not protect against: a forged entry." in text
    assert "TOPICAUDIT_CACHE_DIR=off" in text and "computed from public information" in text


def test_the_run_summary_prints_the_confidence_with_its_digits(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text("[target]\nk = 3\n[attack]\nshadows = 0\nalpha = 0.4999\n[attack.canaries]\ncount = 60\n")
    assert main(["run", str(config), "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "50.01% confidence" in out and "50% confidence" not in out, out
