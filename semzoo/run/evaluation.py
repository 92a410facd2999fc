"""Greedy evaluation: test episodes of a run's agents, during training and from a checkpoint."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from semzoo.config import TrainConfig
from semzoo.run.rundir import load_trained
from semzoo.run.runner import EpisodeRunner

TEST_SEED_OFFSET = 1_000_000_007
"""Test episodes draw env seeds from a stream disjoint from training's."""
SEED_STRIDE = 100_003
"""Env seeds of run ``seed`` start at ``seed * SEED_STRIDE`` (training) or that plus TEST_SEED_OFFSET (tests)."""


@dataclass
class EvalResult:
    """The figures of one greedy evaluation."""

    return_mean: float
    return_std: float
    win_rate: float | None
    """Fraction of episodes with ``battle_won`` where the env reports it, else None."""
    episodes: int

    def as_metrics(self, prefix: str = "test_") -> dict[str, float]:
        out = {f"{prefix}return_mean": self.return_mean, f"{prefix}return_std": self.return_std}
        if self.win_rate is not None:
            out[f"{prefix}win_rate"] = self.win_rate
        return out


def greedy_episodes(runner: EpisodeRunner, n_episodes: int, seeds: Callable[[int], int],
                    generator: torch.Generator) -> EvalResult:
    """``n_episodes`` greedy (epsilon 0) episodes, N at a time; batch i uses env seed ``seeds(i)``."""
    if n_episodes <= 0:
        raise ValueError(f"n_episodes={n_episodes}: expected a positive number of evaluation episodes")
    returns: list[float] = []
    wins: list[bool] = []
    batches = 0
    while len(returns) < n_episodes:
        _, stats = runner.run(epsilon=0.0, seed=seeds(batches), generator=generator)
        batches += 1
        returns.extend(stats.returns.tolist())
        if stats.battle_won is not None:
            wins.extend(stats.battle_won.tolist())
    returns, wins = returns[:n_episodes], wins[:n_episodes]
    return EvalResult(return_mean=float(np.mean(returns)), return_std=float(np.std(returns)),
                      win_rate=float(np.mean(wins)) if wins else None, episodes=len(returns))


def evaluate_run(run_dir: str | Path, *, episodes: int | None = None, seed: int | None = None,
                 device: str | None = None) -> tuple[TrainConfig, EvalResult, int]:
    """Greedy evaluation of the last valid checkpoint of a run: (config, result, checkpoint env steps).

    Only the env and the agent network are built (no replay, no episodic table). Without ``seed`` the
    episodes are the run's own test stream from its start; ``seed`` picks env seeds seed, seed + N, ...
    """
    from semzoo.agents.rnn import RNNAgent
    from semzoo.envs.registry import make_vec_env
    from semzoo.run.device import resolve_device

    config, payload = load_trained(run_dir, purpose="to evaluate")
    if device is not None:
        config = dataclasses.replace(config, device=device)
    torch_device = resolve_device(config.device)
    env = make_vec_env(config)
    try:
        agent = RNNAgent.for_env(env, config.agent).to(torch_device)
        agent.load_state_dict(payload["learner"]["agent"])
        runner = EpisodeRunner(env, agent, device=torch_device, episode_limit=config.episode_limit)
        n_episodes = config.test_episodes if episodes is None else episodes
        result = greedy_episodes(runner, n_episodes, eval_env_seeds(config.seed, env.n_envs, seed),
                                 torch.Generator().manual_seed(config.seed))
    finally:
        env.close()
    return config, result, int(payload["counters"]["env_steps"])


def eval_env_seeds(run_seed: int, n_envs: int, seed: int | None = None, start: int = 0) -> Callable[[int], int]:
    """Env seed of test batch i: the run's test stream from episode ``start``, or ``seed + i * n_envs``."""
    if seed is None:
        return lambda i: (TEST_SEED_OFFSET + run_seed * SEED_STRIDE + start + i * n_envs) % 2**31
    return lambda i: (seed + i * n_envs) % 2**31
