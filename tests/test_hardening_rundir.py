"""A verdict only from an intact, finished audit: the process guard on exit 1 and the run directory's integrity.

Every tamper and damage case gives exit 2 naming the file (never a bound), with
the manifest in place and with it deleted (the checks that do not trust it);
a crash of the process in Ray's C++ layer is exit 4, never exit 1.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.inputs.files import file_sha256
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.engine.run import execute_run
from topicaudit.errors import UserError

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"name": "tamper", "seed": 3, "synthetic": {"n_docs": 200, "n_words": 300, "mean_length": 30},
          "target": {"k": 3, "params": {"max_iter": 5}}, "attack": {"shadows": 2, "canaries": {"count": 60}},
          "ray": {"num_cpus": 2}}
CLAIM = "0.01"  # plain LDA with canaries proves more than this


@pytest.fixture(scope="module")
def finished(tmp_path_factory, ray_holder):
    """A finished run with shadows and canaries whose check at ε = 0.01 is VIOLATED."""
    ray_holder.start()
    out = tmp_path_factory.mktemp("rundir") / "run"
    execute_run(config_from_dict({**CONFIG, "output": str(out)}), quiet=True)
    return out


@pytest.fixture
def run(finished, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def check(capsys, run_dir, *extra):
    code = main(["check", str(run_dir), "--epsilon", CLAIM, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def arrays(path):
    with np.load(path, allow_pickle=False) as z:
        return dict(z)


def rewrite(path, **changes):
    data = arrays(path)
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value(data[key]) if callable(value) else value
    np.savez(path, **data)


def pre_manifest(run, results=True):
    """The layout written before manifests existed: no manifest, no mark of one, no model recording its slot
    (here: no models, which check and report do not read)."""
    (run / manifest.NAME).unlink()
    if results:
        _edit_results(run, lambda d: d.pop(manifest.MARK))
    config = run / "config.toml"
    config.write_text(re.sub(r"^manifest = .*\n", "", config.read_text(), flags=re.M))
    shutil.rmtree(run / "models")


def test_the_untouched_run_is_violated_and_its_manifest_lists_every_file(run, capsys):
    code, out, err = check(capsys, run)
    assert code == 1 and out.startswith("VIOLATED"), err
    listed = manifest.entries(run)
    for name in ("config.toml", "plan.npz", "scores.npz", "statistics.npz", "canaries.npz", "canary_scores.npz",
                 "results.json", "models/target.npz", "models/shadow-0001.npz", "models/canary-target.npz"):
        assert listed[name] == file_sha256(run / name), name


TAMPERS = {
    "shuffled coins": ("canaries.npz", lambda p: rewrite(p, coins=lambda c: np.random.default_rng(0).permutation(c))),
    "permuted canary ids": ("canary_scores.npz", lambda p: _permute_scores(p)),
    "NaN canary scores": ("canary_scores.npz", lambda p: rewrite(p, zeta=lambda s: np.full_like(s, np.nan))),
    "NaN natural scores": ("scores.npz", lambda p: rewrite(p, lira_online=lambda s: np.where(s > 0, np.nan, s))),
    "flipped is_member": ("scores.npz", lambda p: rewrite(p, is_member=lambda m: ~m)),
}


def _permute_scores(path):
    data = arrays(path)
    order = np.random.default_rng(1).permutation(data["ids"].size)
    np.savez(path, **{name: values[order] for name, values in data.items()})


@pytest.mark.parametrize("case", sorted(TAMPERS))
@pytest.mark.parametrize("manifest_kept", [True, False])
def test_a_tampered_run_gives_no_bound(run, capsys, case, manifest_kept):
    """Caught by the manifest; and without it by the checks that do not trust it, except shuffled coins
    (their file is as valid as the original: only its hash tells them apart)."""
    if case == "shuffled coins" and not manifest_kept:
        pytest.skip("only the manifest can tell shuffled coins from the drawn ones")
    name, tamper = TAMPERS[case]
    tamper(run / name)
    if not manifest_kept:
        pre_manifest(run)
    code, out, err = check(capsys, run)
    assert code == 2 and "VIOLATED" not in out and "CONSISTENT" not in out, (case, out, err)
    assert err.startswith("topicaudit: error: ") and name in err and err.count("\n") == 1, err


DAMAGE = {
    "integer coins": ("canaries.npz", dict(coins=lambda c: c.astype(np.int64))),
    "NaN coins": ("canaries.npz", dict(coins=lambda c: np.where(c, np.nan, 0.0))),
    "missing ids": ("canaries.npz", dict(ids=None)),
    "missing coins": ("canaries.npz", dict(coins=None)),
    "2-D scores": ("scores.npz", dict(lira_online=lambda s: np.stack([s, s]))),
    "2-D canary scores": ("canary_scores.npz", dict(zeta=lambda s: s[:, None])),
    "short is_member": ("scores.npz", dict(is_member=lambda m: m[:-1])),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_array_is_exit_2_naming_the_file(run, capsys, case):
    name, changes = DAMAGE[case]
    rewrite(run / name, **changes)
    pre_manifest(run)
    code, out, err = check(capsys, run)
    assert code == 2 and not out, (case, err)
    assert name in err and "Traceback" not in err and err.count("\n") == 1, err


def _edit_results(run, edit):
    path = run / "results.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("case", ["epsilon as a string", "nested JSON", "link to /dev/zero"])
def test_a_damaged_results_json_is_exit_2_naming_it(run, capsys, case):
    path = run / "results.json"
    if case == "epsilon as a string":
        _edit_results(run, lambda d: d["target"]["guarantee"].update(epsilon="3"))
    elif case == "nested JSON":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        path.unlink()
        path.symlink_to("/dev/zero")
    pre_manifest(run, results=case == "epsilon as a string")
    code, out, err = check(capsys, run, *(() if case != "epsilon as a string" else ()))
    assert code == 2 and not out, (case, err)
    assert "results.json" in err and err.count("\n") == 1, err


def test_an_edited_results_json_is_caught_by_the_manifest(run, capsys):
    _edit_results(run, lambda d: d["target"].update(k=99))
    code, out, err = check(capsys, run)
    assert code == 2 and "results.json" in err and "SHA-256" in err


def test_report_verifies_the_run_too(run, capsys, tmp_path):
    rewrite(run / "scores.npz", is_member=lambda m: ~m)
    assert main(["report", str(run), "-o", str(tmp_path / "report"), "--quiet"]) == 2
    assert "scores.npz" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


# -- models on resume ----------------------------------------------------------------------------------
def _load(run, index, **expect):
    chash = str(arrays(run / "models" / "target.npz")["config_hash"])
    return RunDirectory(run).load_model(index, chash, **expect)


def test_a_shadow_copied_over_the_target_is_refused(run):
    shutil.copy(run / "models" / "shadow-0001.npz", run / "models" / "target.npz")
    with pytest.raises(UserError, match="target.npz.*SHA-256"):
        _load(run, None)
    (run / manifest.NAME).unlink()
    with pytest.raises(UserError, match="target.npz holds the model 'shadow-0001'"):
        _load(run, None)


def test_a_model_with_another_k_or_bad_vocabulary_is_refused(run):
    (run / manifest.NAME).unlink()
    assert _load(run, 0, n_topics=3, n_words=300) is not None
    path = run / "models" / "shadow-0001.npz"
    rewrite(path, phi=lambda phi: phi[:2])
    with pytest.raises(UserError, match="shadow-0001.npz: it has 2 topics where this run fits 3"):
        _load(run, 0, n_topics=3, n_words=300)
    path = run / "models" / "shadow-0002.npz"
    rewrite(path, vocabulary=lambda v: v + 10_000)
    with pytest.raises(UserError, match="shadow-0002.npz: its vocabulary ids"):
        _load(run, 1, n_topics=3, n_words=300)


def test_resuming_onto_a_swapped_target_is_exit_2(run, capsys):
    shutil.copy(run / "models" / "shadow-0002.npz", run / "models" / "target.npz")
    config = config_from_dict({**CONFIG, "output": str(run)})
    (run / "results.json").unlink()
    with pytest.raises(UserError, match="target.npz"):
        execute_run(config, quiet=True)


# -- exit 1 only with VIOLATED -------------------------------------------------------------------------
def console(*args, timeout=300):
    """The command as a user runs it: its own process, under the supervisor."""
    return subprocess.run([sys.executable, "-m", "topicaudit.cli.main", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def test_exit_1_never_comes_without_the_violated_line(finished, tmp_path, capsys):
    """Every failure path of `check`: exit 1 exactly when VIOLATED is printed. Each case runs in this process;
    one of each exit code (0, 1, 2: an edit the manifest catches, a FIFO, no directory) also as the console
    script, in its own process under the supervisor, whose mapping of how the process ended is the point."""
    cases = {"untouched": lambda d: None, "no directory": lambda d: shutil.rmtree(d)}
    cases.update({name: (lambda d, n=name: TAMPERS[n][1](d / TAMPERS[n][0])) for name in TAMPERS})
    cases.update({name: (lambda d, n=name: rewrite(d / DAMAGE[n][0], **DAMAGE[n][1])) for name in DAMAGE})
    cases["results.json is a FIFO"] = lambda d: ((d / "results.json").unlink(), os.mkfifo(d / "results.json"))
    cases["no manifest, flipped truth"] = lambda d: (pre_manifest(d),
                                                     rewrite(d / "scores.npz", is_member=lambda m: ~m))
    in_a_process = {"untouched", "no directory", "flipped is_member", "results.json is a FIFO"}
    # A claim no outcome of this audit could refute: just above its ceiling (1000 made each process search up
    # to a million canaries for a count that could refute it, ~10 CPU-s).
    shutil.copytree(finished, tmp_path / "ceiling")
    assert main(["check", str(tmp_path / "ceiling"), "--epsilon", CLAIM]) == 1
    above = f"{json.loads((tmp_path / 'ceiling' / 'check.json').read_text())['ceiling'] * 1.25 + 0.01:.2f}"
    capsys.readouterr()
    checks = []
    for i, (name, damage) in enumerate(cases.items()):
        run_dir = tmp_path / f"r{i}"
        shutil.copytree(finished, run_dir)
        damage(run_dir)
        # A damaged directory is refused before any bound, whatever the claim: only the claim the intact run
        # violates could bring a wrong exit 1, so it alone is checked there.
        checks += [(name, claim, run_dir) for claim in ((CLAIM, above) if name == "untouched" else (CLAIM,))]
    codes = {}
    for name, claim, run_dir in checks:
        code = main(["check", str(run_dir), "--epsilon", claim])
        out = capsys.readouterr().out
        assert (code == 1) == out.startswith("VIOLATED") and code in (0, 1, 2), (name, claim, code, out)
        codes[name, claim] = code
    assert codes["untouched", CLAIM] == 1 and codes["untouched", above] == 0
    assert sum(code == 1 for code in codes.values()) == 1
    processes = [c for c in checks if c[0] in in_a_process]
    # Each is its own process on its own copy (check writes check.json beside the files): one per core.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done_checks = pool.map(lambda c: console("check", c[2], "--epsilon", c[1], timeout=120), processes)
        for (name, claim, _), done in zip(processes, done_checks):
            violated = done.stdout.startswith("VIOLATED")
            assert (done.returncode == 1) == violated, (name, claim, done.returncode, done.stdout, done.stderr)
            assert done.returncode == codes[name, claim], (name, claim, done.returncode, done.stderr)
    assert {codes[name, claim] for name, claim, _ in processes} == {0, 1, 2}


SUPERVISED = """
import os, sys, threading, time
from topicaudit.cli import supervisor
def body():
    {body}
