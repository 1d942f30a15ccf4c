"""Deliberately broken versions of DPEMTopics, for testing that a privacy audit catches them. Test only: each
claims and records the correct learner's guarantee while its mechanism is not that one. Never release a model
trained with them."""
from dpem_topics.learner import DPEMTopics


class HalvedNoise(DPEMTopics):
    """Adds half the noise its claim was computed for."""

    def _noise(self, rng, shape):
        return super()._noise(rng, shape) / 2.0


class SkippedCap(DPEMTopics):
    """Never cuts a document to max_doc_tokens, while the noise is calibrated to that cap."""

    def _cap(self, X, rng):
        return X


class RecordMismatch(DPEMTopics):
    """Records the noisy counts but builds the model from the counts before the noise."""

    def _release(self, counts, rng, record, elog_beta):
        super()._release(counts, rng, record, elog_beta)
        return counts
