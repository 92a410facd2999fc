"""Learning on SMAX 3m: env steps each algorithm needs for a 90 % greedy test win rate, CPU.

Runs ``semzoo.run.trainer.train`` for each algorithm in turn (never at the same time) with the
PyMARL / paper defaults (batch 32 episodes, replay 5000 episodes, RMSprop 5e-4, target update
every 200 episodes, epsilon 1.0 -> 0.05 over 50k steps, 32 greedy test episodes every 10k
steps) and prints, per algorithm, the greedy test win-rate curve, the env steps at which it
first reached the target, the final win rate, the wall time and the end-to-end env steps/s.

    python scripts/bench_smax_learning.py [--steps 200000] [--algos qmix sem-qmix] [--map 3m]

Torch runs with one thread by default: on a 2-core machine, and above all on a loaded one,
two intra-op threads make each update many times slower (they wait on each other).
Wall time and steps/s are end to end; the first run also pays SMAX's JIT compilation (seconds).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from semzoo.config import ExplorationConfig, TrainConfig
from semzoo.run.trainer import train
from semzoo.runfiles import read_metrics

TARGET_WIN_RATE = 0.9
WIN_RATE_METRIC = "test_win_rate"


def win_rate_curve(run_dir: Path) -> list[tuple[int, float]]:
    """(env_steps, greedy test win rate) of every evaluation of a run, in order."""
    return [(row["env_steps"], row["value"]) for row in read_metrics(run_dir) if row["name"] == WIN_RATE_METRIC]


def first_reaching(curve: list[tuple[int, float]], target: float) -> int | None:
    """The env steps of the first evaluation with a win rate >= target, or None."""
    return next((steps for steps, win in curve if win >= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    parser.add_argument("--algos", nargs="+", default=["qmix", "sem-qmix"])
    parser.add_argument("--map", default="3m", help="SMAX map (env id smax:<map>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--test-interval", type=int, default=10_000)
    parser.add_argument("--test-episodes", type=int, default=32)
    parser.add_argument("--epsilon-anneal-steps", type=int, default=50_000)
    parser.add_argument("--target", type=float, default=TARGET_WIN_RATE, help="win rate to report the steps for")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out", default="runs/bench_smax_learning")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    summary = []
    for algo in args.algos:
        config = TrainConfig(env=f"smax:{args.map}", algo=algo, steps=args.steps, seed=args.seed, out=args.out,
                             device="cpu", n_envs=args.n_envs, test_interval=args.test_interval,
                             test_episodes=args.test_episodes, save_interval=0,
                             exploration=ExplorationConfig(epsilon_anneal_steps=args.epsilon_anneal_steps))
        start = time.perf_counter()
        run_dir, result = train(config)
        wall = time.perf_counter() - start
        curve = win_rate_curve(run_dir)
        reached = first_reaching(curve, args.target)
        print(f"\n{algo} on smax:{args.map}, seed {args.seed}: greedy test win rate ({args.test_episodes} episodes)")
        print("  env steps   win rate")
        for steps, win in curve:
            print(f"  {steps:9,d}   {win:8.2f}")
        env_steps = max(row["env_steps"] for row in read_metrics(run_dir))
        summary.append((algo, reached, result.get(WIN_RATE_METRIC, float("nan")), wall, env_steps / wall))

    print(f"\nsmax:{args.map}, {args.steps:,} env steps per run, {args.n_envs} envs, {args.threads} torch thread(s)")
    print(f"{'algo':<10} {'steps to ' + format(args.target, '.0%'):>14} {'final win':>10} {'wall (s)':>9} {'steps/s':>8}")
    for algo, reached, final, wall, rate in summary:
        reached_text = f"{reached:,}" if reached is not None else "not reached"
        print(f"{algo:<10} {reached_text:>14} {final:10.2f} {wall:9.0f} {rate:8.0f}")


if __name__ == "__main__":
    main()
