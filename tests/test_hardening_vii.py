"""Hardening VII (issue 32, a third hostile pass): the defects it found, each with the case that showed it.

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in seconds.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.inputs import files, integrity_key

KEY = "d" * 16 + "0123456789abcdef" * 3  # 64 characters
# A claim the 60-canary runs never refute (no outcome proves more than ε ≈ 2.2), near enough that the verdict's
# search for a count whose ceiling passes it stops at a few thousand canaries (ε = 10: 150,000, ~3 CPU-s).
GENEROUS = "5"


def canary_run(output: Path, *extra: str) -> int:
    return main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(output), "--quiet",
                 *extra])


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h7") / "keyed"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
        assert canary_run(out) == 0
    return out


@pytest.fixture
def keyed(keyed_run, tmp_path, monkeypatch):
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    copy = tmp_path / "keyed"
    shutil.copytree(keyed_run, copy)
    return copy


def shuffled_coins(run: Path, into: Path) -> None:
    """canaries.npz with its coins shuffled: a forgery the manifest's hash (and MAC) refuses."""
    arrays = dict(np.load(run / "canaries.npz"))
    arrays["coins"] = np.random.default_rng(1).permutation(arrays["coins"])
    with open(into, "wb") as handle:
        np.savez(handle, **arrays)


# -- (a) what is verified is what is read: a file swapped in between -----------------------------------------
@pytest.mark.parametrize("held_open", [False, True], ids=["in-memory", "held-open"])
def test_a_file_swapped_in_after_its_hash_was_checked_is_not_read(keyed, monkeypatch, capsys, held_open):
    """check hashed canaries.npz in one read and parsed it in another: a forger swapping files in a loop
    (rename(2)) had shuffled coins read as the authenticated ones in 3 of 10 checks — NO SIGNAL, exit 0,
    "integrity: authenticated", on a run whose genuine verdict is VIOLATED. Here the swap lands right after
    the hash, every time: the verdict must come from the bytes that were hashed."""
    forged = keyed / ".forged.npz"
    shuffled_coins(keyed, forged)
    real = manifest.file_sha256

    def hash_then_swap(path):
        digest = real(path)
        if Path(path).name == "canaries.npz" and forged.exists():
            os.replace(forged, path)  # the genuine file was hashed; the forged one is there from now on
        return digest

    if held_open:  # as a file larger than PIN_BYTES is: held open since it was hashed, not copied
        monkeypatch.setattr(files, "PIN_BYTES", 0)
    monkeypatch.setattr(manifest, "file_sha256", hash_then_swap)
    monkeypatch.setattr(files, "file_sha256", hash_then_swap)
    code = main(["check", str(keyed), "--epsilon", "1"])
    captured = capsys.readouterr()
    assert not forged.exists()  # the swap happened
    if held_open:  # the held file's name was taken from it: refused, never a verdict from the forged file
        assert code == 2 and "canaries.npz was written, replaced or removed" in captured.err, captured
        return
    assert code == 1 and captured.out.startswith("VIOLATED") and "authenticated" in captured.out, captured


def test_a_file_that_appears_after_the_manifest_was_checked_is_not_read(keyed, monkeypatch, capsys):
    """A canary-only run has no scores.npz: one dropped in after the manifest's completeness check (which
    refuses an unlisted file) was read as natural-document evidence."""
    real = manifest.verify
    planted = {}

    def verify_then_plant(run_dir, names=None):
        real(run_dir, names)
        if not planted:
            planted["done"] = True
            member = np.arange(20000) % 2 == 0  # perfectly separated: a forged VIOLATED
            np.savez(Path(run_dir) / "scores.npz", is_member=member, doc_index=np.arange(20000),
                     lira_online=member * 10.0, lira_offline=member * 10.0)

    monkeypatch.setattr(manifest, "verify", verify_then_plant)
    code = main(["check", str(keyed), "--epsilon", "5"])
    out = capsys.readouterr().out
    assert planted and (Path(keyed) / "scores.npz").exists()
    assert code == 0 and out.startswith("CONSISTENT") and "natural" not in out, out


# -- (c) user files: the writer lock -------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"4242\n"])
def test_a_lock_that_is_a_hard_link_to_a_users_file_is_refused_untouched(tmp_path, capsys, content):
    """`.lock` hard-linked to a file of the user's that was empty or held digits (what a lock may hold): the
    command took it and wrote its PID into the user's file."""
    users = tmp_path / "notes.txt"
    users.write_bytes(content)
    before = os.stat(users)
    out = tmp_path / "run"
    out.mkdir()
    os.link(users, out / ".lock")
    assert canary_run(out) == 2
    err = capsys.readouterr().err
    assert ".lock" in err and "hard link" in err and err.count("\n") == 1, err
    assert users.read_bytes() == content and os.stat(users).st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in out.iterdir()) == [".lock"]


