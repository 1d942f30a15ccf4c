"""Hardening XI (issue 32, hostile pass XI): what it found. Every case it ran is in tests/hostile_xi_cases.md.

With ``TOPICAUDIT_CACHE_DIR`` unset, the cache's default folder (``$XDG_CACHE_HOME/topicaudit`` or
``~/.cache/topicaudit``) as a symbolic link had whole cached runs and corpus entries written into the folder it
named (X1, X1c): pass X refused a linked ``runs`` and skipped a linked ``corpora``, one level below.
"""
from __future__ import annotations

import json

import pytest

import topicaudit.engine.storage.run_corpus as run_corpus
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.storage.run_cache import use_cache
from topicaudit.errors import UserError
from topicaudit.inputs import cache

from linked_cache import small_json_corpus_config, users_folder_linked_at


@pytest.fixture
def linked_default_cache(tmp_path, monkeypatch):
    """``$XDG_CACHE_HOME/topicaudit`` a link to a user's folder, TOPICAUDIT_CACHE_DIR unset; the user's folder."""
    users = users_folder_linked_at(tmp_path / "xdg" / "topicaudit")
    monkeypatch.delenv(cache.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return users


def test_check_config_writes_no_run_through_a_linked_default_cache_folder(linked_default_cache, tmp_path):
    with pytest.raises(UserError, match="topicaudit is a symbolic link"):
        use_cache(Config(), None)
    assert [p.name for p in linked_default_cache.iterdir()] == ["keep.txt"]
    assert use_cache(Config(), tmp_path / "xdg" / "topicaudit" / "runs") is not None  # named by the user


def test_the_corpus_cache_writes_nothing_through_a_linked_default_cache_folder(linked_default_cache, tmp_path):
    with pytest.warns(UserWarning, match="topicaudit is a symbolic link"):
        assert run_corpus.load_audit_corpus(small_json_corpus_config(tmp_path)).X.shape[0] == 12
    assert [p.name for p in linked_default_cache.iterdir()] == ["keep.txt"]  # corpora/<key>.npz was written there


def test_a_cache_folder_the_user_named_may_be_a_link(tmp_path, monkeypatch):
    """$TOPICAUDIT_CACHE_DIR itself a link stays the user's choice (pass VIII's K5)."""
    (tmp_path / "real").mkdir()
    (tmp_path / "named").symlink_to(tmp_path / "real")
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "named"))
    assert use_cache(Config(), None) is not None


# -- non-critical findings fixed ----------------------------------------------------------------------------------
def test_a_refused_run_leaves_an_existing_output_and_the_users_folder_with_their_times(tmp_path):
    """E1, E2: `run --output EMPTY` (or USER/new/run) refused left EMPTY (or USER) with a new modification time."""
    import os

    from topicaudit.engine.storage.lock import writer_lock

    empty, user = tmp_path / "empty", tmp_path / "user"
    empty.mkdir()
    user.mkdir()
    for folder in (empty, user):
        os.utime(folder, ns=(10**18, 10**18))
    for output in (empty, user / "new" / "run"):
        with pytest.raises(UserError), writer_lock(output):
            raise UserError("refused")
    assert [os.stat(p).st_mtime_ns for p in (empty, user)] == [10**18, 10**18]
    assert list(empty.iterdir()) == [] and list(user.iterdir()) == []


def test_a_folder_named_like_staging_with_an_impossible_pid_is_kept(tmp_path):
    """R3: `.rep.tmp-99999999999999999999-abc` beside the output was exit 3 (OverflowError in os.kill)."""
    from topicaudit.reports.output_folder import remove_stale_staging as _remove_stale_staging

    mine = tmp_path / ".rep.tmp-99999999999999999999-abc"
    mine.mkdir()
    (mine / "report.html").write_text("mine")
    _remove_stale_staging(tmp_path / "rep")
    assert (mine / "report.html").read_text() == "mine"


def test_probing_where_a_file_will_be_written_leaves_the_folders_time(tmp_path):
    """R3b: `report RUN -o USER/rep` refused (the run does not verify) left USER with a new mtime from the probe."""
    import os

    from topicaudit.engine.configuration.validation import check_output_file

    os.utime(tmp_path, ns=(10**18, 10**18))
    check_output_file(tmp_path / "check.json", "--json")
    assert os.stat(tmp_path).st_mtime_ns == 10**18 and list(tmp_path.iterdir()) == []


def test_check_json_may_not_replace_a_sweeps_index(tmp_path):
    """swA: `check SWEEP/k=3/rep-0 --json SWEEP/sweep.json` replaced the index; the sweep was refused after."""
    from topicaudit.engine.check import check_report_paths

    run = tmp_path / "k=3" / "rep-0"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (tmp_path / "sweep.json").write_text("{}")
    for name in ("sweep.json", "Sweep.JSON"):
        with pytest.raises(UserError, match="(?i)sweep.json of"):
            check_report_paths(run, {"--json": str(tmp_path / name)})
    check_report_paths(run, {"--json": str(tmp_path / "k=3" / "verdict.json")})  # a new name in the sweep: fine


def test_check_files_of_the_run_only_under_their_own_flag(tmp_path):
    """cj1: `--junit RUN/check.json --json RUN/check.junit.xml` recorded XML as check.json; report's card then
    dropped the claim the user gave (NO CLAIM) without a note."""
    from topicaudit.engine.check import check_report_paths

    (tmp_path / "manifest.json").write_text("{}")
    for flag, name in (("--junit", "check.json"), ("--json", "check.junit.xml"), ("--json", "CHECK.JUNIT.XML")):
        with pytest.raises(UserError, match="where check writes its"):
            check_report_paths(tmp_path, {flag: str(tmp_path / name)})
    check_report_paths(tmp_path, {"--json": str(tmp_path / "check.json"), "--junit": str(tmp_path / "check.junit.xml")})


