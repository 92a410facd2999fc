"""Sensitivity to one setting (the paper's lambda and |Q^S| figure): the runs of one algorithm that vary one numeric
setting, their IQM at each value beside the base algorithm's, as a table and a figure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semzoo.analysis.pairing import memory_pairs
from semzoo.analysis.report import RunSeries, _colours, _figure, _save
from semzoo.analysis.statistics import ALL_ENVS, Aggregate
from semzoo.config import config_fields
from semzoo.runfiles import run_variant, setting_name, varying_settings


@dataclass(frozen=True)
class Sensitivity:
    """The runs of one algorithm id that differ in one numeric setting: each label's value of it (the lambda
    sweep: ``{"sem-qmix lam=0": 0.0, "sem-qmix": 0.1, ...}``), and the base algorithm when it is among the runs."""

    algo: str
    key: str
    values: dict[str, float]
    base: str | None

    @property
    def name(self) -> str:
        """The setting as labels show it (``lam``)."""
        return setting_name(self.key)


def sensitivities(runs: Sequence[RunSeries]) -> list[Sensitivity]:
    """One ``Sensitivity`` per algorithm id and numeric setting that its runs vary, one factor at a time.

    For each setting that differs among an algorithm's runs (``varying_settings``), the runs whose other
    varying settings all sit at their defaults; two labels or more among them make a sensitivity. A sweep of
    one setting gives one; a study of lambda and, separately, the table size (the paper's figure, each swept
    around the defaults: lambda 0.1, |Q^S| 1e6) gives two from one folder; a full grid gives each setting's
    slice through the defaults of the others.
    """
    labels: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.config is not None:
            labels.setdefault(run.config.algo, {})[run.algo] = run.config
    bases_of = dict(memory_pairs(sorted({run.algo for run in runs}), over_sem=False))
    defaults = {f.key: f.default for f in config_fields()}
    out = []
    for algo, configs in sorted(labels.items()):
        varying = varying_settings(list(configs.values()))
        variants = {label: run_variant(config) for label, config in configs.items()}  # settings off their defaults
        for key in varying:
            values = {label: variant.get(key, defaults[key]) for label, variant in variants.items()
                      if not any(k in variant for k in varying if k != key)}
            if len(values) < 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                          for x in values.values()):
                continue
            bases = {bases_of[label] for label in values if label in bases_of}
            out.append(Sensitivity(algo=algo, key=key, values={k: float(v) for k, v in values.items()},
                                   base=bases.pop() if len(bases) == 1 else None))
    return out


def _steps_and_envs(sensitivity: Sensitivity, rows: Sequence[Aggregate]) -> tuple[list[int | str], list[str]]:
    """The steps and envs (not the across-env aggregate) at which ``rows`` hold the sensitivity's labels."""
    mine = [r for r in rows if r.algo in sensitivity.values and r.env != ALL_ENVS]
    return list(dict.fromkeys(r.step for r in mine)), list(dict.fromkeys(r.env for r in mine))


def sensitivity_table(sensitivity: Sensitivity, rows: Sequence[Aggregate], metric: str) -> str:
    steps, envs = _steps_and_envs(sensitivity, rows)
    cell = {(r.env, r.algo, r.step): r for r in rows}
    lines = [f"## Sensitivity of {sensitivity.algo} to {sensitivity.name}: IQM {metric} [95 % CI]", "",
             f"| env | {sensitivity.name} | " + " | ".join(f"{s:,}" if isinstance(s, int) else str(s) for s in steps)
             + " |", "|---|---:|" + "---|" * len(steps)]
    for env in envs:
        for label, value in sorted(sensitivity.values.items(), key=lambda item: item[1]):
            cells = [cell[(env, label, s)].iqm.cell() if (env, label, s) in cell else "n/a" for s in steps]
            lines.append(f"| {env} | {value:g} | " + " | ".join(cells) + " |")
        if sensitivity.base is not None:
            cells = [cell[(env, sensitivity.base, s)].iqm.cell() if (env, sensitivity.base, s) in cell else "n/a"
                     for s in steps]
            lines.append(f"| {env} | {sensitivity.base} (no memory) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_sensitivity(sensitivity: Sensitivity, rows: Sequence[Aggregate], metric: str, path: str | Path) -> Path:
    """One panel per step: per env the IQM (95 % CI bars) of the algorithm at each value of the setting, and the
    base algorithm's IQM as a dashed line with its CI band."""
    steps, envs = _steps_and_envs(sensitivity, rows)
    plt, fig, axes = _figure(len(steps))
    colours = _colours(envs)
    ordered = sorted(sensitivity.values.items(), key=lambda item: item[1])
    for ax, step in zip(axes, steps):
        cell = {(r.env, r.algo): r for r in rows if r.step == step}
        for env in envs:
            points = [(value, cell[(env, label)].iqm) for label, value in ordered if (env, label) in cell]
            if not points:
                continue
            x = np.array([p[0] for p in points])
            y = np.array([p[1].value for p in points])
            err = np.array([[p[1].value - p[1].low for p in points], [p[1].high - p[1].value for p in points]])
            ax.errorbar(x, y, yerr=err, marker="o", capsize=4, color=colours[env],
                        label=f"{env} {sensitivity.algo} ({cell[(env, ordered[0][0])].seeds} seeds)"
                        if (env, ordered[0][0]) in cell else f"{env} {sensitivity.algo}")
            base = cell.get((env, sensitivity.base)) if sensitivity.base is not None else None
            if base is not None:
                ax.axhline(base.iqm.value, color=colours[env], linestyle="--", label=f"{env} {sensitivity.base}")
                ax.axhspan(base.iqm.low, base.iqm.high, color=colours[env], alpha=0.1, linewidth=0)
        ax.set_title(f"{sensitivity.algo} at {step:,} env steps" if isinstance(step, int) else str(step))
        ax.set_xlabel(sensitivity.name)
        ax.set_ylabel(f"IQM {metric} (95 % CI)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(plt, fig, path)
