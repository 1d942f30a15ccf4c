"""A plug-in's saved models are fitted again before any is reused (``topicaudit.engine.replay``): a learner that now
fits otherwise, whatever input told it to (here a file read through the C library, which no hook of topicaudit sees),
never has the run of its earlier behaviour reused; the same behaviour is reused as before."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit_files import audit_command

from topicaudit.engine.storage import run_cache
from topicaudit.engine.storage.rundir import RunDirectory
from topicaudit.errors import UserError

DOCS = Path(__file__).resolve().parent.parent / "docs"

# A learner whose Φ is flat (no leak) while mode.txt says "flat", read with the C library's own open and read.
PLUG = """import ctypes, os
import numpy as np
from topicaudit.targets.learners.lda import VariationalLDA

_LIBC = ctypes.CDLL(None)


def _mode():
    found = ctypes.create_string_buffer(16)
    handle = _LIBC.open(os.environ["RP_MODE"].encode(), 0)
    _LIBC.read(handle, found, 15)
    _LIBC.close(handle)
    return found.value


class L(VariationalLDA):
    def fit(self, X, seed):
        phi = super().fit(X, seed)
        return np.full_like(phi, 1.0 / phi.shape[1]) if _mode() == b"flat" else phi


class Timed(L):  # info holds what the fit measured (XIX-zx X6); says so on standard output (XIX-zy Y5)
    def fit(self, X, seed, record=None):
        import time
        started = time.perf_counter()
        phi = super().fit(X, seed)
        if record is not None:
            record.info["fit_seconds"] = time.perf_counter() - started
        print("PLUG-IN SAYS HELLO")
        os.write(1, b"RAW WRITE\\n")
        return phi


class Monitored(VariationalLDA):  # a privacy monitor in info, its value read through the C library (XIX-zz Z6)
    def fit(self, X, seed, record=None):
        phi = super().fit(X, seed)
        if record is not None:
            record.info["monitor"] = {"epsilon_document": [np.float32(_mode())]}  # NumPy's: exit 3 (XIX-zzr R2)
        return phi


class Loud(L):  # says so at construction; its fit leaves a thread writing to descriptor 1 (XIX-zz Z1, Z2)
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        print("BANNER")

    def fit(self, X, seed):
        import threading, time

        def chatter():
            for _ in range(100):
                os.write(1, b"THREAD\\n")
                time.sleep(0.05)
        threading.Thread(target=chatter, daemon=True).start()
        return super().fit(X, seed)


class Refuses(L):  # a constructor raising what no parameter check expects (XIX-zz Z5)
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if _mode() == b"ctor":
            raise RuntimeError("not on this machine")


class Claim(VariationalLDA):  # fits as VariationalLDA; claims the ε mode.txt holds (XIX-zx X1)
    def guarantee(self):
        from topicaudit.targets.privacy.guarantee import Guarantee
        return Guarantee(epsilon=float(_mode()), delta=0.0, adjacency="document", basis="paper-claim")


class Chunked(VariationalLDA):
    # deterministic for one thread count, which it reads as OpenMP code does (XIX-zx X3): Φ's rows normalised by
    # float32 sums over one chunk per thread
    def fit(self, X, seed):
        phi = super().fit(X, seed).astype(np.float32)
        phi = phi * (1 + np.random.default_rng(seed).random(phi.shape, dtype=np.float32))
        threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())
        norms = [sum((np.float32(np.sum(c, dtype=np.float32)) for c in np.array_split(row, threads)), np.float32(0))
                 for row in phi]
        return phi / np.array(norms, dtype=np.float32)[:, None]
