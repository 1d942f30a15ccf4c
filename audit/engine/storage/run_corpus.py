"""The corpus a run's configuration names, read again as the run read it (``run``, ``report``, sizing)."""
from __future__ import annotations

from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.validation import check_synthetic
from topicaudit.inputs.cache import cached_corpus
from topicaudit.inputs.corpus import Corpus, keep_most_frequent_words, load_corpus
from topicaudit.inputs.synthetic import synthetic_corpus


def load_audit_corpus(config: Config) -> Corpus:
    """The corpus a run configuration names (or its synthetic one), as the run read it."""
    if config.corpus.path is None:
        s = config.synthetic
        check_synthetic(s)  # report draws it from a run's config.toml: a negative prior was exit 3 there
        corpus, _ = synthetic_corpus(s.n_docs, s.n_words, s.k, s.mean_length, s.topic_concentration,
                                     s.doc_concentration, seed=config.seed)
        return corpus
    c = config.corpus

    def load() -> Corpus:
        corpus = load_corpus(c.path, format=c.format, preprocess=c.preprocess, text_field=c.text_field, **c.options)
        return keep_most_frequent_words(corpus, c.max_words) if c.max_words else corpus

    # A text corpus read before with the same settings: its counts from the cache (docs/corpora.md#cache).
    return cached_corpus(c.path, c.format, {"preprocess": c.preprocess, "text_field": c.text_field,
                                            "options": c.options, "max_words": c.max_words}, load)
