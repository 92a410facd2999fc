"""Print the headline tables of docs/results.md (and the README's result table), and its other figures, from the kept
runs under docs/results/.

    python scripts/findings_tables.py            # every table
    python scripts/findings_tables.py levels     # one of: levels, parts, bases
    python scripts/findings_tables.py --paste    # write them into the pages that hold them (PAGES)
    python scripts/findings_tables.py --figures  # the figures of the page's claims and prose, a line each

Each table is printed as the page holds it, so the page pastes it and ``tests/test_findings_numbers.py`` checks that
the page still does; each figure is printed as the page words it (the test finds it there, line breaks aside).
Figures are rliable's (IQM with a 95 % stratified bootstrap CI, P(X > Y)), as ``semzoo report`` computes them, over
the run sets named below; a CI depends on the set it was bootstrapped with, so each table names its set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from semzoo.analysis.memory_use import memory_use
from semzoo.analysis.paper import Table1Row, paper_cells, percent, table_1_rows
from semzoo.analysis.report import RunSeries, load_runs, score_table
from semzoo.analysis.statistics import ALL_ENVS, Estimate, absolute_score, aggregates, improvements, metric_at

sys.path.insert(0, str(Path(__file__).resolve().parent))
from curves import curve  # scripts/curves.py: the curve the study pages' per-run rows read

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PROFILE = RESULTS / "smax-smac-profile"
STEP = 500_000
WIN = "test_win_rate"
PAPER = {("qmix", "2s3z"): "91 %", ("qmix", "3s5z"): "62 %", ("sem-qmix", "2s3z"): "91 %", ("sem-qmix", "3s5z"): "84 %"}
"""The paper's win rates at 0.5M on StarCraft II (its appendix tables)."""
BASES = ("vdn", "qmix", "qplex", "cw-qmix")


def linked(paths: Sequence[Path], *, env_args_in_labels: bool = False) -> list[RunSeries]:
    """The runs of ``paths`` (run directories), read from one folder of links as a report over them reads them."""
    with tempfile.TemporaryDirectory() as folder:
        for path in paths:
            (Path(folder) / path.name).symlink_to(path.resolve())
        runs = load_runs(folder, env_args_in_labels=env_args_in_labels)
        for run in runs:
            run.run_dir = (Path(folder) / run.run_dir.name).resolve()  # the links go with the folder
    return runs


def cell(estimate: Estimate) -> str:
    return f"{estimate.value:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]"


def iqms(runs: Sequence[RunSeries], score: Callable[[RunSeries], float], step: int | str, *,
         seed_counts: bool = True) -> dict[tuple[str, str], str]:
    """(env, label) -> 'IQM [CI]' over the runs' seeds; with ``seed_counts``, the seed count after it when not 5."""
    return {(a.env, a.algo): cell(a.iqm) + ("" if a.seeds == 5 or not seed_counts
                                            else f" ({a.seeds} seed{'' if a.seeds == 1 else 's'})")
            for a in aggregates(runs, score, step)}


