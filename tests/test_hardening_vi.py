"""Hardening VI (issue 32, the leftovers): the files besides the evidence that a later command reads (check.json,
sweep.json), a first SIGTERM that always ends the command, and the defects a fresh hostile pass found.

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in ~1 s.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.inputs import integrity_key
from topicaudit.inputs.files import file_sha256

REPO = Path(__file__).resolve().parents[1]
KEY = "c" * 16 + "0123456789abcdef" * 3  # 64 characters


def canary_run(output: Path, *extra: str) -> int:
    return main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(output), "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h6") / "plain"
    assert canary_run(out) == 0
    return out


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h6") / "keyed"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
        assert canary_run(out) == 0
    return out


@pytest.fixture
def plain(plain_run, tmp_path):
    copy = tmp_path / "plain"
    shutil.copytree(plain_run, copy)
    return copy


@pytest.fixture
def keyed(keyed_run, tmp_path):
    copy = tmp_path / "keyed"
    shutil.copytree(keyed_run, copy)
    return copy


def report(run: Path, out: Path, capsys) -> tuple[int, str]:
    code = main(["report", str(run), "-o", str(out)])
    return code, capsys.readouterr().err


def card(out: Path) -> str:
    markdown = (out / "report.md").read_text()
    return markdown[markdown.index("## Verdict"):markdown.index("## Privacy ledger")]


# -- (a) check.json: covered by the manifest; the report reads its claim only as the manifest lists it ---------
def test_check_lists_check_json_in_the_manifest_and_the_card_tests_its_claim(plain, tmp_path, capsys):
    assert main(["check", str(plain), "--epsilon", "0.5"]) == 1
    listed = manifest.entries(plain)
    assert {"check.json", "check.junit.xml"} <= set(listed)
    assert listed["check.json"] == file_sha256(plain / "check.json")
    capsys.readouterr()
    code, err = report(plain, tmp_path / "page", capsys)
    assert code == 0, err
    assert "VIOLATED" in card(tmp_path / "page") and "ε = 0.5" in card(tmp_path / "page")


def test_an_edited_check_json_is_refused_by_report(plain, tmp_path, capsys):
    """A claim edited into check.json (ε = 1000: the card would have said CONSISTENT for a run whose check was
    VIOLATED) was read as the claim `check` was given; now exit 2 naming check.json, no page."""
    assert main(["check", str(plain), "--epsilon", "0.5"]) == 1
    recorded = json.loads((plain / "check.json").read_text())
    recorded.update(claimed_epsilon=1000.0, violated=False, verdict="CONSISTENT")
    (plain / "check.json").write_text(json.dumps(recorded))
    capsys.readouterr()
    code, err = report(plain, tmp_path / "page", capsys)
    assert code == 2 and "check.json" in err and "rerun `topicaudit check" in err and err.count("\n") == 1, err
    assert not (tmp_path / "page").exists()


def test_a_check_json_the_manifest_does_not_list_is_ignored_with_a_note(plain, tmp_path, capsys):
    """A check.json dropped into the run (by hand, or by an older version) no longer sets the card's claim."""
    recorded = {"schema": "topicaudit.check/1", "run_dir": str(plain), "claimed_epsilon": 0.001, "delta": 1e-5,
                "alpha": 0.05}
    (plain / "check.json").write_text(json.dumps(recorded))
    code, err = report(plain, tmp_path / "page", capsys)
    assert code == 0, err
    assert "check.json is not listed in" in err and "target's own claim" in err
    assert "ε = 0.001" not in card(tmp_path / "page") and "NO CLAIM" in card(tmp_path / "page")


