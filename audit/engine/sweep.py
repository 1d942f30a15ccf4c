"""A sweep: one audit per value of one configuration parameter, with replicates.

    OUT/sweep.json              what varies, the values, the replicates, each run's place and status
    OUT/<key>=<value>/rep-<r>/  an ordinary run directory (resumable, reportable on its own)

Replicate r of every value uses seed ``config.seed + r``, so the values of a
replicate share their target membership and shadow plans (a paired comparison:
differences between values are not plan noise). All runs share one Ray
session. A sweep directory is bound to its specification: rerunning the same
command resumes it, rerunning it with more ``--replicates`` adds replicates
(the finished ones are kept: replicate r always has seed ``config.seed + r``),
and a different parameter, value list or base configuration is refused.
"""
from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import json
import math
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topicaudit.engine.configuration import toml_reader
from topicaudit.engine.configuration.config import Config
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.loading import SECTIONS, config_from_dict
from topicaudit.engine.execution.parallel import ray_session
from topicaudit.engine.execution.progress import Overall, noted
from topicaudit.engine.run import execute_run, run_needs_ray
from topicaudit.engine.storage.lock import holds_only_the_lock, writer_lock
from topicaudit.engine.storage.bounded_read import read_json
from topicaudit.engine.storage.durable_write import atomic_write_text
from topicaudit.engine.configuration.validation import check_name
from topicaudit.errors import UserError
from topicaudit.folder_anchors import absolute
from topicaudit.owned_folders import LinkedFolder, make_folders, open_folder
from topicaudit.inputs.files import check_regular
from topicaudit.targets import build_target, vocabulary_of

SWEEP_SCHEMA = "topicaudit.sweep/1"
FREE_TABLE_KEYS = {"params", "vocabulary_params", "options"}


@dataclass(frozen=True)
class SweepRun:
    value: Any
    replicate: int
    config: Config
    relative_path: str


def parse_value(text: str) -> Any:
    """A command-line value as TOML reads it (5 → int, 0.5 → float, inf, true); else a string."""
    text = text.strip()
    toml_reader.check_bounds(f"v = {text}", f"the value {text[:40]!r}")  # [[[…]]] would recurse without end
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_values(text: str) -> list[Any]:
    values = [parse_value(part) for part in text.split(",") if part.strip()]
    if not values:
        raise UserError("--values needs at least one value, e.g. --values 5,10,15")
    if len({json.dumps(v) for v in values}) != len(values):
        raise UserError(f"--values lists a value twice: {text}")
    return values


def with_parameter(config: Config, parameter: str, value: Any) -> Config:
    """A copy of the configuration with one dotted key set, validated like a config file (names cut: XIX-zi)."""
    parts = parameter.split(".")
    data = copy.deepcopy(config.to_dict())
    where = data
    known_top = [k for k in data if k not in SECTIONS]
    if parts[0] not in data:
        raise UserError(
            f"--param {parameter!r:.80}: unknown key {parts[0]!r:.80}; sweepable keys are the configuration's, "
            f"e.g. target.k, target.params.epsilon, target.vocabulary_params.epsilon, attack.shadows "
            f"(top level: {', '.join(known_top)}; tables: {', '.join(SECTIONS)})"
        )
    for depth, part in enumerate(parts[:-1]):
        if part not in where or not isinstance(where[part], dict):
            raise UserError(f"--param {parameter!r:.80}: {'.'.join(parts[:depth + 1])!r:.80} is not a table")
        where = where[part]
    last = parts[-1]
    if last not in where and not (len(parts) >= 3 and parts[-2] in FREE_TABLE_KEYS):
        raise UserError(f"--param {parameter!r:.80}: unknown key {last!r:.80} in [{'.'.join(parts[:-1]):.80}]; "
                        f"known: {', '.join(where) or 'none'}")
    if isinstance(where.get(last), dict):
        raise UserError(f"--param {parameter!r:.80} is a table; name one of its keys")
    if parameter in ("seed", "name", "output"):
        raise UserError(f"--param {parameter!r:.80} cannot be swept: replicates set the seed and the sweep "
                        "places the runs; use --replicates")
    where[last] = value
    return config_from_dict(data, f"sweep value {parameter} = {value!r}")