def test_a_listed_check_json_that_cannot_be_read_is_noted(tmp_path, monkeypatch):
    import hashlib
    from types import SimpleNamespace

    from topicaudit.reports.verdict import _recorded_claim

    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    body = b'<?xml version="1.0"?><testsuite/>'
    (tmp_path / "check.json").write_bytes(body)
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "topicaudit.manifest/1", "algorithm": "sha256",
                                                        "files": {"check.json": hashlib.sha256(body).hexdigest()}}))
    with pytest.warns(UserWarning, match="cannot be read as the document"):
        assert _recorded_claim(SimpleNamespace(path=tmp_path)) is None


# -- pass XI, critical: --canaries auto kept its sizing through the linked cache folder pass X refused -------------
MECHANISM = {"attack": {"shadows": 0, "canaries": {"count": 60}}, "target": {"k": 3, "learner": "dp-cgs"}}


def test_canaries_auto_writes_no_sizing_through_a_linked_runs_folder(tmp_path, monkeypatch):
    """SZ1: `check CONFIG --canaries auto` wrote runs/sizing/<key>.json into the folder a linked runs/ named, and
    only then refused the link (pass X's CC8 check came after the sizing)."""
    from topicaudit.engine.check import assert_privacy

    users = tmp_path / "users-folder"
    users.mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "runs").symlink_to(users)
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    with pytest.raises(UserError, match="runs is a symbolic link"):
        assert_privacy(MECHANISM, epsilon=1.0, canaries="auto", budget=60)
    assert list(users.iterdir()) == []


def test_a_sizing_is_neither_read_nor_written_through_a_linked_sizing_folder(tmp_path):
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.sizing import size_canaries

    users = tmp_path / "users-folder"
    users.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "sizing").symlink_to(users)
    sizing = size_canaries(config_from_dict(MECHANISM), 1.0, budget=60.0, cache_root=tmp_path / "runs")
    assert sizing.kept is None and list(users.iterdir()) == []


def test_with_a_key_a_planted_sizing_is_not_used(tmp_path, monkeypatch):
    """SZ2: a sizing planted in the cache (5 canaries, "100%") made a VIOLATED claim CONSISTENT at 0% power; with
    an integrity key configured only a sizing it MAC'd is read back."""
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.sizing import size_canaries

    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "k" * 40)
    config, root = config_from_dict(MECHANISM), tmp_path / "runs"
    first = size_canaries(config, 1.0, budget=60.0, cache_root=root)
    (entry,) = (root / "sizing").iterdir()
    assert size_canaries(config, 1.0, budget=60.0, cache_root=root).kept == str(entry)  # its own: read back
    forged = json.loads(entry.read_text())
    forged.update(count=5, needed=5)
    entry.write_text(json.dumps(forged))
    assert size_canaries(config, 1.0, budget=60.0, cache_root=root).count == first.count


def test_a_check_refused_for_its_second_file_stages_nothing(tmp_path):
    """cd1: RUN/check.junit.xml a directory of the user's: check was refused (2), but only after check.json's
    temporary was made and removed, which left the run directory with a new modification time."""
    import os

    from topicaudit.engine.storage.durable_write import atomic_write_all

    (tmp_path / "check.junit.xml").mkdir()
    os.utime(tmp_path, ns=(10**18, 10**18))
    with pytest.raises(UserError, match="it is a directory"):
        atomic_write_all([(tmp_path / "check.json", b"{}"), (tmp_path / "check.junit.xml", b"<x/>")])
    assert os.stat(tmp_path).st_mtime_ns == 10**18 and sorted(os.listdir(tmp_path)) == ["check.junit.xml"]


def test_a_kept_sizing_that_is_a_directory_costs_a_new_sizing_only(tmp_path):
    """SZ3: the kept sizing's place a directory: `check --canaries auto` was exit 2 after sizing."""
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.sizing import size_canaries

    config, root = config_from_dict(MECHANISM), tmp_path / "runs"
    size_canaries(config, 1.0, budget=60.0, cache_root=root)
    (entry,) = (root / "sizing").iterdir()
    entry.unlink()
    entry.mkdir()
    (entry / "mine.txt").write_text("mine")
    assert size_canaries(config, 1.0, budget=60.0, cache_root=root).kept is None
    assert (entry / "mine.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def canary_run(tmp_path_factory):
    """A small canary-only run (no Ray)."""
    import topicaudit

    out = tmp_path_factory.mktemp("xi") / "run"
    topicaudit.run({"synthetic": {"n_docs": 120, "n_words": 300, "mean_length": 30}, "target": {"k": 3},
                    "attack": {"shadows": 0, "canaries": {"count": 20}}, "output": str(out)}, quiet=True)
    return out


def test_report_into_the_working_directory_is_staged_beside_it(canary_run, tmp_path, monkeypatch):
    """dot: `report RUN -o .` in an empty folder staged its report inside that folder (`..tmp-PID-…`), built it,
    then refused the folder as holding that staging (exit 2)."""
    from topicaudit.cli.main import main

    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["report", str(canary_run), "-o", ".", "--quiet"]) == 0
    assert (tmp_path / "empty" / "report.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no staging left beside it
