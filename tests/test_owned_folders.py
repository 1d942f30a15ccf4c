"""The folders topicaudit owns are opened once, by descriptor, and never through a symbolic link
(``topicaudit.owned_folders``; hostile passes X and XI's N2 and F3: every per-folder ``islink`` check was made
before the write, so a folder swapped for a link in between was still written through).

The race is made deterministic: a folder is opened (or locked), then renamed away and a link to a victim folder
put in its place, then written through. Real files and links, no mocks; the victim is compared entry by entry
(type, size, modification time, SHA-256) before and after.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from topicaudit import folder_anchors, owned_folders
from topicaudit.cli.main import main
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.run import execute_run
from topicaudit.engine.storage.durable_write import atomic_write_all, atomic_write_bytes, atomic_write_text
from topicaudit.engine.storage.lock import writer_lock
from topicaudit.engine.storage.run_cache import use_cache
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.errors import UserError
from topicaudit.inputs import cache

from linked_cache import small_json_corpus_config


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (the folder itself included, links not followed): type, size, mtime, SHA-256."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        info = os.lstat(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
        found[path.relative_to(folder).as_posix()] = (info.st_mode, info.st_size, info.st_mtime_ns, digest)
    return found


@pytest.fixture
def victim(tmp_path) -> Path:
    """A user's folder holding a file, with an old modification time (any entry made there changes it)."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    os.utime(folder / "keep.txt", ns=(10**18, 10**18))
    os.utime(folder, ns=(10**18, 10**18))
    return folder


def swap_for_link(folder: Path, victim: Path) -> Path:
    """Rename ``folder`` away and put a symbolic link to ``victim`` in its place; where it went."""
    moved = folder.with_name(folder.name + "-moved")
    folder.rename(moved)
    folder.symlink_to(victim)
    return moved


# -- the race, at the module ------------------------------------------------------------------------------------
def test_a_folder_swapped_for_a_link_after_it_was_opened_is_still_the_one_written(tmp_path, victim):
    anchor = tmp_path / "cache"
    folder_anchors.declare(anchor / "topicaudit" / "corpora", anchor)
    before = snapshot(victim)
    with owned_folders.open_folder(anchor / "topicaudit" / "corpora", create=True) as folder:
        moved = swap_for_link(anchor / "topicaudit" / "corpora", victim)
        digest = folder.write("entry.npz", lambda handle: handle.write(b"counts"))
        with folder.child("sub", create=True) as sub:
            sub.write("inner.json", lambda handle: handle.write(b"{}"))
        folder.unlink("entry.npz")
        folder.write("entry.npz", lambda handle: handle.write(b"counts"))
    assert snapshot(victim) == before
    assert (moved / "entry.npz").read_bytes() == b"counts" and (moved / "sub" / "inner.json").is_file()
    assert digest == hashlib.sha256(b"counts").hexdigest()
    assert not [p for p in moved.iterdir() if p.name.endswith(".tmp")]


def test_an_owned_folder_that_is_a_link_when_opened_is_refused_and_the_anchor_may_be_one(tmp_path, victim):
    real = tmp_path / "real-cache"
    real.mkdir()
    anchor = tmp_path / "named-cache"
    anchor.symlink_to(real)  # the user named it: followed
    folder_anchors.declare(anchor / "corpora", anchor)
    (real / "corpora").symlink_to(victim)
    before = snapshot(victim)
    with pytest.raises(UserError, match="corpora is a symbolic link") as refused:
        owned_folders.open_folder(anchor / "corpora", create=True)
    assert isinstance(refused.value, owned_folders.LinkedFolder) and str(victim) in str(refused.value)
    (real / "corpora").unlink()
    with owned_folders.open_folder(anchor / "corpora", create=True) as folder:
        folder.write("entry.npz", lambda handle: handle.write(b"x"))
    assert (real / "corpora" / "entry.npz").read_bytes() == b"x" and snapshot(victim) == before


# -- durable_write and the writer lock: a run directory held for the command ------------------------------------
def test_writes_during_the_writer_lock_go_into_the_directory_it_locked(tmp_path, victim):
    run = tmp_path / "run"
    before = snapshot(victim)
    with writer_lock(run):
        moved = swap_for_link(run, victim)
        digest = atomic_write_text(run / "results.json", "{}\n")
        written = atomic_write_all([(run / "check.json", b"{}"), (run / "check.junit.xml", b"<x/>")])
        with owned_folders.open_folder(run / "models", create=True):
            pass
        atomic_write_bytes(run / "models" / "target.npz", lambda handle: handle.write(b"phi"))
    assert snapshot(victim) == before
    assert sorted(p.name for p in moved.iterdir()) == [".lock", "check.json", "check.junit.xml", "models",
                                                       "results.json"]
    assert (moved / "models" / "target.npz").read_bytes() == b"phi"
    assert digest == hashlib.sha256(b"{}\n").hexdigest() and written[run / "check.junit.xml"] == hashlib.sha256(
        b"<x/>").hexdigest()


def test_a_models_folder_swapped_for_a_link_during_the_run_is_refused(tmp_path, victim):
    run = tmp_path / "run"
    before = snapshot(victim)
    with writer_lock(run):
        (run / "models").mkdir()
        swap_for_link(run / "models", victim)
        with pytest.raises(UserError, match="models is a symbolic link"):
            atomic_write_bytes(run / "models" / "shadow-0001.npz", lambda handle: handle.write(b"phi"))
    assert snapshot(victim) == before


