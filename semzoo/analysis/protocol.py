"""The cooperative-MARL evaluation protocol over a folder of runs (``semzoo report``).

Gorsane et al. 2022, "Towards a standardised performance evaluation protocol for cooperative MARL"
(NeurIPS): per task, the interquartile mean (IQM) and mean across independent runs with 95 %
stratified bootstrap confidence intervals, probability of improvement, performance profiles,
sample-efficiency curves and the absolute metric (each run's best policy re-evaluated on 10x the
test episodes), exported in marl-eval's JSON layout. The statistics are those of Agarwal et al.
2021, "Deep reinforcement learning at the edge of the statistical precipice" (NeurIPS), computed
with their library ``rliable``; semzoo only arranges the scores into its runs x tasks matrices.

A run's score at step t is ``RunSeries.value_at``: the evaluation scheduled for t (the first from t
up to the next multiple of test_interval, as the trainer tests at the first iteration past each
interval; see semzoo.analysis.report); nothing if the run stopped before t. Choices made here:

- Confidence intervals: rliable's percentile stratified bootstrap (resampling runs within each
  task), ``reps`` replications, seeded with ``BOOTSTRAP_SEED`` so a report is reproducible.
- Across envs, rliable needs a runs x tasks matrix, so an algorithm's aggregate uses the same
  number of seeds on every env: the smallest count among the envs where it has a score, taking
  the lowest seeds of each env. The report states that count; per-env rows use every seed.
- Scores are the raw metric: win rates already lie in [0, 1]; returns are not normalised, so an
  aggregate of returns across envs mixes their scales.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semzoo.analysis.paper import PaperCell, Table1Row, paper_cells, paper_markdown, table_1_markdown, table_1_rows
from semzoo.analysis.report import (
    RunSeries,
    _colours,
    _figure,
    _grouped,
    _labels,
    _save,
    curve_steps,
    default_steps,
    last_logged,
    load_runs,
    metric_note,
    metric_panels,
    mixed_code,
    resolve_metric,
    score_table,
    table_markdown,
)
from semzoo.config import config_fields
from semzoo.episodic.memory import NO_MEMORY, memory_of
from semzoo.errors import MissingDependency
from semzoo.runfiles import ABSOLUTE_FILE, FINAL_FILE, run_variant, setting_name, varying_settings

MARL_EVAL_FILE = "marl_eval.json"
"""The export for marl-eval: named for its reader, and unlike ``metrics.csv`` of a run directory."""
REPORT_FILE = "report.md"
PROFILE_FILE = "performance_profile.png"
CURVES_FILE = "sample_efficiency.png"
ALL_ENVS = "all"
"""The env of an aggregate across envs."""
ABSOLUTE = "absolute"
"""The step label of absolute-metric estimates."""
CONFIDENCE = 0.95
DEFAULT_REPS = 2000
BOOTSTRAP_SEED = 0
PROFILE_POINTS = 101
"""Thresholds tau of a performance profile, evenly spaced over the observed score range."""
MARL_EVAL_METRICS = {"test_return_mean": "return", "test_win_rate": "win_rate"}
"""semzoo metric -> marl-eval metric name."""
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
def _seeded(seed: int) -> Iterator[None]:
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

    with _seeded(seed):
        points, intervals = library.get_interval_estimates(dict(scores), func, reps=reps,
                                                           confidence_interval_size=CONFIDENCE)
    return {key: (np.atleast_1d(np.asarray(points[key], np.float64)),
                  np.asarray(intervals[key], np.float64).reshape(2, -1)) for key in scores}


def _iqm_and_mean(scores: np.ndarray) -> np.ndarray:
    from rliable import metrics

    return np.array([metrics.aggregate_iqm(scores), metrics.aggregate_mean(scores)])


def _iqm_per_step(scores: np.ndarray) -> np.ndarray:
    """runs x 1 x steps -> IQM per step [steps]: rliable's aggregate_iqm (scipy's 25 % trimmed mean) column by column.

    One vectorised call instead of one per step: the curve's bootstrap is otherwise the slowest part of a report.
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


