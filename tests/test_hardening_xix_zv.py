"""Hostile pass XIX-zv (tests/hostile_xix_zv_cases.md): inputs a plug-in's fit read that its run's record missed, or
kept as they were at the end of the run, so that a changed input reused the run (C1-C8, C10, C11); and a record that
held the plain SHA-256 of the integrity key, with which a forger MACed a manifest (C9).

Each plug-in below reads ``mode.txt`` (or a database, a library) in its own way inside a plug-in's fit; the record
must hold the file, so that a process after an edit of it sees the record as changed, or mark the run as never
reusable when the file changed while the run went on."""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from script_runs import folders, plugin_script, run_script

from topicaudit.api import as_config
from topicaudit.engine.storage import bounded_read
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.errors import UserError
from topicaudit.targets import registry
from topicaudit.targets.learners.lda import VariationalLDA

# A process that imports the plug-in ``zv_plug``, runs its ``act(HOW)`` inside a plug-in's fit and prints the record;
# or, given a record on stdin, prints the entries that changed.
SCRIPT = plugin_script("zv_plug", 'sys.modules["zv_plug"].act(os.environ["ZV_HOW"])')

PLUG = """import copy, ctypes, os, pickle, pkgutil, sqlite3, sys
from topicaudit.targets.learners.lda import VariationalLDA

DATA = os.environ["ZV_DATA"]  # a folder outside the plug-in's, holding mode.txt, mode.db and libmode.so


def act(how):
    mode = os.path.join(DATA, "mode.txt")
    if how == "sqlite":  # C1
        sqlite3.connect(os.path.join(DATA, "mode.db")).execute("select * from m").fetchall()
    elif how == "sqlite_uri":  # C1, as the pass's plug-in connected
        sqlite3.connect("file:" + os.path.join(DATA, "mode.db") + "?mode=ro", uri=True).execute("select * from m")
    elif how == "dir_fd":  # C2
        folder = os.open(DATA, os.O_RDONLY)
        os.close(os.open("mode.txt", os.O_RDONLY, dir_fd=folder))
    elif how == "os_open":  # (no dir_fd: through the same wrapper)
        os.close(os.open(mode, os.O_RDONLY))
    elif how == "opener":  # C2, open(..., opener=)
        folder = os.open(DATA, os.O_RDONLY)
        with open("mode.txt", opener=lambda name, flags: os.open(name, flags, dir_fd=folder)) as handle:
            handle.read()
    elif how == "absent":  # C3: an optional settings file, not there
        try:
            open(os.path.join(DATA, "optional.txt")).read()
        except FileNotFoundError:
            pass
    elif how == "rewrite":  # C10: read, then set back for the next process
        open(mode).read()
        open(mode, "w").write("honest")
    elif how == "consume":  # C10: a one-shot override, renamed away
        open(mode).read()
        os.rename(mode, mode + ".used")
    elif how == "r+":  # C4: opened to update, only read
        open(mode, "r+").read()
    elif how == "get_data":  # C5
        pkgutil.get_data("zv_data", "mode.txt")
    elif how == "shm":  # C6: a file under /dev
        open(os.environ["ZV_SHM"]).read()
    elif how == "proc_root":  # C6: a file through /proc/self/root
        open("/proc/self/root" + mode).read()
    elif how == "dlopen":  # C11: a library loaded by its path, outside the plug-in's folder
        ctypes.CDLL(os.path.join(DATA, "libmode.so"))
    elif how in ("copy", "deepcopy", "pickle"):  # C7: the command line copied whole
        {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how](sys.argv)
    elif how == "a+":  # XIX-zw Z1: a mode that can write, only read
        open(mode, "a+").seek(0)
        open(mode, "a+").read()
    elif how == "settings.py":  # Z2: a .py settings file opened "r+"
        open(os.path.join(DATA, "settings.py"), "r+").read()
    elif how == "str_":  # Z4: a path of a str subclass
        open(type("Name", (str,), {})(mode)).read()
    elif how == "posix":  # Z5: posix.open, relative to a folder's descriptor
        import posix
        posix.close(posix.open("mode.txt", os.O_RDONLY, dir_fd=os.open(DATA, os.O_RDONLY)))
    elif how == "dotdot":  # Z6: ".." after a linked folder
        open(os.path.join(DATA, "link", "..", "mode.txt")).read()
    elif how == "key_file":  # Z8: the integrity key's file, read
        open(os.environ["ZV_KEY_FILE"]).read()
    elif how == "tempdir":  # XIX-zw's false positive: a temporary folder made, read and removed in the fit
        import tempfile
        with tempfile.TemporaryDirectory() as folder:
            open(os.path.join(folder, "out.txt"), "w").write("x")
            os.system(f"echo child > {folder}/child.txt")
            open(os.path.join(folder, "child.txt")).read()
    elif how == "pool":  # XIX-zw Z9: a thread pool's worker reading for the plug-in
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(open, [mode]))
            pool.submit(os.environ.get, "ZV_MODE").result()
    elif how == "thread":  # Z9: a thread started on the standard library's function
        import threading
        reader = threading.Thread(target=os.environ.get, args=("ZV_MODE",))
        reader.start()
        reader.join()
    elif how == "len":  # C8
        len(os.environ)
    elif how == "environment":  # C9: the environment copied, the integrity key with it
        dict(os.environ)


class L(VariationalLDA):
    pass
"""


