"""Saved BERTopic models: Φ from the class-based TF-IDF matrix, read without BERTopic and without pickle.

BERTopic's safe format (``model.save(dir, serialization="safetensors", save_ctfidf=True)``)
is a directory:

``ctfidf.safetensors``
    the topic × word c-TF-IDF matrix as a CSR matrix (tensors ``indptr``,
    ``indices``, ``data``, ``shape``) and the idf weights (``diag``).
``ctfidf_config.json``
    the ``CountVectorizer``'s parameters and vocabulary (``vectorizer_model.vocab``:
    word → column) and the ``ClassTfidfTransformer``'s (``bm25_weighting``,
    ``reduce_frequent_words``).
``topics.json``
    topic sizes, top words per topic (``topic_representations``), labels,
    ``_outliers`` (1 when topic -1, HDBSCAN's outliers, exists) and one topic
    number per training document (``topics``).
``config.json``
    BERTopic's constructor settings (``min_topic_size``, ``nr_topics``, …) and,
    when the model was saved with ``save_embedding_model="name"``, the
    embedding model's name.
``topic_embeddings.safetensors``
    each topic's mean document embedding (not used for Φ; its header is checked).

safetensors is an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the raw little-endian
buffers. :func:`read_safetensors` parses it here (no ``safetensors``
package, no torch): the header's length, every dtype, shape and range are
checked against the file before any array is built, and the ranges must tile
the buffer exactly (what the reference implementation requires).

**Φ** is the c-TF-IDF matrix with each row divided by its sum: row i is the
topic's word weights (class term frequency × idf) made a distribution. BERTopic's
rows are its topics in id order, so with outliers row 0 is topic -1.
**The outlier topic is kept** as a row of Φ: it is in the released file, it
is built from the outlier documents' words exactly as the other topics are
from theirs (often half of the training set with HDBSCAN), and an adversary
reads every row. Dropping it would hide the documents most likely to stand
out. Negative weights (BM25 weighting's idf is negative for a word more
frequent than the average topic's length) count as 0, in Φ and in the
shadows alike. A row that is all zeros (a topic none of whose words survived the
vectoriser) is dropped, which changes no document's ζ (a maximum over
mixtures of the rows never puts weight on a topic that gives every word
probability 0).

A pickled BERTopic model (``model.save(path)``, BERTopic's default, a joblib
pickle of the whole object) is recognised by its first bytes and refused
unless ``--trust-pickle``; with it, it is unpickled by joblib (BERTopic must
then be importable) and read through the same path. The pickle holds
``representative_docs_``: three training documents per topic, verbatim.
Any saved model that holds training text verbatim is reported first, naming
the field (:attr:`BERTopicModel.verbatim`).

Longer than 400 lines because it is one format family: BERTopic's saved directory (safetensors and
its JSON files) and its pickles, read without BERTopic and checked alike.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError
from topicaudit.inputs.files import DuplicateKey, open_regular, read_user_file, strict_json
from topicaudit.inputs.sizes import ARRAY_COPIES, check_bytes

# safetensors dtypes numpy holds as they are (BF16 and the F8 kinds have no numpy dtype: refused by name).
SAFETENSORS_DTYPES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "U16": "<u2", "I16": "<i2", "U32": "<u4",
                      "I32": "<i4", "U64": "<u8", "I64": "<i8", "F16": "<f2", "F32": "<f4", "F64": "<f8"}
MAX_HEADER_BYTES = 100 * 2**20      # the reference implementation's limit
TOPICS, CONFIG, CTFIDF, CTFIDF_CONFIG, EMBEDDINGS = ("topics.json", "config.json", "ctfidf.safetensors",
                                                     "ctfidf_config.json", "topic_embeddings.safetensors")
_RESAVE = ("save the model again with model.save(path, serialization='safetensors', save_ctfidf=True) "
           "(BERTopic ≥ 0.16)")
# Keys under which a BERTopic save may hold training documents verbatim (the pickle's attribute, and a
# topics.json written by a version or fork that keeps them).
VERBATIM_KEYS = ("representative_docs_", "representative_docs")
_PICKLE_MARKERS = (b"bertopic._bertopic", b"bertopic\n_bertopic")


def _damaged(path: Path, problem: str) -> UserError:
    return UserError(f"{path}: {problem}; the file is damaged or not BERTopic's: {_RESAVE}")


# -- safetensors ---------------------------------------------------------------------------
def read_safetensors(path: Path, raw: bytes | None = None) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a read-only NumPy array (little-endian, no copy of the buffer).

    Checked before any array is built: the header length against the file, the
    header as a JSON object of ``{"dtype", "shape", "data_offsets"}`` entries
    (plus an optional ``__metadata__`` of strings), each dtype known, each shape
    a list of whole numbers ≥ 0 whose size times the dtype's width is exactly
    its byte range, and the ranges tiling the data buffer without gap or
    overlap. Any failure is one UserError naming the file and the problem.
    """
    path = Path(path)
    if raw is None:
        raw = read_user_file(path, "safetensors file")
    if len(raw) < 8:
        raise _damaged(path, f"only {len(raw)} bytes, too short for a safetensors file (it starts with an 8-byte "
                             "header length)")
    n = int.from_bytes(raw[:8], "little")
    if n > MAX_HEADER_BYTES or n > len(raw) - 8:
        raise _damaged(path, f"its safetensors header declares {n} bytes of JSON but the file holds "
                             f"{len(raw) - 8} after the length" + (" (the limit is 100 MiB)" if n > MAX_HEADER_BYTES
                                                                   else ""))
    try:
        header = strict_json(raw[8:8 + n].decode("utf-8"))
    except DuplicateKey as error:
        raise _damaged(path, f"its safetensors header: {error}") from None
    except ValueError as error:  # not UTF-8, not JSON, or an integer of over 4,300 digits (it was exit 3)
        raise _damaged(path, f"its safetensors header is not UTF-8 JSON ({error})") from None
    if not isinstance(header, dict):
        raise _damaged(path, f"its safetensors header is a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise _damaged(path, "its safetensors __metadata__ is not an object of strings")
    buffer = memoryview(raw)[8 + n:]
    spans = []
    for name, entry in header.items():
        where = f"tensor {name!r}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise _damaged(path, f"{where} is not described by dtype, shape and data_offsets")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in SAFETENSORS_DTYPES:
            raise _damaged(path, f"{where} has dtype {str(dtype)[:20]!r}, which topicaudit does not read "
                                 f"(it reads {', '.join(SAFETENSORS_DTYPES)})")
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape)):
            raise _damaged(path, f"{where} has shape {str(shape)[:40]}, not a list of whole numbers ≥ 0")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= len(buffer)):
            raise _damaged(path, f"{where} has data_offsets {str(offsets)[:40]}, outside the file's "
                                 f"{len(buffer)} bytes of data")
        width = np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
        if math.prod(shape) * width != offsets[1] - offsets[0]:
            raise _damaged(path, f"{where} has shape {shape} of {dtype} ({math.prod(shape) * width} bytes) but "
                                 f"data_offsets span {offsets[1] - offsets[0]} bytes")
        spans.append((offsets[0], offsets[1], name, dtype, shape))
    spans.sort(key=lambda s: (s[0], s[1]))
    end = 0
    for begin, stop, name, _, _ in spans:
        if begin != end:
            raise _damaged(path, f"tensor {name!r} starts at byte {begin} of the data where {end} was expected "
                                 "(the tensors overlap or leave a gap)")
        end = stop
    if end != len(buffer):
        raise _damaged(path, f"the tensors end at byte {end} of the data but the file holds {len(buffer)}")
    tensors = {}
    for begin, stop, name, dtype, shape in spans:
        values = np.frombuffer(buffer, dtype=SAFETENSORS_DTYPES[dtype], count=math.prod(shape), offset=begin)
        tensors[name] = values.reshape(shape)
    return tensors


