"""Pre-processing (Manzonelli et al. 2024) and the shipped WordNet lemmatiser.

The equality proof (test_shipped_lemmatizer_equals_nltk_on_full_wordnet) needs
the full WordNet 3.0: Debian's ``wordnet-base`` (/usr/share/wordnet) or an
nltk_data ``corpora/wordnet``. CI installs it with
``apt-get install -y --no-install-recommends wordnet-base``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest

from topicaudit.inputs import preprocess
from topicaudit.inputs.preprocess import (
    STOP_WORDS,
    lemmatize,
    preprocess_corpus,
    preprocess_text,
    tokenize,
    tokenize_like_countvectorizer,
)

REPO = Path(__file__).resolve().parents[1]
DEBIAN_WORDNET = Path("/usr/share/wordnet")

TRICKY = [
    # irregular plurals (noun.exc)
    "geese", "mice", "children", "oxen", "feet", "teeth", "women", "men", "people",
    "aardwolves", "abaci", "cacti", "fungi", "alumni", "criteria", "phenomena", "data",
    "media", "indices", "matrices", "vertices", "analyses", "crises", "theses",
    # regular rules, and words that only look inflected
    "cars", "dogs", "churches", "boxes", "buzzes", "dishes", "wolves", "leaves", "knives",
    "wives", "lives", "ladies", "flies", "policemen", "fishermen", "axes", "bases", "buses",
    "gases", "glasses", "news", "mathematics", "physics", "politics", "species", "series",
    "means", "lens", "bus", "gas", "yes", "this", "his", "us", "was", "has", "does", "is",
    "as", "its", "ios", "cs", "ss", "s", "ies", "ves", "men", "ches", "shes", "xes", "zes",
    "ses", "hardrock", "anythinggoeszxcv", "tweets", "hashtags", "selfies", "emails",
    "isis", "paris", "texas", "christmas", "iris", "ottawa", "sydney", "hebdo", "charlie",
    "running", "ran", "better", "best", "went", "gone", "worse", "happier", "studies",
    "studying", "radii", "octopi", "octopuses", "syllabi", "appendices", "stimuli",
    "corpora", "genera", "lemmata", "schemata", "dice", "pence", "lice", "brethren",
    "a", "i", "x", "aa", "zz", "q", "qs", "ees", "sss", "bosses", "mosses", "oasis",
]



# --------------------------------------------------------------------------- #
# Pipeline behaviour
# --------------------------------------------------------------------------- #


def test_tokenize_lowercases_and_splits_on_every_non_letter():
    assert tokenize("Hello, World! it's 2024 e-mail foo_bar\tTAB\nx") == [
        "hello", "world", "it", "s", "e", "mail", "foo", "bar", "tab", "x"
    ]
    assert tokenize("http://t.co/SbOu4rAp96 #Ottawa @CBC") == [
        "http", "t", "co", "sbou", "rap", "ottawa", "cbc"
    ]
    assert tokenize("") == []
    assert tokenize("123 456 !!!") == []


def test_non_ascii_letters_are_non_letters():
    # documented choice: exactly the paper's [^a-z] after lower-casing, no accent folding
    assert tokenize("Café naïve ÉCOLE straße") == ["caf", "na", "ve", "cole", "stra", "e"]
    assert tokenize("日本語 русский") == []
    assert preprocess_text("Café résumé") == ["caf", "sum"]


def test_stop_words_are_nltks_english_list():
    assert len(STOP_WORDS) == 198
    assert {"the", "and", "not", "don", "ain", "mightn", "wouldn", "any", "own"} <= STOP_WORDS
    assert "they're" in STOP_WORDS and "he'd" in STOP_WORDS
    letters_only = {w for w in STOP_WORDS if w.isalpha()}
    assert len(letters_only) == 153
    assert preprocess_text("The cat and THE dog were not there because of them") == ["cat", "dog"]
    # contractions are split by the non-letter step, then their parts are stop words or too short
    assert preprocess_text("they're won't shouldn't couldn't") == []


def test_length_bounds_3_to_15_before_lemmatising():
    assert preprocess_text("ox cat") == ["cat"]                      # 2 letters dropped
    assert preprocess_text("abc abcdefghijklmno") == ["abc", "abcdefghijklmno"]  # 3 and 15 kept
    assert preprocess_text("abcdefghijklmnop") == []                 # 16 dropped
    assert preprocess_text("internationalization") == []             # 20 dropped
    # the filters apply to the token; the lemma is not filtered again
    assert preprocess_text("oxen") == ["ox"]
    assert preprocess_text("dos ins and outs") == ["do", "in", "out"]


def test_lemmas_regular_and_exceptions():
    assert preprocess_text("cars") == ["car"]
    assert preprocess_text("geese") == ["goose"]              # noun.exc
    assert preprocess_text("mice children feet") == ["mouse", "child", "foot"]
    assert preprocess_text("churches wolves ladies") == ["church", "wolf", "lady"]
    assert preprocess_text("aardwolves abaci") == ["aardwolf", "abacus"]
    assert preprocess_text("news running went") == ["news", "running", "went"]  # nouns only
    assert preprocess_text("hardrock zzzzzzs") == ["hardrock", "zzzzzzs"]        # unknown: unchanged
    assert lemmatize("us") == "u"  # nltk's documented quirk: shortest lemma
    assert lemmatize("leaves") == "leaf"


def test_lemmatize_refuses_tokens_outside_the_shipped_domain():
    for bad in ["Cars", "e-mail", "café", "", "abc1"]:
        with pytest.raises(ValueError, match="letters a-z"):
            lemmatize(bad)


def test_preprocess_corpus_equals_per_document_calls():
    docs = [
        "The geese were flying over cars.",
        "",
        "!!! 42 ###",
        "Geese, GEESE and more geese; churches & wolves.",
        "Police say the hostages were freed",
    ]
    assert preprocess_corpus(docs) == [preprocess_text(d) for d in docs]
    assert preprocess_corpus(iter(docs))[3] == ["goose", "goose", "goose", "church", "wolf"]
    with pytest.raises(TypeError, match="document 1"):
        preprocess_corpus(["ok", b"bytes"])
    with pytest.raises(TypeError):
        preprocess_text(None)


def test_countvectorizer_tokenizer_matches_sklearn():
    from sklearn.feature_extraction.text import CountVectorizer

    analyzer = CountVectorizer().build_analyzer()
    for text in ["Hello, World! it's 2024 e-mail foo_bar x", "Café naïve ÉCOLE 日本語 a1 b22", ""]:
        assert tokenize_like_countvectorizer(text) == analyzer(text)


def test_matches_pheme_clean_vocabulary_on_raw_tweets(shared_file):
    """Every word of the paper's cleaned PHEME occurs in our processing of the raw tweets."""
    raw = json.loads(shared_file("pheme", "pheme_raw.json").read_text())["text"]
    clean = json.loads(shared_file("pheme", "pheme_clean.json").read_text())["text"]
    ours = {t for doc in preprocess_corpus(raw) for t in doc}
    theirs = {t for doc in clean for t in doc.split()}
    assert len(theirs) == 5942
    assert theirs <= ours


