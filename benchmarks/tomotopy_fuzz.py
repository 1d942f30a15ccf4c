"""Fuzz the tomotopy model reader: seeded mutations of saved models, each read as `topicaudit audit` reads it.

Every mutated file goes through ``load_user_model`` (the audit's entry point:
sniffing, the isolated tomotopy reader, Φ validation) in a driver process.
Outcomes: ``exit 2`` (a UserError: the file is refused with a message),
``accepted`` (read as a model), ``exit 3`` (any other exception: a bug),
``signal`` (the driver itself was killed by a signal) and ``hang`` (no
answer within the reader's limit plus a margin). A driver that dies is
restarted for the remaining files.

    .venv/bin/python benchmarks/tomotopy_fuzz.py --files 1000 --seed 0 --limit 4

tests/test_hardening_inputs.py runs a small seeded version of the same fuzz.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

KINDS = ("truncate", "bit flips", "insert bytes", "TPTK header")
HANG_MARGIN = 10.0   # seconds beyond the reader's limit before a file counts as a hang

_DRIVER = r"""
import sys, time
from pathlib import Path
from topicaudit.errors import UserError
from topicaudit.inputs import library_models
from topicaudit.inputs.user_model import load_user_model
library_models.TOMOTOPY_SECONDS = float(sys.argv[1])
for line in sys.stdin:
    path = line.strip()
    try:
        load_user_model(Path(path))
        outcome = "accepted"
    except UserError as error:
        text = str(error)
        why = ("reader stopped at the time limit" if "took longer" in text or "CPU time" in text else
               "reader crashed" if "crashed" in text else "reader out of memory" if "of memory" in text else
               "refused by a check")
        outcome = "exit 2 " + why
    except Exception as error:
        outcome = "exit 3 " + type(error).__name__
    print(outcome, flush=True)
"""


def base_models(folder: Path, seed: int) -> list[bytes]:
    """Two intact tomotopy LDAModel files (a small and a larger one), trained deterministically."""
    import tomotopy as tp

    rng = random.Random(seed)
    models = []
    for n_docs, n_words, k in ((40, 60, 3), (400, 2000, 8)):
        words = [f"w{i}" for i in range(n_words)]
        model = tp.LDAModel(k=k, alpha=0.2, eta=0.05, min_cf=0, seed=seed + 1)
        for _ in range(n_docs):
            model.add_doc([rng.choice(words) for _ in range(rng.randint(5, 60))])
        model.train(20, workers=1)
        path = folder / f"base-{n_docs}.bin"
        model.save(str(path))
        models.append(path.read_bytes())
    return models


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """One seeded mutation of an intact file."""
    if kind == "truncate":
        return data[:rng.randrange(0, len(data))]
    if kind == "bit flips":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(out))
            out[at] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "insert bytes":
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]
    # "TPTK" within the first 32 bytes of something else: random bytes, or a model's prefix and then noise
    at = rng.randrange(0, 29)
    body = bytearray(rng.randrange(256) for _ in range(rng.choice((8, 64, 4096))))
    if rng.random() < 0.5:
        body = bytearray(data[:rng.randrange(0, len(data))]) + body
    body[at:at + 4] = b"TPTK"
    return bytes(body)


def run_driver(paths: list[Path], limit: float) -> list[tuple[str, float]]:
    """Each file's outcome and seconds, restarting the driver after a signal death or a hang."""
    results: list[tuple[str, float]] = []
    remaining = list(paths)
    while remaining:
        driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(limit)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        while remaining:
            path = remaining[0]
            start = time.monotonic()
            driver.stdin.write(f"{path}\n")
            driver.stdin.flush()
            line = _read_line(driver, limit + HANG_MARGIN)
            seconds = time.monotonic() - start
            if line is None:  # no answer: the driver died or hangs
                if driver.poll() is None:
                    driver.kill()
                    driver.wait()
                    results.append(("hang", seconds))
                elif driver.returncode < 0:
                    results.append((f"signal {-driver.returncode}", seconds))
                else:
                    results.append((f"driver exit {driver.returncode}", seconds))
                remaining.pop(0)
                break
            results.append((line, seconds))
            remaining.pop(0)
        else:
            driver.stdin.close()
            driver.wait()
    return results


def _read_line(process: subprocess.Popen, timeout: float) -> str | None:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return None
    line = process.stdout.readline()
    return line.strip() or None


def fuzz(n_files: int, seed: int, limit: float, folder: Path) -> dict:
    """Mutate, read every file, and count the outcomes (by kind of mutation too)."""
    rng = random.Random(seed)
    bases = base_models(folder, seed)
    cases = []
    for i in range(n_files):
        kind = KINDS[i % len(KINDS)]
        data = mutate(rng.choice(bases), kind, rng)
        path = folder / f"case-{i:05d}.bin"
        path.write_bytes(data)
        cases.append((kind, path))
    started = time.monotonic()
    outcomes = run_driver([path for _, path in cases], limit)
    counts: Counter = Counter()
    exit2_reasons: Counter = Counter()
    by_kind: dict[str, Counter] = {kind: Counter() for kind in KINDS}
    slowest = 0.0
    for (kind, _), (outcome, seconds) in zip(cases, outcomes):
        group = " ".join(outcome.split(" ")[:2]) if outcome.startswith(("exit", "signal")) else outcome
        counts[group] += 1
        by_kind[kind][group] += 1
        if group == "exit 2":
            exit2_reasons[outcome[len("exit 2 "):]] += 1
        slowest = max(slowest, seconds)
    return {"files": n_files, "seed": seed, "limit": limit, "counts": dict(counts),
            "exit_2_reasons": dict(exit2_reasons),
            "by_kind": {kind: dict(c) for kind, c in by_kind.items()}, "slowest_seconds": round(slowest, 2),
            "wall_seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=float, default=4.0, help="the reader's wall-time limit in seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tomotopy-fuzz-") as folder:
        result = fuzz(args.files, args.seed, args.limit, Path(folder))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
