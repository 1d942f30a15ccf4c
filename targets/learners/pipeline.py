"""A target is a release pipeline: a vocabulary step, then a learner (paper Alg. 1)."""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from topicaudit.targets.base import Guarantee, Release


class Pipeline:
    """Select a vocabulary, restrict the counts to it, learn Φ over it."""

    def __init__(self, vocabulary_step, learner, guarantee: Guarantee):
        """guarantee: the parts' guarantees composed (``topicaudit.targets.privacy.composition.compose``), given by
        whoever builds the pipeline so that Ray workers, which only fit, never load the accountants."""
        self.vocabulary_step = vocabulary_step
        self.learner = learner
        self._guarantee = guarantee

    @property
    def observes_vocabulary(self) -> bool:
        """True when the vocabulary step is a DP mechanism that records its outputs (``select_observed``)."""
        return hasattr(self.vocabulary_step, "select_observed")

    @property
    def observes_mechanism(self) -> bool:
        """True when the learner can record its mechanism's outputs (``fit_observed``)."""
        return hasattr(self.learner, "fit_observed") and getattr(self.learner, "records_transcript", True)

    def fit(self, X: sp.csr_matrix, seed: int, vocabulary: np.ndarray | None = None,
            observe: np.ndarray | None = None) -> Release:
        vocabulary_seed, learner_seed = (
            int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2)
        )
        vocabulary_transcript = None
        if vocabulary is None and observe is not None and self.observes_vocabulary:
            vocabulary, vocabulary_transcript = self.vocabulary_step.select_observed(
                X, vocabulary_seed, np.asarray(observe, dtype=np.int64))
        elif vocabulary is None:
            vocabulary = self.vocabulary_step.select(X, vocabulary_seed)
        vocabulary = np.asarray(vocabulary, dtype=np.int64)
        if vocabulary.size == 0:
            # A DP vocabulary step may release no word at all: then the release
            # is empty (k × 0) and every document's likelihood is the same.
            return Release(phi=np.zeros((self.learner.k, 0), dtype=np.float32), vocabulary=vocabulary,
                           info={"empty_vocabulary": True}, transcript=vocabulary_transcript)
        X = X[:, vocabulary].tocsr()
        # A learner with something to report beyond Φ (a privacy monitor's
        # trajectory) offers ``fit_with_info(X, seed) -> (phi, info)``; its
        # ``fit`` stays the plain protocol method. Other learners are unchanged.
        transcript = vocabulary_transcript  # a private vocabulary step is the stage its canaries audit
        if observe is not None and transcript is None and self.observes_mechanism:
            # Observed columns the vocabulary step left out have no mechanism output to record.
            observe = np.asarray(observe, dtype=np.int64)
            kept = observe[np.isin(observe, vocabulary)]
            phi, transcript = self.learner.fit_observed(X, learner_seed, np.searchsorted(vocabulary, kept))
            transcript.columns = kept
            info = {}
        elif hasattr(self.learner, "fit_with_info"):
            phi, info = self.learner.fit_with_info(X, learner_seed)
        else:
            phi, info = self.learner.fit(X, learner_seed), {}
        return Release(phi=phi, vocabulary=vocabulary, info=dict(info), transcript=transcript)

    def guarantee(self) -> Guarantee:
        if self._guarantee is None:
            raise RuntimeError("this pipeline was shipped to a worker without its guarantee; ask the driver's copy")
        return self._guarantee

    def __getstate__(self) -> dict:
        """Pickled (for a Ray worker, which only fits) without the guarantee: its dp-accounting event would
        make every worker import the accountants (about 1 CPU-s)."""
        return {**self.__dict__, "_guarantee": None}

    def __reduce__(self):
        """A pipeline whose plug-in was imported from a directory the driver added to ``sys.path`` (a notebook's,
        a test's) carries that directory: a Ray worker, which starts with the installed packages, PYTHONPATH and
        the driver's working directory only, adds it before unpickling the plug-in."""
        path = worker_path(self.learner, self.vocabulary_step)
        return _rebuild, (path, pickle.dumps(self.__getstate__()) if path else self.__getstate__())


def _rebuild(path: list[str], state: dict | bytes) -> Pipeline:
    for entry in path:
        if entry not in sys.path:
            sys.path.append(entry)
    pipeline = Pipeline.__new__(Pipeline)
    pipeline.__dict__.update(pickle.loads(state) if isinstance(state, bytes) else state)
    return pipeline


def worker_path(*parts) -> list[str]:
    """The directories that hold the top-level modules of these objects' classes, where a Ray worker may lack them.

    Our own classes, a script's (``__main__``: Ray pickles them by value) and
    installed packages' (in a site-packages directory) need none.
    """
    found: list[str] = []
    for part in parts:
        name = type(part).__module__
        file = getattr(sys.modules.get(name), "__file__", None)
        if name.split(".")[0] in ("topicaudit", "__main__") or file is None:
            continue
        root = Path(file).parent
        for _ in range(name.count(".") + (Path(file).name == "__init__.py")):
            root = root.parent
        if not {"site-packages", "dist-packages"} & set(root.parts) and str(root) not in found:
            found.append(str(root))
    return found
