"""Real Ray clusters for the tests, started as a user starts them: `ray start` in fresh processes.

Every process gets a clean environment (PATH, a HOME of the test's own, nothing of
Ray's), its own free ports and its own --temp-dir, so nothing here touches the Ray
instances other programs run on this machine, nor their ~/.ray/auth_token.
Stopping kills exactly the processes each `ray start` made (never `ray stop`).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(home: Path, path_first: Path | None = None, **extra: str) -> dict[str, str]:
    """What a fresh login shell has: PATH, HOME, a locale; plus ``extra``. No RAY_* unless given."""
    path = f"{path_first}:{BASE_PATH}" if path_first else BASE_PATH
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", **extra}


def generate_token(home: Path) -> str:
    """`ray get-auth-token --generate`, as Ray's documentation says; returns the token (tests only)."""
    subprocess.run([str(VENV_BIN / "ray"), "get-auth-token", "--generate"], env=clean_env(home),
                   check=True, capture_output=True, timeout=120)
    return (home / ".ray" / "auth_token").read_text().strip()


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (Ray's workers start their own sessions, so process groups miss them)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, seconds: float = 180) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"ray start exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
    raise RuntimeError(f"nothing listened on port {port} after {seconds} s:\n{log.read_text()[-3000:]}")


class Cluster:
    """A head (and optionally more nodes) on this machine, each a `ray start --block` process."""

    def __init__(self, home: Path, env: dict[str, str] | None = None, port: int | None = None):
        self.home = Path(home)
        self.env = env or clean_env(self.home)
        self.port = port or free_port()
        # Short: Ray's socket paths live under it and Unix sockets allow ~100 characters.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ta-ray-", dir="/tmp"))
        self.processes: list[subprocess.Popen] = []
        self.dashboard_port: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _node_ports(self) -> list[str]:
        """Ports a node would otherwise take from fixed defaults shared with every Ray on the machine."""
        return [f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
                f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}"]

    def _start(self, args: list[str], wait_port: int, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = self.temp_dir / f"start-{len(self.processes)}.log"
        # A raylet aborts when its agents (heavier with ray[default]) take longer than this
        # to come up, which a machine shared with other work easily exceeds.
        env = {**(env or self.env), "RAY_agent_register_timeout_ms": "600000"}
        with open(log, "wb") as out:
            process = subprocess.Popen([str(VENV_BIN / "ray"), "start", "--block", *args], env=env,
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(process)
        _wait_for_port(wait_port, process, log)
        return process

    def start_head(self, num_cpus: int = 1, dashboard: bool = False, extra: list[str] = ()) -> "Cluster":
        args = ["--head", f"--port={self.port}", *extra, f"--num-cpus={num_cpus}", f"--temp-dir={self.temp_dir}",
                "--disable-usage-stats", *self._node_ports()]
        if importlib.util.find_spec("grpc"):  # ray[client] present: its server would take port 10001
            args.append(f"--ray-client-server-port={free_port()}")
        if dashboard:
            self.dashboard_port = free_port()
            args += ["--include-dashboard=true", "--dashboard-host=127.0.0.1",
                     f"--dashboard-port={self.dashboard_port}"]
        else:
            args.append("--include-dashboard=false")
        self._start(args, self.dashboard_port or self.port)
        return self

    def add_node(self, num_cpus: int = 1, **env: str) -> "Cluster":
        """A second raylet on this machine joining the head, as `ray start --address` on another host would.

        env: extra variables for that node (RAY_AUTH_MODE=token: Ray reads the token for an
        explicit --address only in token mode).
        """
        before = len(self.live_nodes())
        for attempt in range(3):
            log = self.temp_dir / f"start-{len(self.processes)}.log"
            process = self._start([f"--address={self.address}", f"--num-cpus={num_cpus}", *self._node_ports(),
                                   "--disable-usage-stats"], self.port, {**self.env, **env})
            deadline = time.time() + 180
            while len(self.live_nodes()) <= before and process.poll() is None and time.time() < deadline:
                time.sleep(1)
            if len(self.live_nodes()) > before:
                return self
            # Ray gives a new raylet 30 s (fixed) to register; a loaded machine can miss that: try again.
            if "timed out during startup" not in log.read_text():
                break
        raise RuntimeError(f"the node never joined the head (ray start exit {process.poll()}):\n"
                           f"{log.read_text()[-3000:]}")

    def live_nodes(self) -> list[str]:
        """Node ids the head reports alive (asked by a fresh driver, which finds the token as topicaudit does)."""
        code = ("import sys; from topicaudit.engine.execution.parallel import ray_session\n"
                "with ray_session(sys.argv[1]) as ray: print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive']))")
        out = subprocess.run([str(VENV_BIN / "python"), "-c", code, self.address], env=self.env,
                             capture_output=True, text=True, timeout=180)
        return out.stdout.split()

    def stop(self) -> None:
        """SIGTERM every process our `ray start`s made, then SIGKILL what is left after a grace period."""
        victims = []
        for process in self.processes:
            victims += [(pid, _started(pid)) for pid in (process.pid, *_descendants(process.pid))]
        # Processes a failed `ray start` left behind are no one's descendants any more, but
        # they name our own (unique) temp dir on their command line.
        victims += [(pid, _started(pid)) for pid in _naming(str(self.temp_dir)) if pid not in dict(victims)]
        # A `ray start --block` stops its node's processes within a second of its own SIGTERM, but lingers ~20 s
        # when they die under it at the same moment: signal the `ray start`s first, then whatever is left.
        _signal([(process.pid, _started(process.pid)) for process in self.processes], signal.SIGTERM)
        _wait_gone(victims, seconds=10)
        _signal(victims, signal.SIGTERM)
        _wait_gone(victims, seconds=20)
        _signal(victims, signal.SIGKILL)
        for process in self.processes:
            process.wait(timeout=30)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _naming(text: str) -> list[int]:
    """Processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _started(pid: int) -> str | None:
    """The process's start time (with its pid, an identity that survives pid reuse)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _signal(victims: list[tuple[int, str | None]], sig: int) -> None:
    for pid, start in victims:
        if start is not None and _started(pid) == start:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def _wait_gone(victims: list[tuple[int, str | None]], seconds: float) -> None:
    """Until every victim has exited (or is a zombie), at most ``seconds``."""
    deadline = time.time() + seconds
    while time.time() < deadline and any(_started(pid) == start and not _zombie(pid) for pid, start in victims):
        time.sleep(0.2)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