# -- the saved model -------------------------------------------------------------------------
@dataclass
class BERTopicModel:
    """What a saved BERTopic model gives the audit."""

    phi: np.ndarray                  # k × V float64, rows on the simplex (the c-TF-IDF rows normalised)
    words: list[str]                 # column j's word
    topic_ids: list[int]             # row i's BERTopic topic number (-1: the outliers)
    sizes: list[int | None]          # row i's number of training documents (topics.json), None if not given
    n_documents: int | None          # training documents (the length of topics.json's "topics")
    settings: dict[str, Any]         # the shadows' learner parameters read from the files
    notes: list[str] = field(default_factory=list)
    verbatim: list[str] = field(default_factory=list)   # where the save holds training text verbatim
    digest: str = ""                 # SHA-256 over the files Φ and the settings come from
    embedding_model: str | None = None
    record: dict[str, Any] = field(default_factory=dict)  # what was read, for audit.json


def is_bertopic_dir(path: Path) -> bool:
    return Path(path).is_dir()


def is_bertopic_pickle(head: bytes) -> bool:
    """A joblib/pickle dump of a BERTopic object, from its first bytes (never unpickled)."""
    return head[:1] == b"\x80" and any(marker in head for marker in _PICKLE_MARKERS)


def _json(path: Path, what: str, raws: dict[str, bytes] | None = None) -> Any:
    raw = read_user_file(path, what)
    if raws is not None:
        raws[path.name] = raw
    try:
        return strict_json(raw.decode("utf-8"))
    except DuplicateKey as error:
        raise _damaged(path, str(error)) from None
    except UnicodeDecodeError as error:
        raise _damaged(path, f"not UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise _damaged(path, f"invalid JSON at line {error.lineno}, column {error.colno} ({error.msg})") from None
    except ValueError as error:  # an integer of over 4,300 digits (Python's int_max_str_digits): it was exit 3
        raise _damaged(path, f"invalid JSON ({error})") from None


def _find_keys(obj: Any, keys: tuple[str, ...]) -> list[str]:
    """Every place (a.b.c) in a JSON value whose key is one of ``keys`` and whose value is not empty.

    Walked with a stack, not by recursion: a value nested nearly as deep as the decoder allows ran out of
    Python's recursion limit here (exit 3)."""
    found, stack = [], [(obj, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                place = f"{where}.{key}" if where else str(key)
                if key in keys and item not in (None, {}, [], ""):
                    found.append(place)
                stack.append((item, place))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value[:1000]))
    return sorted(found)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_bertopic_dir(path: Path) -> BERTopicModel:
    """A directory written by ``BERTopic.save(path, serialization="safetensors", save_ctfidf=True)``."""
    path = Path(path)
    missing = [name for name in (TOPICS, CONFIG) if not (path / name).exists()]
    if missing:
        raise UserError(f"{path}: a directory, but not a saved BERTopic model (no {' or '.join(missing)}); give "
                        "a BERTopic model saved with model.save(path, serialization='safetensors', "
                        "save_ctfidf=True), or a Φ file")
    if not (path / CTFIDF).exists() or not (path / CTFIDF_CONFIG).exists():
        raise UserError(
            f"{path}: the BERTopic model was saved without its c-TF-IDF matrix ({CTFIDF} and {CTFIDF_CONFIG} are "
            "missing; save_ctfidf=False is BERTopic's default), so only each topic's top words are in it and there "
            "is no Φ to audit; save it with model.save(path, serialization='safetensors', save_ctfidf=True)")
    raws: dict[str, bytes] = {}   # what was read, for the digest (never a second read of a file)
    topics = _json(path / TOPICS, "BERTopic topics file", raws)
    config = _json(path / CONFIG, "BERTopic config file", raws)
    ctfidf_config = _json(path / CTFIDF_CONFIG, "BERTopic c-TF-IDF config file", raws)
    if not isinstance(topics, dict):
        raise _damaged(path / TOPICS, "the top level is not a JSON object")
    if not isinstance(config, dict):
        raise _damaged(path / CONFIG, "the top level is not a JSON object")
    if not isinstance(ctfidf_config, dict):
        raise _damaged(path / CTFIDF_CONFIG, "the top level is not a JSON object")

    words = _vocabulary(path / CTFIDF_CONFIG, ctfidf_config)
    raws[CTFIDF] = read_user_file(path / CTFIDF, "BERTopic c-TF-IDF file")
    matrix = _ctfidf_matrix(path / CTFIDF, read_safetensors(path / CTFIDF, raws[CTFIDF]), len(words))
    topic_ids, sizes, outliers = _topic_rows(path / TOPICS, topics, matrix.shape[0])
    embedding_dim = None
    if (path / EMBEDDINGS).exists():
        embeddings = read_safetensors(path / EMBEDDINGS)
        table = embeddings.get("topic_embeddings")
        if table is None or table.ndim != 2:
            raise _damaged(path / EMBEDDINGS, "it holds no 2-D tensor 'topic_embeddings'")
        embedding_dim = int(table.shape[1])

    digest = hashlib.sha256()
    for name in (CTFIDF, CTFIDF_CONFIG, TOPICS, CONFIG):
        digest.update(name.encode() + b"\0" + hashlib.sha256(raws[name]).digest())
    model = _model(path, matrix, words, topic_ids, sizes, outliers, topics, config, ctfidf_config)
    model.digest = digest.hexdigest()
    model.record["topic_embeddings_dimensions"] = embedding_dim
    model.verbatim = [f"{TOPICS}: {place}" for place in _find_keys(topics, VERBATIM_KEYS)] + \
                     [f"{CONFIG}: {place}" for place in _find_keys(config, VERBATIM_KEYS)]
    return model


def _vocabulary(path: Path, ctfidf_config: dict) -> list[str]:
    vectorizer = ctfidf_config.get("vectorizer_model")
    vocab = vectorizer.get("vocab") if isinstance(vectorizer, dict) else None
    if not isinstance(vocab, dict) or not vocab:
        raise _damaged(path, "it has no vectorizer_model.vocab (the CountVectorizer's word → column mapping)")
    n = len(vocab)
    words: list[str | None] = [None] * n
    for word, index in vocab.items():
        if not word.strip():
            raise _damaged(path, f"an empty word maps to column {index}")
        if not _int(index) or not 0 <= index < n or words[index] is not None:
            raise _damaged(path, f"vectorizer_model.vocab maps {word!r} to {json.dumps(index)[:20]}; the {n} words "
                                 f"must map to the distinct columns 0..{n - 1}")
        words[index] = word
    return words  # type: ignore[return-value]


def _ctfidf_matrix(path: Path, tensors: dict[str, np.ndarray], n_words: int) -> sp.csr_matrix:
    """The c-TF-IDF CSR matrix, its structure checked (indptr, indices, values) before it is built."""
    needed = ("indptr", "indices", "data", "shape")
    absent = [name for name in needed if name not in tensors]
    if absent:
        raise _damaged(path, f"it has no tensor {', '.join(repr(a) for a in absent)} (BERTopic saves indptr, "
                             "indices, data, shape and diag)")
    indptr, indices, data, shape = (tensors[name] for name in needed)
    for name in ("indptr", "indices", "shape"):
        if tensors[name].dtype.kind not in "iu" or tensors[name].ndim != 1:
            raise _damaged(path, f"tensor {name!r} is {tensors[name].dtype} of shape {tensors[name].shape}, not a "
                                 "1-D integer array")
    if data.dtype.kind != "f" or data.ndim != 1:
        raise _damaged(path, f"tensor 'data' is {data.dtype} of shape {data.shape}, not a 1-D float array")
    if shape.size != 2:
        raise _damaged(path, f"tensor 'shape' holds {shape.size} numbers, not 2 (topics, words)")
    rows, cols = (int(s) for s in shape)
    if cols != n_words:
        raise _damaged(path, f"the c-TF-IDF matrix has {cols} columns but {CTFIDF_CONFIG}'s vocabulary has "
                             f"{n_words} words")
    if rows < 1:
        raise _damaged(path, "the c-TF-IDF matrix has no rows (topics)")
    if indptr.size != rows + 1:
        raise _damaged(path, f"tensor 'indptr' has {indptr.size} entries for {rows} rows (it needs rows + 1)")
    if int(indptr[0]) != 0 or int(indptr[-1]) != data.size or indices.size != data.size \
            or np.any(np.diff(indptr.astype(np.int64)) < 0):
        raise _damaged(path, f"the CSR structure does not hold together (indptr runs {int(indptr[0])}..{int(indptr[-1])}"
                             f", not increasing from 0 to the {data.size} values; {indices.size} column indices)")
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= cols):
        raise _damaged(path, f"a column index lies outside 0..{cols - 1}")
    if not np.all(np.isfinite(data)):
        raise _damaged(path, "the c-TF-IDF values include NaN or infinite numbers")
    check_bytes(ARRAY_COPIES * 8 * rows * cols, f"Φ from {path} ({rows} topics × {cols} words, float64)",
                "the file's shape may be damaged; save the model again, or free memory")
    matrix = sp.csr_matrix((data.astype(np.float64), indices.astype(np.int64), indptr.astype(np.int64)),
                           shape=(rows, cols))
    matrix.sum_duplicates()
    return matrix


