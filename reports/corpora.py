"""The corpus behind each run of a report (for its document kinds and, on request, its texts): reloaded once per
distinct corpus, and used only when its fingerprint proves it is the one the run audited."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from topicaudit.engine.configuration.config import config_hash
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.errors import UserError
from topicaudit.inputs.corpus import corpus_fingerprint
from topicaudit.reports.collect import Run


class CorpusCache:
    """Reloads each distinct corpus once and proves it is the audited one (config hash matches)."""

    def __init__(self):
        self._corpora: dict[str, tuple[Any, str | None, str | None]] = {}

    def get(self, run: Run):
        """(Corpus or None, note saying why not)."""

        data = {k: v for k, v in run.config.items() if k != "provenance"}
        try:
            config = config_from_dict(data, str(run.path / "config.toml"))
        except UserError as error:
            return None, f"cannot read the configuration of {run.path}: {error}"
        key = json.dumps({"corpus": data.get("corpus"),
                          "synthetic": None if config.corpus.path else [data.get("synthetic"), config.seed]},
                         sort_keys=True, default=str)
        if key not in self._corpora:
            self._corpora[key] = self._load(config, run.results.corpus.path if run.results.corpus else None)
        corpus, fingerprint, note = self._corpora[key]
        if corpus is None:
            return None, note
        if config_hash(config, fingerprint) != run.results.config_hash:
            return None, (f"the corpus at {config.corpus.path or 'the synthetic generator'} is not the one "
                          f"{run.path} audited (its fingerprint differs); document kinds and texts are left out")
        return corpus, None

    @staticmethod
    def _load(config, resolved_path=None):


        if config.corpus.path is not None and not Path(config.corpus.path).exists() \
                and resolved_path and Path(resolved_path).exists():
            # results.json records the absolute path; the hash keeps the path as typed
            config = copy.deepcopy(config)
            config.corpus.path = resolved_path
        if config.corpus.path is not None and not Path(config.corpus.path).exists():
            return None, None, (f"corpus file {config.corpus.path} not found from {Path.cwd()} (config.toml "
                                "paths are relative to where the audit ran); run `topicaudit report` from there "
                                "to include document kinds and texts")
        try:
            corpus = load_audit_corpus(config)
        except UserError as error:
            return None, None, f"cannot reload the corpus: {error}"
        return corpus, corpus_fingerprint(corpus), None
