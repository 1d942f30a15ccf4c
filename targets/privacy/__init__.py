"""What is claimed: guarantees, the mechanisms as dp-accounting events, and the accountants.

``guarantee`` (Adjacency, Basis, Guarantee), ``events`` (every mechanism as a
dp-accounting event), ``composition`` (a pipeline's guarantee from the
accountant) and ``dp_svi_accounting`` (the accountants of DP-SVI's
Poisson-subsampled Gaussian). Nothing here imports a learner.

``events`` and ``dp_svi_accounting`` are also this package's attributes,
loaded on first use: they import dp-accounting (about 1 CPU-s, with scipy.stats
and scipy.signal), which a Ray worker that only fits never needs. A learner or
step module imports ``topicaudit.targets.privacy`` and reads ``privacy.events.…``
inside the methods the driver runs (its constructor, ``guarantee()``), so
unpickling it in a worker does not load dp-accounting
(tests/test_worker_imports.py).
"""
from __future__ import annotations

import importlib

LAZY = ("events", "dp_svi_accounting")


def __getattr__(name: str):
    if name in LAZY:
        return importlib.import_module(f"topicaudit.targets.privacy.{name}")
    raise AttributeError(f"module 'topicaudit.targets.privacy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *LAZY})
