"""Hardening III, the remaining items (issue 32): recorded mechanism constants, the API's argument checks,
clearer messages, run names, failed writes, the lock, signals at start-up and the corpus cache's limit.

Runs here are canary-only (``shadows = 0``): they fit in the test's process, without Ray, in a few seconds.
"""
import json
import shutil
from pathlib import Path

import pytest

from topicaudit.cli.main import main
from topicaudit.engine import manifest
from topicaudit.engine.rundir import atomic_write_text

REPO = Path(__file__).resolve().parents[1]


# -- 12. results.json's recorded mechanism constants are type-checked -------------------------------------
@pytest.fixture(scope="module")
def mechanism_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("h4") / "dp"
    assert main(["run", "--shadows", "0", "--canaries", "60", "--k", "3", "--learner", "dp-cgs", "--output",
                 str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["canaries"]["mechanism"]["parameters"]["scale"] > 0
    return out


def forge_results(run_dir: Path, edit) -> None:
    """Edit results.json and record its new hash, as a forger who rewrites the manifest too would."""
    path = run_dir / "results.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    manifest.record(run_dir, "results.json", write_text=atomic_write_text)


@pytest.mark.parametrize("key, value", [
    ("scale", "21.3"), ("scale", float("nan")), ("scale", -1.0), ("scale", float("inf")), ("scale", None),
    ("scale", [1.0]), ("scale", 10**400), ("document_tokens", 2.5), ("document_tokens", True),
    ("noise_std", 0), ("sampling_rate", 1.5), ("keep_probability", "0.9"), ("alpha", 1.0), ("rho", -2),
    ("gamma", {}), ("noise", "cauchy"), ("delta", 1.0),
])
def test_a_recorded_mechanism_constant_of_the_wrong_type_is_refused_naming_it(mechanism_run, tmp_path, capsys,
                                                                                 key, value):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: data["canaries"]["mechanism"]["parameters"].__setitem__(key, value))
    code = main(["check", str(run), "--epsilon", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("topicaudit: error: ") and err.count("\n") == 1
    assert f"canaries.mechanism.parameters.{key} must be" in err and "rerun the audit" in err


@pytest.mark.parametrize("edit, named", [
    (lambda m: m.__setitem__("parameters", [1, 2]), "canaries.mechanism.parameters must be an object"),
    (lambda m: m.__setitem__("tokens", "128"), "canaries.mechanism.tokens must be an integer"),
    (lambda m: m.__setitem__("topics", -3), "canaries.mechanism.topics must be an integer"),
    (lambda m: m.__setitem__("kind", None), "canaries.mechanism.kind must be a string"),
])
def test_a_recorded_mechanism_of_the_wrong_shape_is_refused(mechanism_run, tmp_path, capsys, edit, named):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: edit(data["canaries"]["mechanism"]))
    assert main(["check", str(run), "--epsilon", "1"]) == 2
    assert named in capsys.readouterr().err


def test_the_untouched_mechanism_run_is_checked(mechanism_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(mechanism_run, run)
    forge_results(run, lambda data: None)  # the same content, rehashed: still a run check reads
    assert main(["check", str(run), "--epsilon", "1"]) in (0, 1)
    assert capsys.readouterr().out.split(":")[0] in ("CONSISTENT", "VIOLATED", "NO SIGNAL")
