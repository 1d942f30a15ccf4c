"""Checks a run directory must pass before any verdict or report is read from it.

Two layers. The manifest (``topicaudit.engine.storage.manifest``) catches any change to
a file the run wrote (and, with an integrity key configured, any manifest not
written with that key: its MAC); it must list every evidence file present, and a run whose
own files say it kept one (``manifest_marks``) is refused without it, so
deleting or shrinking the manifest does not switch the check off. Only the
layout written before manifests existed is read without one, and the verdict
says it is unverified. The checks here hold even when the manifest is missing or
rewritten: every array a bound reads has the type and shape the run writes
(boolean coins and memberships, one finite-or-infinite score per candidate,
never NaN), the truth in scores.npz is the plan's, and canary scores are in
the canaries' order. Each failure is a UserError naming the file, never a
bound computed from damaged data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.bounds.verdict import THREAT_MODELS
from topicaudit.engine.storage import manifest
from topicaudit.engine.storage.check_result import HMAC, NONE, SHA256, UNVERIFIED, integrity_phrase
from topicaudit.engine.storage.bounded_read import array_names, read_arrays, read_json, read_run_toml
from topicaudit.errors import UserError
from topicaudit.inputs.files import present
from topicaudit.inputs.integrity_key import integrity_key
from topicaudit.targets.privacy.events import guarantee_from_json
from topicaudit.targets.privacy.guarantee import Adjacency

# The files a verdict or a report reads (models are checked as a resumed run loads them).
VERDICT_FILES = ["config.toml", "results.json", "plan.npz", "scores.npz", "statistics.npz", "canaries.npz",
                 "canary_scores.npz"]
_ALTERED = "the run directory was damaged or edited — rerun the audit into a new directory"


@dataclass(frozen=True)
class Protection:
    """What protected the run directory a verdict is read from (docs/run-directory.md#integrity).

    mode: ``hmac-sha256`` (the manifest's MAC verified with the configured integrity key, ``key_id``),
    ``sha256`` (its hashes verified, no key configured) or ``none`` (the pre-manifest layout, unverified).
    """

    mode: str
    key_id: str | None = None
    carries_mac: bool = False  # mode sha256: the manifest holds a MAC no configured key could check

    @property
    def unverified(self) -> str | None:
        return UNVERIFIED if self.mode == NONE else None

    def describe(self) -> str:
        """One phrase for a verdict line or a report: which mode protected the run, and its limit."""
        return integrity_phrase(self.mode, self.key_id) or UNVERIFIED


def verify_run_directory(run_dir: str | Path) -> Protection:
    """Every check below, on the files ``run_dir`` has; raises a UserError naming the first bad file.

    Returns what protected it: the manifest authenticated by the integrity key, verified by its hashes alone
    (no key configured), or nothing (the pre-manifest layout, read without a manifest only when no key is
    configured), for the verdict to say so.
    """
    run_dir = Path(run_dir)
    protection = _verify_manifest(run_dir)
    if present(run_dir / "results.json"):
        check_results(run_dir / "results.json")
    if present(run_dir / "scores.npz"):
        check_scores(run_dir)
    if present(run_dir / "canaries.npz"):
        check_canaries(run_dir)
    return protection


def evidence_files(run_dir: Path) -> list[str]:
    """The files present that a manifest must list: VERDICT_FILES and models/*.npz."""
    names = [name for name in VERDICT_FILES if present(run_dir / name)]
    models = run_dir / "models"
    if models.is_dir():
        names += sorted(f"models/{p.name}" for p in models.iterdir() if p.name.endswith(".npz"))
    return names


def _verify_manifest(run_dir: Path) -> Protection:
    return _verify_listed(run_dir, "run", VERDICT_FILES, evidence_files(run_dir))


def verify_audit_directory(path: str | Path, names: list[str]) -> Protection:
    """A `topicaudit audit` output directory's manifest, held as a run's is: the files ``names`` that are present
    must be listed and match their hashes, and the manifest may be missing only in the layout written before
    manifests existed (with no integrity key configured). Checking only the listed files' hashes had let an
    edited audit.json or scores.csv through once manifest.json was deleted or its entry dropped."""
    path = Path(path)
    return _verify_listed(path, "audit", names, [name for name in names if present(path / name)])


def _verify_listed(path: Path, what: str, names, must_be_listed: list[str]) -> Protection:
    """The directory's manifest (a missing one refused unless the pre-manifest layout, and then only with no key
    configured): every file of ``must_be_listed`` listed, every listed one of ``names`` present, each of
    ``names`` matching its hash (and, with a key, the MAC). ``what``: "run" or "audit", for the messages."""
    found = manifest.read(path)  # with a key: a missing or wrong MAC is refused here
    where = path / manifest.NAME
    if found is None:
        why = manifest_marks(path)
        if why is not None:
            raise UserError(f"{where} is missing, but {why}: this {what} was written by a version of topicaudit "
                            "that keeps a manifest, and without it none of its files can be verified (it was "
                            f"deleted, or the directory copied without it); {manifest.RERUN}")
        key = integrity_key()
        if key is not None:
            raise UserError(f"{where} is missing (the layout written before manifests existed), so this {what} "
                            f"cannot be authenticated, and an integrity key is configured ({key.source}); set "
                            f"{key.turn_off} to read it UNVERIFIED, or {manifest.RERUN}")
        return Protection(NONE)
    for name in must_be_listed:
        if name not in found.files:
            raise UserError(f"{path / name} is not listed in {where}: the manifest was edited or damaged (or the "
                            "file added), or the command writing it was stopped before it listed the file, so this "
                            f"file cannot be verified; rerun that same command to finish it, or {manifest.RERUN}")
    for name in names:
        if name in found.files and not present(path / name):
            raise UserError(f"{path / name} is listed in {where} but missing: the {what} directory was damaged; "
                            f"rerun the same command to rewrite it, or {manifest.RERUN}")
    manifest.verify(path, names)
    if found.authenticated:
        return Protection(HMAC, found.key_id, True)
    return Protection(SHA256, carries_mac=found.carries_mac)


def manifest_marks(run_dir: Path) -> str | None:
    """Why ``run_dir`` must have a manifest (the first of its files written by a version that keeps one), or
    None for the layout written before manifests existed."""
    results = run_dir / "results.json"
    if present(results) and manifest.MARK in read_json(results):
        return f"{results} records one"
    config = run_dir / "config.toml"
    if present(config):
        try:
            provenance = read_run_toml(config).get("provenance")
        except UserError:  # no regular file, too large, beyond the bounds of TOML topicaudit reads, or invalid
            return f"{config} is unreadable"
        if isinstance(provenance, dict) and manifest.MARK in provenance:
            return f"{config} records one"
    models = run_dir / "models"
    if models.is_dir():
        for model in sorted(models.glob("*.npz")):
            if "model" in array_names(model):
                # model files record their slot since the version that introduced the manifest
                return f"{model} records its slot"
    return None


def _refuse(path: Path, what: str) -> UserError:
    return UserError(f"{path}: {what}; {_ALTERED}")


def _vector(path: Path, arrays: dict[str, np.ndarray], name: str, kind: str, length: int | None = None) -> np.ndarray:
    """arrays[name], required 1-D of dtype kind 'b' (boolean), 'i' (integer) or 'f' (number, not NaN)."""
    if name not in arrays:
        raise _refuse(path, f"it lacks the array {name!r}")
    values = arrays[name]
    if values.ndim != 1:
        raise _refuse(path, f"{name!r} has shape {values.shape}, not one value per candidate")
    if length is not None and values.size != length:
        raise _refuse(path, f"{name!r} has {values.size} values, not {length}")
    if kind == "b" and values.dtype != np.bool_:
        raise _refuse(path, f"{name!r} must be true/false, not {values.dtype}")
    if kind == "i" and values.dtype.kind not in "iu":
        raise _refuse(path, f"{name!r} must hold integers, not {values.dtype}")
    if kind == "f":
        if values.dtype.kind not in "biuf":
            raise _refuse(path, f"{name!r} must hold numbers, not {values.dtype}")
        if values.dtype.kind == "f" and np.isnan(values).any():
            raise _refuse(path, f"{name!r} holds NaN (at position {int(np.flatnonzero(np.isnan(values))[0])})")
    return values


def check_scores(run_dir: Path) -> None:
    """scores.npz: one score per document and attack, and is_member equal to the plan's target membership."""
    path = Path(run_dir) / "scores.npz"
    arrays = read_arrays(path)
    truth = _vector(path, arrays, "is_member", "b")
    for name in arrays:
        if name != "is_member":
            _vector(path, arrays, name, "i" if name == "doc_index" else "f", truth.size)
    plan_path = Path(run_dir) / "plan.npz"
    if present(plan_path):
        target_in = _vector(plan_path, read_arrays(plan_path), "target_in", "b")
        if not np.array_equal(target_in, truth):
            raise _refuse(path, "is_member is not the target membership of plan.npz")


def check_canaries(run_dir: Path) -> None:
    """canaries.npz: boolean coins, unique integer ids; canary_scores.npz: the same ids in the same order."""
    path = Path(run_dir) / "canaries.npz"
    canaries = read_arrays(path)
    ids = _vector(path, canaries, "ids", "i")
    _vector(path, canaries, "coins", "b", ids.size)
    if np.unique(ids).size != ids.size:
        raise _refuse(path, "its canary ids repeat")
    kind = canaries.get("kind")
    if kind is None or kind.dtype.kind != "U" or kind.ndim != 0:
        raise _refuse(path, "'kind' must be the canaries' kind, a string")
    scores_path = Path(run_dir) / "canary_scores.npz"
    if not present(scores_path):
        return
    scores = read_arrays(scores_path)
    score_ids = _vector(scores_path, scores, "ids", "i", ids.size)
    if not np.array_equal(score_ids, ids):
        raise _refuse(scores_path, "its canary ids are not those of canaries.npz in the same order")
    for name in scores:
        if name != "ids":
            _vector(scores_path, scores, name, "f", ids.size)


def _number(value: Any, nullable: bool = True) -> bool:
    """A JSON number a float can hold (an integer of 400 digits overflowed float() in the bounds), not NaN."""
    if value is None:
        return nullable
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return not math.isnan(float(value))
    except OverflowError:
        return False


def check_results(path: Path) -> None:
    """results.json: the claim and the recorded bound settings a verdict reads are numbers."""
    results = read_json(path)
    target = results.get("target")
    if "target" in results and not isinstance(target, dict):  # null there was an AttributeError (exit 3)
        raise _refuse(path, f"'target' must be an object (got {_shown(target)})")
    if isinstance(target, dict) and "guarantee" in target and not isinstance(target["guarantee"], dict):
        raise _refuse(path, f"target.guarantee must be an object (got {_shown(target['guarantee'])})")
    guarantee = target.get("guarantee") if isinstance(target, dict) else None
    if isinstance(guarantee, dict):
        if "epsilon" in guarantee and not _number(guarantee["epsilon"]):
            raise _refuse(path, f"target.guarantee.epsilon must be a number or null (got {guarantee['epsilon']!r})")
        if "delta" in guarantee and not _number(guarantee["delta"], nullable=False):  # null: a TypeError (exit 3)
            raise _refuse(path, f"target.guarantee.delta must be a number (got {guarantee['delta']!r})")
        if guarantee.get("parameters") is not None and not isinstance(guarantee["parameters"], dict):
            raise _refuse(path, f"target.guarantee.parameters must be an object or null (got "
                                f"{_shown(guarantee['parameters'])})")
        adjacency = guarantee.get("adjacency")
        known = [a.value for a in Adjacency]
        if adjacency is not None and adjacency not in known:  # an unknown name was a ValueError (exit 3)
            raise _refuse(path, f"target.guarantee.adjacency must be one of {', '.join(known)} or null "
                                f"(got {_shown(adjacency)})")
    if isinstance(guarantee, dict):
        # The verdict rebuilds the claim, its dp-accounting event included, from this record: what the Guarantee
        # refuses (an unknown basis or event, a claim with no basis, δ > 1) was an internal error (exit 3).
        try:
            guarantee_from_json(guarantee)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as error:
            why = str(error) if isinstance(error, ValueError) else f"its event: {type(error).__name__}: {error}"
            raise _refuse(path, f"target.guarantee is not a claim this topicaudit wrote ({_clipped(why, 240)})") \
                from None
    canaries = results.get("canaries")
    observe = canaries.get("observe") if isinstance(canaries, dict) else None
    if observe is not None and (not isinstance(observe, str) or observe not in THREAT_MODELS):  # KeyError (exit 3)
        raise _refuse(path, f"canaries.observe must be one of {', '.join(THREAT_MODELS)} or null "
                            f"(got {_shown(observe)})")
    for where, section in (("epsilon_lower_bounds", results.get("epsilon_lower_bounds")),
                           ("canaries.epsilon_lower_bounds",
                            canaries.get("epsilon_lower_bounds") if isinstance(canaries, dict) else None)):
        if section is None:
            continue
        if not isinstance(section, dict):
            raise _refuse(path, f"{where} must be an object")
        for key in ("confidence", "delta"):
            if key in section and not _number(section[key], nullable=False):
                raise _refuse(path, f"{where}.{key} must be a number (got {section[key]!r})")
    if canaries is not None and not isinstance(canaries, dict):
        raise _refuse(path, "'canaries' must be an object")
    for where, section in (("attacks", results.get("attacks")),
                           ("canaries.scores", canaries.get("scores") if isinstance(canaries, dict) else None)):
        _check_metrics(path, where, section)
    if isinstance(canaries, dict) and canaries.get("mechanism") is not None:
        check_mechanism(path, canaries["mechanism"])


# The metrics the summary, the report's card and its ROC legends print (``attacks.metrics.summarize`` writes
# each as a number, NaN when undefined): null, a string or a missing one there was an internal error (exit 3).
METRICS = ("auc", "tpr_at_fpr_0.001", "tpr_at_fpr_0.01", "balanced_accuracy")


def _check_metrics(path: Path, where: str, section: Any) -> None:
    if section is None:
        return
    if not isinstance(section, dict):
        raise _refuse(path, f"{where} must be an object (got {_shown(section)})")
    for name, metrics in section.items():
        if not isinstance(metrics, dict):
            raise _refuse(path, f"{where}.{name} must be an object of metrics (got {_shown(metrics)})")
        for key in METRICS:
            value = metrics.get(key)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
                raise _refuse(path, f"{where}.{name}.{key} must be a number (got {_shown(value)})")


# What each recorded mechanism constant may be: (test, what the message says it must be). The power estimate and
# the curve tests compute with them (float(), int(), log(1/α)): a string, NaN or list there was a crash (exit 3).
_finite = lambda v: _number(v, nullable=False) and math.isfinite(float(v))  # noqa: E731
_COUNT = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "an integer ≥ 1")
_POSITIVE = (lambda v: _finite(v) and v > 0, "a finite number > 0")
_NON_NEGATIVE = (lambda v: _finite(v) and v >= 0, "a finite number ≥ 0")
_PROBABILITY = (lambda v: _finite(v) and 0 < v <= 1, "a number in (0, 1]")
MECHANISM_PARAMETERS = {
    "scale": _POSITIVE, "noise_std": _POSITIVE, "gamma": _POSITIVE, "doc_topic_prior": _POSITIVE,
    "sampling_rate": _PROBABILITY, "keep_probability": _PROBABILITY,
    "alpha": (lambda v: _finite(v) and 0 < v < 1, "a number in (0, 1)"),
    "delta": (lambda v: _finite(v) and 0 <= v < 1, "a number in [0, 1)"),
    "rho": _NON_NEGATIVE, "epsilon": _NON_NEGATIVE, "mean_change_tol": _NON_NEGATIVE,
    "steps": _COUNT, "document_tokens": _COUNT, "releases": _COUNT, "max_doc_update_iter": _COUNT,
    "clip_norm": (lambda v: v is None or _POSITIVE[0](v), "null or a finite number > 0"),
    "noise": (lambda v: v in ("gaussian", "laplace"), '"gaussian" or "laplace"'),
}
_MECHANISM_SIZES = ("tokens", "topics", "anchors")
# What each kind's simulation (topicaudit.attacks.mechanism.simulate_score_sets) reads without a default.
_REQUIRED_PARAMETERS = {
    "randomized-response": ("keep_probability",), "geometric-counts": ("alpha",), "laplace-counts": ("scale",),
    "laplace-count-releases": ("scale",), "subsampled-gaussian-steps": ("noise_std", "sampling_rate", "steps"),
    "dpsu": ("scale", "noise", "gamma"),
}


def check_mechanism(path: Path, mechanism: Any) -> None:
    """canaries.mechanism: the constants a power estimate simulates are of their type and range."""
    where = "canaries.mechanism"
    if not isinstance(mechanism, dict):
        raise _refuse(path, f"{where} must be an object")
    kind = mechanism.get("kind")
    # A kind of a plug-in's own is legitimate (the verdict imports its package, or states no power estimate).
    if not isinstance(kind, str) or not kind:
        raise _refuse(path, f"{where}.kind must be a string naming a kind of release (got {_shown(kind)})")
    for key in _MECHANISM_SIZES:
        value = mechanism.get(key)
        if value is None and key != "anchors":  # the run always writes them; the simulation needs them
            raise _refuse(path, f"{where}.{key} must be an integer ≥ 0 (got null)")
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise _refuse(path, f"{where}.{key} must be an integer ≥ 0 or null (got {_shown(value)})")
    arrays = mechanism.get("arrays")
    if arrays is not None and not (isinstance(arrays, list) and all(isinstance(a, str) for a in arrays)):
        raise _refuse(path, f"{where}.arrays must be a list of array names or null (got {_shown(arrays)})")
    parameters = mechanism.get("parameters")
    if not isinstance(parameters, dict):
        raise _refuse(path, f"{where}.parameters must be an object (got {_shown(parameters)})")
    for key, value in parameters.items():
        rule = MECHANISM_PARAMETERS.get(key)
        if rule is not None and not rule[0](value):
            raise _refuse(path, f"{where}.parameters.{key} must be {rule[1]} (got {_shown(value)})")
    needed = [key for key in _REQUIRED_PARAMETERS.get(kind, ()) if key not in parameters]
    if kind == "dpsu" and not parameters.get("policy") and "rho" not in parameters:
        needed.append("rho")
    if needed:  # a missing one was a KeyError in the power simulation (exit 3)
        raise _refuse(path, f"{where}.parameters lacks {', '.join(needed)}, which a {kind} mechanism records")


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _shown(value: Any) -> str:
    """A value as a message shows it: never more than 60 characters of an edited file."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
