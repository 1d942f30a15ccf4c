"""A Python process that runs a test's script in a folder, with the folder ``lib`` beside it first on PYTHONPATH, and
prints JSON last: the run cache's working-directory tests start one per folder (as a user's processes would) and
compare what each records and decides."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys


def run_script(script: str, folder, *args, record=None, module: bool = False, lib=None, variables=None):
    """The JSON the script printed last, run in ``folder`` with ``record`` on stdin (``python -c``; module: the script
    saved in ``lib`` under a name of its text and run with ``python -m``, which puts the folder first on sys.path);
    lib: another folder than ``lib``; variables: set in its environment."""
    lib = folder.parent / "lib" if lib is None else lib
    environment = {**os.environ, "PWD": str(folder),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(lib), os.environ.get("PYTHONPATH")])),
                   **(variables or {})}
    command = [sys.executable, "-c", script]
    if module:
        name = "script_" + hashlib.sha256(script.encode()).hexdigest()[:12]
        (lib / f"{name}.py").write_text(script)
        command = [sys.executable, "-m", name]
    done = subprocess.run([*command, *args], cwd=folder, text=True, input=json.dumps(record), env=environment,
                          capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def folders(root, files: dict[str, str]):
    """Folders ``a``, ``b`` and ``lib`` under ``root`` (two working directories and the plug-ins' folder), holding
    ``files`` (a path relative to ``root``: its text)."""
    for name in ("a", "b", "lib"):
        (root / name).mkdir()
    for path, text in files.items():
        (root / path).write_text(text)
    return root / "a", root / "b", root / "lib"


def kernels(prefix: str) -> dict[str, str]:
    """Two kernels a plug-in may import by a name it learns (``PREFIX_k_a`` patched, ``PREFIX_k_b`` not)."""
    return {f"lib/{prefix}_k_a.py": "PATCHED = True\n", f"lib/{prefix}_k_b.py": ""}


def plugin_script(plug_in: str, fit: str) -> str:
    """A process that imports the plug-in ``PLUG_IN:L`` as topicaudit does and, given a record on stdin, prints the
    entries that changed; given none ("null"), runs ``fit`` (one line) inside a plug-in's fit and prints the record."""
    return f"""import json, os, sys
import topicaudit
import topicaudit.loaded_code as loaded_code
from topicaudit.engine.storage import fitted_code
from topicaudit.targets.plugins import LEARNER_GROUP, load_class
load_class("{plug_in}:L", LEARNER_GROUP, "the test")
record = json.loads(sys.stdin.read())
if record is not None:
    print(json.dumps(fitted_code.changed(record, names=False)))
    raise SystemExit
with loaded_code.running(), fitted_code.plugin_run(True), loaded_code.fitting():
    {fit}
    print(json.dumps(fitted_code.loaded_outside()))
"""