"""
CONFIG = ('[synthetic]\nn_docs = 150\nn_words = 250\n[target]\nlearner = "rp_plug:L"\nk = 3\nvocabulary = "all"\n'
          "[attack]\nshadows = 0\n[attack.canaries]\ncount = 60\n")


@pytest.fixture
def plug(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "rp_plug.py").write_text(PLUG)
    (tmp_path / "audit.toml").write_text(CONFIG)
    (tmp_path / "claim.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Claim"))
    (tmp_path / "chunked.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Chunked")
                                           .replace("shadows = 0", "shadows = 2"))
    mode = tmp_path / "mode.txt"
    environment = {**os.environ, "TOPICAUDIT_INTEGRITY_KEY": "off", "RP_MODE": str(mode),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "lib"), os.environ.get("PYTHONPATH")]))}

    def run(command, text, script=None):
        mode.write_text(text)
        return subprocess.run([sys.executable, *(script or ["-m", "topicaudit", *command])], env=environment,
                              cwd=tmp_path, capture_output=True, text=True, timeout=900)
    return run


def test_a_cached_run_is_reused_only_while_the_plug_in_fits_it(plug, tmp_path):
    """mode.txt flat → real → real → flat: the real learner's leak is never hidden by the flat run kept before it;
    each behaviour's run is found again (on the old code, the second check reused the flat run: NO SIGNAL)."""
    check = ["check", "audit.toml", "--epsilon", "0.01", "--cache", str(tmp_path / "cache")]
    seen, reused = [], []
    for text in ("flat", "real", "real", "flat"):
        done = plug(check, text)
        assert done.returncode in (0, 1), done.stderr[-3000:]
        seen.append((done.stdout.split(":")[0], "reusing" in done.stderr))
        reused += re.findall(r"reusing (\S+):", done.stderr)
    assert seen == [("NO SIGNAL", False), ("VIOLATED", False), ("VIOLATED", True), ("NO SIGNAL", True)]
    assert len(list((tmp_path / "cache").iterdir())) == 2  # one entry per behaviour
    # The real learner's entry made to hold the flat run's models: neither is reused, the run goes to a new entry.
    real, flat = (tmp_path / entry for entry in reused)
    shutil.rmtree(real)
    shutil.copytree(flat, real)
    done = plug(check, "real")
    assert done.returncode == 1 and done.stdout.startswith("VIOLATED") and "reusing" not in done.stderr
    assert len(list((tmp_path / "cache").iterdir())) == 3


def test_a_run_directory_of_another_behaviour_is_refused_not_resumed(plug, tmp_path):
    """The same --output after the learner changed: exit 2, naming the model that differs; nothing is rewritten."""
    run = ["run", "audit.toml", "--output", str(tmp_path / "run")]
    assert plug(run, "flat").returncode == 0
    before = {path: path.stat().st_mtime_ns for path in (tmp_path / "run").rglob("*")}
    done = plug(run, "real")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "no longer fits" in done.stderr and "'canary-target'" in done.stderr and "Traceback" not in done.stderr
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "run").rglob("*")} == before
    quoted = [line.strip() for line in (DOCS / "exit-codes.md").read_text().splitlines()
              if line.startswith("    topicaudit: error: DIR holds models")]  # the line docs/exit-codes.md quotes
    assert quoted and quoted[0].replace("DIR", str(tmp_path / "run")).replace("NAME", "canary-target") in done.stderr
    assert plug(run, "flat").returncode == 0  # restored: reused


def _audit_inputs(tmp_path, shadows=2):
    """``audit``'s command for a saved Φ over 8 words, with the plug-in as the shadows' learner, into ``out``."""
    return [str(part) for part in audit_command(tmp_path, documents=40, candidates=12)] + [
        "--shadows", str(shadows), "--learner", "rp_plug:L", "--output", "out"]


def test_audit_of_a_released_model_resumes_no_shadow_its_plug_in_no_longer_fits(plug, tmp_path):
    """``audit`` with the plug-in as the shadows' learner: rerun into the same directory after the learner changed,
    exit 2 naming shadow-0001 (its shadows were rescored as the new learner's); unchanged, it resumes as before."""
    audit = _audit_inputs(tmp_path)
    assert plug(audit, "real").returncode == 0
    again = plug(audit, "real")
    assert again.returncode == 0 and "no longer fits" not in again.stderr
    done = plug(audit, "flat")
    assert done.returncode == 2 and "'shadow-0001'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_finished_run_is_not_reused_for_another_claim_of_the_plug_in(plug, tmp_path):
    """XIX-zx X1: the learner fits as before but now claims ε = 0.01 (read through the C library): the run kept
    for ε = 100 is rescored for the claim made now (VIOLATED), not reused CONSISTENT."""
    check = ["check", "claim.toml", "--cache", str(tmp_path / "cache")]
    first, second = plug(check, "100"), plug(check, "0.01")
    assert (first.returncode, first.stdout.split(":")[0]) == (0, "CONSISTENT"), first.stderr[-2000:]
    assert (second.returncode, second.stdout.split(":")[0]) == (1, "VIOLATED"), second.stderr[-2000:]
    assert "claimed ε = 0.01" in second.stdout


