"""Canaries: crafted documents whose membership is a fair coin, so an audit can refute a claim.

Natural documents are hard to single out, so an audit on them proves little
(ε ≥ 2–3 for a learner with no noise at all). A canary is built to stand out.
One extra training of the target, the *canary release*, learns from a fixed
training set plus each canary independently with probability ½; guessing the
coins from the release alone gives the one-run ε bounds of
:mod:`topicaudit.bounds.one_run`.

The fixed training set is the whole corpus (minus the held-out documents when
the canaries are natural ones): it is the model a user would release, every
canary competes with all the data, and the fixed part is the same whatever
the coins say, so the coins are the only difference between neighbours.

Kinds (``[attack.canaries] kind``):

``unique-word``  L tokens of a fresh word no document has (a new column of a
                 public vocabulary): the strongest document-level canary.
``rare-words``   L tokens of the corpus's rarest words, no new vocabulary: the
                 realistic worst case for a vocabulary step that releases
                 observed words.
``natural``      held-out documents of the corpus.
``word``         one occurrence of a fresh word inserted into one document of
                 the fixed set: the neighbour of a word-level claim.
``threshold``    for DP vocabulary steps: half the canaries (even-numbered)
                 are a one-token document of a fresh word anchored by a fixed
                 one-word document of that word (``ANCHORS``: the word is a
                 candidate either way, and its noisy weight moves by the
                 canary's budget: DPSU's ε); the other half are documents of L
                 distinct fresh words (by default 4× the step's per-document
                 cap Δ0) that no other document holds, any of which the
                 step may release only with probability δ: DPSU's δ, its
                 threshold and its cap.
``paired``       two unique-word documents on two fresh words; the coin picks
                 which one trains (the other never does): the neighbour of a
                 replace-one claim, whose whole sensitivity a present/absent
                 canary cannot exercise.
``paired-word``  one token in one document of the fixed set whose word is one
                 of two fresh words, the coin picking which: the neighbour of
                 a central word-level claim (substitution of one token's
                 word), whose sensitivity an inserted word exercises only
                 half of.

Scores need no shadow model: ``zeta`` is ζ of the canary under the canary
release (a token whose word the release leaves out has likelihood 0, so it
ranks below any released word); ``column`` (canaries of fresh words) is
the log of the canary word's total mass over the topics of Φ. With
``[attack.canaries] shadows = N`` the run also trains N shadow canary releases
(every canary in exactly half of them) and adds online and offline LiRA on
the canaries' ζ: worth it for canaries whose ζ depends on the rest of the
model (natural and rare-words ones), not for fresh words.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topicaudit.attacks.zeta import solve_zeta
from topicaudit.targets.base import Release, document_cap
from topicaudit.targets.privacy.guarantee import Adjacency, Neighbours, adjacency_of

KINDS = ("unique-word", "rare-words", "natural", "word", "paired", "paired-word", "threshold")
# Kinds whose canary is one token inserted into a host document of the fixed set (word-level claims).
WORD_KINDS = ("word", "paired-word")
# Kinds whose coin picks which of two fresh alternatives trains (replace-one claims): scored heads minus tails.
PAIRED_KINDS = ("paired", "paired-word")
# A canary this many times longer than the cap: a correct learner truncates it, a missing cap shows.
CAP_MULTIPLE = 4
# The canary stream of a run's seed: SeedSequence(seed) children 0-3 belong to the plan.
CANARY_SPAWN_KEY = 4
# Threshold canaries: the fixed one-word documents holding each anchored canary's word. One makes the word a
# candidate whether or not its canary trains (its noisy weight is then the step's Laplace or Gaussian mechanism);
# more only bring the word nearer the cap Γ. Near the threshold (about ρ − ½ of them, as before issue 30) a
# step whose documents spend twice the budget put the anchors alone at 2F > Γ in every step and ε tested, so
# the canary moved nothing and the audit proved ε ≥ 0 (benchmarks/RESULTS.md §23).
ANCHORS = 1
# A token on a word the release leaves out: likelihood 0, i.e. below any ζ a released word can give.
UNRELEASED_PENALTY = 1e6


@dataclass(frozen=True)
class CanarySet:
    """The canaries of one run, their coins and how they enter the canary release's training."""

    kind: str
    coins: np.ndarray          # (m,) bool: True = in the canary release's training
    documents: sp.csr_matrix   # (m, n_columns) each canary as it is scored (a word canary: its one word)
    hosts: np.ndarray          # (m,) int64: row of the fixed set holding a word canary; -1 for other kinds
    fixed_rows: np.ndarray     # corpus rows always in the training
    n_corpus_words: int        # columns beyond this are fresh canary words
    length: int
    fit_seed: int
    shadow_in: np.ndarray | None = None   # (N, m) bool: which shadow canary release trains on which canary
    shadow_seeds: np.ndarray | None = None
    alternates: sp.csr_matrix | None = None  # paired kinds: what trains when the coin is tails
    anchors: np.ndarray | None = None  # threshold kind: (m,) fixed one-word documents of each canary's word

    @property
    def count(self) -> int:
        return int(self.coins.size)

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.count, dtype=np.int64)

    @property
    def n_columns(self) -> int:
        return int(self.documents.shape[1])

    @property
    def words(self) -> np.ndarray | None:
        """The fresh column of each unique-word, word or paired canary (its heads word; None for other kinds)."""
        if self.kind not in ("unique-word", "word", "paired", "paired-word", "threshold"):
            return None
        return self._heads_words

    @property
    def alternate_words(self) -> np.ndarray | None:
        """A paired canary's tails word (None for other kinds)."""
        return self._tails_words if self.kind in PAIRED_KINDS else None

    @property
    def _heads_words(self) -> np.ndarray:
        """Column n_corpus_words + i for canary i: its fresh word, for the kinds that have one (``words``)."""
        return self.n_corpus_words + self.ids

    @property
    def _tails_words(self) -> np.ndarray:
        """The fresh columns after the heads words: the paired kinds' tails words (``alternate_words``)."""
        return self.n_corpus_words + self.count + self.ids

    @property
    def word_level(self) -> bool:
        """Whether each canary is one token in a host document (it tests word-level claims)."""
        return self.kind in WORD_KINDS

    @property
    def observed_columns(self) -> np.ndarray:
        """The fresh columns whose mechanism outputs a mechanism audit records."""
        if self.words is None:
            return np.zeros(0, dtype=np.int64)
        if self.kind == "threshold":  # every word of the fresh documents too
            return np.arange(self.n_corpus_words, self.n_columns, dtype=np.int64)
        alternates = self.alternate_words
        return self.words if alternates is None else np.concatenate([self.words, alternates])

    def training_matrix(self, X: sp.csr_matrix, coins: np.ndarray | None = None) -> sp.csr_matrix:
        """The fixed rows with the canaries whose coin is heads (default: the canary release's coins)."""
        coins = self.coins if coins is None else coins
        fixed = sp.hstack([X[self.fixed_rows], sp.csr_matrix((self.fixed_rows.size, self.n_columns - X.shape[1]))],
                          format="csr")
        if self.kind == "word":
            inserted = sp.csr_matrix((np.ones(int(coins.sum())), (self.hosts[coins], self._heads_words[coins])),
                                     shape=fixed.shape)
            return (fixed + inserted).tocsr()
        if self.kind == "paired-word":  # the host holds one token of the heads word or of the tails word
            words = np.where(coins, self._heads_words, self._tails_words)
            return (fixed + sp.csr_matrix((np.ones(self.count), (self.hosts, words)), shape=fixed.shape)).tocsr()
        if self.kind == "paired":
            assert self.alternates is not None, "make_canaries gives the paired kinds their tails documents"
            return sp.vstack([fixed, self.documents[coins], self.alternates[~coins]], format="csr")
        if self.kind == "threshold":
            assert self.anchors is not None, "make_canaries gives the threshold kind its anchor counts"
            rows = np.repeat(np.arange(self.count), self.anchors)
            anchors = sp.csr_matrix((np.ones(rows.size), (np.arange(rows.size), self._heads_words[rows])),
                                    shape=(rows.size, self.n_columns))
            return sp.vstack([fixed, anchors, self.documents[coins]], format="csr")
        return sp.vstack([fixed, self.documents[coins]], format="csr")

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to rebuild the canaries and check the coins, for ``canaries.npz``."""
        d = self.documents
        return {"kind": np.str_(self.kind), "ids": self.ids, "coins": self.coins, "hosts": self.hosts,
                "fixed_rows": self.fixed_rows, "n_corpus_words": np.int64(self.n_corpus_words),
                "length": np.int64(self.length), "fit_seed": np.int64(self.fit_seed),
                "data": d.data, "indices": d.indices, "indptr": d.indptr, "shape": np.array(d.shape),
                **({"shadow_in": self.shadow_in, "shadow_seeds": self.shadow_seeds} if self.shadow_in is not None
                   else {}),
                **({"anchors": self.anchors} if self.anchors is not None else {}),
                **({"alternate_data": self.alternates.data, "alternate_indices": self.alternates.indices,
                    "alternate_indptr": self.alternates.indptr} if self.alternates is not None else {})}


def resolve_kind(kind: str, adjacency: Adjacency | str | None, neighbours: Neighbours | str | None = None,
                 dp_vocabulary: bool = False) -> str:
    """``auto``: canaries of the claim's neighbour relation, or of the DP vocabulary step in front of it.

    A pipeline whose vocabulary step is DP (DP set union) gets threshold
    canaries: a fresh word of any other kind is almost never selected, so the
    step would hide every stage behind it and its own mechanism would go
    unseen. A central word-level claim protects the substitution of one
    token's word: paired word canaries (heads word or tails word at the same
    place). A local word claim protects one word of one user's report: word
    canaries. Document-level: paired for replace-one claims (``Guarantee.relation``,
    the relation the claim's accountant reads too), unique-word otherwise.
    """
    if kind != "auto":
        return kind
    if dp_vocabulary:
        return "threshold"
    adjacency = adjacency_of(adjacency)
    if adjacency is Adjacency.WORD:
        return "paired-word"
    if adjacency is not None and not adjacency.document_level:
        return "word"
    return "paired" if neighbours == Neighbours.REPLACE_ONE else "unique-word"


def default_length(learner, X: sp.csr_matrix, top_n: int | None = None) -> int:
    """4× the document cap the learner's mechanism declares (a missing cap then shows), else the median document;
    for a release of each topic's ``top_n`` words, at least long enough to enter one.

    A word enters a topic's top n when its count there passes the n-th word's. The n-th most frequent word
    of the corpus bounds that count from above, and its even share over k topics is its scale: a canary of
    twice that share (at most the bound) is released often, where a median document's word never could be
    (PHEME, k = 5, top 10: 101 tokens entered for 4 of 100 members, 201 for 28, 300 for 33 of the 50 slots).
    """
    length = max(1, int(np.median(np.asarray(X.sum(axis=1)).ravel())))
    cap = document_cap(learner)
    if cap:
        length = CAP_MULTIPLE * int(cap)
    if top_n:
        frequencies = np.sort(np.asarray(X.sum(axis=0)).ravel())[::-1]
        nth = frequencies[min(int(top_n), frequencies.size) - 1] if frequencies.size else 0
        share = math.ceil(2 * nth / max(1, int(getattr(learner, "k", 1))))
        length = max(length, int(min(nth, share)))
    return length


def make_canaries(X: sp.csr_matrix, count: int, kind: str, length: int, seed: int, shadows: int = 0,
                  anchors: int = 0) -> CanarySet:
    """Draw ``count`` canaries of one kind and their coins, all from the run's seed.

    shadows: N shadow canary releases in complementary pairs (each canary in exactly N/2).
    anchors: threshold kind: the fixed one-word documents of each even-numbered canary's word
        (odd-numbered ones get none); a choice made before the coins, so it cannot favour them.

    Raises ValueError when the corpus cannot hold them (natural canaries need
    at least as many documents left in the fixed set).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown canary kind {kind!r}; known: {', '.join(KINDS)}")
    n_docs, n_words = X.shape
    alternates = anchor_counts = None
    coin_seq, draw_seq, fit_seq, shadow_seq = _canary_streams(seed)
    coins = np.random.default_rng(coin_seq).random(count) < 0.5
    rng = np.random.default_rng(draw_seq)
    fixed_rows = np.arange(n_docs, dtype=np.int64)
    hosts = np.full(count, -1, dtype=np.int64)
    if kind == "natural":
        if count > n_docs // 2:
            raise ValueError(f"{count} natural canaries would leave fewer than half of the {n_docs} documents "
                             f"in the fixed training set; use at most {n_docs // 2}")
        held = np.sort(rng.choice(n_docs, count, replace=False))
        fixed_rows = np.setdiff1d(fixed_rows, held)
        documents = X[held].tocsr()
        length = int(np.median(np.asarray(documents.sum(axis=1)).ravel())) if count else 0
    elif kind == "rare-words":
        # Rarest first (fewest documents), ties in a seeded random order; disjoint while the vocabulary lasts.
        df = np.bincount(X.indices, minlength=n_words)
        used = np.flatnonzero(df)
        order = used[np.lexsort((rng.random(used.size), df[used]))]
        pool = order[: min(order.size, length * count)]
        cols = pool[np.arange(count * length) % pool.size].reshape(count, length)
        documents = _rows(cols, n_words)
    else:
        if kind in WORD_KINDS:
            length = 1
            hosts = rng.choice(n_docs, count, replace=count > n_docs).astype(np.int64)
        if kind == "threshold":
            anchor_counts = np.where(anchored_positions(count), int(anchors), 0).astype(np.int64)
            documents = _threshold_rows(n_words, count, length)
        else:
            n_columns = n_words + (2 if kind in PAIRED_KINDS else 1) * count
            documents = _one_word_rows(n_words + np.arange(count), length, n_columns)
            if kind in PAIRED_KINDS:
                alternates = _one_word_rows(n_words + count + np.arange(count), length, n_columns)
    shadow_in = shadow_seeds = None
    if shadows:
        pairs_seq, seeds_seq = shadow_seq.spawn(2)
        halves = [np.random.default_rng(s).permutation(count) < count // 2 for s in pairs_seq.spawn(shadows // 2)]
        shadow_in = np.stack([h for half in halves for h in (half, ~half)])
        shadow_seeds = seeds_seq.generate_state(shadows).astype(np.int64)
    return CanarySet(kind=kind, coins=coins, documents=documents, hosts=hosts, fixed_rows=fixed_rows,
                     n_corpus_words=n_words, length=int(length), fit_seed=int(fit_seq.generate_state(1)[0]),
                     shadow_in=shadow_in, shadow_seeds=shadow_seeds, alternates=alternates, anchors=anchor_counts)


def _canary_streams(seed: int) -> list[np.random.SeedSequence]:
    """The four streams of a run's canaries: coins, draws, the canary release's fit seed, shadows."""
    return np.random.SeedSequence(seed, spawn_key=(CANARY_SPAWN_KEY,)).spawn(4)


def canary_coins(count: int, seed: int) -> np.ndarray:
    """(count,) bool: the coins ``make_canaries(…, count, …, seed)`` draws, without building the canaries
    (for designing an audit before it runs: the coins depend only on the count and the seed)."""
    return np.random.default_rng(_canary_streams(seed)[0]).random(count) < 0.5


def anchored_positions(count: int) -> np.ndarray:
    """(count,) bool: which threshold canaries are anchored (the even-numbered ones; the odd ones are fresh)."""
    return np.arange(count) % 2 == 0


def _threshold_rows(n_words: int, count: int, length: int) -> sp.csr_matrix:
    """Even canaries: their own fresh word once. Odd ones: their own word and length − 1 more fresh words.

    Canary i's own word is column n_words + i; the extra words of the odd
    canaries follow, in canary order, so every column is one canary's alone.
    """
    odd = np.arange(1, count, 2)
    extra = max(0, length - 1)
    col_parts = [n_words + np.arange(count)]
    row_parts = [np.arange(count)]
    if extra:
        col_parts.append(n_words + count + np.arange(odd.size * extra))
        row_parts.append(np.repeat(odd, extra))
    rows, cols = np.concatenate(row_parts), np.concatenate(col_parts)
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(count, n_words + count + odd.size * extra))


def _one_word_rows(words: np.ndarray, length: int, n_columns: int) -> sp.csr_matrix:
    """One document per word: ``length`` copies of it."""
    return sp.csr_matrix((np.full(words.size, float(length)), words, np.arange(words.size + 1)),
                         shape=(words.size, n_columns))


def _rows(cols: np.ndarray, n_columns: int) -> sp.csr_matrix:
    """One document per row of column ids (repeats add up)."""
    m, length = cols.shape
    rows = np.repeat(np.arange(m), length)
    return sp.csr_matrix((np.ones(m * length), (rows, cols.ravel())), shape=(m, n_columns))


def canary_scores(release: Release, canaries: CanarySet, tol: float = 1e-8) -> dict[str, np.ndarray]:
    """Scores of every canary under the canary release (higher = more likely in its training)."""
    phi = release.dense_phi(canaries.n_columns)
    released = np.zeros(canaries.n_columns, dtype=bool)
    released[release.vocabulary] = True
    scores = {"zeta": _zeta(phi, released, canaries.documents, tol)}
    words = canaries.words
    if words is not None:
        scores["column"] = _column(phi, released, words)
    alternate_words = canaries.alternate_words
    if canaries.alternates is not None:  # paired: evidence for heads minus evidence for tails
        assert alternate_words is not None, "the paired kinds, the ones with alternates, have tails words"
        scores["zeta"] = scores["zeta"] - _zeta(phi, released, canaries.alternates, tol)
        scores["column"] = scores["column"] - _column(phi, released, alternate_words)
    return scores


def _zeta(phi: np.ndarray, released: np.ndarray, docs: sp.csr_matrix, tol: float) -> np.ndarray:
    unreleased_tokens = docs @ (~released).astype(np.float64)
    zeta = solve_zeta(phi, docs, tol=tol).zeta if released.any() else np.zeros(docs.shape[0])
    return zeta - UNRELEASED_PENALTY * unreleased_tokens


def _column(phi: np.ndarray, released: np.ndarray, words: np.ndarray) -> np.ndarray:
    mass = phi[:, words].astype(np.float64).sum(axis=0)
    with np.errstate(divide="ignore"):
        return np.where(released[words] & (mass > 0), np.log(mass), -UNRELEASED_PENALTY)
