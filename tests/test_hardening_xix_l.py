"""Hostile pass XIX, helper l (tests/hostile_xix_l_cases.md): forged and crash-born verdicts."""
from __future__ import annotations

import decimal
import fractions
import os
import py_compile
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import stale_plugin

from plugin_package import write_package
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.configuration.validation import check_shadows
from topicaudit.engine.storage.run_cache import cached_run_dir
from topicaudit.cli.main import main
from topicaudit.errors import UserError
from topicaudit.inputs.phi_io import validate_phi
from topicaudit.learner_checks import check_learner
from topicaudit.process_state import FORKED_CHILD_EXIT, kept_process_state
from topicaudit.targets import learner_settings
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.plugins import LEARNER_GROUP, source
from topicaudit.targets.privacy.guarantee import Guarantee


def test_a_fit_that_forks_and_returns_in_both_processes_goes_on_in_one_only(tmp_path):
    # The forked child carried on as the command: it scored its own Φ, printed NO SIGNAL and, after the command
    # had exited 1 with VIOLATED, rewrote results.json and check.json (and their manifest) as NO SIGNAL.
    marker = tmp_path / "after-the-fit"
    parent = os.getpid()
    with kept_process_state("the fit of Forking"):
        child = os.fork()
    marker.with_suffix(f".{os.getpid()}").write_text("carried on")  # the command's code after the fit
    assert os.getpid() == parent
    _, status = os.waitpid(child, 0)
    assert os.WEXITSTATUS(status) == FORKED_CHILD_EXIT
    assert [p.name for p in tmp_path.iterdir()] == [f"after-the-fit.{parent}"]


def test_a_learner_object_with_state_its_parameters_do_not_rebuild_is_refused():
    # Audited as the rebuild from its parameters: NO SIGNAL for an object whose switch made it release its Φ
    # unnoised (check_learner on the same object: VIOLATED, ε ≥ 3.5).
    leaky = VariationalLDA(k=3, max_iter=5)
    leaky._release_unnoised = True
    with pytest.raises(UserError, match="_release_unnoised") as raised:
        learner_settings(leaky)
    assert "constructor parameter" in str(raised.value)
    replaced = VariationalLDA(k=3, max_iter=5)
    del replaced.batch_size  # an attribute the rebuild has and the object lacks
    with pytest.raises(UserError, match="other state|does not store"):
        learner_settings(replaced)


def test_a_learner_object_as_constructed_or_fitted_is_accepted():
    fresh = VariationalLDA(k=3, max_iter=5, doc_topic_prior=0.5)
    assert learner_settings(fresh) == ("lda", 3, {"max_iter": 5, "doc_topic_prior": 0.5})
    fitted = VariationalLDA(k=3, max_iter=5)
    fitted.components_ = np.ones((3, 4))  # scikit-learn's fitted attributes: set by a fit, not compared
    assert learner_settings(fitted)[0] == "lda"


def test_an_edit_to_an_installed_plug_in_at_the_same_version_is_another_cache_entry(tmp_path, monkeypatch):
    # A CI installs its own package (pip install .), version unchanged by a commit: the version alone keyed the
    # cache, so the run of the code before the edit was reused (NO SIGNAL where the edited learner gave VIOLATED).
    site = write_package(tmp_path / "site", version="0.3")
    monkeypatch.syspath_prepend(str(site))
    config = config_from_dict({"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2,
                               "learner": "split-counts"}, "attack": {"shadows": 0, "canaries": {"count": 10}}})
    try:
        for name in ("split-counts", "tinytopics.learners:SplitCounts"):
            assert source(name, LEARNER_GROUP)["version"] == "0.3"
        before = [source(n, LEARNER_GROUP) for n in ("split-counts", "tinytopics.learners:SplitCounts")]
        entry = cached_run_dir(config, tmp_path / "cache")
        learners = site / "tinytopics" / "learners.py"
        for name in [n for n in sys.modules if n == "tinytopics" or n.startswith("tinytopics.")]:
            del sys.modules[name]  # the next CI job's process (this one runs the code it imported: XIX-u, ST1)
        edited = learners.read_text() + "\n# the noise halved\n"  # read here: a file this process read may have run
        stale_plugin.as_another_process(monkeypatch)
        learners.write_text(edited)
        after = [source(n, LEARNER_GROUP) for n in ("split-counts", "tinytopics.learners:SplitCounts")]
        assert all(a["source_sha256"] != b["source_sha256"] and a["version"] == "0.3" for a, b in zip(after, before))
        assert cached_run_dir(config, tmp_path / "cache") != entry
    finally:
        for name in [n for n in sys.modules if n == "tinytopics" or n.startswith("tinytopics.")]:
            del sys.modules[name]