def test_audit_resume_checks_the_first_shadow_saved(plug, tmp_path):
    """XIX-zx X2: shadow-0001 missing (an interrupted audit), the others of the earlier learner: exit 2 naming the
    first one saved, not a mixed audit."""
    audit = _audit_inputs(tmp_path, shadows=4)
    assert plug(audit, "real").returncode == 0
    (tmp_path / "out" / "models" / "shadow-0001.npz").unlink()
    done = plug(audit, "flat")
    assert done.returncode == 2 and "'shadow-0002'" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_learner_that_reads_its_thread_count_is_reused_after_ray(plug, tmp_path):
    """XIX-zx X3: the canary release a Ray worker fitted (one thread) is fitted again as a worker fits it (a new
    process with a worker's environment), so the same run is reused, not refitted into a new entry each time."""
    check = ["check", "chunked.toml", "--epsilon", "0.01", "--cache", str(tmp_path / "cache")]
    done = [plug(check, "real") for _ in range(2)]
    assert [run.returncode for run in done] == [1, 1], done[-1].stderr[-2000:]
    assert "reusing" in done[1].stderr and len(list((tmp_path / "cache").iterdir())) == 1


@pytest.mark.parametrize("where", ["cache", "output"])
def test_a_damaged_saved_model_is_no_pass_for_a_changed_plug_in(plug, tmp_path, where):
    """XIX-zy Y1: the flat run kept, its canary release truncated, the learner now leaks: not the stale NO SIGNAL
    (the damaged file stood for no model, so nothing was compared); in the cache VIOLATED, in a named directory exit
    2 naming the model."""
    place = ["--cache", str(tmp_path / "cache")] if where == "cache" else ["--output", str(tmp_path / "run")]
    check = ["check", "audit.toml", "--epsilon", "0.01", *place]
    assert plug(check, "flat").returncode == 0
    (model,) = tmp_path.glob("*/**/models/canary-target.npz")
    os.truncate(model, 100)
    done = plug(check, "real")
    if where == "cache":
        assert (done.returncode, done.stdout.split(":")[0]) == (1, "VIOLATED"), done.stderr[-2000:]
        assert "no longer fits" in done.stderr  # the note on the way to the entry of the learner as it is now
        assert re.search(r"note: the plug-in no longer fits the models kept in \S+ \(its model 'canary-target' fitted "
                         r"again differs\): auditing it as it fits now", done.stderr)  # as docs/exit-codes.md quotes
    else:
        assert done.returncode == 2 and "'canary-target'" in done.stderr and "damaged" in done.stderr, done.stderr


def test_a_finished_run_of_another_configuration_is_named_as_such(plug, tmp_path):
    """XIX-zx X7: a plug-in's --output holding another configuration: the resume's own refusal, before any fit."""
    assert plug(["run", "audit.toml", "--output", "run"], "flat").returncode == 0
    (tmp_path / "other.toml").write_text(CONFIG.replace("count = 60", "count = 40"))
    done = plug(["run", "other.toml", "--output", "run"], "flat")
    assert done.returncode == 2 and "different configuration" in done.stderr, done.stderr[-2000:]


def test_what_the_learner_measured_in_info_does_not_stop_reuse_nor_the_document(plug, tmp_path):
    """XIX-zx X6: info with the fit's seconds (not compared); XIX-zy Y5: the learner's prints, Python's and its
    descriptor's, stay off standard output while it carries the JSON document, on a fit and on a reuse."""
    (tmp_path / "timed.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Timed"))
    check = ["check", "timed.toml", "--epsilon", "0.01", "--cache", str(tmp_path / "cache"), "--json", "-"]
    done = [plug(check, "real") for _ in range(2)]
    assert [run.returncode for run in done] == [1, 1] and "reusing" in done[1].stderr, done[1].stderr[-2000:]
    assert [json.loads(run.stdout)["verdict"] for run in done] == ["VIOLATED", "VIOLATED"]
    assert all("PLUG-IN SAYS HELLO" in run.stderr and "RAW WRITE" in run.stderr for run in done)


