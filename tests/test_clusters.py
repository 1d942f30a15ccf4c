"""Ray clusters as users run them: `ray start` and `topicaudit` as fresh processes in clean environments.

Nothing here initialises Ray in the test process, so no Ray setting (token mode,
addresses) leaks from one session into the next. Each cluster has its own free
ports, --temp-dir and HOME (so its ~/.ray/auth_token is the test's own).
"""
import json
import re
import shlex
import subprocess
import time
from importlib import metadata, util
from pathlib import Path

import numpy as np
import pytest

from cluster import VENV_BIN, Cluster, clean_env, free_port, generate_token

REPO = Path(__file__).resolve().parents[1]
RAY_VERSION = tuple(int(part) for part in metadata.version("ray").split(".")[:2])
needs_token_auth = pytest.mark.skipif(RAY_VERSION < (2, 52), reason="Ray before 2.52 has no token authentication")
needs_job_server = pytest.mark.skipif(util.find_spec("aiohttp") is None,
                                      reason="ray job submit needs ray[default]: pip install -e '.[cluster]'")

SMALL_TOML = """\
name = "small"

[synthetic]
n_docs = 300
n_words = 1000
mean_length = 40

[target]
k = 4

[attack]
shadows = 8
"""


def topicaudit(args, env, cwd, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "topicaudit"), *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def readme_cluster_commands() -> list[list[str]]:
    """The README's two cluster commands, split as a shell would."""
    text = (REPO / "README.md").read_text()
    head = re.search(r"^\.venv/bin/ray start --head[^\n#]*", text, re.M)
    run = re.search(r"^\.venv/bin/topicaudit run --shadows[^\n#]*--ray-address[^\n#]*", text, re.M)
    assert head and run, "README lost its cluster commands"
    return [shlex.split(head.group(0)), shlex.split(run.group(0))]


def arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


def assert_same_results(run: Path, reference: Path) -> None:
    """Every model's Φ and vocabulary, every statistic and every score, bit for bit."""
    models = sorted(p.name for p in (reference / "models").glob("*.npz"))
    assert models == sorted(p.name for p in (run / "models").glob("*.npz"))
    for name in models:
        ours, theirs = arrays(run / "models" / name), arrays(reference / "models" / name)
        for key in ("phi", "vocabulary"):
            assert ours[key].tobytes() == theirs[key].tobytes(), f"{name}:{key}"
    for name in ("statistics.npz", "scores.npz"):
        ours, theirs = arrays(run / name), arrays(reference / name)
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert ours[key].tobytes() == theirs[key].tobytes(), f"{name}:{key}"
    ours, theirs = (json.loads((p / "results.json").read_text()) for p in (run, reference))
    assert ours["attacks"] == theirs["attacks"]
    assert ours["epsilon_lower_bounds"] == theirs["epsilon_lower_bounds"]


def assert_token_nowhere(token: str, outputs: list[str], run: Path) -> None:
    for text in outputs:
        assert token not in text
    for path in run.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def local_run(tmp: Path, config: str) -> Path:
    """An audit on a local Ray instance (a fresh process), to compare clusters against."""
    (tmp / "audit.toml").write_text(config)
    home = tmp / "home"
    home.mkdir()
    # As in tests/cluster.py: on a loaded machine the raylet's agents may need more than Ray's default.
    env = clean_env(home, RAY_agent_register_timeout_ms="600000")
    for _ in range(3):  # Ray gives a new node a fixed 30 s to register, which a loaded machine can miss
        done = topicaudit(["run", "audit.toml", "--num-cpus", "2", "--output", str(tmp / "run"), "--quiet"],
                          env, tmp)
        if "timed out during startup" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr
    return tmp / "run"


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    return local_run(tmp_path_factory.mktemp("local"), SMALL_TOML)


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory):
    """A one-node cluster with token authentication on, as Ray >= 2.59 makes it whenever a token exists."""
    if RAY_VERSION < (2, 52):
        pytest.skip("Ray before 2.52 has no token authentication")
    home = tmp_path_factory.mktemp("head-home")
    token = generate_token(home)
    with Cluster(home) as cluster:
        cluster.start_head(num_cpus=1)
        cluster.token = token
        yield cluster