def test_a_keyed_run_checked_without_the_key_keeps_its_mac(keyed, tmp_path, capsys, monkeypatch):
    """check without the key cannot re-MAC the manifest: check.json stays unlisted (and unread by report),
    and the manifest still verifies with the key."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    assert main(["check", str(keyed), "--epsilon", "0.5"]) == 1
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    found = manifest.read(keyed)
    assert found.authenticated and "check.json" not in found.files
    capsys.readouterr()
    code, err = report(keyed, tmp_path / "page", capsys)
    assert code == 0 and "check.json is not listed" in err, err
    assert main(["check", str(keyed), "--epsilon", "0.5"]) == 1  # with the key: listed, and MAC'd again
    found = manifest.read(keyed)
    assert found.authenticated and "check.json" in found.files


def test_a_run_whose_check_json_was_deleted_is_still_reused_as_it_stands(plain, capsys):
    assert main(["check", str(plain), "--epsilon", "0.5"]) == 1
    (plain / "check.json").unlink()
    (plain / "check.junit.xml").unlink()
    capsys.readouterr()
    assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(plain)]) == 0
    assert "reusing" in capsys.readouterr().err


# -- (a) sweep.json: the index must list every finished run of the sweep --------------------------------------
@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("h6sweep")
    config = root / "sweep.toml"
    config.write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    out = root / "sweep"
    assert main(["sweep", str(config), "--param", "target.k", "--values", "2,3", "--output", str(out),
                 "--quiet"]) == 0
    return out


@pytest.mark.parametrize("edit", ["drop-run", "drop-value"])
def test_a_run_left_out_of_sweep_json_is_refused_not_left_out(sweep_dir, tmp_path, capsys, edit):
    sweep = tmp_path / "sweep"
    shutil.copytree(sweep_dir, sweep)
    index = json.loads((sweep / "sweep.json").read_text())
    if edit == "drop-run":
        index["runs"] = [entry for entry in index["runs"] if entry["value"] != 3]
    else:
        index["values"] = [2]
    (sweep / "sweep.json").write_text(json.dumps(index))
    capsys.readouterr()
    code, err = report(sweep, tmp_path / "page", capsys)
    assert code == 2 and "sweep.json" in err and err.count("\n") == 1, err
    assert ("k=3/rep-0 is a finished run" in err) if edit == "drop-run" else ("not one of the sweep's values" in err)
    assert not (tmp_path / "page").exists()


def test_an_intact_sweep_reports(sweep_dir, tmp_path, capsys):
    code, err = report(sweep_dir, tmp_path / "page", capsys)
    assert code == 0, err


# -- (b) a first SIGTERM always ends the command: 130 within a bounded time ------------------------------------
DEFERRED = """
import importlib, signal, sys, time
cli = importlib.import_module("topicaudit.cli.main")
frames = []
class Finder:
    def find_spec(self, name, path=None, target=None):
        frames.append(sys._getframe(1))
        return None
sys.meta_path.insert(0, Finder())
try:
    import topicaudit_test_no_such_module
except ImportError:
    pass
frame = frames[0]
assert frame.f_code.co_filename.startswith("<frozen importlib."), frame.f_code.co_filename
with cli._signals("run"):
    handler = signal.getsignal(signal.SIGTERM)
    try:
        handler(signal.SIGTERM, frame)
        print("deferred", flush=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.001)
        print("never taken", flush=True)
    except cli.Terminated:
        print("taken", flush=True)
"""


def test_a_sigterm_inside_importlib_is_taken_once_out_of_it():
    """A SIGTERM whose handler raised inside importlib's bootstrap (a module lock's weakref callback) was printed
    as "Exception ignored in … _get_module_lock … Terminated" and lost, or left an import lock held: a first
    SIGTERM ~5 s into `run` hung for over 4 minutes. The handler now takes it again once out of importlib."""
    done = subprocess.run([sys.executable, "-c", DEFERRED], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.stdout.split() == ["deferred", "taken"], (done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr


SUPERVISED = """
import os, signal, sys, time
from topicaudit.cli import supervisor
supervisor.STOP_GRACE, supervisor.KILL_GRACE = 1.0, 1.0
def body():
    {body}
