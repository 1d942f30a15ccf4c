"""What is audited: learners, DP mechanisms, vocabulary steps, and the guarantees they claim.

``build_target`` (``topicaudit.targets.registry``) builds a release pipeline by
name from a configuration. The registry is loaded on first use: a Ray worker
unpickling one learner imports that learner's module only, not the registry,
the accountants or dp-accounting.
"""
from __future__ import annotations

import importlib

from topicaudit.targets.base import NO_GUARANTEE, Adjacency, Basis, Guarantee, Release, Target

REGISTRY = ("LEARNERS", "VOCABULARY_STEPS", "build_learner", "build_target", "configured_target", "default_vocabulary",
            "learner_class", "has_plugin", "learner_settings", "shadow_pipeline", "sources", "vocabulary_of")
__all__ = ["Adjacency", "Basis", "Guarantee", "NO_GUARANTEE", "Release", "Target", *REGISTRY]


def __getattr__(name: str):
    if name in REGISTRY:
        return getattr(importlib.import_module("topicaudit.targets.registry"), name)
    raise AttributeError(f"module 'topicaudit.targets' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *REGISTRY})
