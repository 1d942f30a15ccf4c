import tomllib

import pytest

from topicaudit.engine.config import Config, config_from_dict, config_hash, load_config, to_toml, validate
from topicaudit.errors import UserError
from topicaudit.engine.rundir import load_audit_corpus


def test_a_full_config_file_loads_and_relative_corpus_paths_follow_the_file(tmp_path):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "audit.toml"
    path.write_text("""
name = "pheme"
seed = 3
[corpus]
path = "../data/pheme.json"
preprocess = false
[target]
learner = "sklearn-lda"
k = 7
[target.params]
max_iter = 5
[attack]
shadows = 16
[ray]
address = "auto"
""")
    config = load_config(path)
    assert config.name == "pheme" and config.seed == 3
    assert config.corpus.path == str(tmp_path / "conf" / ".." / "data" / "pheme.json")
    assert config.corpus.preprocess is False
    assert config.target.learner == "sklearn-lda" and config.target.k == 7
    assert config.target.params == {"max_iter": 5}
    assert config.attack.shadows == 16 and config.ray.address == "auto"


@pytest.mark.parametrize("data, message", [
    ({"target": {"topics": 5}}, "unknown key 'topics'"),
    ({"shadows": 8}, "unknown key 'shadows'"),
    ({"attack": {"shadows": "many"}}, "'shadows' must be an integer"),
    ({"target": {"k": 2.5}}, "'k' must be an integer"),
    ({"corpus": {"preprocess": "no"}}, "'preprocess' must be true or false"),
    ({"target": "lda"}, "must be a table"),
])
def test_bad_keys_and_types_name_the_table_and_key(data, message):
    with pytest.raises(UserError, match=message):
        config_from_dict(data, "audit.toml")


@pytest.mark.parametrize("change, message", [
    (lambda c: setattr(c.attack, "shadows", 7), "even number"),
    (lambda c: setattr(c.attack, "shadows", 0), "even number"),
    (lambda c: setattr(c.target, "k", 1), "k, the number of topics"),
    (lambda c: setattr(c.attack, "shadow_vocabulary", "mine"), "shadow_vocabulary"),
    (lambda c: setattr(c.corpus, "max_words", -1), "max_words must be ≥ 0"),
])
def test_out_of_range_values_are_refused(change, message):
    config = Config()
    change(config)
    with pytest.raises(UserError, match=message):
        validate(config)


def test_invalid_toml_and_missing_file_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[target\nk = 5\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_config(bad)


def test_resolved_config_round_trips_and_hash_ignores_where_it_runs():
    config = config_from_dict({"seed": 4, "target": {"k": 6, "params": {"max_iter": 3}}})
    assert config_from_dict(tomllib.loads(to_toml(config.to_dict()))) == config
    moved = config_from_dict({"seed": 4, "output": "elsewhere", "ray": {"address": "auto"},
                              "target": {"k": 6, "params": {"max_iter": 3}}})
    assert config_hash(config, "abc") == config_hash(moved, "abc")
    assert config_hash(config, "abc") != config_hash(config, "abd")
    other = config_from_dict({"seed": 5, "target": {"k": 6, "params": {"max_iter": 3}}})
    assert config_hash(config, "abc") != config_hash(other, "abc")


def test_max_words_restricts_the_audited_corpus(kos_path):
    config = config_from_dict({"corpus": {"path": str(kos_path), "max_words": 50}})
    with pytest.warns(UserWarning, match="ignoring 1 line"):
        corpus = load_audit_corpus(config)
    assert corpus.n_words == 50 and "50 most frequent words" in corpus.source
    assert config.identity()["corpus"]["max_words"] == 50  # part of the config hash