def test_weights_whose_row_sums_overflow_are_normalised_not_zeroed():
    # Rows of 1e308 summed to inf and --normalize divided them into zeros: ζ 0 for every candidate, log10 p −58.
    phi, error = validate_phi(np.full((3, 20), 1e308), Path("big.npy"), 20, normalize=True)
    assert np.allclose(phi, 1 / 20) and np.isfinite(error)
    with pytest.raises(UserError, match="sums to inf"):
        validate_phi(np.full((3, 20), 1e308), Path("big.npy"), 20, normalize=False)


class UnseededInOneBuffer(VariationalLDA):
    """Unseeded noise on Φ, returned in one buffer that every fit reuses."""

    buffer: dict = {}

    def fit(self, X, seed):
        phi = super().fit(X, seed) + np.random.default_rng().random((self.k, X.shape[1])).astype(np.float32)
        out = self.buffer.setdefault(phi.shape, np.empty_like(phi))
        out[...] = phi / phi.sum(axis=1, keepdims=True)
        return out


@pytest.mark.parametrize("check", ["same seed", "pickle"])
def test_a_learner_reusing_its_output_buffer_is_compared_by_value(check):
    # Both fits were the one buffer, so an unseeded learner passed every check.
    with pytest.raises(AssertionError, match=check):
        check_learner(UnseededInOneBuffer(k=3, max_iter=3), checks=(check,))


def test_a_plug_in_shipped_as_bytecode_only_is_keyed_by_its_code(tmp_path, monkeypatch):
    # A sourceless .pyc (or a Cython .so built in place) was in no digest: "reusing …: the same … code" after a
    # rebuild, NO SIGNAL where the rebuilt learner gave VIOLATED.
    site = tmp_path / "site"
    site.mkdir()
    source_file = tmp_path / "compiledlearner.py"
    monkeypatch.syspath_prepend(str(site))
    digests = []
    try:
        for noise in ("1.0", "0.0"):
            source_file.write_text(f"NOISE = {noise}\nclass L:\n    pass\n")
            py_compile.compile(str(source_file), cfile=str(site / "compiledlearner.pyc"))
            digests.append(source("compiledlearner:L", LEARNER_GROUP).get("source_sha256"))
    finally:
        sys.modules.pop("compiledlearner", None)
    assert digests[0] and digests[1] and digests[0] != digests[1]


def test_a_learner_defined_in_a_script_is_keyed_by_the_script(tmp_path, monkeypatch):
    # A class of the script that calls assert_privacy (its __main__, which has no spec) had no digest: the script
    # edited to leak reused the cached NO SIGNAL of the script before the edit.
    script = tmp_path / "privacy_test_script.py"

    def run_script(text: str) -> None:  # as Python runs a script: its code executed in a module of its own
        script.write_text(text)
        module = types.ModuleType("scriptmain")
        module.__file__ = str(script)
        exec(compile(script.read_text(), str(script), "exec"), vars(module))
        monkeypatch.setitem(sys.modules, "scriptmain", module)

    stale_plugin.as_another_process(monkeypatch)
    run_script("MODE = 'noised'\n")
    before = source("scriptmain:L", LEARNER_GROUP)["source_sha256"]
    stale_plugin.as_another_process(monkeypatch)  # the edited script's next run: another process
    run_script("MODE = 'leaks'\n")
    assert source("scriptmain:L", LEARNER_GROUP)["source_sha256"] != before


