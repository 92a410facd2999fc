"""Print the headline tables of docs/results.md (and the README's result table) from the kept runs under docs/results/.

    python scripts/findings_tables.py            # every table
    python scripts/findings_tables.py levels     # one of: levels, parts, bases
    python scripts/findings_tables.py --paste    # write them into the pages that hold them (PAGES)

Each table is printed as the page holds it, so the page pastes it and ``tests/test_findings_numbers.py`` checks that
the page still does. Figures are rliable's (IQM with a 95 % stratified bootstrap CI, P(X > Y)), as ``semzoo report``
computes them, over the run sets named below; a CI depends on the set it was bootstrapped with, so each table names
its set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from semzoo.analysis.report import RunSeries, load_runs
from semzoo.analysis.statistics import Estimate, absolute_score, aggregates, improvements, metric_at

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
    return {(a.env, a.algo): cell(a.iqm) + ("" if a.seeds == 5 or not seed_counts else f" ({a.seeds} seeds)")
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
    args = parser.parse_args(argv)
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
