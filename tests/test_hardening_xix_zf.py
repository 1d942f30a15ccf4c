"""Hostile pass XIX-zf (tests/hostile_xix_zf_cases.md): the code Python runs at start, in the run cache's key, must be
found as every process of this one starts: from its working directory."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

SITECUSTOMIZE = """
import numpy as np
import topicaudit.targets.learners.lda as lda


def uniform(self, X, seed, *args, **kwargs):
    phi = np.ones((self.k, X.shape[1]), np.float32)
    return phi / phi.sum(axis=1, keepdims=True)


lda.VariationalLDA.fit = uniform
"""

CONFIG = ('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
          "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")


@pytest.mark.parametrize("entry", ["shim", ""], ids=["relative", "empty-entry"])
def test_a_start_up_shim_on_a_relative_pythonpath_is_in_the_key(tmp_path, entry):
    """S2: `PYTHONPATH=sc` (or the empty entry of `PYTHONPATH=$PYTHONPATH:/x`, the working directory) named a
    sitecustomize.py replacing the built-in learner's fit; the bare start that keys start-up code was asked from `/`,
    where the relative entry names nothing: the shim's NO SIGNAL was kept under the key of the code without it, and
    `check` without the shim reused it where the learner gives VIOLATED."""
    folder = tmp_path / entry if entry else tmp_path
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "audit.toml").write_text(CONFIG)
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    others = os.environ.get("PYTHONPATH")
    shim = {**os.environ, "PYTHONPATH": os.pathsep.join([entry, *filter(None, [others or (None if entry else
                                                                                         "/nonexistent")])])}
    shimmed = subprocess.run(command, env=shim, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    (folder / "sitecustomize.py").unlink()
    fresh = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr


SCRIPT = '''
import argparse, sys
import numpy as np
from topicaudit.engine.check import assert_privacy
from topicaudit.targets.base import NO_GUARANTEE

parser = argparse.ArgumentParser()
parser.add_argument("--strength", type=float, default=0.0)
parser.add_argument("--cache")
ARGS = parser.parse_args()


class Learner:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = 1.0 + ARGS.strength * np.asarray(X.sum(axis=0)).ravel()
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE


if __name__ == "__main__":
    config = {"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2, "vocabulary": "all"},
              "attack": {"shadows": 0, "canaries": {"count": 20}}}
    try:
        print(assert_privacy(config, epsilon=0.01, learner=Learner(2), cache=ARGS.cache).verdict)
    except AssertionError as error:
        print(str(error).split(":")[0])
'''


def test_a_script_that_reads_its_command_line_is_loaded_with_it_in_the_new_process(tmp_path):
    """M-argv: a learner class of the calling script reads a setting its script parses from the command line at
    import (`--strength 50`: it memorises); the new process loaded the script with `sys.argv == ['-c']`, fitted the
    default (strength 0) and the caller reported its NO SIGNAL for the learner it runs, which gives VIOLATED."""
    (tmp_path / "script").mkdir()
    (tmp_path / "script" / "bench.py").write_text(SCRIPT)
    time.sleep(2)  # a script written within the second its process starts reads as changed since (fitted here)
    done = subprocess.run([sys.executable, str(tmp_path / "script" / "bench.py"), "--strength", "50", "--cache",
                           str(tmp_path / "cache")], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "changed after this process imported it" not in done.stderr  # fitted by the new process
    assert done.stdout.strip().splitlines()[-1] == "VIOLATED", (done.stdout, done.stderr[-2000:])


def test_code_a_start_up_file_runs_from_a_file_it_reads_is_in_the_key(tmp_path):
    """S3: a sitecustomize.py runs a CI's shim kept in a settings file (`exec(open(path).read())`), a file no
    module is loaded from; the shim replaced the built-in learner's fit; the shim then edited to patch nothing (the
    same imports), `check` reused its NO SIGNAL where the learner gives VIOLATED."""
    (tmp_path / "shim").mkdir()
    settings = tmp_path / "ci_shim.txt"
    settings.write_text(SITECUSTOMIZE)
    (tmp_path / "shim" / "sitecustomize.py").write_text(f"exec(open({str(settings)!r}).read())\n")
    (tmp_path / "audit.toml").write_text(CONFIG)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tmp_path / "shim"), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    shimmed = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    again = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert "reusing" in again.stderr and "NO SIGNAL" in again.stdout, again.stderr[-2000:]  # the same code: reused
    settings.write_text("import numpy as np\nimport topicaudit.targets.learners.lda as lda\n")
    fresh = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr


FAKE_GENSIM = '''
import numpy as np


class LdaModel:  # a test suite's fast stand-in: flat topics
    def __init__(self, bow, num_topics, id2word, **options):
        self.k, self.n = num_topics, len(id2word)

    def get_topics(self):
        return np.full((self.k, self.n), 1.0 / self.n, np.float32)
'''


def test_a_stand_in_of_a_library_on_the_path_is_not_the_library(tmp_path):
    """L1: a fake gensim on PYTHONPATH (a test suite's stand-in) was keyed by the installed gensim's version (its
    dist-info), its NO SIGNAL kept, and `check` with gensim itself reused it where the learner gives VIOLATED."""
    pytest.importorskip("gensim")
    (tmp_path / "fakes" / "gensim" / "models").mkdir(parents=True)
    (tmp_path / "fakes" / "gensim" / "__init__.py").write_text("")
    (tmp_path / "fakes" / "gensim" / "models" / "__init__.py").write_text(FAKE_GENSIM)
    (tmp_path / "audit.toml").write_text(CONFIG.replace("[target]\n", '[target]\nlearner = "gensim-lda"\n'))
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tmp_path / "fakes"), os.environ.get("PYTHONPATH")]))}
    faked = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert faked.returncode == 0 and "NO SIGNAL" in faked.stdout, faked.stderr[-2000:]
    real = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert real.returncode == 1 and real.stdout.startswith("VIOLATED"), (real.stdout, real.stderr[-2000:])
    assert "reusing" not in real.stderr


def test_a_start_up_shim_in_a_zip_archive_is_in_the_key(tmp_path):
    """S3b: PYTHONPATH names a zip archive holding sitecustomize.py; its module file, inside the archive, could not be
    read, so every archive's sitecustomize digested alike: the shim's NO SIGNAL was reused when the archive was
    replaced by one that patches nothing."""
    import zipfile

    def archive(text):
        with zipfile.ZipFile(tmp_path / "shim.zip", "w") as shim:
            shim.writestr("sitecustomize.py", text)

    archive(SITECUSTOMIZE)
    (tmp_path / "audit.toml").write_text(CONFIG)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tmp_path / "shim.zip"), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    shimmed = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    archive("import numpy as np\nimport topicaudit.targets.learners.lda as lda\n")
    fresh = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr


POST_IMPORT_HOOK = '''
import importlib.abc
import importlib.util
import sys


class PatchOnImport(importlib.abc.MetaPathFinder):
    """As ddtrace, OpenTelemetry or wrapt do: run code of another file once a module is imported, later."""

    def find_spec(self, name, path=None, target=None):
        if name != "topicaudit.targets.learners.lda":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            sys.path.append(LIB)
            import ci_patches  # noqa: F401

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, PatchOnImport())
'''


def test_start_up_code_that_installs_an_import_hook_is_never_reused(tmp_path):
    """S4: an unchanged sitecustomize.py installs a post-import hook that imports ci_patches (replacing the built-in
    learner's fit) from another folder when the learner is imported; ci_patches edited to patch nothing, `check`
    reused the patched run, NO SIGNAL where the learner gives VIOLATED. A start that leaves an import hook of its
    own is keyed by nothing: no run is reused, and a warning says so."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "ci_patches.py").write_text(SITECUSTOMIZE)
    (tmp_path / "shim" / "sitecustomize.py").write_text(f"LIB = {str(tmp_path / 'lib')!r}\n" + POST_IMPORT_HOOK)
    (tmp_path / "audit.toml").write_text(CONFIG)
    command = [sys.executable, "-m", "topicaudit", "check", "audit.toml", "--epsilon", "0.01", "--cache", "cache"]
    shim = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "shim"),
                                                                       os.environ.get("PYTHONPATH")]))}
    shimmed = subprocess.run(command, env=shim, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    assert "installs an import hook" in shimmed.stderr and "thread running (sitecustomize:PatchOnImport)" in shimmed.stderr
    (tmp_path / "lib" / "ci_patches.py").write_text("")
    fresh = subprocess.run(command, env=shim, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr
