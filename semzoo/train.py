"""The training loop: collect, store, memory update, learn, target sync, evaluate, log, checkpoint.

Algorithm 1 of the paper, with N envs collecting N episodes per iteration and
``updates_per_episode`` gradient steps for each collected episode.

A run directory holds ``config.json`` (the resolved config), ``metrics.csv`` (long format),
``checkpoints/`` (the last two, see ``semzoo.checkpoint``), ``tensorboard/`` (when tensorboard is
installed) and ``final.json`` once the run has finished. Resuming from a checkpoint continues the
run bit for bit: the checkpoint holds every piece of state the loop reads, and the metrics file
is cut back to the size it had when the checkpoint was written.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import os
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from semzoo.checkpoint import CheckpointError, CheckpointManager, write_atomic
from semzoo.config import TrainConfig
from semzoo.learner import QLearner
from semzoo.memory.replay import EpisodeReplayBuffer
from semzoo.mixers.base import make_mixer
from semzoo.nets import RNNAgent
from semzoo.registry import make_env
from semzoo.rollout import EpisodeRunner, RolloutStats
from semzoo.types import VecCTDEEnv

METRIC_FIELDS = ("env_steps", "episodes", "updates", "wall_time", "name", "value")
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
FINAL_FILE = "final.json"
TENSORBOARD_DIR = "tensorboard"
TIMING_METRICS = frozenset({"steps_per_s", "time_collect_s", "time_learn_s", "test_time_s", "checkpoint_time_s",
                            "checkpoint_mb"})
"""Metrics that measure the machine, not the learning: they differ between identical runs."""
RESUME_IGNORED_FIELDS = frozenset({"steps", "out", "run_name", "device"})
"""Config fields a resumed run may change: the others must match the checkpoint's."""
BYTES_PER_MB = 1e6
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

    # CTDEVecEnv builds its first env in this process (sync and async), so a bad id or argument fails here.
    fns = [lambda: make_env(config.env, **config.env_args) for _ in range(config.n_envs)]
    return CTDEVecEnv(fns, episode_limit=config.episode_limit)


class MetricsLogger:
    """Appends (env_steps, episodes, updates, wall_time, name, value) rows to ``metrics.csv``.

    ``fresh=True`` starts the file over; otherwise rows are appended (a resumed run first cuts the
    file back to the size recorded in its checkpoint, so no row is written twice).
    """

    def __init__(self, path: Path, *, fresh: bool = True) -> None:
        self.path = path
        new = fresh or not path.exists() or path.stat().st_size == 0
        self._file = path.open("w" if new else "a", newline="")
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

    def nbytes(self) -> int:
        """Size of the file with every row logged so far (the resume point recorded in checkpoints)."""
        self._file.flush()
        return os.fstat(self._file.fileno()).st_size

    def close(self) -> None:
        self._file.close()


def truncate_metrics(run_dir: str | Path, nbytes: int) -> None:
    """Cut a run's metrics.csv back to ``nbytes`` (rows written after a checkpoint, or a half-written row)."""
    path = Path(run_dir) / METRICS_FILE
    if path.exists() and path.stat().st_size > nbytes:
        with path.open("r+b") as f:
            f.truncate(nbytes)


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of a run's metrics.csv with numbers parsed; a half-written last row (killed run) is skipped."""
    rows = []
    with (Path(run_dir) / METRICS_FILE).open(newline="") as f:
        for r in csv.DictReader(f):
            try:
                rows.append({"env_steps": int(r["env_steps"]), "episodes": int(r["episodes"]),
                             "updates": int(r["updates"]), "wall_time": float(r["wall_time"]), "name": r["name"],
                             "value": float(r["value"])})
            except (TypeError, ValueError):
                continue
    return rows


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


