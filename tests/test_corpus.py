"""Corpus loaders: real corpora in shared/data, and every user error on small bad files."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from topicaudit.inputs.formats import newsgroups
import topicaudit.inputs.files as files_mod
from topicaudit.inputs.corpus import (KNOWN_FORMATS, Corpus, corpus_from_counts, corpus_from_texts, keep_most_frequent_words,
                          load_corpus)
from topicaudit.errors import UserError




def assert_canonical(c: Corpus) -> None:
    assert isinstance(c.X, sp.csr_matrix)
    assert c.X.dtype == np.float64
    assert c.X.has_sorted_indices and c.X.has_canonical_format
    assert c.X.shape == (len(c.doc_index), len(c.vocabulary))
    assert np.all(np.diff(c.X.indptr) > 0), "empty rows must be dropped"
    assert np.all(c.X.data > 0)
    assert list(c.vocabulary) == sorted(c.vocabulary)
    assert len(set(c.vocabulary)) == len(c.vocabulary)
    assert c.doc_index.dtype == np.int64 and np.all(np.diff(c.doc_index) > 0)
    if c.texts is not None:
        assert len(c.texts) == c.X.shape[0]


def user_error(match: str):
    return pytest.raises(UserError, match=match)


# --------------------------------------------------------------------------- #
# Real corpora
# --------------------------------------------------------------------------- #


def test_pheme_clean_as_the_paper_vectorised_it(shared_file):
    from sklearn.feature_extraction.text import CountVectorizer

    path = shared_file("pheme", "pheme_clean.json")
    c = load_corpus(path, preprocess=False)
    assert_canonical(c)
    assert c.n_docs == 5698 and c.n_dropped_empty == 0
    assert len(c.vocabulary) == 5942  # the paper's PHEME vocabulary size
    texts = json.loads(path.read_text())["text"]
    cv = CountVectorizer()
    ref = cv.fit_transform(texts)
    assert list(c.vocabulary) == list(cv.get_feature_names_out())
    assert (ref.astype(np.float64) != c.X).nnz == 0
    assert c.texts == texts
    assert "pheme_clean.json" in c.source


def test_pheme_raw_preprocessed(shared_file):
    c = load_corpus(shared_file("pheme", "pheme_raw.json"))
    assert_canonical(c)
    assert c.n_docs == 5802 and c.n_dropped_empty == 0
    assert len(c.vocabulary) == 12274 and c.n_tokens == 67069
    assert c.texts[0].startswith("EXTENDED: Dramatic video")
    row = dict(zip(c.vocabulary[c.X[0].indices], c.X[0].data))
    assert row["hallway"] == 1 and row["parliament"] == 1 and "of" not in row


def test_kos_uci(shared_file):
    with pytest.warns(UserWarning, match="ignoring 1 line"):  # this copy has a stray last line 'temp'
        c = load_corpus(shared_file("kos", "docword.kos.txt"))
    assert_canonical(c)
    assert c.X.shape == (3430, 6906)
    assert c.X.nnz == 353160
    assert c.n_tokens == 467714
    assert c.texts is None and c.n_dropped_empty == 0
    assert c.vocabulary[0] == "aarp" and "temp" not in set(c.vocabulary)
    # the first entry of the file: "1 61 2"
    assert c.X[0, 60] == 2 and c.vocabulary[60] == "action"
    assert "uci" in c.source and "vocab.kos.txt" in c.source


def test_keeping_the_most_frequent_words_of_kos(shared_file):
    with pytest.warns(UserWarning, match="ignoring 1 line"):
        full = load_corpus(shared_file("kos", "docword.kos.txt"))
    top = keep_most_frequent_words(full, 400)
    assert_canonical(top)
    assert top.n_words == 400 and top.n_docs == 3430 and top.n_dropped_empty == 0
    df = np.diff(full.X.tocsc().indptr)
    kept = np.searchsorted(full.vocabulary, top.vocabulary)
    assert df[kept].min() >= np.sort(df)[-400]  # no dropped word is more frequent than a kept one
    assert (top.X != full.X[:, kept]).nnz == 0  # the counts are KOS's own on those columns
    assert "400 most frequent words" in top.source
    assert keep_most_frequent_words(full, 10_000) is full


def test_documents_left_without_words_are_dropped_and_counted():
    c = corpus_from_texts(["apple apple banana", "cherry", "apple date"], preprocess=False)
    top = keep_most_frequent_words(c, 1)
    assert list(top.vocabulary) == ["apple"]
    assert top.n_docs == 2 and top.n_dropped_empty == 1 and list(top.doc_index) == [0, 2]
    assert top.texts == ["apple apple banana", "apple date"]


@pytest.fixture(scope="module")
def news_train_raw(shared_file):
    path = shared_file("20news", "20news-bydate-reassembled.tar.gz")
    texts, _, _ = newsgroups.read_20news(path, subset="train", remove=())
    return texts


def test_20news_train_count_and_countvectorizer_vocabulary(news_train_raw):
    assert len(news_train_raw) == 11314
    # scikit-learn documents 130,107 CountVectorizer terms for this split
    c = corpus_from_texts(news_train_raw, preprocess=False)
    assert c.n_docs == 11314 and len(c.vocabulary) == 130107


def test_20news_strippers_match_scikit_learn(news_train_raw):
    skl = pytest.importorskip("sklearn.datasets._twenty_newsgroups")
    for text in news_train_raw[::7]:
        assert newsgroups.strip_newsgroup_header(text) == skl.strip_newsgroup_header(text)
        assert newsgroups.strip_newsgroup_footer(text) == skl.strip_newsgroup_footer(text)
        assert newsgroups.strip_newsgroup_quoting(text) == skl.strip_newsgroup_quoting(text)


def test_20news_default_load_reads_the_tarball_in_memory(monkeypatch, tmp_path, shared_file):
    path = shared_file("20news", "20news-bydate-reassembled.tar.gz")

    def refuse(*args, **kwargs):
        raise AssertionError("the 20news loader must not extract to disk")

    monkeypatch.setattr(tarfile.TarFile, "extract", refuse)
    monkeypatch.setattr(tarfile.TarFile, "extractall", refuse)
    monkeypatch.chdir(tmp_path)
    c = load_corpus(path)
    assert_canonical(c)
    assert c.n_docs + c.n_dropped_empty == 11314
    assert 0 < c.n_dropped_empty < 500  # posts that are only headers/quotes/signature
    assert "subset train" in c.source and "headers+footers+quotes" in c.source
    assert list(tmp_path.iterdir()) == []
    # headers are gone by default
    assert not any(t.startswith("From:") for t in c.texts[:200])


def test_20news_test_subset_and_options(shared_file):
    path = shared_file("20news", "20news-bydate-reassembled.tar.gz")
    texts, source, _ = newsgroups.read_20news(path, subset="test", remove="headers")
    assert len(texts) == 7532 and "subset test" in source
    with user_error("subset must be 'train', 'test' or 'all'"):
        load_corpus(path, subset="validation")
    with user_error("unknown part.*'signature'.*headers, footers, quotes"):
        load_corpus(path, remove=("headers", "signature"))


# --------------------------------------------------------------------------- #
# json
# --------------------------------------------------------------------------- #


def write_json(tmp_path, obj, name="c.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj), encoding="utf-8")
    return p


def test_json_basic_and_dropped_empty(tmp_path):
    p = write_json(tmp_path, {"text": ["The geese flew over cars.", "!!! 42", "cars and more cars", "the of"]})
    c = load_corpus(p)
    assert_canonical(c)
    assert list(c.vocabulary) == ["car", "flew", "goose"]
    assert c.X.toarray().tolist() == [[1, 1, 1], [2, 0, 0]]
    assert c.doc_index.tolist() == [0, 2] and c.n_dropped_empty == 2
    assert c.texts == ["The geese flew over cars.", "cars and more cars"]


def test_json_custom_field_bom_and_preprocess_false(tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps({"posts": ["alpha beta", "beta gamma x"]}).encode())
    c = load_corpus(p, text_field="posts", preprocess=False)
    assert list(c.vocabulary) == ["alpha", "beta", "gamma"]  # 'x' is one letter: CountVectorizer drops it
    assert c.X.toarray().tolist() == [[1, 1, 0], [0, 1, 1]]


def test_json_invalid_reports_line_and_column(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"text": [\n  "a",\n  "b"\n  "c"]}')
    with user_error(r"bad\.json, line 4, column 3: invalid JSON") as e:
        load_corpus(p)
    assert "{\"text\": [" in str(e.value)  # shows the expected shape


def test_json_structure_errors(tmp_path):
    with user_error(r"top level is a JSON array.*object with a 'text' field"):
        load_corpus(write_json(tmp_path, ["a", "b"]))
    with user_error(r"no field 'text'.*its fields: 'body', 'id'.*text_field="):
        load_corpus(write_json(tmp_path, {"body": ["a"], "id": 1}))
    with user_error(r"field 'text' is a JSON string, but must be a list of strings"):
        load_corpus(write_json(tmp_path, {"text": "one document"}))
    with user_error(r"field 'text', entry 2 \(0-based\) is a JSON number, not a string"):
        load_corpus(write_json(tmp_path, {"text": ["a", "b", 3, "d"]}))
    with user_error(r"entry 0 \(0-based\) is a JSON null"):
        load_corpus(write_json(tmp_path, {"text": [None]}))
    with user_error(r"the corpus has no documents"):
        load_corpus(write_json(tmp_path, {"text": []}))
    with user_error(r"every one of the 3 documents is empty after pre-processing"):
        load_corpus(write_json(tmp_path, {"text": ["the and of", "123", ""]}))
    with user_error(r"every one of the 2 documents is empty after tokenising"):
        load_corpus(write_json(tmp_path, {"text": ["a b c", "!"]}), preprocess=False)


def test_json_not_utf8(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes('{"text": [\n"caf\xe9"]}'.encode("latin-1"))
    with user_error(r"latin\.json, line 2 \(byte \d+\): not valid utf-8.*save the file as UTF-8"):
        load_corpus(p)


def test_missing_and_unreadable_files(tmp_path, monkeypatch):
    with user_error(r"nope\.json: JSON corpus file not found; check the path"):
        load_corpus(tmp_path / "nope.json")
    with user_error(r"nothing: no such file or directory"):
        load_corpus(tmp_path / "nothing")
    d = tmp_path / "dir.json"
    d.mkdir()
    with user_error(r"dir\.json: is a directory, but a JSON corpus file was expected"):
        load_corpus(d, format="json")
    p = write_json(tmp_path, {"text": ["a"]}, name="locked.json")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(files_mod.os, "open", denied)  # the one opener of user files (files.open_regular)
    with user_error(r"locked\.json: permission denied reading the JSON corpus file; make it readable"):
        load_corpus(p)


# --------------------------------------------------------------------------- #
# folder
# --------------------------------------------------------------------------- #


def test_folder_recursive_sorted_hidden_skipped(tmp_path):
    root = tmp_path / "docs"
    (root / "b").mkdir(parents=True)
    (root / "a").mkdir()
    (root / ".git").mkdir()
    (root / "b" / "1.txt").write_text("zebra zebras")
    (root / "a" / "2.txt").write_text("apple")
    (root / "a" / "10.txt").write_text("banana")
    (root / "c.txt").write_text("cherry")
    (root / ".hidden").write_text("secret")
    (root / ".git" / "x").write_text("object")
    c = load_corpus(root)
    assert_canonical(c)
    assert c.texts == ["banana", "apple", "zebra zebras", "cherry"]  # a/10, a/2, b/1, c
    assert list(c.vocabulary) == ["apple", "banana", "cherry", "zebra"]
    assert c.X[2].toarray().tolist() == [[0, 0, 0, 2]]
    assert "4 files" in c.source


def test_folder_encoding(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "ok.txt").write_text("naive text")
    (root / "bad.txt").write_bytes("first line\ncaf\xe9 au lait".encode("latin-1"))
    with user_error(r"bad\.txt, line 2 \(byte 14\): not valid utf-8.*encoding=.*latin-1"):
        load_corpus(root)
    c = load_corpus(root, encoding="latin-1")
    assert c.texts[0] == "first line\ncafé au lait"
    with user_error(r"unknown text encoding 'klingon'"):
        load_corpus(root, encoding="klingon")
    empty = tmp_path / "empty"
    empty.mkdir()
    with user_error("the corpus has no documents"):
        load_corpus(empty)


# --------------------------------------------------------------------------- #
# UCI
# --------------------------------------------------------------------------- #


def write_uci(tmp_path, body: str, vocab: str | None = "zeta\nalpha\nmid\n", name="toy") -> Path:
    p = tmp_path / f"docword.{name}.txt"
    p.write_text(body)
    if vocab is not None:
        (tmp_path / f"vocab.{name}.txt").write_text(vocab)
    return p


def test_uci_small_sorts_vocabulary_and_drops_empty_docs(tmp_path):
    p = write_uci(tmp_path, "3\n3\n4\n1 1 2\n1 2 1\n3 3 5\n3 2 1\n")
    c = load_corpus(p)
    assert_canonical(c)
    assert list(c.vocabulary) == ["alpha", "mid", "zeta"]
    assert c.X.toarray().tolist() == [[1, 0, 2], [1, 5, 0]]
    assert c.doc_index.tolist() == [0, 2] and c.n_dropped_empty == 1
    assert c.texts is None


def test_uci_gzip_and_explicit_vocab(tmp_path):
    p = tmp_path / "docword.gz.txt.gz"
    p.write_bytes(gzip.compress(b"1\n2\n2\n1 1 3\n1 2 4\n"))
    v = tmp_path / "words.txt"
    v.write_text("b\na\n")
    c = load_corpus(p, vocab=v)
    assert list(c.vocabulary) == ["a", "b"] and c.X.toarray().tolist() == [[4, 3]]
    with user_error(r"vocab\.gz\.txt: UCI vocabulary file not found.*option vocab="):
        load_corpus(p)


@pytest.mark.parametrize(
    "body, message",
    [
        ("3\n3\n2\n1 1 2\n1 2\n", r"line 5: expected 3 integers 'docID wordID count', got '1 2'"),
        ("3\n3\n2\n1 1 2\n1 2 x\n", r"line 5: expected 3 integers.*got '1 2 x'"),
        ("3\n3\n2\n1 1 2\n1 2 1.5\n", r"line 5: expected 3 integers"),
        ("3\n3\n2\n1 1 2 7\n1 2 1\n", r"line 4: expected 3 integers"),
        ("3\n3\n2\n1 1 2\n4 2 1\n", r"line 5: docID 4 is out of range 1\.\.3"),
        ("3\n3\n2\n0 1 2\n1 2 1\n", r"line 4: docID 0 is out of range 1\.\.3"),
        ("3\n3\n2\n1 1 2\n\n1 9 1\n", r"line 6: wordID 9 is out of range 1\.\.3"),
        ("3\n3\n2\n1 1 0\n1 2 1\n", r"line 4: count 0 is not positive"),
        ("3\n3\n2\n1 1 2\n1 2 -3\n", r"line 5: count -3 is not positive"),
        ("3\n3\n3\n1 1 2\n1 2 1\n", r"line 3: the header says NNZ = 3 entries, but the file has 2"),
        ("3\n3\n1\n1 1 2\n1 2 1\n", r"line 3: the header says NNZ = 1 entries, but the file has 2"),
        ("3\nthree\n2\n1 1 2\n", r"line 2: expected W \(number of words\) as one non-negative integer, got 'three'"),
        ("3\n3\n", r"the file ends at line 2; .*three header lines D, W, NNZ"),
        ("", r"the file ends at line 0"),
        ("0\n3\n0\n", r"line 1: D = 0, the corpus has no documents"),
        ("3\n3\n2\n1 1 2\n1 1 3\n", r"lines 4 and 5: document 1, word 1 is listed twice"),
        ("3\n3\n1\n1 1 2\n", None),  # valid, for contrast
    ],
)
def test_uci_malformed_lines(tmp_path, body, message):
    p = write_uci(tmp_path, body)
    if message is None:
        assert load_corpus(p).X.nnz == 1
        return
    with user_error(message) as e:
        load_corpus(p)
    assert "docword.toy.txt" in str(e.value)


def test_uci_all_documents_empty(tmp_path):
    with user_error("every document is empty"):
        load_corpus(write_uci(tmp_path, "2\n3\n0\n"))


def test_uci_vocabulary_errors(tmp_path):
    with user_error(r"vocab\.toy\.txt: UCI vocabulary file not found.*vocab\.NAME\.txt beside"):
        load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n", vocab=None))
    with user_error(r"vocab\.toy\.txt: has 2 words, but .*W = 3"):
        load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n", vocab="a\nb\n"))
    with user_error(r"vocab\.toy\.txt, lines 1 and 3: the word 'a' appears twice"):
        load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n", vocab="a\nb\na\n"))
    with user_error(r"vocab\.toy\.txt, line 2: empty line"):
        load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n", vocab="a\n\nc\n"))
    with user_error(r"preprocess does not apply to UCI"):
        load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n"), preprocess=True)
    assert load_corpus(write_uci(tmp_path, "1\n3\n1\n1 1 1\n"), preprocess=False).n_words == 3


# --------------------------------------------------------------------------- #
# Formats, options, in-memory inputs
# --------------------------------------------------------------------------- #


def test_format_detection_and_unknown_format(tmp_path):
    p = write_json(tmp_path, {"text": ["alpha beta"]}, name="corpus.data")
    with user_error(r"corpus\.data: cannot tell the corpus format.*json, uci, 20news, folder, mm"):
        load_corpus(p)
    assert load_corpus(p, format="json").n_words == 2
    with user_error(r"unknown corpus format 'csv'; known formats: json, uci, 20news, folder, mm"):
        load_corpus(p, format="csv")
    assert KNOWN_FORMATS == ("json", "uci", "20news", "folder", "mm")
    with user_error(r"option 'subset' does not apply to format 'json'; its options: text_field"):
        load_corpus(p, format="json", subset="train")
    with user_error(r"option 'text_field' does not apply to format 'folder'"):
        load_corpus(tmp_path, text_field="body")


def test_20news_format_errors(tmp_path):
    bad = tmp_path / "junk.tar.gz"
    bad.write_bytes(b"not a tarball at all")
    with user_error(r"junk\.tar\.gz: not a readable tar archive"):
        load_corpus(bad)
    other = tmp_path / "other.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"hello"
        info = tarfile.TarInfo("somewhere/else.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    other.write_bytes(buf.getvalue())
    with user_error(r"other\.tar\.gz: no posts under 20news-bydate-train/GROUP/ID"):
        load_corpus(other)


def test_20news_small_archive(tmp_path):
    posts = {
        "20news-bydate-test/sci.space/3": b"From: a@b\nSubject: orbit\n\nRockets reach orbit.\n",
        "20news-bydate-train/sci.space/2": b"From: c@d\n\nIn article <x> c@d writes:\n> old quote\nMoons orbit planets.\n--\nSig Nature\n",
        "20news-bydate-train/alt.atheism/10": b"From: e@f\n\nGods and caf\xe9s\n",
    }
    p = tmp_path / "mini.tar.gz"
    with tarfile.open(p, "w:gz") as tf:
        for name, data in posts.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    c = load_corpus(p)
    assert c.texts == ["Gods and caf\xe9s\n", "Moons orbit planets."]
    assert list(c.vocabulary) == ["caf", "god", "moon", "orbit", "planet"]
    whole = load_corpus(p, subset="all", remove=())
    assert whole.n_docs == 3 and whole.texts[2].startswith("From: a@b")


def test_corpus_from_texts_and_list_input():
    c = corpus_from_texts(["Cars and geese", "more cars"], source="my list")
    assert list(c.vocabulary) == ["car", "goose"] and c.source.startswith("my list")
    assert load_corpus(["Cars and geese", "more cars"]).X.toarray().tolist() == [[1, 1], [1, 0]]
    with user_error(r"my list: document 1 is int, not a string"):
        corpus_from_texts(["ok", 5], source="my list")
    with user_error("expected a list of strings"):
        corpus_from_texts("just one string")
    with user_error("the corpus has no documents"):
        corpus_from_texts([])
    with user_error("a list of documents takes no format"):
        load_corpus(["a"], format="json")
    with user_error("preprocess must be true, false or unset"):
        load_corpus(["a"], preprocess="yes")


def test_corpus_from_counts_validates_and_canonicalises():
    X = np.array([[0, 2, 1], [0, 0, 0], [3, 0, 0]])
    c = corpus_from_counts(X, ["zeta", "alpha", "mid"], source="arrays")
    assert_canonical(c)
    assert list(c.vocabulary) == ["alpha", "mid", "zeta"]
    assert c.X.toarray().tolist() == [[2, 1, 0], [0, 0, 3]]
    assert c.doc_index.tolist() == [0, 2] and c.n_dropped_empty == 1 and c.texts is None
    # duplicates in a sparse input are summed
    dup = sp.coo_matrix(([1, 1], ([0, 0], [1, 1])), shape=(1, 2))
    assert corpus_from_counts(dup, ["a", "b"]).X.toarray().tolist() == [[0, 2]]
    with user_error("3 columns but the vocabulary has 2 words"):
        corpus_from_counts(X, ["a", "b"])
    with user_error("negative"):
        corpus_from_counts(np.array([[1, -1]]), ["a", "b"])
    with user_error("fractions"):
        corpus_from_counts(np.array([[1, 0.5]]), ["a", "b"])
    with user_error("NaN or infinity"):
        corpus_from_counts(np.array([[1, np.nan]]), ["a", "b"])
    with user_error(r"'a' appears twice \(entries 0 and 2\)"):
        corpus_from_counts(np.ones((1, 3)), ["a", "b", "a"])
    with user_error("vocabulary entry 1 is int"):
        corpus_from_counts(np.ones((1, 2)), ["a", 7])
    with user_error("2-D"):
        corpus_from_counts(np.ones(3), ["a", "b", "c"])
    with user_error("every document is empty"):
        corpus_from_counts(np.zeros((2, 2)), ["a", "b"])


def test_no_warnings_on_clean_inputs(tmp_path):
    p = write_uci(tmp_path, "1\n3\n1\n1 1 1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_corpus(p)
        load_corpus(write_json(tmp_path, {"text": ["alpha"]}))
