"""What a DP mechanism releases, as types, and the recorder a learner hands its releases to.

The public face of ``topicaudit.targets.mechanisms`` (where the learners, which
sit below the engine, import it from); docs/adding-a-learner.md shows a
learner using it, and ``topicaudit.attacks.mechanism`` holds the scorers
registered against each class.
"""
from topicaudit.targets.mechanisms import (MECHANISMS, GaussianNoise, GeometricNoise, LaplaceNoise, Mechanism,
                                           RandomisedResponse, Recorder, SetUnion, Transcript, mechanism_from_json)

__all__ = ["GaussianNoise", "GeometricNoise", "LaplaceNoise", "MECHANISMS", "Mechanism", "RandomisedResponse",
           "Recorder", "SetUnion", "Transcript", "mechanism_from_json"]