def levels() -> str:
    """QMIX, SEM-QMIX, ``mc-qmix`` and TD(lambda) QMIX at 0.5M on SMAC's rules, and the bases on SMAX's own rules."""
    profile = linked(sorted(p for p in PROFILE.iterdir() if "_no-" not in p.name))
    on_smac = iqms(profile, metric_at(WIN, STEP), STEP)
    own: dict[tuple[str, str], str] = {}
    for map_name in ("2s3z", "3s5z"):
        own.update(iqms(load_runs(RESULTS / f"smax-{map_name}-paper-runtime"), metric_at(WIN, STEP), STEP))
    rows = [("QMIX", on_smac, "qmix", " profile=smac"), ("SEM-QMIX", on_smac, "sem-qmix", " profile=smac"),
            ("`mc-qmix`: SEM's loss, the episode's own return for E, no table", on_smac, "mc-qmix", " profile=smac"),
            ("QMIX with TD(lambda) 0.6, no memory", on_smac, "qmix td_lambda=0.6", " profile=smac"),
            ("QMIX on SMAX's own rules (`--env-arg profile=smax`)", own, "qmix", ""),
            ("SEM-QMIX on SMAX's own rules", own, "sem-qmix", "")]
    lines = ["| IQM [95 % CI] of the test win rate at 0.5M env steps, the paper's runtime, SMAC's rules unless "
             "named, 5 seeds unless named | 2s3z | 3s5z | the paper on StarCraft II (2s3z / 3s5z) |",
             "|---|---|---|---|"]
    for label, table, algo, env_args in rows:
        cells = [table.get((f"smax:{m}{env_args}", algo), "not run") for m in ("2s3z", "3s5z")]
        paper = (f"{PAPER[(algo, '2s3z')]} / {PAPER[(algo, '3s5z')]}"
                 if (algo, "2s3z") in PAPER and env_args else "")
        lines.append(f"| {label} | {' | '.join(cells)} | {paper} |")
    return "\n".join(lines)


PARTS = {"reward": "SMAC's reward", "fixed_starts": "fixed starts", "attack": "SMAC's attack rule",
         "time_limit": "SMAC's time limit", "obs": "SMAC's observation features", "state": "SMAC's state",
         "walls": "SMAC's map edge", "step_time": "SMAC's step time"}
"""The profile's parts, in the order the parts table lists them, named as the page names them."""


def curve_means(runs: Sequence[RunSeries]) -> str:
    """Each run's mean test win rate to 0.5M, in seed order ('0.02, 0.07, 0.22'), or their range from 5 runs."""
    means = [statistics.mean(value for _, value in curve(run.run_dir, WIN, STEP))
             for run in sorted(runs, key=lambda r: r.run_dir.name)]
    if len(means) >= 5:
        return f"{min(means):.2f}-{max(means):.2f}"
    return ", ".join(f"{mean:.2f}" for mean in means)


def parts() -> str:
    """QMIX on 2s3z with SMAC's rules, each part set back to SMAX's in turn, against the whole profile."""
    runs = linked(sorted(PROFILE.glob("smax_2s3z_qmix_profile-smac_seed*"))
                  + sorted(PROFILE.glob("smax_2s3z_qmix_profile-smac_no-*")), env_args_in_labels=True)
    at_step = {algo: text for (_, algo), text in iqms(runs, metric_at(WIN, STEP), STEP, seed_counts=False).items()}
    absolute = {algo: text for (_, algo), text in iqms(runs, absolute_score(WIN), "absolute", seed_counts=False).items()}
    better = {i.algo: cell(i.probability) for i in improvements(runs, absolute_score(WIN), "absolute")
              if i.base == "qmix profile=smac"}
    by_label: dict[str, list[RunSeries]] = {}
    for run in runs:
        by_label.setdefault(run.algo, []).append(run)
    own = load_runs(RESULTS / "smax-2s3z-paper-runtime")
    own_qmix = [run for run in own if run.algo == "qmix"]
    lines = ["| 2s3z QMIX, 0.5M | seeds | curve means to 500k | IQM at 500k [95 % CI] | absolute IQM [95 % CI] "
             "| P(X > whole profile), absolute [95 % CI] |", "|---|---|---|---|---|---|",
             f"| SMAX's own rules (the paper's runtime) | {len(own_qmix)} | {curve_means(own_qmix)} "
             f"| {iqms(own, metric_at(WIN, STEP), STEP)[('smax:2s3z', 'qmix')]} "
             f"| {iqms(own, absolute_score(WIN), 'absolute')[('smax:2s3z', 'qmix')]} | |",
             f"| whole profile | {len(by_label['qmix profile=smac'])} | {curve_means(by_label['qmix profile=smac'])} "
             f"| {at_step['qmix profile=smac']} | {absolute['qmix profile=smac']} | |"]
    for part, name in PARTS.items():
        label = next((label for label in by_label if f" {part}=" in f" {label}"), None)
        if label is None:
            continue
        lines.append(f"| without {name} | {len(by_label[label])} | {curve_means(by_label[label])} "
                     f"| {at_step[label]} | {absolute[label]} | {better[label]} |")
    return "\n".join(lines)


