"""The export of a report's runs in marl-eval's raw-data JSON layout (Gorsane et al. 2022)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from semzoo.analysis.report import RunSeries, _grouped
from semzoo.analysis.statistics import read_absolute

MARL_EVAL_FILE = "marl_eval.json"
"""The export for marl-eval: named for its reader, and unlike ``metrics.csv`` of a run directory."""
MARL_EVAL_METRICS = {"test_return_mean": "return", "test_win_rate": "win_rate"}
"""semzoo metric -> marl-eval metric name."""


def env_and_task(env: str) -> tuple[str, str]:
    """'smax:2s3z' -> ('smax', '2s3z'); an id without a family is its own env and task."""
    family, sep, task = env.partition(":")
    return (family, task) if sep else (env, env)


def marl_eval_data(runs: Sequence[RunSeries]) -> dict[str, Any]:
    """{env: {task: {algo: {"run_<seed>": {"step_<k>": {"step_count", "return": [x], "win_rate": [x]},
    "absolute_metrics": {...}}}}}} (marl-eval's raw-data layout).

    Each list holds one number: semzoo logs the mean over an evaluation's episodes, which marl-eval
    accepts for a metric computed over several episodes. Steps are every evaluation the run logged.
    """
    data: dict[str, Any] = {}
    for env, algos in _grouped(runs).items():
        family, task = env_and_task(env)
        for algo, seeds in algos.items():
            by_run = data.setdefault(family, {}).setdefault(task, {}).setdefault(algo, {})
            for run in seeds:
                name = f"run_{run.seed}"
                while name in by_run:  # two run directories with one seed: keep both
                    name += "_"
                entry: dict[str, Any] = {}
                logged = sorted({int(s) for m in MARL_EVAL_METRICS if m in run.metrics for s in run.metrics[m][0]})
                for k, step in enumerate(logged):
                    point: dict[str, Any] = {"step_count": step}
                    for metric, key in MARL_EVAL_METRICS.items():
                        if metric in run.metrics:
                            steps, values = run.metrics[metric]
                            at = np.flatnonzero(steps == step)
                            if len(at):
                                point[key] = [float(values[at[-1]])]
                    entry[f"step_{k}"] = point
                record = read_absolute(run.run_dir)
                if record is not None:
                    entry["absolute_metrics"] = {key: [float(record[metric])] for metric, key in MARL_EVAL_METRICS.items()
                                                 if record.get(metric) is not None}
                by_run[name] = entry
    return data