def _scores(seeds: Sequence[RunSeries], score: Score) -> np.ndarray:
    """The scores of the runs that have one, in seed order [n]."""
    values = np.array([score(run) for run in seeds], np.float64)
    return values[~np.isnan(values)]


def _matrix(per_env: Sequence[np.ndarray]) -> np.ndarray:
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
            values = _scores(seeds, score)
            if len(values):
                per_env.setdefault(algo, {})[env] = values
    matrices = {}
    for algo, by_env in per_env.items():
        for env, values in by_env.items():
            matrices[(env, algo)] = values[:, None]
        if len(by_env) > 1:
            matrices[(ALL_ENVS, algo)] = _matrix(list(by_env.values()))
    keyed = {f"{env}\0{algo}": m for (env, algo), m in matrices.items()}
    results = bootstrap(keyed, _iqm_and_mean, reps)
    out = []
    for (env, algo), m in matrices.items():
        iqm, mean = _estimates(*results[f"{env}\0{algo}"])
        out.append(Aggregate(step=step, env=env, algo=algo, seeds=m.shape[0], envs=m.shape[1], iqm=iqm, mean=mean))
    order = {env: i for i, env in enumerate([*groups, ALL_ENVS])}
    return sorted(out, key=lambda a: (order[a.env], a.algo))


SEM = "sem"
"""The memory every other memory is also compared with (``memory_pairs``): the paper's."""


def memory_pairs(algos: Sequence[str], *, over_sem: bool = True) -> list[tuple[str, str]]:
    """(<memory>-X, X) for each memory variant (a registered memory's prefix) whose base X is among ``algos``;
    then, unless ``over_sem`` is False, (<memory>-X, sem-X) for each other memory whose SEM variant is among them.

    ``algos`` are run labels (``runfiles.run_labels``): ``sem-qmix lam=0.3`` pairs with ``qmix``, its memory
    settings dropped, and ``sem-qmix lr=0.001`` with ``qmix lr=0.001``; ``emc-qmix`` pairs with ``qmix``, then
    with ``sem-qmix``.
    """
    memory_settings = {setting_name(f.key) for f in config_fields() if f.section == "memory"}
    over_base, over_sem_pairs = [], []
    for label in sorted(algos):
        algo, *settings = label.split(" ")
        kind, _, base = algo.partition("-")
        base = " ".join([base, *(s for s in settings if s.partition("=")[0] not in memory_settings)])
        if memory_of(algo) == NO_MEMORY:
            continue
        if base in algos:
            over_base.append((label, base))
        if over_sem and kind != SEM and f"{SEM}-{base}" in algos:
            over_sem_pairs.append((label, f"{SEM}-{base}"))
    return over_base + over_sem_pairs


def setting_pairs(algos: Sequence[str]) -> list[tuple[str, str]]:
    """(X, Y) for labels of one algorithm where Y's settings are a proper subset of X's: each variant against the
    runs it departs from. ``qmix runtime=semzoo-0.2`` pairs with ``qmix``; a factor run ``qmix runtime=semzoo-0.2
    timeout_as_terminal=true`` with both; ``sem-qmix lam=0.3`` with ``sem-qmix`` (and, through ``memory_pairs``,
    with ``qmix``).
    """
    parsed = [(label, *_label_parts(label)) for label in sorted(algos)]
    return [(x, y) for x, x_algo, x_settings in parsed for y, y_algo, y_settings in parsed
            if x_algo == y_algo and y_settings < x_settings]


def _label_parts(label: str) -> tuple[str, frozenset[str]]:
    algo, *settings = label.split(" ")
    return algo, frozenset(settings)


def compared_pairs(algos: Sequence[str]) -> list[tuple[str, str]]:
    """The pairs a report compares: ``memory_pairs`` then ``setting_pairs``, each pair once."""
    return list(dict.fromkeys(memory_pairs(algos) + setting_pairs(algos)))


COMPARE_SEPARATOR = " vs "
"""Between the two labels of a ``--compare`` pair: ``'qmix td_lambda=0.6 vs sem-qmix'`` asks for P(X > Y)."""


