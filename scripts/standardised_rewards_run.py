"""A measurement, not a semzoo setting: a run whose loss reads its rewards standardised as EPyMARL's
``standardise_rewards`` does (uoe-agents/epymarl ``src/learners/q_learner.py`` with ``RunningMeanStd``).

Before each update the batch's rewards [B, T] (padding included, as EPyMARL's batch holds it) update a running mean
and variance (Chan et al.'s parallel formula, count starting at 1e-4, variance at 1), and the loss sees
(r - mean) / sqrt(var) in their place. The patch wraps ``QLearner.loss`` for this process only; the stored episodes,
the metrics' returns and the checkpoints keep the env's own rewards. docs/lbf.md reports what it does to QMIX's
Q_tot on Level-Based Foraging (read it with scripts/value_diagnose.py; Q_tot is then in standardised units).

    python scripts/standardised_rewards_run.py --steps 30000 --out /tmp/lbf/runs --run-name qmix-raw-stdrew
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

import torch

from semzoo import TrainConfig, train
from semzoo.learners import q_learner


class RunningMeanStd:
    """The running mean and variance of every reward seen, merged a batch at a time."""

    def __init__(self) -> None:
        self.mean = torch.zeros(())
        self.var = torch.ones(())
        self.count = 1e-4

    def update(self, rewards: torch.Tensor) -> None:
        batch_mean, batch_var, n = rewards.mean(), rewards.var(), rewards.numel()
        delta, total = batch_mean - self.mean, self.count + n
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total
        self.count = total


def standardise_rewards() -> RunningMeanStd:
    """Patch ``QLearner.loss`` to standardise each batch's rewards; returns the running statistics it uses."""
    stats = RunningMeanStd()
    original = q_learner.QLearner.loss

    def loss(self: q_learner.QLearner, clean: Any, lookup: Any) -> Any:
        with torch.no_grad():
            stats.update(clean.reward)
            reward = (clean.reward - stats.mean) / torch.sqrt(stats.var)
        return original(self, dataclasses.replace(clean, reward=reward), lookup)

    q_learner.QLearner.loss = loss  # type: ignore[method-assign]
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="lbf:Foraging-8x8-2p-2f-coop-v3")
    parser.add_argument("--algo", default="qmix")
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/standardised")
    parser.add_argument("--run-name", default=None)
    parser.add_argument("--every", type=int, default=10_000, help="env steps between the checkpoints kept")
    args = parser.parse_args(argv)
    standardise_rewards()
    config = TrainConfig(env=args.env, algo=args.algo, steps=args.steps, seed=args.seed, out=args.out,
                         run_name=args.run_name, save_interval=args.every,
                         keep_checkpoints=args.steps // args.every + 2)
    run_dir, _ = train(config, progress=True, tensorboard=False)
    print(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