def test_a_cached_assert_privacy_checks_a_plug_in_in_a_new_process(plug, tmp_path):
    """XIX-zx X5: the calling process stubs the library fit the plug-in calls (a test's monkeypatch): the entry of the
    flat learner is not reused on a replay in that process; the new process fits the files (VIOLATED)."""
    script = tmp_path / "caller.py"
    script.write_text(f"""import sys
import numpy as np
from topicaudit import assert_privacy
import topicaudit.targets.learners.lda as lda
if sys.argv[1] == "stub":
    real = lda.VariationalLDA.fit
    lda.VariationalLDA.fit = lambda self, X, seed: np.full_like(real(self, X, seed), 1.0 / X.shape[1])
try:
    assert_privacy("audit.toml", epsilon=0.01, cache={str(tmp_path / "cache")!r})
    print("PASSED")
except AssertionError as error:
    print(str(error).split(":")[0])
""")
    assert plug([], "flat", script=[str(script), "plain"]).stdout.strip() == "PASSED"
    done = plug([], "real", script=[str(script), "stub"])
    assert done.stdout.strip().endswith("VIOLATED"), done.stderr[-2000:]


def test_each_key_keeps_a_bounded_number_of_behaviours(tmp_path):
    """XIX-zx X4: one entry per behaviour up to BEHAVIOURS, then the key's one entry that refits; a behaviour seen
    before keeps its entry."""
    key = tmp_path / "demo-L-k3-s0-0123456789abcdef"
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(run_cache.BEHAVIOURS + 1)]
    names = [run_cache.behaviour_entry(key, digest).name for digest in digests[:-1]]
    assert names[0] == f"{key.name}-b{digests[0][:16]}" and len(set(names)) == run_cache.BEHAVIOURS
    for name in names:
        (tmp_path / name).mkdir()
    assert run_cache.behaviour_entry(key, digests[-1]).name == f"{key.name}-refit"
    assert run_cache.behaviour_entry(key, digests[3]).name == names[3]
    assert run_cache.behaviour_entry(tmp_path / names[2], None).name == f"{key.name}-refit"
    assert run_cache.is_entry(tmp_path / f"{key.name}-refit")


def test_the_document_on_stdout_is_alone_whatever_the_plug_in_writes(plug, tmp_path):
    """XIX-zz Z1, Z2: a banner printed when the learner is built (before any fit) and a thread of its fit still
    writing to descriptor 1 after the run: with --json - the document alone is on standard output, on a fit and on a
    reuse; what the learner wrote is on standard error."""
    (tmp_path / "loud.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Loud"))
    check = ["check", "loud.toml", "--epsilon", "0.01", "--cache", str(tmp_path / "cache"), "--json", "-"]
    for _ in range(2):
        done = plug(check, "real")
        assert done.returncode == 1 and json.loads(done.stdout)["verdict"] == "VIOLATED", done.stdout[:300]
        assert "BANNER" in done.stderr and "THREAD" in done.stderr


def test_a_plug_in_constructor_raising_is_named_not_an_internal_error(plug, tmp_path):
    """XIX-zz Z5: RuntimeError from the plug-in's constructor was exit 3, "a bug, please report it"."""
    (tmp_path / "refuses.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Refuses"))
    done = plug(["check", "refuses.toml", "--epsilon", "0.01", "--cache", str(tmp_path / "cache")], "ctor")
    assert done.returncode == 2 and "constructor" in done.stderr and "not on this machine" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]


def test_a_folder_in_place_of_a_model_to_refit_is_named(tmp_path):
    """XIX-zz Z3: the refit entry's models removed, one a folder by a model's name: exit 2 naming it, not exit 3."""
    (tmp_path / "run" / "models" / "canary-target.npz").mkdir(parents=True)
    with pytest.raises(UserError, match="canary-target.npz"):
        RunDirectory(tmp_path / "run").remove_models()


