"""A target is a release pipeline: a vocabulary step, then a learner (paper Alg. 1)."""
from __future__ import annotations

import json

import pickle
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import said
from topicaudit.process_state import kept_process_state, ours_file
from topicaudit.targets.base import Guarantee, Release, declared_mechanism, records
from topicaudit.targets.mechanisms import Recorder


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
        """True when the vocabulary step is a DP mechanism that records its release (``select(..., record)``)."""
        return records(self.vocabulary_step.select) and declared_mechanism(self.vocabulary_step) is not None

    @property
    def observes_mechanism(self) -> bool:
        """True when the learner records its mechanism's releases (``fit(..., record)`` and ``mechanism()``)."""
        return records(self.learner.fit) and declared_mechanism(self.learner) is not None

    def fit(self, X: sp.csr_matrix, seed: int, vocabulary: np.ndarray | None = None,
            observe: np.ndarray | None = None) -> Release:
        """The release; the working directory put back if the vocabulary step or the learner changed it."""
        with kept_process_state(f"the fit of {type(self.learner).__name__}"):
            return self._fit(X, seed, vocabulary, observe)

    def _fit(self, X: sp.csr_matrix, seed: int, vocabulary: np.ndarray | None,
             observe: np.ndarray | None) -> Release:
        vocabulary_seed, learner_seed = (
            int(s.generate_state(1)[0]) for s in np.random.SeedSequence(seed).spawn(2)
        )
        requested = observe is not None  # a transcript is returned only when asked for, even of no column
        observe = np.zeros(0, dtype=np.int64) if observe is None else np.asarray(observe, dtype=np.int64)
        vocabulary_transcript = None
        if vocabulary is None and requested and self.observes_vocabulary:
            step_record = Recorder(observe)
            with plugin_code(self.vocabulary_step, "select"):
                vocabulary = self.vocabulary_step.select(X, vocabulary_seed, record=step_record)
            vocabulary_transcript = step_record.transcript()
        elif vocabulary is None:
            with plugin_code(self.vocabulary_step, "select"):
                vocabulary = self.vocabulary_step.select(X, vocabulary_seed)
        else:
            vocabulary = np.asarray(vocabulary, dtype=np.int64)  # the target's, reused by a shadow (verified)
        vocabulary = selected_vocabulary(vocabulary, X.shape[1], self.vocabulary_step)
        if vocabulary.size == 0:
            # A DP vocabulary step may release no word at all: then the release
            # is empty (k × 0) and every document's likelihood is the same.
            return Release(phi=np.zeros((self.learner.k, 0), dtype=np.float32), vocabulary=vocabulary,
                           info={"empty_vocabulary": True}, transcript=vocabulary_transcript)
        X = X[:, vocabulary].tocsr()
        if not records(self.learner.fit):
            with plugin_code(self.learner, "fit"):
                phi = self.learner.fit(X, learner_seed)
            return Release(phi=released_phi(phi, self.learner.k, X.shape[1]), vocabulary=vocabulary,
                           transcript=vocabulary_transcript)
        # A private vocabulary step is the stage its canaries audit; else the learner's releases of the observed
        # columns the vocabulary kept (the others were never released).
        kept = observe[np.isin(observe, vocabulary)] if vocabulary_transcript is None else observe[:0]
        record = Recorder(np.searchsorted(vocabulary, kept))
        with plugin_code(self.learner, "fit"):
            phi = self.learner.fit(X, learner_seed, record=record)
        phi = released_phi(phi, self.learner.k, X.shape[1])
        transcript = record.transcript() if requested else None
        if transcript is not None:
            transcript.columns = kept
        return Release(phi=phi, vocabulary=vocabulary, info=_reported(record.info),
                       transcript=vocabulary_transcript or transcript)

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


def _reported(info) -> dict:
    """A learner's ``record.info`` as a run keeps it (JSON, in its model files and results.json): NumPy's numbers and
    arrays as Python's; a NumPy float in a monitor was exit 3, "a bug" (XIX-zzr R2). Anything else JSON cannot hold
    is the plug-in's error."""
    def plain(value):
        if isinstance(value, (np.generic, np.ndarray)):
            return value.tolist()
        raise TypeError(f"it holds a {type(value).__name__}")
    try:
        return json.loads(json.dumps(dict(info), default=plain))
    except (TypeError, ValueError, RecursionError) as error:
        raise PluginCodeError(f"its own fit's record.info cannot be kept as JSON, as a run keeps it ({error}): give "
                              "numbers, strings, lists and dicts there") from None


class PluginCodeError(ValueError):
    """A plug-in's own code (a learner's ``fit``, a vocabulary step's ``select``) raised. A ValueError, so the run
    names the plug-in and exits 2 as for a learner refusing the data (``learner_refused``), in a Ray worker too."""


