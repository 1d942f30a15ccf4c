"""Read finished run and sweep directories into what a report draws (nothing is recomputed).

A report's inputs are run directories and sweep directories. Each run
directory becomes a group of one; a sweep directory becomes one group per
swept value, holding that value's finished replicates (unfinished ones are
listed as pending and left out). Groups are labelled by the configuration
keys that differ between them (for a sweep: the swept parameter).

Runs drawn on one figure must be comparable: the same corpus, and the same
vocabulary step. Replicates are matched by index (replicate r of every group
shares its seed, and for the synthetic corpus its corpus), so the check
compares the r-th runs of the groups with each other. A different corpus is
always refused; a different vocabulary step is refused unless the user asks
for it (``compare_vocabularies``) or the input is a single sweep over the
vocabulary step itself.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.storage import manifest
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.integrity import verify_run_directory
from topicaudit.engine.storage.audit_results import USER_AUDIT_SCHEMA
from topicaudit.engine.storage.results import CorpusInfo, RunResults
from topicaudit.engine.storage.bounded_read import read_arrays, read_json, read_run_toml
from topicaudit.engine.sweep import load_sweep
from topicaudit.errors import UserError
from topicaudit.inputs.files import check_regular

# configuration keys that say where and how a run was computed, never what it computed
_NOT_IDENTITY = ("name", "output", "ray", "provenance")


# -- one run ---------------------------------------------------------------------------
@dataclass
class Run:
    """A finished run directory: results.json and config.toml read eagerly, arrays on demand."""

    path: Path
    results: RunResults
    config: dict[str, Any]
    replicate: int = 0
    replicates: int = 1

    @property
    def name(self) -> str:
        return str(self.results.name or self.path.name)

    @property
    def seed(self) -> int | None:
        return self.config.get("seed")

    @property
    def attacks(self) -> list[str]:
        return list(self.results.attacks)

    def _arrays(self, filename: str, required: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        path = self.path / filename
        if not path.exists() and not path.is_symlink():
            raise UserError(f"run {self.path} has no {filename}; the directory is incomplete — rerun the "
                            "same `topicaudit run` command to finish it")
        return read_arrays(path, required)

    @cached_property
    def scores(self) -> dict[str, np.ndarray]:
        """scores.npz: one score array per attack, plus is_member and doc_index."""
        arrays = self._arrays("scores.npz", ("is_member", "doc_index"))
        arrays["is_member"] = arrays["is_member"].astype(bool)
        return arrays

    @cached_property
    def statistics(self) -> dict[str, np.ndarray]:
        """statistics.npz: target_<stat> (docs) and shadow_<stat> (shadows × docs)."""
        return self._arrays("statistics.npz", ("target_zeta", "shadow_zeta"))

    @cached_property
    def shadow_in(self) -> np.ndarray:
        """plan.npz's shadow membership (shadows × docs)."""
        return self._arrays("plan.npz", ("shadow_in",))["shadow_in"].astype(bool)

    def score_attacks(self) -> list[str]:
        """Attacks with both a results.json entry and stored scores, in results.json order."""
        return [name for name in self.attacks if name in self.scores]

    # identities used by the comparability check
    def corpus_identity(self) -> dict[str, Any]:
        corpus = self.results.corpus or CorpusInfo()
        sizes = {"n_docs": corpus.n_docs, "n_words": corpus.n_words, "n_tokens": corpus.n_tokens}
        if corpus.fingerprint is not None:  # the counts themselves; the sizes make messages readable
            return {**sizes, "fingerprint": corpus.fingerprint}
        section = self.config.get("corpus", {})
        path = section.get("path")
        identity = {**sizes, "n_dropped_empty": corpus.n_dropped_empty}
        identity.update({"file": os.path.basename(os.path.normpath(path)) if path else None,
                         "format": section.get("format"), "preprocess": section.get("preprocess"),
                         "text_field": section.get("text_field"), "options": section.get("options") or {}})
        if not path:  # the embedded synthetic corpus is drawn from its parameters and the run's seed
            identity.update({"synthetic": self.config.get("synthetic"), "seed": self.seed})
        return identity

    def vocabulary_identity(self) -> dict[str, Any]:
        target = self.config.get("target", {})
        step = self.results.target.vocabulary_step
        return {"vocabulary step": step if step is not None else target.get("vocabulary"),
                "vocabulary parameters": target.get("vocabulary_params") or {}}


