"""The files of an ``audit`` of a released model, small enough for any test: a saved Φ over 8 words, its vocabulary,
and candidate and reference texts drawn from those words (the first ``candidates`` of ``documents``)."""
from __future__ import annotations

import json

import numpy as np


def audit_command(folder, documents: int, candidates: int) -> list:
    """``topicaudit audit``'s arguments over files written into ``folder``, without --shadows or --output."""
    words = [f"w{i}" for i in range(8)]
    rng = np.random.default_rng(0)
    np.save(folder / "phi.npy", rng.dirichlet(np.ones(8), size=3))
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    docs = [" ".join(rng.choice(words, 6)) for _ in range(documents)]
    (folder / "cand.json").write_text(json.dumps({"text": docs[:candidates]}))
    (folder / "ref.json").write_text(json.dumps({"text": docs[candidates:]}))
    return ["audit", folder / "phi.npy", "--vocabulary", folder / "vocab.txt", "--candidates", folder / "cand.json",
            "--reference", folder / "ref.json", "--no-preprocess"]