def _label(parameter: str, value: Any) -> str:
    text = str(value).lower() if isinstance(value, bool) or (isinstance(value, float) and math.isinf(value)) \
        else str(value)
    safe = "".join(c if c.isalnum() or c in ".-_+" else "_" for c in text)
    return f"{parameter.split('.')[-1]}={safe}"


MAX_RUNS = 10_000  # audits in one sweep: each takes seconds to hours, so no sweep comes near it


def plan_sweep(config: Config, parameter: str, values: list[Any], replicates: int,
               output: Path) -> list[SweepRun]:
    """Every run of the sweep, configured and validated before anything is written."""

    if replicates < 1:
        raise UserError(f"--replicates must be ≥ 1 (got {replicates})")
    if len(values) * replicates > MAX_RUNS:  # each run is planned (a Config) before any is written
        raise UserError(f"a sweep of {len(values)} value(s) × {replicates:,} replicates is "
                        f"{len(values) * replicates:,} audits; a sweep holds at most {MAX_RUNS:,}: sweep fewer values "
                        "or replicates, or split the sweep")
    runs = []
    for value in values:
        varied = with_parameter(config, parameter, value)
        validate(varied)
        t = varied.target
        build_target(t.learner, t.k, t.vocabulary, t.params, t.vocabulary_params)  # names and params check
        for replicate in range(replicates):
            run = copy.deepcopy(varied)
            label = _label(parameter, value)
            run.seed = config.seed + replicate
            run.name = f"{config.name}-{label}-rep{replicate}"
            check_name(run.name)  # each run checks its name again: refused now, not in the middle of the sweep
            relative = f"{label}/rep-{replicate}"
            run.output = str(output / relative)
            runs.append(SweepRun(value, replicate, run, relative))
    if len({r.relative_path for r in runs}) != len(runs):
        raise UserError(f"two values of {parameter} map to the same directory name; use distinct values")
    return runs


def _specification(config: Config, parameter: str, values: list[Any], replicates: int) -> dict[str, Any]:
    base = config.to_dict()
    base.pop("output")
    base.pop("ray")
    t = config.target
    if t.vocabulary == "auto":  # the step it stands for: a sweep recorded when "observed" was the default resumes
        try:
            base["target"]["vocabulary"] = vocabulary_of(t.learner, t.k, t.params, t.vocabulary)
        except UserError:
            pass  # a target that cannot be built: plan_sweep says why
    return {"parameter": parameter, "values": values, "replicates": replicates, "base_config": base}


def default_output(config: Config, parameter: str, values: list[Any]) -> Path:
    """runs/<corpus or name>-sweep-<key>-<6 hex>: named after what is swept, the same for the same sweep.

    Replicates are left out of the hash, so adding some resumes the same directory.
    """
    spec = _specification(config, parameter, values, 0)
    spec["base_config"]["corpus"]["path"] = config.short_hash()  # the corpus's place, however it is spelled
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:6]
    return Path("runs") / f"{config.stem}-sweep-{parameter.split('.')[-1]}-{digest}"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def run_sweep(config: Config, parameter: str, values: list[Any], replicates: int, output: Path,
              quiet: bool = False) -> dict[str, Any]:
    """Run (or resume) every audit of the sweep; returns ``sweep.json``'s content.

    The sweep directory's writer lock is held throughout (and each run's own, by ``execute_run``). An output
    holding ``..`` is taken as the system names it: ``a/gone/../sw`` (gone absent) made ``a/gone`` and left it.
    """
    output = Path(absolute(output)) if ".." in Path(output).parts else output
    with writer_lock(output):
        return _run_sweep(config, parameter, values, replicates, Path(output), quiet)


