"""Does episodic memory help? SEM-VDN versus VDN on the two-step game of the QMIX paper, over lambda and seeds.

    python scripts/two_step_lambda.py                          # the table of docs/memory.md (10 seeds)
    python scripts/two_step_lambda.py --seeds 3 --lams 0 0.5   # a quick look
    python scripts/two_step_lambda.py --exploration annealed   # epsilon 1 -> 0.05 instead of uniform

Prints one markdown row per lambda: the greedy return of every seed, how many reach the optimum 8,
and the closed-form prediction (see docs/memory.md, "Does memory help? the two-step game").
lambda = 0 is SEM-VDN with the memory read but unused, i.e. VDN bit for bit.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch

from semzoo import make_env
from semzoo.config import ExplorationConfig, LearnerConfig, MemoryConfig, TrainConfig
from semzoo.run.trainer import Trainer

ENV = "matrix:two_step"
STEPS = 4000
"""Env steps per run: 2000 episodes of 2 steps, about 2000 gradient updates."""
PENDING_SIZE = 100
"""|M| in env steps = 50 two-step episodes between table updates. The paper's |M| = 5000 steps is
about 50 SMAC episodes; 5000 steps here would update the table only once, at 5000 steps."""
CAPACITY = 1000
"""The game has 3 non-final states; a small table keeps runs light."""
LEARNER = LearnerConfig(lr=1e-3, batch_size=32, buffer_size=500, target_update_episodes=50)
"""Twice SMAC's learning rate and faster target updates: the game is tiny. With lr 5e-3 and 2000 steps the
final Q-values still jitter by more than the 0.05-0.15 margins near lambda* (VDN reached 8 on 1 seed of 10)."""
DEFAULT_LAMS = (0.0, 0.2, 0.3, 0.4, 0.5, 1.0)


def exploration_for(kind: str, steps: int) -> ExplorationConfig:
    """'uniform': epsilon = 1 throughout (the QMIX paper's setting for this game); 'annealed': 1 -> 0.05."""
    if kind == "uniform":
        return ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0)
    if kind == "annealed":
        return ExplorationConfig(epsilon_anneal_steps=steps // 2)
    raise ValueError(f"exploration={kind!r}: expected 'uniform' or 'annealed'")


def two_step_config(lam: float, seed: int, *, steps: int = STEPS, exploration: str = "uniform") -> TrainConfig:
    """SEM-VDN on the two-step game with the study's settings (lambda = 0 is plain VDN)."""
    return TrainConfig(env=ENV, algo="sem-vdn", steps=steps, seed=seed, n_envs=8, test_episodes=8,
                       test_interval=10**9, log_interval=10**9, device="cpu",
                       exploration=exploration_for(exploration, steps), learner=LEARNER,
                       memory=MemoryConfig(lam=lam, pending_size=PENDING_SIZE, capacity=CAPACITY))


def greedy_return(config: TrainConfig) -> float:
    torch.set_num_threads(1)  # tiny networks: extra threads only contend
    trainer = Trainer(config)
    try:
        return trainer.run()["test_return_mean"]
    finally:
        trainer.close()


def closed_form() -> tuple[float, float, float]:
    """(VDN's best value in state 2B, the 2A payoff, lambda*) under uniform exploration.

    VDN's least-squares fit of a 2x2 table under uniform data is row mean + column mean - mean;
    SEM's target for choosing 2B is (1 - lambda) fit_max + lambda max payoff, which beats 2A's
    payoff once lambda > lambda* = (payoff_2A - fit_max) / (max payoff_2B - fit_max).
    """
    payoff = np.asarray(make_env(ENV).payoff, float)
    table_2a, table_2b = payoff[0], payoff[1]
    fit = table_2b.mean(axis=1)[:, None] + table_2b.mean(axis=0)[None, :] - table_2b.mean()
    value_2a = float(table_2a.max())
    fit_max = float(fit.max())
    return fit_max, value_2a, (value_2a - fit_max) / (float(table_2b.max()) - fit_max)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--lams", type=float, nargs="+", default=list(DEFAULT_LAMS))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--exploration", choices=("uniform", "annealed"), default="uniform")
    parser.add_argument("--jobs", type=int, default=1, help="Runs in parallel (one process each).")
    args = parser.parse_args()

    fit_max, value_2a, lam_star = closed_form()
    optimum = make_env(ENV).optimal_return
    print(f"two-step game, {args.exploration} exploration, {args.steps} steps, seeds 0..{args.seeds - 1}; "
          f"closed form: VDN's best 2B value {fit_max:g} < {value_2a:g}, SEM needs lambda > {lam_star:.3f}")
    print("| lambda | greedy return per seed | reach 8 | mean | predicted |")
    print("|---|---|---|---|---|")
    started = time.perf_counter()
    configs = [[two_step_config(lam, seed, steps=args.steps, exploration=args.exploration) for seed in range(args.seeds)]
               for lam in args.lams]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for lam, row in zip(args.lams, configs):
            returns = list(pool.map(greedy_return, row))
            predicted = "-" if args.exploration != "uniform" else (optimum if lam > lam_star else value_2a)
            print(f"| {lam:g} | {' '.join(f'{r:g}' for r in returns)} | "
                  f"{sum(r == optimum for r in returns)}/{len(returns)} | {np.mean(returns):.2f} | {predicted} |",
                  flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