sys.exit(supervisor.supervise(body, ["run"]))
"""


@pytest.mark.parametrize("body", [
    # the first SIGTERM lost (as in importlib), the second exits 130 at once (the command's own handler)
    "got = []\n    signal.signal(signal.SIGTERM, lambda *a: os._exit(130) if got else got.append(1))\n"
    "    print('ready', flush=True)\n    time.sleep(600)",
    # a child that does not answer SIGTERM at all (hung in native code): killed
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n    print('ready', flush=True)\n    time.sleep(600)",
], ids=["first-signal-lost", "deaf-to-sigterm"])
def test_the_supervisor_forces_a_stop_that_does_not_come(body):
    process = subprocess.Popen([sys.executable, "-c", SUPERVISED.format(body=body)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)  # was: forever, until a second SIGTERM
    assert process.returncode == 130, err
    assert err.count("interrupted") == 1 and "Traceback" not in err, err


def _holds_sigterm(pid: int) -> bool:
    """The console script holds SIGTERM (its first instruction), or has forked its command already."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
        return bool(blocked & (1 << (signal.SIGTERM - 1))) or bool(
            Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
    except (OSError, StopIteration):
        return False


def _console() -> list[str]:
    script = Path(sys.executable).parent / "topicaudit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "topicaudit.cli.supervisor"]


@pytest.mark.slow
def test_a_first_sigterm_during_start_up_always_exits_130_in_bounded_time(tmp_path):
    """SIGTERM at many offsets into `run` (Python's imports, the command's, Ray's start in the background):
    every one ends with 130 and the interrupted line, within the supervisor's grace periods and a margin."""
    from topicaudit.cli import supervisor

    bound = supervisor.STOP_GRACE + supervisor.KILL_GRACE + 30
    for i, offset in enumerate([0.05 * n for n in range(4)] + [0.25 * n for n in range(1, 17)]):
        process = subprocess.Popen([*_console(), "run", "--shadows", "2", "--canaries", "100", "--output",
                                    str(tmp_path / f"run-{i}"), "--quiet"],
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while not _holds_sigterm(process.pid):  # before that, Python's own start-up: not the package's to cover
            assert process.poll() is None
            time.sleep(0.001)
        time.sleep(offset)
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            out, err = process.communicate(timeout=bound)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"SIGTERM {offset:.2f} s into `run`: no end within {bound:.0f} s")
        assert process.returncode == 130, (offset, process.returncode, err)
        assert "interrupted" in err and "Traceback" not in err and "Exception ignored" not in err, (offset, err)
        assert time.monotonic() - sent < bound


# -- (c) the hostile pass --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["link-to-folder", "empty-folder"])
def test_report_never_replaces_an_output_holding_a_link_or_folder_of_the_users(plain_run, tmp_path, capsys, kind):
    """`report -o OUT` replaces OUT as a whole when it is empty or a report: a link to the user's folder
    (`figures` → ~/photos) counted as a folder, the output as empty, and the link was removed."""
    users = tmp_path / "photos"
    users.mkdir()
    (users / "keep.txt").write_text("precious")
    out = tmp_path / "page"
    out.mkdir()
    if kind == "link-to-folder":
        (out / "figures").symlink_to(users)
    else:
        (out / "drafts").mkdir()
    code, err = report(plain_run, out, capsys)
    assert code == 2 and "was not made by `topicaudit report`" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in out.iterdir()) == (["figures"] if kind == "link-to-folder" else ["drafts"])
    if kind == "link-to-folder":
        assert (out / "figures").is_symlink()
    assert (users / "keep.txt").read_text() == "precious"


def test_report_reads_a_bounded_marker_only(plain_run, tmp_path, capsys):
    out = tmp_path / "page"
    assert report(plain_run, out, capsys)[0] == 0
    marker = out / ".topicaudit-report"
    with open(marker, "ab") as handle:
        handle.truncate(2 << 20)  # sparse: a marker of 2 MiB is no report's
    code, err = report(plain_run, out, capsys)
    assert code == 2 and "was not made by `topicaudit report`" in err, err


def _fake_audit(directory: Path, with_manifest: bool) -> Path:
    """The files of a `topicaudit audit` output that the report checks first (the content is not read here)."""
    from topicaudit.engine.storage.durable_write import atomic_write_text

    directory.mkdir()
    (directory / "config.toml").write_text('[provenance]\nmanifest = "topicaudit.manifest/1"\n')
    (directory / "audit.json").write_text('{"schema": "topicaudit.user-audit/1"}')
    (directory / "scores.csv").write_text("candidate,score\n0,1.0\n")
    if with_manifest:
        manifest.record(directory, "config.toml", "audit.json", write_text=atomic_write_text)
    return directory


@pytest.mark.parametrize("case", ["manifest-deleted", "entry-dropped", "keyed-no-manifest"])
def test_a_user_audit_directory_is_read_only_through_its_manifest(tmp_path, monkeypatch, case):
    """report of a `topicaudit audit` directory verified only the files its manifest listed: with manifest.json
    deleted (config.toml says there was one), or scores.csv's entry dropped, an edited audit.json or scores.csv
    was reported without a word — with an integrity key configured too."""
    from topicaudit.errors import UserError
    from topicaudit.reports import user_audit

    monkeypatch.setattr(user_audit.AuditResults, "load", classmethod(lambda cls, path: "loaded"))
    audit = _fake_audit(tmp_path / "audit", with_manifest=case == "entry-dropped")
    if case == "keyed-no-manifest":
        (audit / "config.toml").write_text("[provenance]\n")  # the layout before manifests
        monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    with pytest.raises(UserError) as refused:
        user_audit.AuditDirectory(audit)
    message = str(refused.value)
    assert {"manifest-deleted": "manifest.json is missing, but", "entry-dropped": "scores.csv is not listed in",
            "keyed-no-manifest": "cannot be authenticated"}[case] in message, message


