"""A plug-in's saved models are fitted again before any is reused (``topicaudit.engine.replay``): a learner that now
fits otherwise, whatever input told it to (here a file read through the C library, which no hook of topicaudit sees),
never has the run of its earlier behaviour reused; the same behaviour is reused as before."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

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

    def run(command, text):
        mode.write_text(text)
        return subprocess.run([sys.executable, "-m", "topicaudit", *command], env=environment, cwd=tmp_path,
                              capture_output=True, text=True, timeout=900)
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
    assert plug(run, "flat").returncode == 0  # restored: reused


def _audit_inputs(tmp_path, shadows=2):
    """``audit``'s command for a saved Φ over 8 words, with the plug-in as the shadows' learner, into ``out``."""
    words = [f"w{i}" for i in range(8)]
    rng = np.random.default_rng(0)
    np.save(tmp_path / "phi.npy", rng.dirichlet(np.ones(8), size=3))
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    docs = [" ".join(rng.choice(words, 6)) for _ in range(40)]
    (tmp_path / "cand.json").write_text(json.dumps({"text": docs[:12]}))
    (tmp_path / "ref.json").write_text(json.dumps({"text": docs[12:]}))
    return ["audit", "phi.npy", "--vocabulary", "vocab.txt", "--candidates", "cand.json", "--reference", "ref.json",
            "--no-preprocess", "--shadows", str(shadows), "--learner", "rp_plug:L", "--output", "out"]


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