def load_run_config(run_dir: str | Path) -> TrainConfig:
    """The resolved config stored in a run directory; ValueError naming the problem otherwise."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run directory {str(run_dir)!r} does not exist: expected a folder made by `semzoo train`")
    path = run_dir / CONFIG_FILE
    if not path.exists():
        raise ValueError(f"{run_dir} has no {CONFIG_FILE}: expected a run directory made by `semzoo train`")
    try:
        return TrainConfig.from_dict(json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise ValueError(f"{path} is not a valid semzoo config: {str(err).splitlines()[0]}") from None


def check_checkpoint_matches(payload: dict[str, Any], config: TrainConfig, where: Path) -> None:
    """Refuse a checkpoint written by a run of another env, algorithm or configuration."""
    if (payload.get("env"), payload.get("algo")) != (config.env, config.algo):
        raise CheckpointError(
            f"checkpoint {where} belongs to env {payload.get('env')!r} with algo {payload.get('algo')!r}, but the run "
            f"is env {config.env!r} with algo {config.algo!r}: use the run directory the checkpoint came from"
        )
    saved, current = payload.get("config", {}), config.to_dict()
    differ = sorted(k for k in set(saved) | set(current) if k not in RESUME_IGNORED_FIELDS and saved.get(k) != current.get(k))
    if differ:
        raise CheckpointError(f"checkpoint {where} was written with other values of {differ} than {CONFIG_FILE} holds: "
                              "restore the run's config.json or start a new run")


def run_finished(run_dir: str | Path, steps: int | None = None) -> bool:
    """True when the run in ``run_dir`` completed (``final.json``), to ``steps`` env steps if given."""
    path = Path(run_dir) / FINAL_FILE
    try:
        final = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return steps is None or int(final.get("env_steps", -1)) >= steps


def _tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


class Trainer:
    """Owns every part of a run; ``run()`` trains to ``config.steps`` env steps.

    With ``run_dir`` the run writes config, metrics, checkpoints and TensorBoard events there;
    ``Trainer.resume(run_dir)`` rebuilds a trainer from the last valid checkpoint.
    """

    def __init__(self, config: TrainConfig, *, run_dir: str | Path | None = None,
                 progress: Callable[[dict[str, Any]], None] | None = None, tensorboard: bool = True,
                 _checkpoint: dict[str, Any] | None = None) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.checkpoints = CheckpointManager(self.run_dir) if self.run_dir is not None else None
        if self.checkpoints is not None and _checkpoint is None and self.checkpoints.paths():
            raise ValueError(f"run directory {self.run_dir} already holds a run with checkpoints: continue it with "
                             f"`semzoo train --resume {self.run_dir}` or choose another --out/--run-name")
        if config.threads > 0:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)
        np.random.seed(config.seed % 2**32)
        random.seed(config.seed)
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
        self.loss_history: list[float] = []
        # In-flight loop state, saved in checkpoints: episodes and learner stats since the last metric row.
        self._recent: list[RolloutStats] = []
        self._window: dict[str, list[float]] = {}
        self._last_eval: dict[str, float] = {}
        # Timing of the current log window (machine-dependent, not checkpointed).
        self._timing: dict[str, float] = {}
        self._window_clock = time.perf_counter()
        self._window_steps = 0
        self._saved_at: int | None = None
        if _checkpoint is not None:
            self.load_state_dict(_checkpoint)
            self._saved_at = self.counters["env_steps"]
        self.logger: MetricsLogger | None = None
        self._tb_writer: Any = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.run_dir / CONFIG_FILE, json.dumps(config.to_dict(), indent=2).encode())
            (self.run_dir / FINAL_FILE).unlink(missing_ok=True)
            self.logger = MetricsLogger(self.run_dir / METRICS_FILE, fresh=_checkpoint is None)
            if tensorboard and _tensorboard_available():
                self._open_tensorboard(purge_step=None if _checkpoint is None else self.counters["env_steps"] + 1)

    def _open_tensorboard(self, purge_step: int | None) -> None:
        """TensorBoard events with the metric names of metrics.csv, indexed by env steps."""
        assert self.run_dir is not None and self.logger is not None
        from torch.utils.tensorboard import SummaryWriter

        self._tb_writer = SummaryWriter(log_dir=str(self.run_dir / TENSORBOARD_DIR), purge_step=purge_step)
        writer = self._tb_writer
        self.logger.extra_sinks.append(lambda name, value, step: writer.add_scalar(name, value, step))

    @classmethod
    def resume(cls, run_dir: str | Path, *, steps: int | None = None,
               progress: Callable[[dict[str, Any]], None] | None = None, tensorboard: bool = True) -> "Trainer":
        """A trainer that continues the run in ``run_dir`` from its last valid checkpoint.

        ``steps`` extends the run; the config otherwise comes from the run directory. With no
        checkpoint at all (killed before the first save), the run starts over with a warning; with
        only corrupt ones, CheckpointError.
        """
        run_dir = Path(run_dir)
        config = load_run_config(run_dir)
        if steps is not None:
            config = dataclasses.replace(config, steps=steps)
        manager = CheckpointManager(run_dir)
        manager.clean_temporaries()
        found = manager.load_latest(quarantine=True)
        if found is None:
            warnings.warn(f"{run_dir} has no checkpoint yet: starting the run from step 0", stacklevel=2)
            return cls(config, run_dir=run_dir, progress=progress, tensorboard=tensorboard)
        path, payload = found
        check_checkpoint_matches(payload, config, path)
        done = int(payload["counters"]["env_steps"])
        if config.steps < done:
            raise ValueError(f"steps={config.steps} is fewer than the {done} env steps the checkpoint {path.name} "
                             f"already holds: pass --steps {done} or more")
        truncate_metrics(run_dir, int(payload["metrics_bytes"]))
        return cls(config, run_dir=run_dir, progress=progress, tensorboard=tensorboard, _checkpoint=payload)

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

    def evaluate(self, n_episodes: int | None = None, *, seed: int | None = None) -> EvalResult:
        """``n_episodes`` greedy (epsilon 0) episodes; they are not stored and do not count as env steps.

        Env seeds come from a stream disjoint from training's; ``seed`` picks another stream and
        leaves the run's own test counter untouched.
        """
        n_episodes = self.config.test_episodes if n_episodes is None else n_episodes
        if n_episodes <= 0:
            raise ValueError(f"n_episodes={n_episodes}: expected a positive number of evaluation episodes")
        returns: list[float] = []
        wins: list[bool] = []
        c = self.counters
        batches = 0
        while len(returns) < n_episodes:
            if seed is None:
                env_seed = (TEST_SEED_OFFSET + self.config.seed * SEED_STRIDE + c["test_runs"]) % 2**31
                c["test_runs"] += self.env.n_envs
            else:
                env_seed = (seed + batches * self.env.n_envs) % 2**31
            batches += 1
            _, stats = self.runner.run(epsilon=0.0, seed=env_seed, generator=self.generator)
            returns.extend(stats.returns.tolist())
            if stats.battle_won is not None:
                wins.extend(stats.battle_won.tolist())
        returns, wins = returns[:n_episodes], wins[:n_episodes]
        return EvalResult(return_mean=float(np.mean(returns)), return_std=float(np.std(returns)),
                          win_rate=float(np.mean(wins)) if wins else None, episodes=len(returns))

    def _log(self, metrics: dict[str, float]) -> None:
        if self.logger is not None:
            self.logger.log(self.counters, metrics)

    def _add_time(self, name: str, seconds: float) -> None:
        self._timing[name] = self._timing.get(name, 0.0) + seconds

    def _train_metrics(self) -> dict[str, float]:
        """Means over the window since the last row: learner stats, episodes, memory, timing."""
        metrics = {k: float(np.mean(v)) for k, v in self._window.items()}
        recent = self._recent
        returns = np.concatenate([s.returns for s in recent])
        metrics.update(return_mean=float(returns.mean()), epsilon=self.epsilon(),
                       ep_length_mean=float(np.concatenate([s.lengths for s in recent]).mean()))
        won = [s.battle_won for s in recent if s.battle_won is not None]
        if won:
            metrics["win_rate"] = float(np.concatenate(won).mean())
        if self.memory is not None:
            metrics.update(memory_entries=float(self.memory.n_entries), memory_bytes=float(self.memory.nbytes),
                           memory_pending_steps=float(self.memory.pending_steps))
        metrics["buffer_episodes"] = float(len(self.buffer))
        now = time.perf_counter()
        steps = self.counters["env_steps"] - self._window_steps
        metrics["steps_per_s"] = steps / max(now - self._window_clock, 1e-9)
        metrics.update(self._timing)
        self._window, self._recent, self._timing = {}, [], {}
        self._window_clock, self._window_steps = now, self.counters["env_steps"]
        return metrics

    def run(self) -> dict[str, float]:
        """Train until ``config.steps`` env steps; returns the last evaluation's metrics."""
        cfg, c = self.config, self.counters
        clock, wall_at_start = time.perf_counter(), c["wall_time"]
        self._window_clock, self._window_steps = clock, c["env_steps"]
        while c["env_steps"] < cfg.steps:
            t0 = time.perf_counter()
            stats = self.collect()
            t1 = time.perf_counter()
            self._recent.append(stats)
            self.learn(len(stats.returns))
            self._add_time("time_collect_s", t1 - t0)
            self._add_time("time_learn_s", time.perf_counter() - t1)
            c["wall_time"] = wall_at_start + time.perf_counter() - clock
            if c["env_steps"] - c["last_log"] >= cfg.log_interval:
                self._log(self._train_metrics())
                c["last_log"] = c["env_steps"]
            if c["env_steps"] - c["last_test"] >= cfg.test_interval:
                self._test()
            if cfg.save_interval > 0 and c["env_steps"] - c["last_save"] >= cfg.save_interval:
                self.save_checkpoint()
            if self.progress is not None:
                self.progress({**c, "epsilon": self.epsilon(), "steps": cfg.steps, **self._last_eval})
        # The final checkpoint holds the loop state before the closing rows below, so a run extended
        # later with --steps continues exactly as one that had been asked for more steps from the start.
        self.save_checkpoint()
        if self._recent:
            self._log(self._train_metrics())
        if c["last_test"] != c["env_steps"] or not self._last_eval:
            self._test()
        if self.run_dir is not None:
            final = {"env_steps": c["env_steps"], "episodes": c["episodes"], "updates": c["updates"],
                     "steps": cfg.steps, "wall_time": c["wall_time"], "result": self._last_eval}
            write_atomic(self.run_dir / FINAL_FILE, json.dumps(final, indent=2).encode())
        return self._last_eval

    def _test(self) -> None:
        started = time.perf_counter()
        result = self.evaluate()
        self._last_eval = {**result.as_metrics(), "test_time_s": time.perf_counter() - started}
        self._log(self._last_eval)
        self._last_eval = result.as_metrics()
        self.counters["last_test"] = self.counters["env_steps"]

    # ----- checkpoints ----------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Everything the loop reads, for an exact resume (numpy arrays, tensors, plain values)."""
        rng: dict[str, Any] = {"torch": torch.get_rng_state(), "generator": self.generator.get_state(),
                               "numpy": np.random.get_state(), "python": random.getstate()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.cuda.get_rng_state_all()
        buffer = self.buffer.state_dict()
        size = int(buffer["size"])
        for name, value in buffer.items():  # only the filled episodes: an empty buffer costs nothing
            if isinstance(value, torch.Tensor) and size < value.shape[0]:
                buffer[name] = value[:size].clone()  # a view would save the whole storage
        recent = [{"returns": s.returns, "lengths": s.lengths, "battle_won": s.battle_won} for s in self._recent]
        return {
            "env": self.config.env, "algo": self.config.algo, "config": self.config.to_dict(),
            "counters": dict(self.counters), "epsilon": self.epsilon(),
            "learner": self.learner.state_dict(), "buffer": buffer,
            "memory": self.memory.state_dict() if self.memory is not None else None,
            "rng": rng,
            "loop": {"recent": recent, "window": {k: list(v) for k, v in self._window.items()},
                     "last_eval": dict(self._last_eval)},
            "metrics_bytes": self.logger.nbytes() if self.logger is not None else 0,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``state_dict``."""
        self.counters = dict(state["counters"])
        self.learner.load_state_dict(state["learner"])
        buffer = dict(state["buffer"])
        for name, value in self.buffer.state_dict().items():
            if isinstance(value, torch.Tensor):
                full = torch.zeros_like(value)
                full[: buffer[name].shape[0]] = buffer[name]
                buffer[name] = full
        self.buffer.load_state_dict(buffer)
        if self.memory is not None:
            self.memory.load_state_dict(state["memory"])
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        self.generator.set_state(rng["generator"])
        np.random.set_state(rng["numpy"])
        random.setstate(rng["python"])
        if "cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        loop = state["loop"]
        self._recent = [RolloutStats(returns=r["returns"], lengths=r["lengths"], battle_won=r["battle_won"])
                        for r in loop["recent"]]
        self._window = {k: list(v) for k, v in loop["window"].items()}
        self._last_eval = dict(loop["last_eval"])

    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint of the current state (no-op without a run directory or if one exists for this step)."""
        c = self.counters
        if self.checkpoints is None or self._saved_at == c["env_steps"]:
            return None
        started = time.perf_counter()
        c["last_save"] = c["env_steps"]
        path, nbytes = self.checkpoints.save(self.state_dict(), c["env_steps"])
        self._saved_at = c["env_steps"]
        self._add_time("checkpoint_time_s", time.perf_counter() - started)
        self._timing["checkpoint_mb"] = nbytes / BYTES_PER_MB
        return path

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
        if self._tb_writer is not None:
            self._tb_writer.close()
        self.env.close()


def default_run_name(config: TrainConfig) -> str:
    safe_env = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in config.env)
    return f"{safe_env}_{config.algo}_seed{config.seed}"


def train(config: TrainConfig, *, progress: Callable[[dict[str, Any]], None] | None = None,
          tensorboard: bool = True) -> tuple[Path, dict[str, float]]:
    """Run ``config`` in ``<out>/<run_name>``; returns the run directory and the final evaluation."""
    run_dir = Path(config.out) / (config.run_name or default_run_name(config))
    trainer = Trainer(config, run_dir=run_dir, progress=progress, tensorboard=tensorboard)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return run_dir, result


def resume(run_dir: str | Path, *, steps: int | None = None, progress: Callable[[dict[str, Any]], None] | None = None,
           tensorboard: bool = True) -> tuple[Path, dict[str, float]]:
    """Continue the run in ``run_dir`` from its last valid checkpoint (to ``steps`` if given)."""
    trainer = Trainer.resume(run_dir, steps=steps, progress=progress, tensorboard=tensorboard)
    try:
        result = trainer.run()
    finally:
        trainer.close()
    return Path(run_dir), result


def evaluate_run(run_dir: str | Path, *, episodes: int | None = None, seed: int | None = None,
                 device: str | None = None) -> tuple[TrainConfig, EvalResult, int]:
    """Greedy evaluation of the last valid checkpoint of a run: (config, result, checkpoint env steps)."""
    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    if device is not None:
        config = dataclasses.replace(config, device=device)
    found = CheckpointManager(run_dir).load_latest()
    if found is None:
        raise CheckpointError(f"{run_dir} has no checkpoint to evaluate: train it first (checkpoints are written "
                              "every --save-interval env steps and at the end)")
    path, payload = found
    check_checkpoint_matches(payload, config, path)
    trainer = Trainer(config)
    try:
        trainer.learner.load_state_dict(payload["learner"])
        result = trainer.evaluate(episodes, seed=seed)
    finally:
        trainer.close()
    return config, result, int(payload["counters"]["env_steps"])


__all__ = ["Trainer", "train", "resume", "evaluate_run", "EvalResult", "MetricsLogger", "read_metrics",
           "truncate_metrics", "load_run_config", "run_finished", "resolve_device", "make_vec_env",
           "default_run_name", "TIMING_METRICS"]