@contextmanager
def plugin_code(part, method: str):
    """Run a plug-in's ``method``; what it raises is said as its own (``PluginCodeError``), not topicaudit's.

    A plug-in learner whose fit raised RuntimeError, AssertionError, RecursionError or called sys.exit was reported
    as "internal error (a bug, please report it)", exit 3, blaming topicaudit for the learner's exception, and after
    a GeneratorExit the half-written run was left behind (hostile pass XIX). A ValueError is the plug-in refusing
    the data and goes on as it is; KeyboardInterrupt stays an interrupt; topicaudit's own parts are not plug-ins.
    An exception whose ``str()`` raised (even a ValueError), or a BaseException of the plug-in's own, was again an
    internal error, exit 3, the latter leaving the half-written run; a ValueError of megabytes was printed whole
    (hostile pass XIX-o): each is now said as the plug-in's, in one bounded line (``errors.said``).
    """
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # every other: SystemExit, GeneratorExit, a BaseException of the plug-in's own
        if type(part).__module__.split(".")[0] == "topicaudit":
            raise
        if isinstance(error, ValueError) and _reads(error):
            raise  # the plug-in refusing the data, said as it said it (a message that reads, and is not huge)
        text = said(error)
        frames = traceback.extract_tb(error.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        # Raised in topicaudit's own code the plug-in called (a learner's super().fit): not said to be the plug-in's.
        whose = ("topicaudit's own code, which the plug-in called: a call it does not support, or a bug in topicaudit "
                 "to report with the plug-in" if frames and ours_file(frames[-1].filename)
                 else "the plug-in's code, not topicaudit's; fix it there")
        step = f"its vocabulary step ({type(part).__name__}): " if method == "select" else ""  # learner_refused's cue
        raise PluginCodeError(f"{step}its own {method} raised {type(error).__name__}{': ' + text if text else ''}"
                              f"{where} ({whose})") from error


def _reads(error: BaseException) -> bool:
    """Whether an exception's ``str()`` is a message a refusal can repeat whole."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - another's __str__ failing in any way
        return False
    return isinstance(text, str) and len(text) <= 4000


# How far a row of Φ may sum from 1: float32 rounding over a large vocabulary, not a release of other numbers.
ROW_SUM_TOLERANCE = 1e-2


def released_phi(phi, k: int, n_words: int) -> np.ndarray:
    """The learner's Φ, refused (ValueError: the run names the learner, exit 2) unless it is what every statistic
    and bound assumes — k × n_words real floats, finite, non-negative, each row a distribution. A Φ of k + 1 rows,
    all zeros, complex or boolean was audited and given a verdict; a transposed, ragged or sparse one ended in an
    internal error (hostile pass XVI), and so was a ``numpy.matrix`` or a masked array, whose methods take other
    arguments (hostile pass XIX-q; a masked array's hidden entries are numbers the audit would read unmasked)."""
    problem = None
    if not isinstance(phi, np.ndarray):
        problem = f"a {type(phi).__name__}, not a numpy array"
    elif type(phi) is not np.ndarray and not isinstance(phi, np.memmap):
        problem = f"a {type(phi).__name__} (a subclass of numpy's ndarray), not a plain numpy array (np.asarray)"
    elif phi.dtype.kind != "f":
        problem = f"an array of {phi.dtype}, not of floats"
    elif phi.shape != (k, n_words):
        problem = f"an array of shape {phi.shape}"
    elif not np.all(np.isfinite(phi)) or phi.min(initial=0.0) < 0:
        problem = "negative or non-finite entries"
    else:
        sums = phi.sum(axis=1, dtype=np.float64)
        if sums.size and np.max(np.abs(sums - 1)) > ROW_SUM_TOLERANCE:
            problem = f"rows that are not distributions (row sums {sums.min():.6g}..{sums.max():.6g})"
    if problem is not None:
        raise ValueError(f"its fit returned {problem}; fit must return Φ as a {k} × {n_words} array of floats (k "
                         "topics over the columns of the counts it is given), finite and non-negative, each row "
                         "summing to 1 (docs/adding-a-learner.md)")
    return phi


def selected_vocabulary(vocabulary, n_words: int, step) -> np.ndarray:
    """A vocabulary step's selection as int64 column ids, refused (ValueError: the run names it, exit 2) unless it
    is what the release assumes — distinct column ids of the corpus, increasing. A boolean mask of the kept words
    was read as ids (True → column 1, 300 times) and audited: NO SIGNAL, exit 0, where the release was VIOLATED;
    floats were truncated, negative ids counted from the end, duplicates doubled words' counts, and an id past the
    corpus or a 2-D array was an internal error (hostile pass XVIII)."""
    problem = None
    found = np.asarray(vocabulary) if isinstance(vocabulary, (np.ndarray, list, tuple)) else None
    if found is None:
        problem = f"a {type(vocabulary).__name__}, not a numpy array"
    elif found.size and found.dtype.kind not in "iu":
        problem = f"an array of {found.dtype}, not of integer column ids"
    elif found.ndim != 1:
        problem = f"an array of shape {found.shape}"
    elif found.size > n_words:
        problem = f"{found.size} ids for a corpus of {n_words} words"
    elif found.size and (found.min() < 0 or found.max() >= n_words):
        problem = f"ids outside 0..{n_words - 1} (from {found.min()} to {found.max()})"
    elif found.size > 1 and not np.all(found[1:] > found[:-1]):
        problem = "ids that are not increasing (unsorted, or repeated)"
    if problem is not None:
        raise ValueError(f"its vocabulary step ({type(step).__name__}) selected {problem}; select must return the "
                         f"kept words as a 1-D array of distinct corpus column ids (0..{n_words - 1}), increasing "
                         "(docs/adding-a-learner.md)")
    return found.astype(np.int64, copy=False)


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
