"""Hostile pass XIX-ze (tests/hostile_xix_ze_cases.md): a cached ``assert_privacy`` fits in a new Python process,
which imports the learner's module by this process's ``sys.path``; the verdict it gives must be of the code this
process runs, never of another file of the same module name."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from topicaudit.engine.check import assert_privacy

CONFIG = {"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2, "vocabulary": "all"},
          "attack": {"shadows": 0, "canaries": {"count": 20}}}

LEARNER = '''
import numpy as np

from topicaudit.targets.base import NO_GUARANTEE


class Learner:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        row = {row}
        phi = np.vstack([row] * self.k)
        return (phi / phi.sum(axis=1, keepdims=True)).astype(np.float32)

    def guarantee(self):
        return NO_GUARANTEE
'''


def test_a_learner_loaded_from_its_path_is_audited_not_another_file_of_its_name(tmp_path, monkeypatch):
    """C1: a test loaded the working copy of its learner by its path (``spec_from_file_location``) while a release
    of the same module name was on sys.path. The new process imported the release, fitted and kept it under the
    release's key, and the call reported its NO SIGNAL for the working copy, which leaks (VIOLATED without a
    cache)."""
    name = "zl_xix_ze_c1"
    (tmp_path / "work").mkdir()
    (tmp_path / "release").mkdir()
    (tmp_path / "work" / f"{name}.py").write_text(textwrap.dedent(LEARNER.format(
        row="1.0 + 50.0 * np.asarray(X.sum(axis=0)).ravel()")))  # leaks every document's words
    (tmp_path / "release" / f"{name}.py").write_text(textwrap.dedent(LEARNER.format(row="np.ones(X.shape[1])")))
    monkeypatch.syspath_prepend(str(tmp_path / "release"))
    spec = importlib.util.spec_from_file_location(name, tmp_path / "work" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    with pytest.warns(RuntimeWarning, match="imports other code for this audit than this process runs"):
        with pytest.raises(AssertionError, match="VIOLATED"):
            assert_privacy(CONFIG, epsilon=0.01, learner=module.Learner(2), cache=tmp_path / "cache")


SITECUSTOMIZE = '''
import numpy as np
import topicaudit.targets.learners.lda as lda


def uniform(self, X, seed, *args, **kwargs):
    phi = np.ones((self.k, X.shape[1]), np.float32)
    return phi / phi.sum(axis=1, keepdims=True)


lda.VariationalLDA.fit = uniform
'''


def test_a_patch_python_runs_at_start_is_in_the_key_of_its_runs(tmp_path):
    """S1: a sitecustomize.py on PYTHONPATH (a CI's start-up shim) replaced the built-in learner's fit in every
    process, the new process of a cached assert_privacy included: its run was kept under the files' key, and
    `check` without the shim reused it, NO SIGNAL where the learner gives VIOLATED."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    config = tmp_path / "audit.toml"
    config.write_text('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
                      "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    cache = tmp_path / "cache"
    call = ("from topicaudit.engine.check import assert_privacy\n"
            f"print(assert_privacy({str(config)!r}, epsilon=0.01, cache={str(cache)!r}).verdict)\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tmp_path / "shim"), os.environ.get("PYTHONPATH")]))}
    shimmed = subprocess.run([sys.executable, "-c", call], env=environment, capture_output=True, text=True,
                             cwd=tmp_path)
    assert shimmed.returncode == 0 and shimmed.stdout.strip().endswith("NO SIGNAL"), shimmed.stderr[-2000:]
    fresh = subprocess.run([sys.executable, "-m", "topicaudit", "check", str(config), "--epsilon", "0.01",
                            "--cache", str(cache)], capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr


def test_a_cached_audit_does_not_fit_in_a_ray_session_of_the_calling_process(tmp_path):
    """R2: the new process joined the Ray session the test had started; its workers, started while PYTHONPATH named a
    start-up shim (sitecustomize.py replacing the built-in learner's fit), fitted the shadows and canary releases,
    kept under the key of the new process, which had no shim: `check` without it reused NO SIGNAL where the
    learner gives VIOLATED. Run in a process of its own: the session is the script's, not one an earlier test left."""
    pytest.importorskip("ray")
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    shimmed = os.pathsep.join(filter(None, [str(tmp_path / "shim"), os.environ.get("PYTHONPATH")]))
    script = textwrap.dedent(f"""
        import os
        import ray
        from topicaudit.engine.check import assert_privacy

        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = {shimmed!r}
        ray.init(num_cpus=1, include_dashboard=False)
        if before is None:
            del os.environ["PYTHONPATH"]  # the shim reaches the session's workers only
        else:
            os.environ["PYTHONPATH"] = before
        config = {{"synthetic": {{"n_docs": 150, "n_words": 250}}, "target": {{"k": 3, "vocabulary": "all"}},
                  "attack": {{"shadows": 2, "canaries": {{"count": 60}}}}}}
        try:
            assert_privacy(config, epsilon=0.01, cache={str(tmp_path / "cache")!r})
        except AssertionError as error:
            print("VIOLATED" if "VIOLATED" in str(error) else error)
        else:
            print("not violated")
        ray.shutdown()
        """)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900,
                          cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("VIOLATED"), (done.stdout, done.stderr[-2000:])


def test_a_module_a_start_up_file_imports_is_in_the_key_too(tmp_path):
    """S1c: the sitecustomize.py kept, the module it imports from another folder emptied, `check` reused the shim's
    run, NO SIGNAL where the learner gives VIOLATED: every module file a bare start loads is digested
    (``engine.storage.startup_code``)."""
    (tmp_path / "shim").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "shimpatch.py").write_text(SITECUSTOMIZE)
    (tmp_path / "shim" / "sitecustomize.py").write_text(
        f"import sys\nsys.path.append({str(tmp_path / 'lib')!r})\nimport shimpatch\n")
    config = tmp_path / "audit.toml"
    config.write_text('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nk = 3\nvocabulary = "all"\n'
                      "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")
    cache = tmp_path / "cache"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tmp_path / "shim"), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "topicaudit", "check", str(config), "--epsilon", "0.01", "--cache", str(cache)]
    shimmed = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert shimmed.returncode == 0 and "NO SIGNAL" in shimmed.stdout, shimmed.stderr[-2000:]
    (tmp_path / "lib" / "shimpatch.py").write_text("")  # the start-up file itself unchanged
    fresh = subprocess.run(command, env=environment, capture_output=True, text=True, cwd=tmp_path)
    assert fresh.returncode == 1 and fresh.stdout.startswith("VIOLATED"), (fresh.stdout, fresh.stderr[-2000:])
    assert "reusing" not in fresh.stderr
