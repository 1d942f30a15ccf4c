"""Where the CPU of an end-to-end audit goes, by process kind: driver, Ray services, workers.

Wall time on a shared machine says little (other jobs take the cores); CPU
seconds per process do not depend on the load much. This runs ``topicaudit
run`` in a fresh process, samples the CPU time (utime + stime) of it and every
descendant every 0.2 s, keeps each process's last value, and sums them by
kind, next to the run's own fit and ζ CPU.

    .venv/bin/python benchmarks/cpu_accounting.py -- --corpus ../shared/data/pheme/pheme_clean.json \
        --no-preprocess --k 5 --shadows 128 --seed 0
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_end_to_end import _children  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
KINDS = (("ray::fit_release", "fit tasks"), ("ray::statistics_batch", "statistics tasks"),
         ("default_worker.py", "idle or starting workers"), ("ray::IDLE", "idle or starting workers"),
         ("gcs_server", "Ray GCS"), ("raylet", "raylet"), ("dashboard", "dashboard and agents"),
         ("agent", "dashboard and agents"), ("log_monitor", "log monitor"), ("monitor.py", "autoscaler monitor"))


def cpu_seconds(pid: int) -> tuple[float, str]:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return -1.0, ""
    return (int(fields[11]) + int(fields[12])) / TICK, cmd


def kind_of(cmd: str, is_root: bool) -> str:
    if is_root:
        return "driver (topicaudit)"
    for needle, kind in KINDS:
        if needle in cmd:
            return kind
    return "other: " + " ".join(Path(part).name for part in cmd.split()[:2])


def main() -> None:
    args = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    out = Path(tempfile.mkdtemp(prefix="topicaudit-cpu-"))
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "run", *args, "--output", str(out / "run"), "--quiet"]
    load = os.getloadavg()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    seen: dict[int, tuple[float, str]] = {}  # pid → (latest CPU seconds, kind); a worker's kind is its latest

    def sample():
        while proc.poll() is None:
            tree, stack = _children(), [proc.pid]
            while stack:
                pid = stack.pop()
                seconds, command = cpu_seconds(pid)
                if seconds >= 0:
                    previous = seen.get(pid, (0.0, ""))[1]
                    kind = kind_of(command, pid == proc.pid)
                    if previous in ("fit tasks", "statistics tasks") and kind != previous:
                        kind = "fit and statistics tasks"  # one worker process runs both kinds in turn
                    seen[pid] = (seconds, kind)
                stack.extend(tree.get(pid, []))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.wait()
    wall = time.perf_counter() - start
    sampler.join()
    totals: dict[str, float] = {}
    for seconds, kind in seen.values():
        totals[kind] = totals.get(kind, 0.0) + seconds
    results = json.loads((out / "run" / "results.json").read_text())
    t = results["timings_s"]
    print(f"wall {wall:.1f} s; load average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    print(f"run's own timings: {t}")
    print("| process kind | CPU s |\n|---|---|")
    for kind, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {seconds:.1f} |")
    print(f"| total | {sum(totals.values()):.1f} |")


if __name__ == "__main__":
    main()