def _topic_rows(path: Path, topics: dict, n_rows: int) -> tuple[list[int], list[int | None], int]:
    """Each c-TF-IDF row's topic number and size: BERTopic's rows are its topics in increasing id order."""
    outliers = topics.get("_outliers", 0)
    if outliers not in (0, 1) or isinstance(outliers, bool):
        raise _damaged(path, f"_outliers is {json.dumps(outliers)[:20]}, not 0 or 1")
    sizes = topics.get("topic_sizes")
    if not isinstance(sizes, dict) or not sizes:
        raise _damaged(path, "it has no topic_sizes (topic → number of documents)")
    by_id: dict[int, int] = {}
    for key, size in sizes.items():
        # BERTopic writes each id as str(int): "01", " 1" or "١" (an Arabic-Indic one) named topic 1 again, and
        # the last of them silently gave its size
        topic = int(key) if re.fullmatch(r"-1|0|[1-9][0-9]{0,17}", key) else None
        if topic is None:
            raise _damaged(path, f"topic_sizes has the key {key[:40]!r}, not a topic number (-1, 0, 1, … written "
                                 "as BERTopic writes them)")
        if not _int(size) or size < 0:
            raise _damaged(path, f"topic_sizes gives topic {key} the size {json.dumps(size)[:20]}, not a count")
        by_id[topic] = size
    ids = sorted(by_id)
    if len(ids) != n_rows:
        raise UserError(f"{path}: topic_sizes names {len(ids)} topics but {CTFIDF} has {n_rows} rows; the files are "
                        f"from different saves or the model was changed after fitting (merge_models, "
                        f"update_topics without refitting c-TF-IDF): {_RESAVE}")
    return ids, [by_id[t] for t in ids], int(outliers)