def bases() -> str:
    """The four bases with and without SEM on SMAX's own rules in the former runtime (80 runs)."""
    runs = linked(sorted(p for name in ("smax-2s3z", "smax-2s3z-grid", "smax-3s5z", "smax-3s5z-grid")
                         for p in (RESULTS / name).iterdir()))
    at_step = iqms(runs, metric_at(WIN, STEP), STEP)
    better = {(i.env, i.algo): cell(i.probability) for i in improvements(runs, metric_at(WIN, STEP), STEP)
              if i.base == i.algo.removeprefix("sem-")}
    lines = ["| SMAX's own rules, former runtime, 0.5M, 5 seeds: IQM [95 % CI] | 2s3z: X | SEM-X | P(SEM-X > X) "
             "| 3s5z: X | SEM-X | P(SEM-X > X) |", "|---|---|---|---|---|---|---|"]
    for base in BASES:
        cells = []
        for map_name in ("2s3z", "3s5z"):
            env = f"smax:{map_name}"
            cells += [at_step[(env, base)], at_step[(env, f"sem-{base}")], better[(env, f"sem-{base}")]]
        lines.append(f"| {base.upper()} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _score(step: int | str) -> Callable[[RunSeries], float]:
    """A run's test win rate at ``step``, or its absolute metric for ``step`` 'absolute'."""
    return absolute_score(WIN) if step == "absolute" else metric_at(WIN, int(step))


def _at(runs: Sequence[RunSeries], step: int | str) -> dict[tuple[str, str], Estimate]:
    """(env, label) -> the IQM estimate at ``step`` (or the absolute metric)."""
    return {(a.env, a.algo): a.iqm for a in aggregates(runs, _score(step), step)}


def _better(runs: Sequence[RunSeries], step: int | str,
            extra: Sequence[tuple[str, str]] = ()) -> dict[tuple[str, str, str], Estimate]:
    """(env, X, Y) -> P(X > Y) at ``step`` (or on the absolute metric), for the report's pairs and ``extra``."""
    return {(i.env, i.algo, i.base): i.probability for i in improvements(runs, _score(step), step, extra=extra)}


def _table_1(runs: Sequence[RunSeries]) -> list[Table1Row]:
    """`semzoo report`'s Table 1 rows at 0.5M over ``runs``."""
    return [r for r in table_1_rows(paper_cells(score_table(runs, [STEP]), WIN)) if r.step == STEP]


def _range(values: Sequence[float], form: str) -> str:
    return f"{min(values):{form}}-{max(values):{form}}"


def _cross_hits(runs: Sequence[RunSeries], env: str, algo: str) -> tuple[float, float, float]:
    """(median, low, high) over runs of the cross-hit rate at each run's last row (`semzoo report`'s memory table)."""
    use = next(u for u in memory_use(runs) if (u.env, u.algo) == (env, algo))
    return use.figures["memory_cross_hit_rate"]


def _target_means(runs: Sequence[RunSeries], env: str, algo: str, metric: str, step: int) -> float:
    """The mean over ``algo``'s runs on ``env`` of ``metric`` (a batch mean) at each run's log row nearest ``step``."""
    values = []
    for run in runs:
        if (run.env, run.algo) == (env, algo):
            steps, rows = run.metrics[metric]
            values.append(float(rows[int(np.argmin(np.abs(steps - step)))]))
    return statistics.fmean(values)


NUMBER_WORDS = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def _without_own_entry(run: RunSeries) -> int:
    """Env steps that got no table entry of their own by the run's last row: env steps - entries - pending steps
    (a write that met an existing entry, or an entry evicted)."""
    steps, entries = run.metrics["memory_entries"]
    _, pending = run.metrics["memory_pending_steps"]
    return int(steps[-1] - entries[-1] - pending[-1])


def _page_table(page: Path, header: str) -> list[list[str]]:
    """The rows of the table under the header line that starts with ``header`` on ``page``, as lists of cells."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


CONTROL_TABLE = (ROOT / "docs" / "studies" / "two-step.md", "| learner | `--algo` |")
"""docs/studies/two-step.md's positive-control table on the two-step game (tests/test_two_step_memory.py retrains it): the page
and the start of its header line, for ``_page_table``."""


def _two_step_control() -> dict[str, tuple[int, int]]:
    """The positive-control table (``CONTROL_TABLE``): learner -> (seeds that reach 8, seeds)."""
    rows = _page_table(*CONTROL_TABLE)
    out = {}
    for row in rows:
        reached, _, seeds = row[5].partition("/")
        out[row[0]] = (int(reached), int(seeds))
    return out


def _recurring_with_fixed_starts() -> list[float]:
    """The share (%) of replayed steps whose state another episode reached, per fixed-start run of sparse 3m: the
    study table's last column (``scripts/state_repeats.py`` on each run's 500k checkpoint, which is not kept)."""
    rows = _page_table(ROOT / "docs" / "studies" / "what-the-table-adds.md", "| 3m, `reward=deaths` | seed | starts |")
    return [float(row[-1].split()[0]) for row in rows if row[2] == "fixed"]


def _swings(runs: Sequence[RunSeries]) -> str:
    """How the greedy curves of ``runs`` swing: the first evaluation at 1.00, the lowest after it, and how many win
    1.00 again after that low."""
    first, lowest, back = [], [], 0
    for run in runs:
        points = curve(run.run_dir, WIN, STEP)
        i = next(i for i, (_, value) in enumerate(points) if value >= 1.0)
        later = [value for _, value in points[i + 1:]]
        low = min(later)
        first.append(points[i][0])
        lowest.append(low)
        back += any(value >= 1.0 for value in later[later.index(low) + 1:])
    again = "each wins 1.00 again" if back == len(runs) else f"{NUMBER_WORDS[back]} of {NUMBER_WORDS[len(runs)]} win 1.00 again"
    low_text = f"{lowest[0]:.2f}" if len(set(lowest)) == 1 else _range(lowest, ".2f")
    first_k = [round(step, -4) // 1000 for step in first]
    return (f"every seed wins 1.00 at an evaluation by {min(first_k)}-{max(first_k)}k, then falls to {low_text}, "
            f"and {again}")


def figures() -> list[tuple[str, str]]:
    """The findings page's figures outside its tables: (what, the text the page holds), each from the kept runs."""
    f = "{:.3f}".format
    profile = linked(sorted(p for p in PROFILE.iterdir() if "_no-" not in p.name))
    two, three, own2 = "smax:2s3z profile=smac", "smax:3s5z profile=smac", "smax:2s3z"
    at_step, absolute = _at(profile, STEP), _at(profile, "absolute")
    better, better_abs = _better(profile, STEP), _better(profile, "absolute")
    td_better = _better(profile, STEP, extra=[("qmix td_lambda=0.6", "sem-qmix")])
    bases_runs = linked(sorted(p for name in ("smax-2s3z", "smax-2s3z-grid", "smax-3s5z", "smax-3s5z-grid")
                               for p in (RESULTS / name).iterdir()))
    bases_at = _at(bases_runs, STEP)
    sem_over_base = [i.value for (env, x, y), i in _better(bases_runs, STEP).items()
                     if env != ALL_ENVS and y == x.removeprefix("sem-") and x != y]
    table_1 = _table_1(bases_runs)
    authors = _at(load_runs(RESULTS / "smax-3s5z-authors"), STEP)  # QPLEX in its authors' SMAC setup
    sensitivity = linked(sorted((RESULTS / "smax-2s3z-sensitivity").iterdir())  # with QMIX and SEM-QMIX seeds 0-2
                         + [RESULTS / "smax-2s3z" / f"smax_2s3z_{algo}_seed{seed}" for algo in ("qmix", "sem-qmix")
                            for seed in range(3)])
    quarter = _at(sensitivity, 250_000)
    sens_end = _at(sensitivity, STEP)
    own_qmix = [run for run in load_runs(RESULTS / "smax-2s3z") if run.algo == "qmix"]
    dip = [statistics.fmean(run.value_at(WIN, step) for run in own_qmix) for step in range(150_000, 300_001, 50_000)]
    cross_2, cross_3 = _cross_hits(profile, two, "sem-qmix"), _cross_hits(profile, three, "sem-qmix")
    ablation = _at(load_runs(RESULTS / "smax-2s3z-ablation"), STEP)
    other = linked(sorted((RESULTS / "smax-2s3z-episodic").iterdir()) + sorted((RESULTS / "smax-2s3z").glob("*_qmix_seed*"))
                   + sorted((RESULTS / "smax-2s3z").glob("*_sem-qmix_seed*")))
    other_at, other_better = _at(other, STEP), _better(other, STEP)
    lagma = linked(sorted((RESULTS / "smax-2s3z-lagma").iterdir()) + sorted((RESULTS / "smax-2s3z-paper-runtime").iterdir()))
    lagma_at, lagma_better = _at(lagma, STEP), _better(lagma, STEP)
    part_runs = linked(sorted(PROFILE.glob("smax_2s3z_qmix_profile-smac_no-*")), env_args_in_labels=True)
    part_absolute = {next(a for a in algo.split()[1:] if not a.startswith("profile=")).partition("=")[0]: estimate.value
                     for (_, algo), estimate in _at(part_runs, "absolute").items()}  # 'qmix obs=smax profile=smac'
    own_absolute = _at(load_runs(RESULTS / "smax-2s3z-paper-runtime"), "absolute")[(own2, "qmix")].value
    step_time = [statistics.mean(value for _, value in curve(run.run_dir, WIN, STEP))
                 for run in sorted(part_runs, key=lambda r: r.run_dir.name) if " step_time=" in run.algo]
    runtime = linked(sorted(p for m in ("2s3z", "3s5z") for p in (RESULTS / f"smax-{m}-paper-runtime").iterdir()))
    qmix_means = {name: next(percent(r.here[0]) for r in rows if r.base == "qmix")
                  for name, rows in (("former", table_1), ("paper", _table_1(runtime)))}
    paper_qmix = next(percent(r.paper_same_maps[0]) for r in table_1 if r.base == "qmix")
    sparse_runs = load_runs(RESULTS / "smax-3m-sparse")
    sparse = _at(sparse_runs, STEP)
    random_starts, fixed_starts = "smax:3m reward=deaths", "smax:3m fixed_starts=true reward=deaths"
    sparse_better = _better(sparse_runs, STEP, extra=[("sem-qmix", "mc-qmix")])
    recurring = _recurring_with_fixed_starts()
    own_sem = [run for m in ("2s3z", "3s5z") for run in load_runs(RESULTS / f"smax-{m}") if run.algo == "sem-qmix"]
    unmerged = [_without_own_entry(run) for run in own_sem]
    fixed_merge = next(u for u in memory_use(load_runs(RESULTS / "smax-2s3z-ablation"))
                       if u.algo == "sem-qmix" and "fixed_starts=true" in u.env).figures["memory_merge_rate"]
    control = _two_step_control()
    others = {control[name][0] for name in control if name != "SEM-VDN" and name != "VDN"}
    lagma_runs = [run for run in lagma if run.algo == "lagma-qmix"]
    codes = [np.asarray(run.metrics["lagma_codes_used"][1]) for run in lagma_runs]
    spread = [c[c > 1] for c in codes if c.max() > 1]
    n_codes = {run.config.settings("lagma").lagma_n_codes for run in lagma_runs if run.config is not None}
    smac_qmix = [run for run in profile if (run.env, run.algo) == (two, "qmix")]
    return [
        ("SEM-QMIX's steps without a table entry of their own at 0.5M, SMAX's own rules, both maps",
         f"{min(unmerged):,}-{max(unmerged):,} of 500k for {len(unmerged)} SEM-QMIX runs"),
        ("SEM's merge rate with fixed starts, 2s3z, SMAX's own rules",
         f"merges {round(100 * fixed_merge[1])}-{round(100 * fixed_merge[2])} % of its writes"),
        ("the two-step game's positive control (docs/studies/two-step.md's table)",
         f"SEM-VDN finds the optimum on {control['SEM-VDN'][0]} of {control['SEM-VDN'][1]} seeds, and the same loss "
         "with the episode's own return (`mc-vdn`), or VDN with TD(lambda), on "
         + (NUMBER_WORDS[0] if others == {0} else "/".join(map(str, sorted(others))))),
        ("sparse 3m with fixed starts: replayed steps whose state recurs in another episode; P(SEM-QMIX > mc-qmix)",
         f"where {round(min(recurring))}-{round(max(recurring))} % of the replayed states recur in another episode, "
         f"no memory beats the episode's own return (P(SEM-QMIX > `mc-qmix`) "
         f"{sparse_better[(fixed_starts, 'sem-qmix', 'mc-qmix')].value:.2f} at 500k)"),
        ("LAGMA-QMIX's codebook on 2s3z", f"its codebook stayed on one code on {NUMBER_WORDS[len(codes) - len(spread)]} "
         f"seeds and used {min(int(c.min()) for c in spread)}-{max(int(c.max()) for c in spread)} of its "
         f"{n_codes.pop()} codes on the other {NUMBER_WORDS[len(spread)]}"),
        ("QMIX's greedy curves on 2s3z, SMAC's rules", _swings(smac_qmix)),
        ("QMIX's mean win rate at 0.5M over 2s3z and 3s5z in the paper's runtime and the former, SMAX's own rules",
         f"is {qmix_means['paper']} % in " + ("either runtime" if qmix_means["paper"] == qmix_means["former"]
                                               else f"the paper's runtime and {qmix_means['former']} % in the former")
         + f" against the paper's {paper_qmix} %"),
        ("sparse-reward 3m with random starts, IQM at 0.5M: SEM-QMIX, QMIX, mc-qmix",
         f"(IQM {sparse[(random_starts, 'sem-qmix')].value:.2f} at 500k against QMIX's "
         f"{sparse[(random_starts, 'qmix')].value:.2f} and `mc-qmix`'s {sparse[(random_starts, 'mc-qmix')].value:.2f})"),
        ("QMIX's absolute IQM without SMAC's reward and without fixed starts, against SMAX's own rules",
         f"absolute {f(part_absolute['reward'])} and {f(part_absolute['fixed_starts'])} against {f(own_absolute)}"),
        ("the other six parts' absolute IQM", "six parts leave it at " + _range(
            [v for part, v in part_absolute.items() if part not in ("reward", "fixed_starts")], ".3f")),
        ("QMIX's curve means without SMAC's step time",
         "curve means " + ", ".join(f"{v:.2f}" for v in step_time[:-1]) + f" and {step_time[-1]:.2f}"),
        ("mc-qmix over QMIX on 3s5z at 0.5M, SMAC's rules",
         f"beats QMIX at 500k (P = {f(better[(three, 'mc-qmix', 'qmix')].value)})"),
        ("QMIX's absolute IQM on SMAC's rules, 2s3z and 3s5z",
         f"absolute {f(absolute[(two, 'qmix')].value)} and {f(absolute[(three, 'qmix')].value)}"),
        ("P(SEM-QMIX > QMIX) at 0.5M on SMAC's rules",
         f"P(SEM-QMIX > QMIX) {f(better[(two, 'sem-qmix', 'qmix')].value)} (2s3z) and "
         f"{f(better[(three, 'sem-qmix', 'qmix')].value)} (3s5z)"),
        ("P(SEM-X > X) at 0.5M over the four bases and two maps",
         f"P(SEM-X > X) {_range(sem_over_base, '.2f')} at 0.5M"),
        ("Table 1's layout: mean over seeds and maps at 0.5M, X -> SEM-X in %",
         ", ".join(f"{r.base.upper()} {percent(r.here[0])} -> {percent(r.here[1])}" for r in table_1)),
        ("the paper's figures for the same two maps",
         ", ".join(f"{percent(r.paper_same_maps[0])} -> {percent(r.paper_same_maps[1])}" for r in table_1)),
        ("QPLEX on 3s5z at 0.5M, semzoo's defaults and its authors' setup; QMIX and CW-QMIX",
         f"QPLEX {cell(bases_at[('smax:3s5z', 'qplex')])} (defaults) and "
         f"{cell(authors[('smax:3s5z', 'qplex')])} (authors' setup) against QMIX's "
         f"{f(bases_at[('smax:3s5z', 'qmix')].value)} and CW-QMIX's {f(bases_at[('smax:3s5z', 'cw-qmix')].value)}"),
        ("SEM-QMIX's cross-hit rate on SMAC's rules, both maps, in %",
         f"another episode in {100 * min(cross_3[1], cross_2[1]):.1f}-{100 * max(cross_3[2], cross_2[2]):.1f} %"),
        ("lambda 0.05-0.5 at 250k against QMIX, SEM-QMIX on 2s3z",
         "lambda 0.05-0.5 " + _range([quarter[(own2, f"sem-qmix lam={lam}")].value for lam in ("0.05", "0.2", "0.5")]
                                     + [quarter[(own2, "sem-qmix")].value], ".3f")  # lambda 0.1: plain SEM-QMIX
         + f" against QMIX's {cell(quarter[(own2, 'qmix')])}"),
        ("lambda 1 at 250k", f"lambda 1: {cell(quarter[(own2, 'sem-qmix lam=1')])}"),
        ("table sizes 1e4, 1e6, 1e5 at 0.5M",
         f"1e4: {cell(sens_end[(own2, 'sem-qmix capacity=10000')])} against 1e6's {cell(sens_end[(own2, 'sem-qmix')])}; "
         f"1e5 as good as 1e6 ({cell(sens_end[(own2, 'sem-qmix capacity=100000')])})"),
        ("QMIX's mean test win rate at 150k-300k, 2s3z, SMAX's own rules (former runtime)",
         "QMIX's mean win rate " + ", ".join(f"{v:.2f}" for v in dip)),
        ("SEM-QMIX's E and y at 100k and 250k, 2s3z, SMAX's own rules (former runtime)",
         f"E above y early ({_target_means(bases_runs, own2, 'sem-qmix', 'target_e', 100_000):.3f} against "
         f"{_target_means(bases_runs, own2, 'sem-qmix', 'target_y', 100_000):.3f} at 100k), level by 250k "
         f"({_target_means(bases_runs, own2, 'sem-qmix', 'target_e', 250_000):.3f}, "
         f"{_target_means(bases_runs, own2, 'sem-qmix', 'target_y', 250_000):.3f})"),
        ("SEM-QMIX's cross-hit rate on SMAC's rules, per map",
         f"cross-hit rate is {cross_2[1]:.3g}-{cross_2[2]:.3g} (2s3z) and {cross_3[1]:.3g}-{cross_3[2]:.3g} (3s5z)"),
        ("TD(lambda) QMIX against SEM-QMIX, 2s3z at 0.5M",
         f"reaches {f(ablation[(own2, 'qmix td_lambda=0.6')].value)} (SMAX's own rules, 5 seeds) and "
         f"{f(at_step[(two, 'qmix td_lambda=0.6')].value)} (SMAC's, 3 seeds) against SEM-QMIX's "
         f"{f(bases_at[(own2, 'sem-qmix')].value)} and {f(at_step[(two, 'sem-qmix')].value)}"),
        ("TD(lambda) QMIX on 3s5z at 0.5M, SMAC's rules, between QMIX and SEM-QMIX",
         f"IQM {f(at_step[(three, 'qmix td_lambda=0.6')].value)} at 500k, between QMIX's "
         f"{f(at_step[(three, 'qmix')].value)} and SEM-QMIX's {f(at_step[(three, 'sem-qmix')].value)} "
         f"(P(TD(lambda) QMIX > SEM-QMIX) {f(td_better[(three, 'qmix td_lambda=0.6', 'sem-qmix')].value)})"),
        ("mc-qmix against SEM-QMIX on 3s5z, SMAC's rules",
         f"P(`mc-qmix` > SEM-QMIX) {f(better[(three, 'mc-qmix', 'sem-qmix')].value)} at 500k, "
         f"{f(better_abs[(three, 'mc-qmix', 'sem-qmix')].value)} on the absolute metric, "
         f"{f(absolute[(three, 'mc-qmix')].value)} against {f(absolute[(three, 'sem-qmix')].value)}"),
        ("EMC-QMIX on 2s3z", f"{cell(other_at[(own2, 'emc-qmix')])} at 500k; P(EMC-QMIX > SEM-QMIX) "
         f"{f(other_better[(own2, 'emc-qmix', 'sem-qmix')].value)}"),
        ("EMC-QMIX over QMIX", f"(P = {f(other_better[(own2, 'emc-qmix', 'qmix')].value)})"),
        ("EMU-QMIX on 2s3z", f"({cell(other_at[(own2, 'emu-qmix')])}; P(EMU-QMIX > QMIX) "
         f"{f(other_better[(own2, 'emu-qmix', 'qmix')].value)})"),
        ("LAGMA-QMIX on 2s3z, the paper's runtime",
         f"({cell(lagma_at[(own2, 'lagma-qmix')])} against {f(lagma_at[(own2, 'qmix')].value)}; P = "
         f"{lagma_better[(own2, 'lagma-qmix', 'qmix')].value:.2f})"),
        ("LAGMA-QMIX below SEM-QMIX", f"SEM-QMIX (P = {lagma_better[(own2, 'lagma-qmix', 'sem-qmix')].value:.2f})"),
    ]


