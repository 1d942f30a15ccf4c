"""``audit.json`` as a typed, frozen record: what ``topicaudit audit`` and ``topicaudit.audit_model()`` return.

:class:`AuditResults` holds exactly the JSON ``audit`` writes, with the rules of
:mod:`topicaudit.engine.storage.results` (round trip, absent keys ``None``,
unknown keys kept, an unknown schema refused); it also reads its output
directory's scores.csv on first use (``all_scores``).
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from topicaudit.engine.storage.records import JsonView, Record, check_schema, record
from topicaudit.engine.storage.results import GuaranteeInfo
from topicaudit.errors import UserError
from topicaudit.inputs.files import open_regular

# audit.json of `topicaudit audit`; /2: score columns and rankings named after the registry's attacks
USER_AUDIT_SCHEMA = "topicaudit.user-audit/2"
MAX_AUDIT_JSON_BYTES = 256 * 2**20  # far above any audit.json (its `top` and exposure's per-target values)


@dataclass(frozen=True, kw_only=True)
class AuditLearner(Record):
    """``learner``: the shadows' learner and where its settings came from."""

    CODECS = {"guarantee": record(GuaranteeInfo)}
    OPTIONAL = ("model_settings",)

    name: str | None = None
    k: int | None = None
    params: dict[str, Any] | None = None
    settings_from: str | None = None
    vocabulary: str | None = None
    guarantee: GuaranteeInfo | None = None
    # a saved scikit-learn model: the settings read from its file without unpickling, used and not, and why
    model_settings: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class AuditRanking(Record):
    """``ranking``: the score the candidates are ordered by, and whether it was the recommended one."""

    by: str | None = None
    rank_by: str | None = None
    recommended: bool | None = None
    rule: str | None = None
    order: str | None = None


@dataclass(frozen=True, kw_only=True, eq=False)
class AuditResults(JsonView, Record):
    """``audit.json``: one ``topicaudit audit`` of a released Φ (docs/user-audit.md lists every key).

    ``top`` holds the best-ranked candidates' rows of scores.csv; ``all_scores`` every candidate's, read from
    scores.csv on first use; ``paths`` the output directory's files; ``exposure`` the overall exposure figure
    (the attack measured on the shadow models, ``exposure["statement"]`` says it in one sentence).
    ``directory`` is where audit.json was written or read (None for a record built from a dict).
    """

    SCHEMA: ClassVar[str] = USER_AUDIT_SCHEMA
    REQUIRED = ("schema",)
    CODECS = {"learner": record(AuditLearner), "ranking": record(AuditRanking)}
    # roles of the output directory's files, for audit.json files written before it listed them
    FILES: ClassVar[dict[str, str]] = {"audit": "audit.json", "scores": "scores.csv", "statistics": "statistics.npz",
                                       "plan": "plan.npz", "config": "config.toml", "models": "models"}

    schema: str
    name: str | None = None
    config_hash: str | None = None
    inputs: dict[str, Any] | None = None
    learner: AuditLearner | None = None
    shadows: dict[str, Any] | None = None
    ranking: AuditRanking | None = None
    scores: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    exposure: dict[str, Any] | None = None   # the overall exposure figure (topicaudit.attacks.exposure)
    files: dict[str, str] | None = None      # role → file name in the output directory
    top: list[dict[str, Any]] = field(default_factory=list)
    statistics: dict[str, Any] | None = None
    seeds: dict[str, int] | None = None
    versions: dict[str, str] | None = None
    ray: dict[str, Any] | None = None
    timings_s: dict[str, float] | None = None
    resumed: bool | None = None
    warnings: list[str] = field(default_factory=list)
    directory: Path | None = field(default=None, compare=False, metadata={"json": False})

    @classmethod
    def from_json(cls, data: Any, where: str = "audit.json", directory: str | Path | None = None) -> AuditResults:
        check_schema(data, cls.SCHEMA, where)
        results = super().from_json(data, where)
        return dataclasses.replace(results, directory=Path(directory)) if directory is not None else results

    @classmethod
    def load(cls, directory: str | Path) -> AuditResults:
        """The audit.json of an output directory of ``topicaudit audit``, or a UserError saying why not."""
        path = Path(directory) / "audit.json"
        if not path.exists():
            raise UserError(f"{directory} holds no audit.json: it is not a finished `topicaudit audit` output "
                            "directory (rerun the same audit command to finish it)")
        with open_regular(path, "audit.json") as handle:
            raw = handle.read(MAX_AUDIT_JSON_BYTES + 1)
        if len(raw) > MAX_AUDIT_JSON_BYTES:
            raise UserError(f"{path} is larger than {MAX_AUDIT_JSON_BYTES // 2**20} MiB, which no audit.json is; "
                            "rerun the audit to rewrite it")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            raise UserError(f"{path} is unreadable ({type(error).__name__}); rerun the audit to rewrite it") from None
        return cls.from_json(data, str(path), directory)

    @property
    def paths(self) -> dict[str, Path]:
        """Each file of the output directory by role (audit, scores, statistics, exposure, plan, config, models,
        …), as a path; a UserError when the record does not know its directory."""
        if self.directory is None:
            raise UserError("this AuditResults was not read from an output directory, so it knows no file; "
                            "use topicaudit.AuditResults.load(directory)")
        # The names the audit writes, not the ones audit.json records: the manifest verifies audit.json's siblings by
        # these names, and "scores": "../other/scores.csv" (or /etc/passwd) was read as the scores unverified.
        known = {**self.FILES, "exposure": "exposure.npz", "manifest": "manifest.json"}
        return {role: self.directory / known.get(role, name) for role, name in (self.files or self.FILES).items()
                if role in known or (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
                                     and "\\" not in name)}

    @cached_property
    def all_scores(self) -> dict[str, Any]:
        """Every scored candidate's row of scores.csv, strongest evidence first, as column → numpy array.

        Read from scores.csv on first use (``top`` holds only the first rows): ``rank``, ``candidate`` and
        ``n_tokens`` as integers, ``id`` and ``text`` as strings as scores.csv holds them (a cell a spreadsheet
        would read as a formula starts with ``'``), every score column as float64 (NaN where empty).
        """
        path = self.paths["scores"]
        if not path.exists():
            raise UserError(f"{path} is missing; rerun the same audit command to rewrite it")
        with open_regular(path, "scores.csv") as handle:
            try:
                reader = csv.reader(io.TextIOWrapper(handle, encoding="utf-8", newline=""))
                header = next(reader, None)
                rows = list(reader)
            except (UnicodeDecodeError, csv.Error) as error:
                raise UserError(f"{path} is unreadable ({type(error).__name__}); rerun the audit") from None
        if not header or any(len(row) != len(header) for row in rows):
            raise UserError(f"{path} is not the table `topicaudit audit` writes (ragged or empty); rerun the audit")
        columns: dict[str, Any] = {}
        for j, name in enumerate(header):
            cells = [row[j] for row in rows]
            try:
                if name in ("id", "text"):
                    columns[name] = np.array(cells, dtype=object)
                elif name in ("rank", "candidate", "n_tokens"):
                    columns[name] = np.array([int(c) for c in cells], dtype=np.int64)
                else:
                    columns[name] = np.array([float(c) if c else math.nan for c in cells], dtype=np.float64)
            except ValueError:
                raise UserError(f"{path}: column {name!r} holds a value that is not a number; the file was edited "
                                "or damaged — rerun the audit") from None
        return columns