def _run_sweep(config: Config, parameter: str, values: list[Any], replicates: int, output: Path,
               quiet: bool) -> dict[str, Any]:
    runs = plan_sweep(config, parameter, values, replicates, output)
    _check_no_links(output, runs)
    spec = json.loads(json.dumps(_specification(config, parameter, [_json_safe(v) for v in values], replicates),
                                 default=str))
    index_path = output / "sweep.json"
    new = not os.path.lexists(index_path)
    if not new:
        # bounded, regular, a JSON object (or exit 2): garbage bytes or a list here were internal errors
        check_regular(index_path)
        stored = read_json(index_path)
        stored_spec = stored.get("specification") or {}
        if not isinstance(stored_spec, dict):
            raise UserError(f"{index_path} is damaged (its specification is not an object); delete the sweep "
                            "directory to start over, or choose another output (--output)")
        if {**stored_spec, "replicates": replicates} != spec:
            raise UserError(
                f"{output} holds a different sweep (other parameter, values or base configuration); "
                "choose another output (--output), or delete that directory to start over"
            )
        if replicates < stored_spec.get("replicates", 0):
            raise UserError(
                f"{output} holds {stored_spec['replicates']} replicates; replicates can be added to a sweep, "
                f"not removed: ask for --replicates {stored_spec['replicates']} or more"
            )
    elif output.exists() and not holds_only_the_lock(output):
        raise UserError(f"output directory {output} is not empty and is not a topicaudit sweep; choose another output (--output)")
    make_folders(output)

    index = {
        "schema": SWEEP_SCHEMA,
        "name": config.name,
        "parameter": parameter,
        "values": spec["values"],
        "replicates": replicates,
        "specification": spec,
        "runs": [{"value": _json_safe(r.value), "replicate": r.replicate, "seed": r.config.seed,
                  "path": r.relative_path, "status": "pending"} for r in runs],
    }

    save = functools.partial(save_index, index_path, index)
    for entry, run in zip(index["runs"], runs):
        if (output / run.relative_path / "results.json").exists():
            entry["status"] = "done"
    needs_ray = any(run_needs_ray(run.config) for run in runs)  # canary-only audits fit here: no cluster
    overall = Overall("sweep", [run.value for run in runs], parameter)
    try:
        with ray_session(config.ray.address, config.ray.num_cpus) if needs_ray else contextlib.nullcontext():
            save()
            _run_all(index, runs, parameter, overall, save, quiet)
    except BaseException:  # a new sweep refused at its start (a bad --ray-address, a bad corpus) left sweep.json
        if new and not any(entry["status"] == "done" for entry in index["runs"]):  # nothing to resume
            with open_folder(output) as folder:
                folder.unlink("sweep.json", missing_ok=True)
        raise
    if not quiet:
        print(overall.line(), file=sys.stderr)
    return index


def _run_all(index: dict[str, Any], runs: list[SweepRun], parameter: str, overall: Overall, save, quiet: bool):
    """Every run of the sweep in turn, each marked done in the index as it finishes."""
    for i, (entry, run) in enumerate(zip(index["runs"], runs)):
        finished_before = entry["status"] == "done"  # returned at once: not paced
        if not quiet:
            print(f"[{i + 1}/{len(runs)}] {parameter} = {run.value}, replicate {run.replicate} "
                  f"(seed {run.config.seed}) — {overall.line()}", file=sys.stderr)
            noted()
        overall.start()
        execute_run(run.config, quiet=quiet)
        overall.finish(ran=not finished_before)
        entry["status"] = "done"
        save()


