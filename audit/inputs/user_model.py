"""A user's released model, loaded whole: Φ and its vocabulary from their files (:mod:`topicaudit.inputs.phi_io`,
:mod:`topicaudit.inputs.vocabulary_file`) or from a saved gensim, tomotopy, scikit-learn or BERTopic model with
the training settings it holds, validated once, its columns sorted by word (``load_user_model``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topicaudit.errors import UserError
from topicaudit.inputs.bertopic_model import (
    BERTopicModel,
    pickle_holds_verbatim,
    read_bertopic_dir,
    read_bertopic_pickle,
)
from topicaudit.inputs.files import file_sha256, read_user_file
from topicaudit.inputs.library_models import load_gensim, load_tomotopy, refuse_gensim
from topicaudit.inputs.sklearn_model import read_settings, shadow_settings
from topicaudit.inputs.phi_io import DEFAULT_ROW_SUM_TOLERANCE, is_number, phi_format, read_phi, validate_phi
from topicaudit.inputs.vocabulary_file import read_vocabulary


@dataclass
class UserModel:
    """Φ (k × V float64, rows on the simplex) and its words, sorted alphabetically.

    Columns are reordered with the words so that they line up with
    :class:`topicaudit.inputs.corpus.Corpus` columns (which are always sorted).
    """

    phi: np.ndarray
    vocabulary: np.ndarray
    phi_path: Path
    phi_sha256: str
    phi_format: str
    vocabulary_path: Path | None
    vocabulary_sha256: str | None
    normalized: bool              # rows were divided by their sums (--normalize or components_)
    max_row_sum_error: float      # |row sum − 1| before the exact renormalisation
    n_zero_columns: int           # words with probability 0 under every topic (never scored)
    column_words: np.ndarray | None = None   # the words in the model's own column order (gensim ids)
    library: str | None = None    # "gensim" / "tomotopy" for a saved library model
    learner: str | None = None    # the learner that trains like it
    settings: dict | None = None  # that learner's parameters, recovered from the saved model
    notes: list | None = None     # what the reader had to assume about those settings
    learners: tuple | None = None  # the learners the settings apply to (default: ``learner`` alone)
    settings_record: dict | None = None  # what was read from the file, used and not (audit.json)
    verbatim: list | None = None  # where the saved model holds training text verbatim (said first by the audit)

    @property
    def k(self) -> int:
        return self.phi.shape[0]


def load_user_model(phi_path, vocabulary_path=None, trust_pickle: bool = False, normalize: bool = False,
                    tolerance: float = DEFAULT_ROW_SUM_TOLERANCE) -> UserModel:
    """Load and validate Φ and its vocabulary; columns sorted by word."""
    phi_path = Path(phi_path)
    if not 0 < tolerance < float("inf"):  # inf turned the row-sum check off: any non-negative matrix was Φ
        raise UserError(f"the row-sum tolerance must be a positive finite number (got {tolerance})")
    fmt = phi_format(phi_path)
    if fmt in ("tomotopy", "gensim"):
        return _load_library_model(phi_path, fmt, vocabulary_path, trust_pickle, tolerance)
    if fmt in ("bertopic", "bertopic-pickle"):
        return _load_bertopic(phi_path, fmt, vocabulary_path, trust_pickle, tolerance)
    words = read_vocabulary(Path(vocabulary_path)) if vocabulary_path is not None else None
    phi, header, by_nature = read_phi(phi_path, trust_pickle=trust_pickle)
    if words is None:
        if header is None or any(is_number(w) or not w for w in header):
            raise UserError(
                f"{phi_path}: no vocabulary given; pass --vocabulary (a .txt file with one word per line, in "
                "Φ's column order) — only a CSV whose header line names the words needs none"
            )
        words = header
        seen: dict[str, int] = {}
        for i, word in enumerate(words):
            if word in seen:
                raise UserError(f"{phi_path}, line 1: the header names {str(word)!r} twice (columns {seen[word] + 1} "
                                f"and {i + 1}); vocabulary words must be distinct")
            seen[word] = i
    elif header is not None and len(header) == len(words) and header != words:
        j = next(i for i, (a, b) in enumerate(zip(header, words)) if a != b)
        raise UserError(
            f"{phi_path}, line 1: the CSV header names column {j + 1} {str(header[j])!r} but {vocabulary_path} "
            f"gives {str(words[j])!r}; the vocabulary must list Φ's columns in order (or drop the header)"
        )
    phi, error = validate_phi(phi, phi_path, len(words), normalize or by_nature, tolerance,
                              Path(vocabulary_path) if vocabulary_path is not None else None)
    vocab = np.array(words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    sklearn = _sklearn_settings(phi_path, phi.shape[0]) if phi_format(phi_path) == "pickle" and by_nature else {}
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]),
        vocabulary=vocab[order],
        phi_path=phi_path,
        phi_sha256=file_sha256(phi_path),
        phi_format=phi_format(phi_path),
        vocabulary_path=Path(vocabulary_path) if vocabulary_path is not None else None,
        vocabulary_sha256=file_sha256(Path(vocabulary_path)) if vocabulary_path is not None else None,
        normalized=bool(normalize or by_nature),
        max_row_sum_error=error,
        n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)),
        column_words=vocab,
        **sklearn,
    )


def _sklearn_settings(path: Path, k: int) -> dict:
    """A saved scikit-learn LDA's training settings as UserModel fields, read from the file's bytes without
    unpickling (:mod:`topicaudit.inputs.sklearn_model`); a note, and no settings, when they cannot be read."""
    found, why = read_settings(read_user_file(path, "Φ file"))
    if found is None or not found.is_lda:
        what = why or f"it holds a {found.module}.{found.name}"
        return {"library": "scikit-learn", "notes": [
            f"{path}: the scikit-learn model's settings could not be read without unpickling ({what}); the shadows "
            "use the learner's defaults: give your settings with --param"]}
    learner, params, notes, record = shadow_settings(found, k)
    return {"library": "scikit-learn", "learner": learner, "settings": params, "notes": notes,
            "learners": ("sklearn-lda",) if learner == "sklearn-lda" else ("lda", "sklearn-lda"),
            "settings_record": record}


def _load_library_model(path: Path, fmt: str, vocabulary_path, trust_pickle: bool, tolerance: float) -> UserModel:
    """A saved tomotopy or gensim model: Φ, words and settings all come from the model."""

    if vocabulary_path is not None:
        raise UserError(f"{path}: a saved {fmt} model carries its own vocabulary; drop --vocabulary "
                        f"({vocabulary_path})")
    read_user_file(path, "model file")  # clear messages for unreadable files before the library sees it
    if fmt == "gensim" and not trust_pickle:
        raise refuse_gensim(path)
    saved = load_tomotopy(path) if fmt == "tomotopy" else load_gensim(path)
    phi, error = validate_phi(saved.phi, path, len(saved.words), True, tolerance, None)
    vocab = np.array(saved.words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    settings = dict(saved.settings)
    if isinstance(settings.get("eta"), list) and len(settings["eta"]) == vocab.size:
        settings["eta"] = [settings["eta"][j] for j in order]  # per-word prior follows the sorted columns
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]), vocabulary=vocab[order], phi_path=path,
        phi_sha256=file_sha256(path), phi_format=fmt, vocabulary_path=None, vocabulary_sha256=None,
        normalized=True, max_row_sum_error=error, n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)),
        column_words=vocab, library=saved.library, learner=saved.learner, settings=settings, notes=saved.notes,
    )


def _load_bertopic(path: Path, fmt: str, vocabulary_path, trust_pickle: bool, tolerance: float) -> UserModel:
    """A saved BERTopic model: Φ (the c-TF-IDF rows normalised), its words and the shadows' settings."""
    if vocabulary_path is not None:
        raise UserError(f"{path}: a saved BERTopic model carries its own vocabulary; drop --vocabulary "
                        f"({vocabulary_path})")
    if fmt == "bertopic-pickle":
        read_user_file(path, "model file")
        if not trust_pickle:
            held = pickle_holds_verbatim(path)
            also = (f" The file also holds {', '.join(held)}: training documents verbatim, readable by anyone who "
                    "loads it." if held else "")
            raise UserError(
                f"{path}: a BERTopic model saved with save() (serialization='pickle', its default), which is a "
                f"pickle: loading it runs any code its author put in it.{also} Pass --trust-pickle only for a model "
                "you saved yourself or fully trust; otherwise save it in BERTopic's safe format: "
                "model.save(path, serialization='safetensors', save_ctfidf=True)")
        saved: BERTopicModel = read_bertopic_pickle(path)
        digest = file_sha256(path)
    else:
        saved = read_bertopic_dir(path)
        digest = saved.digest
    phi, error = validate_phi(saved.phi, path, len(saved.words), True, tolerance, None)
    vocab = np.array(saved.words, dtype=str)
    order = np.argsort(vocab, kind="stable")
    return UserModel(
        phi=np.ascontiguousarray(phi[:, order]), vocabulary=vocab[order], phi_path=path, phi_sha256=digest,
        phi_format=fmt, vocabulary_path=None, vocabulary_sha256=None, normalized=True, max_row_sum_error=error,
        n_zero_columns=int(np.count_nonzero(phi.max(axis=0) == 0)), column_words=vocab, library="bertopic",
        learner="bertopic", settings=dict(saved.settings), notes=list(saved.notes), verbatim=list(saved.verbatim),
        settings_record=_bertopic_record(saved) if fmt == "bertopic" else None,
    )


def _bertopic_record(saved: BERTopicModel) -> dict:
    """audit.json's ``learner.model_settings`` for a BERTopic directory, shaped like a scikit-learn model's."""
    read = {**saved.settings, "embedding_model": saved.embedding_model, "outlier_topic": saved.record["outlier_topic"],
            "topics": len(saved.topic_ids), "training_documents": saved.n_documents}
    return {"estimator": "bertopic.BERTopic (safetensors directory)", "read_without_unpickling": read,
            "used": sorted(saved.settings),
            "not_used": {"embedding_model": "the shadows embed offline with TF-IDF + truncated SVD (docs/bertopic.md)",
                         "outlier_topic": "kept as a row of Φ; the shadows keep theirs (and it makes clustering hdbscan)",
                         "topics": "the shadows' k (with HDBSCAN a cap: twice it)",
                         "training_documents": "information only"},
            "details": saved.record}
