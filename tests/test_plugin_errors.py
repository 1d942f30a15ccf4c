"""A plug-in's own exception is said as the plug-in's, exit 2, never as topicaudit's internal error.

A learner whose fit raised RuntimeError, AssertionError or called sys.exit(1), or whose guarantee() raised, was
reported as "internal error (a bug, please report it)", exit 3, and a GeneratorExit left a half-written run behind
(hostile pass XIX, listed). Each is now one line naming the plug-in, its exception and where it was raised.
"""
from __future__ import annotations

import sys

import pytest

from topicaudit.cli.main import main
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.learners.pipeline import PluginCodeError, plugin_code

PLUGIN = '''
import sys
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.learners.vocabulary import CorpusVocabulary


class Raises(VariationalLDA):
    def fit(self, X, seed):
        raise RuntimeError("the sampler diverged")


class Asserts(VariationalLDA):
    def fit(self, X, seed):
        assert X.shape[0] < 10, "VIOLATED: made up"


class Exits(VariationalLDA):
    def fit(self, X, seed):
        sys.exit(1)


class Generator(VariationalLDA):
    def fit(self, X, seed):
        raise GeneratorExit


class Claims(VariationalLDA):
    def guarantee(self):
        raise AssertionError("no claim today")


class Step(CorpusVocabulary):
    def select(self, X, seed):
        raise KeyError("column")


class StepClaims(CorpusVocabulary):
    def guarantee(self):
        raise RuntimeError("cannot say")
'''


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    (tmp_path / "plugged.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("plugged", None)


def _run(capsys, *extra) -> tuple[int, str]:
    code = main(["run", "--shadows", "0", "--canaries", "20", "--k", "2", "--output", "out", "--quiet", *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("learner, raised", [("Raises", "RuntimeError: the sampler diverged"),
                                             ("Asserts", "AssertionError: VIOLATED: made up"),
                                             ("Exits", "SystemExit: 1"), ("Generator", "GeneratorExit")])
def test_a_learner_whose_fit_raises_is_exit_2_naming_it_and_leaves_no_run(plugins, capsys, learner, raised):
    code, err = _run(capsys, "--learner", f"plugged:{learner}")
    assert code == 2, err
    assert f"({learner})" in err and raised in err and "plugged.py:" in err, err
    assert "internal error" not in err and "not topicaudit's" in err
    assert not (plugins / "out").exists()  # nothing half-written (a GeneratorExit left canaries.npz and models/)


def test_a_learner_whose_guarantee_raises_is_exit_2_naming_it(plugins, capsys):
    code, err = _run(capsys, "--learner", "plugged:Claims")
    assert code == 2 and "'plugged:Claims'" in err and "AssertionError: no claim today" in err, err
    assert "internal error" not in err


@pytest.mark.parametrize("step, said", [("Step", ["vocabulary step (Step)", "select raised KeyError"]),
                                        ("StepClaims", ["'plugged:StepClaims'", "RuntimeError: cannot say"])])
def test_a_vocabulary_step_whose_code_raises_is_exit_2_naming_the_step(plugins, capsys, step, said):
    (plugins / "c.toml").write_text('[synthetic]\nn_docs = 120\nn_words = 200\n[target]\nlearner = "lda"\nk = 2\n'
                                    f'vocabulary = "plugged:{step}"\n')
    code = main(["run", "c.toml", "--shadows", "0", "--canaries", "20", "--output", "out", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and all(s in err for s in said) and "internal error" not in err, err
    assert not (plugins / "out").exists()


def test_topicaudits_own_parts_keep_their_exceptions_and_a_plug_ins_refusal_stays_a_refusal():
    with pytest.raises(RuntimeError):  # a bug of ours is an internal error, reported as such
        with plugin_code(VariationalLDA(k=2), "fit"):
            raise RuntimeError("ours")
    with pytest.raises(ValueError) as refused:  # a plug-in refusing the data: its message unchanged
        with plugin_code(object(), "fit"):
            raise ValueError("corpus too large for a dense sampler")
    assert not isinstance(refused.value, PluginCodeError)
    with pytest.raises(KeyboardInterrupt):  # an interrupt stays one
        with plugin_code(object(), "fit"):
            raise KeyboardInterrupt


def test_a_run_that_claims_nothing_records_no_claim_not_violated(tmp_path, monkeypatch):
    """results.json's verdict of a learner claiming no ε read {"violated": true, "verdict": "VIOLATED"} (its bounds
    at ε = 0): a script reading it read a refutation (hostile pass XIX, listed API14). `check` and `report` still
    read the stored verdict."""
    import json

    import topicaudit

    monkeypatch.setenv("TOPICAUDIT_INTEGRITY_KEY", "off")
    topicaudit.run({"synthetic": {"n_docs": 120, "n_words": 200}, "target": {"k": 3},
                    "attack": {"shadows": 0, "canaries": {"count": 20}}, "output": str(tmp_path / "run")},
                   learner=VariationalLDA(k=3))
    stored = json.loads((tmp_path / "run" / "results.json").read_text())["verdict"]
    assert stored["claim_tested"] is False and stored["violated"] is False and stored["verdict"] == "NO CLAIM"
    assert stored["epsilon_lower_bound"] > 0  # the bound is still there, for what it shows
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "page"), "--quiet"]) == 0
    assert "NO CLAIM" in (tmp_path / "page" / "report.md").read_text()


def test_urllib3s_socks_dependency_note_is_never_relayed_to_the_user():
    """requests silences urllib3's "SOCKS support … requires PySocks" DependencyWarning, but imported inside a block
    that records every warning (a fit's, in a Ray worker) or while another thread restored the filters, it came
    through as "topicaudit: note: SOCKS support in urllib3 …" with no proxy in use, and two tests counting the
    command's stderr lines failed at times."""
    from topicaudit.errors import developer_warning

    dependency = type("DependencyWarning", (Warning,), {"__module__": "urllib3.exceptions"})
    assert developer_warning(dependency) and developer_warning(DeprecationWarning)
    assert not developer_warning(UserWarning) and not developer_warning(RuntimeWarning)
    assert not developer_warning(type("DependencyWarning", (Warning,), {"__module__": "mylearner"}))


def test_a_plug_in_beside_a_large_tree_is_not_digested_and_never_reused(tmp_path, monkeypatch):
    """A learner module kept in a home folder, or beside a large tree, had every code file under it digested, five
    times a command (3.5 s each beside a linked site-packages). Past the walk's limit the code is not digested: a
    note says so, and its runs are never reused from the run cache (no digest, no reuse)."""
    from topicaudit.engine.configuration.loading import config_from_dict
    from topicaudit.engine.storage.run_cache import cache_key
    from topicaudit.targets import plugin_code

    (tmp_path / "bigproj").mkdir()
    (tmp_path / "bigproj" / "homelearner.py").write_text(
        "from topicaudit.targets.learners.lda import VariationalLDA\n\n\nclass Mine(VariationalLDA):\n    pass\n")
    data = tmp_path / "bigproj" / "data"
    data.mkdir()
    for i in range(40):
        (data / f"part{i}.csv").write_text("1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "bigproj"))
    assert "source_sha256" in plugin_code.code_digest("homelearner:Mine")  # under the limit: digested
    monkeypatch.setattr(plugin_code, "DIGEST_WALK_LIMIT", 30)
    with pytest.warns(RuntimeWarning, match="not digested and its runs are never reused"):
        assert plugin_code.code_digest("homelearner:Mine") == {}
    assert plugin_code.code_files("homelearner:Mine") == [tmp_path / "bigproj" / "homelearner.py"]
    config = config_from_dict({"target": {"learner": "homelearner:Mine", "k": 2}})
    with pytest.warns(RuntimeWarning):
        assert cache_key(config) != cache_key(config)  # never the same key twice: never reused
    sys.modules.pop("homelearner", None)