def save_index(index_path: Path, index: dict[str, Any]) -> None:
    """Write the sweep's index, unless it already holds exactly this: a resumed sweep refused by its first run
    (an integrity key its runs were not written with) had rewritten sweep.json, leaving the directory changed."""
    text = json.dumps(index, indent=2) + "\n"
    try:
        if not index_path.is_symlink() and index_path.is_file() and index_path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass  # unreadable: rewritten
    atomic_write_text(index_path, text)


def _check_no_links(output: Path, runs) -> None:
    """A sweep writes its runs inside its own directory, never through a link: a run's folder (or its value's)
    replaced by a symbolic link to a folder elsewhere was written into, through the link, on resume. Each is
    opened as the runs will be (``topicaudit.owned_folders``, below the directory the sweep's lock holds), so
    that every link is refused before the first run writes anything."""
    for run in runs:
        try:
            open_folder(output / run.relative_path).close()
        except FileNotFoundError:
            continue  # made without following a link when its run is locked
        except LinkedFolder as linked:
            what = "a symbolic link" if linked.target is not None else "not a directory"  # a file was "a link"
            raise UserError(f"{linked.path} is {what}: a sweep writes its runs only inside its own directory, never "
                            "through a link; move it away (a link's target is left as it is) and rerun the same "
                            "command, or choose another output (--output)") from None


def load_sweep(path: Path) -> dict[str, Any]:
    """A finished (or partial) sweep's index, with each run's results where present."""
    path = Path(path)
    index_path = path / "sweep.json"
    if not os.path.lexists(index_path):
        raise UserError(f"{path} is not a sweep directory (no sweep.json)")
    check_regular(index_path)
    index = read_json(index_path)  # bounded, regular, a JSON object, or exit 2 naming it
    if not isinstance(index, dict) or index.get("schema") != SWEEP_SCHEMA:
        got = index.get("schema") if isinstance(index, dict) else type(index).__name__
        raise UserError(f"{index_path} has schema {got!r}; expected {SWEEP_SCHEMA}")
    missing = [key for key in ("parameter", "values", "replicates", "runs") if key not in index]
    if missing or not isinstance(index["runs"], list):
        raise UserError(f"{index_path} lacks {', '.join(missing) or 'a list of runs'}; it is damaged — "
                        "rerun the same `topicaudit sweep` command to rewrite it")
    replicates = index["replicates"]
    if not isinstance(index["parameter"], str) or not isinstance(index["values"], list) \
            or isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 1:
        # a list as the parameter or a string as a replicate were internal errors in report (exit 3)
        raise UserError(f"{index_path} is damaged (its parameter must be a string, its values a list and its "
                        "replicates an integer ≥ 1) — rerun the same `topicaudit sweep` command to rewrite it")
    for i, entry in enumerate(index["runs"]):
        if not isinstance(entry, dict) or not {"value", "replicate", "path"} <= set(entry) \
                or not _relative_path(entry["path"]) or isinstance(entry["replicate"], bool) \
                or not isinstance(entry["replicate"], int) or not 0 <= entry["replicate"] < replicates:
            raise UserError(f"{index_path}: run entry {i} needs value, replicate (an integer below the sweep's "
                            "replicates) and path (a folder inside the sweep); the index is damaged — rerun the same `topicaudit sweep` command to rewrite it")
        results = path / entry["path"] / "results.json"
        check_regular(results)
        entry["results"] = read_json(results) if os.path.lexists(results) else None
    _check_index_complete(path, index_path, index)
    return index