# -- authentication: the messages (no audit runs; a few seconds each) ----------------------
def _one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("topicaudit: error: ")
    return lines[0]


@needs_token_auth
def test_a_wrong_token_is_one_line_naming_the_fix_and_exit_2(token_cluster, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    wrong = generate_token(home)  # a well-formed token, but not the cluster's
    for env in (clean_env(home), clean_env(tmp_path, RAY_AUTH_TOKEN=wrong),
                clean_env(tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=wrong)):
        done = topicaudit(["run", "--shadows", "8", "--ray-address", token_cluster.address, "--quiet"], env,
                          tmp_path)
        line = _one_error_line(done)
        assert "rejected the authentication token" in line and "ray get-auth-token" in line
        assert "RAY_AUTH_TOKEN" in line
        assert_token_nowhere(wrong, [done.stdout, done.stderr], tmp_path / "runs")
        assert_token_nowhere(token_cluster.token, [done.stdout, done.stderr], tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


@needs_token_auth
def test_no_token_or_auth_disabled_here_are_told_apart(token_cluster, tmp_path):
    done = topicaudit(["run", "--ray-address", token_cluster.address, "--quiet"], clean_env(tmp_path), tmp_path)
    assert "requires an authentication token and this machine has none" in _one_error_line(done)
    done = topicaudit(["run", "--ray-address", token_cluster.address, "--quiet"],
                      clean_env(tmp_path, RAY_AUTH_MODE="disabled"), tmp_path)
    assert "RAY_AUTH_MODE=disabled here" in _one_error_line(done)
    done = topicaudit(["run", "--ray-address", token_cluster.address, "--quiet"],
                      clean_env(tmp_path, RAY_AUTH_TOKEN_PATH=str(tmp_path / "missing")), tmp_path)
    assert "RAY_AUTH_TOKEN_PATH names" in _one_error_line(done)
    assert not (tmp_path / "runs").exists()


def test_nothing_listening_is_its_own_message(tmp_path):
    done = topicaudit(["run", "--ray-address", f"127.0.0.1:{free_port()}", "--quiet"], clean_env(tmp_path),
                      tmp_path)
    line = _one_error_line(done)
    assert "nothing is listening at" in line and "ray start --head" in line


# -- slow: the README's commands, auth off, two nodes, job submission --------------------------
@pytest.mark.slow
def test_the_readme_commands_run_an_audit(tmp_path):
    """`ray start --head --port P` then `topicaudit run --shadows 8 --ray-address 127.0.0.1:P`, fresh shells.

    With Ray >= 2.52 the head's HOME holds a token (`ray get-auth-token --generate`), so
    authentication is on, as it is for anyone who ever ran a local Ray >= 2.59. Verbatim but
    for the port and the flags that keep this cluster apart from other Ray instances here.
    """
    home = tmp_path / "home"
    home.mkdir()
    token = generate_token(home) if RAY_VERSION >= (2, 52) else None
    head_command, run_command = readme_cluster_commands()
    assert head_command[:4] == [".venv/bin/ray", "start", "--head", "--port"]
    port = free_port()
    with Cluster(home, port=port) as cluster:
        cluster.start_head(num_cpus=2, extra=[a for a in head_command[3:] if a not in ("--port", "6379")])
        command = [str(VENV_BIN / Path(run_command[0]).name),
                   *[a.replace("6379", str(port)) for a in run_command[1:]]]
        done = subprocess.run(command, env=clean_env(home), cwd=tmp_path, capture_output=True, text=True,
                              timeout=900)
    assert done.returncode == 0, done.stderr
    [results_file] = (tmp_path / "runs").glob("*/results.json")
    results = json.loads(results_file.read_text())
    assert results["ray"]["address"] == f"127.0.0.1:{port}" and results["ray"]["cpus"] == 2
    assert sum(results["ray"]["models_by_node"].values()) == 9
    if token:
        assert_token_nowhere(token, [done.stdout, done.stderr], tmp_path / "runs")


@pytest.mark.slow
def test_a_cluster_without_authentication_is_never_sent_a_token(tmp_path, local_reference):
    head_home, driver_home = tmp_path / "head", tmp_path / "driver"
    head_home.mkdir(), driver_home.mkdir()
    token = generate_token(driver_home) if RAY_VERSION >= (2, 52) else None
    (tmp_path / "audit.toml").write_text(SMALL_TOML)
    with Cluster(head_home, env=clean_env(head_home, RAY_AUTH_MODE="disabled")) as cluster:
        cluster.start_head(num_cpus=2)
        done = topicaudit(["run", "audit.toml", "--ray-address", cluster.address, "--output", "run", "--quiet"],
                          clean_env(driver_home), tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_results(tmp_path / "run", local_reference)
    if token:
        assert_token_nowhere(token, [done.stdout, done.stderr], tmp_path / "run")


@pytest.mark.slow
def test_two_nodes_fit_the_models_and_match_a_local_run_bit_for_bit(tmp_path, pheme_path):
    # PHEME, 32 shadows: the synthetic audit's fits take milliseconds and Ray ran them all on
    # one node before the other had a worker up; fits of about a second spread (23 + 10 here).
    config = (f'name = "pheme"\n\n[corpus]\npath = "{pheme_path}"\npreprocess = false\n\n'
              '[target]\nk = 5\n\n[attack]\nshadows = 32\n')
    (tmp_path / "local").mkdir()
    local_reference = local_run(tmp_path / "local", config)
    home = tmp_path / "home"
    home.mkdir()
    token = generate_token(home) if RAY_VERSION >= (2, 52) else None
    node_env = {"RAY_AUTH_MODE": "token"} if token else {}
    (tmp_path / "audit.toml").write_text(config)
    with Cluster(home) as cluster:
        cluster.start_head(num_cpus=1).add_node(num_cpus=1, **node_env)
        nodes = set(cluster.live_nodes())
        done = topicaudit(["run", "audit.toml", "--ray-address", cluster.address, "--output", "run", "--quiet"],
                          clean_env(home), tmp_path)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    results = json.loads((run / "results.json").read_text())
    assert results["ray"]["nodes"] == 2 and results["ray"]["cpus"] == 2
    by_node = results["ray"]["models_by_node"]
    assert set(by_node) == nodes and all(count > 0 for count in by_node.values()), by_node
    for path in (run / "models").glob("*.npz"):
        assert str(arrays(path)["node"]) in nodes
    assert_same_results(run, local_reference)


@pytest.mark.slow
@needs_job_server
def test_ray_job_submit_runs_the_audit_on_the_head(tmp_path, local_reference):
    """The documented `ray job submit --working-dir DIR -- topicaudit run audit.toml --output ABS`."""
    home = tmp_path / "home"
    home.mkdir()
    token = generate_token(home) if RAY_VERSION >= (2, 52) else None
    work = tmp_path / "work"
    work.mkdir()
    (work / "audit.toml").write_text(SMALL_TOML)
    output = tmp_path / "audits" / "small"  # an absolute path on the head
    # The head is started from the activated environment, so jobs find `topicaudit` on PATH.
    with Cluster(home, env=clean_env(home, path_first=VENV_BIN)) as cluster:
        cluster.start_head(num_cpus=2, dashboard=True)
        submit_env = clean_env(home, **({"RAY_AUTH_MODE": "token"} if token else {}))
        for _ in range(30):  # the head's job agent registers some seconds after the dashboard listens
            done = subprocess.run(
                [str(VENV_BIN / "ray"), "job", "submit", f"--address=http://127.0.0.1:{cluster.dashboard_port}",
                 f"--working-dir={work}", "--", "topicaudit", "run", "audit.toml", "--output", str(output)],
                env=submit_env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
            if "No available agent" not in done.stderr:
                break
            time.sleep(2)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "succeeded" in done.stdout + done.stderr
    assert "lira_online" in done.stdout  # the summary table arrives in the job's logs
    assert_same_results(output, local_reference)
    if token:
        assert_token_nowhere(token, [done.stdout, done.stderr], output)
