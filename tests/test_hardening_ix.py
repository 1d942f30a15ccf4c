"""Hardening IX (issue 32, the final hostile pass): what it found. Every case it ran is in
tests/hostile_ix_cases.md.

The one critical defect: with an integrity key configured, a file was listed in the manifest (and MAC'd) by
hashing what was on disk after topicaudit renamed it into place. A forger without the key who renamed another
file over check.json in that moment (a loop watching the directory won the race on the first try) had the forged
check.json authenticated: ``report``'s card then tested a claim ``check`` was never given (ε = 100, CONSISTENT,
"as given to topicaudit check", where check had said VIOLATED at ε = 1). The same window was open for every file a
run writes (canary_scores.npz, scores.npz, results.json).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import durable_write, manifest
from topicaudit.errors import UserError
from topicaudit.inputs import integrity_key

KEY = "k" * 40


def swap_after_rename(monkeypatch, victim: Path, forged: bytes):
    """Stand in for the forger: the first time ``victim`` is in place, rename forged bytes over it (at the
    directory fsync right after topicaudit's rename, before the manifest lists it)."""
    real = durable_write.fsync_directory
    done = []

    def fsync_then_forge(path):
        real(path)
        if not done and victim.is_file():
            tmp = victim.parent / ".forged"
            tmp.write_bytes(forged)
            os.replace(tmp, victim)
            done.append(True)

    monkeypatch.setattr(durable_write, "fsync_directory", fsync_then_forge)
    return done


def test_a_file_replaced_after_its_write_is_not_listed_with_the_forgers_hash(tmp_path, monkeypatch):
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    victim = tmp_path / "check.json"
    done = swap_after_rename(monkeypatch, victim, b'{"claimed_epsilon": 100.0}\n')
    digest = durable_write.atomic_write_text(victim, '{"claimed_epsilon": 1.0}\n')
    assert done, "the forger did not get its turn"
    manifest.record(tmp_path, "check.json", write_text=durable_write.atomic_write_text,
                    written={"check.json": digest})
    listed = manifest.entries(tmp_path)["check.json"]
    assert listed == hashlib.sha256(b'{"claimed_epsilon": 1.0}\n').hexdigest()  # what topicaudit wrote
    with pytest.raises(UserError, match="check.json"):
        manifest.verify(tmp_path, ["check.json"])


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h9") / "keyed"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
        assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--output", str(out),
                     "--quiet"]) == 0
    return out


def test_a_check_json_forged_during_check_is_refused_by_report(keyed_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(integrity_key.ENVIRONMENT_VARIABLE, KEY)
    run = tmp_path / "run"
    shutil.copytree(keyed_run, run)
    assert main(["check", str(run), "--epsilon", "1", "--quiet"]) == 1  # VIOLATED: ε ≥ 2.22 > 1
    forged = json.loads((run / "check.json").read_text())
    forged["claimed_epsilon"] = 100.0
    forged["verdict"] = "CONSISTENT"
    done = swap_after_rename(monkeypatch, run / "check.json", (json.dumps(forged) + "\n").encode())
    assert main(["check", str(run), "--epsilon", "1", "--quiet"]) == 1
    assert done, "the forger did not get its turn"
    capsys.readouterr()
    monkeypatch.setattr(durable_write, "fsync_directory", lambda path: None)
    code = main(["report", str(run), "-o", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 2 and "check.json" in err  # refused as edited: never a card testing ε = 100