def _model(path: Path, matrix: sp.csr_matrix, words: list[str], topic_ids: list[int], sizes: list[int | None],
           outliers: int, topics: dict, config: dict, ctfidf_config: dict) -> BERTopicModel:
    """Φ and the shadows' settings from the files' contents (shared by the directory and the pickle)."""
    notes: list[str] = []
    dense = matrix.toarray()
    negative = int(np.count_nonzero(dense < 0))
    if negative:  # BM25 weighting gives a word more frequent than the mean topic length a negative idf
        notes.append(f"{negative} c-TF-IDF value(s) are negative (bm25_weighting gives words more frequent than the "
                     "average topic's length a negative idf); Φ counts them as 0, as the shadows do")
        dense = np.maximum(dense, 0.0)
    sums = dense.sum(axis=1)
    empty = np.flatnonzero(sums <= 0)
    keep = np.flatnonzero(sums > 0)
    if keep.size < 2:
        raise UserError(f"{path}: the c-TF-IDF matrix has {keep.size} topic(s) with any word weight; a topic model "
                        "to audit needs at least 2")
    if empty.size:
        notes.append(f"topic(s) {', '.join(str(topic_ids[i]) for i in empty)} have no word weight in the c-TF-IDF "
                     "matrix and are left out of Φ (no document's ζ changes)")
    phi = dense[keep] / sums[keep, None]
    kept_ids = [topic_ids[i] for i in keep]
    kept_sizes = [sizes[i] for i in keep]
    if -1 in kept_ids:
        n_out = kept_sizes[kept_ids.index(-1)]
        notes.append(f"topic -1 (BERTopic's outliers{f', {n_out} training documents' if n_out is not None else ''}) "
                     "is kept as a row of Φ: it is in the released matrix and built from its documents' words like "
                     "any topic (docs/bertopic.md)")
    assignments = topics.get("topics")
    n_documents = len(assignments) if isinstance(assignments, list) else None
    if n_documents:
        notes.append(f"{TOPICS} holds one topic number per training document (its 'topics' field, {n_documents} "
                     "entries in training order): it gives away the training set's size, and each document's topic "
                     "to anyone who knows the documents' order")
    settings, more = _settings(config, ctfidf_config, outliers, len(kept_ids))
    notes.extend(more)
    vectorizer = ctfidf_config.get("vectorizer_model") or {}
    params = vectorizer.get("params") if isinstance(vectorizer, dict) else None
    ngrams = [w for w in words if " " in w]
    if ngrams:
        notes.append(f"{len(ngrams)} of the model's {len(words)} vocabulary entries are n-grams (e.g. {ngrams[0]!r}); "
                     "topicaudit counts documents as single words, so those columns never match and the shadows "
                     "learn no n-grams")
    embedding = config.get("embedding_model") if isinstance(config.get("embedding_model"), str) else None
    record = {"topics": kept_ids, "topic_sizes": kept_sizes, "outlier_topic": bool(outliers),
              "n_training_documents": n_documents, "embedding_model": embedding,
              "vectorizer": {key: params.get(key) for key in ("min_df", "max_df", "max_features", "ngram_range",
                                                              "lowercase", "stop_words")}
              if isinstance(params, dict) else None,
              "ctfidf": ctfidf_config.get("ctfidf_model")}
    return BERTopicModel(phi=phi, words=words, topic_ids=kept_ids, sizes=kept_sizes, n_documents=n_documents,
                         settings=settings, notes=notes, embedding_model=embedding, record=record)


