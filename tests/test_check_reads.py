"""``check`` reads a run's canaries.npz once for its verdict (the coins, the kind and the threshold canaries'
anchors), not once for the evidence and again for the anchors; the verdict is the same."""
from __future__ import annotations

import json

import topicaudit.engine.check as check
from topicaudit.cli.main import main
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.run import execute_run


def test_check_reads_the_canaries_once(tmp_path, monkeypatch):
    run = tmp_path / "g"
    execute_run(config_from_dict({
        "synthetic": {"n_docs": 300, "n_words": 400, "mean_length": 30}, "output": str(run),
        "target": {"learner": "lda", "k": 3, "vocabulary": "dpsu-gaussian", "vocabulary_params": {"epsilon": 2.0}},
        "attack": {"shadows": 0, "canaries": {"count": 400, "kind": "threshold"}}}), quiet=True)
    reads = []
    real = check.read_arrays

    def counted(path, *args, **kwargs):
        reads.append(path.name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(check, "read_arrays", counted)
    assert main(["check", str(run), "--json", str(tmp_path / "g.json")]) == 0
    assert reads.count("canaries.npz") == 1
    verdict = json.loads((tmp_path / "g.json").read_text())
    # The anchors still reach the Gaussian step's test: it scores the 200 anchored canaries.
    assert verdict["bounds"]["canaries/mechanism:fdp-one-run-gdp"]["details"]["scored"] == 200