def test_a_user_audit_of_the_layout_before_manifests_is_read_unverified(tmp_path, monkeypatch):
    from topicaudit.reports import user_audit

    monkeypatch.setattr(user_audit.AuditResults, "load", classmethod(lambda cls, path: "loaded"))
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    audit = _fake_audit(tmp_path / "audit", with_manifest=False)
    (audit / "config.toml").write_text("[provenance]\n")
    with pytest.warns(UserWarning, match="UNVERIFIED"):
        assert user_audit.AuditDirectory(audit).results == "loaded"


@pytest.mark.parametrize("linked", ["k=3/rep-0", "k=3"])
def test_sweep_never_writes_a_run_through_a_link(sweep_dir, tmp_path, capsys, linked):
    """A run's folder in a sweep replaced by a link to an empty folder elsewhere: the resumed sweep wrote the run
    there, through the link. Now exit 2 naming it, the sweep directory and the link's target as they were."""
    sweep = tmp_path / "sweep"
    shutil.copytree(sweep_dir, sweep)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(sweep / linked)
    (sweep / linked).symlink_to(elsewhere)
    index = (sweep / "sweep.json").read_bytes()
    config = tmp_path / "sweep.toml"
    config.write_text("[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    capsys.readouterr()
    code = main(["sweep", str(config), "--param", "target.k", "--values", "2,3", "--output", str(sweep), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "is a symbolic link" in err and linked in err and err.count("\n") == 1, err
    assert list(elsewhere.iterdir()) == [] and (sweep / "sweep.json").read_bytes() == index


def test_a_refused_resume_leaves_the_lock_as_it_found_it_times_too(plain, capsys):
    """A run of another configuration refused on a finished run's directory gave `.lock` its content back, but
    not its modification time (tools that watch the directory saw a write)."""
    lock = plain / ".lock"
    before = os.stat(lock)
    os.utime(lock, ns=(before.st_atime_ns - 10**12, before.st_mtime_ns - 10**12))  # an old lock
    before = os.stat(lock)
    content = lock.read_bytes()
    capsys.readouterr()
    code = main(["run", "--shadows", "0", "--canaries", "60", "--k", "4", "--output", str(plain), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "different configuration" in err, err
    after = os.stat(lock)
    assert lock.read_bytes() == content and after.st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("edit", [
    lambda index: index.update(parameter=[1]),
    lambda index: index.update(parameter=None),
    lambda index: index.update(replicates="x"),
    lambda index: index["runs"][0].update(replicate="x"),
    lambda index: index["runs"][0].update(replicate=None),
    lambda index: index["runs"][0].update(replicate=7),
], ids=["parameter-list", "parameter-null", "replicates-string", "replicate-string", "replicate-null",
        "replicate-out-of-range"])
def test_a_damaged_sweep_index_is_one_line_exit_2(sweep_dir, tmp_path, capsys, edit):
    """A list or null as sweep.json's parameter, or a string or null as a run's replicate, was an internal error
    in report (AttributeError, ValueError: exit 3); a string as the replicates went through."""
    sweep = tmp_path / "sweep"
    shutil.copytree(sweep_dir, sweep)
    index = json.loads((sweep / "sweep.json").read_text())
    edit(index)
    (sweep / "sweep.json").write_text(json.dumps(index))
    capsys.readouterr()
    code, err = report(sweep, tmp_path / "page", capsys)
    assert code == 2 and "sweep.json" in err and "rerun the same `topicaudit sweep`" in err, err
    assert err.count("\n") == 1 and "internal error" not in err, err


def test_an_ascii_standard_output_still_takes_the_verdict_line(plain):
    """With PYTHONIOENCODING=ascii (a CI console), "ε" and "≥" raised UnicodeEncodeError: every verdict was
    "could not be printed" and only recorded. Now printed, escaped."""
    done = subprocess.run([*_console(), "check", str(plain), "--epsilon", "0.01"], capture_output=True,
                          env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(b"VIOLATED: ") and b"\\u03b5" in done.stdout, done.stdout
    assert b"could not be printed" not in done.stderr, done.stderr
