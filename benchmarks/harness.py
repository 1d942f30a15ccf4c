"""What the timing scripts share: the corpora they time on, the command that ran them, cold/warm compile children."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def timed_command(argv: list[str], env: dict, **fields) -> tuple[dict, subprocess.CompletedProcess]:
    """Run one command and time it: ``fields``, then seconds, exit code and the load average before and after,
    as one JSON line (printed) — the side-by-side comparisons of two builds (check_claim_timings, plugin_digest)."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    line = {**fields, "seconds": round(time.perf_counter() - start, 2), "exit": done.returncode,
            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
    print(json.dumps(line), flush=True)
    return line, done


def record(path: Path | None, lines: list[dict]) -> None:
    """Append the JSON lines to ``path`` (benchmarks/results/…), when one was given."""
    if path:
        with path.open("a") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)


def invocation(script: str) -> str:
    """The command line that ran ``script``, as a reader would type it from the repository root."""
    return " ".join([".venv/bin/python", f"benchmarks/{script}"] + [shlex.quote(a) for a in sys.argv[1:]])


def parse_or_compile(parser: argparse.ArgumentParser, child_compile) -> argparse.Namespace | None:
    """The script's flags; None when this process is the compile child (``child_compile`` has then run)."""
    parser.add_argument("--child-compile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_compile:
        child_compile()
        return None
    return args


def cold_and_warm(script_path: str, cache_dir: str) -> tuple[dict, dict]:
    """Compile timings of two fresh children sharing an empty numba cache: the first compiles, the second loads."""
    return run_child(script_path, cache_dir), run_child(script_path, cache_dir)


def run_child(script_path: str, cache_dir: str) -> dict:
    """Run ``script_path --child-compile`` in a fresh process with this numba cache; its last line is JSON."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, script_path, "--child-compile"], env=env, cwd=REPO,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def pheme_texts() -> list[str]:
    return json.loads((DATA / "pheme" / "pheme_clean.json").read_text())["text"]


def kos_counts() -> sp.csr_matrix:
    """KOS as its UCI file numbers it (documents and words in file order), float64 counts."""
    path = DATA / "kos" / "docword.kos.txt"
    with open(path) as fh:
        D, W, _ = (int(fh.readline()) for _ in range(3))
    trip = np.loadtxt(path, skiprows=3, dtype=np.int64, ndmin=2)
    X = sp.csr_matrix((trip[:, 2].astype(np.float64), (trip[:, 0] - 1, trip[:, 1] - 1)), shape=(D, W))
    X.sum_duplicates()
    return X


def run_directories(roots) -> list[Path]:
    """Every finished run directory (one holding results.json) directly below each root, sorted."""
    return [path for root in roots for path in sorted(Path(root).iterdir()) if (path / "results.json").exists()]
