"""The metrics window: what a metric row of a run averages, gathered since the previous row.

A row holds the means of the learner's diagnostics over the updates of the window, the return, length and win
rate of the episodes collected in it, the memory's and the buffer's figures, the env steps per second and the
seconds spent collecting, learning, testing and checkpointing. The episodes and the diagnostics are part of a
checkpoint (a resumed run writes the same rows); the timings measure the machine and are not.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from semzoo.run.runner import RolloutStats


class MetricsWindow:
    """The episodes, update diagnostics and timings since the last metric row."""

    def __init__(self) -> None:
        self.recent: list[RolloutStats] = []
        """The collected batches' episode statistics."""
        self.updates: dict[str, list[float]] = {}
        """Each learner diagnostic of every update, by name."""
        self.timing: dict[str, float] = {}
        """Seconds by what they were spent on, and ``checkpoint_mb`` (machine-dependent, not checkpointed)."""
        self.clock = time.perf_counter()
        self.start_steps = 0
        """When and at which env step the window began (for ``steps_per_s``)."""

    def restart_clock(self, clock: float, env_steps: int) -> None:
        """Measure ``steps_per_s`` from ``clock`` and ``env_steps`` (the start of ``run``, or of a resumed run)."""
        self.clock, self.start_steps = clock, env_steps

    def add_episodes(self, stats: RolloutStats) -> None:
        self.recent.append(stats)

    def add_update(self, stats: dict[str, float]) -> None:
        for k, v in stats.items():
            self.updates.setdefault(k, []).append(v)

    def add_time(self, name: str, seconds: float) -> None:
        self.timing[name] = self.timing.get(name, 0.0) + seconds

    def row(self, *, epsilon: float, memory_metrics: dict[str, float] | None, buffer_episodes: int,
            env_steps: int) -> dict[str, float]:
        """The metric row of the window (learner stats, episodes, memory, buffer, timing); a new window starts."""
        metrics = {k: float(np.mean(v)) for k, v in self.updates.items()}
        recent = self.recent
        returns = np.concatenate([s.returns for s in recent])
        metrics.update(return_mean=float(returns.mean()), epsilon=epsilon,
                       ep_length_mean=float(np.concatenate([s.lengths for s in recent]).mean()))
        won = [s.battle_won for s in recent if s.battle_won is not None]
        if won:
            metrics["win_rate"] = float(np.concatenate(won).mean())
        timed_out = [s.timed_out for s in recent if s.timed_out is not None]
        if timed_out:  # the episodes whose last step a time limit ended: what timeout_as_terminal acts on
            metrics["timeout_rate"] = float(np.concatenate(timed_out).mean())
        if memory_metrics is not None:
            metrics.update(memory_metrics)
        metrics["buffer_episodes"] = float(buffer_episodes)
        now = time.perf_counter()
        steps = env_steps - self.start_steps
        metrics["steps_per_s"] = steps / max(now - self.clock, 1e-9)
        metrics.update(self.timing)
        self.updates, self.recent, self.timing = {}, [], {}
        self.clock, self.start_steps = now, env_steps
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """The episodes and diagnostics of the window (a checkpoint's ``loop`` section holds them)."""
        return {"recent": [{"returns": s.returns, "lengths": s.lengths, "battle_won": s.battle_won,
                            "timed_out": s.timed_out} for s in self.recent],
                "window": {k: list(v) for k, v in self.updates.items()}}

    def load_state_dict(self, loop: dict[str, Any]) -> None:
        """Inverse of ``state_dict``."""
        self.recent = [RolloutStats(returns=r["returns"], lengths=r["lengths"], battle_won=r["battle_won"],
                                    timed_out=r.get("timed_out"))  # None: the checkpoint holds no time-limit counts
                       for r in loop["recent"]]
        self.updates = {k: list(v) for k, v in loop["window"].items()}