# --------------------------------------------------------------------------- #
# Shipped data
# --------------------------------------------------------------------------- #


def test_shipped_data_is_small_and_carries_the_licence():
    data = REPO / "audit" / "inputs" / "_data"
    zpath = data / "wordnet-3.0-lemmatizer.zip"
    total = sum(p.stat().st_size for p in data.iterdir() if p.is_file())
    assert total < 600_000, total
    licence = (data / "WORDNET-LICENSE.txt").read_text()
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in licence
    assert "Permission to use, copy, modify and distribute" in licence
    with zipfile.ZipFile(zpath) as zf:
        names = set(zf.namelist())
        assert {"wordnet/LICENSE", "wordnet/lexnames", "wordnet/index.noun", "wordnet/noun.exc"} <= names
        assert zf.read("wordnet/LICENSE").decode() == licence


def test_loading_the_lemmatizer_leaves_nltk_data_path_alone():
    import nltk

    before = list(nltk.data.path)
    preprocess._build_lemmatizer()
    assert nltk.data.path == before


def _load_build_script():
    spec = importlib.util.spec_from_file_location("build_wordnet_data", REPO / "benchmarks" / "build_wordnet_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _full_wordnet_reader(tmp_path, monkeypatch):
    """nltk's own WordNetCorpusReader over the full WordNet 3.0, or skip."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    try:
        found = nltk.data.find("corpora/wordnet.zip/wordnet/")
    except LookupError:
        try:
            found = nltk.data.find("corpora/wordnet")
        except LookupError:
            found = None
    if found is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # no multilingual (OMW) data
            return WordNetCorpusReader(found, None), f"nltk_data {found}"
    if not (DEBIAN_WORDNET / "index.noun").exists():
        pytest.skip(
            "full WordNet 3.0 not installed (neither nltk_data corpora/wordnet nor "
            "/usr/share/wordnet); install it with "
            "'apt-get install -y --no-install-recommends wordnet-base'"
        )
    # Debian's dict files, in the layout nltk reads, inside a directory that
    # nltk's path sandbox allows. Debian ships no lexnames (nltk requires the
    # file; the lemmatiser never uses it) and no index.sense (only read to map
    # other WordNet versions for the multilingual functions).
    root = tmp_path / "nltk_data" / "corpora" / "wordnet"
    root.mkdir(parents=True)
    for f in DEBIAN_WORDNET.iterdir():
        if f.is_file() and re.fullmatch(r"(index|data)\.(noun|verb|adj|adv)|(noun|verb|adj|adv)\.exc", f.name):
            shutil.copyfile(f, root / f.name)
    (root / "lexnames").write_text(_load_build_script().lexnames_text())
    (root / "index.sense").write_bytes(b"")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")] + list(nltk.data.path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no multilingual (OMW) data
        reader = WordNetCorpusReader(str(root), None)
    return reader, f"Debian {DEBIAN_WORDNET}"


def _noun_inflections(lemma: str) -> list[str]:
    """Forms nltk's noun rules map back to ``lemma``."""
    forms = [lemma + "s", lemma + "es"]
    if lemma.endswith("y"):
        forms.append(lemma[:-1] + "ies")
    if lemma.endswith("f"):
        forms.append(lemma[:-1] + "ves")
    if lemma.endswith("man"):
        forms.append(lemma[:-3] + "men")
    return forms


def test_shipped_lemmatizer_equals_nltk_on_full_wordnet(tmp_path, monkeypatch, shared_file):
    """nltk's WordNetLemmatizer on the full WordNet 3.0 == ours on the shipped data."""
    import nltk.corpus
    from nltk.stem import WordNetLemmatizer

    full, where = _full_wordnet_reader(tmp_path, monkeypatch)
    assert full.get_version() == "3.0"
    # WordNetLemmatizer reads nltk.corpus.wordnet: point it at the full reader.
    monkeypatch.setattr(nltk.corpus, "wordnet", full)
    reference = WordNetLemmatizer()

    tokens = set(TRICKY)
    raw = json.loads(shared_file("pheme", "pheme_raw.json").read_text())["text"]
    for doc in raw:
        tokens.update(tokenize(doc))
    n_pheme = len(tokens)
    for word in shared_file("kos", "vocab.kos.txt").read_text().split():
        tokens.update(tokenize(word))
    # every letters-only lemma and exception form of the full data, and the
    # regular plurals of every noun: the whole space where the trimming could bite
    for lemma, by_pos in full._lemma_pos_offset_map.items():
        if re.fullmatch("[a-z]+", lemma):
            tokens.add(lemma)
            if "n" in by_pos:
                tokens.update(_noun_inflections(lemma))
    for exceptions in full._exception_map.values():
        tokens.update(f for f in exceptions if re.fullmatch("[a-z]+", f))
    tokens = sorted(t for t in tokens if re.fullmatch("[a-z]+", t))
    assert n_pheme > 10_000 and len(tokens) > 200_000

    ours = preprocess._build_lemmatizer()  # fresh, no cache involved
    mismatches = [
        (t, reference.lemmatize(t), ours.lemmatize(t))
        for t in tokens
        if reference.lemmatize(t) != ours.lemmatize(t)
    ]
    assert not mismatches, f"{len(mismatches)} differences vs {where}: {mismatches[:20]}"
    # and the public, cached entry point agrees on the tricky words
    assert [lemmatize(t) for t in TRICKY if re.fullmatch("[a-z]+", t)] == [
        reference.lemmatize(t) for t in TRICKY if re.fullmatch("[a-z]+", t)
    ]


def test_shipped_zip_rebuilds_identically_from_debian_wordnet(tmp_path):
    if not (DEBIAN_WORDNET / "index.noun").exists():
        pytest.skip("Debian wordnet-base not installed ('apt-get install -y --no-install-recommends wordnet-base')")
    build = _load_build_script()
    assert build.main(["--source", str(DEBIAN_WORDNET), "--out", str(REPO / "audit" / "inputs" / "_data"), "--check"]) == 0
