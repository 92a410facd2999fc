"""Greedy evaluation: test episodes of a run's agents, during training, from a checkpoint, and the absolute metric."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from semzoo.config import TrainConfig
from semzoo.run.checkpoint import write_atomic
from semzoo.run.rundir import load_best, load_trained
from semzoo.run.runner import EpisodeRunner
from semzoo.runfiles import ABSOLUTE_FILE, BEST_FILE

if TYPE_CHECKING:
    from semzoo.analysis.report import RunSeries

TEST_SEED_OFFSET = 1_000_000_007
"""Test episodes draw env seeds from a stream disjoint from training's."""
SEED_STRIDE = 100_003
"""Env seeds of run ``seed`` start at ``seed * SEED_STRIDE`` (training) or that plus TEST_SEED_OFFSET (tests)."""
ABSOLUTE_FACTOR = 10
"""The absolute metric plays the best agent on this many times the run's test episodes (Gorsane et al. 2022)."""


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


BEST_METRICS = ("test_win_rate", "test_return_mean")
"""The score of the best policy: the first of these the evaluation reports (win rate where the env reports wins)."""
BEST_TIEBREAK = "test_return_mean"
"""Breaks a tie on the best metric (equal win rates): the evaluation with the higher test return wins."""


class BestPolicy:
    """The best test evaluation of a run so far and its agent's parameters: what ``best.ckpt`` holds.

    The absolute metric re-evaluates that agent (``absolute_metric``). The record is part of a run's checkpoint
    state, so a resumed run ends with the same ``best.ckpt`` as an uninterrupted one. Keeping it reads no random
    stream.
    """

    def __init__(self) -> None:
        self.record: dict[str, Any] | None = None
        """step, updates, score, tiebreak, metric and the agent's parameters (on the CPU); None before a test."""

    def offer(self, metrics: dict[str, float], agent: torch.nn.Module, *, step: int, updates: int) -> bool:
        """After an evaluation: when its score beats the best so far, keep ``agent``'s parameters; True when kept.

        A tie on the score is broken by ``BEST_TIEBREAK`` (the test return): a run that never wins scores 0 at
        every evaluation, and "the earlier" would keep its first, untrained agent. A full tie keeps the earlier.
        A best record from a checkpoint written before the tie-break (no ``tiebreak``) counts as NaN: a tie
        with it keeps it.
        """
        metric = next(name for name in BEST_METRICS if name in metrics)
        score = float(metrics[metric])
        tiebreak = float(metrics.get(BEST_TIEBREAK, math.nan))
        best = self.record
        if math.isnan(score):
            return False
        if best is not None and best["metric"] == metric and (
                score < best["score"] or (score == best["score"] and not tiebreak > best.get("tiebreak", math.nan))):
            return False
        parameters = {name: value.detach().to("cpu", copy=True) for name, value in agent.state_dict().items()}
        self.record = {"step": step, "updates": updates, "score": score, "tiebreak": tiebreak, "metric": metric,
                       "agent": parameters}
        return True

    def payload(self, config: TrainConfig) -> dict[str, Any] | None:
        """The content of ``best.ckpt``: what ``evaluate_run(best=True)`` needs, with the run's identity."""
        if self.record is None:
            return None
        return {"env": config.env, "algo": config.algo, "config": config.to_dict(), **self.record}


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
                 device: str | None = None, best: bool = False) -> tuple[TrainConfig, EvalResult, int]:
    """Greedy evaluation of a run's last valid checkpoint: (config, result, checkpoint env steps).

    ``best`` evaluates ``best.ckpt`` instead (the agent of the run's best test evaluation; its env step is
    returned). Only the env and the agent network are built (no replay, no episodic table). Without
    ``seed`` the episodes are the run's own test stream from its start; ``seed`` picks env seeds seed,
    seed + N, ...
    """
    if best:
        config, payload = load_best(run_dir)
        agent_state, at_step = payload["agent"], int(payload["step"])
    else:
        config, payload = load_trained(run_dir, purpose="to evaluate")
        agent_state, at_step = payload["learner"]["agent"], int(payload["counters"]["env_steps"])
    return config, evaluate_agent(config, agent_state, episodes=episodes, seed=seed, device=device), at_step


