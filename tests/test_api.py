"""The Python API: ``import topicaudit`` runs, checks and reports without reading files back."""
from __future__ import annotations

import pydoc

import topicaudit


def test_help_shows_the_api():
    text = pydoc.render_doc(topicaudit, renderer=pydoc.plaintext)
    for name in ("run(", "audit_model(", "check(", "report(", "assert_privacy(", "load_config("):
        assert name in text, name


def test_run_then_check_return_objects(tmp_path):
    """A canary-only audit (no shadow models, so no Ray) of the non-private learner is refuted at ε = 1."""
    results = topicaudit.run({"synthetic": {"n_docs": 200, "n_words": 300}, "target": {"k": 3},
                              "attack": {"shadows": 0, "canaries": {"count": 100}}, "output": str(tmp_path / "run")})
    assert results["canaries"]["count"] == 100
    again = topicaudit.run(_write(tmp_path))  # a TOML file with the same settings: the same audit, resumed
    assert again["resumed"] and again["config_hash"] == results["config_hash"]
    assert again["canaries"] == results["canaries"]
    verdict = topicaudit.check(tmp_path / "run", epsilon=1)
    assert isinstance(verdict, topicaudit.CheckResult)
    assert verdict.violated and verdict.epsilon_lower_bound > 1


def _write(tmp_path):
    path = tmp_path / "audit.toml"
    path.write_text(f'output = "{tmp_path / "run"}"\n[synthetic]\nn_docs = 200\nn_words = 300\n[target]\nk = 3\n'
                    "[attack]\nshadows = 0\n[attack.canaries]\ncount = 100\n")
    return path
