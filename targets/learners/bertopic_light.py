"""BERTopic's pipeline, light and offline, as a learner: embed, reduce, cluster, then class-based TF-IDF.

BERTopic (Grootendorst, 2022) embeds each document, reduces the embeddings,
clusters them, and describes each cluster (topic) by c-TF-IDF: the counts of
a topic's documents added up, each row divided by its total (l1), times
idf_w = log(1 + A / f_w), where f_w is word w's count over all topics and A
the mean number of words per topic, truncated to a whole number
(``bertopic.vectorizers.ClassTfidfTransformer``; with ``bm25_weighting``,
idf_w = log(1 + (A − f_w + 0.5) / (f_w + 0.5)); with ``reduce_frequent_words``
the l1-normalised counts are square-rooted first). The released Φ is that
matrix with each row divided by its sum, as :mod:`topicaudit.inputs.bertopic_model`
reads a saved model's.

The stages here are BERTopic's light, offline choices, all scikit-learn:

embedding (``embedding="tfidf-svd"``)
    ``TfidfTransformer`` on the document's counts, then ``TruncatedSVD`` to
    ``svd_components`` (100) dimensions: BERTopic's documented light embedding
    ``make_pipeline(TfidfVectorizer(), TruncatedSVD(100))``, on the counts the
    audit has (the text itself is not kept). No sentence-transformer, no torch.
reduction (``reduction``)
    ``"pca"``: ``PCA(reduction_components)`` (5), what BERTopic uses when UMAP
    is not installed; ``"none"``: the embeddings as they are.
clustering (``clustering``)
    ``"hdbscan"``: scikit-learn's ``HDBSCAN(min_cluster_size=min_topic_size)``,
    BERTopic's default without the hdbscan package; unclustered documents form
    topic -1, kept as a row like any topic. ``"kmeans"``: ``KMeans(k)``, no
    outliers.

Topics are numbered by size as BERTopic numbers them (-1 first, then the
largest). Φ has exactly k rows (the learner contract): with HDBSCAN, when the
clustering finds more topics than k they are merged as BERTopic's
``nr_topics=k`` merges them (average-linkage agglomerative clustering of the
topics' mean embeddings on cosine distance, the outlier topic left alone;
``_reduce_to_n_topics``); when it finds fewer, the largest topic's row is
repeated, which changes no document's ζ (a maximum over mixtures of the rows:
a repeated row adds no mixture). The vectoriser's ``min_df`` and ``max_df``
count topics, as BERTopic's do (it fits its ``CountVectorizer`` on one
joined document per topic); a word no training document of this fit holds
has weight 0 in every topic (outside the fit's vocabulary).

Φ is then mixed with a small uniform share, (1 − s)·Φ + s/V with
``smoothing`` s = 1e-6 (0: BERTopic's Φ exactly). c-TF-IDF gives a word no
training document held weight 0 in every topic, and ζ drops such a word: a
shadow that never saw a member's rare word would score the member without
it, which turns the offline LiRA test upside down (docs/bertopic.md#smoothing).
The mixture is invertible, so it holds the same information; the audit
scores a user's Φ through the same mixture (:meth:`LightBERTopic.scored_phi`).

Deterministic for a seed: the SVD, PCA and k-means get ``random_state``
from it; HDBSCAN and the merge are deterministic.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import HDBSCAN, AgglomerativeClustering, KMeans
from sklearn.decomposition import PCA, TruncatedSVD
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics.pairwise import cosine_similarity

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.params import choice, integer

EMBEDDINGS = ("tfidf-svd",)
REDUCTIONS = ("pca", "none")
CLUSTERINGS = ("hdbscan", "kmeans")


def class_tfidf(topic_counts: sp.csr_matrix, bm25_weighting: bool = False,
                reduce_frequent_words: bool = False) -> sp.csr_matrix:
    """BERTopic's ``ClassTfidfTransformer().fit(X).transform(X)`` on topic × word counts, for columns that occur.

    Columns with no count (outside this fit's vocabulary) get weight 0, as a
    word BERTopic's vectoriser never saw has no column at all.
    """
    X = sp.csr_matrix(topic_counts, dtype=np.float64)
    df = np.asarray(X.sum(axis=0)).ravel()
    avg = int(np.asarray(X.sum(axis=1)).ravel().mean())
    present = df > 0
    idf = np.zeros_like(df)
    with np.errstate(divide="ignore", invalid="ignore"):
        if bm25_weighting:
            idf[present] = np.log(1 + ((avg - df[present] + 0.5) / (df[present] + 0.5)))
        else:
            idf[present] = np.log((avg / df[present]) + 1)
    totals = np.asarray(X.sum(axis=1)).ravel()
    scale = np.divide(1.0, totals, out=np.zeros_like(totals), where=totals > 0)
    tf = sp.diags(scale) @ X
    tf = sp.csr_matrix(tf)
    if reduce_frequent_words:
        tf.data = np.sqrt(tf.data)
    return sp.csr_matrix(tf @ sp.diags(idf))


class LightBERTopic:
    """BERTopic's light pipeline (TF-IDF + SVD embedding, PCA, HDBSCAN or k-means, c-TF-IDF) as a learner.

    k: Φ's rows (with k-means, its clusters; with HDBSCAN, at most k topics are kept, merged as ``nr_topics=k``).
    min_topic_size: HDBSCAN's ``min_cluster_size`` (BERTopic's default 10).
    bm25_weighting, reduce_frequent_words: ``ClassTfidfTransformer``'s settings.
    min_df, max_df: the ``CountVectorizer``'s, counted over topics as BERTopic counts them.
    smoothing: s in [0, 1): Φ becomes (1 − s)·Φ + s/V (:func:`smooth`; 0 gives BERTopic's Φ exactly). 1e-6 by
        default, so that ζ scores a word a fit never saw instead of dropping it (docs/bertopic.md#smoothing).
    """

    def __init__(self, k: int, clustering: str = "hdbscan", min_topic_size: int = 10, embedding: str = "tfidf-svd",
                 svd_components: int = 100, reduction: str = "pca", reduction_components: int = 5,
                 bm25_weighting: bool = False, reduce_frequent_words: bool = False, min_df=1, max_df=1.0,
                 smoothing: float = 1e-6):
        choice("clustering", clustering, CLUSTERINGS)
        choice("embedding", embedding, EMBEDDINGS)
        choice("reduction", reduction, REDUCTIONS)
        integer("min_topic_size", min_topic_size, minimum=2)
        integer("svd_components", svd_components)
        integer("reduction_components", reduction_components)
        for name, value in (("bm25_weighting", bm25_weighting), ("reduce_frequent_words", reduce_frequent_words)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false (got {value!r})")
        for name, value in (("min_df", min_df), ("max_df", max_df)):
            ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
                isinstance(value, float) and 0.0 <= value <= 1.0)
            if not ok:
                raise ValueError(f"{name} must be a whole number of topics ≥ 0 or a share in [0, 1] (got {value!r})")
        if not (isinstance(smoothing, (int, float)) and not isinstance(smoothing, bool) and 0 <= smoothing < 1):
            raise ValueError(f"smoothing must be a number in [0, 1) (got {smoothing!r})")
        self.k = k
        self.smoothing = smoothing
        self.clustering, self.min_topic_size, self.embedding = clustering, min_topic_size, embedding
        self.svd_components, self.reduction, self.reduction_components = svd_components, reduction, reduction_components
        self.bm25_weighting, self.reduce_frequent_words = bm25_weighting, reduce_frequent_words
        self.min_df, self.max_df = min_df, max_df

    # -- the stages --------------------------------------------------------------------------
    def embed(self, X: sp.csr_matrix, seed: int) -> np.ndarray:

        tfidf = TfidfTransformer().fit_transform(X)
        n = min(self.svd_components, X.shape[1] - 1, X.shape[0] - 1)
        if n < 1:
            return np.asarray(tfidf.toarray(), dtype=np.float64)
        with warnings.catch_warnings():  # degenerate inputs (no variance) give NaN explained-variance ratios only
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nan_to_num(TruncatedSVD(n_components=n, random_state=seed).fit_transform(tfidf))

    def reduce(self, embeddings: np.ndarray, seed: int) -> np.ndarray:
        if self.reduction == "none":
            return embeddings

        n = min(self.reduction_components, embeddings.shape[1], embeddings.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nan_to_num(PCA(n_components=n, random_state=seed).fit_transform(embeddings))

    def cluster(self, reduced: np.ndarray, seed: int) -> np.ndarray:
        """BERTopic's topic numbers: -1 for outliers, then 0, 1, … by decreasing size."""
        if self.clustering == "kmeans":

            with warnings.catch_warnings():  # fewer distinct points than k (a degenerate shadow): fewer clusters
                warnings.simplefilter("ignore")
                labels = KMeans(n_clusters=min(self.k, reduced.shape[0]), random_state=seed,
                                n_init="auto").fit(reduced).labels_
        elif reduced.shape[0] < max(self.min_topic_size, 2):
            # No cluster can reach min_topic_size documents (HDBSCAN refuses to run): every document is an outlier.
            labels = np.full(reduced.shape[0], -1)
        else:

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                labels = HDBSCAN(min_cluster_size=self.min_topic_size, metric="euclidean", copy=True,
                                 cluster_selection_method="eom").fit(reduced).labels_
        return _by_size(np.asarray(labels, dtype=np.int64))

    def topic_counts(self, X: sp.csr_matrix, labels: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """One row of summed counts per topic (in id order), the vectoriser's min_df/max_df over topics applied."""
        ids = np.unique(labels)
        member = sp.csr_matrix((np.ones(labels.size), (np.searchsorted(ids, labels), np.arange(labels.size))),
                               shape=(ids.size, labels.size))
        counts = sp.csr_matrix(member @ sp.csr_matrix(X, dtype=np.float64))
        if self.min_df != 1 or self.max_df != 1.0:
            topics_with = np.asarray((counts > 0).sum(axis=0)).ravel()
            n = counts.shape[0]
            low = self.min_df if isinstance(self.min_df, int) else self.min_df * n
            high = self.max_df if isinstance(self.max_df, int) else self.max_df * n
            keep = (topics_with >= low) & (topics_with <= high)
            counts = sp.csr_matrix(counts @ sp.diags(keep.astype(np.float64)))
            counts.eliminate_zeros()
        return counts, ids

    def merge(self, labels: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
        """Topics merged down to k as BERTopic's ``nr_topics=k`` does (outliers stay topic -1)."""

        outliers = int(np.any(labels == -1))
        topics = np.unique(labels[labels >= 0])
        if topics.size + outliers <= self.k:
            return labels
        means = np.stack([embeddings[labels == t].mean(axis=0) for t in topics])
        distance = 1 - cosine_similarity(means)
        np.fill_diagonal(distance, 0)
        merged = AgglomerativeClustering(self.k - outliers, metric="precomputed", linkage="average").fit(distance)
        mapping = dict(zip(topics.tolist(), merged.labels_.tolist()))
        return _by_size(np.array([mapping[t] if t >= 0 else -1 for t in labels.tolist()], dtype=np.int64))

    # -- the learner ----------------------------------------------------------------------------
    def fit_topics(self, X: sp.csr_matrix, seed: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
        """The c-TF-IDF matrix (topics in id order), the topic ids, and every document's topic."""
        X = sp.csr_matrix(X)
        embeddings = self.embed(X, seed)
        labels = self.cluster(self.reduce(embeddings, seed), seed)
        if self.clustering == "hdbscan":
            labels = self.merge(labels, embeddings)
        counts, ids = self.topic_counts(X, labels)
        return class_tfidf(counts, self.bm25_weighting, self.reduce_frequent_words), ids, labels

    def fit(self, X: sp.csr_matrix, seed: int) -> np.ndarray:
        """Φ (k × n_words, float32): the c-TF-IDF rows normalised, padded to k rows by repeating the largest."""
        ctfidf, ids, labels = self.fit_topics(X, int(seed) % 2**32)
        dense = np.maximum(ctfidf.toarray(), 0.0)  # BM25's idf is negative for very frequent words: weight 0
        sums = dense.sum(axis=1)
        rows = [i for i in range(dense.shape[0]) if sums[i] > 0]
        if not rows:  # no training word at all: every word equally likely, as for an empty corpus
            return np.full((self.k, X.shape[1]), 1.0 / max(X.shape[1], 1), dtype=np.float32)
        phi = dense[rows] / sums[rows, None]
        largest = rows.index(max(rows, key=lambda i: (np.count_nonzero(labels == ids[i]), -i)))
        if phi.shape[0] < self.k:
            phi = np.vstack([phi, np.repeat(phi[largest][None, :], self.k - phi.shape[0], axis=0)])
        return smooth(phi[: self.k], self.smoothing).astype(np.float32)

    @staticmethod
    def shadow_k(model_k: int, params: dict) -> int:
        """The shadows' k for auditing a model of ``model_k`` topics: with HDBSCAN a cap, twice the model's."""
        return 2 * model_k if params.get("clustering", "hdbscan") == "hdbscan" else model_k

    def scored_phi(self, phi: np.ndarray) -> np.ndarray:
        """smoothing: (1 − s)·Φ + s/V"""
        return smooth(phi, self.smoothing)

    def guarantee(self) -> Guarantee:
        return NO_GUARANTEE


def smooth(phi: np.ndarray, smoothing: float) -> np.ndarray:
    """Φ mixed with the uniform distribution over its columns: (1 − s)·Φ + s/V (s = 0: Φ itself).

    Not BERTopic's: an attack-side choice applied alike to the released Φ and every shadow's (docs/bertopic.md),
    so that a word a fit never saw has a small probability instead of an all-zero column, which ζ would drop.
    """
    if not smoothing:
        return phi
    return (1.0 - smoothing) * phi + smoothing / phi.shape[1]


def _by_size(labels: np.ndarray) -> np.ndarray:
    """Topic numbers by decreasing size (ties: the earlier number first), -1 kept: BERTopic's order."""
    topics, sizes = np.unique(labels[labels >= 0], return_counts=True)
    order = topics[np.lexsort((topics, -sizes))]
    mapping = {int(t): i for i, t in enumerate(order)}
    return np.array([mapping.get(int(t), -1) for t in labels], dtype=np.int64)
