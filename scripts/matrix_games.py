"""Train every algorithm id on one-step cooperative matrix games over many seeds; print a markdown table.

Per (method, game): the share of seeds whose final greedy joint action is optimal, and the mean greedy payoff.

Protocol (see docs/matrix_games.md): uniform exploration (epsilon = 1 throughout, the data regime of the
WQMIX paper's matrix-game analysis), so every method sees the same i.i.d. joint actions and the result is the
projection each mixer learns; then one greedy episode per env decides the joint action.

    python scripts/matrix_games.py --workers 2            # the full table: 15 algos x 3 games x 20 seeds
    python scripts/matrix_games.py --algos qmix,cw-qmix --games qtran --seeds 5
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from semzoo.algos import algorithm_ids

ALL_ALGOS = tuple(algorithm_ids())
"""Every id of the algorithm table (semzoo.algos): the built-in rows and their sem-/saem- variants."""
GAMES = ("qtran", "climbing", "penalty")
PENALTY_K = -100.0


@dataclass(frozen=True)
class Setting:
    """What one run trains with; the defaults are the published table's."""

    steps: int = 640
    """Episodes (= env steps: the games last one step)."""
    n_envs: int = 32
    updates_per_episode: float = 0.125
    """640 episodes x 0.125 = 80 gradient steps."""
    batch_size: int = 128
    lr: float = 1e-2
    epsilon: float = 1.0
    """Constant epsilon: 1.0 is uniform exploration."""
    wqmix_alpha: float = 0.1
    qplex_heads: int = 10


def train_one(algo: str, game: str, seed: int, setting: Setting) -> tuple[str, str, int, float, bool, float]:
    """Train one run; returns (algo, game, seed, greedy payoff, optimal?, seconds)."""
    import torch

    torch.set_num_threads(1)
    from semzoo.config import ExplorationConfig, LearnerConfig, MemoryConfig, TrainConfig
    from semzoo.envs.registry import make_env
    from semzoo.run.trainer import Trainer

    env_args = {"k": PENALTY_K} if game == "penalty" else {}
    config = TrainConfig(
        env=f"matrix:{game}", env_args=env_args, algo=algo, steps=setting.steps, seed=seed, n_envs=setting.n_envs,
        test_episodes=setting.n_envs, test_interval=10**9, log_interval=10**9, save_interval=0, device="cpu",
        exploration=ExplorationConfig(epsilon_start=setting.epsilon, epsilon_finish=setting.epsilon),
        # One-step games: the memory table must be written before it can be read, so update it every collection.
        memory=MemoryConfig(pending_size=setting.n_envs),
        learner=LearnerConfig(lr=setting.lr, batch_size=setting.batch_size, buffer_size=max(setting.steps, setting.batch_size),
                              updates_per_episode=setting.updates_per_episode),
    )
    if "wqmix" in config.components:
        config = config.with_settings("wqmix", wqmix_alpha=setting.wqmix_alpha)
    if "qplex" in config.components:
        config = config.with_settings("qplex", qplex_heads=setting.qplex_heads)
    started = time.perf_counter()
    trainer = Trainer(config)
    try:
        payoff = trainer.run()["test_return_mean"]
    finally:
        trainer.close()
    optimum = make_env(f"matrix:{game}", **env_args).optimal_return
    return algo, game, seed, float(payoff), bool(np.isclose(payoff, optimum)), time.perf_counter() - started


def _train_job(job: tuple[str, str, int, Setting]) -> tuple[str, str, int, float, bool, float]:
    return train_one(*job)


def markdown_table(results: list[tuple[str, str, int, float, bool, float]], algos: list[str], games: list[str]) -> str:
    """Rows: methods; per game 'optimal share / mean greedy payoff'."""
    header = "| method | " + " | ".join(f"{g}: optimal | {g}: mean payoff" for g in games) + " |"
    lines = [header, "|---" * (1 + 2 * len(games)) + "|"]
    for algo in algos:
        cells = []
        for game in games:
            runs = [r for r in results if r[0] == algo and r[1] == game]
            share = np.mean([r[4] for r in runs]) if runs else float("nan")
            mean = np.mean([r[3] for r in runs]) if runs else float("nan")
            cells += [f"{100 * share:.0f} % ({sum(r[4] for r in runs)}/{len(runs)})", f"{mean:.2f}"]
        lines.append(f"| {algo} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Setting()
    parser.add_argument("--algos", default=",".join(ALL_ALGOS), help="comma-separated algorithm ids")
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated matrix games")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=default.steps, help="episodes per run (one step each)")
    parser.add_argument("--updates-per-episode", type=float, default=default.updates_per_episode)
    parser.add_argument("--batch-size", type=int, default=default.batch_size)
    parser.add_argument("--lr", type=float, default=default.lr)
    parser.add_argument("--epsilon", type=float, default=default.epsilon, help="constant exploration rate (1 = uniform)")
    parser.add_argument("--wqmix-alpha", type=float, default=default.wqmix_alpha)
    parser.add_argument("--qplex-heads", type=int, default=default.qplex_heads)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="parallel processes")
    args = parser.parse_args()

    setting = Setting(steps=args.steps, updates_per_episode=args.updates_per_episode, batch_size=args.batch_size,
                      lr=args.lr, epsilon=args.epsilon, wqmix_alpha=args.wqmix_alpha, qplex_heads=args.qplex_heads)
    algos, games = args.algos.split(","), args.games.split(",")
    from semzoo.algos import parse_algorithm

    for algo in algos:
        parse_algorithm(algo)  # a typo fails here, not in a worker
    jobs = [(a, g, s, setting) for a in algos for g in games for s in range(args.seeds)]
    started = time.perf_counter()
    results = []
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for i, result in enumerate(pool.map(_train_job, jobs, chunksize=1), 1):
            results.append(result)
            if i % max(1, len(jobs) // 20) == 0:
                print(f"[{i}/{len(jobs)}] {time.perf_counter() - started:.0f}s", flush=True)
    wall = time.perf_counter() - started
    print()
    print(markdown_table(results, algos, games))
    print()
    print(f"{len(jobs)} runs, {args.workers} workers, {wall:.0f} s wall, "
          f"{np.mean([r[5] for r in results]):.1f} s per run (mean); setting {setting}")


if __name__ == "__main__":
    main()
