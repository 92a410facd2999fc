"""Learning curves and score tables over many runs (the paper's figures and Table 1).

Runs are found from the ``config.json`` files under a folder; each contributes one series per
metric from its ``metrics.csv``. A run that never trained to step t has no value there. Otherwise:

- a test metric (``test_*``) at t is the evaluation taken for t: the trainer evaluates at the first
  iteration at or past each multiple of ``test_interval``, so the evaluation "at 50,000" sits at, say, 50,400.
  The value is the first evaluation from t up to the next multiple of test_interval; when there is
  none (t between an evaluation and the next scheduled point), the last one before t, if it is one for the
  multiple at or below t. Otherwise t has none: a run cut while it wrote its last evaluation has no value
  there, never the evaluation before. Curves use the scheduled points: each evaluation at
  floor(step / test_interval) x test_interval;
- any other metric at t is its last row at or before t.
Runs are grouped by env and label (``runfiles.run_labels``: the algorithm id and the settings off the paper's
defaults that differ among the runs, ``sem-qmix lam=0.3``), so a study that varies a setting never pools its values.
Curves show, per algorithm, the median across seeds and the 25-75 % band, up to the step every seed
reached (a curve never mixes seeds that stopped early with the others: it is cut, with a warning and
a note in its legend); tables average over seeds, then give the mean and the median across
environments, which are n/a unless every environment has a value.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semzoo.config import TrainConfig
from semzoo.errors import MissingDependency
from semzoo.runfiles import (
    CONFIG_FILE,
    METRIC_FIELDS,
    METRICS_FILE,
    PROVENANCE_FILE,
    UNKNOWN_COMMIT,
    env_arg_texts,
    env_label,
    metrics_cut_line,
    read_metrics,
    read_run_config,
    run_commits,
    run_labels,
)

TARGET_METRICS = {"target_y": "y", "target_e": "E", "q_tot": "Q_tot"}
"""Metric name -> label of the targets figure (paper: y, E and Q_tot over training)."""
TARGET_STYLES = {"target_y": "-", "target_e": "--", "q_tot": ":"}
TEST_PREFIX = "test_"
"""Metrics of greedy test evaluations (test_win_rate, test_return_mean, ...)."""
BAND = (25.0, 75.0)
FIGURE_DPI = 110
PANEL_SIZE_IN = (4.8, 3.4)
MAX_COLUMNS = 3
BAND_ALPHA = 0.25
FEW_POINTS = 5
"""A curve of at most this many points is drawn with markers (a line through one point is invisible)."""
MARKER = "o"


class SkippedRunWarning(UserWarning):
    """A run directory under the folder could not be read (bad config.json or metrics.csv) and was left out."""


class DuplicateRunWarning(UserWarning):
    """Two run directories under the folder are the same run (env, label and seed): one is left out, so a seed counts once."""


class CutMetricsWarning(UserWarning):
    """A run's metrics.csv ends inside a row (a run killed while writing, a copy cut short): the cut row is left out."""


class BadMetricsRowWarning(UserWarning):
    """A row of a run's metrics.csv does not parse (a garbage line): it is left out, named by file and line."""


class CutCurveWarning(UserWarning):
    """The seeds of one (env, algo) stopped at different steps: its curve ends at the step every seed reached."""


