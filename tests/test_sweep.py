"""`topicaudit sweep`: layout, paired seeds, resume without refitting, and refusals."""
import json

import numpy as np
import pytest

from topicaudit.cli.main import main
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.errors import UserError
from topicaudit.engine.sweep import load_sweep, parse_value, plan_sweep, sweep_table, with_parameter

# Runs in this process join the session's Ray instance (tests/conftest.py) instead of starting their own.
pytestmark = pytest.mark.usefixtures("shared_ray")

TINY = """
name = "tiny"
seed = 7
[synthetic]
n_docs = 120
n_words = 200
mean_length = 30
[attack]
shadows = 4
[ray]
num_cpus = 1
"""


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory, ray_holder):
    ray_holder.start()
    tmp = tmp_path_factory.mktemp("sweep")
    config = tmp / "tiny.toml"
    config.write_text(TINY)
    out = tmp / "out"
    argv = ["sweep", str(config), "--param", "target.k", "--values", "2,3", "--replicates", "2",
            "--output", str(out), "--quiet"]
    assert main(argv) == 0
    return config, out, argv


def test_sweep_directory_holds_one_run_per_value_and_replicate(finished_sweep):
    _, out, _ = finished_sweep
    index = load_sweep(out)
    assert index["parameter"] == "target.k" and index["values"] == [2, 3] and index["replicates"] == 2
    assert [(e["value"], e["replicate"], e["seed"], e["path"]) for e in index["runs"]] == [
        (2, 0, 7, "k=2/rep-0"), (2, 1, 8, "k=2/rep-1"), (3, 0, 7, "k=3/rep-0"), (3, 1, 8, "k=3/rep-1")]
    for entry in index["runs"]:
        assert entry["status"] == "done"
        results = entry["results"]
        assert results["target"]["k"] == entry["value"]
        assert results["seeds"]["seed"] == entry["seed"]


def test_replicates_share_plans_across_values(finished_sweep):
    _, out, _ = finished_sweep
    plans = {}
    for path in sorted(out.glob("k=*/rep-*/plan.npz")):
        with np.load(path) as z:
            plans[path.parent.relative_to(out).as_posix()] = z["target_in"].copy()
    np.testing.assert_array_equal(plans["k=2/rep-0"], plans["k=3/rep-0"])
    assert not np.array_equal(plans["k=2/rep-0"], plans["k=2/rep-1"])


def test_rerunning_resumes_without_refitting(finished_sweep):
    _, out, argv = finished_sweep
    models = sorted(out.glob("k=*/rep-*/models/*.npz"))
    before = [p.stat().st_mtime_ns for p in models]
    assert main(argv) == 0
    assert [p.stat().st_mtime_ns for p in models] == before


def test_a_different_sweep_in_the_same_directory_is_refused(finished_sweep, capsys):
    config, out, _ = finished_sweep
    code = main(["sweep", str(config), "--param", "target.k", "--values", "2,4", "--output", str(out)])
    assert code == 2
    assert "holds a different sweep" in capsys.readouterr().err


def test_replicates_can_be_added_to_a_finished_sweep_but_not_removed(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    argv = ["sweep", str(config), "--param", "target.k", "--values", "2", "--output", str(out), "--quiet"]
    assert main([*argv, "--replicates", "1"]) == 0
    first = sorted(out.glob("k=2/rep-0/models/*.npz"))
    before = [p.stat().st_mtime_ns for p in first]
    assert main([*argv, "--replicates", "2"]) == 0
    index = load_sweep(out)
    assert index["replicates"] == 2
    assert [(e["replicate"], e["seed"], e["status"]) for e in index["runs"]] == [(0, 7, "done"), (1, 8, "done")]
    assert [p.stat().st_mtime_ns for p in first] == before  # replicate 0 kept, not refitted
    assert main([*argv, "--replicates", "1"]) == 2
    assert "replicates can be added to a sweep, not removed" in capsys.readouterr().err


def test_summary_table_rows_are_means_over_replicates(finished_sweep):
    _, out, _ = finished_sweep
    index = load_sweep(out)
    table = sweep_table(index)
    aucs = [e["results"]["attacks"]["lira_online"]["auc"] for e in index["runs"] if e["value"] == 3]
    assert f"{np.mean(aucs):.3f} ± {np.std(aucs, ddof=1):.3f}" in table.splitlines()[2]


@pytest.mark.parametrize("param, message", [
    ("target.kk", "unknown key 'kk'"),
    ("targets.k", "unknown key 'targets'"),
    ("target", "is a table"),
    ("seed", "cannot be swept"),
])
def test_bad_parameters_fail_before_anything_is_written(tmp_path, capsys, param, message):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    assert main(["sweep", str(config), "--param", param, "--values", "2,3", "--output", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_values_are_refused_with_the_key_named(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    out = tmp_path / "out"
    assert main(["sweep", str(config), "--param", "target.k", "--values", "3,three", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "target.k" in err and "'three'" in err and not out.exists()
    assert main(["sweep", str(config), "--param", "target.learner", "--values", "lda,nope",
                 "--output", str(out)]) == 2
    assert "unknown learner 'nope'" in capsys.readouterr().err and not out.exists()


def test_values_read_as_toml_and_free_tables_accept_new_keys():
    assert parse_value("5") == 5 and parse_value("0.5") == 0.5 and parse_value("inf") == float("inf")
    assert parse_value("lda") == "lda"
    config = config_from_dict({"target": {"learner": "lda"}})
    varied = with_parameter(config, "target.vocabulary_params.epsilon", 3.0)
    assert varied.target.vocabulary_params == {"epsilon": 3.0}
    assert config.target.vocabulary_params == {}  # the base configuration is untouched
    with pytest.raises(UserError, match="replicates"):
        plan_sweep(config, "target.k", [3], 0, output=__import__("pathlib").Path("/nonexistent"))


def test_sweep_index_is_plain_json(finished_sweep):
    _, out, _ = finished_sweep
    data = json.loads((out / "sweep.json").read_text())
    assert data["schema"] == "topicaudit.sweep/1"
    assert data["specification"]["base_config"]["seed"] == 7
