"""The same audit on a one-node and a two-node Ray cluster on this machine, with the same CPUs in total.

Each cluster is started with `ray start` (tests/cluster.py: free ports, own temp
dir, own HOME with a token, so authentication is on) and the audit runs as
`topicaudit run --ray-address` in a fresh process. Prints the fit and total wall
times, the models each node fitted, the model file sizes, and whether every
score is bit-identical between the two runs.

    .venv/bin/python benchmarks/cluster_nodes.py --corpus ../shared/data/pheme/pheme_clean.json \\
        --no-preprocess --k 5 --shadows 64
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cluster import VENV_BIN, Cluster, clean_env, generate_token  # noqa: E402


def run(cluster: Cluster, home: Path, args: list[str], output: Path) -> tuple[dict, float]:
    start = time.perf_counter()
    done = subprocess.run([str(VENV_BIN / "topicaudit"), "run", *args, "--ray-address", cluster.address,
                           "--output", str(output), "--quiet"], env=clean_env(home), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads((output / "results.json").read_text()), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--no-preprocess", action="store_true")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--shadows", type=int, default=64)
    args = parser.parse_args()
    audit_args = [f"--corpus={Path(args.corpus).resolve()}", f"--k={args.k}", f"--shadows={args.shadows}"]
    audit_args += ["--no-preprocess"] if args.no_preprocess else []

    tmp = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    home = tmp / "home"
    home.mkdir()
    generate_token(home)
    rows = {}
    with Cluster(home) as one:
        one.start_head(num_cpus=2)
        rows["one node, 2 CPUs"] = run(one, home, audit_args, tmp / "one")
    with Cluster(home) as two:
        two.start_head(num_cpus=1).add_node(num_cpus=1, RAY_AUTH_MODE="token")
        rows["two nodes, 1 CPU each"] = run(two, home, audit_args, tmp / "two")

    print(f"load average before/after: {os.getloadavg()}")
    print("| cluster | fit wall s | statistics s | total wall s (process) | models per node |")
    print("|---|---|---|---|---|")
    for name, (results, wall) in rows.items():
        t = results["timings_s"]
        per_node = sorted(results["ray"]["models_by_node"].values(), reverse=True)
        print(f"| {name} | {t['fit_wall']:.1f} | {t['statistics']:.1f} | {wall:.1f} | {per_node} |")
    same = all(
        np.load(tmp / "one" / name)[key].tobytes() == np.load(tmp / "two" / name)[key].tobytes()
        for name in ("scores.npz", "statistics.npz") for key in np.load(tmp / "one" / name).files)
    same_models = all(np.load(p)["phi"].tobytes() == np.load(tmp / "two" / "models" / p.name)["phi"].tobytes()
                      for p in (tmp / "one" / "models").glob("*.npz"))
    sizes = [p.stat().st_size for p in (tmp / "one" / "models").glob("*.npz")]
    with np.load(tmp / "one" / "models" / "target.npz") as z:
        phi_shape, phi_bytes = z["phi"].shape, z["phi"].nbytes
    print(f"scores and statistics bit-identical: {same}; every Φ bit-identical: {same_models}")
    print(f"target Φ {phi_shape} float32 = {phi_bytes / 1e3:.0f} kB; model files {min(sizes) / 1e3:.0f}–"
          f"{max(sizes) / 1e3:.0f} kB; run directories in {tmp}")


if __name__ == "__main__":
    main()
