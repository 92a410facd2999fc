"""Re-measure the README's figures for `make demo` (`semzoo train` with ``DEMO_ARGS``: the main job, SEM-QMIX on
SMAX 3m for its default 20k env steps, evaluated every 2k).

Runs make demo's command once per seed, one after the other (two at once on 2 cores slow each other), and
prints per seed: wall time of the whole command, its CPU time (user + system, JAX's and torch's threads
included: about the wall time on an idle machine, whatever the load when measured), training steps/s, the greedy
test win rate at each evaluation, the final win rate, the size of the checkpoints left behind and peak RSS; then
the ranges over seeds, which is what the README quotes. Say how busy the machine was next to the figures.

    python scripts/measure_demo.py --seeds 0 1 2 [--steps 20000] [--out /tmp/demo-runs]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEMO_ARGS = ("--test-interval", "2000")
"""The flags `make demo` gives `semzoo train` (the Makefile's demo target; tests/test_docs.py checks they agree)."""


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(seed: int, steps: int | None, out: Path) -> dict[str, object]:
    started, cpu_before = time.perf_counter(), children_cpu_s()
    steps_args = [] if steps is None else ["--steps", str(steps)]
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", *DEMO_ARGS, *steps_args, "--seed", str(seed),
                           "--out", str(out), "--run-name", f"seed{seed}"], capture_output=True, text=True)
    wall, cpu = time.perf_counter() - started, children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise SystemExit(f"seed {seed} failed: {done.stderr.strip().splitlines()[-1]}")
    from semzoo.runfiles import read_metrics

    rows = read_metrics(out / f"seed{seed}")
    win = [(r["env_steps"], r["value"]) for r in rows if r["name"] == "test_win_rate"]
    rate = [r["value"] for r in rows if r["name"] == "steps_per_s"]
    ckpt = sum(p.stat().st_size for p in (out / f"seed{seed}" / "checkpoints").glob("*.ckpt"))
    return {"seed": seed, "wall_s": wall, "cpu_s": cpu, "steps_per_s": sorted(rate)[len(rate) // 2] if rate else float("nan"),
            "win": win, "checkpoints_gb": ckpt / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="env steps (default: the main job's, TrainConfig's)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="semzoo-demo-"))
    from semzoo.config import TrainConfig

    steps = TrainConfig().steps if args.steps is None else args.steps
    print(f"make demo (semzoo train {' '.join(DEMO_ARGS)}) x {len(args.seeds)} seeds, {steps:,} steps each, "
          f"{os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start; runs in {out}")
    results = []
    for seed in args.seeds:
        r = run_one(seed, args.steps, out)
        results.append(r)
        curve = ", ".join(f"{s // 1000}k {v:.2f}" for s, v in r["win"])  # type: ignore[attr-defined]
        print(f"seed {seed}: {r['wall_s']:.0f} s wall, {r['cpu_s']:.0f} s CPU, median {r['steps_per_s']:.0f} steps/s, checkpoints "
              f"{r['checkpoints_gb']:.2f} GB; test win rate {curve}", flush=True)
    finals = [r["win"][-1][1] for r in results if r["win"]]  # type: ignore[index]
    walls, cpus = [r["wall_s"] for r in results], [r["cpu_s"] for r in results]
    print(f"wall time {min(walls) / 60:.1f}-{max(walls) / 60:.1f} min, CPU time {min(cpus):.0f}-{max(cpus):.0f} s; final win rate {min(finals):.2f}-{max(finals):.2f} "
          f"over seeds {args.seeds}; load average {os.getloadavg()[0]:.1f} at the end; "
          f"peak RSS of children {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