sys.exit(supervisor.supervise(body, ["check"]))
"""
# SIGTERM to the supervising parent (a CI timeout), which passes it on; the child survives it, then ends
STOPPED_BY_PARENT = ("import signal; got = []; signal.signal(signal.SIGTERM, lambda *a: got.append(1)); "
                     "supervisor.tell(supervisor.RAY_IN_USE); os.kill(os.getppid(), signal.SIGTERM)\n"
                     "    while not got: time.sleep(0.01)\n    ")


@pytest.mark.parametrize("body, code, line", [
    ("supervisor.tell(supervisor.RAY_IN_USE); threading.Thread(target=os._exit, args=(1,)).start(); time.sleep(9)",
     4, "the Ray runtime ended the process with exit 1"),
    ("supervisor.tell(supervisor.RAY_IN_USE); os.abort()", 4, "killed by SIGABRT while Ray was in use"),
    ("os._exit(1)", 3, "internal error"),
    ("print('VIOLATED: x'); return supervisor.refuted()", 1, None),
    ("return 2", 2, None),
    ("os.kill(os.getpid(), 15); time.sleep(9)", 130, "interrupted"),
    # Ray's runtime crashing (or exiting 1) while the interrupted command stops: the stop was asked for
    (STOPPED_BY_PARENT + "os.abort()", 130, "interrupted"),
    (STOPPED_BY_PARENT + "os._exit(1)", 130, "interrupted"),
])
def test_the_supervisor_maps_every_end_of_the_process(body, code, line):
    script = SUPERVISED.format(body=body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    if line:
        assert line in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr


def _blocks_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    if blocked & (1 << (signal.SIGTERM - 1)):
        return True
    # Once it has forked, the parent waits in sigwaitinfo, which shows the awaited signals as unblocked.
    try:
        return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except OSError:
        return False


def test_a_sigterm_at_start_up_exits_130(tmp_path):
    """From the console script's first instruction (signals held, then ~1 s of imports), SIGTERM is exit 130."""
    for delay in (0.0, 0.1):
        process = subprocess.Popen([sys.executable, "-m", "topicaudit.cli.supervisor", "run", "--shadows", "2",
                                    "--output", str(tmp_path / f"run-{delay}"), "--quiet"],
                                   cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while not _blocks_sigterm(process.pid):
            assert process.poll() is None
            time.sleep(0.001)
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 130, (delay, err)
        assert "interrupted" in err and "Traceback" not in err


def test_report_says_what_an_interrupt_keeps():
    from topicaudit.cli import supervisor

    assert "finished models" not in supervisor.interrupted_message("report")
    assert "finished models are kept" in supervisor.interrupted_message("run")


# -- one writer per directory ---------------------------------------------------------------------------
def test_a_second_writer_is_refused_naming_the_holder(tmp_path, capsys):
    from topicaudit.engine.storage.lock import writer_lock

    out = tmp_path / "run"
    config = tmp_path / "c.toml"
    config.write_text("[attack]\nshadows = 2\n")
    with writer_lock(out):
        for argv in (["run", str(config), "--output", str(out)],
                     ["sweep", str(config), "--param", "target.k", "--values", "2,3", "--output", str(out)]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert f"being written by another topicaudit command (process {os.getpid()})" in err, err
    assert not out.exists()  # made for the lock alone, removed with it


def test_the_lock_leaves_a_resumable_run(finished, run, capsys):
    assert (finished / ".lock").exists()
    config = config_from_dict({**CONFIG, "output": str(run)})
    assert execute_run(config, quiet=True)["resumed"]


# -- report writes only its own files -------------------------------------------------------------------
def test_report_never_replaces_a_file_it_did_not_write(finished, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "my-plot.png").write_bytes(b"mine")
    (out / "notes.txt").write_text("mine")
    assert main(["report", str(finished), "-o", str(out), "--quiet"]) == 2
    assert "was not made by `topicaudit report`" in capsys.readouterr().err
    assert (out / "figures" / "my-plot.png").read_bytes() == b"mine" and (out / "notes.txt").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "report.md").write_text("my own report")
    assert main(["report", str(finished), "-o", str(foreign), "--quiet"]) == 2
    assert (foreign / "report.md").read_text() == "my own report"


def test_report_replaces_its_own_report_but_keeps_what_was_added(finished, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", str(finished), "-o", str(out), "--quiet"]) == 0
    assert main(["report", str(finished), "-o", str(out), "--quiet"]) == 0  # its own: replaced
    (out / "figures" / "my-plot.png").write_bytes(b"mine")
    capsys.readouterr()
    assert main(["report", str(finished), "-o", str(out), "--quiet"]) == 2
    assert "figures/my-plot.png" in capsys.readouterr().err
    assert (out / "figures" / "my-plot.png").read_bytes() == b"mine"


def test_report_removes_the_staging_of_a_killed_report(finished, tmp_path):
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".out.tmp-{int(dead.stdout)}-x1y2"
    live = tmp_path / f".out.tmp-{os.getppid()}-a1b2"
    for directory in (stale, live):
        (directory / "figures").mkdir(parents=True)
    assert main(["report", str(finished), "-o", str(out), "--quiet"]) == 0
    assert not stale.exists() and live.exists()
    assert {p.name for p in tmp_path.iterdir()} == {live.name, "out"}


def test_report_refuses_a_dangling_symlink_output(finished, tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing")
    assert main(["report", str(finished), "-o", str(link), "--quiet"]) == 2
    assert "symbolic link" in capsys.readouterr().err and link.is_symlink()


def test_dollars_in_a_run_name_are_drawn_as_text(run, tmp_path):
    """A `$` in a run or corpus name is not matplotlib mathtext (which failed after every fit, exit 3)."""
    from topicaudit.engine.storage.results import RunResults
    from topicaudit.engine.presentation.roc_figure import write_roc_figure
    from topicaudit.engine.storage.bounded_read import read_arrays
    from topicaudit.engine.storage.durable_write import atomic_write_bytes

    pre_manifest(run)
    _edit_results(run, lambda d: d.update(name="cost_$5_$ x$\\foo$"))
    results = RunResults.from_json(json.loads((run / "results.json").read_text()))
    figure = write_roc_figure(tmp_path / "roc.png", results.name, read_arrays(run / "scores.npz"), results,
                              atomic_write_bytes)
    assert figure.stat().st_size > 0
    assert main(["report", str(run), "-o", str(tmp_path / "report"), "--quiet"]) == 0