def parse_compare(text: str) -> tuple[str, str]:
    """``'X vs Y'`` -> (X, Y), two run labels (``runfiles.run_labels``) around one `` vs ``; ValueError otherwise."""
    parts = [part.strip() for part in text.split(COMPARE_SEPARATOR)]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"--compare {text!r}: expected two different run labels around ' vs ', e.g. "
                         "'qmix td_lambda=0.6 vs sem-qmix' (the labels of a report's tables)")
    return parts[0], parts[1]


def check_compare(runs: Sequence[RunSeries], pairs: Sequence[tuple[str, str]]) -> None:
    """ValueError naming a label of ``pairs`` that no run carries, and the labels the runs do carry."""
    labels = _labels(_grouped(runs))
    for pair in pairs:
        for label in pair:
            if label not in labels:
                raise ValueError(f"--compare {COMPARE_SEPARATOR.join(pair)!r}: no run is labelled {label!r}; "
                                 f"the labels of these runs: {', '.join(labels)}")


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


def _wall_cost_table(rows: Sequence[WallCost]) -> str:
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


MEMORY_DIAGNOSTICS = (("memory_hit_rate", "hit rate", "last"), ("memory_merge_rate", "merge rate", "last"),
                      ("memory_cross_hit_rate", "cross-hit rate", "last"),
                      ("memory_desirable_hit_share", "hits with N_d > 0", "last"),
                      ("reward_incentive", "incentive, mean", "mean"), ("reward_curiosity", "curiosity, mean", "mean"),
                      ("lagma_codes_used", "codes in use", "last"), ("lagma_perplexity", "code perplexity", "last"),
                      ("lagma_reward_extrinsic", "extrinsic reward, mean", "mean"))
"""The figures that show a memory acting (semzoo.episodic.usage.TableUsage; a codebook memory's, LAGMA's, from
semzoo.episodic.lagma): metric, column, how a run's rows become one number ("last": the last row, a rate since the
run started, except the hit rate, that of its last window, and the codes in use and their perplexity, those of the
states stored since the row before; "mean": the mean over the run's rows). A run from before ``memory_merge_rate``
was logged has its merge rate derived where it can be (``derived_merge_rate``)."""
SELF_HIT_LIMIT = 0.01
"""A memory whose cross-hit rate stays below this answers almost only with the entry its own step wrote."""


@dataclass(frozen=True)
class MemoryUse:
    """Per env and algorithm, each diagnostic's median and range over the runs that log it."""

    env: str
    algo: str
    runs: int
    figures: dict[str, tuple[float, float, float]]
    """metric -> (median, low, high) over runs."""
    derived_merge_runs: int = 0
    """Of the runs behind the merge rate, those whose rate is derived (``derived_merge_rate``), not logged."""

    @property
    def codebook(self) -> bool:
        """A codebook memory (LAGMA): its entries are learned codes, its hit rate is the share of looked-up steps on a
        reference sequence (where its incentive acts), and no return of its table enters a target."""
        return "lagma_codes_used" in self.figures

    @property
    def self_hits_only(self) -> bool:
        """Its lookups were answered (almost) only by entries of a single visit: its E is each step's own return.
        Never for a codebook memory, whose lookups feed an incentive, not a return target."""
        cross = self.figures.get("memory_cross_hit_rate")
        return cross is not None and cross[2] < SELF_HIT_LIMIT and not self.codebook


def derived_merge_rate(run: RunSeries) -> float | None:
    """The merge rate of a run that does not log ``memory_merge_rate`` but logs ``memory_entries`` and
    ``memory_pending_steps``: (writes - entries) / writes, with writes = env steps - pending steps at the last row
    that logs both (every step of a finished episode is written once its pending set is flushed).

    Exact only while nothing was evicted, so None for a run whose entries reached the table's capacity
    (``config.memory.capacity``), for a run without a config, or before its first write.
    """
    if run.config is None or "memory_entries" not in run.metrics or "memory_pending_steps" not in run.metrics:
        return None
    entry_steps, entries = run.metrics["memory_entries"]
    pending_at, pending = run.metrics["memory_pending_steps"]
    both = np.intersect1d(entry_steps, pending_at)
    if not both.size or float(np.max(entries)) >= run.config.memory.capacity:
        return None
    step = both[-1]
    stored = float(entries[int(np.searchsorted(entry_steps, step, side="right")) - 1])
    writes = float(step) - float(pending[int(np.searchsorted(pending_at, step, side="right")) - 1])
    return (writes - stored) / writes if writes > 0 else None


