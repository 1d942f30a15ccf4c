"""Text pre-processing as in Manzonelli et al. (2024).

Steps, in this order, for each document:

1. lower-case (``str.lower``);
2. replace every character that is not an ASCII letter ``a-z`` by a space;
3. split on whitespace (after step 2 every tokenizer gives the same tokens);
4. remove English stop words (nltk's ``stopwords.words('english')``);
5. keep tokens of 3 to 15 letters;
6. lemmatise with nltk's ``WordNetLemmatizer().lemmatize(token)`` (the default
   part of speech, noun) on WordNet 3.0.

Non-ASCII letters count as non-letters, exactly like the regular expression
``[^a-z]`` the paper applies: ``"café"`` becomes the token ``"caf"`` and
``"naïve"`` the tokens ``"na"`` and ``"ve"`` (both then dropped as too short).
No accent folding is done, so vocabularies match the paper's. Text in other
scripts yields no tokens at all; such documents end up empty and the corpus
loader drops them (and counts them).

Lemmatisation is done by nltk itself, on a trimmed copy of WordNet 3.0 shipped
in ``audit/inputs/_data`` (see its README.md): nltk's ``WordNetCorpusReader`` reads
it and nltk's ``WordNetLemmatizer.lemmatize`` picks the lemma, so no nltk data
download is needed. For every token of letters ``a-z`` the result equals nltk
on the full WordNet 3.0 (``tests/test_preprocess.py`` proves it when the full
data is installed). Lemmatising is the last step and its output is not
filtered again, as in the paper's description: a lemma may be shorter than 3
letters (``"oxen"`` becomes ``"ox"``) or be a stop word (``"dos ins and outs"``
becomes ``["do", "in", "out"]``).

``tokenize_like_countvectorizer`` is the alternative for text that is already
pre-processed: scikit-learn ``CountVectorizer()``'s default analyzer
(lower-case, token pattern ``(?u)\\b\\w\\w+\\b``), which is what the paper's
code applied to its cleaned PHEME file.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from topicaudit.errors import UserError

__all__ = [
    "MAX_TOKEN_LENGTH",
    "MIN_TOKEN_LENGTH",
    "STOP_WORDS",
    "lemmatize",
    "preprocess_corpus",
    "preprocess_text",
    "tokenize",
    "tokenize_like_countvectorizer",
]

DATA_DIR = Path(__file__).resolve().parent / "_data"
WORDNET_ZIP = DATA_DIR / "wordnet-3.0-lemmatizer.zip"
STOP_WORDS_FILE = DATA_DIR / "stopwords-english.txt"

MIN_TOKEN_LENGTH = 3
MAX_TOKEN_LENGTH = 15


class _LettersOnly(dict):
    """``str.translate`` table: a-z stay, every other character becomes a space.

    Same tokens as ``re.sub("[^a-z]+", " ", text).split()``, several times
    faster; filled lazily because text may hold any Unicode character.
    """

    def __missing__(self, codepoint: int) -> int:
        value = codepoint if 97 <= codepoint <= 122 else 32
        self[codepoint] = value
        return value


_LETTERS_ONLY = _LettersOnly()
_LETTERS = re.compile(r"[a-z]+")
# scikit-learn CountVectorizer's default token_pattern.
_CV_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _load_stop_words() -> frozenset[str]:
    words = STOP_WORDS_FILE.read_text(encoding="utf-8").split()
    return frozenset(words)


#: nltk's English stop words (198 entries; only the all-letter ones can match).
STOP_WORDS: frozenset[str] = _load_stop_words()


def tokenize(text: str) -> list[str]:
    """Lower-case, turn every non-letter (anything but ``a-z``) into a space, split.

    Returns every token, before stop-word removal and length filtering.
    """
    return text.lower().translate(_LETTERS_ONLY).split()


def tokenize_like_countvectorizer(text: str) -> list[str]:
    """Tokens as scikit-learn ``CountVectorizer()`` (default settings) finds them."""
    return _CV_TOKEN.findall(text.lower())


# --------------------------------------------------------------------------- #
# WordNet lemmatiser on the shipped data
# --------------------------------------------------------------------------- #

_lemmatizer = None
_lemmatizer_lock = threading.Lock()


def _build_lemmatizer():
    """nltk's WordNetLemmatizer, reading the shipped WordNet 3.0 instead of nltk_data."""
    import nltk  # nltk is imported (slowly) only when raw text is pre-processed
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.data import ZipFilePathPointer
    from nltk.stem import WordNetLemmatizer

    class _ShippedWordNet(WordNetCorpusReader):
        # nltk maps the loaded WordNet onto the nltk_data "wordnet" corpus (for
        # the multilingual OMW functions) by reading index.sense of both. This
        # data *is* WordNet 3.0 and OMW is not used, so there is nothing to map.
        def map_wn(self, version="wordnet"):
            return None

    class _ShippedLemmatizer(WordNetLemmatizer):
        # lemmatize() is nltk's own; only the reader behind _morphy changes.
        def __init__(self, reader):
            super().__init__()
            self._reader = reader

        def _morphy(self, form, pos, check_exceptions=True):
            return self._reader._morphy(form, pos, check_exceptions)

    # nltk (3.9+) only opens data below a directory on nltk.data.path; register
    # ours while the reader loads everything into memory, then take it off again
    # so nltk's own corpus look-ups never see it.
    root = str(DATA_DIR)
    added = root not in nltk.data.path
    if added:
        nltk.data.path.append(root)
    try:
        with warnings.catch_warnings():
            # "The multilingual functions are not available": OMW is not needed.
            warnings.simplefilter("ignore", UserWarning)
            reader = _ShippedWordNet(ZipFilePathPointer(str(WORDNET_ZIP), "wordnet/"), None)
    except PermissionError:
        # nltk refuses a data file another account or the group may write (an install under umask 002): the
        # user's to fix, not an internal error (hostile pass XIX-zc, NC1)
        raise UserError(f"{WORDNET_ZIP}: nltk will not read the WordNet data topicaudit ships, because the file "
                        "can be written by the group, others or another account; make it private to its owner: "
                        f"chmod go-w {WORDNET_ZIP}") from None
    finally:
        if added:
            nltk.data.path.remove(root)
    return _ShippedLemmatizer(reader)


