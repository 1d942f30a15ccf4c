"""Hostile pass XIX-zs (tests/hostile_xix_zs_cases.md): a run directory whose own files are kept elsewhere and
linked back (``models/`` moved to another disk, ``config.toml`` a link) is still the run's; an output at the link's
target is one of its files.

- W02 (high): ``check RUN --json M/canary-target.npz``, RUN/models a link to M, replaced the run's model with the
  JSON document (W02b: ``--junit``); W14: ``--json`` at the target of RUN/config.toml replaced the configuration
  and every later check refused the run; W15: ``report RUN -o M/zz.npz`` made a folder in the models, and every
  later check refused the run as edited. Each is refused now, exit 2, the folder left as it was.
- W18 (high): ``check RUN --json M2/canary-target.npz``, M2 another run's models folder linked from that run:
  its model replaced. A file that is any run's model is refused now.
  A new entry there (``report -o M2/new``, ``--json M2/new.json``) made that run refused as edited: refused too.
- N1: ``report RUN -o L``, L the user's link to an empty folder U: the link was replaced by the report folder (U left
  empty). Refused now, as a dangling link is.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine.storage import manifest
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.errors import UserError

from linked_cache import run_dir, snapshot  # noqa: F401 — run_dir: a fixture


def _models_elsewhere(run: Path) -> Path:
    """Move RUN/models to M beside the run and link it back."""
    moved = run.parent / "M"
    shutil.move(str(run / "models"), moved)
    (run / "models").symlink_to("../M")
    return moved


@pytest.mark.parametrize("flag", ["--json", "--junit"])
def test_check_never_writes_over_a_model_through_the_runs_linked_models_folder(run_dir, tmp_path, capsys, flag):
    moved = _models_elsewhere(run_dir)
    before = snapshot(tmp_path)
    assert main(["check", "RUN", "--epsilon", "0.01", flag, "M/canary-target.npz"]) == 2
    err = capsys.readouterr().err
    assert "models of the run directory RUN" in err and snapshot(tmp_path) == before
    assert (moved / "canary-target.npz").read_bytes()[:2] == b"PK"


def test_check_never_writes_over_the_file_the_runs_config_links_to(run_dir, tmp_path, capsys):
    kept = tmp_path / "kept.toml"
    shutil.move(str(run_dir / "config.toml"), kept)
    (run_dir / "config.toml").symlink_to("../kept.toml")
    before = snapshot(tmp_path)
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "kept.toml"]) == 2
    assert "config.toml of the run directory RUN" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    assert main(["check", "RUN", "--epsilon", "0.01"]) == 1  # the run still verifies


def test_a_report_is_never_made_inside_the_runs_linked_models_folder(run_dir, tmp_path, capsys):
    _models_elsewhere(run_dir)
    before = snapshot(tmp_path)
    assert main(["report", "RUN", "-o", "M/zz.npz"]) == 2
    assert "it is models of RUN" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    assert main(["check", "RUN", "--epsilon", "0.01"]) == 1  # not refused as edited


def test_an_output_beside_the_linked_folder_is_still_fine(run_dir, tmp_path, capsys):
    _models_elsewhere(run_dir)
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "elsewhere.json"]) == 1
    assert (tmp_path / "elsewhere.json").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a folder")
def test_check_never_writes_over_a_model_through_a_mount_of_the_runs_models(run_dir, tmp_path, capsys):
    """W16: RUN/models mounted (bind) at M: ``--json M/canary-target.npz`` replaced the model."""
    (tmp_path / "M").mkdir()
    if subprocess.run(["mount", "--bind", str(run_dir / "models"), str(tmp_path / "M")]).returncode != 0:
        pytest.skip("no bind mount here")
    try:
        model = (run_dir / "models" / "canary-target.npz").read_bytes()
        assert main(["check", "RUN", "--epsilon", "0.01", "--json", "M/canary-target.npz"]) == 2
        assert "models of the run directory RUN by another name" in capsys.readouterr().err
        assert (run_dir / "models" / "canary-target.npz").read_bytes() == model
    finally:
        subprocess.run(["umount", str(tmp_path / "M")])


def test_a_report_output_that_is_the_users_link_is_refused_and_kept(run_dir, tmp_path, capsys):
    (tmp_path / "U").mkdir()
    (tmp_path / "L").symlink_to("U")
    before = snapshot(tmp_path)
    assert main(["report", "RUN", "-o", "L"]) == 2
    assert "L is a symbolic link (to U)" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


def test_check_never_writes_over_another_runs_model_kept_elsewhere(run_dir, tmp_path, capsys):
    other = tmp_path / "OTHER"
    shutil.copytree(run_dir, other, symlinks=True)
    moved = _models_elsewhere(other)
    model = (moved / "canary-target.npz").read_bytes()
    assert main(["check", "RUN", "--epsilon", "0.01", "--json", "M/canary-target.npz"]) == 2
    assert "it is a model file of a topicaudit run" in capsys.readouterr().err
    assert (moved / "canary-target.npz").read_bytes() == model


@pytest.mark.parametrize("command", [["report", "RUN", "-o", "M/new"], ["report", "RUN", "-o", "M/new/deeper"],
                                     ["check", "RUN", "--epsilon", "0.01", "--json", "M/new.json"]])
def test_nothing_is_made_inside_another_runs_models_kept_elsewhere(run_dir, tmp_path, capsys, command):
    """W18's remainder: a new report folder (or check's JSON) in another run's models/, kept at M and linked back,
    was an unlisted entry there, and that run was refused as edited ever after; refused now, exit 2."""
    other = tmp_path / "OTHER"
    shutil.copytree(run_dir, other, symlinks=True)
    _models_elsewhere(other)
    before = snapshot(tmp_path)
    assert main(command) == 2
    assert "holds a topicaudit run's model files" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
    assert main(["check", "OTHER", "--epsilon", "0.01"]) == 1  # not refused as edited


@pytest.mark.parametrize("field, value", [("schema", "topicaudit.manifest/0"), ("algorithm", "md5"), ("schema", None)])
@pytest.mark.parametrize("key", ["off", "0123456789abcdef0123456789abcdef"])
def test_a_manifest_whose_schema_or_algorithm_was_edited_is_refused(tmp_path, monkeypatch, field, value, key):
    """N2: the MAC covers the schema and algorithm topicaudit writes, not the file's own fields, so a keyed manifest
    saying another schema verified (and check rewrote it): it is an edited manifest, with a key or without."""
    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", key)
    (tmp_path / "results.json").write_text("{}")
    manifest.record(tmp_path, "results.json", write_text=atomic_write_text)
    path = tmp_path / manifest.NAME
    assert manifest.read(tmp_path) is not None
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="the manifest was edited"):
        manifest.read(tmp_path)