def memory_use(runs: Sequence[RunSeries]) -> list[MemoryUse]:
    """The memory diagnostics of every (env, algo) whose runs log any (``MEMORY_DIAGNOSTICS``); the merge rate of a
    run that does not log it is derived where it can be (``derived_merge_rate``)."""
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    counts: dict[tuple[str, str], int] = {}
    derived: dict[tuple[str, str], int] = {}
    for run in runs:
        figures = {}
        for name, _, how in MEMORY_DIAGNOSTICS:
            if name in run.metrics and len(run.metrics[name][1]):
                row_values = run.metrics[name][1]
                figures[name] = float(row_values[-1] if how == "last" else np.mean(row_values))
        key = (run.env, run.algo)
        if "memory_merge_rate" not in figures and (merge := derived_merge_rate(run)) is not None:
            figures["memory_merge_rate"] = merge
            derived[key] = derived.get(key, 0) + 1
        if not figures:
            continue
        counts[key] = counts.get(key, 0) + 1
        for name, value in figures.items():
            values.setdefault(key, {}).setdefault(name, []).append(value)
    return [MemoryUse(env=env, algo=algo, runs=counts[(env, algo)],
                      figures={name: (float(np.median(v)), min(v), max(v)) for name, v in per.items()},
                      derived_merge_runs=derived.get((env, algo), 0))
            for (env, algo), per in sorted(values.items())]


def _memory_use_table(rows: Sequence[MemoryUse]) -> str:
    names = [(name, column) for name, column, _ in MEMORY_DIAGNOSTICS if any(name in r.figures for r in rows)]
    lines = ["## What the memories did (median and range over runs)", "",
             "Merge rate: the share of writes that met an existing entry; cross-hit rate: the share of lookups "
             "answered by an entry holding more than one visit, so that another episode's return could reach the "
             "target (a self-hit, the entry the step itself wrote, is a hit but not a cross hit). Both since the "
             "run started, at its last row; the hit rate is that of the last row's window. A merge rate marked * is "
             "derived for runs from before it was logged: (writes - entries) / writes, writes = env steps - pending "
             "steps, only for runs whose entries stayed below the table's capacity (nothing evicted). For a codebook "
             "memory (LAGMA) an entry is a code: the merge rate is the share of stored steps whose code an earlier "
             "episode visited, the hit rate the share of looked-up steps on a reference sequence (where its incentive "
             "acts), the cross-hit rate the share on one at a code more than one episode visited.", "",
             "| env | algo | runs | " + " | ".join(column for _, column in names) + " |",
             "|---|---|---:|" + "---|" * len(names)]
    for r in rows:
        cells = []
        for name, _ in names:
            if name not in r.figures:
                cells.append("-")
                continue
            median, low, high = r.figures[name]
            mark = "*" if name == "memory_merge_rate" and r.derived_merge_runs else ""
            cells.append(f"{median:.3g} ({low:.3g}-{high:.3g}){mark}" if r.runs > 1 else f"{median:.3g}{mark}")
        lines.append(f"| {r.env} | {r.algo} | {r.runs} | " + " | ".join(cells) + " |")
    flagged = [r for r in rows if r.self_hits_only]
    if flagged:
        lines += ["", "**Self-hits only:** " + ", ".join(f"{r.algo} on {r.env}" for r in flagged)
                  + f" answered fewer than {SELF_HIT_LIMIT:.0%} of lookups from an entry of more than one visit, so "
                  "its target was (almost) each step's own return: what it adds over the base is return mixing, "
                  "not memory of other episodes (compare with mc-<base>)."]
    codebooks = [r for r in rows if r.codebook]
    if codebooks:
        lines += ["", "**Codebooks:** " + "; ".join(_codebook_text(r) for r in codebooks) + "."]
    incentive = [r for r in rows if "reward_incentive" in r.figures and r.figures["reward_incentive"][2] == 0.0]
    if incentive:
        lines += ["", "**No incentive:** " + ", ".join(f"{r.algo} on {r.env}" for r in incentive)
                  + ": the episodic incentive was exactly zero in every logged row; its intrinsic reward was "
                  "curiosity alone."]
    return "\n".join(lines)