def _get_lemmatizer():
    global _lemmatizer
    if _lemmatizer is None:
        with _lemmatizer_lock:
            if _lemmatizer is None:
                _lemmatizer = _build_lemmatizer()
    return _lemmatizer


@lru_cache(maxsize=1 << 18)
def lemmatize(token: str) -> str:
    """``WordNetLemmatizer().lemmatize(token)`` (noun) on the shipped WordNet 3.0.

    ``token`` must consist of lower-case letters ``a-z`` only: the shipped data
    is trimmed to what such tokens can reach (the pre-processing never passes
    anything else).
    """
    if not isinstance(token, str) or not _LETTERS.fullmatch(token):
        raise ValueError(
            f"lemmatize() takes tokens of lower-case letters a-z only, got {token!r}; "
            "run the text through preprocess_text() instead"
        )
    return _get_lemmatizer().lemmatize(token)


# --------------------------------------------------------------------------- #
# The pipeline
# --------------------------------------------------------------------------- #


def _keep(token: str) -> bool:
    return MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH and token not in STOP_WORDS


def preprocess_text(text: str) -> list[str]:
    """Pre-process one document: the list of its lemmas, in document order."""
    if not isinstance(text, str):
        raise TypeError(f"preprocess_text() takes a str, got {type(text).__name__}")
    return [lemmatize(t) for t in tokenize(text) if _keep(t)]


def preprocess_corpus(texts: Iterable[str]) -> list[list[str]]:
    """Pre-process every document; lemmatises each distinct token once.

    Equivalent to ``[preprocess_text(t) for t in texts]``, faster on large
    corpora (the filter and lemma of each distinct token are cached).
    """
    lemmatizer = _get_lemmatizer()

    class _LemmaCache(dict):
        # token -> lemma, or "" when the token is dropped; filled on first sight
        def __missing__(self, token):
            lemma = lemmatizer.lemmatize(token) if _keep(token) else ""
            self[token] = lemma
            return lemma

    lookup = _LemmaCache().__getitem__
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"preprocess_corpus(): document {i} is {type(text).__name__}, not str")
        out.append(list(filter(None, map(lookup, text.lower().translate(_LETTERS_ONLY).split()))))
    return out