def test_a_learner_whose_code_has_no_file_is_never_found_in_the_cache(tmp_path, monkeypatch):
    # Defined in a notebook cell: nothing identifies its code, so a cached run would be whatever code ran first.
    monkeypatch.setitem(sys.modules, "notebookcell", types.ModuleType("notebookcell"))
    config = config_from_dict({"synthetic": {"n_docs": 50, "n_words": 60}, "target": {"k": 2,
                               "learner": "notebookcell:L"}, "attack": {"shadows": 0, "canaries": {"count": 10}}})
    assert cached_run_dir(config, tmp_path) != cached_run_dir(config, tmp_path)


@pytest.mark.parametrize("epsilon", ["1", None, 1 + 0j, np.array([1.0]), True, decimal.Decimal("1")])
def test_a_claim_that_is_no_real_number_is_refused_where_it_is_made(epsilon):
    with pytest.raises(TypeError, match="epsilon must be a real number"):
        Guarantee(epsilon=epsilon, delta=0.0, adjacency="document", basis="paper-claim")


def test_a_claim_in_numpy_or_fraction_types_is_read_as_its_float():
    for epsilon in (np.float32(0.5), np.array(0.5), fractions.Fraction(1, 2), np.int64(2)):
        claim = Guarantee(epsilon=epsilon, delta=np.float64(1e-5), adjacency="document", basis="paper-claim")
        assert type(claim.epsilon) is float and type(claim.delta) is float and claim.epsilon == float(epsilon)


BAD_CLAIM = '''
from topicaudit.targets.learners.lda import VariationalLDA
from topicaudit.targets.privacy.guarantee import Guarantee


class BadClaim(VariationalLDA):
    def guarantee(self):
        return Guarantee(epsilon=float("nan"), delta=1e-5, adjacency="document", basis="paper-claim")
'''


def test_a_learner_whose_guarantee_cannot_state_a_claim_is_named_exit_2(tmp_path, monkeypatch, capsys):
    # Exit 3, "internal error (a bug, please report it): ValueError: the guarantee of an unnamed mechanism …".
    (tmp_path / "badclaim.py").write_text(BAD_CLAIM)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "c.toml").write_text('[synthetic]\nn_docs = 50\nn_words = 60\n[target]\nlearner = "badclaim:BadClaim"\n'
                                     'k = 2\n[attack]\nshadows = 0\n[attack.canaries]\ncount = 10\n')
    try:
        code = main(["check", str(tmp_path / "c.toml"), "--output", str(tmp_path / "run")])
    finally:
        sys.modules.pop("badclaim", None)
    err = capsys.readouterr().err
    assert code == 2 and "badclaim:BadClaim" in err and "guarantee()" in err and "internal error" not in err


class ForksOnce(VariationalLDA):
    """Forks in its fit; both processes return from it."""

    children: list = []

    def fit(self, X, seed):
        child = os.fork()
        if child:
            self.children.append(child)
        return super().fit(X, seed)


def test_a_learner_that_forks_under_check_learner_goes_on_in_one_process_only():
    # The child carried on with the suite: in a script, "PASSED" from the child beside the parent's failure.
    parent = os.getpid()
    check_learner(ForksOnce(k=3, max_iter=3), checks=("phi",))
    assert os.getpid() == parent and ForksOnce.children
    for child in ForksOnce.children:
        assert os.WEXITSTATUS(os.waitpid(child, 0)[1]) == FORKED_CHILD_EXIT


def test_a_numpy_integer_count_of_shadows_is_read_as_its_int():
    # audit_model(..., shadows=np.int64(4)) was refused: "must be an even number ≥ 2 (got np.int64(4))".
    assert check_shadows(np.int64(4), "shadows") == 4 and type(check_shadows(np.int64(4), "shadows")) is int
    with pytest.raises(UserError):
        check_shadows(np.bool_(True), "shadows")
