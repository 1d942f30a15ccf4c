"""An imported-then-edited plug-in, as passes XIX-u and XIX-v test it: the plug-in's module in a folder on sys.path,
the settings that name it, and the run-cache entry a new Python process (importing the files as they are now) looks
for, which the entry of the code still loaded here must never be."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FRESH = ("import json, sys; from topicaudit.engine.configuration.loading import config_from_dict; "
         "from topicaudit.engine.storage.run_cache import cached_run_dir; "
         "print(cached_run_dir(config_from_dict(json.loads(sys.argv[1])), sys.argv[2]))")


def settings(module: str) -> dict:
    """A tiny canary-only audit of ``module:Leak`` (every word kept, so a uniform Φ and a leaking one differ)."""
    return {"synthetic": {"n_docs": 50, "n_words": 60},
            "target": {"k": 2, "learner": f"{module}:Leak", "vocabulary": "all"},
            "attack": {"shadows": 0, "canaries": {"count": 10}}}


def installed(tmp_path: Path, monkeypatch, module: str, source: str):
    """``module`` written as ``site/module.py``, site on sys.path for the test; forgotten after it."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop(module, None)


def fresh_process_entry(site: Path, cache, settings: dict) -> str:
    """The cache entry a new Python process, importing the plug-in's files as they are now, looks for."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    done = subprocess.run([sys.executable, "-c", FRESH, json.dumps(settings), str(cache)], env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def as_another_process(monkeypatch) -> None:
    """Forget what this process loaded and opened (``topicaudit.loaded_code``'s records), as the next process of a
    CI would start: a test that edits a plug-in it imported, then reads its digest again, stands for that process."""
    from topicaudit import loaded_code
    monkeypatch.setattr(loaded_code, "_LOADED", {})
    monkeypatch.setattr(loaded_code, "_OPENED", {})
