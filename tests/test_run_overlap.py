"""`run` starts Ray in the background while it prepares, and stops it in the background while it writes: errors
still come out as one line with the right exit code, Ray never outlives the command, and the phases are traced."""
from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager

import pytest

import topicaudit.engine.execution.experiment as experiment
import topicaudit.engine.run as engine_run
from topicaudit.cli.main import main
from topicaudit.engine.execution import phases
from topicaudit.engine.configuration.config_checks import validate
from topicaudit.engine.configuration.loading import config_from_dict
from topicaudit.engine.storage.run_corpus import load_audit_corpus
from topicaudit.errors import UserError
from topicaudit.targets import build_target

TINY = {"text": ["cats dogs mice run", "dogs bark at cats", "mice run from cats", "cats sleep dogs run",
                 "dogs chase mice home", "mice hide from dogs"] * 4}


def call(capsys, *args):
    code = main([*map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "topicaudit-ray"]


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture
def fake_ray(monkeypatch):
    """Replace Ray's session by one that records when it is entered and left (no Ray is started)."""
    events = []

    @contextmanager
    def session(address="", num_cpus=0, object_store_bytes=0):
        events.append(("enter", threading.current_thread().name))
        if address == "refuse":
            raise UserError("could not connect to the Ray cluster at 'refuse': refused; check the address")
        try:
            yield None
        finally:
            events.append(("exit", threading.current_thread().name))

    monkeypatch.setattr(experiment, "ray_session", session)
    return events


def test_a_bad_ray_address_is_still_one_line_and_exit_2(capsys, tmp_path, tiny, own_ray):
    out = tmp_path / "run"
    code, _, err = call(capsys, "run", "--corpus", tiny, "--no-preprocess", "--k", 2, "--shadows", 2,
                        "--ray-address", f"127.0.0.1:{free_port()}", "--output", out)
    assert code == 2, err
    assert err.count("topicaudit: error:") == 1 and "Traceback" not in err
    assert "nothing is listening at" in err and "ray start --head" in err
    assert not out.exists() and not ray_threads()


def test_an_error_from_the_background_start_is_reported_where_ray_is_first_needed(capsys, tmp_path, tiny, fake_ray):
    out = tmp_path / "run"
    code, _, err = call(capsys, "run", "--corpus", tiny, "--no-preprocess", "--k", 2, "--shadows", 2,
                        "--ray-address", "refuse", "--output", out)
    assert code == 2 and err.strip().splitlines()[-1].startswith("topicaudit: error: could not connect"), err
    assert fake_ray == [("enter", "topicaudit-ray")]  # started in the background, from the start
    assert not out.exists() and not ray_threads()


def test_an_error_while_preparing_stops_the_starting_ray_and_wins(capsys, monkeypatch, tmp_path, tiny, fake_ray):
    def bad_plan(*args, **kwargs):
        time.sleep(0.2)  # Ray is up by now: it must be stopped again
        raise UserError("the plan is refused")

    monkeypatch.setattr(engine_run, "make_plan", bad_plan)
    out = tmp_path / "run"
    code, _, err = call(capsys, "run", "--corpus", tiny, "--no-preprocess", "--k", 2, "--shadows", 2,
                        "--output", out)
    assert code == 2 and "the plan is refused" in err
    assert fake_ray == [("enter", "topicaudit-ray"), ("exit", "topicaudit-ray")]
    assert not out.exists() and not ray_threads()


def test_no_ray_is_started_for_a_canary_only_audit(capsys, tmp_path, tiny, fake_ray):
    code, _, err = call(capsys, "run", "--corpus", tiny, "--no-preprocess", "--k", 2, "--shadows", 0,
                        "--canaries", 10, "--output", tmp_path / "run")
    assert code == 0, err
    assert fake_ray == []


@pytest.mark.parametrize("shadows, canaries, canary_shadows", [(2, 0, 0), (2, 0, 2), (0, 4, 0), (0, 4, 2), (2, 4, 2)])
def test_ray_is_started_by_the_experiments_own_rule(tmp_path, tiny, shadows, canaries, canary_shadows):
    """``run`` decides from its configuration, before the plan exists, what its experiment decides once built:
    Ray is never started only to be stopped again, nor missing when the fits begin."""
    config = config_from_dict({"corpus": {"path": str(tiny), "preprocess": False}, "target": {"k": 2},
                               "attack": {"shadows": shadows, "canaries": {"count": canaries, "shadows": canary_shadows}},
                               "output": str(tmp_path / "run")})
    validate(config)
    corpus = load_audit_corpus(config)
    t = config.target
    ready = engine_run._prepare(config, corpus, build_target(t.learner, t.k, t.vocabulary), quiet=True)
    assert engine_run.run_needs_ray(config) == ready.experiment.needs_ray == (shadows > 0 or canary_shadows > 0
                                                                              and canaries > 0)


def test_ray_stops_in_the_background_while_the_results_are_written(capsys, monkeypatch, tmp_path, small_config, own_ray):
    """A real audit: the session's shutdown (held back half a second here) overlaps the scoring and writing,
    and the command has waited for it when it returns. Every phase is traced."""
    real = experiment.ray_session
    stopped = {}

    @contextmanager
    def slow_to_stop(*args, **kwargs):
        with real(*args, **kwargs) as ray:
            yield ray
            stopped["from"] = time.time()
            time.sleep(0.5)
        stopped["until"] = time.time()

    monkeypatch.setattr(experiment, "ray_session", slow_to_stop)
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(phases.ENVIRONMENT_VARIABLE, str(trace))
    config = small_config(tmp_path)
    settings = tmp_path / "small.toml"
    settings.write_text('[synthetic]\nn_docs = 300\nn_words = 1000\nmean_length = 40\n[target]\nk = 4\n'
                        '[attack]\nshadows = 8\n[ray]\nnum_cpus = 2\n')
    code, out, err = call(capsys, "run", settings, "--output", config.run_dir)
    assert code == 0, err
    assert "wall time" in out
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    names = {r["phase"] for r in records}
    assert {"imports", "load", "plan", "ray_start", "fits", "scoring", "writing", "summary", "stop"} <= names
    by_name = {r["phase"]: r for r in records}
    # The scoring began before Ray had stopped: the results never wait for the shutdown...
    assert by_name["fits"]["end"] <= stopped["from"] and by_name["scoring"]["start"] < stopped["until"]
    assert (config.run_dir / "results.json").stat().st_mtime > stopped["from"]
    assert not ray_threads()  # ...and the command waited for the stop before returning
    assert by_name["ray_start"]["start"] < by_name["plan"]["end"]  # Ray starts while the plan is drawn
    assert by_name["ray_start"]["thread"] == by_name["stop"]["thread"] == "topicaudit-ray"


def test_phases_are_traced_only_when_asked(tmp_path, monkeypatch):
    trace = tmp_path / "trace.jsonl"
    monkeypatch.delenv(phases.ENVIRONMENT_VARIABLE, raising=False)
    with phases.phase("load"):
        pass
    phases.mark("imports")
    assert not trace.exists()
    monkeypatch.setenv(phases.ENVIRONMENT_VARIABLE, str(trace))
    with phases.phase("load"):
        time.sleep(0.01)
    phases.mark("imports")
    load, imports = (json.loads(line) for line in trace.read_text().splitlines())
    assert load["phase"] == "load" and load["end"] - load["start"] >= 0.01 and load["cpu"] >= 0
    assert imports["phase"] == "imports" and imports["start"] is None


def test_work_stopped_by_an_interrupt_stops_ray_before_the_driver_unwinds():
    """An interrupt inside the session: Ray's shutdown has finished before the exception leaves the block, so
    nothing the unwinding frees can reach Ray while it stops; without one, Ray stops in the background."""
    from topicaudit.engine.execution.parallel import StartingSession, wait_for_stop

    events = []

    @contextmanager
    def session():
        yield "ray"
        time.sleep(0.2)  # a shutdown that takes a while
        events.append("stopped")

    starting = StartingSession(session())
    with pytest.raises(KeyboardInterrupt):
        with starting.session():
            raise KeyboardInterrupt
        events.append("unreachable")
    events.append("unwound")
    assert events == ["stopped", "unwound"]
    wait_for_stop()

    events.clear()
    with StartingSession(session()).session():
        pass
    events.append("after the block")
    wait_for_stop()
    assert events == ["after the block", "stopped"]


def test_models_fitted_while_ray_starts_are_the_ones_workers_fit(tmp_path, small_config, own_ray, monkeypatch):
    """While a local Ray starts, the driver fits the target and the first shadows itself; every model, statistic
    and score is the one Ray's workers give, and every model is recorded on the node the driver runs on."""
    import numpy as np

    from topicaudit.engine.run import execute_run

    with_driver = execute_run(small_config(tmp_path, "driver"), quiet=True)
    monkeypatch.setenv("TOPICAUDIT_DRIVER_FITS", "0")
    workers_only = execute_run(small_config(tmp_path, "workers"), quiet=True)
    assert with_driver["ray"]["fitted_in_driver"] > 0 and workers_only["ray"]["fitted_in_driver"] == 0
    [node] = with_driver["ray"]["models_by_node"]
    assert with_driver["ray"]["models_by_node"] == {node: 9}
    assert with_driver["attacks"] == workers_only["attacks"]
    for name in ("statistics.npz", "scores.npz"):
        a, b = np.load(tmp_path / "driver" / name), np.load(tmp_path / "workers" / name)
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}:{key}")
    for path in sorted((tmp_path / "driver" / "models").glob("*.npz")):
        a, b = np.load(path), np.load(tmp_path / "workers" / "models" / path.name)
        np.testing.assert_array_equal(a["phi"], b["phi"], err_msg=path.name)
        np.testing.assert_array_equal(a["vocabulary"], b["vocabulary"], err_msg=path.name)
