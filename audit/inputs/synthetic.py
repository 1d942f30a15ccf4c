"""A synthetic LDA corpus with known structure: the embedded default audit.

Documents are drawn from the LDA generative model itself, with sparse topics
over a long-tailed vocabulary, so some documents carry rare words and are
exposed — the demo shows a real leak in seconds without any data file.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicaudit.inputs.corpus import Corpus


def synthetic_corpus(n_docs: int = 1000, n_words: int = 1500, k: int = 5, mean_length: float = 40.0,
                     topic_concentration: float = 0.05, doc_concentration: float = 0.3,
                     seed: int = 0) -> tuple[Corpus, np.ndarray]:
    """Sample a corpus from LDA; returns it with the true topic-word matrix.

    topic_concentration: Dirichlet parameter of each topic over words (small =
    sparse topics with many rare words). doc_concentration: of each document
    over topics.
    """
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(n_words, topic_concentration), size=k)
    mixtures = rng.dirichlet(np.full(k, doc_concentration), size=n_docs)
    lengths = np.maximum(rng.poisson(mean_length, size=n_docs), 3)
    rows, cols, vals = [], [], []
    for d in range(n_docs):
        counts = rng.multinomial(lengths[d], mixtures[d] @ topics)
        words = np.flatnonzero(counts)
        rows.append(np.full(words.size, d))
        cols.append(words)
        vals.append(counts[words])
    X = sp.csr_matrix(
        (np.concatenate(vals).astype(np.float64), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n_docs, n_words),
    )
    X.sum_duplicates()
    X.sort_indices()
    vocabulary = np.array([f"w{i:05d}" for i in range(n_words)])
    corpus = Corpus(
        X=X, vocabulary=vocabulary, texts=None,
        source=f"synthetic LDA corpus (docs={n_docs}, words={n_words}, k={k}, seed={seed})",
        doc_index=np.arange(n_docs), n_dropped_empty=0,
    )
    return corpus, topics