def test_the_lock_file_is_made_in_the_folder_opened_not_through_the_link_put_in_its_place(tmp_path, victim):
    from topicaudit.engine.storage.lock import NAME, _open_lock

    run = tmp_path / "run"
    run.mkdir()
    before = snapshot(victim)
    with owned_folders.open_folder(run) as folder:
        moved = swap_for_link(run, victim)
        fd, former, _ = _open_lock(folder, "--output")
        os.close(fd)
    assert former is None and (moved / NAME).is_file() and snapshot(victim) == before


# -- the caches: an entry swapped for a link between the cache's checks and the run (XI's F3) --------------------
def test_a_cached_run_swapped_for_a_link_after_use_cache_is_not_written_through(tmp_path, monkeypatch, victim):
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    config = Config()
    config.attack.shadows = 0
    config.attack.canaries.count = 60
    config.target.k = 3
    entry = use_cache(config, None)
    assert entry is not None
    empty = tmp_path / "empty-victim"  # empty: a run would be made in it
    empty.mkdir()
    os.utime(empty, ns=(10**18, 10**18))
    entry.parent.mkdir(parents=True)
    entry.symlink_to(empty)  # planted after the cache's checks, before the run's lock
    before = snapshot(empty)
    with pytest.raises(UserError, match="symbolic link"):
        execute_run(config, quiet=True)
    assert snapshot(empty) == before


def test_the_corpus_cache_writes_its_entry_into_the_folder_it_opened(tmp_path, monkeypatch, victim):
    """``corpora`` swapped for a link while the corpus is read (after the cache opened its folder): the entry
    is written into the folder opened, never through the link (pass X's N2)."""
    config = small_json_corpus_config(tmp_path)
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, "off")
    corpus = load_audit_corpus(config)
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    corpora = tmp_path / "cache" / "corpora"
    before = snapshot(victim)
    moved = []

    def load_then_swap():
        moved.append(swap_for_link(corpora, victim))
        return corpus

    settings = {"preprocess": False}
    assert cache.cached_corpus(config.corpus.path, None, settings, load_then_swap) is corpus
    assert snapshot(victim) == before
    assert [p.suffix for p in moved[0].iterdir()] == [".npz"]
    with pytest.warns(UserWarning, match="corpora is a symbolic link"):  # and the link is now refused
        cache.cached_corpus(config.corpus.path, None, settings, lambda: corpus)
    assert snapshot(victim) == before


# -- end to end, the command line ---------------------------------------------------------------------------------
RUN = ["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--quiet"]


def test_the_command_refuses_a_runs_models_folder_that_is_a_link(tmp_path, victim, capsys):
    out = tmp_path / "run"
    assert main([*RUN, "--output", str(out)]) == 0
    (victim / "shadow-0001.npz").write_bytes(b"not a model")  # a resume would delete what it cannot read
    os.utime(victim, ns=(10**18, 10**18))
    for model in (out / "models").iterdir():
        model.unlink()
    (out / "models").rmdir()
    (out / "models").symlink_to(victim)
    before = snapshot(victim)
    capsys.readouterr()
    assert main([*RUN, "--output", str(out)]) == 2
    assert "models" in capsys.readouterr().err
    assert snapshot(victim) == before


@pytest.mark.parametrize("linked", ["corpora", "runs"])
def test_the_command_writes_nothing_through_a_linked_cache_folder(tmp_path, monkeypatch, victim, capsys, linked):
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / linked).symlink_to(victim)
    config = small_json_corpus_config(tmp_path)
    toml = tmp_path / "c.toml"
    toml.write_text(f'[corpus]\npath = "{config.corpus.path}"\npreprocess = false\n'
                    '[target]\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n')
    before = snapshot(victim)
    if linked == "corpora":  # the corpus cache is skipped, with a note; the run is made
        assert main(["run", str(toml), "--output", str(tmp_path / "out"), "--quiet"]) == 0
    else:  # the run cache is refused
        assert main(["check", str(toml), "--epsilon", "100", "--quiet"]) == 2
        assert "runs is a symbolic link" in capsys.readouterr().err
    assert snapshot(victim) == before


def test_a_failed_start_empties_the_directory_it_locked_not_the_link_put_in_its_place(tmp_path, victim):
    """A start that fails before any model is saved empties its run directory (``removed_on_user_error``): by
    the lock's descriptor, so a directory swapped for a link meanwhile never has the link's target emptied."""
    from topicaudit.engine.execution.experiment import removed_on_user_error

    run = tmp_path / "run"
    before = snapshot(victim)
    with pytest.raises(UserError, match="refused"), writer_lock(run), removed_on_user_error(run):
        atomic_write_text(run / "config.toml", "x = 1\n")
        moved = swap_for_link(run, victim)
        raise UserError("refused")
    assert snapshot(victim) == before
    assert [p.name for p in moved.iterdir()] == []  # emptied; the lock's holder removed its .lock


def test_a_reports_staging_swapped_for_a_link_is_never_written_through(tmp_path, victim):
    """``report`` stages its output in a folder it makes beside ``-o`` (``owned_folders.new_folder``): its
    figures and pages are written below it by descriptor, so a staging replaced by a link is refused."""
    from topicaudit.reports.figures import save_figure
    import matplotlib.pyplot as plt

    users = tmp_path / "users"
    users.mkdir()
    staging = owned_folders.new_folder(users, ".rep.tmp-1-")
    swap_for_link(staging, victim)
    before = snapshot(victim)
    fig = plt.figure()
    try:
        with pytest.raises(UserError, match="symbolic link"):
            save_figure(fig, staging / "figures", "01-roc")
    finally:
        plt.close(fig)
    assert snapshot(victim) == before