# -- the verdict line and its JUnit record: a run directory's name is anyone's ---------------------------------
@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h7") / "plain"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
        assert canary_run(out) == 0
    return out


@pytest.mark.parametrize("name", ["run\nCONSISTENT: not refuted\x1b[32m\x01]]>", os.fsdecode(b"run\xff")])
def test_a_run_directory_name_cannot_split_the_verdict_line_or_break_its_records(plain_run, tmp_path, capsys,
                                                                                 monkeypatch, name):
    """A run directory named ``x⏎CONSISTENT: …`` made the VIOLATED line print a second line reading CONSISTENT
    (in green), and check.junit.xml not XML (a CI's parser rejected it); a name holding the byte 0xff crashed
    check (UnicodeEncodeError writing check.junit.xml: exit 3) after check.json was rewritten, so the directory's
    check.json no longer matched its manifest."""
    import xml.dom.minidom

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / name
    shutil.copytree(plain_run, run)
    code = main(["check", str(run), "--epsilon", "0.5"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert captured.out.count("\n") == 1 and captured.out.startswith("VIOLATED") and "\x1b" not in captured.out
    xml.dom.minidom.parse(str(run / "check.junit.xml"))
    assert manifest.entries(run)["check.junit.xml"] == files.file_sha256(run / "check.junit.xml")


def test_a_check_refused_for_its_junit_file_leaves_the_run_as_it_was(plain_run, tmp_path, capsys, monkeypatch):
    """`check RUN --junit FULL/x.xml` with FULL a full disk (seen on a 120 KiB tmpfs): check.json was rewritten
    in the run directory, then the JUnit file failed (exit 2) — the run kept a check.json its manifest did not
    match, and `report` refused it until check was rerun. Now both files are written, or neither."""
    import errno

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    assert main(["check", str(run), "--epsilon", GENEROUS]) == 0
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    full = tmp_path / "full"
    full.mkdir()
    real = os.fsync

    def no_space(fd):  # the data of a file written on FULL does not fit (the empty probe file did)
        if Path(os.readlink(f"/proc/self/fd/{fd}")).parent == full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", no_space)
    capsys.readouterr()
    assert main(["check", str(run), "--epsilon", "1", "--junit", str(full / "x.xml")]) == 2
    err = capsys.readouterr().err
    assert "x.xml" in err and "no space left" in err and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert not list(full.iterdir()) and not [p for p in run.iterdir() if p.name.endswith(".tmp")]


# -- concurrent commands on one run directory ------------------------------------------------------------------
def test_checks_of_one_run_in_parallel_do_not_lose_each_others_manifest_update(plain_run, tmp_path, monkeypatch):
    """Parallel checks of one (cached) run, each testing its own claim, each read, updated and rewrote the
    manifest: one's update was lost in 7 of 200 trials, and report then refused the run's check.json as
    edited."""
    import dataclasses
    import threading

    from topicaudit.engine.check import check_run, one_check_at_a_time, record_check_files, write_reports

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    checked = check_run(run, 0.5)
    results = [dataclasses.replace(checked, claimed_epsilon=epsilon) for epsilon in (0.5, 1.0, 10.0, 20.0)]

    def record(result):
        with one_check_at_a_time(run):
            record_check_files(run, write_reports(result, run / "check.json", run / "check.junit.xml"))

    for _ in range(40):
        threads = [threading.Thread(target=record, args=(result,)) for result in results]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert manifest.entries(run)["check.json"] == files.file_sha256(run / "check.json")


def test_check_records_its_verdict_under_the_directory_lock(plain_run, tmp_path, capsys, monkeypatch):
    """The command line takes that lock: held elsewhere past the wait, check is exit 2, nothing written."""
    import fcntl

    from topicaudit.engine import check

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    monkeypatch.setattr(check, "CHECK_LOCK_SECONDS", 0.2, raising=False)
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    fd = os.open(run, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        code = main(["check", str(run), "--epsilon", "0.5"])
    finally:
        os.close(fd)
    captured = capsys.readouterr()
    assert code == 2 and "locked" in captured.err and captured.err.count("\n") == 1, captured
    assert not captured.out
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


# -- report -o over the files a run is read from -------------------------------------------------------------
@pytest.mark.parametrize("inside", ["models/target.npz", "scores.npz", "models", "statistics.npz/page"])
def test_report_never_writes_over_the_names_a_run_is_read_from(plain_run, tmp_path, capsys, monkeypatch, inside):
    """`report RUN -o RUN/models/target.npz` (or RUN/scores.npz in a canary-only run) made the report's folder
    there, and every later check, report and resume refused the run as edited ("not listed in manifest.json",
    rerun the audit)."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    listing = sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))
    assert main(["report", str(run), "-o", str(run / inside)]) == 2
    err = capsys.readouterr().err
    assert "-o/--output" in err and err.count("\n") == 1, err
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == listing
    assert main(["check", str(run), "--epsilon", "0.5"]) == 1


@pytest.mark.parametrize("inside", ["scores.npz", "models/extra"])
def test_a_run_is_never_made_inside_another_runs_own_files(plain_run, tmp_path, capsys, monkeypatch, inside):
    """`run --output RUN/scores.npz` of a canary-only RUN made a run there: RUN was refused as edited ever after."""
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    listing = sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))
    assert canary_run(run / inside) == 2
    err = capsys.readouterr().err
    assert "--output" in err and inside.split("/")[0] in err and err.count("\n") == 1, err
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == listing


# -- the run cache -------------------------------------------------------------------------------------------
def test_a_run_cache_entry_that_is_a_link_is_never_written_through(tmp_path, capsys, monkeypatch):
    """`check CONFIG` wrote its cached run through a link in the cache's place for it, into the link's target
    (an empty folder of the user's, outside the cache)."""
    from topicaudit.engine.configuration.config import run_config
    from topicaudit.engine.configuration.loading import load_config
    from topicaudit.engine.storage.run_cache import cached_run_dir

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    config = tmp_path / "audit.toml"
    config.write_text("[target]\nk = 3\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    cache = tmp_path / "cache"
    slot = cached_run_dir(run_config(load_config(config)), cache)
    slot.parent.mkdir(parents=True)
    users = tmp_path / "users"
    users.mkdir()
    slot.symlink_to(users)
    code = main(["check", str(config), "--epsilon", "0.5", "--cache", str(cache), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err and err.count("\n") == 1, err
    assert not list(users.iterdir()) and slot.is_symlink()


def test_a_sigterm_between_check_json_and_the_manifest_leaves_them_agreeing(plain_run, tmp_path, capsys,
                                                                             monkeypatch):
    """A SIGTERM (a CI timeout) that landed after check.json was rewritten and before the manifest listed it: exit
    130, and the run kept a check.json its manifest did not match (report refused it as edited). The signal is
    now taken once both are written."""
    import signal

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    assert main(["check", str(run), "--epsilon", GENEROUS]) == 0
    real = manifest.record

    def terminated_first(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs at the next instruction
        for _ in range(1000):
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(manifest, "record", terminated_first)
    capsys.readouterr()
    code = main(["check", str(run), "--epsilon", "0.5"])
    assert code in (1, 130), capsys.readouterr()
    assert manifest.entries(run)["check.json"] == files.file_sha256(run / "check.json")
    monkeypatch.setattr(manifest, "record", real)
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(tmp_path / "page")]) == 0, capsys.readouterr().err


def test_a_report_refused_for_a_full_disk_removes_the_folders_it_made(plain_run, tmp_path, capsys, monkeypatch):
    """`report RUN -o FULL/x/y/rep` on a full disk (a 100 KiB tmpfs): exit 2, but x/ and x/y/ were left."""
    import errno

    from topicaudit.owned_folders import Folder

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    real = Folder.make_folder

    def no_space(self, prefix):  # the staging folder cannot be made (report stages by its folder's descriptor)
        if prefix.startswith(".rep.tmp-"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, prefix)

    monkeypatch.setattr(Folder, "make_folder", no_space)
    place = tmp_path / "place"
    place.mkdir()
    assert main(["report", str(plain_run), "-o", str(place / "x" / "y" / "rep")]) == 2
    err = capsys.readouterr().err
    assert "no space left" in err and err.count("\n") == 1, err
    assert not list(place.iterdir())


def test_a_large_file_written_into_after_its_hash_was_checked_is_refused(keyed, monkeypatch, capsys):
    """A large file is held open, not copied: a rename over its name is not seen, and a write into it (the
    same open file) is refused, never read."""
    monkeypatch.setattr(files, "PIN_BYTES", 0)
    real = manifest.file_sha256
    forged = keyed / ".forged.npz"
    shuffled_coins(keyed, forged)

    def hash_then_write_into(path):
        digest = real(path)
        if Path(path).name == "canaries.npz" and forged.exists():
            with open(path, "r+b") as handle:  # the same inode: what the held file reads
                handle.write(forged.read_bytes())
            forged.unlink()
        return digest

    monkeypatch.setattr(manifest, "file_sha256", hash_then_write_into)
    code = main(["check", str(keyed), "--epsilon", "1"])
    captured = capsys.readouterr()
    assert code == 2 and "canaries.npz was written, replaced or removed" in captured.err, captured
    assert not captured.out


def test_checks_and_reports_read_large_files_held_open(keyed, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(files, "PIN_BYTES", 0)
    assert main(["check", str(keyed), "--epsilon", "1"]) == 1
    assert main(["report", str(keyed), "-o", str(tmp_path / "page")]) == 0, capsys.readouterr().err


# -- (b) exit 3 from a recorded field: the metrics the report prints -----------------------------------------
@pytest.mark.parametrize("value", [None, "x", [], True])
@pytest.mark.parametrize("metric", ["auc", "tpr_at_fpr_0.001", "tpr_at_fpr_0.01"])
def test_a_recorded_metric_that_is_no_number_is_exit_2_naming_it(plain_run, tmp_path, capsys, monkeypatch, metric,
                                                                  value):
    """A fuzz of results.json through `report` (hashes recomputed, as the unkeyed mode allows): a canary score's
    tpr_at_fpr_0.01 or auc set to null or a string was an internal error (TypeError, ValueError: exit 3) in the
    verdict card or the ROC legend."""
    import json

    from topicaudit.engine.storage.durable_write import atomic_write_text

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    results = json.loads((run / "results.json").read_text())
    results["canaries"]["scores"]["zeta"][metric] = value
    (run / "results.json").write_text(json.dumps(results))
    manifest.record(run, "results.json", write_text=atomic_write_text)
    assert main(["report", str(run), "-o", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert f"canaries.scores.zeta.{metric} must be a number" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("edit, named", [
    (lambda r: r.update(timings_s=-1), "timings_s must be an object or null"),
    (lambda r: r.update(timings_s="fast"), "timings_s must be an object or null"),
    (lambda r: r.update(timings_s={"total": "x"}), "timings_s.total must be a number"),
    (lambda r: r.update(attacks=None), "attacks must not be null"),
    (lambda r: r["target"].update(k="five"), "target.k must be"),
])
def test_a_recorded_field_of_another_json_type_is_exit_2_naming_it(plain_run, tmp_path, capsys, monkeypatch, edit,
                                                                   named):
    """The same fuzz: `timings_s` that is no object (AttributeError in the report's timings) and
    `utility.heldout_perplexity = "inf"` (ValueError formatting it) were exit 3. Every field of results.json
    whose type is a JSON type (number, integer, string, object, list) is now held to it when read."""
    import json

    from topicaudit.engine.storage.durable_write import atomic_write_text

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    results = json.loads((run / "results.json").read_text())
    edit(results)
    (run / "results.json").write_text(json.dumps(results))
    manifest.record(run, "results.json", write_text=atomic_write_text)
    for argv in (["report", str(run), "-o", str(tmp_path / "page")], ["check", str(run), "--epsilon", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert named in err and err.count("\n") == 1, err


def test_every_results_file_a_run_writes_passes_the_type_checks(plain_run, keyed_run):
    import json

    from topicaudit.engine.storage.results import RunResults

    for run in (plain_run, keyed_run):
        RunResults.from_json(json.loads((run / "results.json").read_text()), "results.json")


@pytest.mark.parametrize("edit, code", [
    (lambda c: c["synthetic"].update(doc_concentration=-1), 0),
    (lambda c: c.update(corpus=1e308), 2),
])
def test_a_run_config_toml_of_the_wrong_kind_is_no_internal_error_in_report(plain_run, tmp_path, capsys,
                                                                            monkeypatch, edit, code):
    """A fuzz of a run's config.toml through `report` (hashes recomputed): `corpus = 1e308` was an
    AttributeError (exit 3); a negative [synthetic] prior, below."""
    from topicaudit.engine.configuration.toml_writer import to_toml
    from topicaudit.engine.storage.bounded_read import read_run_toml
    from topicaudit.engine.storage.durable_write import atomic_write_text

    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, "off")
    run = tmp_path / "run"
    shutil.copytree(plain_run, run)
    config = read_run_toml(run / "config.toml")
    edit(config)
    (run / "config.toml").write_text(to_toml(config))
    manifest.record(run, "config.toml", write_text=atomic_write_text)
    assert main(["report", str(run), "-o", str(tmp_path / "page")]) == code
    err = capsys.readouterr().err
    if code == 2:
        assert "config.toml is not a configuration topicaudit wrote" in err and err.count("\n") == 1, err


def test_a_synthetic_corpus_redrawn_from_a_run_is_checked_first():
    """The report of a natural-document run redraws its [synthetic] corpus from config.toml: a negative prior
    there was numpy's ValueError "alpha < 0" (exit 3); now a UserError, which the report turns into a note."""
    from topicaudit.engine.configuration.config import Config
    from topicaudit.engine.storage.run_corpus import load_audit_corpus
    from topicaudit.errors import UserError

    config = Config()
    config.synthetic.doc_concentration = -1.0
    with pytest.raises(UserError, match="doc_concentration must be a finite number > 0"):
        load_audit_corpus(config)