def _check_index_complete(path: Path, index_path: Path, index: dict[str, Any]) -> None:
    """The index is not trusted to list every run: a run left out of it (or of its values) would be left out of
    the table and the report without a word — a VIOLATED run dropped from a sweep. Every finished run in the
    sweep directory (a folder holding results.json, at most two levels down: ``<key>=<value>/rep-<r>``) must be
    listed, and every listed run's value must be one of the sweep's values; else exit 2, naming it."""
    values = {json.dumps(value, sort_keys=True) for value in index["values"]} \
        if isinstance(index["values"], list) else set()
    for i, entry in enumerate(index["runs"]):
        if json.dumps(entry["value"], sort_keys=True) not in values:
            raise UserError(f"{index_path}: run entry {i} ({entry['path']}) has the value {entry['value']!r}, which "
                            "is not one of the sweep's values: the index was edited or damaged — rerun the same "
                            "`topicaudit sweep` command to rewrite it")
    seen: dict[Any, int] = {}
    for i, entry in enumerate(index["runs"]):
        # One run listed twice (k=4's entry pointed at k=3/rep-0, k=4/ deleted) was reported twice, as two runs.
        for key in (Path(entry["path"]).as_posix(), json.dumps([entry["value"], entry["replicate"]], sort_keys=True)):
            if key in seen:
                raise UserError(f"{index_path}: run entries {seen[key]} and {i} both list {entry['path']} (value "
                                f"{entry['value']!r}, replicate {entry['replicate']}): the index was edited or damaged "
                                "— rerun the same `topicaudit sweep` command to rewrite it")
            seen[key] = i
    listed = {Path(entry["path"]).as_posix() for entry in index["runs"]}
    for results in sorted([*path.glob("*/results.json"), *path.glob("*/*/results.json")]):
        relative = results.parent.relative_to(path).as_posix()
        if relative not in listed:
            raise UserError(f"{results.parent} is a finished run inside the sweep {path} that {index_path} does not "
                            "list: the index was edited or damaged, and the run would be left out without a word; "
                            "rerun the same `topicaudit sweep` command to rewrite the index, or move the run out "
                            "of the sweep directory")


def verdict_epsilon(results: dict[str, Any]) -> float:
    """The run's verdict ε (every test, α split over them: what ``check`` prints for its own claim); the canary
    bound for runs from before verdicts were stored."""
    if "verdict" in results:
        bound = results["verdict"]["epsilon_lower_bound"]
        return float(bound)  # "inf" for a δ-tail refutation
    return results["canaries"]["epsilon_lower_bounds"]["epsilon"]


def sweep_table(index: dict[str, Any]) -> str:
    """Mean ± sd over replicates of the main metrics, one row per value."""

    finished = [e["results"] for e in index["runs"] if e.get("results")]
    canaries = any("canaries" in r for r in finished)
    lines = [f"{index['parameter']:>24}  {'online AUC':>16}  {'online TPR@0.1%':>18}  {'offline TPR@0.1%':>18}"
             + (f"  {'verdict ε ≥':>14}" if canaries else "") + "  runs"]
    for value in index["values"]:
        done = [e["results"] for e in index["runs"] if e["value"] == value and e.get("results")]

        def summary(xs, percent):
            xs = np.array(xs)
            if not xs.size:
                return "—"
            sd = xs.std(ddof=1) if xs.size > 1 else 0.0
            return f"{100 * xs.mean():.2f}% ± {100 * sd:.2f}" if percent else f"{xs.mean():.3f} ± {sd:.3f}"

        def stat(attack, metric, done=done):
            return summary([r["attacks"][attack][metric] for r in done if attack in r["attacks"]], metric != "auc")

        canary = summary([verdict_epsilon(r) for r in done if "canaries" in r], False)
        lines.append(f"{value!s:>24}  {stat('lira_online', 'auc'):>16}  "
                     f"{stat('lira_online', 'tpr_at_fpr_0.001'):>18}  "
                     f"{stat('lira_offline', 'tpr_at_fpr_0.001'):>18}"
                     + (f"  {canary:>14}" if canaries else "") + f"  {len(done)}")
    return "\n".join(lines)


def _relative_path(value: Any) -> bool:
    """A run's place in a sweep index: a relative path inside the sweep (what ``plan_sweep`` writes)."""
    return (isinstance(value, str) and bool(value) and "\0" not in value and not Path(value).is_absolute()
            and ".." not in Path(value).parts)
