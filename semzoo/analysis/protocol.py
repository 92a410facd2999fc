"""The cooperative-MARL evaluation protocol over a folder of runs (``semzoo report``): ``report`` and its tables.

Gorsane et al. 2022, "Towards a standardised performance evaluation protocol for cooperative MARL"
(NeurIPS): per task, the interquartile mean (IQM) and mean across independent runs with 95 %
stratified bootstrap confidence intervals, probability of improvement, performance profiles,
sample-efficiency curves and the absolute metric (each run's best policy re-evaluated on 10x the
test episodes), exported in marl-eval's JSON layout.

Each part has its module: the statistics (semzoo.analysis.statistics, Agarwal et al. 2021 through ``rliable``),
which runs are compared (pairing), the figures (figures), the sensitivity to one setting (sensitivity), the wall
cost (wall_cost), what the memories did (memory_use) and the marl-eval export (marl_eval). ``report`` runs them over
the runs under a folder and writes ``report.md`` beside the figures; their public names import from here as well.

A run's score at step t is ``RunSeries.value_at``: the evaluation scheduled for t (the first from t
up to the next multiple of test_interval, as the trainer tests at the first iteration past each
interval; see semzoo.analysis.report); nothing if the run stopped before t. Across envs an algorithm
uses the same number of seeds on every env (semzoo.analysis.statistics); the report states that count,
and per-env rows use every seed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from semzoo.analysis.figures import PROFILE_POINTS, plot_performance_profiles, plot_sample_efficiency
from semzoo.analysis.marl_eval import MARL_EVAL_FILE, MARL_EVAL_METRICS, env_and_task, marl_eval_data
from semzoo.analysis.memory_use import (
    MEMORY_DIAGNOSTICS,
    SELF_HIT_LIMIT,
    MemoryUse,
    derived_merge_rate,
    memory_use,
    memory_use_table,
)
from semzoo.analysis.pairing import (
    COMPARE_SEPARATOR,
    SEM,
    check_compare,
    compared_pairs,
    memory_pairs,
    parse_compare,
    setting_pairs,
)
from semzoo.analysis.paper import PaperCell, Table1Row, paper_cells, paper_markdown, table_1_markdown, table_1_rows
from semzoo.analysis.report import (
    RunSeries,
    default_steps,
    last_logged,
    load_runs,
    metric_note,
    mixed_code,
    resolve_metric,
    score_table,
    table_markdown,
)
from semzoo.analysis.sensitivity import Sensitivity, plot_sensitivity, sensitivities, sensitivity_table
from semzoo.analysis.statistics import (
    ABSOLUTE,
    ALL_ENVS,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    DEFAULT_REPS,
    INSTALL_HINT,
    AbsoluteMetric,
    Aggregate,
    Estimate,
    Improvement,
    Score,
    absolute_score,
    aggregates,
    bootstrap,
    improvements,
    iqm_curve,
    metric_at,
    read_absolute,
    require_rliable,
)
from semzoo.analysis.wall_cost import WallCost, wall_cost_table, wall_costs
from semzoo.runfiles import ABSOLUTE_FILE

REPORT_FILE = "report.md"
PROFILE_FILE = "performance_profile.png"
CURVES_FILE = "sample_efficiency.png"


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
           echo: Callable[[str], None] = lambda line: None, compare: Sequence[tuple[str, str]] = (),
           env_args_in_labels: bool = False) -> Report:
    """Statistics, figures, marl-eval export and ``report.md`` for the runs under ``root`` (into ``out``).

    ``echo`` receives progress lines (the CLI prints them on stderr): bootstraps take a while at 2,000 reps.
    ``absolute``, when given, first re-evaluates the runs' best checkpoints into their ``absolute.json``: that
    re-runs policies, so it is the training side's ``semzoo.run.evaluation.compute_absolute`` (``--absolute``).
    ``metric`` None: the win rate where the runs log it, else the test return; ``echo`` gets a line naming the fallback.
    ``at`` None: the paper's 250k and 500k where every run reached them, else the runs' last common evaluation and
    its half (``default_steps``); ``echo`` gets a line naming them.
    ``compare``: pairs (X, Y) of run labels whose P(X > Y) the report adds to the pairs it compares by itself
    (``compared_pairs``), e.g. TD(lambda) against SEM; ValueError for a label no run carries.
    ``env_args_in_labels``: runs that differ only by env arguments are compared as settings (``load_runs``).
    """
    require_rliable()
    if reps < 1:
        raise ValueError(f"--reps {reps}: expected a positive number of bootstrap replications, e.g. 2000")
    runs = load_runs(root, env_args_in_labels=env_args_in_labels)
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
        sections += ["", wall_cost_table(costs)]
    uses = memory_use(runs)
    if uses:
        sections += ["", memory_use_table(uses)]

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
        sections += ["", sensitivity_table(sensitivity, all_aggregates, metric)]
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
    "ABSOLUTE",
    "ABSOLUTE_FILE",
    "ALL_ENVS",
    "BOOTSTRAP_SEED",
    "COMPARE_SEPARATOR",
    "CONFIDENCE",
    "CURVES_FILE",
    "DEFAULT_REPS",
    "INSTALL_HINT",
    "MARL_EVAL_FILE",
    "MARL_EVAL_METRICS",
    "MEMORY_DIAGNOSTICS",
    "PROFILE_FILE",
    "PROFILE_POINTS",
    "REPORT_FILE",
    "SELF_HIT_LIMIT",
    "SEM",
    "AbsoluteMetric",
    "Aggregate",
    "Estimate",
    "Improvement",
    "MemoryUse",
    "Report",
    "Score",
    "Sensitivity",
    "WallCost",
    "absolute_score",
    "aggregates",
    "bootstrap",
    "check_compare",
    "check_steps",
    "compared_pairs",
    "derived_merge_rate",
    "env_and_task",
    "improvements",
    "iqm_curve",
    "marl_eval_data",
    "memory_pairs",
    "memory_use",
    "metric_at",
    "parse_compare",
    "plot_performance_profiles",
    "plot_sample_efficiency",
    "plot_sensitivity",
    "read_absolute",
    "report",
    "require_rliable",
    "sensitivities",
    "setting_pairs",
    "wall_costs",
]
