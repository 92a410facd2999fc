"""The protocol's figures: performance profiles and sample-efficiency curves (IQM across seeds with 95 % CIs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semzoo.analysis.report import RunSeries, _colours, _figure, _grouped, _labels, _save, metric_panels
from semzoo.analysis.statistics import (
    BOOTSTRAP_SEED,
    CONFIDENCE,
    DEFAULT_REPS,
    iqm_curve,
    metric_at,
    run_scores,
    runs_by_tasks,
    seeded,
)

PROFILE_POINTS = 101
"""Thresholds tau of a performance profile, evenly spaced over the observed score range."""


def plot_performance_profiles(runs: Sequence[RunSeries], metric: str, at: Sequence[int], path: str | Path,
                              reps: int = DEFAULT_REPS) -> Path:
    """One panel per step: per algorithm the fraction of runs (all envs) scoring above tau, with 95 % CI bands."""
    from rliable import library

    groups = _grouped(runs)
    algos = _labels(groups)
    colours = _colours(algos)
    plt, fig, axes = _figure(len(at))
    for ax, step in zip(axes, at):
        matrices = {}
        for algo in algos:
            per_env = [run_scores(groups[env][algo], metric_at(metric, step)) for env in groups if algo in groups[env]]
            per_env = [v for v in per_env if len(v)]
            if per_env:
                matrices[algo] = runs_by_tasks(per_env)
        every = np.concatenate([m.ravel() for m in matrices.values()])
        low, high = float(every.min()), float(every.max())
        if metric.endswith("win_rate"):
            low, high = 0.0, 1.0
        taus = np.linspace(low, high if high > low else low + 1.0, PROFILE_POINTS)
        with seeded(BOOTSTRAP_SEED):  # create_performance_profile takes no random_state
            profiles, cis = library.create_performance_profile(matrices, taus, reps=reps,
                                                               confidence_interval_size=CONFIDENCE)
        for algo, m in matrices.items():
            ax.plot(taus, profiles[algo], color=colours[algo], drawstyle="steps-post",
                    label=f"{algo} ({m.shape[0]} seeds x {m.shape[1]} env{'s' if m.shape[1] > 1 else ''})")
            ax.fill_between(taus, cis[algo][0], cis[algo][1], color=colours[algo], alpha=0.2, linewidth=0,
                            step="post")
        ax.set_title(f"performance profile at {step:,} env steps")
        ax.set_xlabel(f"{metric} (tau)")
        ax.set_ylabel("fraction of runs with score > tau")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(plt, fig, path)


def _thousands(x: float, _position: int) -> str:
    """Tick label of an env-step axis: 250000 -> '250k'."""
    return f"{x / 1000:g}k" if abs(x) >= 1000 else f"{x:g}"


def plot_sample_efficiency(runs: Sequence[RunSeries], metric: str, path: str | Path,
                           reps: int = DEFAULT_REPS) -> Path:
    """One panel per env: per algorithm the IQM across seeds over env steps with its 95 % CI band."""
    plt, fig, panels, colours = metric_panels(runs, metric)
    for ax, env, algos in panels:
        for algo, with_metric in algos.items():
            steps, iqm, low, high, n = iqm_curve(with_metric, metric, reps)
            counts = f"{n.max()}" if n.min() == n.max() else f"{n.max()}->{n[-1]}"
            label = f"{algo} ({counts} seeds)"
            if len(steps) == 1:  # one evaluation: a point with its CI, not an invisible line
                ax.errorbar(steps, iqm, yerr=[iqm - low, high - iqm], fmt="o", capsize=4, color=colours[algo],
                            label=label)
                continue
            ax.plot(steps, iqm, color=colours[algo], marker="o" if len(steps) <= 12 else None, markersize=3,
                    label=label)
            ax.fill_between(steps, low, high, color=colours[algo], alpha=0.25, linewidth=0)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.xaxis.set_major_formatter(_thousands)
        ax.set_ylabel(f"IQM {metric} (95 % CI)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(plt, fig, path)
