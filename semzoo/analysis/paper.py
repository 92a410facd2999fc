"""The paper's own numbers, to set beside a recomputed score table (``semzoo report``).

SEM's paper reports, per SMAC map, the mean test win rate over its seeds at 0.25M and 0.5M env steps for
eight methods (appendix tables "The mean test battle won P^0.25M / P^0.5M ... on eight maps of SMAC", in
``shared/paper/sem.tex``), and Table 1's mean and median over those eight maps. Its WQMIX is the centrally
weighted one (its footnote), which semzoo calls ``cw-qmix``.

Only cells that can be compared are set side by side: the same map (a ``smax:<map>`` or ``smac:<map>`` env),
the same algorithm id at the paper's defaults (a label with settings off the defaults, such as a lambda
sweep's, is another method), the same step, and the win rate. The paper ran its baselines from their authors'
code, so a run of the same id in its authors' SMAC setup (``--preset authors-smac``, labelled
``qplex preset=authors-smac``) compares too, as its own setup: X and SEM-X pair within a setup, never across.
The paper ran StarCraft II; SMAX is another simulator with its own unit stats, reward and observations (docs/smac.md), so a level here says nothing
about a level there: what can agree is the direction, whether SEM-X is ahead of X on that map and step.
That is what ``direction`` reads, for the paper's numbers and for the recomputed ones alike.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from semzoo.analysis.report import SUMMARY_ENVS, TableRow
from semzoo.runfiles import PRESET_KEY, setting_text

PAPER_METRIC = "test_win_rate"
SMAC_FAMILIES = ("smax", "smac")
"""Env families whose task is a SMAC map name (SMAX runs the maps without StarCraft; smac: is StarCraft II)."""

PAPER_ALGOS = ("vdn", "sem-vdn", "qmix", "sem-qmix", "qplex", "sem-qplex", "cw-qmix", "sem-cw-qmix")
PAPER_BASES = tuple(a for a in PAPER_ALGOS if not a.startswith("sem-"))
"""The four value-decomposition baselines X that the paper pairs with SEM-X."""
PAPER_SETUPS = ("", setting_text(PRESET_KEY, "authors-smac"))
"""The label suffixes (``runfiles.run_labels``) of runs that compare with the paper's: semzoo's defaults, and the
baselines' SMAC setup as their authors ran it (the code the paper ran), in the order the tables show them."""
PAPER_MAPS = ("1c3s5z", "2s_vs_1sc", "2s3z", "3s5z", "27m_vs_30m", "2c_vs_64zg", "MMM2", "bane_vs_bane")

_WIN_PERCENT = {
    # step -> algo -> win rate in % per map, in PAPER_MAPS order (sem.tex, appendix tables tb_0.25M, tb_0.5M)
    250_000: {
        "vdn": (1, 66, 53, 1, 0, 0, 0, 85),
        "sem-vdn": (25, 66, 71, 24, 0, 0, 0, 99),
        "qmix": (34, 7, 61, 30, 0, 0, 0, 32),
        "sem-qmix": (70, 28, 89, 66, 0, 0, 0, 99),
        "qplex": (61, 99, 83, 31, 0, 0, 0, 87),
        "sem-qplex": (60, 77, 90, 77, 0, 0, 0, 99),
        "cw-qmix": (17, 63, 44, 23, 0, 0, 0, 61),
        "sem-cw-qmix": (64, 17, 89, 63, 0, 0, 3, 100),
    },
    500_000: {
        "vdn": (14, 94, 81, 14, 0, 0, 0, 60),
        "sem-vdn": (67, 100, 89, 61, 1, 21, 0, 98),
        "qmix": (61, 31, 91, 62, 5, 0, 1, 24),
        "sem-qmix": (83, 69, 91, 84, 6, 0, 6, 100),
        "qplex": (87, 99, 98, 80, 4, 1, 0, 97),
        "sem-qplex": (87, 98, 99, 92, 14, 17, 0, 100),
        "cw-qmix": (48, 88, 78, 49, 0, 2, 0, 99),
        "sem-cw-qmix": (72, 19, 95, 75, 5, 35, 15, 100),
    },
}

PAPER_WIN_RATE: dict[tuple[str, str, int], float] = {
    (task, algo, step): win_percent / 100
    for step, by_algo in _WIN_PERCENT.items()
    for algo, row in by_algo.items()
    for task, win_percent in zip(PAPER_MAPS, row, strict=True)
}
"""(map, algo, step) -> the paper's mean test win rate in [0, 1]."""

