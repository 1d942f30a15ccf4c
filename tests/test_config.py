import tomllib
from pathlib import Path

import pytest

from topicaudit.engine.configuration.config import AuditConfig, Config, ModelConfig, config_hash, run_config
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.loading import config_from_dict, load_config
from topicaudit.engine.configuration.toml_writer import to_toml
from topicaudit.errors import UserError
from topicaudit.engine.storage.run_corpus import load_audit_corpus


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


# -- the two variants: `run` (Config) and `audit` (AuditConfig) ------------------------------------
def test_a_file_naming_a_released_model_is_an_audit_and_its_paths_follow_the_file(tmp_path):
    path = tmp_path / "conf" / "mine.toml"
    path.parent.mkdir()
    path.write_text('[model]\nphi = "phi.npy"\nvocabulary = "v.txt"\n[corpus]\npath = "c.json"\n'
                    '[reference]\npath = "r.json"\n[attack]\nshadows = 8\n[ranking]\nby = "lira_online"\n')
    config = load_config(path)
    assert isinstance(config, AuditConfig) and config.attack.shadows == 8 and config.ranking.by == "lira_online"
    assert config.model.phi == str(path.parent / "phi.npy") and config.reference.path == str(path.parent / "r.json")
    assert config.run_name == "phi" and config.run_dir.parent == Path("runs")
    assert config.run_dir.name.startswith("audit-phi-") and len(config.run_dir.name) == len("audit-phi-") + 6
    path.write_text('[model]\nvocabulary = "v.txt"\n')  # no phi yet: read as an audit when `audit` reads it
    assert isinstance(load_config(path, AuditConfig), AuditConfig)
    with pytest.raises(UserError, match=r"\[model\] belongs to `topicaudit audit`"):
        load_config(path)


@pytest.mark.parametrize("data, message", [
    ({"model": {"phi": "p.npy"}, "target": {"k": 5}}, r"\[target\] belongs to `topicaudit run`"),
    ({"model": {"phi": "p.npy"}, "attack": {"alpha": 0.1}}, "unknown key 'alpha'; known keys: shadows, tol"),
    ({"ranking": {"by": "lira_online"}}, r"\[ranking\] belongs to `topicaudit audit`"),
])
def test_a_table_of_the_other_command_is_refused_naming_its_command(data, message):
    with pytest.raises(UserError, match=message):
        config_from_dict(data, "mine.toml")


def test_one_validation_serves_both_variants():
    audit = AuditConfig(model=ModelConfig(phi="p.npy"))
    audit.corpus.path = audit.reference.path = "c.json"
    audit.attack.tol = 2.0
    run = Config()
    run.attack.tol = 2.0
    for config in (audit, run):
        with pytest.raises(UserError, match=r"\[attack\] tol must be in \(0, 1\)"):
            validate(config)
    audit.attack.tol = 1e-8
    audit.ranking.by = "offline"
    with pytest.raises(UserError, match="'offline'.*use 'lira_offline'"):
        validate(audit)
    with pytest.raises(UserError, match="topicaudit audit CONFIG.toml"):
        run_config(audit)
    with pytest.raises(UserError, match="no model to audit"):
        validate(AuditConfig())
    audit.ranking.by = "recommended"
    audit.reference.max_words = 100
    with pytest.raises(UserError, match=r"\[reference\] max_words is for `topicaudit run`"):
        validate(audit)


def test_an_audits_identity_ignores_paths_and_presentation():
    def audit(**changes):
        config = AuditConfig(model=ModelConfig(phi="a/phi.npy", vocabulary="a/v.txt", learner="lda", k=3))
        config.corpus.path, config.reference.path = "a/c.json", "a/r.json"
        for key, value in changes.items():
            table, _, name = key.rpartition(".")
            setattr(getattr(config, table) if table else config, name, value)
        return config_hash(config, "fingerprint")

    base = audit()
    assert audit(**{"model.phi": "b/phi.npy", "corpus.path": "b/c.json", "ranking.by": "lira_online",
                    "ranking.top": 3, "output": "x", "name": "y", "model.tolerance": 0.1}) == base
    assert audit(seed=1) != base and audit(**{"attack.shadows": 8}) != base and audit(**{"model.k": 4}) != base


def test_a_run_directorys_config_written_by_an_earlier_version_still_reads_as_the_same_run():
    """Earlier versions kept [model], [reference] and [ranking] at their defaults in every run's config.toml."""
    config = config_from_dict({"seed": 2, "target": {"k": 4}})
    legacy = tomllib.loads(to_toml(config.to_dict()) + '\n[model]\nnormalize = false\ntolerance = 0.001\n'
                           'trust_pickle = false\n\n[model.params]\n\n[reference]\ntext_field = "text"\n'
                           'max_words = 0\n\n[reference.options]\n\n[ranking]\nby = "recommended"\ntop = 10\n'
                           'show_text = false\n')
    again = config_from_dict(legacy)
    assert isinstance(again, Config) and config_hash(again, "f") == config_hash(config, "f")
