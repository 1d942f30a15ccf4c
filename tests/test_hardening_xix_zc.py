"""Hostile pass XIX-zc: topicaudit's source digest, which the run cache keys a run by, covers its mapped subpackages.

In the default editable install (``pip install -e .``, the README's quick start) ``topicaudit.targets`` and
``topicaudit.reports`` are mapped from their own folders beside ``audit/``, and ``source_digest`` read ``audit/``
alone: after an edit to a built-in learner (dp-cgs's noise cut 50-fold), ``check dp.toml --cache C`` said "reusing
…" and CONSISTENT, exit 0, where a fresh cache gave VIOLATED, exit 1 (case ED1).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import topicaudit.version as version


def _layout(tmp_path: Path, monkeypatch) -> Path:
    """The default editable mode's layout: the package's folder holds only audit/'s code, and topicaudit.targets is
    found in a folder of its own beside it."""
    package = tmp_path / "audit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "version.py").write_text("__version__ = '0.1.0'\n")
    targets = tmp_path / "targets"
    (targets / "learners").mkdir(parents=True)
    (targets / "__init__.py").write_text("")
    (targets / "learners" / "dp_cgs.py").write_text("SCALE = 1.0\n")
    monkeypatch.setattr(version, "_package_root", lambda: package)
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name == "topicaudit.targets":
            return SimpleNamespace(submodule_search_locations=[str(targets)])
        if name == "topicaudit.reports":
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return targets


def test_an_edit_to_a_mapped_subpackage_changes_the_digest(tmp_path, monkeypatch):
    targets = _layout(tmp_path, monkeypatch)
    before = version.source_digest()
    (targets / "learners" / "dp_cgs.py").write_text("SCALE = 1.0 / 50\n")
    assert version.source_digest() != before


def test_a_subpackage_inside_the_package_folder_is_read_once(tmp_path, monkeypatch):
    """Installed, or in the strict editable mode, the subpackages are inside the package's folder: the digest is
    what it was (cached runs keep their key)."""
    package = tmp_path / "topicaudit"
    (package / "targets").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "targets" / "__init__.py").write_text("X = 1\n")
    monkeypatch.setattr(version, "_package_root", lambda: package)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: SimpleNamespace(
        submodule_search_locations=[str(package / "targets")]) if name.startswith("topicaudit.") else real(name, *a, **k))
    assert version._mapped_subpackages(package) == []


def test_this_install_digests_targets():
    """Whatever the install, a built-in learner's file is read by the digest: found inside the package's folder or
    as a mapped subpackage."""
    import topicaudit.targets
    root = version._package_root()
    folder = Path(topicaudit.targets.__path__[0])
    assert version._inside(folder, root) or (folder, "targets/") in version._mapped_subpackages(root)


def test_a_module_edited_after_its_load_gives_this_process_its_own_digest(tmp_path, monkeypatch):
    """ED2: a notebook audits dp-cgs, edits targets/learners/dp_cgs.py (a planted bug), audits again in the same
    process: the code that ran was the one loaded before the edit, and its run was kept under the edited files' key;
    a fresh process running the bug said "reusing …", CONSISTENT, exit 0 (a fresh cache: VIOLATED, exit 1)."""
    import importlib.util as util
    import sys

    probe = tmp_path / "zc_probe.py"
    probe.write_text("SCALE = 1.0\n")
    spec = util.spec_from_file_location("topicaudit._zc_probe", probe)
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)  # noted by topicaudit.loaded_code's audit hook as it is loaded
    monkeypatch.setitem(sys.modules, "topicaudit._zc_probe", module)
    before = version.source_digest()
    assert not before.startswith("edited-") and version.edited_since_loaded() == []
    probe.write_text("SCALE = 1.0 / 50\n")  # the file edited; the process still runs SCALE = 1.0
    after = version.source_digest()
    assert after != before and after.startswith("edited-")
    assert version.edited_since_loaded() == ["topicaudit._zc_probe"]
    assert version.source_digest() == after  # one digest for the whole process: its run directory stays one


def test_a_recursion_limit_a_fit_lowers_is_put_back_with_a_note():
    """S-rec: a plug-in's fit calling sys.setrecursionlimit(60) left the command to end in RecursionError, exit 3."""
    import sys
    import warnings

    from topicaudit.process_state import kept_process_state

    before = sys.getrecursionlimit()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kept_process_state("the fit of Shallow"):
            sys.setrecursionlimit(60)
    assert sys.getrecursionlimit() == before
    assert any("recursion limit" in str(w.message) for w in caught)