def _settings(config: dict, ctfidf_config: dict, outliers: int, k: int) -> tuple[dict[str, Any], list[str]]:
    """The ``bertopic`` learner's parameters a saved model gives, and what had to be assumed."""
    settings: dict[str, Any] = {}
    notes: list[str] = []
    size = config.get("min_topic_size")
    if isinstance(size, int) and not isinstance(size, bool) and size >= 2:
        settings["min_topic_size"] = size
    settings["clustering"] = "hdbscan" if outliers else "kmeans"
    if not outliers:
        notes.append("the model has no outlier topic (-1), so it was not clustered by HDBSCAN or HDBSCAN left no "
                     f"outliers; the shadows cluster with k-means into its {k} topics (--param clustering=hdbscan to "
                     "change)")
    nr_topics = config.get("nr_topics")
    if nr_topics is not None:
        notes.append(f"the model reduced its topics (nr_topics={json.dumps(nr_topics)[:20]}); the shadows merge "
                     f"theirs down to the model's {k} topics the same way when they find more")
    model = ctfidf_config.get("ctfidf_model")
    if isinstance(model, dict):
        for key in ("bm25_weighting", "reduce_frequent_words"):
            if isinstance(model.get(key), bool):
                settings[key] = model[key]
    vectorizer = ctfidf_config.get("vectorizer_model")
    params = vectorizer.get("params") if isinstance(vectorizer, dict) else None
    if isinstance(params, dict):
        for key in ("min_df", "max_df"):
            value = params.get(key)
            if (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
                    isinstance(value, float) and 0.0 <= value <= 1.0):
                settings[key] = value
        if params.get("max_features") is not None:
            notes.append(f"the model's vectoriser kept its {params['max_features']} most frequent words "
                         "(max_features); the shadows keep every word of its vocabulary they see")
    embedding = config.get("embedding_model")
    what = (f"the embedding model {embedding!r}" if isinstance(embedding, str)
            else "an embedding model the save does not name (BERTopic records it only when saved with "
                 "save_embedding_model='name'; its default is the sentence-transformer all-MiniLM-L6-v2)")
    notes.append(
        f"the model embedded its documents with {what}; the shadows embed theirs offline with TF-IDF + truncated SVD "
        "(100 dimensions), reduce to 5 with PCA instead of UMAP, and cluster them themselves. Their c-TF-IDF is "
        "BERTopic's, but their topics follow other clusters than your model's, so the exposure figure describes "
        "models trained with this light pipeline, and the ranking compares your Φ with them: a mismatch usually "
        "weakens the attack, so a low figure is weaker evidence of safety (docs/bertopic.md)")
    return settings, notes


