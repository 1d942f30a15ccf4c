"""The child process that runs tomotopy's C++ loader on a model file (see :mod:`topicaudit.inputs.isolation`).

It answers with plain data only: Φ as float64 bytes, the words, the model's
type, its scalar settings, and the embedded settings pickle as raw bytes
(decoded by the parent with :func:`topicaudit.inputs.library_models.literal_pickle`,
never unpickled).
"""
from __future__ import annotations

from topicaudit.inputs.isolation import serve


def read(path: str) -> tuple[dict, bytes]:
    import numpy as np  # imported after the child's limits are set
    import tomotopy as tp

    # The C++ loader: returns the model and the embedded constructor-arguments
    # pickle as raw bytes (LDAModel.load would unpickle them; we do not).
    model, extra = tp.LDAModel._load(tp.LDAModel, path)
    header = {"type": type(model).__name__, "is_lda": type(model) is tp.LDAModel}
    if not header["is_lda"]:
        return header, b""
    words = [str(w) for w in model.used_vocabs]
    k = int(model.k)
    header.update(words=words, k=k, global_step=int(model.global_step))
    if not words or header["global_step"] == 0:
        return header, b""
    phi = np.array([model.get_topic_word_dist(t, normalize=True) for t in range(k)], dtype="<f8")
    header.update(
        alpha=[float(a) for a in np.atleast_1d(model.alpha)], eta=float(model.eta), tw=int(model.tw),
        burn_in=int(model.burn_in), optim_interval=int(model.optim_interval),
        extra=np.asarray(extra, dtype=np.uint8).tobytes().hex(), shape=list(phi.shape),
    )
    return header, phi.tobytes()


if __name__ == "__main__":
    serve(read)
