"""The default run and sweep directories: named after what they audit, shared only by the same configuration."""
from pathlib import Path

from topicaudit.cli.main import _build_parser
from topicaudit.cli.run import config_from_args
from topicaudit.engine.configuration.config import Config, corpus_stem
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.sweep import default_output


def test_different_audits_get_different_directories_and_the_same_one_its_own():
    demo, more = Config(), config_from_dict({"attack": {"shadows": 8}})
    assert demo.run_dir != more.run_dir
    assert Config().run_dir == demo.run_dir  # the same command resumes
    assert demo.run_dir.parent == Path("runs") and demo.run_dir.name.startswith("demo-lda-k5-s0-")
    with_canaries = config_from_dict({"attack": {"canaries": {"count": 100}}})
    assert with_canaries.run_dir != demo.run_dir
    assert config_from_dict({"output": "runs/mine"}).run_dir == Path("runs/mine")


def test_a_corpus_names_its_runs_and_a_second_corpus_never_shares_them(tmp_path):
    parse = _build_parser().parse_args
    kos = config_from_args(parse(["run", "--corpus", str(tmp_path / "docword.kos.txt"), "--k", "10"]))
    nips = config_from_args(parse(["run", "--corpus", str(tmp_path / "docword.nips.txt"), "--k", "10"]))
    assert kos.run_dir.name.startswith("kos-lda-k10-s0-") and nips.run_dir.name.startswith("nips-lda-k10-s0-")
    assert corpus_stem("pheme_clean.json") == "pheme_clean"
    # a configuration file naming the same corpus finds the flags' directory (paths are resolved)
    (tmp_path / "audit.toml").write_text('[corpus]\npath = "docword.kos.txt"\n[target]\nk = 10\n')
    from_file = config_from_args(parse(["run", str(tmp_path / "audit.toml")]))
    assert from_file.run_dir == kos.run_dir


def test_sweep_default_output_follows_the_sweep_not_its_replicates():
    config = Config()
    a = default_output(config, "target.k", [5, 10])
    assert a == default_output(Config(), "target.k", [5, 10]) and a.name.startswith("demo-sweep-k-")
    assert a != default_output(config, "target.k", [5, 20])
    assert a != default_output(config_from_dict({"attack": {"shadows": 8}}), "target.k", [5, 10])


def test_the_every_key_block_of_configuration_md_sets_the_defaults():
    """docs/configuration.md's first block says "every key, with its default": it must be Config()."""
    import re
    import tomllib

    text = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, flags=re.S).group(1)
    assert config_from_dict(tomllib.loads(block)).to_dict() == Config().to_dict()


def test_an_audit_of_the_same_model_with_other_inputs_gets_its_own_directory(tmp_path):
    """`audit`'s default directory names the model and hashes the inputs' places and the settings, as `run`'s does:
    a second audit of the same Φ with other candidates neither collides with the first nor is refused."""
    from topicaudit.engine.audit_inputs import audit_config

    def directory(**settings):
        base = {"vocabulary": tmp_path / "vocab.txt", "candidates": tmp_path / "cand.json",
                "reference": tmp_path / "ref.json"}
        return audit_config(tmp_path / "phi.npy", **{**base, **settings}).run_dir

    first = directory()
    assert first.parent == Path("runs") and first.name.startswith("audit-phi-")
    assert directory() == first  # the same command resumes its directory
    assert directory(candidates=tmp_path / "other.json") != first
    assert directory(reference=tmp_path / "other.json") != first
    assert directory(shadows=16) != first and directory(seed=3) != first
    assert directory(params={"max_iter": 20}) != first
    assert directory(top=50, show_text=True) == first  # how the ranking is shown changes no number
    assert directory(output=str(tmp_path / "mine")) == tmp_path / "mine"
    # a configuration file naming the same files finds the flags' directory (its paths are resolved)
    (tmp_path / "audit.toml").write_text('[model]\nphi = "phi.npy"\nvocabulary = "vocab.txt"\n'
                                         '[corpus]\npath = "cand.json"\n[reference]\npath = "ref.json"\n')
    assert audit_config(tmp_path / "audit.toml").run_dir == first
