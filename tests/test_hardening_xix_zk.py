"""Hostile pass XIX-zk (tests/hostile_xix_zk_cases.md): code a start leaves behind reads a file during the fit and
runs it as code in a form that is not the file's text (stripped, unmarshalled behind a header, unpickled, or too
large for the compiled-text match); a run fitted with one content of that file is never reused for another."""
from __future__ import annotations

import importlib.util
import json
import marshal
import os
import pickle
import subprocess
import sys
import threading

import pytest

import topicaudit.engine.run as engine_run
import topicaudit.inputs.corpus as corpus_module
from topicaudit.engine.storage import fitted_code, key_places
from topicaudit.inputs.corpus import load_corpus
from test_hardening_xix_zh import PATCHES, _check  # noqa: E402 - the zh pass's patch texts and `check` runner

# ci_patches' text made to replace the built-in learner's fit itself, when run (exec) in a fresh namespace.
SELF = PATCHES["on"] + "import sys\napply(sys.modules['topicaudit.targets.learners.lda'])\n"
HARMLESS = "x = 1\n"

START = """
import marshal, os, pickle, subprocess, sys
def _load(module):
{body}
def _profile(frame, event, arg):
    module = sys.modules.get("topicaudit.targets.learners.lda")
    if event == "call" and module is not None and hasattr(module, "VariationalLDA") and not getattr(module, "_ci", 0):
        module._ci = True
        sys.setprofile(None)
        _load(module)
sys.setprofile(_profile)
"""
# T1: the text stripped before it runs; T2: code unmarshalled from bytes behind a 4-byte header.
STRIPPED = "    exec(open({file!r}).read().strip(), {{}})"
MARSHALLED = "    exec(marshal.loads(open({file!r}, 'rb').read()[4:]), {{}})"


def _write(kind, file, text):
    if kind == "stripped":
        file.write_text(text + "\n\n")
    else:
        file.write_bytes(b"ZK01" + marshal.dumps(compile(text, "ci", "exec")))


@pytest.mark.parametrize("kind", ["stripped", "marshalled"])
def test_a_file_start_up_code_reads_and_runs_as_code_keys_the_run(tmp_path, kind):
    """T1, T2: sitecustomize.py (unchanged) leaves a profile function that, once the built-in learner is loaded,
    runs code from p/ci.dat (its text stripped, or marshalled code behind a header); ci.dat replaced ``fit``. Edited
    to patch nothing, `check` on the same cache printed "reusing …" and NO SIGNAL, exit 0; a fresh cache gives
    VIOLATED: no digest matched the compiled text, and marshalled code is compiled by nobody."""
    data, shim = tmp_path / "ci.dat", tmp_path / "shim"
    shim.mkdir()
    body = (STRIPPED if kind == "stripped" else MARSHALLED).format(file=str(data))
    (shim / "sitecustomize.py").write_text(START.format(body=body))
    environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}
    seen = []
    for text in (SELF, HARMLESS):
        _write(kind, data, text)
        done = _check(tmp_path, environment, tmp_path / "cache")
        seen.append((done.returncode, done.stdout.split(":")[0], "reusing" in done.stderr))
        assert done.returncode in (0, 1), done.stderr[-3000:]
    assert seen == [(0, "NO SIGNAL", False), (1, "VIOLATED", False)], seen


def test_files_code_outside_the_key_opens_are_kept_whatever_their_form_or_size(tmp_path, monkeypatch):
    """T2, T3, T4 in one process: a helper outside every digest reads marshalled bytes, a pickle, and a text larger
    than the compiled-text match's limit; each file is listed with the run. The corpus-like file topicaudit's own code
    reads is not (its content is keyed otherwise)."""
    blob, pickled, large = tmp_path / "blob.bin", tmp_path / "p.pkl", tmp_path / "big.txt"
    corpus = tmp_path / "corpus.json"
    made = {corpus: json.dumps({"text": ["alpha beta gamma delta", "delta alpha beta gamma"]}).encode(),
            blob: b"ZK01" + marshal.dumps(compile("y = 2", "ci", "exec")), pickled: pickle.dumps((1, 2)),
            large: b"z = 3\n" + b"#" * 64 + b"\n"}
    for file, content in made.items():  # written by another process (a file this one wrote is its own output)
        subprocess.run([sys.executable, "-c", "import sys; open(sys.argv[1], 'wb').write(bytes.fromhex(sys.argv[2]))",
                        str(file), content.hex()], check=True)
    monkeypatch.setattr(fitted_code, "_LARGEST_READ", 16)
    helper = tmp_path / "zk_reader.py"
    helper.write_text("import marshal, pickle\n"
                      "def read(blob, pickled, large):\n"
                      "    exec(marshal.loads(open(blob, 'rb').read()[4:]), {})\n"
                      "    pickle.loads(open(pickled, 'rb').read())\n"
                      "    exec(open(large).read().strip(), {})\n")
    spec = importlib.util.spec_from_file_location("zk_reader", helper)
    module = importlib.util.module_from_spec(spec)
    sys.modules["zk_reader"] = module
    try:
        spec.loader.exec_module(module)
        module.read(str(blob), str(pickled), str(large))
        load_corpus(corpus, format="json", preprocess=False)
        found = fitted_code.loaded_outside()
    finally:
        sys.modules.pop("zk_reader", None)
    assert {str(blob), str(pickled), str(large), str(helper)} <= set(found), sorted(found)[-10:]
    assert found[str(blob)] == fitted_code.file_digest(blob)
    assert str(corpus) not in found


def test_a_file_read_through_topicaudit_for_code_outside_the_key_is_kept(tmp_path):
    """T18: start-up code reads its patch through one of topicaudit's own readers (a JSON corpus whose text it runs),
    called from a profile function inside topicaudit's own calls: the opener is topicaudit's reader, but code outside
    the key lies between it and the outermost of topicaudit's calls. A script or test calling topicaudit (below all of
    topicaudit's calls) does not make topicaudit's own reads its code."""
    reader, engine = corpus_module.__file__, engine_run.__file__
    start = str(tmp_path / "sitecustomize.py")
    keyed = set(fitted_code.KEYED)
    assert key_places.opened_outside((reader, start, start, engine, engine), keyed)
    assert key_places.opened_outside(("<string>", engine), keyed)
    assert key_places.opened_outside((start, threading.__file__), keyed)
    assert not key_places.opened_outside((reader, engine, str(tmp_path / "test_x.py"), pytest.__file__), keyed)
    import_system = ("<frozen importlib._bootstrap_external>", "<frozen importlib._bootstrap>", start)
    assert not key_places.opened_outside(import_system, keyed)
    # (a caller's own ``get_data``, with no import under way, is the caller's read: hostile pass XIX-zv C5)
    assert key_places.opened_outside(("<frozen importlib._bootstrap_external>", start), keyed)
