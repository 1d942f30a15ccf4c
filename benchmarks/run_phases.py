"""Where the wall time and the CPU of ``topicaudit run`` go, phase by phase, in a fresh process.

Runs the console script as a user does (supervisor, Ray start-up and stop
included) with ``TOPICAUDIT_PHASE_TRACE`` set, so the driver records each phase
(``topicaudit.engine.execution.phases``): imports, load (corpus read and pre-processed,
or its cached counts), plan, ray_start (in the background from the end of
load), driver_fits (models the driver fits while Ray starts), fits, scoring,
writing (results.json, roc.png), summary (the printed table), stop (Ray's
shutdown, in the background). Meanwhile it samples the CPU
time of every process of the run (the driver, Ray's services and workers)
from /proc every 0.05 s.

Per phase it prints the wall time, the CPU of the driver's thread that ran it,
and the CPU the other processes of the run used in the same window, and how
much of that was Ray's workers (phases that overlap share that window). The fit phase's core use is measured from
per-task CPU, not wall: the seconds the fit and ζ tasks report (Σ
``timings_s.fit_cpu`` + ``statistics_cpu``, less ``driver_fit_cpu``, spent
before ``fit_wall`` began) over ``fit_wall`` × the cores.
The Ray workers' CPU is also split by what each worker was doing, read from
its process title: ``start-up`` (the interpreter and Ray starting),
``ray::IDLE`` (between tasks: the task module's imports, Ray's set-up, tasks
received and results sent), and each task by name (``ray::warm_up``,
``ray::fit_and_score``, ...). Ray's agents and the raylet are not workers.

Each repeat appends one JSON line to ``benchmarks/results/run_phases.jsonl``
(the command, the commit, the load average before and after, every phase);
the table of medians over the repeats is printed at the end. Timings taken
while other jobs share the cores are not measurements: note the load average.

    .venv/bin/python benchmarks/run_phases.py --corpus ../shared/data/pheme/pheme_clean.json \\
        --no-preprocess --k 5 --shadows 128 --seed 0 --repeats 5

``--cold-cache`` gives every repeat an empty pre-processing cache (the first
run's cost); by default the user's cache is used, so repeats after the first
read cached counts.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_end_to_end import _children  # noqa: E402
from harness import REPO, invocation  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PHASES = ("imports", "load", "plan", "figure", "ray_start", "driver_fits", "fits", "scoring", "writing", "summary", "stop")
RESULTS = REPO / "benchmarks" / "results" / "run_phases.jsonl"
# A worker's CPU outside its tasks: the interpreter and Ray starting, and between tasks (the task module's
# imports, Ray's serialisation set-up, receiving tasks and sending results).
OUTSIDE_TASKS = ("start-up", "ray::IDLE")


def worker_state(command: bytes) -> str | None:
    """What a process of the run is doing, from its command line, if it is a Ray worker; None for every other
    process (the driver, Ray's services, its agents ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent``, the raylet,
    whose command line names ``default_worker.py`` as the command it starts workers with).

    A worker names the task it runs in its process title (``ray::fit_and_score``), ``ray::IDLE`` between tasks,
    and is ``start-up`` until Ray sets the title (the interpreter starting and importing Ray).
    """
    argv = command.split(b"\0")
    title = argv[0].strip()
    if title.startswith(b"ray::"):
        return None if title.endswith(b"Agent") else title.decode(errors="replace")
    if any(arg.endswith(b"default_worker.py") for arg in argv[1:3]):
        return "start-up"
    return None


def _cpu(pid: int) -> tuple[float, str | None] | None:
    """(CPU seconds, ``worker_state``) of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK, worker_state(command)