def _codebook_text(r: MemoryUse) -> str:
    """One codebook memory's reading: how many codes its states used, and how often its incentive could act."""
    def figure(name: str, form: str) -> str:
        median, low, high = r.figures[name]
        return f"{median:{form}}" if r.runs == 1 or low == high else f"{median:{form}} ({low:{form}}-{high:{form}})"

    text = f"{r.algo} on {r.env} had {figure('lagma_codes_used', '.0f')} codes in use at its last row"
    if "lagma_perplexity" in r.figures:
        text += f" (perplexity {figure('lagma_perplexity', '.3g')})"
    if "memory_hit_rate" in r.figures:
        text += f", {figure('memory_hit_rate', '.2%')} of looked-up steps on a reference sequence"
    if "reward_incentive" in r.figures and "lagma_reward_extrinsic" in r.figures:
        text += (f", an incentive of {figure('reward_incentive', '.3g')} per step against an extrinsic reward of "
                 f"{figure('lagma_reward_extrinsic', '.3g')}")
    return text


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
            x = _scores(algos.get(algo, []), score)
            y = _scores(algos.get(base, []), score)
            if len(x) and len(y):
                cases[(env, algo, base)] = [x[:, None], y[:, None]]
                x_envs.append(x)
                y_envs.append(y)
        if len(x_envs) > 1:
            cases[(ALL_ENVS, algo, base)] = [_matrix(x_envs), _matrix(y_envs)]
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


# ----- figures -----------------------------------------------------------------------------------------------------


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
            per_env = [_scores(groups[env][algo], metric_at(metric, step)) for env in groups if algo in groups[env]]
            per_env = [v for v in per_env if len(v)]
            if per_env:
                matrices[algo] = _matrix(per_env)
        every = np.concatenate([m.ravel() for m in matrices.values()])
        low, high = float(every.min()), float(every.max())
        if metric.endswith("win_rate"):
            low, high = 0.0, 1.0
        taus = np.linspace(low, high if high > low else low + 1.0, PROFILE_POINTS)
        with _seeded(BOOTSTRAP_SEED):  # create_performance_profile takes no random_state
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


# ----- sensitivity to one setting (the paper's lambda figure) -------------------------------------------------------


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


def _sensitivity_table(sensitivity: Sensitivity, rows: Sequence[Aggregate], metric: str) -> str:
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


# ----- marl-eval export --------------------------------------------------------------------------------------------


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


# ----- the report --------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """What ``semzoo report`` computed and wrote."""

    metric: str
    at: list[int]
    aggregates: list[Aggregate]
    improvements: list[Improvement]
    markdown: str
    files: list[Path]
    wall_costs: list[WallCost] = field(default_factory=list)
    beside_paper: list[PaperCell] = field(default_factory=list)
    """The score-table cells the paper also reports (``semzoo.analysis.paper``), with its number beside each."""
    table_1: list[Table1Row] = field(default_factory=list)
    """The paper's Table 1 (mean and median across maps of X and SEM-X) over the maps of ``beside_paper``."""
    memory_use: list[MemoryUse] = field(default_factory=list)
    """Per env and algorithm, what its memory did (``memory_use``): merge, cross-hit and hit rates, incentive."""


def check_steps(runs: Sequence[RunSeries], metric: str, at: Sequence[int]) -> None:
    """ValueError naming the furthest step reached when no run has ``metric`` at one of the steps ``at``."""
    if not at or any(step < 0 for step in at):
        raise ValueError(f"--at {list(at)}: expected one or more non-negative env-step counts, e.g. 250000,500000")
    missing = [step for step in at if all(math.isnan(run.value_at(metric, step)) for run in runs)]
    if missing:
        furthest = max(last_logged(run, metric) for run in runs)
        raise ValueError(f"no run has {metric} at {', '.join(f'{s:,}' for s in missing)} env steps: the last "
                         f"{metric} value of any run is at {furthest:,} env steps; ask --at for steps up to that")


