"""The wall-clock cost of finished runs (``final.json``): minutes per run against each compared reference."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from semzoo.analysis.pairing import compared_pairs
from semzoo.analysis.report import RunSeries
from semzoo.runfiles import FINAL_FILE


@dataclass(frozen=True)
class WallCost:
    """The wall-clock time of an (env, algo)'s finished runs, from their ``final.json``."""

    env: str
    algo: str
    runs: int
    env_steps: int
    """The runs' median env steps."""
    median_min: float
    low_min: float
    high_min: float
    vs: dict[str, float]
    """Median wall time over a reference's median on the same env: its base, SEM, and the runs of the same algorithm
    it departs from by a setting (``compared_pairs``)."""
    updates: int | None = None
    """The runs' median gradient updates (``final.json``), None where it does not say."""
    updates_per_episode: float | None = None
    """Gradient updates per collected episode of the runs (their config; None when unknown or when they differ)."""


def wall_costs(runs: Sequence[RunSeries]) -> list[WallCost]:
    """Per env and algo, the minutes its finished runs took (median and range), against each reference's median.

    Only runs with ``final.json`` count (a run stopped part-way has no total); a resumed run's wall time counts each
    session up to its last checkpoint (the trainer carries it in its checkpoint). Wall time follows the machine and its load: compare
    runs made on one machine, side by side.
    """
    minutes: dict[tuple[str, str], list[float]] = {}
    steps: dict[tuple[str, str], list[int]] = {}
    updates: dict[tuple[str, str], list[int]] = {}
    per_episode: dict[tuple[str, str], set[float | None]] = {}
    for run in runs:
        path = run.run_dir / FINAL_FILE
        if not path.exists():
            continue
        try:
            final = json.loads(path.read_text())
            wall, env_steps = float(final["wall_time"]), int(final["env_steps"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # an unreadable final.json: the run is left out of the cost, as an unfinished one
        minutes.setdefault((run.env, run.algo), []).append(wall / 60.0)
        steps.setdefault((run.env, run.algo), []).append(env_steps)
        if isinstance(final.get("updates"), int):
            updates.setdefault((run.env, run.algo), []).append(final["updates"])
        per_episode.setdefault((run.env, run.algo), set()).add(
            None if run.config is None else run.config.learner.updates_per_episode)
    pairs = compared_pairs(sorted({algo for _, algo in minutes}))
    out = []
    for (env, algo), values in sorted(minutes.items()):
        median = float(np.median(values))
        vs = {ref: median / float(np.median(minutes[(env, ref)])) for variant, ref in pairs
              if variant == algo and (env, ref) in minutes}
        counts = updates.get((env, algo))
        rates = per_episode[(env, algo)]
        out.append(WallCost(env=env, algo=algo, runs=len(values), env_steps=int(np.median(steps[(env, algo)])),
                            median_min=median, low_min=min(values), high_min=max(values), vs=vs,
                            updates=int(np.median(counts)) if counts else None,
                            updates_per_episode=next(iter(rates)) if len(rates) == 1 else None))
    return out


def wall_cost_table(rows: Sequence[WallCost]) -> str:
    lines = ["## Wall-clock cost per run (finished runs, from final.json)", "",
             "Minutes per run: median and range over the finished runs; the ratio is this median over the "
             "reference's on the same env. Wall time follows the machine and its load: compare runs made side by side. "
             "Updates: the runs' median gradient updates and, in brackets, updates per collected episode (a setup "
             "with two, as QPLEX's and EMC's on SMAC, learns about twice as long per env step).",
             "", "| env | algo | runs | env steps | updates (per episode) | minutes, median (range) | vs |",
             "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        vs = ", ".join(f"{ratio:.2f}x {ref}" for ref, ratio in r.vs.items()) or "-"
        count = "-" if r.updates is None else f"{r.updates:,}"
        rate = "?" if r.updates_per_episode is None else f"{r.updates_per_episode:g}"
        lines.append(f"| {r.env} | {r.algo} | {r.runs} | {r.env_steps:,} | {count} ({rate}) | {r.median_min:.0f} "
                     f"({r.low_min:.0f}-{r.high_min:.0f}) | {vs} |")
    return "\n".join(lines)