class TreeSampler:
    """The CPU seconds of a process and all its descendants, sampled: (time, driver CPU, others' CPU, workers'
    CPU) rows; "others" are every process of the run but the driver (Ray's services and its workers).

    A process's last sampled value is kept after it exits, so a sum never drops. ``by_state`` splits the
    workers' CPU by what they were doing (``worker_state``): each interval's CPU goes to the state seen at its
    start, so a state's share is exact to within one interval per change of state.
    """

    def __init__(self, root: int, driver_of, interval: float = 0.05):
        self.root, self.driver_of, self.interval = root, driver_of, interval
        self.samples: list[tuple[float, float, float, float]] = []
        self.last: dict[int, float] = {}
        self.workers: set[int] = set()
        self.state: dict[int, str] = {}
        self.by_state: dict[str, float] = {}
        self.driver: set[int] = set()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            alive = self._sample()
            if not alive:
                return
            time.sleep(self.interval)

    def _sample(self) -> bool:
        tree, stack, alive = _children(), [self.root], False
        while stack:
            pid = stack.pop()
            found = _cpu(pid)
            if found is not None:
                alive = alive or pid == self.root
                cpu, state = found
                if state is not None:
                    self.workers.add(pid)
                    before = self.state.get(pid, "start-up")
                    self.by_state[before] = self.by_state.get(before, 0.0) + cpu - self.last.get(pid, 0.0)
                    self.state[pid] = state
                self.last[pid] = cpu
            stack.extend(tree.get(pid, []))
        self.driver |= self.driver_of(tree)
        driver_cpu = sum(v for pid, v in self.last.items() if pid in self.driver)
        workers_cpu = sum(v for pid, v in self.last.items() if pid in self.workers)
        self.samples.append((time.time(), driver_cpu, sum(self.last.values()) - driver_cpu, workers_cpu))
        return alive

    def between(self, start: float, end: float, column: int = 2) -> float:
        """CPU in [start, end] of the run's processes other than the driver (column 2) or of its workers (3)."""
        return self._at(end, column) - self._at(start, column)

    def _at(self, when: float, column: int) -> float:
        previous = (self.samples[0][0], 0.0)
        for row in self.samples:
            t, value = row[0], row[column]
            if t >= when:
                t0, v0 = previous
                return v0 if t == t0 else v0 + (value - v0) * (when - t0) / (t - t0)
            previous = (t, value)
        return previous[1]


def one_run(flags: list[str], cache_dir: str | None) -> dict:
    out = Path(tempfile.mkdtemp(prefix="topicaudit-phases-"))
    trace = out / "trace.jsonl"
    env = dict(os.environ, TOPICAUDIT_PHASE_TRACE=str(trace))
    if cache_dir is not None:
        env["TOPICAUDIT_CACHE_DIR"] = cache_dir
    exe = Path(sys.executable).with_name("topicaudit")
    cmd = [str(exe), "run", *flags, "--output", str(out / "run")]
    load_before = os.getloadavg()
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    # The console script forks: the parent supervises, its first child runs the command (the driver).
    sampler = TreeSampler(proc.pid, lambda tree: {proc.pid, *tree.get(proc.pid, [])[:1]})
    sampler.thread.start()
    _, err = proc.communicate()
    wall = time.time() - start
    sampler.thread.join()
    if proc.returncode != 0:
        raise SystemExit(f"topicaudit run exited {proc.returncode}:\n{err.decode(errors='replace')[-2000:]}")
    results = json.loads((out / "run" / "results.json").read_text())
    # Code from before the trace existed writes none: then only the totals are compared.
    records = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    phases = {}
    for r in records:
        begin = start if r["start"] is None else r["start"]  # the imports: from the process's start
        entry = phases.setdefault(r["phase"], {"wall": 0.0, "driver_cpu": 0.0, "others_cpu": 0.0, "workers_cpu": 0.0,
                                               "from": round(begin - start, 3)})
        entry["wall"] += r["end"] - begin
        entry["driver_cpu"] += r["cpu"]
        entry["others_cpu"] += sampler.between(begin, r["end"])
        entry["workers_cpu"] += sampler.between(begin, r["end"], column=3)
    timings = results["timings_s"]
    cpus = results["ray"].get("cpus") or os.cpu_count()
    # the fits inside fit_wall: the driver's, while Ray started, came before it
    task_cpu = timings.get("fit_cpu", 0.0) + timings.get("statistics_cpu", 0.0) - timings.get("driver_fit_cpu", 0.0)
    fit_wall = timings.get("fit_wall") or float("nan")
    _, driver_total, others_total, workers_total = sampler.samples[-1]
    return {
        "wall_s": round(wall, 3),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "phases": {name: {k: round(v, 3) for k, v in p.items()} for name, p in phases.items()},
        "cpu_s": {"driver": round(driver_total, 3), "others": round(others_total, 3),
                  "workers": round(workers_total, 3)},
        "workers": len(sampler.workers),
        "workers_cpu_by_state": {k: round(v, 3) for k, v in sorted(sampler.by_state.items())},
        "fit_core_use": round(task_cpu / (fit_wall * cpus), 4),
        "fit_task_cpu_s": round(task_cpu, 3),
        "cpus": cpus,
        "timings_s": timings,
    }


