"""Does episodic memory help? SEM-VDN versus VDN on the two-step game of the QMIX paper, over lambda and seeds.

    python scripts/two_step_lambda.py                          # the table of docs/studies/two-step.md (10 seeds)
    python scripts/two_step_lambda.py --seeds 3 --lams 0 0.5   # a quick look
    python scripts/two_step_lambda.py --exploration annealed   # epsilon 1 -> 0.05 instead of uniform
    python scripts/two_step_lambda.py --control --jobs 2       # the positive control: VDN, SEM, mc, TD(lambda)

Prints one markdown row per lambda: the greedy return of every seed, how many reach the optimum 8,
and the closed-form prediction (see docs/studies/two-step.md, "Does memory help? the two-step game").
lambda = 0 is SEM-VDN with the memory read but unused, i.e. VDN bit for bit.

``--control`` prints one row per learner instead, all at lambda = 0.5 (``--control-lam``): VDN, SEM-VDN, the
own-return ablation mc-VDN and VDN with TD(lambda) targets, each with its blended first-step target towards 2B
in closed form against 2A's 7 (docs/studies/two-step.md, "The positive control").
"""

from __future__ import annotations

import argparse
import dataclasses
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
CONTROL_LAM = 0.5
"""lambda of the positive control's rows: SEM-VDN's (eq. 6), mc-VDN's (the same loss) and TD(lambda)'s."""


def exploration_for(kind: str, steps: int) -> ExplorationConfig:
    """'uniform': epsilon = 1 throughout (the QMIX paper's setting for this game); 'annealed': 1 -> 0.05."""
    if kind == "uniform":
        return ExplorationConfig(epsilon_start=1.0, epsilon_finish=1.0)
    if kind == "annealed":
        return ExplorationConfig(epsilon_anneal_steps=steps // 2)
    raise ValueError(f"exploration={kind!r}: expected 'uniform' or 'annealed'")


def two_step_config(lam: float, seed: int, *, steps: int = STEPS, exploration: str = "uniform",
                    algo: str = "sem-vdn", td_lambda: float = 0.0) -> TrainConfig:
    """SEM-VDN (or ``algo``) on the two-step game with the study's settings (lambda = 0 is plain VDN)."""
    learner = LEARNER if td_lambda == 0.0 else dataclasses.replace(LEARNER, td_lambda=td_lambda)
    return TrainConfig(env=ENV, algo=algo, steps=steps, seed=seed, n_envs=8, test_episodes=8,
                       test_interval=10**9, log_interval=10**9, device="cpu",
                       exploration=exploration_for(exploration, steps), learner=learner,
                       memory=MemoryConfig(lam=lam, pending_size=PENDING_SIZE, capacity=CAPACITY))


@dataclasses.dataclass(frozen=True)
class ControlRow:
    """One learner of the positive control and its closed-form first-step target towards 2B (in units of gamma)."""

    name: str
    algo: str
    lam: float
    """lambda of eq. 6 (memory.lam)."""
    td_lambda: float
    """lambda of TD(lambda) targets (learner.td_lambda)."""
    formula: str
    """The blended target in words: (1 - lambda) fit + lambda E, with the numbers of this game."""
    target_2b: float


def control_rows(lam: float = CONTROL_LAM) -> list[ControlRow]:
    """VDN, SEM-VDN, mc-VDN and TD(lambda) VDN with the first-step target each blends towards 2B (x gamma).

    Under uniform exploration the regression fits the mean target. y = gamma fit_max (VDN's best 2B value);
    SEM's E = gamma Q^S(2B) = gamma max payoff (the best return ever seen from 2B); mc's E = gamma R_2, the
    episode's own second reward, whose mean is the mean 2B payoff; TD(lambda)'s y_1 = gamma [(1 - lambda) V(2B)
    + lambda y_2] with y_2 = r_2, the same mean. 2A's target is gamma 7 for all of them.
    """
    fit_max, _, _ = closed_form()
    payoff_2b = np.asarray(make_env(ENV).payoff, float)[1]
    best, mean = float(payoff_2b.max()), float(payoff_2b.mean())

    def blend(weight: float, e: float, e_name: str) -> tuple[str, float]:
        value = (1 - weight) * fit_max + weight * e
        return f"(1 - {weight:g}) {fit_max:g} + {weight:g} x {e:g} ({e_name}) = {value:g}", value

    return [
        ControlRow("VDN", "vdn", 0.0, 0.0, f"y = {fit_max:g}", fit_max),
        ControlRow("SEM-VDN", "sem-vdn", lam, 0.0, *blend(lam, best, "Q^S(2B), max payoff")),
        ControlRow("mc-VDN", "mc-vdn", lam, 0.0, *blend(lam, mean, "own return, mean payoff")),
        ControlRow("VDN, TD(lambda)", "vdn", 0.0, lam, *blend(lam, mean, "y_2 = r_2, mean payoff")),
    ]


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
    parser.add_argument("--control", action="store_true", help="The positive control: one row per learner.")
    parser.add_argument("--control-lam", type=float, default=CONTROL_LAM)
    args = parser.parse_args()
    if args.control:
        run_control(args)
        return

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


def run_control(args: argparse.Namespace) -> None:
    """The control table: greedy return per seed of each learner, beside its closed-form target towards 2B."""
    _, value_2a, _ = closed_form()
    optimum = make_env(ENV).optimal_return
    rows = control_rows(args.control_lam)
    print(f"two-step game, positive control, {args.exploration} exploration, {args.steps} steps, seeds "
          f"0..{args.seeds - 1}; first-step target towards 2B (x gamma) against 2A's {value_2a:g}")
    print("| learner | algo | greedy return per seed | reach 8 | mean | target towards 2B (x gamma) | predicted |")
    print("|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for row in rows:
            configs = [two_step_config(row.lam, seed, steps=args.steps, exploration=args.exploration, algo=row.algo,
                                       td_lambda=row.td_lambda) for seed in range(args.seeds)]
            returns = list(pool.map(greedy_return, configs))
            predicted = "-" if args.exploration != "uniform" else (optimum if row.target_2b > value_2a else value_2a)
            algo = row.algo + (f" --lam {row.lam:g}" if row.lam else "") + (
                f" --td-lambda {row.td_lambda:g}" if row.td_lambda else "")
            print(f"| {row.name} | `{algo}` | {' '.join(f'{r:g}' for r in returns)} | "
                  f"{sum(r == optimum for r in returns)}/{len(returns)} | {np.mean(returns):.2f} | {row.formula} "
                  f"{'>' if row.target_2b > value_2a else '<'} {value_2a:g} | {predicted:g} |", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