def _env_cell(row: Aggregate | Improvement) -> str:
    """A table row's env: its id, or 'all (N envs)' for the row across envs."""
    return row.env if row.env != ALL_ENVS else f"all ({row.envs} envs)"


def _aggregate_table(rows: Sequence[Aggregate], title: str) -> str:
    lines = [title, "", "| env | algo | seeds | IQM [95 % CI] | mean [95 % CI] |", "|---|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {_env_cell(r)} | {r.algo} | {r.seeds} | {r.iqm.cell()} | {r.mean.cell()} |")
    return "\n".join(lines)


def _improvement_table(rows: Sequence[Improvement], title: str) -> str:
    lines = [title, "", "| env | P(X > Y) [95 % CI] | X | Y | seeds X / Y |", "|---|---|---|---|---:|"]
    for r in rows:
        lines.append(f"| {_env_cell(r)} | {r.probability.cell()} | {r.algo} | {r.base} | {r.seeds[0]} / {r.seeds[1]} |")
    return "\n".join(lines)


def report(root: str | Path, at: Sequence[int] | None = None, metric: str | None = None,
           out: str | Path | None = None, reps: int = DEFAULT_REPS, absolute: AbsoluteMetric | None = None,
           echo: Callable[[str], None] = lambda line: None, compare: Sequence[tuple[str, str]] = ()) -> Report:
    """Statistics, figures, marl-eval export and ``report.md`` for the runs under ``root`` (into ``out``).

    ``echo`` receives progress lines (the CLI prints them on stderr): bootstraps take a while at 2,000 reps.
    ``absolute``, when given, first re-evaluates the runs' best checkpoints into their ``absolute.json``: that
    re-runs policies, so it is the training side's ``semzoo.run.evaluation.compute_absolute`` (``--absolute``).
    ``metric`` None: the win rate where the runs log it, else the test return; ``echo`` gets a line naming the fallback.
    ``at`` None: the paper's 250k and 500k where every run reached them, else the runs' last common evaluation and
    its half (``default_steps``); ``echo`` gets a line naming them.
    ``compare``: pairs (X, Y) of run labels whose P(X > Y) the report adds to the pairs it compares by itself
    (``compared_pairs``), e.g. TD(lambda) against SEM; ValueError for a label no run carries.
    """
    require_rliable()
    if reps < 1:
        raise ValueError(f"--reps {reps}: expected a positive number of bootstrap replications, e.g. 2000")
    runs = load_runs(root)
    given, metric = metric, resolve_metric(runs, metric)
    notes = [metric_note(metric) if given is None else None]
    if at is None:
        at, steps_note = default_steps(runs, metric)
        notes.append(steps_note)
    check_steps(runs, metric, at)
    check_compare(runs, compare)
    code_lines = mixed_code(runs)
    for note in [*notes, *code_lines]:
        if note:
            echo(note)
    out = Path(out) if out is not None else Path(root) / "report"
    if absolute is not None:
        absolute(runs, echo)

    all_aggregates: list[Aggregate] = []
    all_improvements: list[Improvement] = []
    sections = [f"# Evaluation report: {metric}", "",
                f"Per env and algorithm, the IQM and mean across seeds with 95 % stratified bootstrap CIs "
                f"(rliable, {reps} replications, seed {BOOTSTRAP_SEED}); across envs, each algorithm uses the same "
                "number of seeds on every env (the smallest count, lowest seeds first). A run's score at a step is "
                "the evaluation scheduled for it (the first from that step up to the next test interval)."]
    if code_lines:
        sections += ["", "## Runs of one group from different code", "",
                     "Each run's `provenance.json` names the semzoo commit of every session (its start and each "
                     "resume); these groups hold runs of more than one:", "", *(f"- {line}" for line in code_lines)]
    for step in at:
        echo(f"bootstrapping {metric} at {step:,} env steps ({len(runs)} runs, {reps} replications)")
        rows = aggregates(runs, metric_at(metric, step), step, reps)
        pois = improvements(runs, metric_at(metric, step), step, reps, compare)
        all_aggregates += rows
        all_improvements += pois
        sections += ["", _aggregate_table(rows, f"## {metric} at {step:,} env steps")]
        if pois:
            sections += ["", _improvement_table(pois, f"### Probability of improvement at {step:,} env steps")]

    score = absolute_score(metric)
    if any(not math.isnan(score(run)) for run in runs):
        rows = aggregates(runs, score, ABSOLUTE, reps)
        pois = improvements(runs, score, ABSOLUTE, reps, compare)
        all_aggregates += rows
        all_improvements += pois
        with_record = sum(not math.isnan(score(run)) for run in runs)
        sections += ["", _aggregate_table(rows, f"## Absolute {metric} (best checkpoint, 10x test episodes; "
                                                f"{with_record} of {len(runs)} runs)")]
        if pois:
            sections += ["", _improvement_table(pois, "### Probability of improvement, absolute metric")]

    costs = wall_costs(runs)
    if costs:
        sections += ["", _wall_cost_table(costs)]
    uses = memory_use(runs)
    if uses:
        sections += ["", _memory_use_table(uses)]

    scores = score_table(runs, at, metric)
    sections += ["", "## The paper's scores across maps (mean over seeds)", "", table_markdown(scores, metric)]
    beside_paper = paper_cells(scores, metric)
    if beside_paper:
        sections += ["", "## Beside the paper's numbers (SMAC on StarCraft II, its appendix tables)", "",
                     "Win rate in %, mean over seeds. The paper ran StarCraft II and these runs another simulator "
                     "(SMAX's units, reward and observations differ), so levels do not compare across the two; "
                     "the direction, whether SEM-X is ahead of X, can agree or not.", "",
                     paper_markdown(beside_paper)]
    table_1 = table_1_rows(beside_paper)
    if table_1:
        sections += ["", "## The paper's Table 1 layout over these maps", "",
                     "Per base X, the mean and the median across maps of the win rate (each map's mean over seeds), "
                     "X -> SEM-X in %, over the maps where both reached the step; beside them the paper's appendix "
                     "numbers over the same maps, and its Table 1 over all eight maps of SMAC as printed. With two "
                     "maps the median is the mean. Runs in the baselines' authors' SMAC setup (the code the paper "
                     "ran; `--preset authors-smac`) have rows of their own.", "",
                     table_1_markdown(table_1)]

    figures = []
    for sensitivity in sensitivities(runs):
        sections += ["", _sensitivity_table(sensitivity, all_aggregates, metric)]
        path = out / f"sensitivity_{sensitivity.algo}_{sensitivity.name}.png"
        figures.append(plot_sensitivity(sensitivity, [r for r in all_aggregates if r.step != ABSOLUTE], metric, path))
        sections += ["", f"![sensitivity of {sensitivity.algo} to {sensitivity.name}]({path.name})"]

    profile = plot_performance_profiles(runs, metric, at, out / PROFILE_FILE, reps)
    curves = plot_sample_efficiency(runs, metric, out / CURVES_FILE, reps)
    export = out / MARL_EVAL_FILE
    out.mkdir(parents=True, exist_ok=True)
    export.write_text(json.dumps(marl_eval_data(runs), indent=1))
    sections += ["", "## Figures", "", f"![performance profiles]({profile.name})", "",
                 f"![sample efficiency]({curves.name})", "",
                 f"Raw data for marl-eval: [{export.name}]({export.name})", ""]
    markdown = "\n".join(sections)
    path = out / REPORT_FILE
    path.write_text(markdown)
    return Report(metric=metric, at=list(at), aggregates=all_aggregates, improvements=all_improvements,
                  markdown=markdown, files=[path, profile, curves, export, *figures], wall_costs=costs,
                  beside_paper=beside_paper, table_1=table_1, memory_use=uses)


__all__ = [
    "ABSOLUTE_FILE",
    "Aggregate",
    "Estimate",
    "Improvement",
    "Report",
    "Sensitivity",
    "WallCost",
    "aggregates",
    "bootstrap",
    "compared_pairs",
    "derived_merge_rate",
    "env_and_task",
    "improvements",
    "iqm_curve",
    "marl_eval_data",
    "memory_pairs",
    "memory_use",
    "parse_compare",
    "plot_performance_profiles",
    "plot_sample_efficiency",
    "plot_sensitivity",
    "report",
    "sensitivities",
    "setting_pairs",
    "wall_costs",
]
