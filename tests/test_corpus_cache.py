"""Cached pre-processing (topicaudit.inputs.cache): a second load of the same text corpus with the same settings
reads the cached counts; a changed file or setting, or a damaged entry, is loaded afresh; the numbers never change."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import topicaudit.engine.storage.run_corpus as run_corpus
from topicaudit.cli.main import main
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.inputs import cache
from topicaudit.inputs.corpus import corpus_fingerprint

TEXTS = ["The running dogs were barking at the cats", "Cats sleep; dogs run and bark loudly",
         "Mice are running from the sleeping cats", "A dog, two cats and the mice ran home",
         "Barking dogs seldom bite the running mice", "Sleeping cats dream of mice and dogs"] * 5


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(directory))
    return directory


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "docs.json"
    path.write_text(json.dumps({"text": TEXTS}))
    return path


@pytest.fixture
def loads(monkeypatch):
    """How many times the corpus was really read and pre-processed (not served from the cache)."""
    calls = []
    real = run_corpus.load_corpus

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_corpus, "load_corpus", counted)
    return calls


def config_for(path, preprocess=None, **corpus) -> Config:
    config = Config()
    config.corpus.path = str(path)
    config.corpus.preprocess = preprocess
    for key, value in corpus.items():
        setattr(config.corpus, key, value)
    return config


def assert_same_corpus(a, b):
    assert (a.source, a.texts, a.doc_ids, a.n_dropped_empty) == (b.source, b.texts, b.doc_ids, b.n_dropped_empty)
    for x, y in ((a.vocabulary, b.vocabulary), (a.doc_index, b.doc_index), (a.X.indptr, b.X.indptr),
                 (a.X.indices, b.X.indices), (a.X.data, b.X.data)):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert a.X.shape == b.X.shape
    assert corpus_fingerprint(a) == corpus_fingerprint(b)


def entries(directory):
    return sorted((directory / "corpora").glob("*.npz")) if (directory / "corpora").exists() else []


def test_a_second_load_reads_the_cached_counts(cache_dir, corpus_file, loads):
    first = load_audit_corpus(config_for(corpus_file))
    assert len(loads) == 1 and len(entries(cache_dir)) == 1
    second = load_audit_corpus(config_for(corpus_file))
    assert len(loads) == 1  # served from the cache: nothing read or pre-processed again
    assert_same_corpus(first, second)
    second.X.data[0] += 0  # writable, like a fresh load's arrays


def test_another_file_content_setting_or_path_is_another_entry(cache_dir, corpus_file, loads, tmp_path, monkeypatch):
    load_audit_corpus(config_for(corpus_file))
    load_audit_corpus(config_for(corpus_file, preprocess=False))
    load_audit_corpus(config_for(corpus_file, max_words=5))
    corpus_file.write_text(json.dumps({"text": TEXTS[:-1]}))
    changed = load_audit_corpus(config_for(corpus_file))
    assert changed.n_docs == len(TEXTS) - 1
    monkeypatch.chdir(tmp_path)
    load_audit_corpus(config_for("docs.json"))  # the path as given is in the corpus's description
    assert len(loads) == 5 and len(entries(cache_dir)) == 5


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "altered counts", "another key"])
def test_a_damaged_entry_is_ignored_and_rebuilt(cache_dir, corpus_file, loads, damage):
    fresh = load_audit_corpus(config_for(corpus_file))
    (entry,) = entries(cache_dir)
    raw = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        entry.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 8)
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a well-formed archive whose arrays do not match its digest, or stored under another key
        with np.load(entry, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        if damage == "altered counts":
            arrays["data"] = arrays["data"] + 1.0  # still whole positive counts: only the digest tells
        else:
            arrays["key"] = np.frombuffer(b"0" * 64, dtype=np.uint8)
        with open(entry, "wb") as handle:
            np.savez(handle, **arrays)
    again = load_audit_corpus(config_for(corpus_file))
    assert len(loads) == 2  # read from the corpus file again
    assert_same_corpus(fresh, again)
    load_audit_corpus(config_for(corpus_file))
    assert len(loads) == 2  # the rebuilt entry is used from then on


def test_an_unwritable_cache_is_skipped(tmp_path, corpus_file, monkeypatch, loads):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, str(blocker / "cache"))
    first = load_audit_corpus(config_for(corpus_file))
    assert_same_corpus(first, load_audit_corpus(config_for(corpus_file)))
    assert len(loads) == 2


def test_the_cache_can_be_turned_off_and_has_a_default_place(tmp_path, corpus_file, monkeypatch, loads):
    monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, "off")
    assert cache.cache_directory() is None
    load_audit_corpus(config_for(corpus_file))
    load_audit_corpus(config_for(corpus_file))
    assert len(loads) == 2
    monkeypatch.delenv(cache.ENVIRONMENT_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_directory() == tmp_path / "xdg" / "topicaudit"


def test_counts_files_are_not_cached(cache_dir, tmp_path):
    (tmp_path / "docword.tiny.txt").write_text("3\n3\n4\n1 1 2\n2 2 1\n3 3 4\n3 1 1\n")
    (tmp_path / "vocab.tiny.txt").write_text("apple\nbanana\ncherry\n")
    load_audit_corpus(config_for(tmp_path / "docword.tiny.txt"))
    assert entries(cache_dir) == []


def test_the_loaders_notes_are_repeated_on_a_hit(cache_dir, tmp_path):
    path = tmp_path / "surrogates.json"
    path.write_text('{"text": ["cats \\ud800 dogs run", "dogs bark at cats", "mice run from cats"]}')
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            load_audit_corpus(config_for(path, preprocess=False))
        assert any("lone surrogate" in str(w.message) for w in caught)
    assert len(entries(cache_dir)) == 1


def comparable(run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    results.pop("timings_s")
    return results


def test_results_are_identical_with_and_without_the_cache(cache_dir, corpus_file, tmp_path, monkeypatch, capsys):
    """A canary-only audit (no Ray) of a pre-processed corpus: cache off, then a miss, then a hit."""
    runs = {}
    for label, setting in (("off", "off"), ("miss", str(cache_dir)), ("hit", str(cache_dir))):
        monkeypatch.setenv(cache.ENVIRONMENT_VARIABLE, setting)
        out = tmp_path / label
        assert main(["run", "--corpus", str(corpus_file), "--k", "2", "--shadows", "0", "--canaries", "20",
                     "--output", str(out), "--quiet"]) == 0
        runs[label] = out
    capsys.readouterr()
    assert len(entries(cache_dir)) == 1
    assert comparable(runs["off"]) == comparable(runs["miss"]) == comparable(runs["hit"])
    with np.load(runs["off"] / "canary_scores.npz") as a, np.load(runs["hit"] / "canary_scores.npz") as b:
        assert a.files == b.files and all(a[name].tobytes() == b[name].tobytes() for name in a.files)