PAPER_TABLE_1: dict[tuple[str, int], tuple[int, int, int, int]] = {
    # (base, step) -> mean w/o, mean w/, median w/o, median w/ in % over the eight maps (sem.tex, Table 1,
    # "tb_results"; its WQMIX row is CW-QMIX). The appendix tables above give these to within a point: the
    # paper computed them before rounding each map's number.
    ("vdn", 250_000): (26, 36, 1, 25), ("vdn", 500_000): (33, 55, 14, 64),
    ("qmix", 250_000): (21, 44, 18, 47), ("qmix", 500_000): (35, 55, 28, 76),
    ("qplex", 250_000): (45, 50, 46, 69), ("qplex", 500_000): (58, 63, 84, 90),
    ("cw-qmix", 250_000): (26, 42, 20, 40), ("cw-qmix", 500_000): (46, 52, 49, 54),
}


@dataclass(frozen=True)
class PaperCell:
    """One (map, algorithm, step) that the paper reports and a score table recomputed."""

    env: str
    task: str
    algo: str
    """The algorithm id (the label without its setup)."""
    step: int
    paper: float
    here: float
    """The mean over seeds of the recomputed table."""
    seeds: int
    """Seeds that reached the step (at least 1)."""
    setup: str = ""
    """'' for semzoo's defaults, else the label's suffix naming the setup (``PAPER_SETUPS``)."""

    @property
    def label(self) -> str:
        """The run label the cell comes from (``qplex preset=authors-smac``)."""
        return _label(self.algo, self.setup)


def paper_cells(rows: Sequence[TableRow], metric: str) -> list[PaperCell]:
    """The cells of ``score_table`` rows that the paper also reports (none for another metric)."""
    if metric != PAPER_METRIC:
        return []
    cells = []
    for row in rows:
        if row.env in SUMMARY_ENVS or row.seeds == 0:  # score_table has a row for every algo on every env
            continue
        family, _, task = row.env.partition(":")
        algo, _, setup = row.algo.partition(" ")
        paper = PAPER_WIN_RATE.get((task, algo, row.step))
        if family in SMAC_FAMILIES and paper is not None and setup in PAPER_SETUPS:
            cells.append(PaperCell(env=row.env, task=task, algo=algo, step=row.step, paper=paper,
                                   here=row.value, seeds=row.seeds, setup=setup))
    return cells


def _label(algo: str, setup: str) -> str:
    return f"{algo} {setup}" if setup else algo


PaperPair = tuple[PaperCell | None, PaperCell | None]
"""X's cell and SEM-X's cell of one setup, map and step; None for a side no run reached."""


class _Pairs:
    """The cells by (env, label, step), and the (setup, base X) rows they can fill, in the tables' order."""

    def __init__(self, cells: Sequence[PaperCell]) -> None:
        self.found = {(c.env, c.label, c.step): c for c in cells}
        setups = {c.setup for c in cells}
        self.methods = [(setup, base) for setup in PAPER_SETUPS if setup in setups for base in PAPER_BASES]

    def pair(self, env: str, setup: str, base: str, step: int) -> PaperPair:
        return (self.found.get((env, _label(base, setup), step)),
                self.found.get((env, _label(f"sem-{base}", setup), step)))


def direction(with_memory: float, base: float) -> str:
    """Whether SEM-X is ahead of X: 'SEM ahead', 'base ahead', 'tie', or 'n/a' where a side is missing."""
    if math.isnan(with_memory) or math.isnan(base):
        return "n/a"
    if with_memory == base:
        return "tie"
    return "SEM ahead" if with_memory > base else "base ahead"


def paper_markdown(cells: Sequence[PaperCell]) -> str:
    """One row per (map, step, base algorithm): X and SEM-X, paper / here, and the direction in each.

    A pair shows when the paper reports both and the runs hold at least one of them; '-' marks a side with
    no run at that step. Win rates in whole %, as the paper writes them (halves round up); 'here' is the
    mean over the seeds counted in brackets. A setup other than the defaults gets its own rows, X named with it.
    """
    pairs = _Pairs(cells)
    lines = ["| map, step | X | X: paper / here | SEM-X: paper / here | SEM-X > X? paper / here |",
             "|---|---|---|---|---|"]
    for env in dict.fromkeys(c.env for c in cells):
        task = env.partition(":")[2]
        for step in sorted({c.step for c in cells if c.env == env}):
            for setup, base in pairs.methods:
                pair = pairs.pair(env, setup, base, step)
                if pair == (None, None):
                    continue
                paper = PAPER_WIN_RATE[(task, base, step)], PAPER_WIN_RATE[(task, f"sem-{base}", step)]
                here = tuple(math.nan if c is None else c.here for c in pair)
                sides = [f"{percent(p)} / {_here(c)}" for p, c in zip(paper, pair, strict=True)]
                lines.append(f"| {env}, {step / 1e6:g}M | {_label(base, setup)} | {sides[0]} | {sides[1]} | "
                             f"{direction(paper[1], paper[0])} / {direction(here[1], here[0])} |")
    return "\n".join(lines)


Table1Cells = tuple[float, float, float, float]
"""Mean of X, mean of SEM-X, median of X, median of SEM-X across maps, as rates in [0, 1]."""