def _is_user_audit(path: Path) -> bool:
    """A ``topicaudit audit`` directory: its audit.json, or (unfinished) its config.toml: a schema saying so, or the
    tables only an audit's configuration has ([model] and [reference])."""
    if (path / "audit.json").exists():
        return True
    try:
        data = read_run_toml(path / "config.toml")
    except UserError:  # missing, no regular file (a FIFO blocked here), too large or not TOML
        return False
    if isinstance(data.get("model"), dict) and isinstance(data.get("reference"), dict):
        return True
    return str(data.get("schema", "")).startswith("topicaudit.user-audit/")


def read_run(path: Path, replicate: int = 0, replicates: int = 1) -> Run:
    """A finished run directory, or a UserError saying why it is not one."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"{path} is not a directory; give a run directory (made by `topicaudit run`) "
                        "or a sweep directory (made by `topicaudit sweep`)")
    results_path, config_path = path / "results.json", path / "config.toml"
    if not results_path.exists():
        if _is_user_audit(path):
            raise UserError(f"{path} is a `topicaudit audit` of a user's model, not a run: report it on its own "
                            f"(`topicaudit report {path}`), not with runs or sweeps")
        if config_path.exists():
            raise UserError(f"{path} is an unfinished run (no results.json yet); rerun the same "
                            "`topicaudit run` command to finish it, then report")
        raise UserError(f"{path} is not a topicaudit run or sweep directory (no results.json, config.toml "
                        "or sweep.json)")
    check_regular(results_path, config_path)
    # manifest hashes, types and shapes of what the report reads (or exit 2)
    if (unverified := verify_run_directory(path).unverified) is not None:
        warnings.warn(f"{path}: {unverified}", stacklevel=2)
    try:
        manifest.verify(path, ["check.json"])  # the card reads its claim: edited since check listed it, exit 2
    except UserError:
        raise UserError(f"{path / 'check.json'} is not the file `topicaudit check` wrote (its SHA-256 differs from "
                        f"{path / manifest.NAME}): it was edited or replaced, so the claim it records is not read; "
                        f"delete it, or rerun `topicaudit check {path} --epsilon E` to rewrite it") from None
    data = read_json(results_path)
    if str(data.get("schema", "")).startswith(USER_AUDIT_SCHEMA.rpartition("/")[0] + "/"):
        raise UserError(f"{path} is a `topicaudit audit` of a user's model (a ranking without ground truth, "
                        "see its scores.csv); `topicaudit report` reads membership audits made by "
                        "`topicaudit run` or `topicaudit sweep`")
    results = RunResults.from_json(data, str(results_path))
    if not os.path.lexists(config_path):
        raise UserError(f"run {path} has results.json but no config.toml; the directory is incomplete")
    config = read_run_toml(config_path)
    try:  # the report reads its tables and values directly: one of the wrong kind was exit 3 (corpus = 1e308)
        config_from_dict({key: value for key, value in config.items() if key != "provenance"}, str(config_path))
    except UserError as error:
        raise UserError(f"{config_path} is not a configuration topicaudit wrote ({error}); the run directory was "
                        "edited or damaged — rerun the audit into a new directory") from None
    return Run(path, results, config, replicate, replicates)


# -- groups and the collection ---------------------------------------------------------------
@dataclass
class Group:
    """Runs that differ only by replicate (seed): one swept value, or one run directory."""

    runs: list[Run]
    source: Path               # the run or sweep directory it came from
    sweep_parameter: str | None = None
    sweep_value: Any = None
    label: str = ""
    value: Any = None          # the varied configuration value (x axis), when one key varies

    @property
    def representative(self) -> Run:
        return self.runs[0]


@dataclass
class Collection:
    inputs: list[Path]
    groups: list[Group]
    varies: list[str]                  # dotted configuration keys that differ between groups
    pending: list[str] = field(default_factory=list)  # unfinished runs of sweeps, left out
    sweeps: list[Path] = field(default_factory=list)

    @property
    def runs(self) -> list[Run]:
        return [run for group in self.groups for run in group.runs]

    @property
    def parameter(self) -> str | None:
        """The one key that varies (the x axis of by-parameter figures), else None."""
        return self.varies[0] if len(self.varies) == 1 else None

    def legend_title(self) -> str:
        return "varies: " + ", ".join(self.varies) if self.varies else "runs"


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):  # an empty table contributes no key (a default, like a missing one)
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _identity_config(run: Run) -> dict[str, Any]:
    data = {k: v for k, v in run.config.items() if k not in _NOT_IDENTITY}
    if (data.get("corpus") or {}).get("path"):
        data.pop("synthetic", None)  # not used when a corpus file is given
    return _flatten(data)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "-∞"
    if isinstance(value, float):
        return f"{value:g}"
    if value is None:
        return "unset"
    return str(value)


def _short_names(keys: list[str]) -> dict[str, str]:
    last = [key.split(".")[-1] for key in keys]
    return {key: (short if last.count(short) == 1 else key) for key, short in zip(keys, last)}


def _label_groups(groups: list[Group]) -> list[str]:
    configs = [_identity_config(g.representative) for g in groups]
    keys = sorted({k for c in configs for k in c})
    varies = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1]
    if len(groups) > 1 and not varies and len({g.representative.seed for g in groups}) > 1:
        varies = ["seed"]
        configs = [{"seed": g.representative.seed} for g in groups]
    short = _short_names(varies)
    for group, config in zip(groups, configs):
        if varies:
            group.label = ", ".join(f"{short[k]}={_format_value(config.get(k))}" for k in varies)
        else:
            group.label = group.source.name if len(groups) > 1 else group.representative.name
        group.value = config.get(varies[0]) if len(varies) == 1 else group.label
    if len({g.label for g in groups}) < len(groups):  # identical configurations: tell them apart by place
        for group in groups:
            group.label = f"{group.label} ({group.source})"
    return varies


def _describe_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
    return "; ".join(f"{k}: {json.dumps(a.get(k), default=str)} vs {json.dumps(b.get(k), default=str)}"
                     for k in keys)


def check_comparable(groups: list[Group], compare_vocabularies: bool = False,
                     vocabulary_sweep: bool = False) -> None:
    """Refuse (UserError) to draw runs of different corpora, or of different vocabulary steps, together."""
    if len(groups) < 2:
        return
    by_replicate: dict[int, list[Run]] = {}
    for group in groups:
        for run in group.runs:
            by_replicate.setdefault(run.replicate, []).append(run)
    for peers in by_replicate.values():
        first = peers[0]
        for other in peers[1:]:
            a, b = first.corpus_identity(), other.corpus_identity()
            if a != b:
                raise UserError(
                    f"cannot compare {first.path} and {other.path}: they audit different corpora "
                    f"({_describe_difference(a, b)}); an overlay of ROC curves over different documents "
                    "means nothing — report them separately"
                )
            a, b = first.vocabulary_identity(), other.vocabulary_identity()
            if a != b and not (compare_vocabularies or vocabulary_sweep):
                raise UserError(
                    f"cannot compare {first.path} and {other.path}: their release pipelines have different "
                    f"vocabulary steps ({_describe_difference(a, b)}), so the attack sees different words; "
                    "pass --compare-vocabularies to overlay them anyway, or report them separately"
                )


def _sweep_groups(path: Path) -> tuple[list[Group], list[str], str]:

    index = load_sweep(path)
    parameter = index["parameter"]
    by_value: dict[str, list[tuple[int, Path]]] = {}
    pending = []
    root = path.resolve()
    for entry in index["runs"]:
        run_path = path / entry["path"]
        if root not in (path / entry["path"]).resolve().parents:
            raise UserError(f"{path / 'sweep.json'}: run path {entry['path']!r} leaves the sweep directory")
        key = json.dumps(entry["value"])
        if entry.get("results") is None:
            pending.append(f"{run_path} ({parameter} = {_format_value(entry['value'])}, "
                           f"replicate {entry['replicate']})")
            continue
        by_value.setdefault(key, []).append((int(entry["replicate"]), run_path, entry))
    groups = []
    for value in index["values"]:
        members = sorted(by_value.get(json.dumps(value), []), key=lambda m: (m[0], str(m[1])))
        if not members:
            continue
        runs = [_in_its_slot(read_run(p, replicate=r, replicates=index["replicates"]), entry, parameter, path)
                for r, p, entry in members]
        groups.append(Group(runs, path, parameter, value))
    return groups, pending, parameter


def _in_its_slot(run: Run, entry: dict[str, Any], parameter: str, sweep: Path) -> Run:
    """The run, refused (exit 2) unless its configuration holds the value and seed sweep.json lists it with: a
    replicate moved or copied from another slot (or sweep) was grouped and drawn under the index's value while its
    own card named its own, and the ledger listed its ε under a value it was not run with (hostile pass XVIII)."""
    found: Any = run.config
    for part in parameter.split("."):
        found = found.get(part, _ABSENT) if isinstance(found, dict) else _ABSENT
    wrong = []
    if found is not _ABSENT and _as_json(found) != _as_json(entry["value"]):
        wrong.append(f"{parameter} = {_format_value(found)}, not {_format_value(entry['value'])}")
    if "seed" in entry and run.seed is not None and run.seed != entry["seed"]:
        wrong.append(f"seed {run.seed}, not {entry['seed']}")
    if wrong:
        raise UserError(f"{run.path} holds a run of {' and '.join(wrong)} as {sweep / 'sweep.json'} lists it: a run "
                        "was moved or copied into the sweep; rerun the same `topicaudit sweep` command into a new "
                        "--output (or put the run back where it was)")
    return run


_ABSENT = object()


def _as_json(value: Any) -> str:
    """A value as JSON text, a whole float as its integer: a sweep over 1,1000 lists 1 and the run's configuration
    holds 1.0, and its report refused the sweep as moved or copied (hostile pass XIX-yc, N1)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return json.dumps(value, sort_keys=True)


