"""topicaudit's shipped data files are in its source digest (hostile pass XIX-zc, ED4): ten corpus words added to
the stop-word list kept the run cache's key, and the entry was then refused as "another configuration"."""
from pathlib import Path

from topicaudit import version


def test_an_edit_to_a_shipped_data_file_changes_the_digest(tmp_path, monkeypatch):
    package = tmp_path / "topicaudit"
    (package / "inputs" / "_data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    stop_words = package / "inputs" / "_data" / "stopwords-english.txt"
    stop_words.write_text("a\nthe\n")
    monkeypatch.setattr(version, "_package_root", lambda: package)
    monkeypatch.setattr(version, "_mapped_subpackages", lambda root: [])
    before = version.source_digest()
    stop_words.write_text("a\nthe\nvaccine\n")
    assert version.source_digest() != before


def test_this_install_digests_its_stop_words():
    """The installed package's own data folder is where the digest looks."""
    assert (Path(version.__file__).parent / "inputs" / version.DATA_FOLDER / "stopwords-english.txt").is_file()
