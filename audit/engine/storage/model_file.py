"""What a model file (models/*.npz) keeps of a release, and how it is read back: one builder for writing a model
and for comparing a fit with a saved one (``engine.replay``)."""
from __future__ import annotations

import json

import numpy as np

from topicaudit.targets.base import Release
from topicaudit.targets.mechanisms import LaplaceNoise, Transcript, mechanism_from_json

# A saved model standing for none (``RunDirectory.saved_release``): no release's arrays are these.
DAMAGED: tuple[dict[str, np.ndarray], bool] = ({}, False)


def compared_arrays(arrays) -> dict[str, np.ndarray]:
    """What two fits of one seed must share (``engine.replay``): Φ, its vocabulary, the mechanism's transcript and of
    the learner's ``info`` the privacy monitor the results report (XIX-zz Z6); not the rest of ``info``, which may
    hold what the fit measured (its seconds: XIX-zx X6)."""
    kept = {name: arrays[name] for name in arrays if name in ("phi", "vocabulary") or name.startswith("transcript.")}
    if "info" in arrays:
        try:
            info = json.loads(str(arrays["info"]))
        except ValueError:
            info = {"monitor": str(arrays["info"])}  # no JSON: compared whole
        if isinstance(info, dict) and "monitor" in info:
            kept["info.monitor"] = np.array(json.dumps(info["monitor"], sort_keys=True, default=str))
    return kept


def model_arrays(release: Release) -> dict[str, np.ndarray]:
    """What a model file keeps of a release: Φ as float32, its vocabulary, the learner's ``info`` (as a JSON
    string) and its mechanism transcript."""
    arrays = {"phi": release.phi.astype(np.float32), "vocabulary": release.vocabulary.astype(np.int64)}
    if release.info:
        arrays["info"] = np.array(json.dumps(release.info, sort_keys=True))
    if release.transcript is not None:
        arrays.update(transcript_arrays(release.transcript))
    return arrays


def transcript_arrays(transcript: Transcript) -> dict[str, np.ndarray]:
    """A mechanism transcript as model-file entries (``transcript.*``), JSON for its constants."""
    return {"transcript.kind": np.str_(transcript.kind),
            "transcript.columns": np.asarray(transcript.columns, dtype=np.int64),
            "transcript.parameters": np.str_(json.dumps(transcript.parameters, sort_keys=True)),
            **{f"transcript.array.{name}": values for name, values in transcript.arrays.items()}}


def transcript_from_arrays(z: dict[str, np.ndarray]) -> Transcript | None:
    """The transcript stored by ``transcript_arrays`` in a model file's arrays; None when it has none.

    Model files of earlier versions are read as today's: DP-CGS's single
    release (``noisy_counts``, k × columns) and HDP-LDA's (``releases``) are
    the stacked ``noisy_counts`` of a Laplace release, and DP-SVI's
    ``expected_log_beta`` gives each step's top topic.
    """
    if "transcript.kind" not in z:
        return None
    prefix = "transcript.array."
    arrays = {name[len(prefix):]: z[name] for name in z if name.startswith(prefix)}
    mechanism = mechanism_from_json(str(z["transcript.kind"]), json.loads(str(z["transcript.parameters"])))
    if "releases" in arrays:
        arrays["noisy_counts"] = arrays.pop("releases")
    if isinstance(mechanism, LaplaceNoise) and np.ndim(arrays.get("noisy_counts")) == 2:
        arrays["noisy_counts"] = arrays["noisy_counts"][None]
    if "expected_log_beta" in arrays and "top_topics" not in arrays:
        arrays["top_topics"] = np.asarray(arrays.pop("expected_log_beta")).argmax(axis=1)
    return Transcript(mechanism, z["transcript.columns"], arrays)
