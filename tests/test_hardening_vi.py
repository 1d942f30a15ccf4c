"""Hardening VI (issue 32, the leftovers): the files besides the evidence that a later command reads (check.json,
sweep.json), a first SIGTERM that always ends the command, and the defects a fresh hostile pass found.

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in ~1 s.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine import manifest
from topicaudit.inputs import integrity_key

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
    assert listed["check.json"] == manifest.sha256(plain / "check.json")
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