def test_the_privacy_monitor_a_plug_in_reports_is_compared(plug, tmp_path):
    """XIX-zz Z6: the learner's monitor (info["monitor"], which results.json and the report show) changed, Φ not: the
    run kept with the other monitor is not reused."""
    (tmp_path / "monitored.toml").write_text(CONFIG.replace("rp_plug:L", "rp_plug:Monitored")
                                             .replace("shadows = 0", "shadows = 2").replace("count = 60", "count = 0"))
    run = ["run", "monitored.toml", "--output", "run"]
    assert plug(run, "50").returncode == 0
    done = plug(run, "7")
    assert done.returncode == 2 and "'target'" in done.stderr, done.stderr[-2000:]
    assert plug(run, "50").returncode == 0


def test_a_behaviour_entry_of_a_long_key_name_fits_the_file_system(tmp_path):
    """XIX-zzq Q1: a key entry's name of 249 bytes: its behaviours' entries were 267 bytes (ENAMETOOLONG at each
    check); their names keep the key's digest and stay within 255 bytes."""
    key = tmp_path / ("d" * 220 + "-Noisy-k3-s0-535dd3d2a8c6c5d4")
    for entry in (run_cache.behaviour_entry(key, "a" * 64), run_cache.behaviour_entry(key, None)):
        assert len(os.fsencode(entry.name)) <= 255 and "535dd3d2a8c6c5d4" in entry.name
        entry.mkdir()


def test_a_learner_the_calling_script_defines_reaches_ray_workers_from_the_new_process(plug, tmp_path):
    """XIX-zz Z8: a cached assert_privacy of ``__main__:Class`` whose audit needs Ray (canary shadows): the new process
    loaded the script as ``__mp_main__``, and Ray's workers looked the class up in their own ``__main__`` (a traceback
    of 81 lines, no verdict); now its classes are the script's, shipped by value."""
    script = tmp_path / "defines.py"
    script.write_text(f"""import topicaudit
from topicaudit.targets.learners.lda import VariationalLDA


class Mine(VariationalLDA):
    class Kept:  # a nested class with a method: looked up in the worker's __main__ (XIX-zzr R1)
        def keep(self, phi):
            return phi

    def fit(self, X, seed):
        return self.Kept().keep(super().fit(X, seed))


if __name__ == "__main__":
    try:
        topicaudit.assert_privacy({{"synthetic": {{"n_docs": 150, "n_words": 250}},
                                   "target": {{"learner": "__main__:Mine", "k": 3, "vocabulary": "all"}},
                                   "attack": {{"shadows": 0, "canaries": {{"count": 60, "shadows": 2}}}}}},
                                  epsilon=0.01, cache={str(tmp_path / "cache")!r})
        print("PASSED")
    except AssertionError as error:
        print(str(error).split(":")[0])
""")
    time.sleep(1.5)  # not "changed this second" (a file's times are compared by the second: XIX-zz Z9)
    done = plug([], "real", script=[str(script)])
    assert done.returncode == 0 and done.stdout.strip() == "VIOLATED", done.stderr[-3000:]
    assert "not reused" not in done.stderr  # audited in the new process, as cached


def test_a_script_run_as_a_module_of_a_package_keeps_its_relative_imports(plug, tmp_path):
    """XIX-zzr R7: ``python -m pkg.script`` whose learner uses ``from .helpers import …``: the audit's new process loaded
    the script with no package (ImportError, no verdict)."""
    package = tmp_path / "zrpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("def kept(phi):\n    return phi\n")
    (package / "runme.py").write_text(f"""import topicaudit
from topicaudit.targets.learners.lda import VariationalLDA
from .helpers import kept


class Mine(VariationalLDA):
    def fit(self, X, seed):
        return kept(super().fit(X, seed))


if __name__ == "__main__":
    try:
        topicaudit.assert_privacy({{"synthetic": {{"n_docs": 150, "n_words": 250}},
                                   "target": {{"learner": "__main__:Mine", "k": 3, "vocabulary": "all"}},
                                   "attack": {{"shadows": 0, "canaries": {{"count": 60}}}}}},
                                  epsilon=0.01, cache={str(tmp_path / "cache")!r})
        print("PASSED")
    except AssertionError as error:
        print(str(error).split(":")[0])
""")
    time.sleep(1.5)  # not "changed this second" (a file's times are compared by the second: XIX-zz Z9)
    done = plug([], "real", script=["-m", "zrpkg.runme"])
    assert done.returncode == 0 and done.stdout.strip() == "VIOLATED", done.stderr[-3000:]
    assert "not reused" not in done.stderr  # audited in the new process, as cached
