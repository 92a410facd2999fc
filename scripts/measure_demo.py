"""Re-measure the README's figures for the main job (`semzoo train`: SEM-QMIX on SMAX 3m, 100k steps).

Runs the main job once per seed, one after the other (two at once on 2 cores slow each other), and
prints per seed: wall time of the whole command, training steps/s, the greedy test win rate at each
evaluation, the final win rate, the size of the checkpoints left behind and peak RSS; then the
ranges over seeds, which is what the README quotes. Say how busy the machine was next to the figures.

    python scripts/measure_demo.py --seeds 0 1 2 [--steps 100000] [--out /tmp/demo-runs]
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


def run_one(seed: int, steps: int, out: Path) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "semzoo.cli", "train", "--seed", str(seed), "--steps", str(steps),
                           "--out", str(out), "--run-name", f"seed{seed}"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"seed {seed} failed: {done.stderr.strip().splitlines()[-1]}")
    from semzoo.runfiles import read_metrics

    rows = read_metrics(out / f"seed{seed}")
    win = [(r["env_steps"], r["value"]) for r in rows if r["name"] == "test_win_rate"]
    rate = [r["value"] for r in rows if r["name"] == "steps_per_s"]
    ckpt = sum(p.stat().st_size for p in (out / f"seed{seed}" / "checkpoints").glob("*.ckpt"))
    return {"seed": seed, "wall_s": wall, "steps_per_s": sorted(rate)[len(rate) // 2] if rate else float("nan"),
            "win": win, "checkpoints_gb": ckpt / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="semzoo-demo-"))
    print(f"main job x {len(args.seeds)} seeds, {args.steps:,} steps each, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start; runs in {out}")
    results = []
    for seed in args.seeds:
        r = run_one(seed, args.steps, out)
        results.append(r)
        curve = ", ".join(f"{s // 1000}k {v:.2f}" for s, v in r["win"])  # type: ignore[attr-defined]
        print(f"seed {seed}: {r['wall_s']:.0f} s wall, median {r['steps_per_s']:.0f} steps/s, checkpoints "
              f"{r['checkpoints_gb']:.2f} GB; test win rate {curve}", flush=True)
    finals = [r["win"][-1][1] for r in results if r["win"]]  # type: ignore[index]
    walls = [r["wall_s"] for r in results]
    print(f"wall time {min(walls) / 60:.1f}-{max(walls) / 60:.1f} min; final win rate {min(finals):.2f}-{max(finals):.2f} "
          f"over seeds {args.seeds}; load average {os.getloadavg()[0]:.1f} at the end; "
          f"peak RSS of children {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