TABLES = {"levels": levels, "parts": parts, "bases": bases}
PAGES = {"levels": ("docs/results.md", "README.md"), "parts": ("docs/results.md", "docs/studies/smac-profile.md"),
         "bases": ("docs/results.md",)}
"""The pages that hold each table, relative to the repository."""


def paste(table: str, page: Path) -> bool:
    """Replace the table of ``page`` whose header line is ``table``'s with ``table``; False when it has none."""
    lines = page.read_text().splitlines()
    header = table.splitlines()[0]
    if header not in lines:
        return False
    start = lines.index(header)
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    page.write_text("\n".join([*lines[:start], *table.splitlines(), *lines[end:]]) + "\n")
    return True


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", metavar="TABLE", help=f"the tables to print: {', '.join(TABLES)} (all by default)")
    parser.add_argument("--paste", action="store_true", help="write each table into the pages that hold it")
    parser.add_argument("--figures", action="store_true", help="print the figures of the claims and the prose instead")
    args = parser.parse_args(argv)
    if args.figures:
        for what, text in figures():
            sys.stdout.write(f"{what}:\n    {text}\n")
        return
    unknown = [name for name in args.tables if name not in TABLES]
    if unknown:
        parser.error(f"unknown table {unknown[0]!r}: expected one of {', '.join(TABLES)}")
    for name in args.tables or TABLES:
        table = TABLES[name]()
        if not args.paste:
            sys.stdout.write(table + "\n\n")
            continue
        for page in PAGES[name]:
            if not paste(table, ROOT / page):
                raise SystemExit(f"{page} holds no table headed {table.splitlines()[0]!r}: paste it there once by hand")
            sys.stdout.write(f"{name} -> {page}\n")


if __name__ == "__main__":
    main()
