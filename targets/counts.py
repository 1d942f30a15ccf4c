"""The one check of a count matrix (documents × words), for learners, ζ, utility and corpus loaders.

It lives with the learners, the lowest layer that reads counts, so that every
higher layer (inputs, attacks) can use it too.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from topicaudit.errors import UserError


def check_counts(X, name: str = "X", *, whole: bool = True, n_columns: int | None = None,
                 columns_of: str = "the vocabulary", nonempty: bool = False) -> sp.csr_matrix:
    """X (dense or sparse) as float64 CSR in canonical form; refuses what is not a count matrix.

    Counts are finite and ≥ 0, and whole numbers unless ``whole`` is False
    (variational learners and ζ also take weights). ``name`` says where X came
    from in messages; ``n_columns`` is the width X must have, the size of
    ``columns_of``. Copies only when X is not already canonical float64 CSR.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
    else:
        try:
            array = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise UserError(f"{name}: counts are not numeric ({error})") from None
        if array.ndim != 2:
            raise UserError(f"{name}: counts must be a 2-D documents × words matrix, got {array.ndim}-D")
        X = sp.csr_matrix(array)
    if n_columns is not None and X.shape[1] != n_columns:
        raise UserError(f"{name}: the count matrix has {X.shape[1]} columns but {columns_of} has {n_columns} "
                        "words; they must match")
    if nonempty and (X.shape[0] == 0 or X.shape[1] == 0):
        raise UserError(f"{name} has shape {X.shape}; it needs at least one document and one word")
    if not X.has_canonical_format:
        X = X.copy()  # never reorder the caller's arrays
        X.sum_duplicates()  # also sorts the column indices
    data = X.data
    if not np.all(np.isfinite(data)):
        raise UserError(f"{name}: counts contain NaN or infinity; counts must be finite non-negative numbers")
    if data.size and data.min() < 0:
        raise UserError(f"{name}: counts contain negative values; counts must be non-negative")
    if whole and np.any(data != np.round(data)):
        raise UserError(f"{name}: counts contain fractions; counts must be non-negative integer counts (word "
                        "occurrences, not weights such as tf-idf)")
    return X