def table(rows: list[dict]) -> str:
    """Median over the repeats of each phase's wall and CPU."""
    lines = ["| phase | from s | wall s | driver CPU s | other processes' CPU s | of which Ray workers |",
             "|---|---|---|---|---|---|"]
    for name in PHASES:
        present = [r["phases"][name] for r in rows if name in r["phases"]]
        if present:
            m = {k: statistics.median(p.get(k, 0.0) for p in present)
                 for k in ("from", "wall", "driver_cpu", "others_cpu", "workers_cpu")}
            lines.append(f"| {name} | {m['from']:.2f} | {m['wall']:.2f} | {m['driver_cpu']:.2f} | "
                         f"{m['others_cpu']:.2f} | {m['workers_cpu']:.2f} |")
    med = lambda f: statistics.median(f(r) for r in rows)  # noqa: E731
    lines += [
        f"| **process wall** | | **{med(lambda r: r['wall_s']):.2f}** | {med(lambda r: r['cpu_s']['driver']):.2f} | "
        f"{med(lambda r: r['cpu_s']['others']):.2f} | {med(lambda r: r['cpu_s'].get('workers', 0.0)):.2f} |",
        "",
        f"fit phase: core use {med(lambda r: r['fit_core_use']):.1%} from per-task CPU "
        f"({med(lambda r: r['fit_task_cpu_s']):.2f} task CPU-s over fit_wall "
        f"{med(lambda r: r['timings_s'].get('fit_wall', 0)):.2f} s × {rows[0]['cpus']} cores); "
        f"timings_s.total {med(lambda r: r['timings_s']['total']):.2f} s",
    ]
    states = sorted({k for r in rows for k in r.get("workers_cpu_by_state", {})})
    if states:
        by_state = {k: med(lambda r: r.get("workers_cpu_by_state", {}).get(k, 0.0)) for k in states}
        outside = sum(v for k, v in by_state.items() if k in OUTSIDE_TASKS)
        lines += [
            "",
            f"Ray workers ({med(lambda r: r.get('workers', 0)):.0f}): CPU-s by what they ran (process titles); "
            f"{outside:.2f} outside any task (" + " + ".join(k for k in OUTSIDE_TASKS if k in by_state) + ")",
            "",
            "| worker state | CPU s |",
            "|---|---|",
            *(f"| {k} | {v:.2f} |" for k, v in sorted(by_state.items(), key=lambda kv: -kv[1])),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="corpus path (default: the embedded synthetic corpus)")
    parser.add_argument("--shadows", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cold-cache", action="store_true", help="an empty pre-processing cache for every repeat")
    parser.add_argument("--no-save", action="store_true", help="do not append to benchmarks/results/run_phases.jsonl")
    parser.add_argument("--label", default="", help="a note kept with each line (e.g. which code was timed)")
    args, rest = parser.parse_known_args()
    flags = [*(["--corpus", str(Path(args.corpus).resolve())] if args.corpus else []),
             "--shadows", str(args.shadows), *rest]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    rows = []
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="topicaudit-cache-") as cold:
            row = one_run(flags, cold if args.cold_cache else None)
        row.update(repeat=repeat, commit=commit, label=args.label, command=invocation("run_phases.py"),
                   run_flags=" ".join(shlex.quote(f) for f in flags), cold_cache=args.cold_cache)
        rows.append(row)
        print(f"repeat {repeat}: wall {row['wall_s']:.2f} s, fit core use {row['fit_core_use']:.1%}, load average "
              f"{row['load_average_before'][0]:.2f} → {row['load_average_after'][0]:.2f}", file=sys.stderr)
        if not args.no_save:
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            with open(RESULTS, "a") as handle:
                handle.write(json.dumps(row) + "\n")
    print(f"{invocation('run_phases.py')}\ncommit {commit}; {len(rows)} repeats; load average (1 min) "
          f"{min(r['load_average_before'][0] for r in rows):.2f}–{max(r['load_average_after'][0] for r in rows):.2f}; "
          "medians:\n")
    print(table(rows))


if __name__ == "__main__":
    main()