def _setup(tmp_path, how):
    (tmp_path / "data").mkdir()
    a, _, lib = folders(tmp_path, {"lib/zv_plug.py": PLUG, "data/mode.txt": "flat", "data/__init__.py": ""})
    data = tmp_path / "data"
    (lib / "zv_data").symlink_to(data)  # a package whose data ``pkgutil.get_data`` reads
    shm = tmp_path / "shm.txt"
    if how.startswith("sqlite"):
        with sqlite3.connect(data / "mode.db") as database:
            database.execute("create table m (mode text)")
            database.execute("insert into m values ('flat')")
    (data / "settings.py").write_text("MODE = 'flat'\n")
    (data / "sub").mkdir()
    (data / "link").symlink_to(data / "sub")
    if how == "dlopen":
        shutil.copy("/lib/x86_64-linux-gnu/libm.so.6", data / "libmode.so")
    if how == "shm":
        shm = Path(f"/dev/shm/zv_{tmp_path.name}.txt")
        shm.write_text("flat")
    variables = {"ZV_HOW": how, "ZV_DATA": str(data), "ZV_SHM": str(shm), "ZV_MODE": "flat"}
    return a, data, shm, variables


@pytest.mark.parametrize("how, file", [("sqlite", "mode.db"), ("sqlite_uri", "mode.db"),
                                       ("dir_fd", "mode.txt"), ("os_open", "mode.txt"), ("a+", "mode.txt"),
                                       ("settings.py", "settings.py"), ("str_", "mode.txt"), ("posix", "mode.txt"),
                                       ("dotdot", None), ("pool", "mode.txt"), ("opener", "mode.txt"),
                                       ("absent", "optional.txt"), ("r+", "mode.txt"), ("get_data", "mode.txt"),
                                       ("shm", None), ("proc_root", None), ("dlopen", "libmode.so")])
def test_a_file_the_plug_in_read_is_kept_with_its_run(tmp_path, how, file):
    """C1 (a SQLite database), C2 (``os.open(…, dir_fd=)``, an opener), C3 (a file looked for, not there), C4
    (opened ``"r+"``, only read), C5 (``pkgutil.get_data``), C6 (``/dev/shm``, ``/proc/self/root``), C11 (a library
    loaded by ctypes from outside the plug-in's folder): the record held no such file, and an edit of it reused the
    run. The record holds it now; an edit reads as a change, and an unchanged file as none."""
    a, data, shm, variables = _setup(tmp_path, how)
    try:
        record = run_script(SCRIPT, a, variables=variables)
        kept = [entry for entry in record if entry.endswith(file or "mode.txt") or entry == str(shm)]
        assert kept and all(record[entry] != "uncheckable" for entry in kept), record
        assert run_script(SCRIPT, a, record=record, variables=variables) == []
        edited = shm if how == "shm" else data / (file or "mode.txt")
        with open(edited, "ab") as handle:
            handle.write(b"\0")
        assert run_script(SCRIPT, a, record=record, variables=variables) != []
    finally:
        shm.unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["rewrite", "consume"])
def test_a_file_changed_after_the_plug_in_read_it_keeps_its_run_from_reuse(tmp_path, how):
    """C10: a fit that read ``mode.txt`` and then set it back (or renamed it away) was recorded with the file as it
    was at the end: a later process with the file as the record says reused a run fitted on other content."""
    a, data, _, variables = _setup(tmp_path, how)
    record = run_script(SCRIPT, a, variables=variables)
    assert record.get(str(data / "mode.txt")) == "uncheckable", record
    assert str(data / "mode.txt") in run_script(SCRIPT, a, record=record, variables=variables)


@pytest.mark.parametrize("how, entry", [("copy", "sys.argv"), ("deepcopy", "sys.argv"), ("pickle", "sys.argv"),
                                        ("len", "environment ZV_MODE"), ("pool", "environment ZV_MODE"),
                                        ("thread", "environment ZV_MODE")])
