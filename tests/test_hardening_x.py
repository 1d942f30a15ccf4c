"""Hardening X (issue 32, hostile pass X: files and integrity): what it found. Every case it ran is in
tests/hostile_x_cases.md.

Three defects touched files outside the folders topicaudit owns (critical by the pass's definition): ``report``
deleted a user's folder whose name looked like the staging folder of a killed report (RO3); the corpus cache wrote
its entries through a ``corpora`` folder that was a symbolic link, into the folder it named (CC1); ``check CONFIG``
wrote its cached run through a default ``runs`` folder that was a symbolic link (CC8). One non-critical defect:
``check --json OTHER_RUN/manifest.json`` replaced another run's manifest, which no command could verify again (J2).
"""
from __future__ import annotations

import json
import os
import sys
import subprocess

import pytest

import topicaudit.engine.storage.run_corpus as run_corpus
from topicaudit.engine.check import check_report_paths
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.storage.run_cache import use_cache
from topicaudit.errors import UserError
from topicaudit.inputs import cache
from topicaudit.reports.output_folder import remove_stale_staging as _remove_stale_staging

from linked_cache import small_json_corpus_config, users_folder_linked_at


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_a_users_folder_named_like_a_killed_reports_staging_is_kept(tmp_path):
    pid = dead_pid()
    mine = tmp_path / f".rep.tmp-{pid}-mine"  # the user's, named like a staging folder whose process is gone
    old = tmp_path / f".rep.old-{pid}-x"
    staged = tmp_path / f".rep.tmp-{pid}-abc123_z"  # a killed report's: what a report writes, nothing else
    for folder, name in ((mine, "keep.txt"), (old, "keep.txt"), (staged, "report.html")):
        folder.mkdir()
        (folder / name).write_text("x")
    (staged / "figures").mkdir()
    (staged / "figures" / "01-roc.png").write_bytes(b"png")
    _remove_stale_staging(tmp_path / "rep")
    assert (mine / "keep.txt").read_text() == "x" and (old / "keep.txt").read_text() == "x"
    assert not staged.exists()  # a real staging folder of a dead report still goes


def test_a_staging_folder_holding_a_link_is_not_removed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text("a")
    staged = tmp_path / f".rep.old-{dead_pid()}-abc"
    (staged / "report").mkdir(parents=True)
    (staged / "report" / "figures").symlink_to(elsewhere)
    _remove_stale_staging(tmp_path / "rep")
    assert staged.exists() and (elsewhere / "a.txt").read_text() == "a"


def test_the_corpus_cache_writes_nothing_through_a_linked_corpora_folder(tmp_path, monkeypatch):
    users = users_folder_linked_at(tmp_path / "cache" / "corpora")
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match="corpora is a symbolic link"):
        loaded = run_corpus.load_audit_corpus(small_json_corpus_config(tmp_path))
    assert loaded.X.shape[0] == 12
    assert [p.name for p in users.iterdir()] == ["keep.txt"]  # an entry was written there


def test_check_config_writes_no_cached_run_through_a_linked_runs_folder(tmp_path, monkeypatch):
    users_folder_linked_at(tmp_path / "cache" / "runs")
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    with pytest.raises(UserError, match="runs is a symbolic link"):
        use_cache(Config(), None)
    assert use_cache(Config(), tmp_path / "cache" / "runs") is not None  # named by the user: their choice


def test_check_json_may_not_replace_another_runs_files(tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    for folder in (run, other):
        (folder / "models").mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
    for name in ("manifest.json", "results.json", "check.json", "models/target.npz"):
        with pytest.raises(UserError, match=f"{name.split('/')[0]} of {other}"):
            check_report_paths(run, {"--json": str(other / name)})
    # still allowed: the run's own check files, a new name beside another run's files, any plain folder
    check_report_paths(run, {"--json": str(run / "check.json"), "--junit": str(run / "check.junit.xml")})
    check_report_paths(run, {"--json": str(other / "verdict-of-run.json"), "--junit": str(tmp_path / "j.xml")})
    assert os.listdir(other) == ["models", "manifest.json"] or sorted(os.listdir(other)) == ["manifest.json", "models"]


# -- non-critical findings fixed ----------------------------------------------------------------------------------
def test_a_sweep_index_listing_one_run_twice_is_refused(tmp_path):
    from topicaudit.engine.sweep import SWEEP_SCHEMA, load_sweep

    (tmp_path / "k=3" / "rep-0").mkdir(parents=True)
    (tmp_path / "k=3" / "rep-0" / "results.json").write_text("{}")
    runs = [{"value": 3, "replicate": 0, "path": "k=3/rep-0"}, {"value": 4, "replicate": 0, "path": "k=3/./rep-0"}]
    (tmp_path / "sweep.json").write_text(json.dumps({"schema": SWEEP_SCHEMA, "parameter": "target.k",
                                                     "values": [3, 4], "replicates": 1, "runs": runs}))
    with pytest.raises(UserError, match="both list k=3/./rep-0"):
        load_sweep(tmp_path)  # was read as two runs: reported twice, "2 finished runs"


def test_audit_files_are_read_by_the_names_the_manifest_verifies(tmp_path):
    from types import SimpleNamespace

    from topicaudit.engine.storage.audit_results import AuditResults

    record = SimpleNamespace(directory=tmp_path, FILES=AuditResults.FILES,
                             files={"scores": "../other/scores.csv", "exposure": "/etc/passwd", "extra": "../x"})
    paths = AuditResults.paths.fget(record)
    assert paths == {"scores": tmp_path / "scores.csv", "exposure": tmp_path / "exposure.npz"}


def test_a_relative_xdg_config_home_is_not_where_the_key_is_read(tmp_path, monkeypatch):
    from topicaudit.inputs.integrity_key import key_file

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", "cfg")  # the key would depend on the working directory
    assert key_file() == tmp_path / ".config" / "topicaudit" / "integrity.key"


def test_a_resumed_sweep_does_not_rewrite_an_index_that_holds_the_same(tmp_path):
    from topicaudit.engine.sweep import save_index

    index_path = tmp_path / "sweep.json"
    index = {"schema": "topicaudit.sweep/1", "runs": [{"path": "k=3/rep-0", "status": "done"}]}
    save_index(index_path, index)
    before = os.stat(index_path)
    save_index(index_path, index)  # SWK1: a resume refused by its first run left sweep.json rewritten
    after = os.stat(index_path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    save_index(index_path, {**index, "runs": []})
    assert json.loads(index_path.read_text())["runs"] == []


def test_check_json_may_not_be_a_case_variant_of_a_run_file(tmp_path):
    """On a case-insensitive file system (macOS, Windows) RUN/Results.json would replace results.json."""
    (tmp_path / "manifest.json").write_text("{}")
    for name in ("Results.json", "MANIFEST.JSON", "Models/target.npz"):
        with pytest.raises(UserError, match="check reads and never replaces"):
            check_report_paths(tmp_path, {"--json": str(tmp_path / name)})


def test_a_deleted_check_json_the_manifest_lists_is_noted(tmp_path, monkeypatch):
    """PM8: check.json deleted from a checked run: the card tested the target's own claim without a word."""
    from types import SimpleNamespace

    from topicaudit.reports.verdict import _recorded_claim

    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "topicaudit.manifest/1", "algorithm": "sha256",
                                                        "files": {"check.json": "0" * 64}}))
    with pytest.warns(UserWarning, match="check.json is listed in .* but missing"):
        assert _recorded_claim(SimpleNamespace(path=tmp_path)) is None
