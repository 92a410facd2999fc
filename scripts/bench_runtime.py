"""What the paper's runtime costs: PyMARL's one-episode runner against semzoo's former runtime, same env and algorithm.

Trains ``--steps`` env steps in each runtime, one after the other in this process, and prints one markdown row
each: env steps/s without the test episodes, the seconds spent collecting and learning per 1,000 env steps, the
updates made and the milliseconds per update. Both runtimes make one update per collected episode, so learning
costs the same per episode; what differs is collection (one env stepped at a time against eight) and whether it
overlaps learning.

    python scripts/bench_runtime.py                        # SMAX 2s3z, QMIX, 20k env steps per runtime
    python scripts/bench_runtime.py --steps 50000 --rounds 2

Runtimes: ``pymarl`` (the default: n_envs 1, collect then learn), ``semzoo-0.2 sequential`` (8 envs, collect then
learn: how the studies before 0.3 ran) and ``semzoo-0.2`` (8 envs, collection in the actor process overlapping
learning). The load average before and after each run is printed: on a shared 2-core machine the figures move
with it.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from semzoo.config import TrainConfig
from semzoo.run.trainer import Trainer
from semzoo.runfiles import METRICS_FILE

RUNTIMES: dict[str, dict[str, object]] = {
    "pymarl": {},
    "semzoo-0.2 sequential": {"runtime": "semzoo-0.2", "sequential": True, "pinned": ("sequential",)},
    "semzoo-0.2": {"runtime": "semzoo-0.2"},
}
"""Label -> the TrainConfig fields that select the runtime."""


def timed_run(env: str, algo: str, steps: int, runtime: dict[str, object], out: Path) -> dict[str, float]:
    """One run of ``steps`` env steps; its wall time and the collect, learn and test seconds of its metric rows."""
    config = TrainConfig(env=env, algo=algo, steps=steps, seed=0, out=str(out), run_name=f"run{time.monotonic_ns()}",
                         save_interval=0, keep_checkpoints=0, test_interval=10**9, log_interval=1000, device="cpu",
                         **runtime)  # type: ignore[arg-type]
    run_dir = out / str(config.run_name)
    trainer = Trainer(config, run_dir=run_dir, tensorboard=False)
    try:
        trainer.run()
        counters = trainer.counters
    finally:
        trainer.close()
    sums = {"time_collect_s": 0.0, "time_learn_s": 0.0, "test_time_s": 0.0}
    with (run_dir / METRICS_FILE).open(newline="") as f:
        for row in csv.DictReader(f):
            if row["name"] in sums:
                sums[row["name"]] += float(row["value"])
    return {"wall": counters.wall_time, "env_steps": counters.env_steps, "updates": counters.updates, **sums}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="smax:2s3z")
    parser.add_argument("--algo", default="qmix")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1, help="Each runtime this many times, alternating.")
    parser.add_argument("--runtimes", nargs="+", choices=list(RUNTIMES), default=list(RUNTIMES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in args.runtimes}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.rounds):
            for name in args.runtimes:
                load = os.getloadavg()[0]
                results[name].append(timed_run(args.env, args.algo, args.steps, RUNTIMES[name], Path(out)))
                print(f"{name}: done, load average {load:.1f} before, {os.getloadavg()[0]:.1f} after", flush=True)
    print(f"\n{args.env}, {args.algo}, {args.steps:,} env steps per run, {args.rounds} round(s), medians over rounds")
    print("| runtime | env steps/s (no tests) | collect s / 1k steps | learn s / 1k steps | updates | ms / update |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        def median(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)
        rate = statistics.median(r["env_steps"] / (r["wall"] - r["test_time_s"]) for r in runs)
        per_k = statistics.median(r["env_steps"] for r in runs) / 1000
        print(f"| {name} | {rate:.0f} | {median('time_collect_s') / per_k:.2f} | {median('time_learn_s') / per_k:.2f} | "
              f"{median('updates'):.0f} | {1000 * median('time_learn_s') / max(median('updates'), 1):.1f} |")


if __name__ == "__main__":
    main()