def test_the_command_line_or_environment_read_whole_is_kept(tmp_path, how, entry):
    """C7 (``copy.copy``, ``copy.deepcopy``, ``pickle.dumps`` of ``sys.argv``), C8 (``len(os.environ)``); XIX-zw Z9
    (read in a thread pool's worker, or a thread, running the standard library's function for the plug-in)."""
    a, _, _, variables = _setup(tmp_path, how)
    record = run_script(SCRIPT, a, variables=variables)
    assert entry in record, record


def test_no_record_holds_the_integrity_key_or_a_plain_digest_of_a_value(tmp_path):
    """C9: a plug-in copying the environment put SHA-256(key) into results.json; HMAC-SHA256 keys with exactly that
    for a key over 64 bytes, and a forged manifest MACed with it was accepted as authenticated. The key's variable is
    never kept, and no value's plain SHA-256 is."""
    a, _, _, variables = _setup(tmp_path, "environment")
    key = "k" * 80
    record = run_script(SCRIPT, a, variables={**variables, "TOPICAUDIT_INTEGRITY_KEY": key})
    assert "environment TOPICAUDIT_INTEGRITY_KEY" not in record, record
    assert "environment ZV_MODE" in record, record
    plain = {hashlib.sha256(value.encode()).hexdigest() for value in (key, "flat")}
    assert not plain & set(record.values()), record


def test_an_unreadable_json_file_is_answered_with_a_fix_that_works(tmp_path):
    """O3: an unreadable sweep.json was answered "rerun the same command to rewrite it", and every rerun failed the
    same way; the fix now says to remove the file or choose another output folder."""
    broken = tmp_path / "sweep.json"
    broken.write_text("garbage")
    with pytest.raises(UserError, match="remove it, or give the command another output folder"):
        bounded_read.read_json(broken)


def test_a_learner_whose_k_is_a_numpy_integer_is_told_what_to_store():
    """O5: ``VariationalLDA(k=np.int64(3))`` was refused as storing no number of topics: it stores one, of another
    type."""
    with pytest.raises(UserError, match=r"as a Python int \(got np.int64\(3\)\); set self.k = int\(k\)"):
        registry.learner_settings(VariationalLDA(k=np.int64(3)))


def test_a_temporary_folder_of_the_fit_keeps_its_runs_reusable(tmp_path):
    """XIX-zw's false positives: ``shutil.rmtree`` opens each folder it removes, and a child's output read in a
    temporary folder was gone at the record's time; every run was recorded as unreusable, and the cache never found
    any again. A folder is no file read; a file whose folder is gone is kept as absent."""
    a, _, _, variables = _setup(tmp_path, "tempdir")
    record = run_script(SCRIPT, a, variables=variables)
    assert "uncheckable" not in record.values(), record
    assert run_script(SCRIPT, a, record=record, variables=variables) == []


def test_the_integrity_key_file_is_never_kept(tmp_path):
    """Z8: a plug-in reading the key file put SHA-256(file) in the record: for a key over 64 bytes without a newline,
    HMAC-SHA256's own key."""
    a, _, _, variables = _setup(tmp_path, "key_file")
    key = tmp_path / "config" / "topicaudit" / "integrity.key"
    key.parent.mkdir(parents=True)
    key.write_text("k" * 100)
    record = run_script(SCRIPT, a, variables={**variables, "XDG_CONFIG_HOME": str(tmp_path / "config"),
                                              "ZV_KEY_FILE": str(key)})
    assert not [entry for entry in record if entry.endswith("integrity.key")], record
    assert hashlib.sha256(b"k" * 100).hexdigest() not in record.values(), record


@pytest.mark.parametrize("entry, found_again", [("/x/settings.txt", True),
                                                ("<code from no file, run by /x/p.py>", False)])
def test_the_cache_finds_the_entry_after_a_run_whose_file_changed(tmp_path, entry, found_again):
    """XIX-zw: a run recorded as unreusable (a file it read changed after it read it) sent every later run of its key
    to an entry never found again, so that audit was fitted at every call. The next entry is found again now; after
    a run of code from no file, as before, none is."""
    config = as_config({"target": {"learner": "lda", "k": 3}, "attack": {"shadows": 0, "canaries": {"count": 20}}})
    first = cached_run_dir(config, tmp_path)
    first.mkdir()
    (first / "results.json").write_text(json.dumps({"target": {"loaded_code": {entry: "uncheckable"}}}))
    second, third = cached_run_dir(config, tmp_path), cached_run_dir(config, tmp_path)
    assert second != first and (second == third) == found_again
