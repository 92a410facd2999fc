"""The training loop: collect, store, memory update, learn, target sync, evaluate, log.

Algorithm 1 of the paper, with N envs collecting N episodes per iteration and
``updates_per_episode`` gradient steps for each collected episode.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semzoo.config import TrainConfig
from semzoo.learner import QLearner
from semzoo.memory.replay import EpisodeReplayBuffer
from semzoo.mixers.base import make_mixer
from semzoo.nets import RNNAgent
from semzoo.registry import make_env
from semzoo.rollout import EpisodeRunner, RolloutStats
from semzoo.types import VecCTDEEnv

METRIC_FIELDS = ("env_steps", "episodes", "updates", "wall_time", "name", "value")
TEST_SEED_OFFSET = 1_000_000_007
"""Test episodes draw env seeds from a stream disjoint from training's."""
SEED_STRIDE = 100_003


def resolve_device(name: str) -> torch.device:
    """'auto' -> the first GPU when one is present, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"device {name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r}: no CUDA GPU is visible; use --device cpu or --device auto")
    return device


def make_vec_env(config: TrainConfig) -> VecCTDEEnv:
    """The N environments of a run, as a ``VecCTDEEnv``."""
    kind, _, name = config.env.partition(":")
    if kind == "smax":
        from semzoo.envs.smax import SMAXVecEnv

        return SMAXVecEnv(name, n_envs=config.n_envs, episode_limit=config.episode_limit, **config.env_args)
    from semzoo.wrappers.ctde import CTDEVecEnv

    make_env(config.env, **config.env_args).close()  # fail fast, in this process, on a bad id or argument
    fns = [lambda: make_env(config.env, **config.env_args) for _ in range(config.n_envs)]
    return CTDEVecEnv(fns, episode_limit=config.episode_limit)


class MetricsLogger:
    """Appends (env_steps, episodes, updates, wall_time, name, value) rows to ``metrics.csv``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        new = not path.exists()
        self._file = path.open("a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(METRIC_FIELDS)
            self._file.flush()
        self.extra_sinks: list[Callable[[str, float, int], None]] = []

    def log(self, counters: dict[str, Any], metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            self._writer.writerow([counters["env_steps"], counters["episodes"], counters["updates"],
                                   f"{counters['wall_time']:.3f}", name, repr(float(value))])
            for sink in self.extra_sinks:
                sink(name, float(value), counters["env_steps"])
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of a run's metrics.csv with numbers parsed."""
    with (Path(run_dir) / "metrics.csv").open() as f:
        return [{"env_steps": int(r["env_steps"]), "episodes": int(r["episodes"]), "updates": int(r["updates"]),
                 "wall_time": float(r["wall_time"]), "name": r["name"], "value": float(r["value"])}
                for r in csv.DictReader(f)]


@dataclass
class EvalResult:
    return_mean: float
    return_std: float
    win_rate: float | None
    episodes: int

    def as_metrics(self, prefix: str = "test_") -> dict[str, float]:
        out = {f"{prefix}return_mean": self.return_mean, f"{prefix}return_std": self.return_std}
        if self.win_rate is not None:
            out[f"{prefix}win_rate"] = self.win_rate
        return out


class Trainer:
    """Owns every part of a run; ``run()`` trains to ``config.steps`` env steps."""

    def __init__(self, config: TrainConfig, *, run_dir: str | Path | None = None,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        torch.manual_seed(config.seed)
        np.random.seed(config.seed % 2**32)
        self.env = make_vec_env(config)
        env = self.env
        self.max_t = int(config.episode_limit or env.episode_limit)
        self.agent = RNNAgent(obs_dim=env.obs_dim, n_agents=env.n_agents, n_actions=env.n_actions,
                              hidden_dim=config.agent.hidden_dim, obs_agent_id=config.agent.obs_agent_id,
                              obs_last_action=config.agent.obs_last_action).to(self.device)
        self.mixer = make_mixer(config.mixer_name, n_agents=env.n_agents, state_dim=env.state_dim,
                                n_actions=env.n_actions, config=config.mixer).to(self.device)
        self.memory = self._make_memory()
        self.learner = self._make_learner()
        self.buffer = EpisodeReplayBuffer(capacity=config.learner.buffer_size, max_t=self.max_t, n_agents=env.n_agents,
                                          obs_dim=env.obs_dim, state_dim=env.state_dim, n_actions=env.n_actions)
        self.runner = EpisodeRunner(env, self.agent, device=self.device, episode_limit=self.max_t)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.counters: dict[str, Any] = {"env_steps": 0, "episodes": 0, "updates": 0, "wall_time": 0.0,
                                         "last_target_update": 0, "last_log": 0, "last_test": 0, "last_save": 0,
                                         "update_credit": 0.0, "test_runs": 0}
        self.progress = progress
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.logger: MetricsLogger | None = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
            self.logger = MetricsLogger(self.run_dir / "metrics.csv")
        self.loss_history: list[float] = []
        self._window: dict[str, list[float]] = {}

    def _make_memory(self) -> Any | None:
        if self.config.memory_kind == "none":
            return None
        from semzoo.memory.episodic import make_episodic_memory

        m = self.config.memory
        return make_episodic_memory(self.config.memory_kind, state_dim=self.env.state_dim, n_agents=self.env.n_agents,
                                    proj_dim=m.proj_dim, capacity=m.capacity, pending_size=m.pending_size,
                                    gamma=self.config.learner.gamma, seed=self.config.seed)

    def _make_learner(self) -> QLearner:
        kwargs = dict(agent=self.agent, mixer=self.mixer, config=self.config.learner, memory_config=self.config.memory,
                      memory=self.memory, memory_kind=self.config.memory_kind)
        if self.config.mixer_name in ("cw-qmix", "ow-qmix"):
            from semzoo.wqmix import WQMIXLearner

            return WQMIXLearner(**kwargs, weighting=self.config.mixer_name[:2], mixer_config=self.config.mixer,
                                env_info=self.env)
        return QLearner(**kwargs)

    # ----- one iteration ------------------------------------------------------------------------------------

    def epsilon(self) -> float:
        return self.config.exploration.epsilon(self.counters["env_steps"])

    def collect(self) -> RolloutStats:
        """N training episodes into the buffer (and the episodic memory's pending set)."""
        c = self.counters
        seed = (self.config.seed * SEED_STRIDE + c["episodes"]) % 2**31
        batch, stats = self.runner.run(epsilon=self.epsilon(), seed=seed, generator=self.generator)
        if self.config.learner.timeout_as_terminal:
            last = (batch.length - 1).clamp(min=0)
            batch.terminated[torch.arange(batch.batch_size), last] = True
        self.buffer.insert(batch)
        if self.memory is not None:
            self.memory.update_from(batch)
        c["env_steps"] += int(stats.lengths.sum())
        c["episodes"] += batch.batch_size
        return stats

    def learn(self, n_episodes: int) -> None:
        c, cfg = self.counters, self.config.learner
        c["update_credit"] += n_episodes * cfg.updates_per_episode
        while c["update_credit"] >= 1.0 and self.buffer.can_sample(cfg.batch_size):
            c["update_credit"] -= 1.0
            sample = self.buffer.sample(cfg.batch_size, self.generator).to(self.device)
            stats = self.learner.train(sample)
            c["updates"] += 1
            self.loss_history.append(stats["loss"])
            for k, v in stats.items():
                self._window.setdefault(k, []).append(v)
        if not self.buffer.can_sample(cfg.batch_size):
            c["update_credit"] = 0.0  # no credit piles up while the buffer fills
        if c["episodes"] - c["last_target_update"] >= cfg.target_update_episodes:
            self.learner.update_target()
            c["last_target_update"] = c["episodes"]

    def evaluate(self, n_episodes: int | None = None) -> EvalResult:
        """Greedy (epsilon 0) episodes; they are not stored and do not count as env steps."""
        n_episodes = n_episodes or self.config.test_episodes
        returns, wins = [], []
        c = self.counters
        while len(returns) < n_episodes:
            seed = (TEST_SEED_OFFSET + self.config.seed * SEED_STRIDE + c["test_runs"]) % 2**31
            c["test_runs"] += self.env.n_envs
            _, stats = self.runner.run(epsilon=0.0, seed=seed, generator=self.generator)
            returns.extend(stats.returns.tolist())
            if stats.battle_won is not None:
                wins.extend(stats.battle_won.tolist())
        returns, wins = returns[:n_episodes], wins[:n_episodes]
        return EvalResult(return_mean=float(np.mean(returns)), return_std=float(np.std(returns)),
                          win_rate=float(np.mean(wins)) if wins else None, episodes=n_episodes)

    def _log(self, metrics: dict[str, float]) -> None:
        if self.logger is not None:
            self.logger.log(self.counters, metrics)

    def _train_metrics(self, recent: list[RolloutStats], started: float, steps_at_start: int) -> dict[str, float]:
        metrics = {k: float(np.mean(v)) for k, v in self._window.items()}
        self._window = {}
        returns = np.concatenate([s.returns for s in recent])
        metrics.update(return_mean=float(returns.mean()), epsilon=self.epsilon(),
                       ep_length_mean=float(np.concatenate([s.lengths for s in recent]).mean()))
        won = [s.battle_won for s in recent if s.battle_won is not None]
        if won:
            metrics["win_rate"] = float(np.concatenate(won).mean())
        if self.memory is not None:
            metrics.update(memory_entries=float(self.memory.n_entries), memory_bytes=float(self.memory.nbytes))
        elapsed = max(time.perf_counter() - started, 1e-9)
        metrics["steps_per_s"] = (self.counters["env_steps"] - steps_at_start) / elapsed
        return metrics

    def run(self) -> dict[str, float]:
        """Train until ``config.steps`` env steps; returns the last evaluation's metrics."""
        cfg, c = self.config, self.counters
        started, steps_at_start, wall_at_start = time.perf_counter(), c["env_steps"], c["wall_time"]
        recent: list[RolloutStats] = []
        last_eval: dict[str, float] = {}
        while c["env_steps"] < cfg.steps:
            stats = self.collect()
            recent.append(stats)
            self.learn(len(stats.returns))
            c["wall_time"] = wall_at_start + time.perf_counter() - started
            if c["env_steps"] - c["last_log"] >= cfg.log_interval:
                self._log(self._train_metrics(recent, started, steps_at_start))
                recent, c["last_log"] = [], c["env_steps"]
            if c["env_steps"] - c["last_test"] >= cfg.test_interval:
                last_eval = self.evaluate().as_metrics()
                self._log(last_eval)
                c["last_test"] = c["env_steps"]
            if self.progress is not None:
                self.progress({**c, "epsilon": self.epsilon(), **last_eval})
        if recent:
            self._log(self._train_metrics(recent, started, steps_at_start))
        if c["last_test"] != c["env_steps"] or not last_eval:
            last_eval = self.evaluate().as_metrics()
            self._log(last_eval)
            c["last_test"] = c["env_steps"]
        return last_eval

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
        self.env.close()


def default_run_name(config: TrainConfig) -> str:
    safe_env = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in config.env)
    return f"{safe_env}_{config.algo}_seed{config.seed}"


def train(config: TrainConfig, *, progress: Callable[[dict[str, Any]], None] | None = None) -> tuple[Path, dict[str, float]]:
    """Run ``config`` in ``<out>/<run_name>``; returns the run directory and the final evaluation."""
    run_dir = Path(config.out) / (config.run_name or default_run_name(config))
    trainer = Trainer(config, run_dir=run_dir, progress=progress)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return run_dir, result


__all__ = ["Trainer", "train", "EvalResult", "MetricsLogger", "read_metrics", "resolve_device", "make_vec_env",
           "default_run_name"]
