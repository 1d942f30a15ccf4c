"""Hostile pass XIX, helper n (tests/hostile_xix_n_cases.md): reports and sweeps, BERTopic saves, Ray, the
environment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from linked_cache import run_dir  # noqa: F401 - a fixture
from test_bertopic import safetensors_bytes, write_layout
from topicaudit.cli.main import main
from topicaudit.errors import UserError
from topicaudit.inputs import bertopic_model
from topicaudit.inputs.user_model import load_user_model
from topicaudit.inputs.vocabulary_file import read_vocabulary

DEEP = "[" * 100_000 + "]" * 100_000   # past the JSON decoder's recursion limit


@pytest.fixture
def saved(tmp_path):
    words = ["car", "gear", "lake", "rain", "apple", "pear"]
    ctfidf = np.array([[0.1, 0.0, 0.2, 0.0, 0.3, 0.0],
                       [0.5, 0.4, 0.0, 0.0, 0.0, 0.1],
                       [0.0, 0.0, 0.6, 0.7, 0.0, 0.0]])
    return write_layout(tmp_path / "model", ctfidf, words, {-1: 4, 0: 10, 1: 7})


# B1, B3, V1: JSON nested too deeply was a RecursionError, exit 3 ("internal error"), not one message and exit 2
def test_a_deeply_nested_json_vocabulary_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "vocabulary.json"
    path.write_text(DEEP)
    with pytest.raises(UserError, match="nested too deeply") as error:
        read_vocabulary(path)
    assert str(path) in str(error.value)


def test_a_deeply_nested_bertopic_topics_file_is_one_error_naming_it(saved):
    (saved / "topics.json").write_text('{"topic_sizes": ' + DEEP + "}")
    with pytest.raises(UserError, match="nested too deeply") as error:
        load_user_model(saved)
    assert "topics.json" in str(error.value)


def test_a_deeply_nested_safetensors_header_is_one_error_naming_the_file(saved):
    header = ('{"__metadata__": ' + DEEP + "}").encode()
    header += b" " * (-len(header) % 8)
    (saved / "ctfidf.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(UserError, match="nested too deeply") as error:
        load_user_model(saved)
    assert "ctfidf.safetensors" in str(error.value)


def test_the_search_for_verbatim_text_walks_any_depth_the_decoder_allows():
    value: object = {"representative_docs_": ["a document"]}
    for _ in range(5000):   # deeper than Python's recursion limit: the walk recursed once per level
        value = {"x": value}
    assert bertopic_model._find_keys(value, bertopic_model.VERBATIM_KEYS) == [
        ".".join(["x"] * 5000 + ["representative_docs_"])]


# B4–B7, B25: topic ids written otherwise than BERTopic writes them were read, and "01" beside "1" named topic 1
# twice: the last one's size was kept without a word
@pytest.mark.parametrize("sizes", [{"-1": 4, "0": 10, "01": 3, "1": 7}, {"-1": 4, "0": 10, " 1": 7},
                                   {"-1": 4, "0": 10, "\u0661": 7}, {"-2": 4, "0": 10, "1": 7},
                                   {"-1": 4, "0": 10, "1_0": 7}])
def test_topic_ids_not_written_as_bertopic_writes_them_are_refused(saved, sizes):
    topics = json.loads((saved / "topics.json").read_text())
    topics["topic_sizes"] = sizes
    (saved / "topics.json").write_text(json.dumps(topics))
    with pytest.raises(UserError, match="not a topic number") as error:
        load_user_model(saved)
    assert "topics.json" in str(error.value)


def test_topic_ids_that_skip_are_read(saved):
    topics = json.loads((saved / "topics.json").read_text())
    topics["topic_sizes"] = {"-1": 4, "5": 10, "2": 7}
    (saved / "topics.json").write_text(json.dumps(topics))
    assert load_user_model(saved).phi.shape[0] == 3


# EM1, EM4, MRC1: an unknown MPLBACKEND made matplotlib's import raise (exit 3 from `report`, and from `run` with
# shadows), and a matplotlibrc in the working directory with text.usetex made every figure need LaTeX (exit 3)
DRAW = """
import os
from topicaudit.engine.presentation.roc_figure import matplotlib_defaults, new_figure, render
with matplotlib_defaults():
    fig = new_figure(2, 2)
    fig.add_subplot().set_title("a title")
    png = render(fig, "png")
print(len(png) > 0, os.environ.get("MPLBACKEND"))
"""


def test_figures_are_drawn_whatever_the_environment_configures_for_matplotlib(tmp_path):
    (tmp_path / "matplotlibrc").write_text("text.usetex: True\nfont.size: 40\n")
    env = {**os.environ, "MPLBACKEND": "nonexistent", "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run([sys.executable, "-c", DRAW], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "nonexistent"]   # drawn, and the caller's variable put back


# LN3: under `ulimit -n 40` a local Ray instance never started ("Timed out waiting for file …gcs_server_port…"), and
# the run said exit 2, "check that no stale Ray processes hold its ports": a Ray start failure is exit 4
def test_a_local_ray_instance_that_does_not_start_is_a_ray_failure_naming_the_file_limit(monkeypatch):
    import ray

    from topicaudit.engine.execution import parallel, ray_local

    def fail(*args, **kwargs):
        raise RuntimeError("Timed out waiting for file /tmp/ray/session_x/gcs_server_port_0")

    monkeypatch.setattr(ray, "init", fail)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    real = ray_local.resource.getrlimit
    monkeypatch.setattr(ray_local.resource, "getrlimit",
                        lambda which: (40, 40) if which == ray_local.resource.RLIMIT_NOFILE else real(which))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(parallel, "start_reaper", lambda: type("R", (), {"stop": lambda self: None,
                                                                        "watch": lambda self, ray: None})())
    with pytest.raises(ray_local.RayCannotStart, match="did not start") as raised:
        with parallel.ray_session(num_cpus=1):
            pass
    assert "ulimit -n" in str(raised.value) and "40 here" in str(raised.value)


# DW1, DW3: from a deleted working directory, `report /abs/RUN -o /abs/rep` said "/abs is not writable (No such file
# or directory)": an absolute path was joined to os.getcwd(), which failed, though it needs no working directory
def test_a_report_between_absolute_paths_needs_no_working_directory(run_dir, tmp_path, monkeypatch):
    run = Path(run_dir).resolve()
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert main(["report", str(run), "-o", str(tmp_path / "rep"), "--quiet"]) == 0
    assert (tmp_path / "rep" / "report.html").is_file()