@dataclass
class RunSeries:
    """One run: its identity and every metric as (steps, values), steps ascending."""

    run_dir: Path
    env: str
    algo: str
    """The run's label: its algorithm id, and in ``load_runs`` the settings that set it apart from the other runs
    (``runfiles.run_labels``: ``sem-qmix lam=0.3``), so runs of two settings are never pooled."""
    seed: int
    last_step: int
    metrics: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    test_interval: int | None = None
    """The run's ``test_interval``: evaluations are read at the step they were scheduled for (module docstring)."""
    config: TrainConfig | None = None
    commits: list[str] = field(default_factory=list)
    """The semzoo commits its sessions ran (``runfiles.run_commits``); [] for a run without ``provenance.json``."""
    cut_line: int | None = None
    """The line its metrics.csv ends inside (a copy cut short, a run killed while writing), else None."""

    def value_at(self, name: str, step: int) -> float:
        """The metric at ``step`` (module docstring); NaN if the run did not train to ``step`` or has none."""
        if name not in self.metrics or self.last_step < step:
            return math.nan
        steps, values = self.metrics[name]
        i = int(np.searchsorted(steps, step, side="right")) - 1
        if self.test_interval and name.startswith(TEST_PREFIX):
            first = int(np.searchsorted(steps, step, side="left"))
            next_scheduled = (step // self.test_interval + 1) * self.test_interval
            if first < len(steps) and steps[first] < next_scheduled:
                # the evaluation scheduled for ``step``; of rows at one step the last (a re-run final test)
                return float(values[int(np.searchsorted(steps, steps[first], side="right")) - 1])
            if i >= 0 and steps[i] < next_scheduled - self.test_interval:
                return math.nan  # the last evaluation before ``step`` is one for an earlier point of the schedule
        return float(values[i]) if i >= 0 else math.nan

    def scheduled_steps(self, name: str) -> np.ndarray:
        """The steps a curve of ``name`` shows this run at: test evaluations at their scheduled step, else as logged."""
        steps = self.metrics[name][0]
        if self.test_interval and name.startswith(TEST_PREFIX):
            return np.unique(steps // self.test_interval * self.test_interval)
        return np.unique(steps)


def curve_steps(runs: Sequence[RunSeries], metric: str) -> np.ndarray:
    """The union of the runs' ``scheduled_steps`` of ``metric``: the x values of a curve across seeds."""
    return np.unique(np.concatenate([run.scheduled_steps(metric) for run in runs if metric in run.metrics]))


def load_runs(root: str | Path, *, env_args_in_labels: bool = False) -> list[RunSeries]:
    """Every run under ``root`` (found by its config.json), with its metrics.

    A run directory that cannot be read (bad config.json, garbage metrics.csv) is left out with a
    ``SkippedRunWarning`` naming it, so one damaged run does not hide the others.
    ``env_args_in_labels``: a run's env is its env id alone and its env arguments join its label
    (``qmix attack=unit_range profile=smac`` on ``smax:2s3z``), so runs that differ only by env arguments (a
    factor study of an env's options) are compared with one another as settings are.
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise ValueError(f"{str(root)!r} is a file, not a folder: expected a folder of run directories (made by "
                         f"`semzoo train` or `semzoo sweep`), e.g. {str(root.parent)!r}")
    if not root.is_dir():
        raise ValueError(f"folder {str(root)!r} does not exist: expected a folder of run directories "
                         "(made by `semzoo train` or `semzoo sweep`)")
    runs = []
    for run_dir in _dirs_holding(root, CONFIG_FILE):
        if not (run_dir / METRICS_FILE).exists():
            continue
        try:
            runs.append(load_run(run_dir))
        except (ValueError, TypeError, KeyError, OSError, csv.Error) as err:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if isinstance(err, KeyError):
                reason = f"{METRICS_FILE} has no column {err}"
            elif isinstance(err, UnicodeDecodeError):
                reason = f"{METRICS_FILE} is not text ({err.reason} at byte {err.start})"
            warnings.warn(f"skipping {run_dir}: {reason}", SkippedRunWarning, stacklevel=2)
    if not runs:
        raise ValueError(f"no runs under {root}: expected run directories holding {CONFIG_FILE} and {METRICS_FILE}")
    labelled = [(run, run.config) for run in runs if run.config is not None]
    for (run, config), label in zip(labelled, run_labels([config for _, config in labelled]), strict=True):
        run.algo = label
        if env_args_in_labels:
            run.env, run.algo = config.env, " ".join([label, *env_arg_texts(config)])
    return _without_duplicates(runs)


def _without_duplicates(runs: list[RunSeries]) -> list[RunSeries]:
    """``runs`` with one run per (env, label, seed): the one that trained furthest (the first path of a tie) stays, each
    other is left out with a ``DuplicateRunWarning`` naming both, so a copied run is not counted as a second seed."""
    kept: dict[tuple[str, str, int], RunSeries] = {}
    for run in runs:
        key = (run.env, run.algo, run.seed)
        other = kept.get(key)
        if other is None:
            kept[key] = run
            continue
        keep, drop = (run, other) if run.last_step > other.last_step else (other, run)
        kept[key] = keep
        warnings.warn(f"skipping {drop.run_dir}: the same run as {keep.run_dir} ({run.algo} on {run.env}, seed "
                      f"{run.seed}), which trained to {keep.last_step:,} env steps; a seed counts once: move one of "
                      "them out of the folder", DuplicateRunWarning, stacklevel=3)
    return [run for run in runs if kept[(run.env, run.algo, run.seed)] is run]


def _dirs_holding(root: Path, name: str) -> list[Path]:
    """Every folder under ``root`` (itself included) holding a file ``name``, sorted; symbolic links to folders are
    followed, each real folder once, so a study can gather runs that live elsewhere by linking them."""
    found, seen = [], set()
    for folder, subdirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree, or two links to one run
            subdirs.clear()
            continue
        seen.add(real)
        if name in files:
            found.append(Path(folder))
    return sorted(found)


def load_run(run_dir: Path) -> RunSeries:
    """One run directory's config and metrics; ValueError/KeyError/OSError when either cannot be read."""
    config = read_run_config(run_dir)
    bad_rows: list[tuple[int, str]] = []
    rows = read_metrics(run_dir, bad_rows)
    path = run_dir / METRICS_FILE
    if bad_rows:
        line, text = bad_rows[0]
        left_out = f"it and {len(bad_rows) - 1} later row(s) are" if len(bad_rows) > 1 else "it is"
        warnings.warn(f"{path} line {line}: {text[:60]!r} is not a metrics row (expected {','.join(METRIC_FIELDS)} "
                      f"with numbers); {left_out} left out: mend or delete the line, or re-copy the file",
                      BadMetricsRowWarning, stacklevel=3)
    cut_line = metrics_cut_line(run_dir)
    if cut_line is not None:
        last_row = max((r["env_steps"] for r in rows), default=None)
        read = "it holds no full row" if last_row is None else f"its rows up to env step {last_row:,} are read"
        warnings.warn(f"{path} ends inside a row, line {cut_line} (a run killed while writing it, or a copy cut "
                      f"short): the cut row is left out, {read}; re-copy the file, or resume the run to rewrite it",
                      CutMetricsWarning, stacklevel=3)
    by_name: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in rows:
        by_name[row["name"]].append((row["env_steps"], row["value"]))
    metrics = {}
    for name, pairs in by_name.items():
        pairs.sort(key=lambda p: p[0])  # stable: rows of one step keep their logged order
        metrics[name] = (np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.float64))
    last = max((r["env_steps"] for r in rows), default=0)
    return RunSeries(run_dir=run_dir, env=env_label(config), algo=config.algo, seed=config.seed, last_step=last,
                     metrics=metrics, test_interval=config.test_interval, config=config, commits=run_commits(run_dir),
                     cut_line=cut_line)


DEFAULT_METRICS = ("test_win_rate", "test_return_mean")
"""The metric of plot, table and report when none is given: the first of these that a run logs (matrix games
and MPE log no win rate, so their runs are compared by greedy test return)."""


def _logged(runs: Sequence[RunSeries]) -> list[str]:
    """The metrics the runs logged, sorted; ValueError when they logged none (metrics.csv files without a row)."""
    logged = sorted({name for run in runs for name in run.metrics})
    if not logged:
        where = str(runs[0].run_dir / METRICS_FILE) if len(runs) == 1 else f"the {len(runs)} runs' {METRICS_FILE}"
        raise ValueError(f"{where} hold no metric rows (a header only, or rows cut short): expected rows of "
                         f"{', '.join(METRIC_FIELDS)}; train the runs first, or point at other run directories")
    return logged


def _cut_files(runs: Sequence[RunSeries]) -> str:
    """'; c/a/metrics.csv ends inside line 14, so its later rows are missing: ...' for the runs whose metrics.csv is
    cut short ('' for none): a metric missing from them may be in the part that was lost."""
    cut = [run for run in runs if run.cut_line is not None]
    if not cut:
        return ""
    first = cut[0]
    more = f" (and {len(cut) - 1} more run(s))" if len(cut) > 1 else ""
    return (f"; {first.run_dir / METRICS_FILE} ends inside line {first.cut_line}{more}, so its later rows are "
            "missing: re-copy the file, or resume the run to rewrite it")


def check_metric(runs: Sequence[RunSeries], metric: str) -> None:
    """ValueError naming the known metrics when no run logged ``metric``."""
    known = _logged(runs)
    if metric not in known:
        raise ValueError(f"unknown metric {metric!r}: the runs logged {', '.join(known)}; pick one with --metric"
                         + _cut_files(runs))


def resolve_metric(runs: Sequence[RunSeries], metric: str | None) -> str:
    """``metric`` if a run logged it (ValueError listing the logged ones otherwise); for None the first of
    ``DEFAULT_METRICS`` that a run logged."""
    if metric is not None:
        check_metric(runs, metric)
        return metric
    logged = _logged(runs)
    for default in DEFAULT_METRICS:
        if default in logged:
            return default
    raise ValueError(f"the runs log none of {', '.join(DEFAULT_METRICS)} (they logged {', '.join(logged)}): "
                     "pick a metric with --metric" + _cut_files(runs))


def metric_note(metric: str) -> str | None:
    """The line that says a command fell back to ``metric`` when given none (None for the first default)."""
    if metric not in DEFAULT_METRICS[1:]:
        return None
    skipped = DEFAULT_METRICS[:DEFAULT_METRICS.index(metric)]
    return f"metric: {metric} (no run logs {', '.join(skipped)}); choose another with --metric"


def _grouped(runs: Iterable[RunSeries]) -> dict[str, dict[str, list[RunSeries]]]:
    """env -> algo -> runs (seeds), in first-seen order of envs and sorted algos."""
    out: dict[str, dict[str, list[RunSeries]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        out[run.env][run.algo].append(run)
    return {env: {algo: sorted(out[env][algo], key=lambda r: r.seed) for algo in sorted(out[env])} for env in out}


def _labels(groups: dict[str, dict[str, list[RunSeries]]]) -> list[str]:
    """The algorithm labels of ``_grouped``'s groups over every env, sorted, each once."""
    return sorted({algo for algos in groups.values() for algo in algos})


def last_logged(run: RunSeries, metric: str) -> int:
    """The last env step at which ``run`` logged ``metric`` (0 when it never did)."""
    return int(run.metrics[metric][0][-1]) if metric in run.metrics and len(run.metrics[metric][0]) else 0


COMMIT_CHARS = 10
"""Characters of a commit hash that a report shows."""
DIRTY = "-dirty"
"""What ``runfiles.run_commits`` appends to a commit whose checkout had uncommitted changes."""


def _short_commit(commit: str) -> str:
    if commit == UNKNOWN_COMMIT:
        return "no commit recorded"
    dirty = commit.endswith(DIRTY)
    return commit.removesuffix(DIRTY)[:COMMIT_CHARS] + (DIRTY if dirty else "")


def mixed_code(runs: Iterable[RunSeries]) -> list[str]:
    """One line per group of runs (env and label) that come from more than one known semzoo commit, naming each
    commit with its runs' seeds (a run resumed under another commit is named under each); [] where none does.

    A commit whose checkout had uncommitted changes (``-dirty``) counts as another. Runs that record no commit
    (made before ``provenance.json``, or where git could not tell) are named, but cannot make a group mixed.
    """
    lines = []
    for env, by_algo in _grouped(runs).items():
        for algo, seeds in by_algo.items():
            by_commit: dict[str, list[int]] = defaultdict(list)
            for run in seeds:
                for commit in run.commits or [UNKNOWN_COMMIT]:
                    by_commit[commit].append(run.seed)
            known = [commit for commit in by_commit if commit != UNKNOWN_COMMIT]
            if len(known) < 2:
                continue
            parts = [f"{_short_commit(commit)} (seed{'s' if len(seeds_of) > 1 else ''} {', '.join(map(str, seeds_of))})"
                     for commit, seeds_of in by_commit.items()]
            lines.append(f"{env} {algo}: its runs come from {len(known)} semzoo commits, {'; '.join(parts)}: "
                         f"compare them knowing the code changed (each run's {PROVENANCE_FILE})")
    return lines


def common_last_step(runs: Sequence[RunSeries]) -> int:
    """The step every run reached: the smallest of their last steps."""
    return min(run.last_step for run in runs)


def curve(runs: Sequence[RunSeries], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, median, 25th, 75th percentile) across seeds, on the union of the seeds' ``scheduled_steps``.

    The curve stops at the step every seed reached (``common_last_step``): past it the statistics would
    mix the seeds that went on with fewer of them. A step before a seed's first value counts the
    others only; shapes [K] each.
    """
    steps = curve_steps(runs, metric)
    steps = steps[steps <= common_last_step(runs)]
    values = np.array([[run.value_at(metric, int(s)) for s in steps] for run in runs])  # [seeds, K]
    keep = ~np.all(np.isnan(values), axis=0)
    steps, values = steps[keep], values[:, keep]
    lo, mid, hi = np.nanpercentile(values, [BAND[0], 50.0, BAND[1]], axis=0)
    return steps, mid, lo, hi


def _matplotlib() -> Any:
    """The matplotlib module (Agg backend), or MissingDependency naming the extra that installs it."""
    try:
        import matplotlib
    except ImportError as err:
        raise MissingDependency(f"plots need matplotlib, which did not import ({err}): "
                                f"pip install 'semzoo[plot]'") from None
    matplotlib.use("Agg")
    return matplotlib


def _figure(n_panels: int):
    _matplotlib()
    import matplotlib.pyplot as plt

    cols = min(n_panels, MAX_COLUMNS)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_SIZE_IN[0] * cols, PANEL_SIZE_IN[1] * rows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return plt, fig, list(axes.flat)


def _colours(algos: Sequence[str]) -> dict[str, tuple]:
    cmap = _matplotlib().colormaps["tab10"]
    return {algo: cmap(i % cmap.N) for i, algo in enumerate(algos)}


def metric_panels(runs: Sequence[RunSeries], metric: str):
    """A figure with a panel per env that logged ``metric``: (plt, fig, [(ax, env, {algo: its runs with the
    metric})], a colour per algorithm); algorithms without the metric on an env are left out of its panel."""
    groups = {env: {algo: [r for r in seeds if metric in r.metrics] for algo, seeds in algos.items()}
              for env, algos in _grouped(runs).items()}
    groups = {env: {algo: seeds for algo, seeds in algos.items() if seeds} for env, algos in groups.items()}
    groups = {env: algos for env, algos in groups.items() if algos}
    colours = _colours(_labels(groups))
    plt, fig, axes = _figure(len(groups))
    return plt, fig, [(ax, env, algos) for ax, (env, algos) in zip(axes, groups.items())], colours


def plot_metric(runs: Sequence[RunSeries], metric: str, path: str | Path) -> Path:
    """One panel per env: per algorithm the median across seeds and the 25-75 % band of ``metric``."""
    check_metric(runs, metric)
    plt, fig, panels, colours = metric_panels(runs, metric)
    for ax, env, algos in panels:
        for algo, with_metric in algos.items():
            steps, mid, lo, hi = curve(with_metric, metric)
            label = f"{algo} ({len(with_metric)} seeds)"
            cut, furthest = common_last_step(with_metric), max(r.last_step for r in with_metric)
            if (curve_steps(with_metric, metric) > cut).any():  # points were dropped, not just a few steps
                label = f"{algo} ({len(with_metric)} seeds, cut at {cut:,})"
                warnings.warn(f"{env} {algo}: the seeds stopped between env step {cut:,} and {furthest:,}; the "
                              f"curve ends at {cut:,}, the step every seed reached", CutCurveWarning, stacklevel=2)
            ax.plot(steps, mid, color=colours[algo], label=label, marker=_marker(steps))
            ax.fill_between(steps, lo, hi, color=colours[algo], alpha=BAND_ALPHA, linewidth=0)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(plt, fig, path)


def plot_targets(runs: Sequence[RunSeries], path: str | Path) -> Path | None:
    """One panel per env: median y, E and Q_tot per algorithm over training; None when no run logged them."""
    present = [m for m in TARGET_METRICS if any(m in r.metrics for r in runs)]
    if not present:
        return None
    groups = _grouped(r for r in runs if any(m in r.metrics for m in present))
    colours = _colours(_labels(groups))
    plt, fig, axes = _figure(len(groups))
    for ax, (env, algos) in zip(axes, groups.items()):
        for algo, seeds in algos.items():
            for metric in present:
                with_metric = [r for r in seeds if metric in r.metrics]
                if with_metric:
                    steps, mid, _, _ = curve(with_metric, metric)
                    ax.plot(steps, mid, color=colours[algo], linestyle=TARGET_STYLES[metric],
                            label=f"{algo} {TARGET_METRICS[metric]}", marker=_marker(steps))
        ax.set_title(f"{env}: targets")
        ax.set_xlabel("env steps")
        ax.set_ylabel("value")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", ncol=2)
    return _save(plt, fig, path)


def _marker(steps: np.ndarray) -> str | None:
    """Markers on a curve of few points, so that a single evaluation shows."""
    return MARKER if len(steps) <= FEW_POINTS else None


def _save(plt, fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=FIGURE_DPI)
    plt.close(fig)
    return path


def plot_runs(root: str | Path, metric: str | None = None, out: str | Path | None = None,
              echo: Callable[[str], None] = lambda line: None) -> list[Path]:
    """``<metric>.png`` (and ``targets.png`` when memory metrics exist) for the runs under ``root``.

    ``metric`` None: the win rate where the runs log it, else the test return (``resolve_metric``);
    ``echo`` then receives the line naming the fallback.
    """
    runs = load_runs(root)
    given, metric = metric, resolve_metric(runs, metric)
    out = Path(out) if out is not None else Path(root) / "plots"
    written = [plot_metric(runs, metric, out / f"{metric}.png")]
    targets = plot_targets(runs, out / "targets.png")
    if targets is not None:
        written.append(targets)
    note = metric_note(metric) if given is None else None
    if note:
        echo(note)
    return written


# ----- the score table ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRow:
    step: int
    algo: str
    env: str
    """An env id, or 'mean' / 'median' across envs."""
    value: float
    seeds: int
    """Seeds that trained to ``step`` (for mean/median: envs with a value)."""
    envs: int = 0
    """For mean/median: the envs of the table (a summary has a value only when ``seeds == envs``); 0 otherwise."""


SUMMARY_ENVS = ("mean", "median")


def score_table(runs: Sequence[RunSeries], at: Sequence[int], metric: str | None = None) -> list[TableRow]:
    """Per (step, algo, env): the mean over seeds of the metric at ``step``; then mean and median across envs.

    A mean or median across envs is NaN (n/a) unless every env of the table has a value for that algorithm
    at that step: a summary over fewer envs would not compare with the other algorithms'. Its ``seeds``
    counts the envs with a value, ``envs`` all of them (the markdown shows ``n/a (2/3 envs)``). ``metric``
    None: the win rate where the runs log it, else the test return (``resolve_metric``).
    """
    metric = resolve_metric(runs, metric)
    if not at or any(step < 0 for step in at):
        raise ValueError(f"--at {list(at)}: expected one or more non-negative env-step counts, e.g. 250000,500000")
    groups = _grouped(runs)
    envs = list(groups)
    algos = _labels(groups)
    rows = []
    for step in at:
        for algo in algos:
            per_env = []
            for env in envs:
                values = [r.value_at(metric, step) for r in groups[env].get(algo, [])]
                values = [v for v in values if not math.isnan(v)]
                value = float(np.mean(values)) if values else math.nan
                per_env.append(value)
                rows.append(TableRow(step=step, algo=algo, env=env, value=value, seeds=len(values)))
            known = [v for v in per_env if not math.isnan(v)]
            complete = len(known) == len(envs)
            mean, median = (float(np.mean(known)), float(np.median(known))) if complete else (math.nan, math.nan)
            rows.append(TableRow(step=step, algo=algo, env="mean", value=mean, seeds=len(known), envs=len(envs)))
            rows.append(TableRow(step=step, algo=algo, env="median", value=median, seeds=len(known), envs=len(envs)))
    return rows


PAPER_STEPS = (250_000, 500_000)
"""The steps of the paper's tables (0.25M and 0.5M env steps): ``table`` and ``report`` read them when no --at is given."""


def default_steps(runs: Sequence[RunSeries], metric: str) -> tuple[list[int], str | None]:
    """The steps ``table`` and ``report`` read without --at, and the line that says so (None for the paper's).

    ``PAPER_STEPS`` where every run that logs ``metric`` has a value at each. Else the last step of ``metric`` that
    every run logged (``last_logged``: a run's closing evaluation is at its last step, unless the run was cut while
    it wrote it) and its half, each moved down to the evaluation every run has scheduled at or below it (within one
    test interval, so 500,012 reads as 500,000); the half is left out when no run evaluated before it.
    """
    logging = [run for run in runs if metric in run.metrics]
    if not logging:
        raise ValueError(f"no run logs {metric}: pick a metric the runs log with --metric")
    if all(not math.isnan(run.value_at(metric, step)) for run in logging for step in PAPER_STEPS):
        return list(PAPER_STEPS), None
    shared = set(logging[0].scheduled_steps(metric).tolist())
    for run in logging[1:]:
        shared &= set(run.scheduled_steps(metric).tolist())
    interval = max((run.test_interval or 0) for run in logging)

    def on_schedule(step: int) -> int | None:
        """The shared scheduled evaluation in (step - interval, step], if there is one."""
        near = [s for s in shared if 0 < s <= step and step - s < interval]
        return max(near) if near else None

    last = min(last_logged(run, metric) for run in logging)
    last = on_schedule(last) or last
    half = on_schedule(last // 2)
    steps = [last] if half is None or half >= last else [half, last]
    paper = " and ".join(f"{step:,}" for step in PAPER_STEPS)
    chosen = " and ".join(f"{step:,}" for step in steps)
    what = "the runs' last common evaluation" + (" and its half" if len(steps) == 2 else "")
    return steps, (f"steps: {chosen} env steps, {what} (not every run reached the paper's {paper}); "
                   "choose others with --at")


def missing_cells(rows: Sequence[TableRow]) -> int:
    """How many (step, algo, env) cells of a score table have no value (summaries not counted)."""
    return sum(math.isnan(r.value) for r in rows if r.env not in SUMMARY_ENVS)


def furthest_step(runs: Sequence[RunSeries]) -> int:
    """The furthest env step any run reached."""
    return max(run.last_step for run in runs)


def _cell(row: TableRow) -> str:
    if not math.isnan(row.value):
        return f"{row.value:.3f}"
    if row.env in SUMMARY_ENVS and 0 < row.seeds < row.envs:
        return f"n/a ({row.seeds}/{row.envs} envs)"
    return "n/a"


def table_markdown(rows: Sequence[TableRow], metric: str) -> str:
    """One markdown table per step: a row per algorithm, a column per env, then mean and median."""
    blocks = []
    for step in dict.fromkeys(r.step for r in rows):
        at_step = [r for r in rows if r.step == step]
        envs = [e for e in dict.fromkeys(r.env for r in at_step) if e not in SUMMARY_ENVS]
        columns = [*envs, *SUMMARY_ENVS]
        lines = [f"{metric} at {step:,} env steps (mean over seeds)", "",
                 "| algo | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
        for algo in dict.fromkeys(r.algo for r in at_step):
            cells = {r.env: r for r in at_step if r.algo == algo}
            lines.append(f"| {algo} | " + " | ".join(_cell(cells[c]) for c in columns) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def write_table_csv(rows: Sequence[TableRow], path: str | Path) -> Path:
    """Long format: step, algo, env, value, seeds (env 'mean'/'median' for the summaries)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "algo", "env", "value", "seeds"])
        for r in rows:
            writer.writerow([r.step, r.algo, r.env, "" if math.isnan(r.value) else repr(r.value), r.seeds])
    return path


__all__ = [
    "PAPER_STEPS",
    "TARGET_METRICS",
    "BadMetricsRowWarning",
    "CutCurveWarning",
    "RunSeries",
    "SkippedRunWarning",
    "TableRow",
    "check_metric",
    "common_last_step",
    "curve",
    "default_steps",
    "furthest_step",
    "load_run",
    "load_runs",
    "missing_cells",
    "plot_metric",
    "plot_runs",
    "plot_targets",
    "score_table",
    "table_markdown",
    "write_table_csv",
]