def collect(paths: list[str | Path], compare_vocabularies: bool = False) -> Collection:
    """Read every input (run or sweep directory) and check that they may be drawn together."""
    if not paths:
        raise UserError("give at least one run or sweep directory")
    groups: list[Group] = []
    pending: list[str] = []
    sweeps: list[Path] = []
    sweep_parameters = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.resolve() in seen:
            raise UserError(f"{path} is given twice")
        seen.add(path.resolve())
        if path.is_dir() and (path / "sweep.json").exists():
            found, waiting, parameter = _sweep_groups(path)
            if not found:
                raise UserError(f"sweep {path} has no finished run yet; report it once one has finished")
            groups += found
            pending += waiting
            sweeps.append(path)
            sweep_parameters.append(parameter)
        else:
            groups.append(Group([read_run(path)], path))
    read: dict[Path, Path] = {}  # a sweep's run given on its own too was reported twice: two cards, twice in the ledger
    for group in groups:
        for run in group.runs:
            if run.path.resolve() in read:
                sweep = next(source for source in (read[run.path.resolve()], Path(group.source))
                             if source.resolve() != run.path.resolve())
                raise UserError(f"{run.path} is given twice: on its own and as a run of the sweep {sweep}; give the "
                                "sweep or the run, not both")
            read[run.path.resolve()] = Path(group.source)
    vocabulary_sweep = (len(sweeps) == 1 and len(groups) == len([g for g in groups if g.source == sweeps[0]])
                        and sweep_parameters[0].startswith("target.vocabulary"))
    check_comparable(groups, compare_vocabularies, vocabulary_sweep)
    varies = _label_groups(groups)
    return Collection([Path(p) for p in paths], groups, varies, pending, sweeps)