# -- pickles ---------------------------------------------------------------------------------
def pickle_holds_verbatim(path: Path) -> list[str]:
    """The verbatim-text attributes a pickled BERTopic model names, found by searching its bytes (nothing runs)."""
    found: set[str] = set()
    tail, needles = b"", [key.encode() for key in VERBATIM_KEYS[:1]]
    with open_regular(path, "model file") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            chunk = tail + block
            found.update(needle.decode() for needle in needles if needle in chunk)
            tail = chunk[-64:]
    return sorted(found)


def read_bertopic_pickle(path: Path) -> BERTopicModel:
    """A pickled BERTopic model (unpickled by joblib: call only with --trust-pickle)."""
    try:
        import joblib  # a trusted pickle only (--trust-pickle): joblib unpickles it
        import bertopic  # noqa: F401 - the pickle's classes live there
    except ImportError:
        raise UserError(f"{path}: a pickled BERTopic model; unpickling it needs the bertopic package, which is not "
                        "installed (pip install --no-deps bertopic, see docs/bertopic.md), or save it in BERTopic's "
                        "safe format: model.save(path, serialization='safetensors', save_ctfidf=True)") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = joblib.load(path)
    except Exception as error:  # noqa: BLE001 - any unpickling failure means the file is not a loadable model
        raise UserError(f"{path}: cannot unpickle the BERTopic model ({type(error).__name__}: {error}); {_RESAVE}") \
            from None
    matrix = getattr(obj, "c_tf_idf_", None)
    vectorizer = getattr(obj, "vectorizer_model", None)
    vocab = getattr(vectorizer, "vocabulary_", None)
    if not sp.issparse(matrix) or not isinstance(vocab, dict) or vectorizer is None:
        raise UserError(f"{path}: holds a {type(obj).__name__} without a fitted c-TF-IDF matrix and vocabulary; "
                        "give a fitted BERTopic model")
    words = _vocabulary(path, {"vectorizer_model": {"vocab": {str(w): int(i) for w, i in vocab.items()}}})
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    if matrix.shape[1] != len(words):
        raise _damaged(path, f"the c-TF-IDF matrix has {matrix.shape[1]} columns for {len(words)} words")
    topics = {"topic_sizes": {str(t): int(s) for t, s in dict(obj.topic_sizes_ or {}).items()},
              "_outliers": int(getattr(obj, "_outliers", 0)),
              "topics": [int(t) for t in (obj.topics_ or [])]}
    topic_ids, sizes, outliers = _topic_rows(path, topics, matrix.shape[0])
    params = {key: value for key, value in obj.get_params().items() if "model" not in key}
    ctfidf = getattr(obj, "ctfidf_model", None)
    ctfidf_config = {"ctfidf_model": {"bm25_weighting": bool(getattr(ctfidf, "bm25_weighting", False)),
                                      "reduce_frequent_words": bool(getattr(ctfidf, "reduce_frequent_words", False))},
                     "vectorizer_model": {"params": {key: value for key, value in vectorizer.get_params().items()
                                                     if key in ("min_df", "max_df", "max_features", "ngram_range",
                                                                "lowercase", "stop_words")}}}
    model = _model(path, matrix, words, topic_ids, sizes, outliers, topics, params, ctfidf_config)
    docs = getattr(obj, "representative_docs_", None)
    if docs:
        n = sum(len(v) for v in docs.values()) if isinstance(docs, dict) else len(docs)
        model.verbatim.append(f"representative_docs_ ({n} training documents, verbatim)")
    return model
