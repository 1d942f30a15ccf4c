"""assert_privacy's cached audits are fitted in a fresh Python process (``engine.cached_audit``): the run the cache
keeps under the files' key is the files' run, whatever the calling process replaced in memory (hostile passes
XIX-ya and XIX-za: a test's stub of a learner's method, stored under the real code's key, was reused later as the
real learner's audit). Errors and warnings of the new process come back as their own kinds."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from topicaudit.engine.check import assert_privacy
from topicaudit.engine.execution import fresh_process
from topicaudit.errors import UserError
from topicaudit.targets.learners.lda import VariationalLDA

CANARY_ONLY = {"synthetic": {"n_docs": 150, "n_words": 250}, "target": {"k": 3},
               "attack": {"shadows": 0, "canaries": {"count": 60}}}
CLAIM = 5  # never refuted by 60 canaries (test_run_cache.py)


def test_a_method_replaced_in_this_process_is_not_what_a_cached_audit_fits(tmp_path, monkeypatch):
    def stub(self, X, seed):
        raise RuntimeError("the stub ran")

    monkeypatch.setattr(VariationalLDA, "fit", stub)  # a built-in learner: no comparison of plug-in files sees it
    with pytest.raises(RuntimeError, match="the stub ran"):  # not kept in a cache: audited as it runs here
        assert_privacy(CANARY_ONLY, epsilon=CLAIM, cache=False, output=tmp_path / "here")
    result = assert_privacy(CANARY_ONLY, epsilon=CLAIM, cache=tmp_path / "cache")  # kept: fitted from the files
    assert result.verdict == "CONSISTENT"
    (entry,) = [p for p in (tmp_path / "cache").iterdir() if p.name != "sizing"]
    assert (entry / "models" / "canary-target.npz").is_file()

    def no_new_process(*args, **kwargs):
        raise AssertionError("a finished cached run started a new process")

    monkeypatch.setattr(fresh_process, "call_fresh", no_new_process)
    again = assert_privacy(CANARY_ONLY, epsilon=CLAIM, cache=tmp_path / "cache")  # reused here, at once
    assert again.verdict == "CONSISTENT" and again.epsilon_lower_bound == result.epsilon_lower_bound


FIT_ENDINGS = {
    "refuses": ("raise ValueError('too few documents for this learner')", UserError, "too few documents"),
    "exits": ("sys.exit(0)", UserError, "its own fit raised SystemExit: 0"),
    "asserts": ("assert False, 'a learner assertion'", UserError, "its own fit raised AssertionError: a learner"),
    "raises": ("raise KeyError('odd')", UserError, "its own fit raised KeyError: 'odd'"),
    "warns": ("warnings.warn('a note from the learner', UserWarning)", None, "a note from the learner"),
}


@pytest.mark.parametrize("ending", sorted(FIT_ENDINGS))
def test_a_plug_in_ending_in_the_new_process_ends_the_call_as_in_this_one(tmp_path, monkeypatch, ending):
    code, kind, message = FIT_ENDINGS[ending]
    module = f"fresh_{ending}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(f"""
        import sys
        import warnings

        import numpy as np

        from topicaudit.targets.base import NO_GUARANTEE


        class Learner:
            def __init__(self, k):
                self.k = k

            def fit(self, X, seed):
                {code}
                phi = np.ones((self.k, X.shape[1]), np.float32)
                return phi / phi.sum(axis=1, keepdims=True)

            def guarantee(self):
                return NO_GUARANTEE
        """))
    monkeypatch.syspath_prepend(str(tmp_path))  # the new process imports the plug-in by this process's sys.path
    config = {**CANARY_ONLY, "target": {"k": 3, "learner": f"{module}:Learner"}}
    if kind is None:  # the fit's warnings, as a fit in this process gives them
        with pytest.warns(RuntimeWarning, match=message):
            assert assert_privacy(config, epsilon=CLAIM, cache=tmp_path / "cache").verdict != "VIOLATED"
    else:
        with pytest.raises(kind, match=message):
            assert_privacy(config, epsilon=CLAIM, cache=tmp_path / "cache")


def test_a_new_process_that_ends_without_answering_is_no_verdict():
    with pytest.raises(RuntimeError, match="ended \\(signal 9\\) before it answered"):
        fresh_process._answered(b"", -9)
    with pytest.raises(KeyboardInterrupt):
        fresh_process._answered(b'{"kind": "interrupt", "warnings": []}', 0)
    with pytest.raises(UserError, match="what to fix"):
        fresh_process._answered(b'{"kind": "user", "class": "topicaudit.errors:UserError", "message": "what to fix"}',
                                0)
    with pytest.raises(RuntimeError, match="SomeError: x"):  # another's class is never imported by its name
        fresh_process._answered(b'{"kind": "error", "class": "os:SomeError", "message": "x"}', 0)


SCRIPT = '''
import numpy as np
from topicaudit.engine.check import assert_privacy
from topicaudit.targets.base import NO_GUARANTEE


class Uniform:
    def __init__(self, k):
        self.k = k

    def fit(self, X, seed):
        phi = np.ones((self.k, X.shape[1]), np.float32)
        return phi / phi.sum(axis=1, keepdims=True)

    def guarantee(self):
        return NO_GUARANTEE


GUARD
    config = {"synthetic": {"n_docs": 150, "n_words": 250}, "target": {"k": 3},
              "attack": {"shadows": 0, "canaries": {"count": 60}}}
    print(assert_privacy(config, epsilon=5, learner=Uniform(k=3)).run_dir)
'''


def test_a_learner_the_calling_script_defines_is_loaded_from_that_script(tmp_path):
    """A class of the script itself (``__main__:Uniform``) reaches the new process as multiprocessing's spawn
    brings it: the script run as ``__mp_main__``; a script that calls assert_privacy unguarded is told why."""
    env = {**os.environ, "TOPICAUDIT_CACHE_DIR": str(tmp_path / "cache"), "TOPICAUDIT_INTEGRITY_KEY": "off"}
    guarded = tmp_path / "guarded.py"
    guarded.write_text(SCRIPT.replace("GUARD", 'if __name__ == "__main__":'))
    unguarded = tmp_path / "unguarded.py"
    unguarded.write_text(SCRIPT.replace("GUARD", "if True:"))
    time.sleep(1.1)  # a script changed in the second its process started counts as changed (never reused): loaded_code
    first, again = (subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True, env=env,
                                   timeout=600) for _ in range(2))
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    run_dir = Path(first.stdout.strip())
    assert again.stdout.strip() == str(run_dir) and run_dir.parent == tmp_path / "cache" / "runs"
    done = subprocess.run([sys.executable, str(unguarded)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode != 0 and 'put the script\'s calls under `if __name__ == "__main__":`' in done.stderr


def test_the_new_process_stops_when_its_caller_is_killed(tmp_path):
    """XIX-ze N3: a caller killed mid-audit (kill -9) left its new process fitting to the end, keeping the cores."""
    (tmp_path / "slow_fit.py").write_text(textwrap.dedent("""
        import time

        from topicaudit.targets.base import NO_GUARANTEE


        class Learner:
            def __init__(self, k):
                self.k = k

            def fit(self, X, seed):
                time.sleep(300)

            def guarantee(self):
                return NO_GUARANTEE
        """))
    time.sleep(1.1)  # not changed in the second its process starts (loaded_code)
    call = ("import sys\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "from topicaudit.engine.check import assert_privacy\n"
            f"assert_privacy({{**{CANARY_ONLY!r}, 'target': {{'k': 3, 'learner': 'slow_fit:Learner'}}}}, "
            f"epsilon=5, cache={str(tmp_path / 'cache')!r})\n")
    caller = subprocess.Popen([sys.executable, "-c", call], env={**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child = None
        for _ in range(1500):  # the new process, once it fits (its lock taken); minutes on a loaded machine
            found = subprocess.run(["pgrep", "-P", str(caller.pid)], capture_output=True, text=True).stdout.split()
            if found and list((tmp_path / "cache").glob("*/.lock")):
                child = int(found[0])
                break
            time.sleep(0.2)
        assert child is not None, "the new process never started its fit"
        time.sleep(2)
        caller.kill()
        caller.wait()
        for _ in range(600):
            if not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the new process kept fitting after its caller was killed")
    finally:
        caller.kill()
