"""Differentially private variational EM for topic models."""
from dpem_topics.learner import DPEMTopics

__all__ = ["DPEMTopics"]
