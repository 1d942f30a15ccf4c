"""A tiny learner package outside topicaudit, written into a test's directory (never installed into the venv).

``write_package(root)`` writes ``tinytopics/`` and a ``tinytopics-0.3.dist-info``
(METADATA, top_level.txt, entry_points.txt), so that with ``root`` on
``sys.path`` importlib.metadata finds its version and its entry points, as it
would for a package installed with pip.
"""
from __future__ import annotations

from pathlib import Path

LEARNERS = '''"""Learners of a package that is not topicaudit's, for testing plug-ins."""
import threading

import numpy as np

from topicaudit.targets.base import NO_GUARANTEE, Guarantee
from topicaudit.targets.params import positive


class SplitCounts:
    """Each topic's smoothed word counts over a random split of the documents (a fast, non-private learner)."""

    def __init__(self, k, smoothing=0.5):
        positive("smoothing", smoothing)
        self.k = k
        self.smoothing = smoothing

    def fit(self, X, seed):
        topic = np.random.default_rng(seed).integers(self.k, size=X.shape[0])
        counts = np.vstack([np.asarray(X[topic == t].sum(axis=0)).ravel() for t in range(self.k)])
        phi = counts + self.smoothing
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE


class NoisySplitCounts(SplitCounts):
    """Laplace noise of scale 1/ε on every count, claiming document-level ε: false (a document changes many
    counts), which the conformance suite's canary audit proves."""

    def __init__(self, k, smoothing=0.5, epsilon=1.0):
        super().__init__(k, smoothing)
        positive("epsilon", epsilon)
        self.epsilon = epsilon

    def fit(self, X, seed):
        topic = np.random.default_rng(seed).integers(self.k, size=X.shape[0])
        counts = np.vstack([np.asarray(X[topic == t].sum(axis=0)).ravel() for t in range(self.k)])
        noisy = counts + np.random.default_rng(seed + 1).laplace(0.0, 1.0 / self.epsilon, counts.shape)
        phi = np.maximum(noisy, 0.0) + self.smoothing
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return Guarantee(epsilon=self.epsilon, adjacency="document", basis="paper-claim",
                         parameters={"learner": "noisy-split-counts"})


class NoFit:
    def __init__(self, k):
        self.k = k

    def guarantee(self):
        return NO_GUARANTEE


class NoK(SplitCounts):
    def __init__(self, smoothing=0.5):
        super().__init__(3, smoothing)


class Unpicklable(SplitCounts):
    def __init__(self, k, smoothing=0.5):
        super().__init__(k, smoothing)
        self.lock = threading.Lock()


class Renamed(SplitCounts):
    """Stores its parameter under another name: a run could not record how it was built."""

    def __init__(self, k, alpha=0.5):
        super().__init__(k, alpha)


not_a_class = 3
'''

BROKEN = '''import numpy_that_does_not_exist  # noqa: F401
'''


def write_package(root: Path, version: str = "0.3") -> Path:
    """The package ``tinytopics`` and its metadata under ``root``; returns ``root``."""
    package = root / "tinytopics"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""tinytopics: learners for testing topicaudit plug-ins."""\n')
    (package / "learners.py").write_text(LEARNERS)
    (package / "broken.py").write_text(BROKEN)
    info = root / f"tinytopics-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tinytopics\nVersion: {version}\n")
    (info / "top_level.txt").write_text("tinytopics\n")
    (info / "entry_points.txt").write_text(
        "[topicaudit.learners]\nsplit-counts = tinytopics.learners:SplitCounts\n"
        "noisy-split-counts = tinytopics.learners:NoisySplitCounts\n\n"
        "[topicaudit.vocabulary_steps]\nall-again = topicaudit.targets.learners.vocabulary:CorpusVocabulary\n")
    return root