def evaluate_agent(config: TrainConfig, agent_state: dict[str, torch.Tensor], *, episodes: int | None = None,
                   seed: int | None = None, device: str | None = None) -> EvalResult:
    """Greedy episodes of the agent with parameters ``agent_state`` in a fresh env of ``config``.

    ``episodes`` defaults to ``config.test_episodes``; ``seed`` and the env seeds as in ``evaluate_run``.
    """
    from semzoo.agents.rnn import RNNAgent
    from semzoo.envs.registry import make_vec_env
    from semzoo.run.device import resolve_device

    if device is not None:
        config = dataclasses.replace(config, device=device)
    torch_device = resolve_device(config.device)
    env = make_vec_env(config)
    try:
        agent = RNNAgent.for_env(env, config.agent).to(torch_device)
        agent.load_state_dict(agent_state)
        runner = EpisodeRunner(env, agent, device=torch_device, episode_limit=config.episode_limit)
        n_episodes = config.test_episodes if episodes is None else episodes
        return greedy_episodes(runner, n_episodes, eval_env_seeds(config.seed, env.n_envs, seed),
                               torch.Generator().manual_seed(config.seed))
    finally:
        env.close()


def absolute_metric(run_dir: str | Path, *, factor: int = ABSOLUTE_FACTOR, device: str | None = None) -> dict[str, Any]:
    """The "absolute metric" of Gorsane et al. (2022): the run's best agent on ``factor`` x its test episodes.

    The agent is ``best.ckpt`` (kept during training); its greedy episodes are the run's test stream from
    its start. The result is cached in ``<run_dir>/absolute.json``, a dict with ``step`` (of the best
    evaluation), ``episodes``, ``test_win_rate`` (None where the env reports no wins), ``test_return_mean``,
    ``test_return_std``, ``best_metric`` and ``best_score`` (the training evaluation that chose it); a cached
    record of the same best checkpoint and episode count is returned without evaluating again.
    """
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ValueError(f"factor={factor!r}: expected a positive integer multiple of the run's test episodes "
                         f"(the protocol's is {ABSOLUTE_FACTOR})")
    run_dir = Path(run_dir)
    config, payload = load_best(run_dir)
    episodes = factor * config.test_episodes
    key: dict[str, Any] = {"step": int(payload["step"]), "episodes": episodes, "best_metric": str(payload["metric"]),
                           "best_score": float(payload["score"])}
    cache = run_dir / ABSOLUTE_FILE
    try:
        cached = json.loads(cache.read_text())
    except (OSError, json.JSONDecodeError):
        cached = None
    if isinstance(cached, dict) and all(cached.get(name) == value for name, value in key.items()):
        return cached
    result = evaluate_agent(config, payload["agent"], episodes=episodes, device=device)
    record = {"step": key["step"], "episodes": result.episodes, "test_win_rate": result.win_rate,
              "test_return_mean": result.return_mean, "test_return_std": result.return_std,
              "best_metric": key["best_metric"], "best_score": key["best_score"]}
    write_atomic(cache, json.dumps(record, indent=2).encode())
    return record


def compute_absolute(runs: Sequence[RunSeries], echo: Callable[[str], None] = print) -> int:
    """Re-evaluate each run's best checkpoint into its ``absolute.json``; returns how many runs have one.

    The one part of ``semzoo report`` that re-runs policies (``--absolute``): the analysis
    (``semzoo.analysis.protocol.report``) takes it as its ``absolute`` argument and imports no training.

    A run without ``best.ckpt`` (one stopped before its first evaluation, or whose run directory holds none) is
    left out of the absolute metric with one line naming it, so a report of the other runs still completes.
    """
    done = 0
    for i, run in enumerate(runs, 1):
        if not (Path(run.run_dir) / BEST_FILE).exists():
            echo(f"absolute metric: {run.run_dir} has no {BEST_FILE}; left out")
            continue
        record = absolute_metric(run.run_dir)
        done += 1
        echo(f"absolute metric {i}/{len(runs)}: {run.env} {run.algo} seed {run.seed}, best at "
             f"{record['step']:,} env steps, {record['episodes']} episodes")
    return done


def eval_env_seeds(run_seed: int, n_envs: int, seed: int | None = None, start: int = 0) -> Callable[[int], int]:
    """Env seed of test batch i: the run's test stream from episode ``start``, or ``seed + i * n_envs``."""
    if seed is None:
        return lambda i: (TEST_SEED_OFFSET + run_seed * SEED_STRIDE + start + i * n_envs) % 2**31
    return lambda i: (seed + i * n_envs) % 2**31
