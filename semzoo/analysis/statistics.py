"""The statistics of the evaluation protocol: IQM and mean with stratified bootstrap CIs, probability of improvement.

Agarwal et al. 2021, "Deep reinforcement learning at the edge of the statistical precipice" (NeurIPS), computed with
their library ``rliable``; semzoo only arranges the scores into its runs x tasks matrices. A run's score is its
metric at a step (``metric_at``: the evaluation scheduled for the step, ``RunSeries.value_at``) or its absolute
metric (``absolute_score``: its best checkpoint re-evaluated on 10x the test episodes). Choices made here:

- Confidence intervals: rliable's percentile stratified bootstrap (resampling runs within each task), ``reps``
  replications, seeded with ``BOOTSTRAP_SEED`` so a report is reproducible.
- Across envs, rliable needs a runs x tasks matrix, so an algorithm's aggregate uses the same number of seeds on
  every env: the smallest count among the envs where it has a score, taking the lowest seeds of each env.
- Scores are the raw metric: win rates already lie in [0, 1]; returns are not normalised, so an aggregate of
  returns across envs mixes their scales.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semzoo.analysis.pairing import compared_pairs
from semzoo.analysis.report import RunSeries, _grouped, _labels, curve_steps
from semzoo.errors import MissingDependency
from semzoo.runfiles import ABSOLUTE_FILE

ALL_ENVS = "all"
"""The env of an aggregate across envs."""
ABSOLUTE = "absolute"
"""The step label of absolute-metric estimates."""
CONFIDENCE = 0.95
DEFAULT_REPS = 2000
BOOTSTRAP_SEED = 0
INSTALL_HINT = "pip install 'semzoo[report]'"


def require_rliable() -> None:
    """MissingDependency with the install command when rliable (or a dependency of it) does not import."""
    try:
        import rliable.library
        import rliable.metrics  # noqa: F401
    except Exception as err:  # rliable's arch fails with TypeError, not ImportError, under pandas 3
        raise MissingDependency(f"semzoo report needs rliable, which did not import ({type(err).__name__}: "
                          f"{str(err).splitlines()[0] if str(err) else ''}): {INSTALL_HINT}") from None


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed numpy's global RNG, then restore it.

    rliable 1.2's bootstraps draw their resamples with ``np.random.choice``, whatever ``random_state``
    says (arch only stores that, and warns that it is deprecated), so the global seed is what counts.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def bootstrap(scores: Mapping[str, Any], func: Callable[..., np.ndarray], reps: int,
              seed: int = BOOTSTRAP_SEED) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """key -> (point estimates [S], 95 % CI [2, S]) from rliable's stratified bootstrap.

    ``scores[key]`` is a runs x tasks (x steps) array, or a list of such arrays for a function of
    several (probability of improvement), each resampled independently.
    """
    from rliable import library

    with seeded(seed):
        points, intervals = library.get_interval_estimates(dict(scores), func, reps=reps,
                                                           confidence_interval_size=CONFIDENCE)
    return {key: (np.atleast_1d(np.asarray(points[key], np.float64)),
                  np.asarray(intervals[key], np.float64).reshape(2, -1)) for key in scores}


def _iqm_and_mean(scores: np.ndarray) -> np.ndarray:
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """runs x 1 x steps -> IQM per step [steps]: rliable's aggregate_iqm (scipy's 25 % trimmed mean) column by column.

    One vectorised call instead of one per step: the bootstrap calls it once per resample.
    """
    from scipy import stats

    return np.asarray(stats.trim_mean(scores[:, 0, :], proportiontocut=0.25, axis=0), np.float64)


def _probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from rliable import metrics

    return np.array([metrics.probability_of_improvement(x, y)])


# ----- scores ------------------------------------------------------------------------------------------------------


Score = Callable[[RunSeries], float]
"""A run's score (NaN: none), e.g. its metric at a step or its absolute metric."""


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    """The 95 % CI."""

    def cell(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Aggregate:
    """IQM and mean of one algorithm's scores on one env (or across envs) at one step."""

    step: int | str
    """Env steps, or ``ABSOLUTE``."""
    env: str
    """An env id, or ``ALL_ENVS``."""
    algo: str
    seeds: int
    """Runs per env in the estimate (across envs: the smallest count among the envs)."""
    envs: int
    iqm: Estimate
    mean: Estimate


@dataclass(frozen=True)
class Improvement:
    """P(X > Y): the probability that a run of ``algo`` scores above a run of ``base`` (Agarwal et al. 2021)."""

    step: int | str
    env: str
    algo: str
    base: str
    seeds: tuple[int, int]
    """Runs per env of (algo, base)."""
    envs: int
    probability: Estimate


def run_scores(seeds: Sequence[RunSeries], score: Score) -> np.ndarray:
    """The scores of the runs that have one, in seed order [n]."""
    values = np.array([score(run) for run in seeds], np.float64)
    return values[~np.isnan(values)]


def runs_by_tasks(per_env: Sequence[np.ndarray]) -> np.ndarray:
    """runs x tasks with the smallest seed count: each env's first (lowest-seed) scores."""
    n = min(len(v) for v in per_env)
    return np.stack([v[:n] for v in per_env], axis=1)


def _estimates(point: np.ndarray, interval: np.ndarray) -> list[Estimate]:
    return [Estimate(float(point[i]), float(interval[0, i]), float(interval[1, i])) for i in range(len(point))]


def aggregates(runs: Sequence[RunSeries], score: Score, step: int | str, reps: int = DEFAULT_REPS) -> list[Aggregate]:
    """Per (env, algo), then per algo across envs: IQM and mean of ``score`` with 95 % bootstrap CIs."""
    groups = _grouped(runs)
    per_env: dict[str, dict[str, np.ndarray]] = {}  # algo -> env -> scores
    for env, algos in groups.items():
        for algo, seeds in algos.items():
            values = run_scores(seeds, score)
            if len(values):
                per_env.setdefault(algo, {})[env] = values
    matrices = {}
    for algo, by_env in per_env.items():
        for env, values in by_env.items():
            matrices[(env, algo)] = values[:, None]
        if len(by_env) > 1:
            matrices[(ALL_ENVS, algo)] = runs_by_tasks(list(by_env.values()))
    keyed = {f"{env}\0{algo}": m for (env, algo), m in matrices.items()}
    results = bootstrap(keyed, _iqm_and_mean, reps)
    out = []
    for (env, algo), m in matrices.items():
        iqm, mean = _estimates(*results[f"{env}\0{algo}"])
        out.append(Aggregate(step=step, env=env, algo=algo, seeds=m.shape[0], envs=m.shape[1], iqm=iqm, mean=mean))
    order = {env: i for i, env in enumerate([*groups, ALL_ENVS])}
    return sorted(out, key=lambda a: (order[a.env], a.algo))


def improvements(runs: Sequence[RunSeries], score: Score, step: int | str,
                 reps: int = DEFAULT_REPS, extra: Sequence[tuple[str, str]] = ()) -> list[Improvement]:
    """P(X > Y) per env where both have scores, and across those envs (same seed rule), for the ``compared_pairs``
    (a memory variant against its base and SEM, a setting's variant against the runs it departs from), then for the
    ``extra`` pairs (X, Y) of labels asked for (``--compare``) that are not among them."""
    groups = _grouped(runs)
    pairs = list(dict.fromkeys(compared_pairs(_labels(groups)) + list(extra)))
    cases: dict[tuple[str, str, str], list[np.ndarray]] = {}
    for algo, base in pairs:
        x_envs, y_envs = [], []
        for env, algos in groups.items():
            x = run_scores(algos.get(algo, []), score)
            y = run_scores(algos.get(base, []), score)
            if len(x) and len(y):
                cases[(env, algo, base)] = [x[:, None], y[:, None]]
                x_envs.append(x)
                y_envs.append(y)
        if len(x_envs) > 1:
            cases[(ALL_ENVS, algo, base)] = [runs_by_tasks(x_envs), runs_by_tasks(y_envs)]
    results = bootstrap({"\0".join(k): v for k, v in cases.items()}, _probability_of_improvement, reps)
    out = []
    for (env, algo, base), (x, y) in cases.items():
        (probability,) = _estimates(*results["\0".join((env, algo, base))])
        out.append(Improvement(step=step, env=env, algo=algo, base=base, seeds=(x.shape[0], y.shape[0]),
                               envs=x.shape[1], probability=probability))
    return out


def metric_at(metric: str, step: int) -> Score:
    return lambda run: run.value_at(metric, step)


def read_absolute(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``absolute.json``, or None when it has none; ValueError when it cannot be read."""
    path = Path(run_dir) / ABSOLUTE_FILE
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not readable JSON ({err}): delete it and run `semzoo report --absolute` "
                         "to re-evaluate the run's best checkpoint") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: expected a JSON object with step, episodes, test_win_rate, test_return_mean")
    return record


AbsoluteMetric = Callable[[Sequence[RunSeries], Callable[[str], None]], int]
"""Re-evaluates runs' best checkpoints into their ``absolute.json`` (``semzoo.run.evaluation.compute_absolute``)."""


def absolute_score(metric: str) -> Score:
    """A run's absolute metric (its best checkpoint on 10x the test episodes); NaN without ``absolute.json``."""
    cache: dict[Path, float] = {}

    def score(run: RunSeries) -> float:
        if run.run_dir not in cache:
            record = read_absolute(run.run_dir)
            value = None if record is None else record.get(metric)
            cache[run.run_dir] = math.nan if value is None else float(value)
        return cache[run.run_dir]
    return score


def iqm_curve(seeds: Sequence[RunSeries], metric: str, reps: int = DEFAULT_REPS
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, IQM, CI low, CI high, seeds) across seeds on the seeds' scheduled evaluation steps [K] each.

    A step counts only the seeds that trained to it (a shorter run's last value is not carried on);
    steps sharing the same seeds are bootstrapped together.
    """
    steps = curve_steps(seeds, metric)
    values = np.array([[run.value_at(metric, int(s)) for s in steps] for run in seeds])  # [seeds, K]
    present = ~np.isnan(values)
    keep = present.any(axis=0)
    steps, values, present = steps[keep], values[:, keep], present[:, keep]
    patterns = [tuple(column) for column in present.T]  # which seeds have a value, per step
    blocks = {}
    for pattern in dict.fromkeys(patterns):
        columns = np.array([p == pattern for p in patterns])
        blocks[pattern] = (columns, values[np.array(pattern)][:, columns][:, None, :])  # [seeds, 1, steps]
    results = bootstrap({str(i): block for i, (_, block) in enumerate(blocks.values())}, _iqm_per_step, reps)
    iqm, low, high = (np.empty(len(steps)) for _ in range(3))
    for i, (columns, _) in enumerate(blocks.values()):
        point, interval = results[str(i)]
        iqm[columns], low[columns], high[columns] = point, interval[0], interval[1]
    return steps, iqm, low, high, present.sum(axis=0)