@dataclass(frozen=True)
class Table1Row:
    """Table 1's layout for one base X at one step, over the maps where runs hold both X and SEM-X."""

    family: str
    """``smax`` or ``smac``: maps of the two simulators are never pooled."""
    base: str
    step: int
    maps: tuple[str, ...]
    seeds: tuple[tuple[int, int], ...]
    """Per map, how many seeds of X and of SEM-X reached the step: each side's mean is over its own."""
    here: Table1Cells
    """Across ``maps``, of the mean over seeds per map."""
    paper_same_maps: Table1Cells
    """The paper's appendix numbers across the same maps: what ``here`` compares with."""
    paper: Table1Cells
    """Table 1 as printed: across all eight maps of SMAC."""
    setup: str = ""
    """The runs' setup ('' for semzoo's defaults, ``PAPER_SETUPS``); X and SEM-X share it."""


def table_1_cells(per_map: Sequence[tuple[float, float]]) -> Table1Cells:
    """Table 1's four cells from (X, SEM-X) per map: the mean and the median across the maps of each side."""
    base, with_memory = [p[0] for p in per_map], [p[1] for p in per_map]
    return (statistics.fmean(base), statistics.fmean(with_memory),
            statistics.median(base), statistics.median(with_memory))


def table_1_rows(cells: Sequence[PaperCell]) -> list[Table1Row]:
    """Table 1 recomputed per simulator family, base and step over the maps that have both X and SEM-X runs.

    A map where only one side reached the step is left out of that row (a mean over other maps on each side
    would not compare); the paper's cells over the same maps sit beside, and Table 1's own numbers after them.
    """
    pairs = _Pairs(cells)
    rows = []
    for family in dict.fromkeys(c.env.partition(":")[0] for c in cells):
        envs = list(dict.fromkeys(c.env for c in cells if c.env.startswith(f"{family}:")))
        for step in sorted({c.step for c in cells}):
            for setup, base in pairs.methods:
                both = [(x, sem) for x, sem in (pairs.pair(env, setup, base, step) for env in envs)
                        if x is not None and sem is not None]
                if not both:
                    continue
                maps = tuple(x.task for x, _ in both)
                rows.append(Table1Row(
                    family=family, base=base, step=step, maps=maps, setup=setup,
                    seeds=tuple((x.seeds, sem.seeds) for x, sem in both),
                    here=table_1_cells([(x.here, sem.here) for x, sem in both]),
                    paper_same_maps=table_1_cells([(PAPER_WIN_RATE[(task, base, step)],
                                                    PAPER_WIN_RATE[(task, f"sem-{base}", step)]) for task in maps]),
                    paper=_rates(PAPER_TABLE_1[(base, step)])))
    return rows


def table_1_markdown(rows: Sequence[Table1Row]) -> str:
    """One line per (family, step, base): X -> SEM-X for the mean and the median, here / paper same maps / Table 1."""
    lines = ["| X, step | maps (seeds) | mean X -> SEM-X: here | paper, same maps | Table 1 (8 maps) | "
             "median X -> SEM-X: here | paper, same maps | Table 1 (8 maps) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        maps = ", ".join(f"{m} ({_seed_pair(n)})" for m, n in zip(r.maps, r.seeds, strict=True))
        sources = (r.here, r.paper_same_maps, r.paper)
        cells = [f"{percent(src[i])} -> {percent(src[i + 1])}" for i in (0, 2) for src in sources]
        lines.append(f"| {_label(r.base, r.setup)}, {r.step / 1e6:g}M | {r.family}: {maps} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seed_pair(seeds: tuple[int, int]) -> str:
    """X's and SEM-X's seed counts: one number when they agree, ``x / sem`` when they do not."""
    x, sem = seeds
    return f"{x}" if x == sem else f"{x} / {sem}"


def _rates(percents: tuple[int, int, int, int]) -> Table1Cells:
    mean_x, mean_sem, median_x, median_sem = percents
    return mean_x / 100, mean_sem / 100, median_x / 100, median_sem / 100


def percent(value: float) -> int:
    """A rate in [0, 1] as whole %, halves up (0.125 -> 13; format's round-half-even would write 12)."""
    return math.floor(value * 100 + 0.5)


def _here(cell: PaperCell | None) -> str:
    if cell is None:
        return "-"
    return f"{percent(cell.here)} ({cell.seeds} seed{'' if cell.seeds == 1 else 's'})"


__all__ = ["PAPER_ALGOS", "PAPER_BASES", "PAPER_MAPS", "PAPER_SETUPS", "PAPER_TABLE_1", "PAPER_WIN_RATE", "PaperCell", "Table1Cells", "Table1Row",
           "direction", "paper_cells", "paper_markdown", "percent", "table_1_cells", "table_1_markdown", "table_1_rows"]
