"""Are two run directories the same audit, number for number? For checking that a speed change changed nothing.

Compares results.json (every key but ``timings_s`` and the Ray node ids in
``ray.models_by_node``, which differ from run to run by nature) and every
array of every ``.npz`` the runs wrote (models, plan, statistics, scores,
canaries), bit for bit. Exit 0 when identical, 1 with the differences listed.

    .venv/bin/python benchmarks/compare_runs.py runs/before runs/after
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

SKIPPED_ARRAYS = {"fit_seconds", "node"}  # a model file's own timing and the Ray node that fitted it


def comparable_results(path: Path) -> dict:
    results = json.loads((path / "results.json").read_text())
    results.pop("timings_s", None)
    ray = results.get("ray", {})
    if "models_by_node" in ray:
        ray["models_by_node"] = sorted(ray["models_by_node"].values()) if isinstance(ray["models_by_node"], dict) \
            else ray["models_by_node"]
    return results


def differences(a: Path, b: Path) -> list[str]:
    found = []
    ra, rb = comparable_results(a), comparable_results(b)
    if ra != rb:
        for key in sorted(set(ra) | set(rb)):
            if ra.get(key) != rb.get(key):
                found.append(f"results.json[{key!r}] differs")
    files_a = {p.relative_to(a) for p in a.rglob("*.npz")}
    files_b = {p.relative_to(b) for p in b.rglob("*.npz")}
    found += [f"{name} only in one run" for name in sorted(files_a ^ files_b)]
    for name in sorted(files_a & files_b):
        with np.load(a / name, allow_pickle=False) as za, np.load(b / name, allow_pickle=False) as zb:
            for key in sorted(set(za.files) | set(zb.files)):
                if key in SKIPPED_ARRAYS:
                    continue
                if key not in za.files or key not in zb.files:
                    found.append(f"{name}: array {key!r} only in one run")
                elif za[key].dtype != zb[key].dtype or za[key].shape != zb[key].shape or za[key].tobytes() != zb[key].tobytes():
                    found.append(f"{name}: array {key!r} differs")
    return found


def main() -> int:
    a, b = (Path(p) for p in sys.argv[1:3])
    found = differences(a, b)
    for line in found:
        print(line)
    print(f"{a} and {b}: " + ("identical (timings and node ids aside)" if not found else f"{len(found)} differences"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
