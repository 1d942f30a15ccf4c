"""benchmarks/run_phases.py tells Ray's workers from Ray's other processes, and splits their CPU by what they ran.

Its earlier test (``b"ray::" in cmdline or b"default_worker.py" in cmdline``) also counted the raylet (whose command
line names default_worker.py as the command it starts workers with) and Ray's two agents as workers, which put
their ~2 CPU-s into "the workers' CPU outside their tasks".
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "run_phases.py"
_spec = importlib.util.spec_from_file_location("run_phases", SCRIPT)
run_phases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_phases)

PYTHON, RAY = "/venv/bin/python", "/venv/lib/python3.11/site-packages/ray"


def argv(*parts: str) -> bytes:
    return b"\0".join(p.encode() for p in parts) + b"\0"


@pytest.mark.parametrize("command, state", [
    (argv("ray::IDLE" + " " * 40), "ray::IDLE"),
    (argv("ray::fit_and_score"), "ray::fit_and_score"),
    (argv("ray::warm_up"), "ray::warm_up"),
    (argv(PYTHON, f"{RAY}/_private/workers/default_worker.py", "--node-ip-address=1.2.3.4"), "start-up"),
    (argv(PYTHON, f"{RAY}/_private/workers/setup_worker.py", f"{RAY}/_private/workers/default_worker.py"),
     "start-up"),
    (argv("ray::DashboardAgent"), None),
    (argv("ray::RuntimeEnvAgent"), None),
    (argv(f"{RAY}/core/src/ray/raylet/raylet", "--raylet_socket_name=/tmp/ray/sockets/raylet",
          f"--python_worker_command={PYTHON} {RAY}/_private/workers/setup_worker.py "
          f"{RAY}/_private/workers/default_worker.py --node-ip-address=1.2.3.4"), None),
    (argv(PYTHON, f"{RAY}/dashboard/dashboard.py", "--minimal"), None),
    (argv(PYTHON, "-m", "topicaudit.engine.execution.ray_reaper"), None),
])
def test_only_ray_workers_have_a_state(command, state):
    assert run_phases.worker_state(command) == state


def test_the_table_splits_the_workers_cpu_by_state():
    row = {"phases": {"fits": {"from": 1.0, "wall": 10.0, "driver_cpu": 0.5, "others_cpu": 19.0, "workers_cpu": 18.0}},
           "wall_s": 12.0, "cpu_s": {"driver": 2.0, "others": 20.0, "workers": 18.0}, "fit_core_use": 0.8,
           "fit_task_cpu_s": 16.0, "cpus": 2, "timings_s": {"fit_wall": 10.0, "total": 11.0}, "workers": 2,
           "workers_cpu_by_state": {"start-up": 0.9, "ray::IDLE": 1.1, "ray::warm_up": 0.5, "ray::fit_and_score": 15.5}}
    table = run_phases.table([row])
    assert "Ray workers (2)" in table and "2.00 outside any task (start-up + ray::IDLE)" in table
    assert "| ray::fit_and_score | 15.50 |" in table
